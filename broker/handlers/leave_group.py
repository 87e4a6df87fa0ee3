"""LeaveGroup (13), v0-5: one member (v0-2) or a batch by member or instance id (v3+)."""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ._groups import coordinator, group_denied

API_KEY = 13
NAME = "LeaveGroup"
VERSIONS = (0, 5)


async def handle(ctx, req):
    v = ctx.version
    if v < 3:
        members = [(req.member_id, None, None)]
    else:
        members = [(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in req.members or ()]
    if group_denied(ctx, req.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "members": []}
    if not req.group_id:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_group_id, "members": []}

    try:
        top, results = await coordinator(ctx).leave_group(req.group_id, members)
    except CoordinatorError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "members": []}
    if v < 3 and top is ErrorCode.none and results:
        top = results[0]["error_code"]  # v0-2 flatten the single member's error
    return {"throttle_time": 0, "error_code": top, "members": results}
