"""OffsetCommit (8), v2-10. Errors are per partition; there is no top-level error field.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION before the
coordinator sees the request; the rest follow Kafka's validation matrix
(broker/coordinator/offsets.py) and are answered once their records are durable.
v10 names topics by id (Kafka 4.2+): an id the cluster does not know is
UNKNOWN_TOPIC_ID for each of its partitions; offsets are still kept by name.
"""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..pending import Pending, settle
from ._groups import commit_answer, commit_answer_by_id, commit_partitions, coordinator, group_denied, ms, named_topics, topic_reader

API_KEY = 8
NAME = "OffsetCommit"
VERSIONS = (2, 10)


def begin(ctx, req):
    """The answer, or a Pending of it (``broker/pending.py``): reads ``ctx`` only here."""
    if ctx.version >= 10:
        topics = named_topics(ctx.cluster, req.topics, "partitions")
        errors = _commit(ctx, req, [t for t in topics if t.name is not None])

        def answer(errors: dict) -> dict:
            return {"throttle_time": 0, "topics": commit_answer_by_id(topics, errors)}
    else:
        errors = _commit(ctx, req, req.topics)

        def answer(errors: dict) -> dict:
            return {"throttle_time": 0, "topics": commit_answer(req.topics, errors)}
    if type(errors) is Pending:
        return errors.then(lambda get: answer(get()))
    return answer(errors)


async def handle(ctx, req):
    return await settle(begin(ctx, req))


def _commit(ctx, req, topics):
    """(topic name, partition) -> error for each partition of ``topics`` (which have names), or a Pending of it."""
    if group_denied(ctx, req.group_id):
        code = ErrorCode.group_authorization_failed
        return {(t.name, p.partition_index): code for t in topics or () for p in t.partitions or ()}
    errors, wanted = commit_partitions(ctx.cluster, topics, topic_reader(ctx))
    if req.group_id is None:
        code = ErrorCode.invalid_group_id
        errors.update({(c.topic, c.partition): code for c in wanted})
        return errors
    if not wanted:
        return errors

    def merge(get) -> dict:
        try:
            answer = get()
        except CoordinatorError as exc:
            return refused(exc)
        errors.update({(t, p): code for t, p, code in answer})
        return errors

    def refused(exc: CoordinatorError) -> dict:
        errors.update({(c.topic, c.partition): exc.code for c in wanted})
        return errors

    retention = ms(req.retention_time) if hasattr(req, "retention_time") else -1
    try:
        answer = coordinator(ctx).begin_offset_commit(
            req.group_id, req.member_id, req.generation_id_or_member_epoch, getattr(req, "group_instance_id", None),
            ctx.version, retention, wanted,
        )
    except CoordinatorError as exc:
        return refused(exc)
    if type(answer) is Pending:
        return answer.then(merge)
    return merge(lambda: answer)
