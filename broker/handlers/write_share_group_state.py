"""WriteShareGroupState (85), v0-1: a share partition's start offset and state batches (broker/share/)."""

from protocol.share_records import StateBatch

from ..share.state import WriteData
from ._share_state import handle_state_rpc

API_KEY = 85
NAME = "WriteShareGroupState"
VERSIONS = (0, 1)


def _op(coordinator, group_id, topic_id, p) -> dict:
    batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches or ()]
    coordinator.write(group_id, topic_id, WriteData(p.partition, p.state_epoch, p.leader_epoch, p.start_offset, batches,
                                                    getattr(p, "delivery_complete_count", -1)))
    return {}


async def handle(ctx, req):
    return await handle_state_rpc(ctx, req, _op, {})
