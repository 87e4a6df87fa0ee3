"""OffsetCommit (8), v2-9. Errors are per partition; there is no top-level error field.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION before the
coordinator sees the request; the rest follow Kafka's validation matrix
(broker/coordinator/offsets.py) and are answered once their records are durable.
"""

from protocol.errors import ErrorCode

from ..coordinator.common import CoordinatorError
from ..coordinator.offsets import CommitPartition
from ._groups import coordinator, ms

API_KEY = 8
NAME = "OffsetCommit"
VERSIONS = (2, 9)


async def handle(ctx, req):
    cluster = ctx.cluster
    errors: dict[tuple[str, int], ErrorCode] = {}
    wanted: list[CommitPartition] = []
    for t in req.topics or ():
        topic = cluster.topics.get(t.name)
        for p in t.partitions or ():
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                errors[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
            else:
                wanted.append(CommitPartition(t.name, p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
    if req.group_id is None:
        code = ErrorCode.invalid_group_id
        errors.update({(c.topic, c.partition): code for c in wanted})
    elif wanted:
        retention = ms(req.retention_time) if hasattr(req, "retention_time") else -1
        try:
            answer = await coordinator(ctx).offset_commit(
                req.group_id, req.member_id, req.generation_id_or_member_epoch, getattr(req, "group_instance_id", None),
                ctx.version, retention, wanted,
            )
        except CoordinatorError as exc:
            errors.update({(c.topic, c.partition): exc.code for c in wanted})
        else:
            errors.update({(t, p): code for t, p, code in answer})
    topics = []
    for t in req.topics or ():
        topics.append({"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": errors[(t.name, p.partition_index)]} for p in t.partitions or ()]})
    return {"throttle_time": 0, "topics": topics}
