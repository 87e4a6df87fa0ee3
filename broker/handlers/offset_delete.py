"""OffsetDelete (47), v0: delete a group's offsets for topics it does not subscribe to."""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ._groups import coordinator

from ..security.authorizer import Operation, ResourceType

API_KEY = 47
NAME = "OffsetDelete"
VERSIONS = (0, 0)


async def handle(ctx, req):
    authz = ctx.broker.authorizer
    if authz is not None and not ctx.allowed(Operation.DELETE, ResourceType.GROUP, req.group_id or ""):
        return {"error_code": ErrorCode.group_authorization_failed, "throttle_time": 0, "topics": []}
    if not req.group_id:
        return {"error_code": ErrorCode.invalid_group_id, "throttle_time": 0, "topics": []}
    cluster = ctx.cluster
    unknown = {}
    wanted = []
    for t in req.topics or ():
        topic = cluster.topics.get(t.name)
        parts = []
        denied = authz is not None and not ctx.allowed(Operation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions or ():
            if denied:
                unknown[(t.name, p.partition_index)] = ErrorCode.topic_authorization_failed
            elif topic is None or not 0 <= p.partition_index < len(topic.partitions):
                unknown[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
            else:
                parts.append(p.partition_index)
        wanted.append((t.name, parts))
    try:
        answer = await coordinator(ctx).offset_delete(req.group_id, wanted)
    except CoordinatorError as exc:
        return {"error_code": exc.code, "throttle_time": 0, "topics": []}
    codes = {(t, p): c for t, p, c in answer}
    codes.update(unknown)
    topics = [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": codes[(t.name, p.partition_index)]} for p in t.partitions or ()]} for t in req.topics or ()]
    return {"error_code": ErrorCode.none, "throttle_time": 0, "topics": topics}
