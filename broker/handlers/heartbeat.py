"""Heartbeat (12), v0-4. While a shard is still loading the answer is NONE, as in Kafka."""

from protocol.errors import ErrorCode

from ..coordinator.common import Result
from ..coordinator.consumer_group import ConsumerGroup
from ._groups import on_shard

API_KEY = 12
NAME = "Heartbeat"
VERSIONS = (0, 4)


async def handle(ctx, req):
    if not req.group_id:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_group_id}

    def op(shard):
        group = shard.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup):
            return Result(response=shard.migration.classic_heartbeat(group, req.member_id, getattr(req, "group_instance_id", None), req.generation_id))
        return Result(response=shard.classic.heartbeat(req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None)))

    error, code = await on_shard(ctx, req.group_id, "write", op)
    if error is ErrorCode.coordinator_load_in_progress:
        code = ErrorCode.none
    elif error is not ErrorCode.none:
        code = error
    return {"throttle_time": 0, "error_code": code}
