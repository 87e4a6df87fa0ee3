"""The asyncio server: accepts connections, frames bytes, dispatches to handlers.

Each connection is an ``asyncio.Protocol``. Bytes are fed to the sans-IO
``protocol.connection.ServerConnection``; the decoded requests are queued and
handled one at a time, in order, by the connection's own task, which is how
Kafka treats a connection too (it mutes a channel until its response is out).
"""

from __future__ import annotations

import asyncio
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
from .handlers import HANDLERS, RequestContext, supported_versions
from .logs import get_logger

log = get_logger("server")

# stop reading from a client that has this many requests waiting
_MAX_QUEUED = 64


class Broker:
    """Owns the cluster state and the listening socket."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.cluster = Cluster(
            config.data_dir,
            config.effective_log_defaults(),
            node_id=config.node_id,
            maintenance_interval_s=config.maintenance_interval_ms / 1000,
        )
        self.coordinator = GroupCoordinator(self.cluster, config.group_config(), fsync_always=config.fsync == "always")
        self.supported = supported_versions()
        self.server: asyncio.AbstractServer | None = None
        self.connections: set[KafkaConnection] = set()
        self.started = time.monotonic()

    @property
    def advertised(self) -> tuple[str, int]:
        return self.config.advertised

    async def start(self) -> None:
        self.cluster.load()
        self.cluster.logs.start_background()
        self.coordinator.start()
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: KafkaConnection(self), self.config.host, self.config.port, reuse_address=True
        )
        sock = self.server.sockets[0]
        bound_port = sock.getsockname()[1]
        self.config.port = bound_port
        log.info("listening", host=self.config.host, port=bound_port, data_dir=str(self.config.data_dir))

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish, close the logs."""
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            conn.stop_reading()
        for c in self.connections:
            c.draining = True
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
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
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
        log.error("cannot listen", host=config.host, port=config.port, error=str(exc))
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stdout.write(f"READY {config.host}:{config.port}\n")
    sys.stdout.flush()
    log.info("ready", startup_ms=round((time.monotonic() - t0) * 1000, 1), pid=os.getpid())
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    return 0
