"""kafkalite in-process, for tests: no child process, an ephemeral port, faults.

Async code runs the broker on its own event loop::

    from broker.testing import Broker

    async with Broker() as broker:               # a fresh temporary data dir
        await broker.create_topic("orders", partitions=3)
        client = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        ...
        broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=1)
        await broker.restart()                   # same data, same port

Synchronous code (confluent-kafka, kafka-python) runs it on a thread of its own::

    from broker.testing import BrokerThread

    with BrokerThread(settings={"group.initial.rebalance.delay.ms": 0}) as broker:
        broker.create_topic("orders", 3)
        Producer({"bootstrap.servers": broker.bootstrap_servers})
        broker.restart()

Settings are any of the broker's (``docs/configuration.md``), by kafkalite name
as keyword arguments (``num_partitions=3``) or by either name in ``settings``;
``KAFKALITE_*`` variables are ignored, so tests do not depend on the shell.
Unless the application configured structlog, the broker logs warnings and
errors to stderr (``log_level``; None leaves structlog alone).
The pytest plugin (``broker/pytest_plugin.py``) wraps these as fixtures.

A broker with TLS or SASL listeners and generated credentials: ``secured()``
gives its settings and each client's (``broker/security/testkit.py``,
docs/security.md)::

    sec = secured("SASL_SSL", mechanisms=("SCRAM-SHA-512",))
    with BrokerThread(settings=sec.settings) as broker:
        Producer({"bootstrap.servers": broker.bootstrap_servers, **sec.librdkafka()})

``acls=[...]`` (AclBindings, or dicts: ``broker.security.testkit.acl_binding``)
starts a broker whose authorizer (``authorizer.class.name``) has those
bindings; ``secured(acls=..., super_users=...)`` sets the authorizer and
gives them as ``sec.acls``.

A request handler that raises is a broker bug (the broker logs "handler
failed" and closes the client's connection). A test broker notes every such
failure and ``close()`` (so ``async with`` and ``with`` too) raises
``HandlerFailed`` listing them; ``check_handler_errors()`` raises at any
point in between. ``fail_on_handler_errors=False`` turns this off, for a test
that provokes such a bug on purpose.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path

from .config import BrokerConfig, load_config
from .config import lookup as _lookup
from .faults import Faults
from .security.testkit import Secured, acl_binding, secured, unsecured_jwt

__all__ = ["Broker", "BrokerThread", "HandlerFailed", "Secured", "TEST_DEFAULTS", "secured", "unsecured_jwt"]

# what test brokers change from the broker's defaults: one __consumer_offsets
# partition instead of 50 makes start several times faster (each partition's
# directory is created and synced); pass the setting to get Kafka's placement
TEST_DEFAULTS: dict[str, object] = {"offsets.topic.num.partitions": 1}


class HandlerFailed(AssertionError):
    """A request handler raised while the test ran: a broker bug, whatever the test asserted."""

    def __init__(self, failures: list[str]) -> None:
        self.failures = list(failures)
        super().__init__(
            f"the broker's request handlers raised {len(failures)} time(s) (each closed a client's connection):\n\n"
            + "\n".join(failures)
        )


def _describe_failure(name: str, request, exc: Exception) -> str:
    body = repr(request.body)
    if len(body) > 1000:  # records can be megabytes
        body = body[:1000] + "..."
    trace = "".join(traceback.format_exception(exc))
    return f"{name} v{request.api_version}: {body}\n{trace}"


def _quiet_logs(level: str | None) -> None:
    """Send the broker's logs to stderr at ``level``, unless structlog is configured already.

    Loggers are not cached, so an application that configures structlog later
    still gets its own settings everywhere. ``level=None`` leaves structlog alone.
    """
    import structlog

    if level is None or structlog.is_configured():
        return
    from . import logs

    logs.configure("console", level, embedded=True)


class Broker:
    """An in-process broker on the running event loop (``async with``)."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        settings: Mapping[str, object] | None = None,
        log_level: str | None = "warning",
        fail_on_handler_errors: bool = True,
        acls=None,
        **kwargs,
    ) -> None:
        self._owns_dir = data_dir is None
        self.fail_on_handler_errors = fail_on_handler_errors
        # what handlers raised, one entry each (kept across restarts until reported)
        self.handler_failures: list[str] = []
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kafkalite-"))
        given = merge_settings(kwargs, settings or {})
        base = dict(TEST_DEFAULTS)
        if not any(_lookup(n).key == "listeners" for n in given):
            base.update(host="127.0.0.1", port=0)
        overrides = merge_settings(base, given, {"data_dir": str(self.data_dir)})
        self.config: BrokerConfig = load_config(environ={}, overrides=overrides)
        self.log_level = log_level
        # ACL bindings created at each start (kept once: a restart finds them in the data directory)
        self.acls = [acl_binding(a) for a in acls or ()]
        if self.acls and not self.config.authorizer_class_name:
            raise ValueError("acls need an authorizer: set authorizer.class.name (secured(acls=...) does)")
        self.faults = Faults()
        self.server = None  # broker.server.Broker while running
        self.startup_ms: float | None = None
        self.restarts = 0

    # -- lifecycle ------------------------------------------------------------
    async def start(self) -> Broker:
        from .server import Broker as ServerBroker

        if self.server is not None:
            return self
        _quiet_logs(self.log_level)
        t0 = time.perf_counter()
        server = ServerBroker(self.config, faults=self.faults)
        if self.fail_on_handler_errors:
            failures = self.handler_failures
            server.on_handler_error = lambda name, request, exc: failures.append(_describe_failure(name, request, exc))
        await server.start()
        if self.acls:
            await server.acls.create(self.acls)
        self.startup_ms = (time.perf_counter() - t0) * 1000
        self.server = server
        self._pin_ports()
        return self

    def _pin_ports(self) -> None:
        """Bind the same ports again on restart, so clients reconnect."""
        server = self.server
        if self.config.listeners:
            self.config.listeners = [f"{li.spec.name}://{_host(li.spec.host)}:{li.port}" for li in server.listeners]
        else:
            self.config.port = server.listeners[0].port
        if server.metrics is not None and server.metrics.port is not None:
            self.config.metrics_port = server.metrics.port

    async def stop(self) -> None:
        """Stop as SIGTERM does: in-flight requests finish, logs are flushed."""
        server, self.server = self.server, None
        if server is not None:
            await server.stop()

    async def restart(self) -> Broker:
        """Stop and start over the same data directory, on the same ports."""
        await self.stop()
        self.restarts += 1
        return await self.start()

    async def close(self) -> None:
        """Stop, remove the data dir if it was made here; then raise HandlerFailed if a handler raised."""
        await self.stop()
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        self.check_handler_errors()

    def check_handler_errors(self) -> None:
        """Raise HandlerFailed if a request handler raised since the last check."""
        if self.handler_failures:
            failures = list(self.handler_failures)
            self.handler_failures.clear()
            raise HandlerFailed(failures)

    async def __aenter__(self) -> Broker:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- what tests use ---------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.server is not None

    def _server(self):
        if self.server is None:
            raise RuntimeError("the broker is not running")
        return self.server

    @property
    def bootstrap_servers(self) -> str:
        """host:port of the first listener, as clients should be given it."""
        host, port = self._server().listeners[0].advertised
        return f"{_host(host)}:{port}"

    @property
    def listeners(self) -> dict[str, str]:
        """Listener name -> its advertised host:port."""
        return {li.name: "%s:%d" % (_host(li.advertised[0]), li.advertised[1]) for li in self._server().listeners}

    @property
    def port(self) -> int:
        return self._server().listeners[0].port

    @property
    def cluster(self):
        return self._server().cluster

    @property
    def coordinator(self):
        return self._server().coordinator

    @property
    def metrics_url(self) -> str | None:
        m = self._server().metrics
        return f"http://{_host(m.host)}:{m.port}/metrics" if m is not None and m.port is not None else None

    def metrics_text(self) -> str:
        """The Prometheus exposition, as a scrape would see it (needs metrics_port set)."""
        m = self._server().metrics
        if m is None:
            raise RuntimeError("metrics are off: start the broker with metrics_port=0")
        return m.render().decode()

    async def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> None:
        """Create a topic (Kafka topic configs by name); ValueError if the broker refuses."""
        from .cluster import TopicError

        try:
            self._server().cluster.create_topic(name, partitions, dict(config or {}))
        except TopicError as exc:
            raise ValueError(exc.message) from None

    async def delete_topic(self, name: str) -> None:
        cluster = self._server().cluster
        topic = cluster.topics.get(name)
        if topic is None:
            raise ValueError(f"no topic {name!r}")
        cluster.delete_topic(topic)

    def topics(self) -> dict[str, int]:
        """Topic name -> partition count (internal topics included)."""
        return {name: len(t.partitions) for name, t in self._server().cluster.topics.items()}

    def group_state(self, group_id: str) -> str | None:
        """The state of a group as DescribeGroups would say it, or None if it does not exist."""
        coordinator = self._server().coordinator
        if not coordinator.shards:
            return None
        group = coordinator.shard_for(group_id).shard.groups.get(group_id)
        return None if group is None else str(group.state)

    def drop_connections(self, *, client_id: str | None = None, listener: str | None = None) -> int:
        return self.faults.drop_connections(client_id=client_id, listener=listener)


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def merge_settings(*layers: Mapping[str, object]) -> dict[str, object]:
    """Settings by either name, later layers winning per setting (``num.partitions``
    in one and ``num_partitions`` in another are the same setting)."""
    merged: dict[str, tuple[str, object]] = {}
    for layer in layers:
        for name, value in layer.items():
            merged[_lookup(name).key] = (name, value)
    return dict(merged.values())


def _delegated(name: str) -> property:
    """A read-only property that is the broker's attribute ``name``."""
    return property(lambda self: getattr(self.broker, name), doc=f"The broker's ``{name}``.")


class BrokerThread:
    """The same broker on a background thread's event loop, for synchronous tests.

    Every method blocks until the broker's loop has done it. ``faults`` may be
    used from the test's thread.
    """

    def __init__(self, data_dir: str | Path | None = None, **kwargs) -> None:
        """``data_dir`` and ``kwargs`` as :class:`Broker` takes them (settings, log_level, ...)."""
        self.broker = Broker(data_dir, **kwargs)
        self.faults = self.broker.faults
        self.security: Secured | None = None  # the client settings of a secured broker (the pytest plugin sets it)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _call(self, coro, timeout: float = 60.0):
        if self.loop is None:
            raise RuntimeError("the broker thread is not running")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> BrokerThread:
        if self._thread is None:
            try:
                import uvloop

                loop = uvloop.new_event_loop()
            except ImportError:  # pragma: no cover - uvloop is a dependency
                loop = asyncio.new_event_loop()
            self.loop = loop
            self._thread = threading.Thread(target=loop.run_forever, name="kafkalite-broker", daemon=True)
            self._thread.start()
        self._call(self.broker.start())
        return self

    def stop(self) -> None:
        """Stop the broker (the thread stays for a later ``start``)."""
        if self.loop is not None:
            self._call(self.broker.stop())

    def restart(self) -> BrokerThread:
        self._call(self.broker.restart())
        return self

    async def arestart(self) -> BrokerThread:
        """``restart`` for async tests, without blocking their loop."""
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.broker.restart(), self.loop))
        return self

    def close(self) -> None:
        """Stop the broker and its thread; remove the data dir if it was made here.

        Raises HandlerFailed, once all is closed, if a request handler raised.
        """
        if self.loop is None:
            return
        try:
            self._call(self.broker.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()
            self.loop = None
            self._thread = None

    def check_handler_errors(self) -> None:
        """Raise HandlerFailed if a request handler raised since the last check."""
        self.broker.check_handler_errors()

    def __enter__(self) -> BrokerThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- delegated to the broker (read-only) ---------------------------------------
    running: bool = _delegated("running")  # type: ignore[assignment]
    config: BrokerConfig = _delegated("config")  # type: ignore[assignment]
    data_dir: Path = _delegated("data_dir")  # type: ignore[assignment]
    startup_ms: float | None = _delegated("startup_ms")  # type: ignore[assignment]
    handler_failures: list[str] = _delegated("handler_failures")  # type: ignore[assignment]
    bootstrap_servers: str = _delegated("bootstrap_servers")  # type: ignore[assignment]
    listeners: dict[str, str] = _delegated("listeners")  # type: ignore[assignment]
    port: int = _delegated("port")  # type: ignore[assignment]
    metrics_url: str | None = _delegated("metrics_url")  # type: ignore[assignment]

    def metrics_text(self) -> str:
        return self._call(_async(self.broker.metrics_text))

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> None:
        self._call(self.broker.create_topic(name, partitions, config))

    def delete_topic(self, name: str) -> None:
        self._call(self.broker.delete_topic(name))

    def topics(self) -> dict[str, int]:
        return self._call(_async(self.broker.topics))

    def group_state(self, group_id: str) -> str | None:
        return self._call(_async(self.broker.group_state, group_id))

    def drop_connections(self, *, client_id: str | None = None, listener: str | None = None) -> int:
        return self.faults.drop_connections(client_id=client_id, listener=listener)

    def wait_for(self, predicate, timeout: float = 30.0, interval: float = 0.05) -> None:
        """Poll ``predicate(self)`` until it is true; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise TimeoutError("condition not met in time")
            time.sleep(interval)


async def _async(fn, *args):
    return fn(*args)
