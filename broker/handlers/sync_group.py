"""SyncGroup (14), v0-5: the leader's assignment, handed to every member once durable."""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ._groups import coordinator, group_denied

API_KEY = 14
NAME = "SyncGroup"
VERSIONS = (0, 5)


async def handle(ctx, req):
    def fail(code):
        return {"throttle_time": 0, "error_code": code, "assignment": b"", "protocol_type": None, "protocol_name": None}

    if ctx.version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        return fail(ErrorCode.inconsistent_group_protocol)
    if group_denied(ctx, req.group_id):
        return fail(ErrorCode.group_authorization_failed)
    if not req.group_id:
        return fail(ErrorCode.invalid_group_id)
    assignments = {a.member_id: a.assignment for a in req.assignments or ()}
    try:
        body = await coordinator(ctx).sync_group(
            req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None),
            getattr(req, "protocol_type", None), getattr(req, "protocol_name", None), assignments,
        )
    except CoordinatorError as exc:
        return fail(exc.code)
    return {"throttle_time": 0, **body}
