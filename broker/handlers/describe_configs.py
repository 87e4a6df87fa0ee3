"""DescribeConfigs (32), v1-4: topic (2), broker (4), broker-logger (8) and group (32) resources.

Sources and synonyms as Kafka 4.x's ConfigHelper:

- a topic lists every log setting: one set on the topic is TOPIC_CONFIG, else the
  broker-wide value (DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG when
  AlterConfigs set it on the broker, STATIC_BROKER_CONFIG when the configuration
  did, else DEFAULT_CONFIG); the synonyms are that chain, strongest first;
- a broker lists kafkalite's settings under their Kafka names, the same way;
  secrets (PASSWORD settings such as ``ssl.keystore.key``) are null and sensitive;
  only the log defaults are dynamic (not read-only);
- a group lists Kafka's group configs: GROUP_CONFIG where AlterConfigs set one,
  else DEFAULT_CONFIG with the broker-level value; any group name but "" is
  answered, existing or not, as Kafka does.

The entries and the topic settings' synonym chain are built in ``_config_entries.py``
(CreateTopics returns the same entries).
"""

from protocol.errors import ErrorCode

from ..dynamic_config import GROUP_CONFIG_NAMES, LONG, broker_dynamic_settings, group_builtin_default, group_config_type, group_defaults
from ..security.authorizer import Operation
from ._configs import (
    AUTH, BROKER, BROKER_LOGGER, DEFAULT_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
    GROUP, GROUP_CONFIG, STATIC_BROKER_CONFIG, TOPIC, TOPIC_CONFIG, DENIED_MESSAGE, authorized,
)
from ._config_entries import broker_chain, config_entry, topic_config_entries, topic_synonyms

API_KEY = 32
NAME = "DescribeConfigs"
VERSIONS = (1, 4)

DYNAMIC_TOPIC_CONFIG = TOPIC_CONFIG  # the old name, for the modules that import it
_LISTED_WHEN_SET = frozenset({"super.users", "allow.everyone.if.no.acl.found"})


def _format(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def broker_config_entries(ctx, *, synonyms: bool = False) -> list[dict]:
    from ..config import SETTINGS, default_of

    cfg = ctx.config
    listeners, advertised = ctx.broker.kafka_listeners()
    computed = {
        "listeners": listeners,
        "advertised.listeners": advertised,
        "log.dirs": str(cfg.data_dir),
        "default.replication.factor": "1",
        "log.flush.policy": cfg.fsync,
    }
    dynamic = broker_dynamic_settings()
    effective = ctx.cluster.defaults.to_kafka()
    topic_syn = topic_synonyms(ctx)
    entries = {}
    for s in SETTINGS:
        for kafka_name in s.kafka:
            if kafka_name in dynamic:
                topic_name = dynamic[kafka_name]
                _, static_value, static_set = topic_syn[topic_name]
                chain = broker_chain(ctx, kafka_name, static_value, static_set)
                if not chain:  # log.retention.ms / log.roll.ms, set nowhere: null, as Kafka
                    entries[kafka_name] = config_entry(kafka_name, None, DEFAULT_CONFIG, config_type=LONG)
                    continue
                entries[kafka_name] = config_entry(kafka_name, effective.get(topic_name), chain[0][2], synonyms=chain if synonyms else ())
                continue
            if s.topic is not None:
                continue  # the hours/minutes forms: their value is in the .ms setting
            if s.kind == "copies" and kafka_name not in computed:
                continue  # replication settings: accepted, not used (one copy), not listed
            value = computed.get(kafka_name, _format(getattr(cfg, s.key, None)))
            if kafka_name in _LISTED_WHEN_SET and value in (None, _format(default_of(s))):
                continue  # not a setting of Kafka's broker but of its authorizer: listed when the configuration has it
            default = _format(default_of(s))
            if kafka_name == "authorizer.class.name":
                value, default = value or "", ""  # Kafka's default
            source = STATIC_BROKER_CONFIG if kafka_name in computed or value != default else DEFAULT_CONFIG
            chain = [(kafka_name, value, source)]
            entries[kafka_name] = config_entry(kafka_name, value, source, read_only=True, synonyms=chain if synonyms else ())
    # names kafkalite does not have that AlterConfigs kept (Kafka lists such custom settings too)
    cluster = ctx.cluster
    for name in {*cluster.broker_configs.get("", {}), *cluster.broker_configs.get(str(cluster.node_id), {})} - entries.keys():
        chain = [c for c in broker_chain(ctx, name, None, False) if c[2] != DEFAULT_CONFIG]
        entries[name] = config_entry(name, chain[0][1], chain[0][2], synonyms=chain if synonyms else ())
    for name, value in computed.items():
        if name not in entries:
            entries[name] = config_entry(name, value, STATIC_BROKER_CONFIG, read_only=True, synonyms=[(name, value, STATIC_BROKER_CONFIG)] if synonyms else ())
    return [entries[name] for name in sorted(entries)]


def cluster_default_entries(ctx, *, synonyms: bool = False) -> list[dict]:
    """The broker resource "": only the cluster-wide values AlterConfigs set, as Kafka answers it."""
    dynamic = broker_dynamic_settings()
    out = []
    for name, value in sorted(ctx.cluster.broker_configs.get("", {}).items()):
        chain = [(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG)]
        out.append(config_entry(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG, read_only=name not in dynamic, synonyms=chain if synonyms else ()))
    return out


def group_config_entries(ctx, group: str, *, synonyms: bool = False) -> list[dict]:
    overrides = ctx.cluster.group_configs.get(group, {})
    defaults = group_defaults(ctx.config)
    out = []
    for name in GROUP_CONFIG_NAMES:
        value = overrides.get(name, defaults[name])
        # a value from the broker's own setting is STATIC_BROKER_CONFIG in Kafka 4.4 (4.1 said DEFAULT_CONFIG);
        # kafkalite cannot tell a setting given at its default from one left alone, and calls both DEFAULT_CONFIG
        source = GROUP_CONFIG if name in overrides else STATIC_BROKER_CONFIG if value != group_builtin_default(name) else DEFAULT_CONFIG
        out.append(config_entry(name, value, source, synonyms=[(name, value, source)] if synonyms else (), config_type=group_config_type(name)))
    return out


def _describe(ctx, res, synonyms: bool) -> dict:
    base = {"resource_type": res.resource_type, "resource_name": res.resource_name, "error_message": None}
    rtype, name = res.resource_type, res.resource_name
    if rtype == TOPIC:
        topic = ctx.cluster.topics.get(name)
        if topic is None:
            return {**base, "error_code": ErrorCode.unknown_topic_or_partition, "error_message": f"Topic '{name}' does not exist.", "configs": []}
        entries = topic_config_entries(ctx, topic.overrides, topic.config, synonyms=synonyms)
    elif rtype == BROKER:
        if name not in ("", str(ctx.cluster.node_id)):
            return {**base, "error_code": ErrorCode.invalid_request, "error_message": f"Unexpected broker id, expected {ctx.cluster.node_id} or empty string, but received {name}", "configs": []}
        entries = broker_config_entries(ctx, synonyms=synonyms) if name else cluster_default_entries(ctx, synonyms=synonyms)
    elif rtype == BROKER_LOGGER:
        entries = []
    elif rtype == GROUP:
        if not name:
            return {**base, "error_code": ErrorCode.invalid_request, "error_message": "Group name must not be empty", "configs": []}
        entries = group_config_entries(ctx, name, synonyms=synonyms)
    else:
        return {**base, "error_code": ErrorCode.invalid_request, "error_message": f"Unsupported resource type {rtype}", "configs": []}
    keys = res.configuration_keys
    if keys:
        entries = [e for e in entries if e["name"] in keys]
    return {**base, "error_code": ErrorCode.none, "error_message": "", "configs": entries}  # Kafka's default: ""


async def handle(ctx, req):
    results = []
    denied = []
    authz = ctx.broker.authorizer
    synonyms = bool(getattr(req, "include_synonyms", False))
    for res in req.resources or ():
        if authz is not None and res.resource_type in AUTH:  # as Kafka's ConfigHelper: the refused ones answered last
            if not authorized(ctx, Operation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name or ""):
                code = AUTH[res.resource_type][1]
                denied.append({"resource_type": res.resource_type, "resource_name": res.resource_name, "error_code": code,
                               "error_message": DENIED_MESSAGE[code], "configs": []})
                continue
        results.append(_describe(ctx, res, synonyms))
    return {"throttle_time": 0, "results": results + denied}
