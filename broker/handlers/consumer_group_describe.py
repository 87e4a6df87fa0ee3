"""ConsumerGroupDescribe (69), v0-1: KIP-848 groups, with current and target assignments."""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..coordinator.service import ConsumerGroupDescription
from ..security.authorizer import Operation, ResourceType
from . import UNKNOWN_OPERATIONS
from ._groups import assignment_answer, coordinator

API_KEY = 69
NAME = "ConsumerGroupDescribe"
VERSIONS = (0, 1)
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1


def describe(group_id: str, group: ConsumerGroupDescription | None) -> dict:
    if group is None:
        return {"error_code": ErrorCode.group_id_not_found, "error_message": f"Group {group_id} not found.", "group_id": group_id, "group_state": "",
                "members": [], "authorized_operations": UNKNOWN_OPERATIONS}
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "group_id": group_id,
        "group_state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor_name,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": assignment_answer(m.assignment),
                "target_assignment": assignment_answer(m.target_assignment),
                "member_type": CLASSIC_MEMBER if m.classic else CONSUMER_MEMBER,
            }
            for m in group.members
        ],
        "authorized_operations": UNKNOWN_OPERATIONS,
    }


async def handle(ctx, req):
    out = []
    authz = ctx.broker.authorizer
    for group_id in req.group_ids or ():
        if authz is not None and not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append({"error_code": ErrorCode.group_authorization_failed, "error_message": None, "group_id": group_id, "members": []})
            continue
        try:
            group = await coordinator(ctx).consumer_group_describe(group_id)
        except CoordinatorError as exc:
            out.append({"error_code": exc.code, "error_message": None, "group_id": group_id, "members": []})
            continue
        entry = describe(group_id, group)
        if req.include_authorized_operations and entry["error_code"] == ErrorCode.none:
            entry["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, group_id)
        out.append(entry)
    return {"throttle_time": 0, "groups": out}
