"""JoinGroup (11), v0-9: the classic protocol's join phase (broker/coordinator/classic.py)."""

from protocol.errors import ErrorCode

from ..coordinator.classic import JoinParams, join_error
from ..coordinator.consumer_group import ConsumerGroup
from ._groups import client_host, coordinator, ms, on_shard

API_KEY = 11
NAME = "JoinGroup"
VERSIONS = (0, 9)


def _shape(version: int, body: dict) -> dict:
    # KIP-559: below v7 a null protocol name goes out as "", from v7 an empty one as null
    if version < 7:
        body["protocol_name"] = body.get("protocol_name") or ""
    elif body.get("protocol_name") == "":
        body["protocol_name"] = None
    return body


def join(shard, params):
    group = shard.groups.get(params.group_id)
    if isinstance(group, ConsumerGroup):
        if group.members:  # a classic member inside a consumer group
            return shard.migration.classic_join(group, params, shard.new_future())
        records = shard.migration.drop_empty(group)
        result = shard.classic.join(params)
        result.records[:0] = records
        return result
    return shard.classic.join(params)


async def handle(ctx, req):
    v = ctx.version
    group_id = req.group_id
    session_ms = ms(req.session_timeout)
    if not group_id:
        return _shape(v, join_error(ErrorCode.invalid_group_id, req.member_id))
    cfg = coordinator(ctx).config
    if not cfg.group_min_session_timeout_ms <= session_ms <= cfg.group_max_session_timeout_ms:
        return _shape(v, join_error(ErrorCode.invalid_session_timeout, req.member_id))
    params = JoinParams(
        group_id=group_id,
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols or ()],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=ms(req.rebalance_timeout) if v >= 1 else session_ms,
        reason=getattr(req, "reason", None),
        version=v,
        client_id=ctx.request.client_id or "",
        client_host=client_host(ctx),
    )
    error, body = await on_shard(ctx, group_id, "write", lambda shard: join(shard, params))
    if error is not ErrorCode.none:
        return _shape(v, join_error(error, req.member_id))
    return _shape(v, dict(body))
