"""DeleteShareGroupOffsets (92), v0: an empty share group's state for topics, see ``_share_offsets``."""

from ._share_offsets import delete

API_KEY = 92
NAME = "DeleteShareGroupOffsets"
VERSIONS = (0, 0)


async def handle(ctx, req):
    return await delete(ctx, req)
