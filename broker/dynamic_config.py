"""The rules of the configs AlterConfigs and IncrementalAlterConfigs change at run time:
Kafka's group configs (names, types, defaults, bounds), ``share.auto.offset.reset``'s
``by_duration:`` form, and which broker settings are dynamic (the broker-wide defaults
of topic configs). The config handlers (``broker/handlers/_configs.py``), the loading
of ``meta.json`` and the share-partition manager use them.

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
from storage.config import LogConfig

from .config import SETTINGS

# ConfigType
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9


class ConfigError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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
    out = {}
    for s in SETTINGS:
        if s.topic and s.kafka and s.kind == "topic":
            out[s.kafka[0]] = s.topic
    return out


@functools.cache
def static_broker_names() -> frozenset[str]:
    """Kafka names of kafkalite's settings that are not dynamic (Kafka: 'Cannot update these configs dynamically')."""
    dynamic = broker_dynamic_settings()
    return frozenset(name for s in SETTINGS for name in s.kafka if name not in dynamic)


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
