"""The asyncio server: accepts connections, frames bytes, dispatches to handlers.

Each connection is an ``asyncio.Protocol``. Bytes are fed to the sans-IO
``protocol.connection.ServerConnection``; the decoded requests are queued and
handled in order by a task of the connection's own, one at a time, which is
how Kafka treats a connection too (it mutes a channel until its response is
out); except that the requests of ``handlers.PIPELINED`` (commits and
heartbeats) start while earlier ones still wait for their append, and are
answered in order (see "pipelined requests" below). The task exists only
while the connection is busy (and for a second after): an idle connection
costs its transport and a small object.

Memory is bounded on both sides of a connection:

- answers: the transport's write buffer has a high-water mark; above it the
  connection handles no further request and is not read from until the
  client has read its answers down to the low-water mark (``pause_writing``
  and ``resume_writing``). A client that never reads holds one answer plus
  the high-water mark, and its own requests: at most ``_MAX_QUEUED`` of them
  or ``socket.request.max.bytes`` of them, whichever comes first. An answer
  may be a list of buffers (a Fetch's records, as read from the segment, are
  not copied into it), written with ``transport.writelines``: the buffers
  it holds are that answer's bytes, plus at most the part of one batch per
  partition that was read and not sent, so the bound is the same. Large
  reads are not read at all on a plain TCP connection: they are
  ``FileRegion``s sent with ``sendfile`` (see "sending from files"), and
  while the socket is full the connection is paused the same way; what
  waits is the file's descriptor, not its bytes.
- requests, broker-wide: every connection counts the bytes it holds for
  requests (frames being received and requests queued or in flight); past
  ``queued.max.request.bytes`` in all (``pool_full``), no connection in the
  middle of a large frame (``LARGE_FRAME``, 64 KiB, or more) is read from,
  except one (the one furthest into its frame, rotated if it stalls) so that
  the broker can finish a request, until the total falls to three quarters
  of the limit. The exempt one stops at the limit plus one largest frame
  (``request_bytes_cap``). The others go on being read, so small requests
  (metadata, heartbeats, commits, fetches) are still answered while large
  frames wait; one that starts a large frame is held back after that read.
  Past ``request_bytes_cap`` plus a reserve for those small requests
  (``request_bytes_hard``) no connection at all is read from
  (``pool_capped``) until the total is half a reserve below it again.

One periodic sweep (not a timer per connection) closes connections that sent
no complete request for ``connections.max.idle.ms``, ends the tasks of
connections quiet for ``_LINGER``, closes paused connections whose client has
gone (a paused transport does not read, so it would not see the EOF: one
poll(2) asks the kernel), and after a burst returns freed memory to the
operating system (a full collection, then glibc's ``malloc_trim``).
``max.connections`` and ``max.connections.per.ip`` close new connections over
the limit at once.

The broker binds one server per listener (``broker.listeners``); a connection
knows its listener, so Metadata and FindCoordinator give each client the
address of the listener it came through. SSL and SASL_SSL listeners are TLS
servers (the transport decrypts; a handshake not done within
``ssl_handshake_timeout_ms`` is closed): ``security.tls.TlsAccept`` counts a
connection in at accept, so ``max.connections`` sees handshakes in progress,
then upgrades it with ``start_tls``; a failed handshake is logged on one line
and counted (``kafkalite_tls_handshake_failures``). On SASL listeners a connection starts
with an ``Authenticator`` (``broker.security.authenticator``): until the client
has authenticated, each frame goes to it (``_authenticate``), not to the
request queue, and nothing else is answered. A connection's ``principal`` is
what the handlers check against ACLs (``broker.security.authorizer``, when
``authorizer.class.name`` is set; ``Broker.authorizer`` is None otherwise, and
each handler's checks are one attribute test). Fault injection (``broker.faults``)
and metrics (``broker.metrics``) hook the dispatch path only when in use: the
plain path pays one attribute check.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import select
import signal
import socket
import sys
import time
from collections import deque

from protocol.codec import build, drop_unknown, response_class
from protocol.connection import ProtocolError, Request, ServerConnection, UnsupportedVersion
from protocol.errors import ErrorCode
from protocol.fast import ENCODERS as FAST_ENCODERS
from protocol.framing import FrameError, encode_frame
from storage.segment import FileRegion

from .cluster import Cluster
from .config import INT_MAX, BrokerConfig, per_ip_overrides
from . import datadir, diagnostics, memory
from .coordinator.arrivals import LIVENESS_APIS
from .coordinator.common import GroupConfig
from .coordinator.service import GroupCoordinator
from .handlers import HANDLERS, PIPELINED, RequestContext, supported_versions
from .pending import Pending
from .listeners import Listener
from .logs import get_logger
from .metadata_load import load_cluster
from .security import ANONYMOUS
from .share import SHARE_STATE_TOPIC
from .txn import TXN_TOPIC

log = get_logger("server")

# stop reading from a client that has this many requests waiting
_MAX_QUEUED = 64
# the transport's write buffer limits (each at most socket.request.max.bytes)
_WRITE_HIGH = 1024 * 1024
_WRITE_LOW = 256 * 1024
# why a connection is not read from: KafkaConnection.paused is a mask of these
_QUEUE = 1  # requests waiting: _MAX_QUEUED of them, or socket.request.max.bytes
_WRITE = 2  # answers not read by the client: above the write high-water mark
_POOL = 4  # queued.max.request.bytes reached, broker-wide
# at least this much room for small requests past request_bytes_cap (Broker.request_bytes_hard)
_SMALL_RESERVE = 1024 * 1024
_STOP = 8  # the broker is stopping
# memory handed back to the OS once this much in large buffers was freed and the churn stopped
_TRIM_BYTES = 8 * 1024 * 1024
_LARGE = 256 * 1024  # a request or answer this large counts towards it
# a FileRegion sent through the transport (TLS, or no descriptor to wait with) is read this much at a time
_PIECE = 256 * 1024
# answers smaller than this are held while the connection has more requests queued, and sent
# together (at most _COALESCE_COUNT of them, or when the connection's task next waits)
_COALESCE = 16 * 1024
_COALESCE_COUNT = 32
# requests of one connection started and not yet answered (see KafkaConnection._run)
_MAX_INFLIGHT = 32
_CONN_FREED = 2048  # and every closed connection this much
# a connection's task ends once it has had no request for this long (the sweep ends it)
_LINGER = 1.0

_now = time.monotonic
_BACKLOG = 100  # asyncio's and uvloop's default for create_server
# TLS connections: SO_RCVLOWAT while a large request arrives (KafkaConnection._tune_lowat)
_SO_RCVLOWAT = getattr(socket, "SO_RCVLOWAT", 0)
_TLS_RECORD = 16384 + 256  # the most ciphertext of one TLS record the transport can hold undelivered
_LOWAT_MIN = 64 * 1024
_LOWAT_MAX = 256 * 1024
_POLLRDHUP = getattr(select, "POLLRDHUP", 0)  # Linux
_HUNG_UP = _POLLRDHUP | select.POLLHUP | select.POLLERR


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
            initial_task_delay_ms=config.log_initial_task_delay_ms,
        )
        group_config = GroupConfig.from_broker(config)
        group_config.group_overrides = self.cluster.group_configs  # AlterConfigs' per-group configs, read on each use
        self.coordinator = GroupCoordinator(self.cluster, group_config, fsync_always=config.fsync == "always")
        self.arrivals = self.coordinator.arrivals
        # the transaction coordinator (broker/txn/): made, and its modules imported, by the first
        # request that needs it (InitProducerId, FindCoordinator ...), or at start when __transaction_state exists
        self._transactions = None
        # the share coordinator and share partitions (KIP-932, broker/share/): made, and their
        # modules imported, by the first share RPC, or at start when __share_group_state exists
        self._share: tuple | None = None
        # the hook the group coordinator calls to initialize and delete share groups' state
        self.coordinator.share_state = _ShareStateOnDemand(self)
        self.cluster.on_topic_deleted.append(self.share_topic_deleted)
        self.supported = supported_versions()
        # TLS contexts and SASL mechanisms per listener (None: every listener is PLAINTEXT)
        self.security = config.security
        self._scram = None  # broker.security.scram.ScramStore, made when first needed
        # ACLs (broker/security/authorizer.py): None without authorizer.class.name, and then
        # every request is allowed; ``acls`` keeps the bindings in the data directory
        self.authorizer = None
        self.acls = None
        if config.authorizer_class_name:
            from .security.authorizer import AclStore, from_config

            self.authorizer = from_config(config)
            self.acls = AclStore(self.authorizer, config.data_dir)
        self.server: asyncio.AbstractServer | None = None  # the first listener's
        self.data_lock: datadir.DataDirLock | None = None  # held from before the load to the end of stop()
        self.listeners: list[Listener] = []
        self.connections: set[KafkaConnection] = set()
        self.handshaking: set = set()  # TLS connections still in their handshake (security.tls.TlsAccept)
        self.started = time.monotonic()
        # dispatch hooks: ``hooked`` is the one flag the request path checks
        self.faults = None
        self.metrics = None
        self.hooked = False
        # called as hook(api_name, request, exception) when a handler raises (broker.testing fails tests on it)
        self.on_handler_error = None
        if config.metrics_port is not None:
            from .metrics import Metrics

            self.metrics = Metrics(self)
        if faults is not None:
            faults.attach(self)
        self.update_hooks()
        self.loop: asyncio.AbstractEventLoop | None = None
        # answers: the write buffer limits; requests: what one connection may queue
        self.write_high = min(_WRITE_HIGH, config.max_frame_bytes)
        self.write_low = self.write_high // 4
        self.conn_queue_bytes = config.max_frame_bytes
        # requests, broker-wide (queued.max.request.bytes; see the module docstring)
        self.request_bytes = 0
        limit = config.queued_max_request_bytes
        self.request_bytes_limit = limit if limit > 0 else sys.maxsize
        self.request_bytes_resume = self.request_bytes_limit - self.request_bytes_limit // 4
        # past the limit one connection may finish its frame, but nothing may take the total past this
        self.request_bytes_cap = self.request_bytes_limit + config.max_frame_bytes
        # and the others' small requests have this much more before nothing is read at all
        reserve = max(self.request_bytes_limit // 8, _SMALL_RESERVE)
        self.request_bytes_hard = self.request_bytes_cap + reserve
        self.request_bytes_unhard = self.request_bytes_hard - reserve // 2
        self.pool_full = False
        self.pool_capped = False
        self.pool_exempt: KafkaConnection | None = None
        self.pool_episodes = 0
        self._exempt_mark = -1
        self._exempt_skip: set[KafkaConnection] = set()
        # connection limits
        self.max_connections = config.max_connections
        self.per_ip_limit = config.max_connections_per_ip
        self.per_ip_overrides = per_ip_overrides(config.max_connections_per_ip_overrides or ())
        # connections by IP address, kept only when there is a limit per address
        self.per_ip: dict[str, int] | None = {} if self.per_ip_limit < INT_MAX or self.per_ip_overrides else None
        self.refused = 0
        # the sweep: idle connections, the pool's exempt connection, memory trimming
        idle = config.connections_max_idle_ms
        self.idle_s = idle / 1000 if idle >= 0 else None
        self.sweep_s = min(1.0, max(0.01, idle / 4000)) if idle >= 0 else 1.0
        self._sweep_handle: asyncio.TimerHandle | None = None
        self.trim_due = 0
        self._trim_seen = 0
        # descriptors held by Fetch answers waiting for their client's socket ("sending from
        # files"): at most a quarter of the process's, so that clients that do not read cannot
        # take the descriptors segments, connections and new topics need; past it, answers
        # are read into memory as on TLS
        self.waiting_fds = 0
        self.waiting_fds_max = max(64, _open_files_limit() // 4)

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

    @property
    def scram(self):
        """The SCRAM credentials (broker/security/scram.py): the configuration's and AlterUserScramCredentials'."""
        if self._scram is None:
            from .security.scram import ScramStore

            self._scram = ScramStore(self.config.data_dir, self.security.scram_users if self.security is not None else None)
            self._scram.load()
        return self._scram

    def tls_failed(self, accept, exc: BaseException) -> None:
        """A TLS handshake failed: one log line (OpenSSL's reason, nothing the client sent), and counted."""
        from .security.tls import failure_detail, failure_reason

        reason = failure_reason(exc)
        listener = accept.listener.name
        log.warning("TLS handshake failed", peer=accept.peer, listener=listener, reason=reason, detail=failure_detail(exc))
        if self.metrics is not None:
            self.metrics.tls_handshake_failed(listener, reason)

    def auth_event(self, conn, mechanism: str | None, failure: tuple[str, str] | None, *, reauth: bool = False) -> None:
        """An authentication succeeded (``failure`` None) or failed ((kind, detail)): logged without
        secrets, and counted when metrics are on."""
        listener = conn.listener.name if conn.listener is not None else ""
        if failure is None:
            conn.log.debug("re-authenticated" if reauth else "authenticated", listener=listener, mechanism=mechanism, principal=conn.principal)
        else:
            conn.log.warning("authentication failed", listener=listener, mechanism=mechanism, reason=failure[0], detail=failure[1])
        if self.metrics is not None:
            self.metrics.authentication(listener, mechanism, None if failure is None else failure[0], reauth)

    @property
    def transactions(self):
        """The transaction coordinator (broker/txn/service.py), made on first use."""
        if self._transactions is None:
            from .txn.service import TransactionCoordinator
            from .txn.shard import TxnConfig

            config = self.config
            self._transactions = TransactionCoordinator(
                self.cluster, self.coordinator, TxnConfig.from_broker(config), num_partitions=config.transaction_state_log_num_partitions,
                fsync_always=config.fsync == "always",
            )
        return self._transactions

    def _stop_transactions(self) -> None:
        if self._transactions is not None:
            self._transactions.stop()

    def _share_parts(self) -> tuple:
        """(ShareCoordinator, SharePartitionManager, ShareStateHook), made on first use."""
        if self._share is None:
            from .share.coordinator import ShareCoordinator, ShareStateHook
            from .share.manager import SharePartitionManager
            from .share.state import ShareConfig

            config = self.config
            coordinator = ShareCoordinator(self.cluster, ShareConfig.from_broker(config), fsync_always=config.fsync == "always")
            partitions = SharePartitionManager(self.cluster, coordinator, ShareConfig.from_broker(config), group_overrides=self.cluster.group_configs)
            self._share = (coordinator, partitions, ShareStateHook(coordinator, on_delete=partitions.forget))
        return self._share

    @property
    def share_coordinator(self):
        """The share coordinator: ``__share_group_state`` (broker/share/coordinator.py)."""
        return self._share_parts()[0]

    @property
    def share_partitions(self):
        """The share partitions and share sessions (broker/share/manager.py)."""
        return self._share_parts()[1]

    @property
    def share_state_hook(self):
        return self._share_parts()[2]

    def _stop_share(self) -> None:
        if self._share is not None:
            self.share_partitions.stop()
            self.share_coordinator.stop()

    def share_topic_deleted(self, topic_id) -> None:
        """A deleted topic's share state goes with it (Kafka's share coordinator writes its tombstones)."""
        if self._share is not None:  # else there is no share state in memory to drop
            self.share_partitions.topic_deleted(topic_id)
            self.share_coordinator.topic_deleted(topic_id)

    async def start(self) -> None:
        """Bind every port, then lock the data directory, then load it, then serve: a start
        refused for a port in use or a directory another broker holds touches nothing in it."""
        self.loop = asyncio.get_running_loop()
        memory.tune()
        await self._bind()
        if self.metrics is not None:
            try:
                await self.metrics.bind()
            except OSError:
                self.failed_bind = ("metrics", self.config.metrics_host or self.specs[0].host, self.config.metrics_port)
                self._unbind()
                raise
        try:
            self.data_lock = datadir.lock(self.config.data_dir)  # before anything reads or writes the directory
        except datadir.DataDirError:
            self._unbind()
            raise
        try:
            self._load()
        except BaseException:
            self._unload()
            self._unbind()
            raise
        for listener in self.listeners:
            await listener.server.start_serving()
            log.info("listening", listener=listener.name, protocol=listener.protocol, host=listener.spec.bind_address()[0], port=listener.port,
                     data_dir=str(self.config.data_dir))
        self._sweep_handle = self.loop.call_later(self.sweep_s, self._sweep)
        if self.metrics is not None:
            await self.metrics.serve()

    def _load(self) -> None:
        """Read the locked data directory: credentials, ACLs, logs and meta.json, the coordinators' topics."""
        scram_file = self.config.data_dir / "scram-credentials.json"
        if self.security is not None or scram_file.exists() or scram_file.with_name(scram_file.name + ".prev").exists():
            self.scram  # noqa: B018 - read the credentials file now: a broken one stops the start
        if self.acls is not None:
            self.acls.load()  # a broken ACL file stops the start
        load_cluster(self.cluster, self.internal_topic_configs)  # a damaged meta.json: rebuilt, or MetadataError
        self.cluster.logs.start_background()
        self.coordinator.start()
        if TXN_TOPIC in self.cluster.topics:
            self.transactions.start_if_present()  # loads it, and completes what a crash left in PREPARE_*
        if SHARE_STATE_TOPIC in self.cluster.topics:
            self.share_coordinator.start_if_present()  # loads it, as every start once it exists

    def _unload(self) -> None:
        """Undo a start that could not load everything; the lock goes last."""
        try:
            self._stop_transactions()
            self._stop_share()
            self.coordinator.stop()
            self.cluster.close()
        finally:
            self._release_lock()

    def _release_lock(self) -> None:
        data_lock, self.data_lock = self.data_lock, None
        if data_lock is not None:
            data_lock.release()

    def internal_topic_configs(self, name: str) -> dict[str, str] | None:
        """The configs an internal topic is created with: for one rebuilt from its directories."""
        if name == "__consumer_offsets":
            from .coordinator.service import offsets_topic_configs

            return offsets_topic_configs(self.coordinator.config)
        if name == TXN_TOPIC:
            from .txn.service import txn_topic_configs

            return txn_topic_configs()
        if name == SHARE_STATE_TOPIC:
            from .share.coordinator import share_state_topic_configs
            from .share.state import ShareConfig

            return share_state_topic_configs(ShareConfig.from_broker(self.config))
        if name == "__kafkalite_group_events":
            from .coordinator.events import EVENTS_CONFIG

            return dict(EVENTS_CONFIG)
        return None

    def _unbind(self) -> None:
        """Close what a start that could not finish had bound."""
        if self._sweep_handle is not None:
            self._sweep_handle.cancel()
            self._sweep_handle = None
        for listener in self.listeners:
            listener.server.close()
        self.listeners = []
        if self.metrics is not None:
            self.metrics.stop()

    async def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            for spec in self.specs:
                listener = Listener(spec, spec.port)
                if self.security is not None:
                    listener.security = self.security.listeners.get(spec.name)
                if listener.security is not None and listener.security.ssl_context is not None:
                    from .security.tls import TlsAccept  # the handshake is ours, counted from accept

                    factory = lambda listener=listener: TlsAccept(self, listener, KafkaConnection(self, listener))  # noqa: E731
                else:
                    factory = lambda listener=listener: KafkaConnection(self, listener)  # noqa: E731
                host, port = spec.bind_address()
                listener.server = await loop.create_server(factory, host, port, reuse_address=True, start_serving=False)
                listener.port = listener.server.sockets[0].getsockname()[1]
                self.listeners.append(listener)
                listen_now(listener.server)
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
        for accept in list(self.handshaking):
            accept.abort()
        if self._sweep_handle is not None:
            self._sweep_handle.cancel()
            self._sweep_handle = None
        if self.metrics is not None:
            self.metrics.stop()
        if self.faults is not None:
            self.faults.release_held()
        for conn in list(self.connections):
            conn.stop_reading()
            conn.draining = True
            conn.wake()  # a waiting task ends now rather than at the timeout below
        # coordinator writes are flushed; parked JoinGroup/SyncGroup get NOT_COORDINATOR; transactions
        # not completed stay PREPARE_* in __transaction_state, and the next start completes them
        self._stop_transactions()
        self._stop_share()
        self.coordinator.stop()
        # long polls are cut short
        for topic in self.cluster.topics.values():
            for part in topic.partitions:
                part.notify()
        pending = [c.task for c in self.connections if c.task is not None]
        pending += [asyncio.ensure_future(c._settle()) for c in self.connections if c.inflight]
        if pending:
            await asyncio.wait(pending, timeout=5)
        for conn in list(self.connections):
            conn.close()
        self.cluster.close()
        self._release_lock()
        log.info("stopped")

    def _reap_hung_up(self, paused: list[KafkaConnection]) -> None:
        """Close the connections not being read from whose clients have gone.

        Reading is how a transport learns that its peer closed; one paused
        (full pool, unread answers) would hold its memory until the idle sweep.
        One poll(2) for all of them asks the kernel instead.
        """
        by_fd: dict[int, KafkaConnection] = {}
        for c in paused:
            if not c.closing:  # not just closed as idle
                sock = c.transport.get_extra_info("socket")
                if sock is not None:
                    by_fd[sock.fileno()] = c
        if not by_fd:
            return
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, _POLLRDHUP)
        for fd, events in poller.poll(0):
            if events & _HUNG_UP:
                by_fd[fd].abort()

    # -- connection limits ------------------------------------------------
    def admit(self, conn, transport) -> bool:
        """Count a new connection in, or say no (max.connections, max.connections.per.ip).

        ``conn`` is a KafkaConnection, or on a TLS listener the TlsAccept of a
        connection just accepted: those still in their handshake count too."""
        if len(self.connections) + len(self.handshaking) >= self.max_connections:
            self.refused += 1
            return False
        per_ip = self.per_ip
        if per_ip is not None:
            peer = transport.get_extra_info("peername")
            ip = peer[0] if peer else ""
            n = per_ip.get(ip, 0)
            if n >= self.per_ip_overrides.get(ip, self.per_ip_limit):
                self.refused += 1
                return False
            per_ip[ip] = n + 1
            conn.ip = ip
        return True

    def _forget_ip(self, ip: str) -> None:
        n = self.per_ip[ip] - 1
        if n:
            self.per_ip[ip] = n
        else:
            del self.per_ip[ip]

    # -- request memory (queued.max.request.bytes) ---------------------------
    def _pool_over(self, conn: KafkaConnection, completed: bool) -> None:
        """``conn`` took the broker to or past the limit: hold back the connections in the
        middle of a large frame, but one; past ``request_bytes_hard``, every connection."""
        large = conn.in_large_frame
        if not self.pool_full:
            self.pool_full = True
            self.pool_episodes += 1
            for c in self.connections:
                if c.in_large_frame:
                    c._pause(_POOL)
            self._pick_exempt()
        elif conn is self.pool_exempt:
            if completed or self.request_bytes >= self.request_bytes_cap:  # its frame is in, or it holds too much
                self.pool_exempt = None
                if large:
                    conn._pause(_POOL)
                self._pick_exempt()
        elif large:
            conn._pause(_POOL)
        if self.request_bytes >= self.request_bytes_hard and not self.pool_capped:
            self.pool_capped = True
            self.pool_exempt = None
            for c in self.connections:
                c._pause(_POOL)

    def _pool_uncap(self) -> None:
        """Half a reserve below ``request_bytes_hard`` again: read small requests again."""
        self.pool_capped = False
        for c in self.connections:
            if not c.in_large_frame:
                c._resume(_POOL)
        if self.pool_exempt is None:
            self._pick_exempt()

    def pool_released(self) -> None:
        """Request bytes were given back while the pool is full."""
        total = self.request_bytes
        if total < self.request_bytes_resume:
            self._pool_clear()
        elif self.pool_capped and total < self.request_bytes_unhard:
            self._pool_uncap()

    def _pick_exempt(self) -> None:
        """Let the connection furthest into a frame (and held back by nothing else) finish it."""
        best = None
        most = -1
        skip = self._exempt_skip
        if self.request_bytes >= self.request_bytes_cap:
            return  # the sweep looks again once requests have been handled
        for attempt in (0, 1):
            for c in self.connections:
                if c.paused == _POOL and c.proto is not None and c not in skip:
                    frames = c.proto._frames
                    if frames.in_large_frame and frames.buffered > most:
                        best, most = c, frames.buffered
            if best is not None or not skip or attempt:
                break
            skip.clear()  # every candidate stalled once: go round again
        self.pool_exempt = best
        if best is not None:
            self._exempt_mark = best.held
            best._resume(_POOL)

    def _pool_clear(self) -> None:
        """Back under the resume mark: read from everyone again."""
        self.pool_full = False
        self.pool_capped = False
        self.pool_exempt = None
        self._exempt_skip.clear()
        for c in self.connections:
            c._resume(_POOL)

    # -- the sweep --------------------------------------------------------
    def _sweep(self) -> None:
        self._sweep_handle = self.loop.call_later(self.sweep_s, self._sweep)
        now = _now()
        cutoff = now - self.idle_s if self.idle_s is not None else -1.0
        linger = now - _LINGER
        idle: list[KafkaConnection] = []
        paused: list[KafkaConnection] = []
        for c in self.connections:  # one pass over them all
            if c.seen < cutoff and (c.task is None or c.waiter is not None):
                idle.append(c)  # with a request in hand (a task not waiting) it is not idle
            elif c.waiter is not None and c.seen < linger:
                c.wake()  # quiet for a while: its task ends, an idle connection keeps none
            if c.paused and not c.closing:
                paused.append(c)
        for c in idle:
            c.abort()
        if idle:
            log.debug("closed idle connections", count=len(idle), idle_ms=round(self.idle_s * 1000))
        if paused and _POLLRDHUP:
            self._reap_hung_up(paused)
        if self.refused:
            log.warning(
                "refused connections over the limit",
                count=self.refused,
                max_connections=self.max_connections,
                max_connections_per_ip=self.per_ip_limit,
            )
            self.refused = 0
        if self.pool_episodes:
            log.info(
                "reading paused: queued.max.request.bytes reached",
                times=self.pool_episodes,
                limit=self.request_bytes_limit,
                held=self.request_bytes,
            )
            self.pool_episodes = 0
        exempt = self.pool_exempt
        if exempt is not None:
            if exempt.held == self._exempt_mark:  # no byte since the last sweep: give another a turn
                self._exempt_skip.add(exempt)
                self.pool_exempt = None
                exempt._pause(_POOL)
                self._pick_exempt()
            else:
                self._exempt_mark = exempt.held
        elif self.pool_full:
            self._pick_exempt()
        due = self.trim_due
        if due >= _TRIM_BYTES and due == self._trim_seen:  # after the burst, not during it
            self.trim_due = self._trim_seen = 0
            # a full collection also empties the interpreter's free lists, whose
            # leftovers would keep the burst's small-object arenas from being freed
            gc.collect()
            memory.release()
        else:
            self._trim_seen = due


def _open_files_limit() -> int:
    try:
        import resource
    except ImportError:  # pragma: no cover - not a Unix
        return 1024
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def _release(parts) -> None:
    for part in parts:
        if type(part) is FileRegion:
            part.release()


def _answer_size(out) -> int:
    """Bytes in an answer: ``bytes`` or a list of buffers."""
    if type(out) is bytes:
        return len(out)
    n = 0
    for b in out:
        n += len(b)
    return n


class _ShareStateOnDemand:
    """The group coordinator's share-state hook (broker/share/coordinator.py's ShareStateHook),
    made with the share coordinator when a share group first needs it."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def initialize(self, group_id: str, *args) -> dict:
        return await self.broker.share_state_hook.initialize(group_id, *args)

    async def delete(self, group_id: str, partitions: dict | None = None) -> dict:
        return await self.broker.share_state_hook.delete(group_id, partitions)


class _ConnectionLog:
    """A handler's ``ctx.log``: the connection's logger, bound only when something is logged."""

    __slots__ = ("conn",)

    def __init__(self, conn) -> None:
        self.conn = conn

    def __getattr__(self, name):
        return getattr(self.conn.log, name)


class KafkaConnection(asyncio.Protocol):
    __slots__ = (
        "broker", "listener", "transport", "proto", "queue", "task", "waiter", "linger", "ctx", "paused", "closing", "draining",
        "held", "seen", "ip", "software", "client_id", "_peer", "_log", "held_out", "inflight", "answer_due", "settle_waiter",
        "principal", "auth", "sasl", "expires", "lowat", "files", "sending", "sfd", "tpaused", "doomed",
    )  # fmt: skip

    def __init__(self, broker: Broker, listener: Listener | None = None) -> None:
        self.broker = broker
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        # made when first needed: the decoder on the first byte, the context on
        # the first request, the queue and the task while the connection is busy
        self.proto: ServerConnection | None = None
        self.queue: deque | None = None
        self.task: asyncio.Task | None = None
        self.waiter: asyncio.Future | None = None  # what the task waits on between requests
        self.linger = False  # whether the task waits for more requests: not after the first burst
        self.ctx: RequestContext | None = None
        self.paused = 0  # why reading is paused: a mask of _QUEUE, _WRITE, _POOL, _STOP
        self.closing = False
        self.draining = False
        self.held = 0  # bytes held for requests: the frame being received, queued and in-flight requests
        self.seen = 0.0  # when the last request was answered (or the connection made): for the idle sweep
        self.ip: str | None = None  # counted in broker.per_ip under this address
        self.software: str | None = None  # KIP-511: the client's software name/version, once it said
        self.client_id: str | None = None  # as its last request named it (fault injection matches on it)
        self._peer: str | None = None
        self._log = None  # bound on first use: most connections never log
        # small answers held while more requests of this connection wait, sent in one write
        self.held_out: list | None = None
        # pipelined requests started and not yet answered, in request order (_Slot), and
        # what the task waits on until they are all answered
        self.inflight: deque | None = None
        self.answer_due = False  # _answer_inflight is queued on the loop
        self.settle_waiter: asyncio.Future | None = None
        # security: who the client is (User:ANONYMOUS, User:<name> after SASL, User:<certificate
        # subject> for SSL client certificates); on a SASL listener the Authenticator until the
        # client has authenticated, then its Session, and when that session expires (monotonic)
        self.principal = ANONYMOUS
        self.auth = None
        self.sasl = None
        self.expires: float | None = None
        self.lowat: int | None = None  # TLS: the socket's SO_RCVLOWAT (see _tune_lowat)
        # answers holding FileRegions (see "sending from files" below): whether this connection
        # sends them with sendfile (None until a Fetch asks; False: through the transport, a
        # piece at a time), what is left of the one being sent, the socket's descriptor
        # duplicated for sendfile's writability watch, and whether the transport's own buffer
        # is over its high-water mark
        self.files: bool | None = None
        self.sending: deque | None = None
        self.sfd = -1  # while watching: a duplicate of the socket's descriptor
        self.tpaused = False
        # why the connection closes once the requests before a frame it could not use are
        # answered (see data_received); None while the stream is good
        self.doomed: str | None = None

    @property
    def peer(self) -> str:
        peer = self._peer
        if peer is None:
            try:
                addr = self.transport.get_extra_info("peername")
            except Exception:  # noqa: BLE001 - closed already
                addr = None
            peer = self._peer = f"{addr[0]}:{addr[1]}" if addr else "?"
        return peer

    @property
    def log(self):
        bound = self._log
        if bound is None:
            software = self.software
            bound = self._log = log.bind(peer=self.peer, client_software=software) if software else log.bind(peer=self.peer)
        return bound

    @log.setter
    def log(self, value) -> None:
        self._log = value

    def identify(self, software: str) -> None:
        """The client named its software (ApiVersions v3+): later log lines carry it."""
        self.software = software
        self._log = None

    @property
    def reading(self) -> bool:
        return not self.paused

    @property
    def in_large_frame(self) -> bool:
        """Part of a frame of ``LARGE_FRAME`` bytes or more is here, the rest still to come."""
        proto = self.proto
        return proto is not None and proto._frames.in_large_frame

    def _hold(self) -> None:
        if self.paused and not self.closing:
            self.transport.pause_reading()

    # -- asyncio.Protocol -------------------------------------------------
    def connection_made(self, transport, admitted: bool = False) -> None:
        """``admitted``: counted in already, at accept (a TLS connection, after its handshake)."""
        self.transport = transport
        self.seen = _now()
        broker = self.broker
        if not admitted and not broker.admit(self, transport):
            self.closing = True
            transport.close()
            return
        transport.set_write_buffer_limits(broker.write_high, broker.write_low)
        broker.connections.add(self)
        if broker.metrics is not None:
            broker.metrics.connection_opened(self)
        if broker.pool_capped:
            self._pause(_POOL)
            # uvloop starts reading once connection_made has returned, whatever it was told here
            broker.loop.call_soon(self._hold)
        listener = self.listener
        security = listener.security if listener is not None else None
        if security is not None:  # a listener with TLS or SASL (modules imported only then)
            if security.ssl_context is not None and _SO_RCVLOWAT:
                self.lowat = 1
            if security.client_auth != "none":
                from .security.tls import peer_principal

                self.principal = peer_principal(transport) or ANONYMOUS
            if security.sasl:
                from .security.authenticator import Authenticator

                self.auth = Authenticator(self, security, broker.scram)

    def data_received(self, data: bytes) -> None:
        if self.closing or self.doomed is not None:
            return
        if self.auth is not None:  # a SASL client that has not authenticated yet
            self._authenticate(data)
            return
        broker = self.broker
        proto = self.proto
        if proto is None:
            proto = self.proto = ServerConnection(broker.supported, broker.config.max_frame_bytes)
        frames = proto._frames
        before = frames.buffered
        try:
            events = proto.receive_data(data)
        except ProtocolError as exc:
            events = exc.events
            if not events:
                self.log.warning("closing connection: protocol error", reason=str(exc))
                self.close()
                return
            # the requests before the bad frame are answered first, then the connection closes
            # (_run), as Kafka's broker, reading one request at a time, answers them before it
            # reads the bad one; nothing more is read from it
            self.doomed = str(exc)
            self._pause(_STOP)
            added = -before  # the decoder's buffer is dropped with the stream
        else:
            added = frames.buffered - before
        queue = self.queue
        if events:
            if self.expires is not None and self._session_over(events):
                return
            arrivals = broker.arrivals
            for event in events:
                if type(event) is Request:
                    added += event.size + 4
                    if event.api_key in LIVENESS_APIS:
                        arrivals.arrived(event)  # evidence of life before the handler runs
            if queue is None:  # kept only while the connection is busy
                queue = self.queue = deque(events)
            else:
                queue.extend(events)
            waiter = self.waiter
            if waiter is not None:
                self.waiter = None
                waiter.set_result(None)
            elif self.task is None and not self.paused & _WRITE:
                self.task = broker.loop.create_task(self._run())
        held = self.held = self.held + added
        broker.request_bytes += added
        if queue and (len(queue) >= _MAX_QUEUED or held >= broker.conn_queue_bytes):
            self._pause(_QUEUE)
        if broker.request_bytes >= broker.request_bytes_limit:
            broker._pool_over(self, bool(events))
        if self.lowat is not None:
            self._tune_lowat(frames)

    def _tune_lowat(self, frames) -> None:
        """TLS connections in the middle of a large request: wake up for no less than most of its
        rest. A TLS client writes records of 16 KiB at most (librdkafka much smaller ones), and the
        transport decrypts and hands over what arrived at each wake-up, which for large requests
        cost twice the CPU of the decryption itself (bench/tls_cost.py). With SO_RCVLOWAT the
        kernel reports the socket readable only once that many bytes wait (or at EOF): the rest of
        the frame, less one TLS record (the transport may hold up to one partial record of it
        already), at most _LOWAT_MAX. Back to 1 between frames, so a small request is never held."""
        need = frames._need
        left = need - frames.buffered if need >= 0 else 0
        want = min(left - _TLS_RECORD, _LOWAT_MAX) if left > _LOWAT_MIN + _TLS_RECORD else 1
        if want != self.lowat:
            sock = self.transport.get_extra_info("socket")
            try:
                sock.setsockopt(socket.SOL_SOCKET, _SO_RCVLOWAT, want)
            except (OSError, AttributeError):
                self.lowat = None
                return
            self.lowat = want

    def pause_writing(self) -> None:
        self.tpaused = True
        self._pause(_WRITE)

    def resume_writing(self) -> None:
        self.tpaused = False
        if self.sending is not None:  # the rest of the answer first; _pump resumes once it is out
            if self.sfd < 0:
                self._pump()
            return
        self.seen = _now()
        self._resume(_WRITE)
        if (self.queue or self.doomed is not None) and self.task is None and not self.closing:
            self.task = self.broker.loop.create_task(self._run())

    def connection_lost(self, exc) -> None:
        self.closing = True
        self._drop_sending()
        broker = self.broker
        if self in broker.connections:
            broker.connections.discard(self)
            if broker.metrics is not None:
                broker.metrics.connection_closed(self)
            if self.ip is not None:
                broker._forget_ip(self.ip)
        if broker._share is not None:
            broker.share_partitions.connection_closed(self)  # its share sessions end with it (Kafka 4.4)
        task = self.task
        self.waiter = None
        if task is not None:
            self.task = None
            if not task.done():
                task.cancel()
        # everything this connection held for requests goes back to the pool,
        # and nothing it allocated waits for the cycle collector
        held = self.held
        self.held = 0
        broker.request_bytes -= held
        broker.trim_due += held + _CONN_FREED
        self.proto = None
        queue = self.queue
        if queue:
            for event in queue:
                if type(event) is Request and event.api_key in LIVENESS_APIS:
                    broker.arrivals.dropped(event)  # never handled, but sent by a live client
        self.queue = None
        self.ctx = None
        self.held_out = None
        self.inflight = None  # the started handlers finish on their own; their answers are dropped
        self.settle_waiter = None
        if broker.pool_exempt is self:
            broker.pool_exempt = None
            if broker.pool_full:
                broker._pick_exempt()
        broker._exempt_skip.discard(self)
        if broker.pool_full:
            broker.pool_released()

    # -- SASL -------------------------------------------------------------
    def _authenticate(self, data: bytes) -> None:
        """Before a SASL client has authenticated: its frames (at most ``sasl.server.max.receive.size``
        each) go one by one to the Authenticator, which answers here and now; none reaches the
        request queue. Frames that follow the one that completed it are requests as any others."""
        auth = self.auth
        proto = self.proto
        if proto is None:
            proto = self.proto = ServerConnection(self.broker.supported, min(auth.max_receive, self.broker.config.max_frame_bytes))
        try:
            frames = proto._frames.feed(data)
        except FrameError as exc:
            auth.failure = ("oversized" if "exceeds" in str(exc) else "malformed", str(exc))
            self._auth_closed(auth)
            return
        for i, frame in enumerate(frames):
            try:
                out, close = auth.receive(frame)
            except Exception as exc:  # noqa: BLE001 - a bug in the authenticator: close only this connection
                self.log.error("authenticator failed", exc_info=exc)
                hook = self.broker.on_handler_error
                if hook is not None:
                    hook("SaslAuthenticator", Request(-1, 0, 0, None, None, len(frame)), exc)
                self.close()
                return
            if out is not None and not self.closing:
                self.transport.write(out)
            if close:
                self._auth_closed(auth)
                return
            self.seen = _now()
            if auth.complete:
                session = auth.session
                self.auth = None
                self.sasl = session
                self.principal = session.principal
                self.expires = session.expires
                self.broker.auth_event(self, session.mechanism, None)
                rest = b"".join(encode_frame(f) for f in frames[i + 1 :]) + proto._frames.take_pending()
                self.proto = None  # the next one takes frames up to socket.request.max.bytes
                if rest:
                    self.data_received(rest)
                return

    def _auth_closed(self, auth) -> None:
        self.broker.auth_event(self, auth.mechanism, auth.failure or ("illegal_state", "closed"))
        self.close()

    def _session_over(self, events) -> bool:
        """A SASL session with an expiry (KIP-368): past it, any request but SaslHandshake (which may
        start a re-authentication) closes the connection; during a re-authentication, any but
        SaslAuthenticate. True if it closed."""
        session = self.sasl
        if session.reauthenticating:
            allowed, why = 36, "a request other than SaslAuthenticate during re-authentication"
        elif session.expired():
            allowed, why = 17, "the SASL session expired (connections.max.reauth.ms) without re-authentication"
        else:
            return False
        for event in events:
            if event.api_key != allowed:
                self.broker.auth_event(self, session.mechanism, ("expired_session" if allowed == 17 else "illegal_state", why), reauth=True)
                self.close()
                return True
        return False

    def answer_now(self, event: Request) -> bytes | None:
        """Answer ``event`` here and now, outside the request task (ApiVersions before SASL
        authentication); None if its handler failed (the connection is then closed)."""
        if self.ctx is None:
            self.ctx = RequestContext(self.broker, self, _ConnectionLog(self))
        self.ctx.request = event
        coro = HANDLERS[event.api_key].handle(self.ctx, event.body)
        try:
            coro.send(None)
        except StopIteration as stop:
            try:
                return self._encode(event, stop.value)
            except Exception as exc:  # noqa: BLE001 - an encoder bug: as a handler's
                self._handler_failed(event, exc)
                return None
        except Exception as exc:  # noqa: BLE001 - a handler bug must not take the broker down
            self._handler_failed(event, exc)
            return None
        coro.close()
        self._handler_failed(event, RuntimeError(f"{HANDLERS[event.api_key].NAME} waited while answered before authentication"))
        return None

    def answer_unsupported(self, event: UnsupportedVersion) -> bytes:
        if self.ctx is None:
            self.ctx = RequestContext(self.broker, self, _ConnectionLog(self))
        return self._unsupported(event)

    def answer_and_close(self, body) -> None:
        """Send ``body`` as the answer to the request being handled, then close (a failed SASL
        re-authentication); the handler then returns None. Earlier answers go first."""
        event = self.ctx.request
        self._send_held()
        if body is not None and not self.closing:
            self.transport.write(self._encode(event, body))
        self.close()

    # -- processing -------------------------------------------------------
    def _pause(self, why: int) -> None:
        if not self.paused and not self.closing:
            self.transport.pause_reading()
        self.paused |= why

    def _resume(self, why: int) -> None:
        if self.paused & why:
            self.paused &= ~why
            if not self.paused and not self.closing:
                self.transport.resume_reading()

    def wake(self) -> None:
        """End the task if it is waiting for requests (the sweep, the broker stopping)."""
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            waiter.set_result(None)

    def stop_reading(self) -> None:
        if self.transport is not None:
            self._pause(_STOP)

    def close(self) -> None:
        """Close once what was answered has been written: answers held for coalescing first (the
        requests before one that closes the connection are answered, as by Kafka, which handles
        one request at a time)."""
        if self.held_out is not None and not self.closing:
            self._send_held()
        sending = self.sending
        if sending is not None and not self.closing:
            if sum(part.size for part in sending if type(part) is FileRegion) > _PIECE:
                # a client that is not taking its answer (the broker stopping, say): its records
                # stay in the files, not read into memory for a transport that may never drain
                self.abort()
                return
            self._write_rest()  # the transport sends what it holds before it closes
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Close now, dropping unsent answers (the idle sweep: the client may not be reading)."""
        self.closing = True
        self._drop_sending()
        if self.transport is not None:
            self.transport.abort()

    # -- sending from files -----------------------------------------------
    # A Fetch answer may hold FileRegions (storage/segment.py) among its buffers: batches of
    # a segment file, not read into memory. The connection hands the answer's parts to the
    # kernel in order, bytes through the transport and each region one of two ways:
    #
    # - with sendfile(2) from the page cache (plain TCP), once the transport has written all
    #   it holds. Where the socket is full it waits until the socket is writable (a watch on
    #   a duplicate of its descriptor: the event loop watches the transport's own), with
    #   reading paused and the task ended as for a full transport buffer (_WRITE);
    # - read a piece (_PIECE) at a time and written through the transport, while the
    #   transport is under its high-water mark; resume_writing carries on. TLS connections
    #   do this (the transport encrypts), and so does a plain one once the broker's budget
    #   of descriptors for waiting answers is spent.
    #
    # Either way a client that does not read holds its regions, the transport's high-water
    # mark and at most one piece, never its answer's bytes: the bounds above hold whatever
    # it asked for. Regions are pinned (FileRegion.pin) when the answer is handed over, so
    # their file stays readable if its log is closed meanwhile; pinning shares the file's
    # descriptor. The duplicates of waiting sockets are counted broker-wide
    # (Broker.waiting_fds): past a quarter of the process's limit a connection sends through
    # its transport instead, so clients that do not read cannot take the descriptors the logs
    # and new connections need. Only the connection's task writes an answer with regions, and
    # it writes nothing more until it is out; the paths that write outside the task
    # (_send_held, _answer_inflight) queue behind it.

    def sends_files(self) -> bool:
        """Whether a Fetch answer may hold FileRegions: faults not in use (their recorder keeps
        answers as they are)."""
        if self.files is None:
            self.files = self._can_sendfile()
        faults = self.broker.faults
        return not self.closing and (faults is None or not faults.active)

    def _can_sendfile(self) -> bool:
        transport = self.transport
        listener = self.listener
        if transport is None or transport.get_extra_info("sslcontext") is not None:
            return False
        if listener is not None and listener.security is not None and listener.security.ssl_context is not None:
            return False
        return transport.get_extra_info("socket") is not None

    def _send_files(self, out: list) -> None:
        """Write an answer that holds FileRegions."""
        for part in out:
            if type(part) is FileRegion:
                part.pin()
        self.sending = deque(out)
        self._pump()

    def _pump(self) -> None:
        """Hand what is left of ``sending`` to the kernel; wait for the socket or the transport
        where it is full. Never raises: it runs from the task and as the event loop's writer
        callback, which an exception would leave registered, called again and again."""
        try:
            self._pump_parts()
        except Exception as exc:  # noqa: BLE001 - a broker bug: close this connection only
            self._send_failed(exc)

    def _pump_parts(self) -> None:
        sending = self.sending
        if sending is None or self.closing:
            return
        transport = self.transport
        while sending:
            part = sending[0]
            if type(part) is not FileRegion:
                sending.popleft()
                transport.write(part)
                continue
            if not part.size:  # nothing (left) to send of it
                sending.popleft()
                part.release()
                continue
            if transport.is_closing():  # the write before failed (the client has gone): connection_lost follows
                self._drop_sending()
                return
            if not self.files:  # through the transport, a piece at a time
                if self.tpaused:
                    return  # resume_writing carries on
                n = min(part.size, _PIECE)
                try:
                    data = part.read(n)
                except OSError as exc:
                    self.log.warning("closing connection: a fetched segment could not be read", error=str(exc))
                    self._abort_soon()
                    return
                if len(data) < n:
                    self._cut_short(part)
                    return
                part.pos += n
                part.size -= n
                if not part.size:
                    sending.popleft()
                    part.release()
                transport.write(data)  # may call pause_writing
                continue
            if transport.get_write_buffer_size():
                break  # the bytes before the region first
            try:
                sent = os.sendfile(transport.get_extra_info("socket").fileno(), part.fd, part.pos, part.size)
            except BlockingIOError:
                break
            except OSError as exc:  # the client has gone (reset, broken pipe)
                self.log.debug("closing connection: sendfile failed", error=str(exc))
                self._abort_soon()
                return
            if not sent:
                self._cut_short(part)
                return
            part.pos += sent
            part.size -= sent
            if part.size:
                break
            sending.popleft()
            part.release()
        else:
            self._unwatch()
            if self.paused & _WRITE and not self.tpaused:
                self.resume_writing()
            return
        # the socket is full: wait until it can take more
        if self.sfd < 0 and not self._watch():
            self.files = False  # the broker's descriptors for waiting answers are spent: through the transport
            self._pump()
            return
        self._pause(_WRITE)

    def _cut_short(self, part: FileRegion) -> None:
        """The file ends before the region does: it was truncated under the answer. The frame
        cannot be finished, so the connection closes (what was sent of it is cut short)."""
        self.log.warning("closing connection: a fetched segment file was cut short while sent", region=repr(part))
        self._abort_soon()

    def _abort_soon(self) -> None:
        """``abort`` from ``_pump``, which may run inside the transport's ``resume_writing``: the
        stdlib loop's transport must not be closed there (its write callback, finding it closing
        and its buffer empty, would end the connection a second time: an exception in the event
        loop). Nothing more is written meanwhile."""
        self.closing = True
        self._drop_sending()
        self.broker.loop.call_soon(self.abort)

    def _send_failed(self, exc: Exception) -> None:
        """Sending an answer raised: a broker bug. Logged and reported as a handler's failure
        (tests fail on it), and only this connection is closed."""
        # only a Fetch answer is sent this way; its request may be gone (the task ended)
        event = Request(1, -1, -1, self.client_id, None, 0)
        self.log.error("handler failed", api="Fetch", stage="sending the answer", exc_info=exc)
        hook = self.broker.on_handler_error
        if hook is not None:
            hook("Fetch", event, exc)
        self._abort_soon()

    def _watch(self) -> bool:
        """Watch a duplicate of the socket's descriptor, within the broker's budget of
        descriptors held by waiting answers; False where it is spent (or the process is out
        of descriptors)."""
        broker = self.broker
        if broker.waiting_fds >= broker.waiting_fds_max:
            return False
        try:
            self.sfd = os.dup(self.transport.get_extra_info("socket").fileno())
        except OSError:
            return False
        broker.waiting_fds += 1
        broker.loop.add_writer(self.sfd, self._pump)
        return True

    def _write_rest(self) -> None:
        """Give the transport what is left of ``sending``, regions read into memory (closing)."""
        sending = self.sending
        self._unwatch()
        try:
            for part in sending:
                if type(part) is FileRegion:
                    data = part.read()
                    if len(data) < part.size:  # the file was cut short: the frame cannot be finished
                        self.log.warning("closing connection: a fetched segment file was cut short while sent", region=repr(part))
                        self.abort()
                        return
                    part = data
                self.transport.write(part)
        except OSError as exc:
            self.log.warning("closing connection: a fetched segment could not be read", error=str(exc))
            self.abort()
        finally:
            _release(sending)

    def _drop_sending(self) -> None:
        """Stop sending from files: what is left of ``sending`` is dropped."""
        sending = self.sending
        if sending is not None:
            self._unwatch()
            _release(sending)

    def _unwatch(self) -> None:
        self.sending = None
        if self.sfd >= 0:
            broker = self.broker
            broker.loop.remove_writer(self.sfd)
            os.close(self.sfd)
            self.sfd = -1
            broker.waiting_fds -= 1

    def _released(self, n: int) -> None:
        """A request of ``n`` bytes was handled (the uncommon cases: large, or the pool full)."""
        broker = self.broker
        if broker.pool_full:
            broker.pool_released()
        if n >= _LARGE:
            broker.trim_due += n

    async def _run(self) -> None:
        """Handle the queued requests in order.

        Between requests the task waits on a bare future (``waiter``) that
        ``data_received`` completes; once the connection has been quiet for
        ``_LINGER`` seconds the sweep completes it instead and the task ends,
        so an idle connection has no task. The first task of a connection
        does not wait: many connections make a request or two and idle. A
        task also ends while the client is not reading its answers
        (``resume_writing`` starts another).
        """
        queue = self.queue
        broker = self.broker
        if self.ctx is None:
            self.ctx = RequestContext(broker, self, _ConnectionLog(self))
        unstarted = None  # a group member's request taken from the queue, its handler not run yet
        try:
            while True:
                while queue:
                    if self.paused or self.closing:  # one test on the common path
                        if self.paused & _WRITE or self.closing:
                            self.seen = _now()
                            return
                        if self.paused & _QUEUE and len(queue) < _MAX_QUEUED // 2 and self.held < broker.conn_queue_bytes:
                            self._resume(_QUEUE)
                    event = queue.popleft()
                    if type(event) is Request and event.api_key in LIVENESS_APIS:
                        unstarted = event  # still evidence of life while it waits below (arrivals.py)
                    if type(event) is Request and event.api_key in PIPELINED and not broker.hooked:
                        inflight = self.inflight
                        if inflight and len(inflight) >= _MAX_INFLIGHT:
                            await self._settle()
                            if self.closing:
                                return
                        if unstarted is not None:
                            broker.arrivals.started(unstarted)
                            unstarted = None
                        out = self._start(event)
                        if out is _STARTED:
                            continue
                    else:
                        if self.inflight:
                            await self._settle()  # any other request waits until the pipelined ones are answered
                            if self.closing:
                                return
                        if unstarted is not None:
                            broker.arrivals.started(unstarted)
                            unstarted = None
                        out = await self._dispatch(event)
                    if self.closing:  # connection_lost has given back what it held
                        return
                    if type(event) is Request:
                        # the context keeps the last request for its header (faults match on its
                        # client id): not its body, which for a Produce holds the records
                        event.body = None
                        n = event.size + 4
                        self.held -= n
                        broker.request_bytes -= n
                        if n >= _LARGE or broker.pool_full:
                            self._released(n)
                    if out is not None:
                        if type(out) is bytes:
                            if queue and len(out) < _COALESCE:
                                # more requests wait (a pipelining client): hold the answer so the
                                # answers of one burst leave in one write; see _send_held
                                held_out = self.held_out
                                if held_out is None:
                                    held_out = self.held_out = [out]
                                    broker.loop.call_soon(self._send_held)  # if a handler waits before the burst ends
                                else:
                                    held_out.append(out)
                                    if len(held_out) >= _COALESCE_COUNT:
                                        self._send_held()
                                continue
                            if len(out) >= _LARGE:
                                broker.trim_due += len(out)
                            if self.held_out is not None:
                                self.held_out.append(out)
                                self._send_held()
                            else:
                                self.transport.write(out)  # may call pause_writing
                        else:  # a list of buffers (a Fetch answer's records are not copied into it)
                            n = 0
                            files = False
                            for b in out:
                                if type(b) is FileRegion:  # sent from the file: no memory to trim
                                    files = True
                                else:
                                    n += len(b)
                            if n >= _LARGE:
                                broker.trim_due += n
                            if self.held_out is not None:
                                self._send_held()
                            if files:
                                self._send_files(out)  # may pause (_WRITE)
                            else:
                                self.transport.writelines(out)  # may call pause_writing
                self.seen = _now()  # idle from here on (the sweep's clock)
                if self.doomed is not None:  # the requests before a bad frame are answered: close
                    if self.inflight:
                        await self._settle()
                    self._send_held()
                    if self.paused & _WRITE:  # once the client has taken them (resume_writing)
                        return
                    self.log.warning("closing connection: protocol error", reason=self.doomed)
                    self.close()
                    return
                if self.paused & _QUEUE:
                    self._resume(_QUEUE)
                if self.draining or self.closing:
                    return
                if not self.linger:  # a connection's first requests (ApiVersions, say) may be its last
                    self.linger = True
                    return
                waiter = self.waiter = broker.loop.create_future()
                await waiter
                if not queue:  # woken by the sweep (or the broker stopping)
                    return
        except Exception as exc:  # noqa: BLE001 - a bug outside the handlers (answering an unsupported version, say)
            event = self.ctx.request if self.ctx is not None else None
            self.log.error("connection task failed", exc_info=exc)
            if event is not None:
                self._handler_failed(event, exc)
            else:
                self.close()
        except asyncio.CancelledError:
            if not self.closing and not asyncio.current_task().cancelling():
                # a handler awaited a future someone else cancelled: a broker bug, and the
                # client would wait forever for answers that never come
                self.log.error("connection task ended by a cancellation it was not sent", exc_info=True)
                event = self.ctx.request if self.ctx is not None else None
                if event is not None:
                    self._handler_failed(event, RuntimeError("the handler awaited a future that was cancelled"))
                else:
                    self.close()
        finally:
            if unstarted is not None:  # the connection closed while it waited behind pipelined requests
                broker.arrivals.dropped(unstarted)
            if self.task is asyncio.current_task():
                self.task = None
                self.waiter = None
                if not queue:
                    self.queue = None
                    ctx = self.ctx
                    if ctx is not None and not self.closing:  # quiet: the context is made again on the next request
                        request = ctx.request
                        if request is not None:
                            self.client_id = request.client_id
                        self.ctx = None
                    proto = self.proto
                    if proto is not None and not proto._frames.in_frame:
                        self.proto = None  # quiet: the decoder is made again on the next byte

    # -- pipelined requests ------------------------------------------------
    # A request of an API in PIPELINED is started at once, even while earlier requests of
    # the connection wait for their records to be durable: its handler's synchronous
    # ``begin`` does its work and returns the answer, or a Pending (broker/pending.py) of it.
    # One answered at once is answered as any other; one that waits becomes a _Slot in
    # ``inflight``, finished by its future's done-callback, and answered when it and every
    # slot before it are done (in request order, in one write). Any other request waits until ``inflight`` is empty,
    # so it sees what a connection that handles one request at a time would show it.

    def _start(self, event: Request):
        """Start a pipelined request (its handler's ``begin``): its framed answer (or None) if
        it is answered at once and nothing is in flight, else ``_STARTED`` (its slot answers it)."""
        self.ctx.request = event
        try:
            answer = HANDLERS[event.api_key].begin(self.ctx, event.body)
            pending = type(answer) is Pending
            out = None if pending or answer is None else self._encode(event, answer)
        except Exception as exc:  # noqa: BLE001 - a handler bug must not take the broker down
            self._handler_failed(event, exc)
            return _STARTED  # the connection is closing: nothing more is answered
        inflight = self.inflight
        if not pending and not inflight:
            return out  # the common path does the rest
        if inflight is None:
            inflight = self.inflight = deque()
        slot = _Slot(self, event, answer if pending else None)
        inflight.append(slot)
        if pending:
            answer.future.add_done_callback(slot.finished)
        else:
            slot.out = out
            slot.done = True
        return _STARTED

    def _finished(self, slot: _Slot) -> None:
        """A slot's answer is ready: encode it; if the slot is at the head of ``inflight``, answer it
        (and the finished ones behind it)."""
        try:
            body = slot.pending.result()
            slot.out = None if body is None or self.closing else self._encode(slot.event, body)
        except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - a handler bug must not take the broker down
            if not self.closing:
                self._handler_failed(slot.event, exc)
            return
        slot.pending = None
        slot.done = True
        if not self.answer_due:
            inflight = self.inflight
            if inflight and inflight[0] is slot:
                # answered after the callbacks already queued: the slots after it whose appends
                # completed in the same round of flushes go in the same write
                self.answer_due = True
                self.broker.loop.call_soon(self._answer_inflight)

    def _answer_inflight(self) -> None:
        """Write the answers of the finished slots at the head of ``inflight``, in one call."""
        self.answer_due = False
        inflight = self.inflight
        if self.closing or not inflight:
            return
        if self.held_out is not None:
            self._send_held()  # answers of earlier requests first
        broker = self.broker
        out: list = []
        while inflight and inflight[0].done:
            slot = inflight.popleft()
            n = slot.event.size + 4
            self.held -= n
            broker.request_bytes -= n
            if n >= _LARGE or broker.pool_full:
                self._released(n)
            answer = slot.out
            if answer is not None:
                if type(answer) is bytes:
                    out.append(answer)
                else:
                    out += answer
        if out:
            self._write(out)
        if not inflight:
            waiter = self.settle_waiter
            if waiter is not None:
                self.settle_waiter = None
                waiter.set_result(None)

    async def _settle(self) -> None:
        """Wait until every pipelined request of the connection has been answered (or it closed)."""
        while self.inflight and not self.closing:
            waiter = self.settle_waiter = self.broker.loop.create_future()
            await waiter

    def _send_held(self) -> None:
        """Write the held answers, in order, in one call (one send(2) where the socket takes it)."""
        held_out = self.held_out
        if held_out is None:
            return
        self.held_out = None
        if not self.closing:
            self._write(held_out)

    def _write(self, out: list) -> None:
        """Write answers in one call, behind an answer still being sent from files."""
        if self.sending is not None:
            self.sending.extend(out)
        elif len(out) > 1:
            self.transport.writelines(out)
        else:
            self.transport.write(out[0])

    async def _dispatch(self, event) -> bytes | list | None:
        if self.broker.hooked:
            return await self._dispatch_hooked(event)
        ctx = self.ctx
        if isinstance(event, UnsupportedVersion):
            return self._unsupported(event)
        assert isinstance(event, Request)
        ctx.request = event
        try:
            body = await HANDLERS[event.api_key].handle(ctx, event.body)
            if body is None:  # e.g. Produce with acks=0
                return None
            return self._encode(event, body)
        except OSError as exc:  # the disk (full, failing) under a write no handler maps itself
            return self._storage_failed(event, exc)
        except Exception as exc:  # a handler bug must not take the broker down
            self._handler_failed(event, exc)
            return None

    def _storage_failed(self, event: Request, exc: OSError) -> bytes | list | None:
        """A handler's write failed on the disk (ENOSPC, EIO): KAFKA_STORAGE_ERROR in every error
        code of the answer, as Kafka answers a KafkaStorageException; the broker and the
        connection go on (the handler changed nothing it did not undo: docs/reliability.md)."""
        from .faults import NO_RESPONSE, error_response

        self.log.error("storage error", api=HANDLERS[event.api_key].NAME, error=str(exc), errno=exc.errno)
        try:
            body = error_response(event, ErrorCode.kafka_storage_error, str(exc))
            return None if body is NO_RESPONSE else self._encode(event, body)
        except Exception as inner:  # noqa: BLE001 - no answer of that shape: as any other failure
            self._handler_failed(event, inner)
            return None

    def _handler_failed(self, event: Request, exc: Exception) -> None:
        """A handler, or the encoding of its answer, raised: a broker bug. Log it, tell the
        broker's ``on_handler_error`` hook (tests fail on it), close only this connection."""
        handler = HANDLERS[event.api_key]
        self.log.error(
            "handler failed", api=handler.NAME, version=event.api_version, client_id=event.client_id, exc_info=exc
        )
        hook = self.broker.on_handler_error
        if hook is not None:
            hook(handler.NAME, event, exc)
        self.close()

    def _encode(self, event: Request, body) -> bytes | list:
        """The framed answer: ``bytes``, or a list of buffers to write in order (a fast
        encoder's answer holding record bytes it did not copy: see ``protocol/fast.py``)."""
        fast = FAST_ENCODERS.get((event.api_key, event.api_version))
        if fast is not None:
            return fast(event.api_version, event.correlation_id, body)
        cls = response_class(event.api_key, event.api_version)
        return ServerConnection.encode_response(event.api_key, event.api_version, event.correlation_id, build(cls, body))

    async def _dispatch_hooked(self, event) -> bytes | list | None:
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
            try:
                body = await HANDLERS[event.api_key].handle(self.ctx, event.body)
            except OSError as exc:
                return self._storage_failed(event, exc)
            except Exception as exc:  # a handler bug must not take the broker down
                self._handler_failed(event, exc)
                return None
        else:  # a planned answer: faults are in use, so broker.faults is imported already
            from .faults import NO_RESPONSE

            if body is NO_RESPONSE:
                body = None
        if delay:
            await asyncio.sleep(delay)
        try:
            out = None if body is None or self.closing else self._encode(event, body)
        except Exception as exc:
            self._handler_failed(event, exc)
            return None
        if faults is not None:
            faults.recorded(self, event, body, plan)
        if metrics is not None:
            metrics.observe(self, event, body, None, time.perf_counter() - t0, _answer_size(out) if out else 0)
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
        body = drop_unknown(cls, body, {"error_code"})  # Produce, OffsetCommit... have no top-level error code
        return ServerConnection.encode_response(event.api_key, version, event.correlation_id, build(cls, body))


class _Slot:
    """A pipelined request being handled: what its answer waits on, and its answer once done."""

    __slots__ = ("conn", "event", "pending", "out", "done")

    def __init__(self, conn: KafkaConnection, event: Request, pending: Pending | None) -> None:
        self.conn = conn
        self.event = event
        self.pending = pending
        self.out = None
        self.done = False

    def finished(self, _fut=None) -> None:
        self.conn._finished(self)


_STARTED = object()  # KafkaConnection._start: the request's slot will answer it


async def run(config: BrokerConfig) -> int:
    broker = Broker(config)
    t0 = time.monotonic()
    try:
        await broker.start()
    except datadir.DataDirError as exc:
        log.error(str(exc), **exc.fields)
        return 1
    except OSError as exc:
        failed_bind = getattr(broker, "failed_bind", None)
        if failed_bind is None:  # reading the data directory failed
            log.error("cannot start", data_dir=str(config.data_dir), error=str(exc))
            return 1
        name, host, port = failed_bind
        log.error("cannot listen", listener=name, host=host, port=port, error=str(exc))
        return 1
    except RuntimeError as exc:
        from .metadata_load import MetadataError
        from .security.authorizer import AclStoreError
        from .security.scram import ScramStoreError

        if not isinstance(exc, (ScramStoreError, AclStoreError, MetadataError)):
            raise
        log.error("cannot start", error=str(exc))
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, diagnostics.dump, broker)
    sys.stdout.write(ready_lines(broker))
    sys.stdout.flush()
    log.info("ready", startup_ms=round((time.monotonic() - t0) * 1000, 1), pid=os.getpid())
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    return 0


def listen_now(server) -> None:
    """Put a server made with ``start_serving=False`` in the listening state now. Bound but not
    listening, its port could still be bound by another process (SO_REUSEADDR), which would
    then find out only after loading its data directory; accepting waits for start_serving()."""
    for transport_socket in server.sockets:
        sock = socket.socket(fileno=transport_socket.fileno())
        try:
            sock.listen(_BACKLOG)
        finally:
            sock.detach()  # the server owns the descriptor


def ready_lines(broker: Broker) -> str:
    """``READY host:port`` for the first listener, then ``LISTENER NAME host:port``
    for every listener and ``METRICS host:port`` when metrics are served."""
    first = broker.listeners[0]
    lines = [f"READY {first.host or '0.0.0.0'}:{first.port}"]
    lines += [f"LISTENER {li.name} {li.host or '0.0.0.0'}:{li.port}" for li in broker.listeners]
    if broker.metrics is not None and broker.metrics.port is not None:
        lines.append(f"METRICS {broker.metrics.host}:{broker.metrics.port}")
    return "".join(line + "\n" for line in lines)
