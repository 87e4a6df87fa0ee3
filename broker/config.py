"""Broker configuration: defaults, a TOML file, ``KAFKALITE_*`` variables, CLI flags.

Every setting has a kafkalite name (``group_initial_rebalance_delay_ms``) and,
where Kafka has the same setting, its Kafka name
(``group.initial.rebalance.delay.ms``). Sources, weakest first:

1. the defaults below;
2. a TOML file (``--config path.toml`` or ``KAFKALITE_CONFIG``), whose keys are
   either name (nested tables are joined with dots, so ``[group.consumer]
   session.timeout.ms = 45000`` is ``group.consumer.session.timeout.ms``);
3. ``KAFKALITE_<NAME>`` environment variables (``KAFKALITE_NUM_PARTITIONS``,
   ``KAFKALITE_LOG_RETENTION_MS``);
4. the command line: ``--set name=value`` (either name), then the flags.

An unknown name (in the file or ``--set``) or an invalid value anywhere raises
``ConfigError`` naming the setting and where it came from; the CLI turns that
into exit code 2. ``docs/configuration.md`` lists every setting.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from storage.config import LogConfig

from .listeners import DEFAULT_LISTENER, ListenerError, ListenerSpec, build_specs, check_protocols, split_list

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A setting that is unknown or has an invalid value; the message says which and where."""


def _env_name(name: str) -> str:
    return "KAFKALITE_" + name.upper()


@dataclass
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    data_dir: Path = Path("./data")
    advertised_host: str | None = None
    advertised_port: int | None = None
    # named listeners (Kafka's listeners / advertised.listeners); None: one
    # PLAINTEXT listener from host, port and the advertised pair above
    listeners: list[str] | None = None
    advertised_listeners: list[str] | None = None
    listener_security_protocol_map: list[str] | None = None
    # TLS and SASL (Kafka names: the same with dots; docs/security.md). Settings that hold
    # secrets are left out of repr(), so that no traceback or log line shows them.
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: Path | None = None
    ssl_keystore_certificate_chain: str | None = None
    ssl_keystore_key: str | None = field(default=None, repr=False)
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: Path | None = None
    ssl_truststore_certificates: str | None = None
    ssl_client_auth: str = "none"  # required | requested | none
    ssl_enabled_protocols: list[str] = field(default_factory=lambda: ["TLSv1.2", "TLSv1.3"])
    ssl_handshake_timeout_ms: int = 10_000
    sasl_enabled_mechanisms: list[str] | None = None
    sasl_server_max_receive_size: int = 524_288
    connections_max_reauth_ms: int = 0
    # ACLs (broker/security/authorizer.py): unset, everything is allowed
    authorizer_class_name: str | None = None
    super_users: str | None = None
    allow_everyone_if_no_acl_found: bool = False
    # listener.name.<listener>.<setting>: listener name -> {setting key, or "<mechanism>.sasl.jaas.config"
    # and "<mechanism>.connections.max.reauth.ms" -> value}; see broker/security/settings.py
    listener_settings: dict[str, dict[str, object]] = field(default_factory=dict, repr=False)
    # what broker/security/settings.py built from the above when the configuration was checked
    security: object = field(default=None, repr=False, compare=False)
    log_format: str = "console"  # json | console
    log_level: str = "info"
    fsync: str = "interval"  # always | interval | never
    fsync_interval_ms: int = 1000
    node_id: int = 1
    nodes: int = 1  # broker processes (broker/multinode/); 1: this process is the one broker
    restart_nodes: bool = False  # the cluster's controller restarts a node that died
    broker_session_timeout_ms: int = 9000  # a cluster node's lease (Kafka's broker.session.timeout.ms)
    broker_heartbeat_interval_ms: int = 2000  # how often a node renews it (broker.heartbeat.interval.ms)
    auto_create_topics: bool = True
    num_partitions: int = 1
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    fetch_max_bytes: int = 55 * 1024 * 1024  # Kafka's default, 57671680
    # connection limits and request memory (Kafka names: the same with dots)
    queued_max_request_bytes: int = 100 * 1024 * 1024  # Kafka's default is -1, unbounded
    connections_max_idle_ms: int = 600_000
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    max_connections_per_ip_overrides: list[str] | None = None
    maintenance_interval_ms: int = 1000
    log_retention_check_interval_ms: int = 300_000
    log_initial_task_delay_ms: int = 30_000
    metrics_port: int | None = None
    metrics_host: str | None = None
    # replication (Kafka's defaults): accepted, not used; a single node keeps one copy of each partition
    default_replication_factor: int = 1
    offsets_topic_replication_factor: int = 3
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_min_isr: int = 2
    replication_settings: dict[str, int] = field(default_factory=dict, repr=False)  # the above that were given, by Kafka name
    # group coordinator (Kafka names: the same with dots)
    offsets_topic_num_partitions: int = 50
    group_initial_rebalance_delay_ms: int = 0
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    group_coordinator_append_linger_ms: int = -1
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_assignment_interval_ms: int = 1_000
    group_consumer_pending_heartbeat_interval_ms: int = 100
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_migration_policy: str = "bidirectional"
    group_share_session_timeout_ms: int = 45_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_max_size: int = 200
    group_share_assignment_interval_ms: int = 1_000
    group_share_initialize_retry_interval_ms: int = 30_000
    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_version: int = 2
    # share groups (KIP-932): the share coordinator and the share partitions (broker/share/)
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_snapshot_update_records_per_snapshot: int = 500
    share_coordinator_state_topic_prune_interval_ms: int = 300_000
    share_coordinator_cold_partition_snapshot_interval_ms: int = 300_000
    group_share_record_lock_duration_ms: int = 30_000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2000
    group_share_max_share_sessions: int = 2000
    log_defaults: LogConfig = field(default_factory=LogConfig)

    # ----------------------------------------------------------------
    @property
    def advertised(self) -> tuple[str, int]:
        """Host and port of the first listener put in Metadata; resolved after bind for ``--port 0``."""
        if self.listeners:
            return self.listener_specs()[0].advertised()
        host = self.advertised_host or self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return host, self.advertised_port or self.port

    def listener_specs(self) -> list[ListenerSpec]:
        """The listeners to bind, first one first (it is the one the READY line names)."""
        if self.listeners:
            return build_specs(self.listeners, self.advertised_listeners, self.listener_security_protocol_map)
        spec = ListenerSpec(DEFAULT_LISTENER, self.host, self.port, self.advertised_host, self.advertised_port)
        check_protocols([spec], self.listener_security_protocol_map)
        return [spec]

    def effective_log_defaults(self) -> LogConfig:
        cfg = LogConfig(**{f.name: getattr(self.log_defaults, f.name) for f in fields(LogConfig)})
        cfg.fsync = self.fsync
        cfg.fsync_interval_ms = self.fsync_interval_ms
        return cfg


# ============================================================== the settings


@dataclass(frozen=True)
class Setting:
    key: str  # kafkalite name: a BrokerConfig field, or for topic defaults the Kafka name in snake case
    kind: str  # int | bool | str | choice | path | list | topic | hours | minutes | copies (an int accepted, not used)
    doc: str
    kafka: tuple[str, ...] = ()  # Kafka names, the usual one first
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    flag: str | None = None  # the serve flag, where there is one
    topic: str | None = None  # for broker-wide topic defaults: the topic config it sets
    default: object = None  # for the docs when it is not a BrokerConfig field
    secret: bool = False  # never shown: not in messages, logs or repr()

    @property
    def env(self) -> str:
        return _env_name(self.key)

    @property
    def name(self) -> str:
        """The name shown in messages: the Kafka one where there is one."""
        return self.kafka[0] if self.kafka else self.key


def _s(key, kind, doc, kafka=(), **kw) -> Setting:
    if isinstance(kafka, str):
        kafka = (kafka,)
    if kw.get("flag") is True:
        kw["flag"] = _flag(key)
    return Setting(key, kind, doc, tuple(kafka), **kw)


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    # -- network ---------------------------------------------------------------
    _s("host", "str", "address the default listener binds", flag="--host"),
    _s("port", "int", "port of the default listener; 0 takes any free port", minimum=0, maximum=65535, flag="--port"),
    _s("advertised_host", "str", "host given to clients of the default listener", flag="--advertised-host"),
    _s("advertised_port", "int", "port given to clients of the default listener", minimum=0, maximum=65535, flag="--advertised-port"),
    _s("listeners", "list", "named listeners, NAME://host:port, comma-separated; replace host/port", "listeners", flag="--listener"),
    _s("advertised_listeners", "list", "NAME://host:port given to clients of listener NAME", "advertised.listeners", flag="--advertised-listener"),
    _s("listener_security_protocol_map", "list", "NAME:PROTOCOL pairs, PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; without it a listener named after a protocol has it, any other is PLAINTEXT", "listener.security.protocol.map"),
    _s("max_frame_bytes", "int", "largest request accepted", "socket.request.max.bytes", minimum=1, maximum=INT_MAX, flag="--max-frame-bytes"),
    _s("fetch_max_bytes", "int", "most bytes of records one Fetch answer returns, whatever the client asks (the first batch of the first partition with data may exceed it)", "fetch.max.bytes", minimum=1024, maximum=INT_MAX),
    _s("queued_max_request_bytes", "int", "request bytes held broker-wide (partial and queued requests) before reading pauses; -1: unbounded", "queued.max.request.bytes", minimum=-1, maximum=LONG_MAX),
    _s("connections_max_idle_ms", "int", "close a connection that sent no complete request for this long; -1: never", "connections.max.idle.ms", minimum=-1, maximum=LONG_MAX),
    _s("max_connections", "int", "open connections, all listeners together; more are closed at once", "max.connections", minimum=0, maximum=INT_MAX),
    _s("max_connections_per_ip", "int", "open connections from one IP address", "max.connections.per.ip", minimum=0, maximum=INT_MAX),
    _s("max_connections_per_ip_overrides", "list", "IP:COUNT pairs that replace max.connections.per.ip for those addresses", "max.connections.per.ip.overrides"),
    _s("metrics_port", "int", "serve Prometheus metrics on this port (0: any free port)", minimum=0, maximum=65535, flag="--metrics-port"),
    _s("metrics_host", "str", "address the metrics endpoint binds", flag="--metrics-host"),
    # -- TLS and SASL (docs/security.md); each may also be given for one listener as listener.name.<l>.<name>
    _s("ssl_keystore_type", "str", "format of the key store: PEM (JKS and PKCS12 are not read)", "ssl.keystore.type"),
    _s("ssl_keystore_location", "path", "PEM file with the private key (PKCS#8) and the certificate chain of TLS listeners", "ssl.keystore.location"),
    _s("ssl_keystore_certificate_chain", "str", "the certificate chain in PEM, inline (instead of ssl.keystore.location)", "ssl.keystore.certificate.chain"),
    _s("ssl_keystore_key", "str", "the private key in PEM (PKCS#8), inline; secret", "ssl.keystore.key", secret=True),
    _s("ssl_key_password", "str", "password of an encrypted private key; secret", "ssl.key.password", secret=True),
    _s("ssl_truststore_type", "str", "format of the trust store: PEM", "ssl.truststore.type"),
    _s("ssl_truststore_location", "path", "PEM file of the CA certificates that client certificates must chain to", "ssl.truststore.location"),
    _s("ssl_truststore_certificates", "str", "the trusted CA certificates in PEM, inline", "ssl.truststore.certificates"),
    _s("ssl_client_auth", "choice", "client certificates on SSL listeners: required, requested or none (for SASL_SSL only when given with the listener prefix, as in Kafka)", "ssl.client.auth", choices=("required", "requested", "none")),
    _s("ssl_enabled_protocols", "list", "TLS versions served: TLSv1.2 and/or TLSv1.3", "ssl.enabled.protocols"),
    _s("ssl_handshake_timeout_ms", "int", "kafkalite's own: a TLS handshake not finished in this time is closed", minimum=1, maximum=INT_MAX),
    _s("sasl_enabled_mechanisms", "list", "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (Kafka's default, GSSAPI, is not served)", "sasl.enabled.mechanisms"),
    _s("sasl_server_max_receive_size", "int", "largest request accepted before a SASL client has authenticated", "sasl.server.max.receive.size", minimum=1, maximum=INT_MAX),
    _s("connections_max_reauth_ms", "int", "SASL session lifetime (KIP-368): a client must re-authenticate within it, or its connection is closed at its next request; 0: no limit", "connections.max.reauth.ms", minimum=0, maximum=LONG_MAX),
    _s("authorizer_class_name", "str", "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on (the only authorizer served); unset, every request is allowed", "authorizer.class.name"),
    _s("super_users", "str", "principals allowed everything, semicolon-separated (User:admin;User:broker)", "super.users"),
    _s("allow_everyone_if_no_acl_found", "bool", "with ACLs on: a resource no ACL concerns is open to everyone (default: to no one)", "allow.everyone.if.no.acl.found"),
    # -- broker ----------------------------------------------------------------
    _s("data_dir", "path", "where logs and metadata live (one directory)", ("log.dirs", "log.dir"), flag="--data-dir"),
    _s("node_id", "int", "this broker's id", ("node.id", "broker.id"), minimum=0, maximum=INT_MAX),
    _s("nodes", "int", "broker processes of a cluster on this host, node i on the base port + i - 1 (docs/multinode.md)", minimum=1, maximum=64, flag="--nodes"),
    _s("restart_nodes", "bool", "with nodes > 1: the controller restarts a node that died (otherwise: `kafkalite cluster start-node ID`)", flag="--restart-nodes"),
    _s("broker_session_timeout_ms", "int", "a cluster node whose heartbeats stop this long is fenced (killed) and its work moves", "broker.session.timeout.ms", minimum=100, maximum=INT_MAX),
    _s("broker_heartbeat_interval_ms", "int", "how often a cluster node heartbeats to the controller", "broker.heartbeat.interval.ms", minimum=10, maximum=INT_MAX),
    _s("log_format", "choice", "json or console; logs go to stderr", choices=("json", "console"), flag="--log-format"),
    _s("log_level", "choice", "", choices=("debug", "info", "warning", "error", "critical"), flag="--log-level"),
    _s("fsync", "choice", "when data is forced to disk: always, interval or never", choices=("always", "interval", "never"), flag="--fsync"),
    _s("fsync_interval_ms", "int", "for fsync=interval", minimum=1, maximum=LONG_MAX, flag="--fsync-interval-ms"),
    _s("maintenance_interval_ms", "int", "how often flushes and compaction are checked", minimum=1, maximum=INT_MAX),
    _s("log_retention_check_interval_ms", "int", "how often retention deletes old segments", "log.retention.check.interval.ms", minimum=1, maximum=INT_MAX),
    _s("log_initial_task_delay_ms", "int", "how long after start the first retention check comes", "log.initial.task.delay.ms", minimum=0, maximum=INT_MAX),
    _s("auto_create_topics", "bool", "create unknown topics on Metadata", "auto.create.topics.enable", flag="--auto-create-topics"),
    _s("num_partitions", "int", "partitions of auto-created topics", "num.partitions", minimum=1, maximum=INT_MAX, flag="--num-partitions"),
    # -- broker-wide topic defaults (Kafka's log.* settings) --------------------
    _s("log_retention_ms", "topic", "default retention.ms; wins over the minutes and hours forms", "log.retention.ms", topic="retention.ms"),
    _s("log_retention_minutes", "minutes", "default retention, in minutes; wins over hours", "log.retention.minutes", topic="retention.ms"),
    _s("log_retention_hours", "hours", "default retention, in hours", "log.retention.hours", topic="retention.ms", default=168),
    _s("log_retention_bytes", "topic", "default retention.bytes", "log.retention.bytes", topic="retention.bytes"),
    _s("log_segment_bytes", "topic", "default segment.bytes", "log.segment.bytes", topic="segment.bytes"),
    _s("log_roll_ms", "topic", "default segment.ms; wins over log.roll.hours", "log.roll.ms", topic="segment.ms"),
    _s("log_roll_hours", "hours", "default segment.ms, in hours", "log.roll.hours", topic="segment.ms", default=168),
    _s("log_cleanup_policy", "topic", "default cleanup.policy", "log.cleanup.policy", topic="cleanup.policy"),
    _s("log_cleaner_delete_retention_ms", "topic", "default delete.retention.ms", "log.cleaner.delete.retention.ms", topic="delete.retention.ms"),
    _s("log_cleaner_min_compaction_lag_ms", "topic", "default min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", topic="min.compaction.lag.ms"),
    _s("log_cleaner_min_cleanable_ratio", "topic", "default min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", topic="min.cleanable.dirty.ratio"),
    _s("log_index_size_max_bytes", "topic", "default segment.index.bytes", "log.index.size.max.bytes", topic="segment.index.bytes"),
    _s("log_index_interval_bytes", "topic", "default index.interval.bytes", "log.index.interval.bytes", topic="index.interval.bytes"),
    _s("log_segment_delete_delay_ms", "topic", "default file.delete.delay.ms", "log.segment.delete.delay.ms", topic="file.delete.delay.ms"),
    _s("log_message_timestamp_type", "topic", "default message.timestamp.type", "log.message.timestamp.type", topic="message.timestamp.type"),
    _s("message_max_bytes", "topic", "default max.message.bytes", "message.max.bytes", topic="max.message.bytes"),
    _s("compression_type", "topic", "default compression.type (accepted, reported, not enforced)", "compression.type", topic="compression.type"),
    _s("min_insync_replicas", "topic", "default min.insync.replicas (enforced against the live nodes of a cluster: docs/multinode.md; one broker is its own ISR)", "min.insync.replicas", topic="min.insync.replicas"),
    # -- replication: accepted, so that a Kafka configuration starts; a single node keeps one copy
    _s("default_replication_factor", "copies", "replicas of topics created without a replication factor (one copy is kept)", "default.replication.factor", minimum=1, maximum=32767),
    _s("offsets_topic_replication_factor", "copies", "replicas of __consumer_offsets (one copy is kept)", "offsets.topic.replication.factor", minimum=1, maximum=32767),
    _s("transaction_state_log_replication_factor", "copies", "replicas of __transaction_state (one copy is kept)", "transaction.state.log.replication.factor", minimum=1, maximum=32767),
    _s("transaction_state_log_min_isr", "copies", "min.insync.replicas of __transaction_state (one copy is kept)", "transaction.state.log.min.isr", minimum=1, maximum=INT_MAX),
    _s("share_coordinator_state_topic_replication_factor", "copies", "replicas of __share_group_state (one copy is kept)", "share.coordinator.state.topic.replication.factor", minimum=1, maximum=32767),
    _s("share_coordinator_state_topic_min_isr", "copies", "min.insync.replicas of __share_group_state (one copy is kept)", "share.coordinator.state.topic.min.isr", minimum=1, maximum=32767),
    # -- group coordinator -------------------------------------------------------
    _s("offsets_topic_num_partitions", "int", "partitions of __consumer_offsets when it is first created", "offsets.topic.num.partitions", minimum=1, maximum=INT_MAX, flag=True),
    _s("group_initial_rebalance_delay_ms", "int", "wait for more members before the first rebalance (Kafka's default is 3000)", "group.initial.rebalance.delay.ms", minimum=0, maximum=INT_MAX, flag=True),
    _s("group_min_session_timeout_ms", "int", "smallest session timeout JoinGroup accepts", "group.min.session.timeout.ms", minimum=0, maximum=INT_MAX, flag=True),
    _s("group_max_session_timeout_ms", "int", "largest session timeout JoinGroup accepts", "group.max.session.timeout.ms", minimum=0, maximum=INT_MAX, flag=True),
    _s("group_max_size", "int", "members of a classic group", "group.max.size", minimum=1, maximum=INT_MAX, flag=True),
    _s("offsets_retention_minutes", "int", "how long committed offsets of an empty group are kept (KIP-211)", "offsets.retention.minutes", minimum=1, maximum=INT_MAX, flag=True),
    _s("offsets_retention_check_interval_ms", "int", "how often expired offsets are looked for", "offsets.retention.check.interval.ms", minimum=1, maximum=LONG_MAX, flag=True),
    _s("offset_metadata_max_bytes", "int", "largest commit metadata string", "offset.metadata.max.bytes", minimum=0, maximum=INT_MAX),
    _s("group_coordinator_append_linger_ms", "int", "how long coordinator writes wait to share a batch; -1: adaptive (the batch closes once the requests already read have run)", "group.coordinator.append.linger.ms", minimum=-1, maximum=INT_MAX, flag=True),
    _s("group_consumer_session_timeout_ms", "int", "KIP-848 session timeout", "group.consumer.session.timeout.ms", minimum=1, maximum=INT_MAX, flag=True),
    _s("group_consumer_heartbeat_interval_ms", "int", "KIP-848 heartbeat interval", "group.consumer.heartbeat.interval.ms", minimum=1, maximum=INT_MAX, flag=True),
    _s("group_consumer_assignment_interval_ms", "int", "KIP-848 target assignments: at most one per interval, computed at the first heartbeat after it (0: one per change)", "group.consumer.assignment.interval.ms", minimum=0, maximum=INT_MAX, flag=True),
    _s("group_consumer_pending_heartbeat_interval_ms", "int", "kafkalite's own: the KIP-848 heartbeat interval handed to a member waiting for partitions or revoking some, so a released partition reaches its new owner sooner; the plain interval (or more) turns it off", minimum=1, maximum=INT_MAX, flag=True),
    _s("group_consumer_max_size", "int", "members of a KIP-848 group", "group.consumer.max.size", minimum=1, maximum=INT_MAX, flag=True),
    _s("group_share_session_timeout_ms", "int", "KIP-932 share group session timeout", "group.share.session.timeout.ms", minimum=1, maximum=INT_MAX),
    _s("group_share_heartbeat_interval_ms", "int", "KIP-932 share group heartbeat interval", "group.share.heartbeat.interval.ms", minimum=1, maximum=INT_MAX),
    _s("group_share_max_size", "int", "members of a KIP-932 share group", "group.share.max.size", minimum=1, maximum=1000),
    _s("group_share_assignment_interval_ms", "int", "least time between two target assignments of a share group (KIP-1263); 0: at every change", "group.share.assignment.interval.ms", minimum=0, maximum=INT_MAX),
    _s("group_share_initialize_retry_interval_ms", "int", "how long a share partition's state initialization may be in flight before it is asked for again", "group.share.initialize.retry.interval.ms", minimum=1, maximum=INT_MAX),
    # -- transaction coordinator -------------------------------------------------
    # -- share groups (KIP-932) ---------------------------------------------------
    _s("share_coordinator_state_topic_num_partitions", "int", "partitions of __share_group_state when it is first created", "share.coordinator.state.topic.num.partitions", minimum=1, maximum=INT_MAX),
    _s("share_coordinator_snapshot_update_records_per_snapshot", "int", "ShareUpdate records written between two ShareSnapshot records of a share partition", "share.coordinator.snapshot.update.records.per.snapshot", minimum=0, maximum=500),
    _s("share_coordinator_state_topic_prune_interval_ms", "int", "how often records of __share_group_state that no state needs any more are deleted", "share.coordinator.state.topic.prune.interval.ms", minimum=1, maximum=INT_MAX),
    _s("share_coordinator_cold_partition_snapshot_interval_ms", "int", "age of a share partition's last snapshot at which pruning writes a new one", "share.coordinator.cold.partition.snapshot.interval.ms", minimum=1, maximum=INT_MAX),
    _s("group_share_record_lock_duration_ms", "int", "how long a share consumer holds an acquired record before it is delivered again", "group.share.record.lock.duration.ms", minimum=1000, maximum=3_600_000),
    _s("group_share_delivery_count_limit", "int", "deliveries of a record before it is archived", "group.share.delivery.count.limit", minimum=2, maximum=10),
    _s("group_share_partition_max_record_locks", "int", "records of a share partition acquired at once", "group.share.partition.max.record.locks", minimum=100, maximum=10_000),
    _s("group_share_max_share_sessions", "int", "share sessions the broker keeps", "group.share.max.share.sessions", minimum=1, maximum=30_000),
    _s("transaction_state_log_num_partitions", "int", "partitions of __transaction_state when it is first created", "transaction.state.log.num.partitions", minimum=1, maximum=INT_MAX),
    _s("transaction_max_timeout_ms", "int", "largest transaction.timeout.ms a producer may ask for", "transaction.max.timeout.ms", minimum=1, maximum=INT_MAX),
    _s("transactional_id_expiration_ms", "int", "how long a transactional id without a transaction is kept", "transactional.id.expiration.ms", minimum=1, maximum=INT_MAX),
    _s("transaction_abort_timed_out_transaction_cleanup_interval_ms", "int", "how often transactions past their timeout are looked for and aborted", "transaction.abort.timed.out.transaction.cleanup.interval.ms", minimum=1, maximum=INT_MAX),
    _s("transaction_version", "int", "the finalized level of Kafka's transaction.version feature (kafka-features): 2 is transactions V2 (KIP-890: partitions added by Produce, an epoch bump per transaction), as a new Kafka 4.x cluster; 0 makes clients use transactions V1", minimum=0, maximum=2),
    _s(
        "group_consumer_migration_policy",
        "choice",
        "classic <-> consumer group conversion",
        "group.consumer.migration.policy",
        choices=("bidirectional", "upgrade", "downgrade", "disabled"),
        flag=True,
    ),
)

BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
_BY_NAME: dict[str, Setting] = {}
for _setting in SETTINGS:
    _BY_NAME[_setting.key] = _setting
    _BY_NAME[_setting.key.replace("_", "-")] = _setting
    for _k in _setting.kafka:
        _BY_NAME[_k] = _setting
_DEFAULT_LISTENER_KEYS = ("host", "port", "advertised_host", "advertised_port")


# settings that may also be given for one listener: listener.name.<listener>.<Kafka name>
PER_LISTENER = frozenset(s.key for s in SETTINGS if s.key.startswith(("ssl_", "sasl_")) or s.key == "connections_max_reauth_ms")
LISTENER_PREFIX = "listener.name."
# and these, after a SASL mechanism: listener.name.<listener>.<mechanism>.<suffix>
_MECHANISM_SUFFIXES = {
    ".sasl.jaas.config": ("str", "the JAAS login module and its options for this listener and mechanism", True, None),
    ".connections.max.reauth.ms": ("int", "connections.max.reauth.ms for this listener and mechanism", False, LONG_MAX),
}
_LISTENER_KEYS: dict[str, tuple[str, str]] = {}  # key of a listener setting -> (LISTENER, setting key or mechanism form)


def _listener_setting(name: str) -> Setting:
    """``listener.name.<listener>.<setting>`` as a Setting of its own (one key per listener and setting)."""
    rest = name[len(LISTENER_PREFIX) :]
    listener, dot, tail = rest.partition(".")
    if not dot or not listener or not tail:
        raise ConfigError(f"unknown setting {name!r} (expected listener.name.<listener>.<setting>)")
    listener = listener.upper()
    for suffix, (kind, doc, secret, maximum) in _MECHANISM_SUFFIXES.items():
        if tail.endswith(suffix) and len(tail) > len(suffix):
            mechanism = tail[: -len(suffix)].lower()
            setting = mechanism + suffix
            key = f"{LISTENER_PREFIX}{listener.lower()}.{setting}"
            _LISTENER_KEYS[key] = (listener, setting)
            return Setting(key, kind, doc, (key,), minimum=0 if kind == "int" else None, maximum=maximum, secret=secret)
    base = _BY_NAME.get(tail)
    if base is None or base.key not in PER_LISTENER:
        allowed = sorted(BY_KEY[k].name for k in PER_LISTENER)
        raise ConfigError(
            f"unknown setting {name!r}: after listener.name.<listener>. comes one of {', '.join(allowed)}, "
            f"or <mechanism>.sasl.jaas.config or <mechanism>.connections.max.reauth.ms"
        )
    key = f"{LISTENER_PREFIX}{listener.lower()}.{base.name}"
    _LISTENER_KEYS[key] = (listener, base.key)
    return Setting(key, base.kind, base.doc, (key,), base.minimum, base.maximum, base.choices, secret=base.secret)


def listener_key(key: str) -> tuple[str, str] | None:
    """(LISTENER, setting) for the key of a listener setting (``lookup`` made it), else None."""
    return _LISTENER_KEYS.get(key)


def lookup(name: str) -> Setting:
    """The setting called ``name`` (kafkalite or Kafka name); ConfigError if there is none."""
    s = _BY_NAME.get(name.strip())
    if s is None and name.strip().startswith(LISTENER_PREFIX):
        return _listener_setting(name.strip())
    if s is None:
        import difflib

        hint = difflib.get_close_matches(name, list(_BY_NAME), n=1)
        raise ConfigError(f"unknown setting {name!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    return s


def default_of(s: Setting):
    """The default value, for the docs."""
    if s.topic is not None:
        if s.default is not None:
            return s.default
        if s.kind == "minutes":
            return None
        return LogConfig().to_kafka().get(s.topic)
    f = {f.name: f for f in fields(BrokerConfig)}[s.key]
    if f.default is MISSING and f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


# ============================================================== parsing


def _as_int(s: Setting, value) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, int):
        v = value
    elif isinstance(value, str):
        try:
            v = int(value.strip())
        except ValueError:
            raise ValueError(f"expected an integer, got {value!r}") from None
    else:
        raise ValueError(f"expected an integer, got {value!r}")
    if s.minimum is not None and v < s.minimum:
        raise ValueError(f"{v} is below the minimum, {s.minimum}")
    if s.maximum is not None and v > s.maximum:
        raise ValueError(f"{v} is above the maximum, {s.maximum}")
    return v


def _convert(s: Setting, value):
    kind = s.kind
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if kind in ("int", "hours", "minutes", "copies"):
        v = _as_int(s, value)
        if kind == "hours":
            return str(v * 3_600_000)
        if kind == "minutes":
            return str(v * 60_000)
        return v
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    if kind in ("str", "path"):
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {value!r}")
        if kind == "path":
            if s.key == "data_dir" and "," in value:
                raise ValueError("kafkalite keeps its data in one directory")
            return Path(value)
        return value
    if kind == "choice":
        text = str(value).strip().lower()
        if s.key == "log_level" and text == "warn":
            text = "warning"
        if text not in s.choices:
            raise ValueError(f"expected one of {', '.join(s.choices)}, got {value!r}")
        return text
    if kind == "list":
        if isinstance(value, (list, tuple)):
            if not all(isinstance(v, str) for v in value):
                raise ValueError(f"expected strings, got {value!r}")
        elif not isinstance(value, str):
            raise ValueError(f"expected a string or a list of strings, got {value!r}")
        return split_list(value)
    if kind == "topic":
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (int, float, str)):
            text = str(value)
        else:
            raise ValueError(f"expected a value, got {value!r}")
        LogConfig.from_kafka({s.topic: text})  # validates
        return text
    raise AssertionError(kind)


def parse_value(name: str, value, where: str) -> tuple[Setting, object]:
    """Resolve ``name`` and convert ``value``; ConfigError mentions ``where``."""
    try:
        s = lookup(name)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    try:
        return s, _convert(s, value)
    except ValueError as exc:
        reason = "not valid (the value is secret, so it is not shown)" if s.secret else _strip_prefix(str(exc), s)
        raise ConfigError(f"{where}: invalid value for {s.name}: {reason}") from None


def _strip_prefix(message: str, s: Setting) -> str:
    # LogConfig's messages start with the topic config's name
    if s.topic and message.startswith(s.topic + ": "):
        return message[len(s.topic) + 2 :]
    return message


def _flatten(table: Mapping, prefix: str = "") -> Iterable[tuple[str, object]]:
    for k, v in table.items():
        name = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            yield from _flatten(v, name)
        else:
            yield name, v


def read_toml(path: Path) -> dict[str, object]:
    """A TOML file's settings as a flat {name: value}; ConfigError if unreadable."""
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: not valid TOML: {exc}") from None
    return dict(_flatten(data))


def parse_assignment(text: str) -> tuple[str, str]:
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise ConfigError(f"--set {text!r}: expected name=value")
    return name.strip(), value.strip()


# ============================================================== loading


def load_config(
    flags: Mapping[str, object] | None = None,
    sets: Iterable[str] = (),
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> BrokerConfig:
    """Build the configuration from every source (see the module docstring).

    ``flags`` holds serve flags by kafkalite name (None: not given), ``sets``
    the ``--set name=value`` strings, ``config_file`` the TOML path (else
    ``KAFKALITE_CONFIG``), ``overrides`` settings by either name with native
    values (``broker.testing`` passes them), strongest of all. Raises ConfigError.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, tuple[object, str]] = {}  # key -> (value, where)
    topic_values: dict[str, tuple[object, str]] = {}

    def put(s: Setting, v, where: str, layer: dict[str, str]) -> None:
        if s.key in layer and layer[s.key] != where:
            raise ConfigError(f"{where}: {s.name} is already set by {layer[s.key]}")
        layer[s.key] = where
        (topic_values if s.topic else values)[s.key] = (v, where)

    path = config_file if config_file is not None else environ.get("KAFKALITE_CONFIG") or None
    if path is not None:
        layer: dict[str, str] = {}
        for name, raw in read_toml(Path(path)).items():
            s, v = parse_value(name, raw, f"{path}: {name}")
            put(s, v, f"{path}: {name}", layer)
    layer = {}
    for s in SETTINGS:
        raw = environ.get(s.env)
        if raw is None or raw == "":
            continue
        s, v = parse_value(s.key, raw, s.env)
        put(s, v, s.env, layer)
    layer = {}
    for text in sets:
        name, raw = parse_assignment(text)
        s, v = parse_value(name, raw, f"--set {name}")
        layer.pop(s.key, None)  # a later --set of the same setting wins
        put(s, v, f"--set {name}", layer)
    layer = {}
    for key, raw in (flags or {}).items():
        if raw is None or raw == []:
            continue
        s = BY_KEY.get(key)
        if s is None:
            raise ConfigError(f"--{key.replace('_', '-')}: this flag has no setting in broker/config.py")
        where = s.flag or _flag(key)
        s, v = parse_value(key, raw, where)
        put(s, v, where, layer)
    layer = {}
    for name, raw in (overrides or {}).items():
        if raw is None:
            continue
        s, v = parse_value(name, raw, f"setting {name}")
        put(s, v, f"setting {name}", layer)

    cfg = BrokerConfig()
    for key, (v, _where) in values.items():
        per_listener = listener_key(key)
        if per_listener is not None:
            listener, setting = per_listener
            cfg.listener_settings.setdefault(listener, {})[setting] = v
        else:
            setattr(cfg, key, v)
    cfg.log_defaults = _log_defaults(topic_values)
    cfg.replication_settings = {BY_KEY[k].name: v for k, (v, _where) in values.items() if k in BY_KEY and BY_KEY[k].kind == "copies"}
    _check(cfg, values)
    return cfg


def _log_defaults(topic_values: dict[str, tuple[object, str]]) -> LogConfig:
    configs: dict[str, str] = {}
    # Kafka's order: the ms forms win over minutes, minutes over hours
    for key in ("log_retention_hours", "log_retention_minutes", "log_retention_ms", "log_roll_hours", "log_roll_ms"):
        if key in topic_values:
            configs[BY_KEY[key].topic] = topic_values[key][0]
    for key, (v, _where) in topic_values.items():
        if BY_KEY[key].kind == "topic" and key not in ("log_retention_ms", "log_roll_ms"):
            configs[BY_KEY[key].topic] = v
    try:
        return LogConfig.from_kafka(configs)
    except ValueError as exc:  # values are checked one by one already; this is belt and braces
        raise ConfigError(f"invalid broker-wide topic defaults: {exc}") from None


def _check(cfg: BrokerConfig, values: dict[str, tuple[object, str]]) -> None:
    """Rules that involve more than one setting."""
    if cfg.listeners:
        clash = [values[k][1] for k in _DEFAULT_LISTENER_KEYS if k in values]
        if clash:
            raise ConfigError(
                f"{', '.join(clash)}: the single default listener's address cannot be combined with "
                f"named listeners (from {values['listeners'][1]}); give every listener as NAME://host:port "
                f"and their advertised addresses as advertised listeners"
            )
    elif cfg.advertised_listeners:
        raise ConfigError(f"{values['advertised_listeners'][1]}: advertised listeners need listeners")
    try:
        specs = cfg.listener_specs()
    except ListenerError as exc:
        where = values.get("listeners", values.get("listener_security_protocol_map", (None, "listeners")))[1]
        raise ConfigError(f"{where}: {exc}") from None
    if cfg.listener_settings or any(spec.protocol != "PLAINTEXT" for spec in specs):
        from .security.settings import SecurityConfigError, build_security

        try:
            cfg.security = build_security(cfg, specs, {k: BY_KEY[k].name for k in PER_LISTENER})
        except SecurityConfigError as exc:
            where = values.get(exc.key, (None, None))[1] if exc.key else None
            raise ConfigError(f"{where}: {exc}" if where else str(exc)) from None
    if cfg.authorizer_class_name or cfg.super_users:
        from .security.authorizer import AuthorizerConfigError, from_config

        try:
            from_config(cfg)
        except AuthorizerConfigError as exc:
            where = values.get(exc.key, (None, None))[1]
            raise ConfigError(f"{where}: {exc}" if where else str(exc)) from None
    if cfg.metrics_port:
        for spec in specs:
            if spec.port == cfg.metrics_port:
                raise ConfigError(f"{values['metrics_port'][1]}: port {cfg.metrics_port} is also listener {spec.name}'s")
    if cfg.max_connections_per_ip_overrides:
        where = values["max_connections_per_ip_overrides"][1]
        try:
            per_ip_overrides(cfg.max_connections_per_ip_overrides)
        except ValueError as exc:
            raise ConfigError(f"{where}: invalid value for max.connections.per.ip.overrides: {exc}") from None
    if cfg.group_min_session_timeout_ms > cfg.group_max_session_timeout_ms:
        raise ConfigError(
            f"group.min.session.timeout.ms ({cfg.group_min_session_timeout_ms}) is above "
            f"group.max.session.timeout.ms ({cfg.group_max_session_timeout_ms})"
        )


def per_ip_overrides(items: Iterable[str]) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` as {ip: count}; ValueError names a bad item.

    Addresses are IP addresses (kafkalite resolves no host names); IPv6 ones
    may be given bare or in brackets: ``[::1]:5``.
    """
    import ipaddress

    out: dict[str, int] = {}
    for item in items:
        host, colon, count = item.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        try:
            if not colon:
                raise ValueError
            address = str(ipaddress.ip_address(host))
            n = int(count.strip())
            if n < 0:
                raise ValueError
        except ValueError:
            raise ValueError(f"expected IP:COUNT with a count of 0 or more, got {item!r}") from None
        out[address] = n
    return out
