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
from .settings import BY_KEY, BY_NAME, INT_MAX, LONG_MAX, SETTINGS, Setting, flag_of



class ConfigError(ValueError):
    """A setting that is unknown or has an invalid value; the message says which and where."""


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
    base = BY_NAME.get(tail)
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
    s = BY_NAME.get(name.strip())
    if s is None and name.strip().startswith(LISTENER_PREFIX):
        return _listener_setting(name.strip())
    if s is None:
        import difflib

        hint = difflib.get_close_matches(name, list(BY_NAME), n=1)
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
            raise ConfigError(f"--{key.replace('_', '-')}: this flag has no setting in broker/settings.py")
        where = s.flag or flag_of(key)
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
