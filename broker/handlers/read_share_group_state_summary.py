"""ReadShareGroupStateSummary (87), v0-1: a share partition's start offset and epochs (broker/share/).

A key with no state answers start offset -1, epochs 0 (Kafka 4.4)."""

from ._share_state import handle_state_rpc

API_KEY = 87
NAME = "ReadShareGroupStateSummary"
VERSIONS = (0, 1)
_ERROR_FIELDS = {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "delivery_complete_count": -1}


def _op(coordinator, group_id, topic_id, p) -> dict:
    state = coordinator.summary(group_id, topic_id, p.partition)
    if state is None:
        return {"state_epoch": 0, "leader_epoch": 0, "start_offset": -1, "delivery_complete_count": -1}
    return {"state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch, "start_offset": state.start_offset,
            "delivery_complete_count": state.delivery_complete_count}


async def handle(ctx, req):
    return await handle_state_rpc(ctx, req, _op, _ERROR_FIELDS)
