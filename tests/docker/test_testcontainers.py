"""kafkalite.testcontainers.KafkaliteContainer with the testcontainers package from PyPI,
against the image built from this repository's Dockerfile.

testcontainers' Ryuk reaper is turned off (its image cannot be pulled here); the
containers are removed by the ``with`` blocks.
"""

from __future__ import annotations

import inspect
import json
import time

import pytest
from testcontainers.community.kafka import KafkaContainer
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from kafkalite.testcontainers import KafkaliteContainer

from . import clients
from .harness import LABEL, ROOT


@pytest.fixture
def tc(docker, monkeypatch):
    """testcontainers pointed at the private engine."""
    from testcontainers.core.config import testcontainers_config

    monkeypatch.setenv("DOCKER_HOST", docker.env["DOCKER_HOST"])
    monkeypatch.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
    monkeypatch.setattr(testcontainers_config, "_ryuk_disabled", True, raising=False)
    yield docker


def test_it_has_kafkacontainers_interface():
    assert issubclass(KafkaliteContainer, DockerContainer)
    ours, theirs = inspect.signature(KafkaliteContainer.__init__), inspect.signature(KafkaContainer.__init__)
    assert list(ours.parameters)[:3] == list(theirs.parameters)[:3] == ["self", "image", "port"]
    assert ours.parameters["port"].default == theirs.parameters["port"].default == 9093
    for method in ("get_bootstrap_server", "start", "with_kraft"):
        assert callable(getattr(KafkaliteContainer, method))


def test_start_returns_a_broker_that_answers_at_get_bootstrap_server(tc, kafkalite_image, metrics):
    container = KafkaliteContainer(kafkalite_image).with_kwargs(labels={LABEL.split("=")[0]: LABEL.split("=")[1]})
    t0 = time.monotonic()
    with container as kafka:
        metrics.record("testcontainers_start_s", round(time.monotonic() - t0, 2))
        bootstrap = kafka.get_bootstrap_server()
        assert clients.advertised(bootstrap) == [bootstrap]
        clients.create_topic(bootstrap, "tc", 2)
        sent = [f"tc-{i}" for i in range(20)]
        clients.produce(bootstrap, "tc", sent)
        for protocol in ("classic", "consumer"):
            assert sorted(clients.consume_group(bootstrap, f"tc-{protocol}", protocol, "tc", len(sent))) == sorted(sent)
        name = kafka.get_wrapped_container().name
    assert tc.run("inspect", name, check=False).returncode != 0  # removed


def test_containers_on_its_network_use_the_broker_listener(tc, kafkalite_image, examples_image):
    with Network() as network:
        with KafkaliteContainer(kafkalite_image).with_network(network).with_network_aliases("kafkalite") as kafka:
            out = tc.out(
                "run", "--rm", "--label", LABEL, "--network", network.name,
                "-v", f"{ROOT / 'tests' / 'docker' / 'netclient.py'}:/netclient.py:ro",
                examples_image, "python", "/netclient.py", "selfcheck", "kafkalite:9092", "tc-net", timeout=180,
            )
            assert json.loads(out.splitlines()[-1]) == {"brokers": ["kafkalite:9092"], "classic": True, "consumer": True}
            # and the host still gets its own address
            assert clients.advertised(kafka.get_bootstrap_server()) == [kafka.get_bootstrap_server()]


def test_a_broker_that_cannot_start_fails_fast_with_its_logs(tc, kafkalite_image):
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="exited") as failure:
        with KafkaliteContainer(kafkalite_image).with_env("KAFKALITE_NUM_PARTITIONS", "many"):
            pass
    assert time.monotonic() - t0 < 20
    assert "KAFKALITE_NUM_PARTITIONS" in str(failure.value) or "num_partitions" in str(failure.value).lower(), failure.value


def test_with_sasl_ssl_serves_generated_credentials(tc, kafkalite_image):
    """confluent-kafka produces and consumes over SASL_SSL with what get_client_config() gives; a wrong
    password or a client that does not trust the generated CA is refused."""
    from confluent_kafka import Consumer, KafkaError, Producer

    container = KafkaliteContainer(kafkalite_image).with_sasl_ssl(mechanisms=("SCRAM-SHA-512", "PLAIN"), users={"alice": "alice-tc-pw"})
    with container.with_kwargs(labels={LABEL.split("=")[0]: LABEL.split("=")[1]}) as kafka:
        conf = kafka.get_client_config()
        assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.mechanism"] == "SCRAM-SHA-512"
        assert (conf["sasl.username"], conf["sasl.password"]) == ("alice", "alice-tc-pw")
        assert conf["ssl.ca.location"] == str(kafka.ca_file) and "BEGIN CERTIFICATE" in kafka.ca_file.read_text()
        for mechanism in ("SCRAM-SHA-512", "PLAIN"):
            topic = f"tc-sasl-{mechanism.lower()}"
            p = Producer(kafka.get_client_config(mechanism=mechanism))
            for i in range(5):
                p.produce(topic, f"{mechanism}-{i}".encode(), partition=0)
            assert p.flush(30) == 0
            c = Consumer({**kafka.get_client_config(mechanism=mechanism), "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
            got: list[bytes] = []
            try:
                c.subscribe([topic])
                deadline = time.monotonic() + 30
                while len(got) < 5 and time.monotonic() < deadline:
                    m = c.poll(0.5)
                    if m is not None and m.error() is None:
                        got.append(m.value())
            finally:
                c.close()
            assert got == [f"{mechanism}-{i}".encode() for i in range(5)]
        assert _first_error({**conf, "sasl.password": "wrong"}).code() == KafkaError._AUTHENTICATION
        untrusted = dict(conf)
        del untrusted["ssl.ca.location"]  # the system's CAs only
        # librdkafka reports a refused certificate as _SSL, or as _TRANSPORT when the broker's close wins the race
        refused = _first_error(untrusted, lambda e: e.code() in (KafkaError._SSL, KafkaError._TRANSPORT))
        assert refused.code() == KafkaError._SSL or "certificate verify failed" in refused.str(), refused
        ca = kafka.ca_file
    assert not ca.exists()  # the host's copies of the credentials go with the container


def _first_error(conf: dict, wanted=lambda e: True, timeout: float = 30):
    """The first error a producer with ``conf`` reports while it connects that ``wanted`` accepts."""
    from confluent_kafka import Producer

    errors: list = []
    p = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while not any(map(wanted, errors)) and time.monotonic() < deadline:
        p.poll(0.2)
    assert any(map(wanted, errors)), f"no such error reported: {errors}"
    return next(filter(wanted, errors))
