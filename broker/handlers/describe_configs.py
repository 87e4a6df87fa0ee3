"""DescribeConfigs (32), v1-4: topic (2), broker (4) and broker-logger (8) resources.

Topic configs list every log setting: those set on the topic come from
DYNAMIC_TOPIC_CONFIG, the rest from the broker's defaults
(DEFAULT_CONFIG). Broker configs are the broker's own settings, read-only.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType

API_KEY = 32
NAME = "DescribeConfigs"
VERSIONS = (1, 4)

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
_AUTH = {
    TOPIC: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed),
    BROKER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
    BROKER_LOGGER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
}
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# ConfigType
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7


def _type_of(name: str, value: str | None) -> int:
    if name == "cleanup.policy":
        return LIST
    if value in ("true", "false"):
        return BOOLEAN
    try:
        int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return STRING
    return LONG


def _entry(name: str, value, source: int, *, read_only: bool = False) -> dict:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": _type_of(name, value),
        "documentation": None,
    }


def topic_config_entries(ctx, overrides: dict[str, str], config) -> list[dict]:
    return [
        _entry(name, value, DYNAMIC_TOPIC_CONFIG if name in overrides else DEFAULT_CONFIG)
        for name, value in sorted(config.to_kafka().items())
    ]


def broker_config_entries(ctx) -> list[dict]:
    cfg = ctx.config
    listeners, advertised = ctx.broker.kafka_listeners()
    static = {
        "node.id": str(cfg.node_id),
        "broker.id": str(cfg.node_id),
        "listeners": listeners,
        "advertised.listeners": advertised,
        "log.dirs": str(cfg.data_dir),
        "num.partitions": str(cfg.num_partitions),
        "auto.create.topics.enable": "true" if cfg.auto_create_topics else "false",
        "default.replication.factor": "1",
        "socket.request.max.bytes": str(cfg.max_frame_bytes),
        "log.flush.policy": cfg.fsync,
    }
    entries = [_entry(k, v, STATIC_BROKER_CONFIG, read_only=True) for k, v in sorted(static.items())]
    for name, value in sorted(ctx.cluster.defaults.to_kafka().items()):
        entries.append(_entry(f"log.{name}" if not name.startswith("log.") else name, value, DEFAULT_CONFIG, read_only=True))
    return entries


async def handle(ctx, req):
    results = []
    denied = []
    authz = ctx.broker.authorizer
    for res in req.resources or ():
        base = {"resource_type": res.resource_type, "resource_name": res.resource_name, "error_message": None}
        if authz is not None and res.resource_type in _AUTH:  # as Kafka's ConfigHelper: the refused ones answered last
            rtype, code = _AUTH[res.resource_type]
            if not ctx.allowed(Operation.DESCRIBE_CONFIGS, rtype, "kafka-cluster" if rtype == ResourceType.CLUSTER else res.resource_name):
                denied.append({**base, "error_code": code, "configs": []})
                continue
        if res.resource_type == TOPIC:
            topic = ctx.cluster.topics.get(res.resource_name)
            if topic is None:
                results.append({**base, "error_code": ErrorCode.unknown_topic_or_partition, "error_message": f"Topic '{res.resource_name}' does not exist.", "configs": []})
                continue
            entries = topic_config_entries(ctx, topic.overrides, topic.config)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(ctx.cluster.node_id)):
                results.append({**base, "error_code": ErrorCode.invalid_request, "error_message": f"Unexpected broker id, expected {ctx.cluster.node_id} or empty string, but received {res.resource_name}", "configs": []})
                continue
            entries = broker_config_entries(ctx)
        elif res.resource_type == BROKER_LOGGER:
            entries = []
        else:
            results.append({**base, "error_code": ErrorCode.invalid_request, "error_message": f"Unsupported resource type {res.resource_type}", "configs": []})
            continue
        keys = res.configuration_keys
        if keys:
            entries = [e for e in entries if e["name"] in keys]
        results.append({**base, "error_code": ErrorCode.none, "configs": entries})
    return {"throttle_time": 0, "results": results + denied}
