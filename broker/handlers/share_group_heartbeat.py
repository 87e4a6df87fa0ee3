"""ShareGroupHeartbeat (76), v1: KIP-932 share groups.

Request validation happens here, as in Kafka 4.4's GroupCoordinatorService
(INVALID_REQUEST with its message; an empty member id, which KafkaApis refuses
before the coordinator, with none: the member id is the client's, never the
broker's); the rest is ``broker/coordinator/share.py`` on the group's shard.
Authorization as Kafka's KafkaApis: READ on the group, then DESCRIBE on each
subscribed topic (TOPIC_AUTHORIZATION_FAILED naming the topics refused).
"""

from protocol.errors import ErrorCode

from ..coordinator.common import CoordinatorError
from ..coordinator.share import ShareHeartbeatParams
from ..security.authorizer import Operation, ResourceType
from ._groups import client_host, coordinator

API_KEY = 76
NAME = "ShareGroupHeartbeat"
VERSIONS = (1, 1)


def _error(code: ErrorCode, message: str | None) -> dict:
    # as Kafka: an error answer carries no member id and epoch 0
    return {"throttle_time": 0, "error_code": code, "error_message": message, "member_id": None, "member_epoch": 0, "heartbeat_interval": 0,
            "assignment": None}


def validate(req) -> str | None:
    """Why Kafka refuses the request before its coordinator (its message), or None."""
    if not req.member_id:
        return "MemberId can't be empty."
    if not req.group_id:
        return "GroupId can't be empty."
    if req.rack_id is not None and not req.rack_id:
        return "RackId can't be empty."
    if req.member_epoch == 0:
        if not req.subscribed_topic_names:
            return "SubscribedTopicNames must be set in first request."
    elif req.member_epoch < -1:
        return "MemberEpoch is invalid."
    return None


async def handle(ctx, req):
    if ctx.broker.authorizer is not None:
        if not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id or ""):
            return _error(ErrorCode.group_authorization_failed, None)
        refused = sorted({t for t in req.subscribed_topic_names or () if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t)})
        if refused:
            return _error(ErrorCode.topic_authorization_failed, f"The group has subscribed to topics that are not authorized: {', '.join(refused)}")
    problem = validate(req)
    if problem is not None:
        return _error(ErrorCode.invalid_request, None if not req.member_id else problem)
    params = ShareHeartbeatParams(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        rack_id=req.rack_id,
        subscribed_topic_names=None if req.subscribed_topic_names is None else list(req.subscribed_topic_names),
        client_id=ctx.request.client_id or "",
        client_host=client_host(ctx),
    )
    try:
        body = await coordinator(ctx).share_group_heartbeat(params)
    except CoordinatorError as exc:
        return _error(exc.code, exc.message)
    return {"throttle_time": 0, **body}
