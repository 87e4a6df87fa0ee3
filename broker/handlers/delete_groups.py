"""DeleteGroups (42), v0-2: only Empty groups; their offsets and the group are tombstoned."""

from protocol.errors import ErrorCode

from ._groups import coordinator, on_shard

API_KEY = 42
NAME = "DeleteGroups"
VERSIONS = (0, 2)


async def handle(ctx, req):
    names = list(dict.fromkeys(req.groups_names or ()))
    by_shard: dict[int, list[str]] = {}
    results = {}
    for gid in names:
        if gid is None:
            results[gid] = ErrorCode.invalid_group_id
            continue
        by_shard.setdefault(coordinator(ctx).partition_for(gid), []).append(gid)
    for ids in by_shard.values():
        error, answer = await on_shard(ctx, ids[0], "write", lambda shard, ids=ids: shard.delete_groups(ids))
        if error is not ErrorCode.none:
            results.update({gid: error for gid in ids})
        else:
            results.update(dict(answer))
    return {"throttle_time": 0, "results": [{"group_id": gid, "error_code": results[gid]} for gid in names]}
