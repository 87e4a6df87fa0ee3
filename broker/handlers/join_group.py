"""JoinGroup (11), v0-9: the classic protocol's join phase (broker/coordinator/classic.py)."""

from protocol.errors import ErrorCode

from ..coordinator.service import JoinParams, join_error
from ..coordinator.errors import CoordinatorError
from ._groups import client_host, coordinator, group_denied, ms

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


async def handle(ctx, req):
    v = ctx.version
    group_id = req.group_id
    session_ms = ms(req.session_timeout)
    if group_denied(ctx, group_id):
        return _shape(v, join_error(ErrorCode.group_authorization_failed, req.member_id))
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
    try:
        body = await coordinator(ctx).join_group(params)
    except CoordinatorError as exc:
        return _shape(v, join_error(exc.code, req.member_id))
    return _shape(v, body)
