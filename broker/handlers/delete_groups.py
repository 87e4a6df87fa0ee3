"""DeleteGroups (42), v0-2: only Empty groups; their offsets and the group are tombstoned."""

from protocol.errors import ErrorCode

from ._groups import coordinator

from ..security.authorizer import Operation, ResourceType

API_KEY = 42
NAME = "DeleteGroups"
VERSIONS = (0, 2)


async def handle(ctx, req):
    names = list(dict.fromkeys(req.groups_names or ()))
    results = {gid: ErrorCode.invalid_group_id for gid in names if gid is None}
    if ctx.broker.authorizer is not None:
        results.update({gid: ErrorCode.group_authorization_failed for gid in names if gid is not None and not ctx.allowed(Operation.DELETE, ResourceType.GROUP, gid)})
    results.update(await coordinator(ctx).delete_groups([gid for gid in names if gid not in results]))
    return {"throttle_time": 0, "results": [{"group_id": gid, "error_code": results[gid]} for gid in names]}
