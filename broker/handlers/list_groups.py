"""ListGroups (16), v0-5, with state (v4+) and type (v5+) filters, case-insensitive."""

from protocol.errors import ErrorCode

from ..coordinator.consumer_group import ConsumerGroup
from ..coordinator.runtime import ACTIVE, LOADING
from ._groups import coordinator

API_KEY = 16
NAME = "ListGroups"
VERSIONS = (0, 5)


async def handle(ctx, req):
    states = {s.strip().lower() for s in (getattr(req, "states_filter", None) or ())}
    types = {t.strip().lower() for t in (getattr(req, "types_filter", None) or ())}
    groups = []
    for shard in coordinator(ctx).shards:
        if shard.state == LOADING:
            return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress, "groups": []}
        if shard.state != ACTIVE:
            continue
        for g in shard.shard.list_groups():
            kind = "consumer" if isinstance(g, ConsumerGroup) else "classic"
            if states and g.state.lower() not in states:
                continue
            if types and kind not in types:
                continue
            groups.append({"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state, "group_type": kind})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups}
