"""IncrementalAlterConfigs (44), v0-1: edit the values of a topic, group or broker resource
(SET, DELETE, APPEND, SUBTRACT); checked, kept and applied as AlterConfigs (alter_configs.py).
"""

from ._configs import alter

API_KEY = 44
NAME = "IncrementalAlterConfigs"
VERSIONS = (0, 1)


async def handle(ctx, req):
    return alter(ctx, req, incremental=True)
