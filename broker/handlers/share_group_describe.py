"""ShareGroupDescribe (77), v1: KIP-932 share groups, their members and assignments.

Authorization as Kafka 4.4's KafkaApis: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED), then
DESCRIBE on every topic its members are assigned (else TOPIC_AUTHORIZATION_FAILED for that group).
"""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..coordinator.service import GroupListing, ShareGroupDescription
from ..security.authorizer import Operation, ResourceType
from . import UNKNOWN_OPERATIONS
from ._groups import assignment_answer, coordinator

API_KEY = 77
NAME = "ShareGroupDescribe"
VERSIONS = (1, 1)


def _missing(group_id: str, code: ErrorCode, message: str | None) -> dict:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
            "assignor_name": "", "members": [], "authorized_operations": UNKNOWN_OPERATIONS}


def describe(group_id: str, group: ShareGroupDescription | GroupListing | None) -> dict:
    if group is None:
        return _missing(group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    if not isinstance(group, ShareGroupDescription):
        return _missing(group_id, ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
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
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "assignment": assignment_answer(m.assignment),
            }
            for m in group.members
        ],
        "authorized_operations": UNKNOWN_OPERATIONS,
    }


def _topics_visible(ctx, entry: dict) -> bool:
    """As KafkaApis: may the client DESCRIBE every topic the group's members are assigned?"""
    names = {tp["topic_name"] for m in entry["members"] for tp in m["assignment"]["topic_partitions"]}
    return all(ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name) for name in names)


async def handle(ctx, req):
    out = []
    authz = ctx.broker.authorizer
    for group_id in req.group_ids or ():
        if authz is not None and not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append(_missing(group_id, ErrorCode.group_authorization_failed, None))
            continue
        try:
            group = await coordinator(ctx).share_group_describe(group_id)
        except CoordinatorError as exc:
            out.append(_missing(group_id, exc.code, None))
            continue
        entry = describe(group_id, group)
        if authz is not None and entry["error_code"] == ErrorCode.none and not _topics_visible(ctx, entry):
            entry = _missing(group_id, ErrorCode.topic_authorization_failed, "The group has described topic(s) that the client is not authorized to describe.")
        if req.include_authorized_operations and entry["error_code"] == ErrorCode.none:
            entry["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, group_id)
        out.append(entry)
    return {"throttle_time": 0, "groups": out}
