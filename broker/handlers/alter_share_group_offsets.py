"""AlterShareGroupOffsets (91), v0: new start offsets for an empty share group, see ``_share_offsets``."""

from ._share_offsets import alter

API_KEY = 91
NAME = "AlterShareGroupOffsets"
VERSIONS = (0, 0)


async def handle(ctx, req):
    return await alter(ctx, req)
