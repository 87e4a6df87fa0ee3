"""How a config is described: the entries (value, source, synonyms, type) DescribeConfigs lists and
CreateTopics returns for a new topic's configs (Kafka's ConfigHelper): a topic setting is
TOPIC_CONFIG when set on the topic, else the broker-wide value, whose synonyms are the chain
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG / DEFAULT_CONFIG,
strongest first. Users: describe_configs.py, create_topics.py.
"""

from __future__ import annotations

import functools

from ..dynamic_config import BOOLEAN, DOUBLE, INT, LIST, LONG, PASSWORD, STRING, broker_dynamic_settings
from ._configs import DEFAULT_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG

__all__ = ["broker_chain", "config_entry", "topic_config_entries", "topic_synonyms", "type_of"]

_INT_TOPIC = frozenset({"segment.bytes", "segment.index.bytes", "index.interval.bytes", "max.message.bytes", "min.insync.replicas",
                        "compression.gzip.level", "compression.lz4.level", "compression.zstd.level"})
_NULL_DEFAULT = frozenset({"log.retention.ms", "log.roll.ms"})
_PASSWORDS = frozenset({"ssl.keystore.key", "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
                        "ssl.keystore.password", "ssl.truststore.password"})


def type_of(name: str, value: str | None) -> int:
    if name in _PASSWORDS:
        return PASSWORD
    if name in ("cleanup.policy", "log.cleanup.policy", "follower.replication.throttled.replicas", "leader.replication.throttled.replicas"):
        return LIST
    if name in _INT_TOPIC:
        return INT
    if name in ("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"):
        return DOUBLE
    if value in ("true", "false"):
        return BOOLEAN
    try:
        int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return STRING
    return LONG


def config_entry(name: str, value, source: int, *, read_only: bool = False, synonyms=(), config_type: int | None = None) -> dict:
    sensitive = name in _PASSWORDS
    return {
        "name": name,
        "value": None if sensitive else value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": sensitive,
        "synonyms": [{"name": n, "value": None if sensitive else v, "source": s} for n, v, s in synonyms],
        "config_type": config_type if config_type is not None else type_of(name, value),
        "documentation": None,
    }


def broker_chain(ctx, broker_name: str, static_value, static_set: bool) -> list[tuple[str, str | None, int]]:
    """(name, value, source) of a broker setting's synonyms, strongest first. The .ms forms of
    retention and roll have no default in Kafka (their value comes from the .hours form, which
    Kafka's synonym list then leaves out): unset, they have no DEFAULT_CONFIG synonym."""
    cluster = ctx.cluster
    chain = []
    node = cluster.broker_configs.get(str(cluster.node_id), {})
    if broker_name in node:
        chain.append((broker_name, node[broker_name], DYNAMIC_BROKER_CONFIG))
    default = cluster.broker_configs.get("", {})
    if broker_name in default:
        chain.append((broker_name, default[broker_name], DYNAMIC_DEFAULT_BROKER_CONFIG))
    if static_set or broker_name not in _NULL_DEFAULT:
        chain.append((broker_name, static_value, STATIC_BROKER_CONFIG if static_set else DEFAULT_CONFIG))
    return chain


def topic_synonyms(ctx) -> dict[str, tuple[str, str, bool]]:
    """Topic config -> (its broker setting, the static value, whether the configuration set it)."""
    static = ctx.cluster.static_defaults.to_kafka()
    return {topic_name: (broker_name, static.get(topic_name), static.get(topic_name) != default)
            for broker_name, (topic_name, default) in _broker_defaults().items()}


@functools.cache
def _broker_defaults() -> dict[str, tuple[str, str | None]]:
    """Broker setting of a topic default -> (the topic config, kafkalite's default as a string)."""
    from ..config import default_of, lookup

    out = {}
    for broker_name, topic_name in broker_dynamic_settings().items():
        default = default_of(lookup(broker_name))
        out[broker_name] = (topic_name, None if default is None else str(default))
    return out


def topic_config_entries(ctx, overrides: dict[str, str], config, *, synonyms: bool = False) -> list[dict]:
    known = topic_synonyms(ctx)
    entries = []
    for name, value in sorted(config.to_kafka().items()):
        chain = []
        if name in overrides:  # shown as set, as Kafka keeps the string ("delete,compact" after an APPEND)
            value = overrides[name] if overrides[name] is not None else value
            chain.append((name, value, TOPIC_CONFIG))
        if name in known:
            broker_name, static_value, static_set = known[name]
            chain += broker_chain(ctx, broker_name, static_value, static_set)
        source = chain[0][2] if chain else DEFAULT_CONFIG
        entries.append(config_entry(name, value, source, synonyms=chain if synonyms else (), config_type=type_of(name, value)))
    return entries
