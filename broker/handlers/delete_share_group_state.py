"""DeleteShareGroupState (86), v0: tombstones for share-partition keys (broker/share/)."""

from ._share_state import handle_state_rpc

API_KEY = 86
NAME = "DeleteShareGroupState"
VERSIONS = (0, 0)


def _op(coordinator, group_id, topic_id, p) -> dict:
    coordinator.delete(group_id, topic_id, p.partition)
    return {}


async def handle(ctx, req):
    return await handle_state_rpc(ctx, req, _op, {})
