"""ConsumerGroupDescribe (69), v0-1: KIP-848 groups, with current and target assignments."""

from protocol.errors import ErrorCode

from ..coordinator.assignors import choose_assignor
from ..coordinator.common import CoordinatorError
from ..coordinator.consumer_group import ConsumerGroup
from ._groups import coordinator

from ..security.authorizer import Operation, ResourceType

API_KEY = 69
NAME = "ConsumerGroupDescribe"
VERSIONS = (0, 1)
_UNKNOWN_OPS = -(2**31)
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1


def _assignment(meta, asg) -> dict:
    return {
        "topic_partitions": [
            {"topic_id": tid, "topic_name": meta.by_id.get(tid, ""), "partitions": sorted(parts)}
            for tid, parts in asg.items()
            if parts
        ]
    }


def describe(ctx, group_id: str, group) -> dict:
    if not isinstance(group, ConsumerGroup):
        return {"error_code": ErrorCode.group_id_not_found, "error_message": f"Group {group_id} not found.", "group_id": group_id, "group_state": "", "members": [], "authorized_operations": _UNKNOWN_OPS}
    meta = ctx.cluster.metadata
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "group_id": group_id,
        "group_state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": choose_assignor(m.server_assignor for m in group.members.values()),
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex or "",
                "assignment": _assignment(meta, m.assigned),
                "target_assignment": _assignment(meta, group.target.get(m.member_id, {})),
                "member_type": CLASSIC_MEMBER if m.uses_classic_protocol else CONSUMER_MEMBER,
            }
            for m in group.members.values()
        ],
        "authorized_operations": _UNKNOWN_OPS,
    }


async def handle(ctx, req):
    out = []
    authz = ctx.broker.authorizer
    for group_id in req.group_ids or ():
        if authz is not None and not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append({"error_code": ErrorCode.group_authorization_failed, "error_message": None, "group_id": group_id, "members": []})
            continue
        try:
            group = await coordinator(ctx).group(group_id)
        except CoordinatorError as exc:
            out.append({"error_code": exc.code, "error_message": None, "group_id": group_id, "members": []})
            continue
        entry = describe(ctx, group_id, group)
        if req.include_authorized_operations and entry["error_code"] == ErrorCode.none:
            entry["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, group_id)
        out.append(entry)
    return {"throttle_time": 0, "groups": out}
