"""pytest plugin: kafkalite brokers as fixtures (registered through ``pytest11``).

    def test_orders(kafkalite_broker):
        kafkalite_broker.create_topic("orders", 3)
        producer = Producer({"bootstrap.servers": kafkalite_broker.bootstrap_servers})
        ...
        kafkalite_broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER")
        kafkalite_broker.restart()          # same data, same port

- ``kafkalite_broker``: a broker per test, over a fresh temporary data dir.
- ``kafkalite_session_broker``: one broker for the session; its faults and
  recorders are cleared after each test, and it is started again if a test
  stopped it. Tests share its topics, so give them unique names.

Both are ``broker.testing.BrokerThread`` objects: the broker runs in this
process on its own event loop thread, on an ephemeral port of 127.0.0.1, so
sync and async tests alike can use them (async tests restart it with
``await broker.arestart()``). Settings come from, weakest first, the
``kafkalite_settings`` ini option (``name=value`` lines), then for
``kafkalite_broker`` the ``kafkalite`` marker::

    @pytest.mark.kafkalite({"group.initial.rebalance.delay.ms": 100}, num_partitions=3)
    def test_slow_rebalance(kafkalite_broker): ...

Test brokers default to ``offsets.topic.num.partitions=1`` (it makes start
several times faster; set it back to 50 to mirror Kafka's placement).

- ``kafkalite_secure_broker``: a broker per test with a secured listener and
  generated credentials (``broker.testing.secured``): SASL_SSL with PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER and one user unless the
  ``kafkalite_security`` marker says otherwise (its arguments are
  ``secured``'s). ``kafkalite_secure_broker.security`` holds the client
  settings to match::

    @pytest.mark.kafkalite_security("SASL_PLAINTEXT", mechanisms=["SCRAM-SHA-512"])
    def test_login(kafkalite_secure_broker):
        sec = kafkalite_secure_broker.security
        Producer({"bootstrap.servers": kafkalite_secure_broker.bootstrap_servers, **sec.librdkafka()})

  ``acls=[...]`` and ``super_users=[...]`` in the marker start the broker
  with Kafka's StandardAuthorizer and those bindings (dicts by field name,
  or AclBindings; ``broker.security.testkit.acl_binding``)::

    @pytest.mark.kafkalite_security("SASL_PLAINTEXT", users={"alice": "a", "admin": "b"},
                                    acls=[{"resource_type": "TOPIC", "name": "orders", "operation": "WRITE"}],
                                    super_users=["User:admin"])

  TLS certificates are made with the ``cryptography`` package (in the
  ``certs`` and ``test`` extras). The plain fixtures are unchanged.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addini("kafkalite_settings", "kafkalite broker settings for the kafkalite fixtures, one name=value a line", type="linelist", default=[])
    parser.addini(
        "kafkalite_fail_on_handler_errors",
        "fail a test whose broker raised an exception in a request handler (default true)",
        type="bool",
        default=True,
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "kafkalite(settings=None, **settings): broker settings for the kafkalite_broker fixture")
    config.addinivalue_line(
        "markers",
        "kafkalite_security(protocol='SASL_SSL', mechanisms=..., users=None, client_auth='none', plaintext=False, acls=None, super_users=None): "
        "the secured listener of the kafkalite_secure_broker fixture (broker.testing.secured)",
    )


def _ini_settings(config) -> dict[str, object]:
    from broker.config import parse_assignment

    return dict(parse_assignment(line) for line in config.getini("kafkalite_settings") if line.strip())


def _marker_settings(node) -> dict[str, object]:
    from broker.testing import merge_settings

    layers = []
    for marker in reversed(list(node.iter_markers("kafkalite"))):  # closest marker last, so it wins
        layers += [*marker.args, marker.kwargs]
    return merge_settings(*layers)


def _strict(config) -> bool:
    return bool(config.getini("kafkalite_fail_on_handler_errors"))


@pytest.fixture
def kafkalite_broker(request, tmp_path_factory):
    """A fresh in-process broker for this test (a ``broker.testing.BrokerThread``)."""
    from broker.testing import BrokerThread, merge_settings

    settings = merge_settings(_ini_settings(request.config), _marker_settings(request.node))
    broker = BrokerThread(tmp_path_factory.mktemp("kafkalite"), settings=settings, fail_on_handler_errors=_strict(request.config))
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def _kafkalite_session(request, tmp_path_factory):
    from broker.testing import BrokerThread

    broker = BrokerThread(
        tmp_path_factory.mktemp("kafkalite-session"), settings=_ini_settings(request.config), fail_on_handler_errors=_strict(request.config)
    )
    broker.start()
    yield broker
    broker.close()


@pytest.fixture
def kafkalite_session_broker(_kafkalite_session):
    """The session's shared broker, faults cleared after the test."""
    broker = _kafkalite_session
    if not broker.running:
        broker.start()
    yield broker
    broker.faults.clear()
    broker.check_handler_errors()
    if not broker.running:
        broker.start()


@pytest.fixture
def kafkalite_secure_broker(request, tmp_path_factory):
    """A fresh in-process broker with a secured listener and generated credentials (``.security``)."""
    from broker.testing import BrokerThread, merge_settings, secured

    marker = request.node.get_closest_marker("kafkalite_security")
    args, kwargs = (marker.args, dict(marker.kwargs)) if marker is not None else ((), {})
    kwargs.setdefault("tmp_dir", tmp_path_factory.mktemp("kafkalite-certs"))
    security = secured(*args, **kwargs)
    settings = merge_settings(_ini_settings(request.config), _marker_settings(request.node), security.settings)
    broker = BrokerThread(tmp_path_factory.mktemp("kafkalite"), settings=settings, fail_on_handler_errors=_strict(request.config), acls=security.acls)
    broker.security = security
    broker.start()
    yield broker
    broker.close()


@pytest.fixture
def kafkalite_cluster(request, tmp_path_factory):
    """Start clusters of kafkalite processes: ``kafkalite_cluster(nodes=3, **settings)`` returns a
    started ``broker.multinode.testing.ClusterProcess``, closed after the test.

        def test_failover(kafkalite_cluster):
            cluster = kafkalite_cluster(nodes=3)
            cluster.kill_node(cluster.active)
    """
    from broker.multinode.testing import ClusterProcess

    started = []

    def start(nodes: int = 3, settings: dict | None = None, **more) -> ClusterProcess:
        merged = {**_ini_settings(request.config), **(settings or {}), **more}
        cluster = ClusterProcess(tmp_path_factory.mktemp("kafkalite-cluster") / "data", nodes=nodes, settings=merged)
        started.append(cluster)
        return cluster.start()

    yield start
    for cluster in started:
        cluster.close()
