"""ShareGroupHeartbeat (76), v1: KIP-932 share groups.

Request validation happens here, as in Kafka 4.4's KafkaApis and
GroupCoordinatorService (INVALID_REQUEST; with the service's message, except
for a member id that is empty or longer than 36 characters, which KafkaApis
refuses with none: the member id is the client's, never the broker's); the
rest is ``broker/coordinator/share.py`` on the group's shard. Authorization as
KafkaApis: READ on the group, then DESCRIBE on each subscribed topic
(TOPIC_AUTHORIZATION_FAILED, no message).
"""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..coordinator.service import ShareHeartbeatParams
from ..security.authorizer import Operation, ResourceType
from ._groups import client_host, coordinator

API_KEY = 76
NAME = "ShareGroupHeartbeat"
VERSIONS = (1, 1)


def _error(code: ErrorCode, message: str | None) -> dict:
    # as Kafka: an error answer carries no member id and epoch 0
    return {"throttle_time": 0, "error_code": code, "error_message": message, "member_id": None, "member_epoch": 0, "heartbeat_interval": 0,
            "assignment": None}


MAX_MEMBER_ID = 36  # KafkaApis.isMemberIdValid: 1 to 36 characters (a UUID's text at most)


def validate(req) -> str | None:
    """Why Kafka's coordinator service refuses the request (its message), or None."""
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
    # KafkaApis: READ on the group, a member id of 1 to 36 characters, DESCRIBE on every subscribed topic
    # (each refusal with no message), then the coordinator service's checks
    authz = ctx.broker.authorizer is not None
    if authz and not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id or ""):
        return _error(ErrorCode.group_authorization_failed, None)
    if not req.member_id or len(req.member_id) > MAX_MEMBER_ID:
        return _error(ErrorCode.invalid_request, None)
    if authz and req.subscribed_topic_names:
        for topic in set(req.subscribed_topic_names):
            if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic):
                return _error(ErrorCode.topic_authorization_failed, None)
    problem = validate(req)
    if problem is not None:
        return _error(ErrorCode.invalid_request, problem)
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
