"""OffsetCommit (8), v2-9. Errors are per partition; there is no top-level error field.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION before the
coordinator sees the request; the rest follow Kafka's validation matrix
(broker/coordinator/offsets.py) and are answered once their records are durable.
"""

from protocol.errors import ErrorCode

from ..coordinator.common import CoordinatorError
from ._groups import commit_answer, commit_partitions, coordinator, group_denied, ms, topic_reader

API_KEY = 8
NAME = "OffsetCommit"
VERSIONS = (2, 9)


async def handle(ctx, req):
    if group_denied(ctx, req.group_id):
        code = ErrorCode.group_authorization_failed
        return {"throttle_time": 0, "topics": commit_answer(req.topics, {(t.name, p.partition_index): code for t in req.topics or () for p in t.partitions or ()})}
    errors, wanted = commit_partitions(ctx.cluster, req.topics, topic_reader(ctx))
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
    return {"throttle_time": 0, "topics": commit_answer(req.topics, errors)}
