"""InitializeShareGroupState (83), v0: a fresh state for share-partition keys (broker/share/)."""

from ._share_state import handle_state_rpc

API_KEY = 83
NAME = "InitializeShareGroupState"
VERSIONS = (0, 0)


def _op(coordinator, group_id, topic_id, p) -> dict:
    coordinator.initialize(group_id, topic_id, p.partition, p.state_epoch, p.start_offset)
    return {}


async def handle(ctx, req):
    return await handle_state_rpc(ctx, req, _op, {})
