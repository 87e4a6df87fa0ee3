"""Heartbeat (12), v0-4. While a shard is still loading the answer is NONE, as in Kafka."""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ._groups import coordinator, group_denied

API_KEY = 12
NAME = "Heartbeat"
VERSIONS = (0, 4)


async def handle(ctx, req):
    if group_denied(ctx, req.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    if not req.group_id:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_group_id}
    try:
        code = await coordinator(ctx).heartbeat(req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None))
    except CoordinatorError as exc:
        code = exc.code
    return {"throttle_time": 0, "error_code": code}
