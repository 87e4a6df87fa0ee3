"""The asyncio server: accepts connections, frames bytes, dispatches to handlers.

Each connection is an ``asyncio.Protocol``. Bytes are fed to the sans-IO
``protocol.connection.ServerConnection``; the decoded requests are queued and
handled one at a time, in order, by the connection's own task, which is how
Kafka treats a connection too (it mutes a channel until its response is out).

The broker binds one server per listener (``broker.listeners``); a connection
knows its listener, so Metadata and FindCoordinator give each client the
address of the listener it came through. Fault injection (``broker.faults``)
and metrics (``broker.metrics``) hook the dispatch path only when in use: the
plain path pays one attribute check.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
import time
from collections import deque

from protocol.codec import build, response_class
from protocol.connection import ProtocolError, Request, ServerConnection, UnsupportedVersion
from protocol.errors import ErrorCode
from protocol.fast import ENCODERS as FAST_ENCODERS

from .cluster import Cluster
from .config import BrokerConfig
from .coordinator.service import GroupCoordinator
from .faults import NO_RESPONSE
from .handlers import HANDLERS, RequestContext, supported_versions
from .listeners import Listener
from .logs import get_logger

log = get_logger("server")

# stop reading from a client that has this many requests waiting
_MAX_QUEUED = 64


class Broker:
    """Owns the cluster state and the listening sockets."""

    def __init__(self, config: BrokerConfig, *, faults=None) -> None:
        self.config = config
        self.specs = config.listener_specs()
        self.cluster = Cluster(
            config.data_dir,
            config.effective_log_defaults(),
            node_id=config.node_id,
            maintenance_interval_s=config.maintenance_interval_ms / 1000,
            retention_check_interval_ms=config.log_retention_check_interval_ms,
        )
        self.coordinator = GroupCoordinator(self.cluster, config.group_config(), fsync_always=config.fsync == "always")
        self.supported = supported_versions()
        self.server: asyncio.AbstractServer | None = None  # the first listener's
        self.listeners: list[Listener] = []
        self.connections: set[KafkaConnection] = set()
        self.started = time.monotonic()
        # dispatch hooks: ``hooked`` is the one flag the request path checks
        self.faults = None
        self.metrics = None
        self.hooked = False
        if config.metrics_port is not None:
            from .metrics import Metrics

            self.metrics = Metrics(self)
        if faults is not None:
            faults.attach(self)
        self.update_hooks()

    def update_hooks(self) -> None:
        """Recompute ``hooked`` after faults or metrics changed."""
        self.hooked = self.metrics is not None or (self.faults is not None and self.faults.active)

    @property
    def advertised(self) -> tuple[str, int]:
        """The first listener's advertised address."""
        if self.listeners:
            return self.listeners[0].advertised
        return self.specs[0].advertised()

    def kafka_listeners(self) -> tuple[str, str]:
        """Kafka's ``listeners`` and ``advertised.listeners`` values for this broker (DescribeConfigs)."""
        bound = {li.name: li.port for li in self.listeners}
        return (
            ",".join(dataclasses.replace(s, port=bound.get(s.name, s.port)).kafka() for s in self.specs),
            ",".join(s.kafka_advertised(bound.get(s.name)) for s in self.specs),
        )

    async def start(self) -> None:
        self.cluster.load()
        self.cluster.logs.start_background()
        self.coordinator.start()
        await self._bind()
        if self.metrics is not None:
            try:
                await self.metrics.start()
            except OSError:
                self.failed_bind = ("metrics", self.config.metrics_host or self.specs[0].host, self.config.metrics_port)
                self._unbind()
                raise

    def _unbind(self) -> None:
        """Undo a start that could not bind everything."""
        for listener in self.listeners:
            listener.server.close()
        self.listeners = []
        self.coordinator.stop()
        self.cluster.close()

    async def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            for spec in self.specs:
                listener = Listener(spec, spec.port)
                host, port = spec.bind_address()
                listener.server = await loop.create_server(lambda listener=listener: KafkaConnection(self, listener), host, port, reuse_address=True)
                listener.port = listener.server.sockets[0].getsockname()[1]
                self.listeners.append(listener)
                log.info("listening", listener=spec.name, host=host, port=listener.port, data_dir=str(self.config.data_dir))
        except OSError:
            self.failed_bind = (spec.name, spec.host, spec.port)
            self._unbind()
            raise
        self.server = self.listeners[0].server
        if not self.config.listeners:
            self.config.port = self.listeners[0].port

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish, close the logs."""
        for listener in self.listeners:
            listener.server.close()
        if self.metrics is not None:
            self.metrics.stop()
        if self.faults is not None:
            self.faults.release_held()
        for conn in list(self.connections):
            conn.stop_reading()
        for c in self.connections:
            c.draining = True
            c.wakeup.set()  # an idle connection's task returns now rather than at the timeout below
        # coordinator writes are flushed; parked JoinGroup/SyncGroup get NOT_COORDINATOR
        self.coordinator.stop()
        # long polls are cut short
        for topic in self.cluster.topics.values():
            for part in topic.partitions:
                part.notify()
        pending = [c.task for c in self.connections if c.task is not None]
        if pending:
            await asyncio.wait(pending, timeout=5)
        for conn in list(self.connections):
            conn.close()
        self.cluster.close()
        log.info("stopped")


class KafkaConnection(asyncio.Protocol):
    def __init__(self, broker: Broker, listener: Listener | None = None) -> None:
        self.broker = broker
        self.listener = listener
        self.proto = ServerConnection(broker.supported, broker.config.max_frame_bytes)
        self.queue: deque = deque()
        self.wakeup = asyncio.Event()
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task | None = None
        self.reading = True
        self.closing = False
        self.draining = False
        self.ctx: RequestContext | None = None

    # -- asyncio.Protocol -------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.log = log.bind(peer=self.peer)
        self.ctx = RequestContext(self.broker, self, self.log)
        self.broker.connections.add(self)
        if self.broker.metrics is not None:
            self.broker.metrics.connection_opened(self)
        self.task = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        try:
            events = self.proto.receive_data(data)
        except ProtocolError as exc:
            self.log.warning("closing connection: protocol error", reason=str(exc))
            self.close()
            return
        if events:
            self.queue.extend(events)
            self.wakeup.set()
            if len(self.queue) >= _MAX_QUEUED and self.reading:
                self.transport.pause_reading()
                self.reading = False

    def connection_lost(self, exc) -> None:
        self.closing = True
        if self in self.broker.connections and self.broker.metrics is not None:
            self.broker.metrics.connection_closed(self)
        self.broker.connections.discard(self)
        self.wakeup.set()
        if self.task is not None and not self.task.done():
            self.task.cancel()

    # -- processing -------------------------------------------------------
    def stop_reading(self) -> None:
        if self.transport is not None and self.reading:
            self.transport.pause_reading()
            self.reading = False

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    async def _run(self) -> None:
        queue = self.queue
        try:
            while not self.closing:
                if not queue:
                    if self.draining:
                        return
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                event = queue.popleft()
                if not self.reading and len(queue) < _MAX_QUEUED // 2 and not self.draining:
                    self.transport.resume_reading()
                    self.reading = True
                out = await self._dispatch(event)
                if out is not None and not self.closing:
                    self.transport.write(out)
        except asyncio.CancelledError:
            pass

    async def _dispatch(self, event) -> bytes | None:
        if self.broker.hooked:
            return await self._dispatch_hooked(event)
        ctx = self.ctx
        if isinstance(event, UnsupportedVersion):
            return self._unsupported(event)
        assert isinstance(event, Request)
        handler = HANDLERS[event.api_key]
        ctx.request = event
        try:
            body = await handler.handle(ctx, event.body)
        except Exception:  # a handler bug must not take the broker down
            self.log.exception(
                "handler failed", api=handler.NAME, version=event.api_version, client_id=event.client_id
            )
            self.close()
            return None
        if body is None:  # e.g. Produce with acks=0
            return None
        fast = FAST_ENCODERS.get((event.api_key, event.api_version))
        if fast is not None:
            return fast(event.api_version, event.correlation_id, body)
        cls = response_class(event.api_key, event.api_version)
        return self.proto.encode_response(event.api_key, event.api_version, event.correlation_id, build(cls, body))

    def _encode(self, event: Request, body) -> bytes:
        fast = FAST_ENCODERS.get((event.api_key, event.api_version))
        if fast is not None:
            return fast(event.api_version, event.correlation_id, body)
        cls = response_class(event.api_key, event.api_version)
        return self.proto.encode_response(event.api_key, event.api_version, event.correlation_id, build(cls, body))

    async def _dispatch_hooked(self, event) -> bytes | None:
        """``_dispatch`` with fault injection, recording and metrics (see broker/faults.py)."""
        broker = self.broker
        faults = broker.faults if broker.faults is not None and broker.faults.active else None
        metrics = broker.metrics
        t0 = time.perf_counter()
        if isinstance(event, UnsupportedVersion):
            out = self._unsupported(event)
            if metrics is not None:
                metrics.observe(self, event, None, ErrorCode.unsupported_version, time.perf_counter() - t0, len(out))
            return out
        self.ctx.request = event
        plan = faults.plan(self, event) if faults is not None else None
        body = None
        delay = 0.0
        if plan is not None:
            if plan.drop:
                self.log.info("fault injected: connection dropped", api=HANDLERS[event.api_key].NAME, client_id=event.client_id)
                faults.recorded(self, event, None, plan)
                self.close()
                return None
            if plan.hold is not None:
                await plan.hold()
                if self.closing:
                    return None
            delay = plan.delay
            body = plan.response
        if body is None:
            handler = HANDLERS[event.api_key]
            try:
                body = await handler.handle(self.ctx, event.body)
            except Exception:  # a handler bug must not take the broker down
                self.log.exception("handler failed", api=handler.NAME, version=event.api_version, client_id=event.client_id)
                self.close()
                return None
        elif body is NO_RESPONSE:
            body = None
        if delay:
            await asyncio.sleep(delay)
        out = None if body is None or self.closing else self._encode(event, body)
        if faults is not None:
            faults.recorded(self, event, body, plan)
        if metrics is not None:
            metrics.observe(self, event, body, None, time.perf_counter() - t0, len(out) if out else 0)
        return out

    def _unsupported(self, event: UnsupportedVersion) -> bytes:
        handler = HANDLERS[event.api_key]
        lo, hi = handler.VERSIONS
        self.log.info(
            "unsupported version",
            api=handler.NAME,
            version=event.api_version,
            supported=f"{lo}-{hi}",
            client_id=event.client_id,
        )
        if hasattr(handler, "unsupported"):
            version, body = handler.unsupported(self.ctx, event)
        else:
            version = hi if event.api_version > hi else lo
            body = {"error_code": ErrorCode.unsupported_version}
        cls = response_class(event.api_key, version)
        return self.proto.encode_response(event.api_key, version, event.correlation_id, build(cls, body))


async def run(config: BrokerConfig) -> int:
    broker = Broker(config)
    t0 = time.monotonic()
    try:
        await broker.start()
    except OSError as exc:
        name, host, port = getattr(broker, "failed_bind", ("?", "?", "?"))
        log.error("cannot listen", listener=name, host=host, port=port, error=str(exc))
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stdout.write(ready_lines(broker))
    sys.stdout.flush()
    log.info("ready", startup_ms=round((time.monotonic() - t0) * 1000, 1), pid=os.getpid())
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    return 0


def ready_lines(broker: Broker) -> str:
    """``READY host:port`` for the first listener, then ``LISTENER NAME host:port``
    for every listener and ``METRICS host:port`` when metrics are served."""
    first = broker.listeners[0]
    lines = [f"READY {first.host or '0.0.0.0'}:{first.port}"]
    lines += [f"LISTENER {li.name} {li.host or '0.0.0.0'}:{li.port}" for li in broker.listeners]
    if broker.metrics is not None and broker.metrics.port is not None:
        lines.append(f"METRICS {broker.metrics.host}:{broker.metrics.port}")
    return "".join(line + "\n" for line in lines)
