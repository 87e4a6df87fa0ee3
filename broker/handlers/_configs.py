"""What AlterConfigs, IncrementalAlterConfigs and DescribeConfigs share: resource
types, config sources, the authorization of a resource, and the checks and edits
both alter APIs make before anything is written. The rules of the values
themselves (group configs, the dynamic broker settings) are in ``broker/dynamic_config.py``.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from storage.config import LogConfig

from ..cluster import validate_topic_name
from ..dynamic_config import ConfigError, broker_dynamic_settings, check_broker_configs, check_group_configs
from ..logs import get_logger
from ..security.authorizer import Operation, ResourceType

log = get_logger("configs")

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# DescribeConfigs config sources
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 2, 3, 4, 5, 8

# resource type -> (ACL resource type, error when refused)
AUTH = {
    TOPIC: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed),
    BROKER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
    BROKER_LOGGER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
    GROUP: (ResourceType.GROUP, ErrorCode.group_authorization_failed),
}


def authorized(ctx, operation: Operation, rtype: int, name: str) -> bool:
    acl_type, _ = AUTH[rtype]
    return ctx.allowed(operation, acl_type, "kafka-cluster" if acl_type == ResourceType.CLUSTER else name)


# ----------------------------------------------------------------------------- broker
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


def _alter_one(ctx, res, incremental: bool, validate_only: bool) -> dict[str, str] | None:
    """Check (and unless ``validate_only`` apply) one resource; the values it had before, if it changed."""
    rtype, name = res.resource_type, res.resource_name
    _preprocess(ctx, res, incremental)
    if ctx.broker.authorizer is not None and not authorized(ctx, Operation.ALTER_CONFIGS, rtype, name or ""):
        code = AUTH[rtype][1]
        raise ConfigError(code, DENIED_MESSAGE[code])
    if rtype == TOPIC:
        if name == "":
            raise ConfigError(ErrorCode.invalid_request, "Default topic resources are not allowed.")
        reason = validate_topic_name(name)
        if reason:
            raise ConfigError(ErrorCode.invalid_topic_exception, reason)
    elif rtype == GROUP and name == "":
        raise ConfigError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    values = _new_values(ctx, res, incremental)
    checked = validate(ctx, rtype, name, values)
    if validate_only:
        return None
    before = current(ctx, rtype, name)
    apply(ctx, rtype, name, values, checked)
    return before


def alter(ctx, req, *, incremental: bool) -> dict:
    """AlterConfigs (legacy: each resource's values replaced) and IncrementalAlterConfigs (edited)."""
    resources = req.resources or ()
    dup = duplicate_resources(resources)
    out = []
    changed: list[tuple[int, str, dict[str, str]]] = []  # (type, name, values before) of each resource applied
    for res in resources:
        entry = {"resource_type": res.resource_type, "resource_name": res.resource_name, "error_code": ErrorCode.none, "error_message": None}
        if (res.resource_type, res.resource_name) in dup:
            entry.update(error_code=ErrorCode.invalid_request, error_message="Each resource must appear at most once.")
        else:
            try:
                before = _alter_one(ctx, res, incremental, req.validate_only)
                if before is not None:
                    changed.append((res.resource_type, res.resource_name, before))
            except ConfigError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
        out.append(entry)
    if changed:  # one write of meta.json (temp file, fsync, rename) before the answer, as CreateTopics
        try:
            ctx.cluster._save()
        except OSError as exc:  # a full disk: not stored, so not acknowledged, and not in effect either
            for rtype, name, before in reversed(changed):  # meta.json is as it was (temp file, rename): so is the state
                try:
                    apply(ctx, rtype, name, before, validate(ctx, rtype, name, before))
                except ConfigError as undo:  # values it held a moment ago: not expected to fail
                    log.error("configs not stored could not be undone", resource_type=rtype, resource=name, error=undo.message)
            for entry in out:
                if entry["error_code"] == ErrorCode.none:
                    entry.update(error_code=ErrorCode.kafka_storage_error, error_message=f"Could not store the configs: {exc}")
    return {"throttle_time": 0, "responses": out}
