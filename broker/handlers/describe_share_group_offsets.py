"""DescribeShareGroupOffsets (90), v0-1: share groups' start offsets (and v1's lag), see ``_share_offsets``."""

from ._share_offsets import describe_group

API_KEY = 90
NAME = "DescribeShareGroupOffsets"
VERSIONS = (0, 1)


async def handle(ctx, req):
    return {"throttle_time": 0, "groups": [describe_group(ctx, g, ctx.version) for g in req.groups or ()]}
