"""Metadata (3), v0-13.

- ``topics`` null (v1+) or empty (v0) lists every topic except internal ones
  (names starting with ``__``), which appear only when asked for by name.
- Unknown topics are created when both the request (v4+) and the broker
  (``--auto-create-topics``) allow it, with ``--num-partitions`` partitions.
- v10+ can name topics by id; an unknown id answers UNKNOWN_TOPIC_ID.
- The one broker is described by the advertised address of the listener the
  client connected through (Kafka's ``advertised.listeners``).
"""

import uuid

from protocol.errors import ErrorCode

from ..cluster import LEADER_EPOCH, TopicError, validate_topic_name
from ..listeners import advertised_for

API_KEY = 3
NAME = "Metadata"
VERSIONS = (0, 13)
_UNKNOWN_OPS = -(2**31)
_ZERO_ID = uuid.UUID(int=0)


def topic_entry(cluster, topic, node):
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.kafka_internal,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": p.index,
                "leader_id": node,
                "leader_epoch": LEADER_EPOCH,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            for p in topic.partitions
        ],
        "topic_authorized_operations": _UNKNOWN_OPS,
    }


async def handle(ctx, req):
    cluster = ctx.cluster
    node = cluster.node_id
    host, port = advertised_for(ctx)
    version = ctx.version
    requested = req.topics
    if requested is None or (version == 0 and not requested):
        topics = [topic_entry(cluster, t, node) for t in cluster.topics.values() if not t.internal]
    else:
        allow_create = getattr(req, "allow_auto_topic_creation", True) and ctx.config.auto_create_topics
        topics = []
        for rt in requested:
            name = rt.name
            topic_id = getattr(rt, "topic_id", None)
            if not name and topic_id is not None and topic_id != _ZERO_ID:
                topic = cluster.by_id.get(topic_id)
                if topic is None:
                    topics.append({"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id})
                else:
                    topics.append(topic_entry(cluster, topic, node))
                continue
            topic = cluster.topics.get(name)
            if topic is None and validate_topic_name(name) is not None:
                topics.append({"error_code": ErrorCode.invalid_topic_exception, "name": name, "topic_id": _ZERO_ID})
                continue
            if topic is None and allow_create and not name.startswith("__"):
                try:
                    topic = cluster.create_topic(name, ctx.config.num_partitions)
                except TopicError as exc:
                    topics.append({"error_code": exc.code, "name": name, "topic_id": _ZERO_ID})
                    continue
            if topic is None:
                topics.append({"error_code": ErrorCode.unknown_topic_or_partition, "name": name, "topic_id": _ZERO_ID})
            else:
                topics.append(topic_entry(cluster, topic, node))
    return {
        "throttle_time": 0,
        "brokers": [{"node_id": node, "host": host, "port": port, "rack": None}],
        "cluster_id": cluster.cluster_id,
        "controller_id": node,
        "topics": topics,
        "cluster_authorized_operations": _UNKNOWN_OPS,
        "error_code": ErrorCode.none,
    }
