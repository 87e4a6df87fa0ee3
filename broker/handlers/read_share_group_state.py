"""ReadShareGroupState (84), v0: a share partition's state; a newer leader epoch is written first (broker/share/)."""

from ._share_state import handle_state_rpc

API_KEY = 84
NAME = "ReadShareGroupState"
VERSIONS = (0, 0)
_ERROR_FIELDS = {"state_epoch": 0, "start_offset": 0, "state_batches": []}


def _op(coordinator, group_id, topic_id, p) -> dict:
    state = coordinator.read(group_id, topic_id, p.partition, p.leader_epoch)
    batches = [{"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state,
                "delivery_count": b.delivery_count} for b in state.state_batches]
    return {"state_epoch": state.state_epoch, "start_offset": state.start_offset, "state_batches": batches}


async def handle(ctx, req):
    return await handle_state_rpc(ctx, req, _op, _ERROR_FIELDS)
