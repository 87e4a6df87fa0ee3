"""The broker's settings: one ``Setting`` per name, in the table ``SETTINGS``.

Each has a kafkalite name (a ``BrokerConfig`` field), Kafka's names where Kafka
has the setting, its kind and bounds, the serve flag where there is one, and its
one-line documentation (docs/configuration.md is generated from it). ``BY_KEY``
and ``BY_NAME`` look one up; ``broker/config.py`` reads and checks the values.
"""

from __future__ import annotations

from dataclasses import dataclass

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


def env_name(name: str) -> str:
    """A setting's ``KAFKALITE_*`` environment variable."""
    return "KAFKALITE_" + name.upper()


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
        return env_name(self.key)

    @property
    def name(self) -> str:
        """The name shown in messages: the Kafka one where there is one."""
        return self.kafka[0] if self.kafka else self.key


def _s(key, kind, doc, kafka=(), **kw) -> Setting:
    if isinstance(kafka, str):
        kafka = (kafka,)
    if kw.get("flag") is True:
        kw["flag"] = flag_of(key)
    return Setting(key, kind, doc, tuple(kafka), **kw)


def flag_of(key: str) -> str:
    """A setting's serve flag, from its kafkalite name."""
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
BY_NAME: dict[str, Setting] = {}
for _setting in SETTINGS:
    BY_NAME[_setting.key] = _setting
    BY_NAME[_setting.key.replace("_", "-")] = _setting
    for _k in _setting.kafka:
        BY_NAME[_k] = _setting
