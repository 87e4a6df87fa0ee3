"""OffsetCommit (8), v2-10. Errors are per partition; there is no top-level error field.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION before the
coordinator sees the request; the rest follow Kafka's validation matrix
(broker/coordinator/offsets.py) and are answered once their records are durable.
v10 names topics by id (Kafka 4.2+): an id the cluster does not know is
UNKNOWN_TOPIC_ID for each of its partitions; offsets are still kept by name.
"""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ._groups import commit_answer, commit_answer_by_id, commit_partitions, coordinator, group_denied, ms, named_topics, topic_reader

API_KEY = 8
NAME = "OffsetCommit"
VERSIONS = (2, 10)


async def handle(ctx, req):
    if ctx.version >= 10:
        topics = named_topics(ctx.cluster, req.topics, "partitions")
        errors = await _commit(ctx, req, [t for t in topics if t.name is not None])
        return {"throttle_time": 0, "topics": commit_answer_by_id(topics, errors)}
    return {"throttle_time": 0, "topics": commit_answer(req.topics, await _commit(ctx, req, req.topics))}


async def _commit(ctx, req, topics) -> dict:
    """(topic name, partition) -> error for each partition of ``topics`` (which have names)."""
    if group_denied(ctx, req.group_id):
        code = ErrorCode.group_authorization_failed
        return {(t.name, p.partition_index): code for t in topics or () for p in t.partitions or ()}
    errors, wanted = commit_partitions(ctx.cluster, topics, topic_reader(ctx))
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
    return errors
