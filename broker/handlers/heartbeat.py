"""Heartbeat (12), v0-4. While a shard is still loading the answer is NONE, as in Kafka."""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..pending import Pending, settle
from ._groups import coordinator, group_denied

API_KEY = 12
NAME = "Heartbeat"
VERSIONS = (0, 4)


def begin(ctx, req):
    """The answer, or a Pending of it (``broker/pending.py``): reads ``ctx`` only here."""
    if group_denied(ctx, req.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    if not req.group_id:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_group_id}
    try:
        code = coordinator(ctx).begin_heartbeat(req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None))
    except CoordinatorError as exc:
        code = exc.code
    if type(code) is Pending:
        return code.then(_answer)
    return {"throttle_time": 0, "error_code": code}


def _answer(get) -> dict:
    try:
        code = get()
    except CoordinatorError as exc:
        code = exc.code
    return {"throttle_time": 0, "error_code": code}


async def handle(ctx, req):
    return await settle(begin(ctx, req))
