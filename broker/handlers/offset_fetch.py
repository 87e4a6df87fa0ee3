"""OffsetFetch (9), v1-10: one group (v1-7) or a batch of groups (v8+); v10
names topics by id (Kafka 4.2+): an id the cluster does not know is
UNKNOWN_TOPIC_ID for each partition asked, and a fetch of every topic leaves
out offsets of topics that no longer exist (they have no id to give).

Without ``require_stable`` the answer is read from committed state; with it
the fetch first waits for the shard's in-flight writes, and a partition with
a transactional offset commit still pending answers UNSTABLE_OFFSET_COMMIT
(offset -1), as in Kafka. An unknown group is not an error: its partitions
come back with offset -1.
"""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..coordinator.service import UNSTABLE
from ..security.authorizer import Operation, ResourceType
from ._groups import coordinator, group_denied, named_topics

API_KEY = 9
NAME = "OffsetFetch"
VERSIONS = (1, 10)


async def fetch_group(ctx, group_id: str, topics, stable: bool, member_id: str | None = None, member_epoch: int = -1):
    """(error, [topic dicts])."""
    wanted = None if topics is None else [(t.name, list(t.partition_indexes or ())) for t in topics]
    denied: list = []
    authz = ctx.broker.authorizer is not None
    if authz:  # as Kafka: DESCRIBE on the group, and on each topic (the others are answered last, or left out)
        if group_denied(ctx, group_id, Operation.DESCRIBE):
            return ErrorCode.group_authorization_failed, []
        if wanted is not None:
            denied = [(t, ps) for t, ps in wanted if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t)]
            wanted = [(t, ps) for t, ps in wanted if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t)]
    try:
        rows = await coordinator(ctx).offset_fetch(group_id, wanted, stable=stable, member_id=member_id, member_epoch=member_epoch)
    except CoordinatorError as exc:
        return exc.code, []
    by_topic: dict[str, list] = {}
    for topic, partition, value in rows:
        if value is UNSTABLE:
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": ErrorCode.unstable_offset_commit}
            )
            continue
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": value.offset if value else -1,
                "committed_leader_epoch": value.leader_epoch if value else -1,
                "metadata": value.metadata if value else "",
                "error_code": ErrorCode.none,
            }
        )
    if authz and topics is None:
        by_topic = {t: parts for t, parts in by_topic.items() if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t, audit=False)}
    answer = [{"name": t, "partitions": parts} for t, parts in by_topic.items()]
    for t, ps in denied:
        answer.append({"name": t, "partitions": [
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": ErrorCode.topic_authorization_failed} for p in ps
        ]})
    return ErrorCode.none, answer


async def handle(ctx, req):
    v = ctx.version
    stable = bool(getattr(req, "require_stable", False))
    if v >= 8:
        groups = []
        for g in req.groups or ():
            fetch = _fetch_by_id if v >= 10 else fetch_group
            error, topics = await fetch(ctx, g.group_id, g.topics, stable, getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return {"throttle_time": 0, "groups": groups}
    error, topics = await fetch_group(ctx, req.group_id, req.topics, stable)
    if v == 1 and error is not ErrorCode.none:
        # v1 has no top-level error: every partition carries it
        topics = [
            {"name": t.name, "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": error} for p in t.partition_indexes or ()]}
            for t in req.topics or []
        ]
    return {"throttle_time": 0, "topics": topics, "error_code": error}


async def _fetch_by_id(ctx, group_id: str, topics, stable: bool, member_id: str | None, member_epoch: int):
    """``fetch_group`` for v10+, whose topics are named by id, in the request and in the answer."""
    named = None if topics is None else named_topics(ctx.cluster, topics, "partition_indexes")
    known = None if named is None else [t for t in named if t.name is not None]
    error, answer = await fetch_group(ctx, group_id, known, stable, member_id, member_epoch)
    if error is not ErrorCode.none:
        return error, answer
    by_id = []
    for t in answer:
        topic = ctx.cluster.topics.get(t["name"])
        if topic is not None:
            by_id.append({"topic_id": topic.topic_id, "partitions": t["partitions"]})
    for t in named or ():
        if t.name is None:
            by_id.append({"topic_id": t.topic_id, "partitions": [
                {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": ErrorCode.unknown_topic_id}
                for p in t.partition_indexes or ()]})
    return error, by_id
