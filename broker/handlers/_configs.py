"""What AlterConfigs, IncrementalAlterConfigs and DescribeConfigs share: resource
types, Kafka's group configs, the broker's dynamic settings and the checks and
edits both alter APIs make before anything is written.

Where the values live: topic overrides, group configs and the broker's dynamic
settings are kept in ``meta.json`` (``Cluster._save``: temp file, fsync, rename),
loaded at start, and applied at once (``Cluster.set_topic_overrides``,
``Cluster.set_broker_configs``; group overrides are read by the coordinator on
each use).
"""

from __future__ import annotations

import functools
import re

from protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType
from storage.config import LogConfig

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# DescribeConfigs config sources
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 2, 3, 4, 5, 8
# ConfigType
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9

# resource type -> (ACL resource type, error when refused)
AUTH = {
    TOPIC: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed),
    BROKER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
    BROKER_LOGGER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
    GROUP: (ResourceType.GROUP, ErrorCode.group_authorization_failed),
}


class ConfigError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def authorized(ctx, operation: Operation, rtype: int, name: str) -> bool:
    acl_type, _ = AUTH[rtype]
    return ctx.allowed(operation, acl_type, "kafka-cluster" if acl_type == ResourceType.CLUSTER else name)


# ----------------------------------------------------------------------------- groups
# Kafka 4.1's GroupConfig: name -> (type, default, lowest the definition accepts, broker-level bounds);
# the bounds are the defaults of group.<kind>.min/max.* (widened to the broker's own value where
# kafkalite lets that be set outside them). share.auto.offset.reset and share.isolation.level are strings.
_INT_GROUP = {
    "consumer.session.timeout.ms": (45_000, 1, (45_000, 60_000), "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "consumer.heartbeat.interval.ms": (5_000, 1, (5_000, 15_000), "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    "consumer.assignment.interval.ms": (1_000, 0, (0, 15_000), "group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms"),
    "share.session.timeout.ms": (45_000, 1, (45_000, 60_000), "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": (5_000, 1, (5_000, 15_000), "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.record.lock.duration.ms": (30_000, 1000, (15_000, 60_000), "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    # Kafka 4.4's further share-group configs (KIP-932, KIP-1263)
    "share.delivery.count.limit": (5, 2, (2, 10), "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    "share.partition.max.record.locks": (2000, 100, (100, 4000), "group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks"),
    "share.assignment.interval.ms": (1000, 0, (0, 15_000), "group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms"),
    "streams.session.timeout.ms": (45_000, 1, (45_000, 60_000), "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    "streams.heartbeat.interval.ms": (5_000, 1, (5_000, 15_000), "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
    "streams.num.standby.replicas": (0, 0, (0, 2), None, "group.streams.max.standby.replicas"),
}
_STRING_GROUP = {
    "share.auto.offset.reset": ("latest", ("latest", "earliest")),
    "share.isolation.level": ("read_uncommitted", ("read_committed", "read_uncommitted")),
}
# share.assignor.offload.enable is accepted and reported at Kafka's default; kafkalite computes a share
# group's assignment in the heartbeat that needs it either way (Kafka's behaviour with it false)
_BOOLEAN_GROUP = {"consumer.assignor.offload.enable": "true", "share.renew.acknowledge.enable": "true", "share.assignor.offload.enable": "true"}
GROUP_CONFIG_NAMES = tuple(sorted((*_INT_GROUP, *_STRING_GROUP, *_BOOLEAN_GROUP)))
# the group configs whose broker-level value is a kafkalite setting: group config -> setting
_BROKER_LEVEL = {
    "consumer.session.timeout.ms": "group_consumer_session_timeout_ms",
    "consumer.heartbeat.interval.ms": "group_consumer_heartbeat_interval_ms",
    "consumer.assignment.interval.ms": "group_consumer_assignment_interval_ms",
    "share.session.timeout.ms": "group_share_session_timeout_ms",
    "share.heartbeat.interval.ms": "group_share_heartbeat_interval_ms",
    "share.assignment.interval.ms": "group_share_assignment_interval_ms",
}
# (session timeout, heartbeat interval) pairs Kafka checks against each other
_PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"), ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
          ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))


def group_defaults(config) -> dict[str, str]:
    """Every group config's broker-level value (Kafka's extractGroupConfigMap)."""
    out = {name: str(d[0]) for name, d in _INT_GROUP.items()}
    out.update({name: d[0] for name, d in _STRING_GROUP.items()})
    out.update(_BOOLEAN_GROUP)
    for name, setting in _BROKER_LEVEL.items():
        out[name] = str(getattr(config, setting))
    return out


def group_builtin_default(name: str) -> str:
    """A group config's own default (GroupConfig's), before any broker setting."""
    d = _INT_GROUP.get(name)
    if d is not None:
        return str(d[0])
    return _BOOLEAN_GROUP[name] if name in _BOOLEAN_GROUP else _STRING_GROUP[name][0]


def _bounds(name: str, config) -> tuple[int, int]:
    lo, hi = _INT_GROUP[name][2]
    setting = _BROKER_LEVEL.get(name)
    if setting is not None:
        own = getattr(config, setting)
        lo, hi = min(lo, own), max(hi, own)
    return lo, hi


def check_group_configs(props: dict[str, str], config) -> None:
    """Kafka's GroupConfig.validate: names, types, the definition's lower bounds, then the
    broker-level bounds and session > heartbeat, the values not set taken from the broker
    (``props`` is the group's whole set); raises ConfigError(INVALID_CONFIG)."""
    for name in props:
        if name not in _INT_GROUP and name not in _STRING_GROUP and name not in _BOOLEAN_GROUP:
            raise ConfigError(ErrorCode.invalid_config, f"Unknown group config name: {name}")
    # the group's values over the broker-level ones, as Kafka 4.x checks them
    broker_level = group_defaults(config)
    values: dict[str, int] = {name: int(broker_level[name]) for name in _INT_GROUP}
    for name, raw in props.items():
        if name in _BOOLEAN_GROUP:
            if raw.strip().lower() not in ("true", "false"):
                raise ConfigError(ErrorCode.invalid_config, f"Invalid value {raw} for configuration {name}: Expected value to be either true or false")
            continue
        if name == "share.auto.offset.reset" and _is_by_duration(raw):
            continue
        if name in _STRING_GROUP:
            allowed = _STRING_GROUP[name][1]
            if raw.strip().lower() not in allowed:
                raise ConfigError(ErrorCode.invalid_config, f"Invalid value {raw} for configuration {name}: String must be one of: {', '.join(allowed)}")
            continue
        try:
            v = int(raw.strip())
        except ValueError:
            raise ConfigError(ErrorCode.invalid_config, f"Invalid value {raw} for configuration {name}: Not a number of type INT") from None
        if not -(2**31) <= v < 2**31:
            raise ConfigError(ErrorCode.invalid_config, f"Invalid value {raw} for configuration {name}: Not a number of type INT")
        if v < _INT_GROUP[name][1]:
            raise ConfigError(ErrorCode.invalid_config, f"Invalid value {v} for configuration {name}: Value must be at least {_INT_GROUP[name][1]}")
        values[name] = v
    for name, v in values.items():
        lo, hi = _bounds(name, config)
        _, _, _, lo_name, hi_name = _INT_GROUP[name]
        if lo_name is not None and v < lo:
            raise ConfigError(ErrorCode.invalid_config, f"{name} must be greater than or equal to {lo_name}")
        if v > hi:
            raise ConfigError(ErrorCode.invalid_config, f"{name} must be less than or equal to {hi_name}")
    for session, heartbeat in _PAIRS:
        if values[session] <= values[heartbeat]:
            raise ConfigError(ErrorCode.invalid_config, f"{session} must be greater than {heartbeat}")


def group_config_type(name: str) -> int:
    return STRING if name in _STRING_GROUP else BOOLEAN if name in _BOOLEAN_GROUP else INT


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def _is_by_duration(raw: str) -> bool:
    """``by_duration:<ISO-8601 duration>`` (PnDTnHnMn.nS, not negative): Kafka's third share.auto.offset.reset."""
    head, _, duration = raw.strip().partition(":")
    if head.lower() != "by_duration":
        return False
    m = _DURATION.fullmatch(duration.strip())
    return m is not None and duration.strip().upper() not in ("P", "PT") and not duration.strip().upper().endswith("T")


def by_duration_ms(raw: str) -> int | None:
    """The milliseconds of a ``by_duration:<ISO-8601 duration>`` value, or None for another value."""
    if not _is_by_duration(raw):
        return None
    d, h, m, sec = _DURATION.fullmatch(raw.strip().partition(":")[2].strip()).groups()
    return int(((int(d or 0) * 24 + int(h or 0)) * 60 + int(m or 0)) * 60_000 + float(sec or 0) * 1000)


# ----------------------------------------------------------------------------- broker
@functools.cache
def broker_dynamic_settings() -> dict[str, str]:
    """Kafka broker names kafkalite lets AlterConfigs change at run time -> the topic config
    each one is the broker-wide default of (Kafka's ServerTopicConfigSynonyms)."""
    from ..config import SETTINGS

    out = {}
    for s in SETTINGS:
        if s.topic and s.kafka and s.kind == "topic":
            out[s.kafka[0]] = s.topic
    return out


@functools.cache
def static_broker_names() -> frozenset[str]:
    """Kafka names of kafkalite's settings that are not dynamic (Kafka: 'Cannot update these configs dynamically')."""
    from ..config import SETTINGS

    dynamic = broker_dynamic_settings()
    return frozenset(name for s in SETTINGS for name in s.kafka if name not in dynamic)


def check_broker_name(ctx, name: str) -> None:
    """An empty name is the cluster-wide default; otherwise it must be this node's id (ConfigAdminManager)."""
    if name == "":
        return
    try:
        node = int(name)
    except ValueError:
        raise ConfigError(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}") from None
    if node != ctx.cluster.node_id:
        raise ConfigError(ErrorCode.invalid_request, f"Unexpected broker id, expected {ctx.cluster.node_id}, but received {name}")


def check_broker_configs(props: dict[str, str]) -> None:
    """Kafka's DynamicBrokerConfig.validate, for the settings kafkalite has: static ones are refused
    (INVALID_REQUEST), dynamic log defaults must be valid topic values (INVALID_CONFIG); other names
    are kept, as Kafka keeps custom broker configs."""
    static = sorted(n for n in props if n in static_broker_names())
    if static:
        raise ConfigError(ErrorCode.invalid_request, f"Cannot update these configs dynamically: [{', '.join(static)}]")  # Java's Set text (4.4)
    dynamic = broker_dynamic_settings()
    topic_values = {dynamic[n]: v for n, v in props.items() if n in dynamic}
    try:
        LogConfig.from_kafka(topic_values)
    except ValueError as exc:
        raise ConfigError(ErrorCode.invalid_config, str(exc)) from None


# ----------------------------------------------------------------------------- topics
def check_topic_configs(ctx, props: dict[str, str]) -> LogConfig:
    for name in props:
        if not LogConfig.is_known(name):
            raise ConfigError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
    try:
        return LogConfig.from_kafka(props, ctx.cluster.defaults)
    except ValueError as exc:
        raise ConfigError(ErrorCode.invalid_config, str(exc)) from None


LIST_TOPIC_CONFIGS = frozenset({"cleanup.policy", "follower.replication.throttled.replicas", "leader.replication.throttled.replicas"})


def is_list(rtype: int, name: str) -> bool:
    if rtype == TOPIC:
        return name in LIST_TOPIC_CONFIGS
    if rtype == BROKER:
        return name in {"log.cleanup.policy", "listeners", "advertised.listeners", "listener.security.protocol.map",
                        "sasl.enabled.mechanisms", "ssl.enabled.protocols", "ssl.cipher.suites", "max.connections.per.ip.overrides"}
    return False


# ----------------------------------------------------------------------------- shared checks
def duplicate_resources(resources) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    dup: set[tuple[int, str]] = set()
    for r in resources:
        key = (r.resource_type, r.resource_name)
        (dup if key in seen else seen).add(key)
    return dup


def current(ctx, rtype: int, name: str) -> dict[str, str]:
    """The values set on a resource now (what IncrementalAlterConfigs edits)."""
    cluster = ctx.cluster
    if rtype == TOPIC:
        topic = cluster.topics.get(name)
        return dict(topic.overrides) if topic is not None else {}
    if rtype == GROUP:
        return dict(cluster.group_configs.get(name, {}))
    if rtype == BROKER:
        return dict(cluster.broker_configs.get(name, {}))
    return {}


def validate(ctx, rtype: int, name: str, props: dict[str, str]):
    """Check the whole new set of values of a resource; returns what applying needs."""
    if rtype == TOPIC:
        cfg = check_topic_configs(ctx, props)
        if name not in ctx.cluster.topics:
            raise ConfigError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        return cfg
    if rtype == GROUP:
        check_group_configs(props, ctx.config)
        return None
    check_broker_configs(props)
    return None


def apply(ctx, rtype: int, name: str, props: dict[str, str], checked) -> None:
    """Install the new values; the caller then persists them (``Cluster._save``) once per request."""
    cluster = ctx.cluster
    if rtype == TOPIC:
        cluster.set_topic_overrides(cluster.topics[name], props, checked, save=False)
    elif rtype == GROUP:
        cluster.set_group_configs(name, props, save=False)
    else:
        cluster.set_broker_configs(name, props, broker_dynamic_settings(), save=False)


# ----------------------------------------------------------------------------- the alter APIs
# Kafka's default messages of the refusals (Errors.message()), which its config APIs send
DENIED_MESSAGE = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
}


def _new_values(ctx, res, incremental: bool) -> dict[str, str]:
    """The resource's whole set of values after the request's edits (legacy: the request's values)."""
    if not incremental:
        return {c.name: c.value for c in res.configs or ()}
    values = current(ctx, res.resource_type, res.resource_name)
    for c in res.configs or ():
        op = c.config_operation
        if op == SET:
            values[c.name] = c.value
        elif op == DELETE:
            values.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            if not is_list(res.resource_type, c.name):
                raise ConfigError(ErrorCode.invalid_config, f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key {c.name} because its type is not LIST.")
            old = values.get(c.name)
            if old is None and res.resource_type == TOPIC:
                old = ctx.cluster.defaults.to_kafka().get(c.name)
            parts = [p for p in (old or "").split(",") if p]
            for item in c.value.split(","):
                if op == APPEND and item not in parts:
                    parts.append(item)
                elif op == SUBTRACT and item in parts:
                    parts.remove(item)
            values[c.name] = ",".join(parts)
        else:
            raise ConfigError(ErrorCode.invalid_request, f"Unknown alter configs operation type {op}")
    return values


def _preprocess(ctx, res, incremental: bool) -> None:
    """What Kafka's broker checks before the controller sees the resource (ConfigAdminManager)."""
    names = [c.name for c in res.configs or ()]
    if len(set(names)) != len(names):
        raise ConfigError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [c.name for c in res.configs or () if c.value is None and not (incremental and c.config_operation == DELETE)]
    if nulls:
        raise ConfigError(ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(str(n) for n in nulls))
    if any(n is None for n in names):
        raise ConfigError(ErrorCode.invalid_request, "Null config name")
    rtype = res.resource_type
    if rtype == BROKER:
        check_broker_name(ctx, res.resource_name)
        if incremental:
            bad = [c.config_operation for c in res.configs or () if c.config_operation not in (SET, DELETE, APPEND, SUBTRACT)]
            if bad:
                raise ConfigError(ErrorCode.invalid_request, f"Unknown operations type {bad[0]}")
    elif rtype == BROKER_LOGGER and incremental:
        # Kafka's RuntimeLoggerManager: the cluster authorization, then the node id; kafkalite then refuses
        if ctx.broker.authorizer is not None and not authorized(ctx, Operation.ALTER_CONFIGS, rtype, res.resource_name or ""):
            raise ConfigError(ErrorCode.cluster_authorization_failed, DENIED_MESSAGE[ErrorCode.cluster_authorization_failed])
        try:
            node = int(res.resource_name)
        except ValueError:
            raise ConfigError(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {res.resource_name}") from None
        if node != ctx.cluster.node_id:  # (Kafka's message names its own id twice)
            raise ConfigError(ErrorCode.invalid_request, f"Unexpected node id. Expected {ctx.cluster.node_id}, but received {ctx.cluster.node_id}")
        raise ConfigError(ErrorCode.invalid_request, "kafkalite does not change log levels at run time (BROKER_LOGGER)")
    elif rtype not in (TOPIC, GROUP):
        raise ConfigError(ErrorCode.invalid_request, f"Unknown resource type {rtype}")


def _alter_one(ctx, res, incremental: bool, validate_only: bool) -> bool:
    """Check (and unless ``validate_only`` apply) one resource; True if it changed anything."""
    rtype, name = res.resource_type, res.resource_name
    _preprocess(ctx, res, incremental)
    if ctx.broker.authorizer is not None and not authorized(ctx, Operation.ALTER_CONFIGS, rtype, name or ""):
        code = AUTH[rtype][1]
        raise ConfigError(code, DENIED_MESSAGE[code])
    if rtype == TOPIC:
        if name == "":
            raise ConfigError(ErrorCode.invalid_request, "Default topic resources are not allowed.")
        from ..cluster import validate_topic_name

        reason = validate_topic_name(name)
        if reason:
            raise ConfigError(ErrorCode.invalid_topic_exception, reason)
    elif rtype == GROUP and name == "":
        raise ConfigError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    values = _new_values(ctx, res, incremental)
    checked = validate(ctx, rtype, name, values)
    if validate_only:
        return False
    apply(ctx, rtype, name, values, checked)
    return True


def alter(ctx, req, *, incremental: bool) -> dict:
    """AlterConfigs (legacy: each resource's values replaced) and IncrementalAlterConfigs (edited)."""
    resources = req.resources or ()
    dup = duplicate_resources(resources)
    out = []
    changed = False
    for res in resources:
        entry = {"resource_type": res.resource_type, "resource_name": res.resource_name, "error_code": ErrorCode.none, "error_message": None}
        if (res.resource_type, res.resource_name) in dup:
            entry.update(error_code=ErrorCode.invalid_request, error_message="Each resource must appear at most once.")
        else:
            try:
                changed |= _alter_one(ctx, res, incremental, req.validate_only)
            except ConfigError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
        out.append(entry)
    if changed:  # one write of meta.json (temp file, fsync, rename) before the answer, as CreateTopics
        try:
            ctx.cluster._save()
        except OSError as exc:  # a full disk: not stored, so not acknowledged (in effect until a restart)
            for entry in out:
                if entry["error_code"] == ErrorCode.none:
                    entry.update(error_code=ErrorCode.kafka_storage_error, error_message=f"Could not store the configs: {exc}")
    return {"throttle_time": 0, "responses": out}
