"""ListGroups (16), v0-5, with state (v4+) and type (v5+) filters, case-insensitive."""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..security.authorizer import Operation, ResourceType
from ._groups import coordinator

API_KEY = 16
NAME = "ListGroups"
VERSIONS = (0, 5)


async def handle(ctx, req):
    states = {s.strip().lower() for s in (getattr(req, "states_filter", None) or ())}
    types = {t.strip().lower() for t in (getattr(req, "types_filter", None) or ())}
    groups = []
    try:
        found = await coordinator(ctx).list_groups()
    except CoordinatorError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "groups": []}
    visible = None
    if ctx.broker.authorizer is not None and not ctx.allowed_on_cluster(Operation.DESCRIBE):
        visible = lambda gid: ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, gid, audit=False)  # noqa: E731
    for g in found:
        if visible is not None and not visible(g.group_id):
            continue
        if states and g.state.lower() not in states:
            continue
        if types and g.group_type not in types:
            continue
        groups.append({"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state, "group_type": g.group_type})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups}
