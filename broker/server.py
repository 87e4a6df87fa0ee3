"""The broker: owns the cluster state, the coordinators and the listening sockets.

``Broker`` binds one server per listener (``broker.listeners``), locks and
loads the data directory, starts the coordinators, and stops it all in order.
The network side lives in broker/net/ (see its package docstring): each
connection is a ``broker.net.connection.KafkaConnection``, and the connection
limits, the broker-wide request pool and the periodic sweep are
``broker.net.admission.Admission``, a part of ``Broker``.

A connection knows its listener, so Metadata and FindCoordinator give each
client the address of the listener it came through. SSL and SASL_SSL listeners
are TLS servers (the transport decrypts; a handshake not done within
``ssl_handshake_timeout_ms`` is closed): ``security.tls.TlsAccept`` counts a
connection in at accept, so ``max.connections`` sees handshakes in progress,
then upgrades it with ``start_tls``; a failed handshake is logged on one line
and counted (``kafkalite_tls_handshake_failures``). A connection's
``principal`` is what the handlers check against ACLs
(``broker.security.authorizer``, when ``authorizer.class.name`` is set;
``Broker.authorizer`` is None otherwise, and each handler's checks are one
attribute test). Fault injection (``broker.faults``) and metrics
(``broker.metrics``) hook the dispatch path only when in use: the plain path
pays one attribute check (``Broker.hooked``).

``run`` is ``python -m broker serve``: start, print the READY lines, serve until
SIGTERM or SIGINT, stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
import time

from . import datadir, diagnostics, memory
from .cluster import Cluster
from .config import BrokerConfig
from .coordinator.common import GroupConfig
from .coordinator_runtime.constants import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from .coordinator.service import GroupCoordinator
from .handlers import supported_versions
from .listeners import Listener
from .logs import get_logger
from .metadata_load import load_cluster
from .net.admission import Admission, listen_now
from .net.common import _MAX_INFLIGHT, _PIECE, _POOL, _WRITE
from .net.connection import KafkaConnection

# what other modules and the tests take from here
__all__ = ["_MAX_INFLIGHT", "_PIECE", "_POOL", "_WRITE", "Broker", "KafkaConnection", "listen_now", "ready_lines", "run"]

log = get_logger("server")


class Broker(Admission):
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
        # a node of a cluster (broker/multinode/): its image of the cluster, and while it does not
        # serve the data, the gate its requests pass (broker/multinode/standby.py); None on a single node
        self.view = None
        self.standby = None
        self.metadata_barrier = None  # on the active node, its Node: answers wait until every node applied a change
        if config.metrics_port is not None:
            from .metrics import Metrics

            self.metrics = Metrics(self)
        if faults is not None:
            faults.attach(self)
        self.update_hooks()
        self._init_admission(config)
    def update_hooks(self) -> None:
        """Recompute ``hooked`` after faults or metrics changed."""
        self.hooked = self.metrics is not None or (self.faults is not None and self.faults.active) or self.standby is not None

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
            from .txn.model import TxnConfig

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

    async def start(self, *, serve_data: bool = True) -> None:
        """Bind every port, then lock the data directory, then load it, then serve: a start
        refused for a port in use or a directory another broker holds touches nothing in it.
        ``serve_data=False`` (a cluster node on standby) binds and serves without touching the
        data directory; ``activate`` locks and loads it later."""
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
        if serve_data:
            try:
                # before anything reads or writes the directory; a single broker: no cluster on it either
                self.data_lock = datadir.lock(self.config.data_dir, alone=True)
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

    async def activate(self, *, poll_s: float = 0.02) -> None:
        """A cluster node made active: lock the data directory (waiting while the node that held
        it is still stopping, or is being killed), load it, and serve the data from now on."""
        while True:
            try:
                self.data_lock = datadir.lock(self.config.data_dir)
                break
            except datadir.DataDirError:
                await asyncio.sleep(poll_s)  # the fenced holder's flock goes with its process
        try:
            self._load()
        except BaseException:
            self._unload()
            raise
        self.standby = None
        self.update_hooks()

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
        if name == OFFSETS_TOPIC:
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



class _ShareStateOnDemand:
    """The group coordinator's share-state hook (broker/share/coordinator.py's ShareStateHook),
    made with the share coordinator when a share group first needs it."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def initialize(self, group_id: str, *args) -> dict:
        return await self.broker.share_state_hook.initialize(group_id, *args)

    async def delete(self, group_id: str, partitions: dict | None = None) -> dict:
        return await self.broker.share_state_hook.delete(group_id, partitions)


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




def ready_lines(broker: Broker) -> str:
    """``READY host:port`` for the first listener, then ``LISTENER NAME host:port``
    for every listener and ``METRICS host:port`` when metrics are served."""
    first = broker.listeners[0]
    lines = [f"READY {first.host or '0.0.0.0'}:{first.port}"]
    lines += [f"LISTENER {li.name} {li.host or '0.0.0.0'}:{li.port}" for li in broker.listeners]
    if broker.metrics is not None and broker.metrics.port is not None:
        lines.append(f"METRICS {broker.metrics.host}:{broker.metrics.port}")
    return "".join(line + "\n" for line in lines)
