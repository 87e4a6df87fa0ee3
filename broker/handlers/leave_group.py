"""LeaveGroup (13), v0-5: one member (v0-2) or a batch by member or instance id (v3+)."""

from protocol.errors import ErrorCode

from ..coordinator.common import Result
from ..coordinator.consumer_group import ConsumerGroup
from ._groups import on_shard

API_KEY = 13
NAME = "LeaveGroup"
VERSIONS = (0, 5)


async def handle(ctx, req):
    v = ctx.version
    if v < 3:
        members = [(req.member_id, None, None)]
    else:
        members = [(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in req.members or ()]
    if not req.group_id:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_group_id, "members": []}

    def op(shard):
        group = shard.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup):
            top, results, records = shard.migration.classic_leave(group, members)
        else:
            top, results, records = shard.classic.leave(req.group_id, members)
        return Result(records=records, response=(top, results))

    error, body = await on_shard(ctx, req.group_id, "write", op)
    if error is not ErrorCode.none:
        return {"throttle_time": 0, "error_code": error, "members": []}
    top, results = body
    if v < 3 and top is ErrorCode.none and results:
        top = results[0]["error_code"]  # v0-2 flatten the single member's error
    return {"throttle_time": 0, "error_code": top, "members": results}
