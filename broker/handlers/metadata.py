"""Metadata (3), v0-13.

- ``topics`` null (v1+) or empty (v0) lists every topic, Kafka's internal ones
  (``__consumer_offsets``, ``__transaction_state``) flagged ``is_internal`` as Kafka
  does, except kafkalite's own (``__kafkalite_group_events``), which appear only
  when asked for by name.
- Unknown topics are created when both the request (v4+) and the broker
  (``--auto-create-topics``) allow it, with ``--num-partitions`` partitions.
- v12+ can name topics by id (a non-zero id wins over the name); an unknown
  id answers UNKNOWN_TOPIC_ID. v10 and v11 carry the id field but Kafka refuses
  a null name or a non-zero id there: the whole request is answered
  INVALID_REQUEST (no brokers, controller -1, every topic echoed with the
  error). In v12+ a topic with neither name nor id makes Kafka 4.1 answer the
  whole request UNKNOWN_SERVER_ERROR, which is matched here.
- A topic asked for more than once is answered once, as Kafka does.
- The one broker is described by the advertised address of the listener the
  client connected through (Kafka's ``advertised.listeners``). A node of a cluster
  (broker/multinode/) lists every live node, the active one as every partition's
  leader and the controller, every node as a replica, the live ones as the ISR.
"""

import uuid

from protocol.errors import ErrorCode

from ..cluster import TopicError, validate_topic_name
from ..listeners import advertised_for, listener_name
from ..security.authorizer import Operation, ResourceType
from . import UNKNOWN_OPERATIONS

API_KEY = 3
NAME = "Metadata"
VERSIONS = (0, 13)
_ZERO_ID = uuid.UUID(int=0)


def _layout(ctx, host: str, port: int) -> tuple:
    """(brokers, controller id, (leader, replicas, isr, offline replicas)) of this node's cluster."""
    node = ctx.cluster.node_id
    view = ctx.broker.view
    if view is None:  # the one broker
        return [{"node_id": node, "host": host, "port": port, "rack": None}], node, (node, [node], [node], [])
    listener = listener_name(ctx)
    brokers = [{"node_id": i, "host": h, "port": p, "rack": None} for i, h, p in view.brokers(listener, (host, port))]
    leader = view.leader()
    return brokers, leader, (leader, view.replica_ids(), view.live_ids(), view.offline_ids())


def topic_entry(cluster, topic, layout):
    leader, replicas, isr, offline = layout
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.kafka_internal,
        "partitions": [
            {
                "error_code": ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
                "partition_index": p.index,
                "leader_id": leader,
                "leader_epoch": cluster.leadership.epoch,
                "replica_nodes": replicas,
                "isr_nodes": isr,
                "offline_replicas": offline,
            }
            for p in topic.partitions
        ],
        "topic_authorized_operations": UNKNOWN_OPERATIONS,
    }


def _refused(req, code: ErrorCode) -> dict:
    """The whole request refused, as Kafka's MetadataRequest error response: every topic echoed with ``code``."""
    return {
        "throttle_time": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [
            {
                "error_code": code,
                "name": rt.name if rt.name is not None else "",
                "topic_id": getattr(rt, "topic_id", None) or _ZERO_ID,
                "is_internal": False,
                "partitions": [],
                "topic_authorized_operations": UNKNOWN_OPERATIONS,
            }
            for rt in req.topics
        ],
        "cluster_authorized_operations": UNKNOWN_OPERATIONS,
        "error_code": code,
    }


def _refusal(req, version: int) -> ErrorCode | None:
    if req.topics is None or version < 10:
        return None
    for rt in req.topics:
        has_id = rt.topic_id is not None and rt.topic_id != _ZERO_ID
        if version < 12 and (rt.name is None or has_id):
            return ErrorCode.invalid_request
        if rt.name is None and not has_id:
            return ErrorCode.unknown_server_error
    return None


async def handle(ctx, req):
    cluster = ctx.cluster
    host, port = advertised_for(ctx)
    brokers, controller, node = _layout(ctx, host, port)
    version = ctx.version
    refusal = _refusal(req, version)
    if refusal is not None:
        return _refused(req, refusal)
    requested = req.topics
    authz = ctx.broker.authorizer
    if requested is None or (version == 0 and not requested):
        topics = [topic_entry(cluster, t, node) for t in cluster.topics.values() if t.listed]
        if authz is not None:  # topics the client may not describe are left out
            topics = [t for t in topics if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t["name"], audit=False)]
    else:
        allow_create = getattr(req, "allow_auto_topic_creation", True) and ctx.config.auto_create_topics
        # Kafka's order (KafkaApis.handleTopicMetadataRequest): unknown topic ids, the topics that exist,
        # those that did not (unknown, invalid, auto-created now), those refused CREATE, those refused
        # DESCRIBE; each group in the order asked (Kafka's Scala sets keep it up to four topics)
        unknown_ids: list[dict] = []
        topics = []
        absent: list[dict] = []
        refused_create: list[dict] = []
        refused_describe: list[dict] = []
        seen = set()
        for rt in requested:
            name = rt.name
            topic_id = getattr(rt, "topic_id", None)
            key = topic_id if topic_id is not None and topic_id != _ZERO_ID else name
            if key in seen:
                continue  # Kafka answers each topic once, however often it is asked for
            seen.add(key)
            if topic_id is not None and topic_id != _ZERO_ID:
                topic = cluster.by_id.get(topic_id)
                if topic is None:
                    unknown_ids.append({"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id})
                elif authz is not None and not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic.name):
                    refused_describe.append({"error_code": ErrorCode.topic_authorization_failed, "name": None, "topic_id": topic_id})
                else:
                    topics.append(topic_entry(cluster, topic, node))
                continue
            if authz is not None and not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
                # not even whether it exists is told
                refused_describe.append({"error_code": ErrorCode.topic_authorization_failed, "name": name, "topic_id": _ZERO_ID})
                continue
            topic = cluster.topics.get(name)
            if topic is None and name in cluster.creating:
                # being created by a CreateTopics still opening its partitions, as Kafka answers a topic without leaders yet
                topics.append({"error_code": ErrorCode.leader_not_available, "name": name, "topic_id": _ZERO_ID})
                continue
            # Kafka asks for CREATE before it looks at the name (an invalid one too)
            if topic is None and allow_create and authz is not None and not (
                ctx.allowed_on_cluster(Operation.CREATE) or ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name)
            ):
                refused_create.append({"error_code": ErrorCode.topic_authorization_failed, "name": name, "topic_id": _ZERO_ID})
                continue
            if topic is not None:
                topics.append(topic_entry(cluster, topic, node))
                continue
            if validate_topic_name(name) is not None:
                absent.append({"error_code": ErrorCode.invalid_topic_exception, "name": name, "topic_id": _ZERO_ID})
                continue
            if allow_create and not name.startswith("__"):
                try:
                    topic = cluster.create_topic(name, ctx.config.num_partitions)
                except TopicError as exc:
                    absent.append({"error_code": exc.code, "name": name, "topic_id": _ZERO_ID})
                    continue
            if topic is None:
                absent.append({"error_code": ErrorCode.unknown_topic_or_partition, "name": name, "topic_id": _ZERO_ID})
            else:
                absent.append(topic_entry(cluster, topic, node))
        topics = unknown_ids + topics + absent + refused_create + refused_describe
    cluster_ops = UNKNOWN_OPERATIONS
    if version >= 8:
        if getattr(req, "include_topic_authorized_operations", False):
            for t in topics:
                if "partitions" in t:  # a topic described, not an error
                    t["topic_authorized_operations"] = ctx.authorized_operations(ResourceType.TOPIC, t["name"])
        if version <= 10 and getattr(req, "include_cluster_authorized_operations", False):
            cluster_ops = ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster") if ctx.allowed_on_cluster(Operation.DESCRIBE) else 0
    return {
        "throttle_time": 0,
        "brokers": brokers,
        "cluster_id": cluster.cluster_id,
        "controller_id": controller,
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
        "error_code": ErrorCode.none,
    }
