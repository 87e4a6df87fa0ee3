"""DescribeGroups (15), v0-6.

A Stable group shows its protocol and each member's metadata and assignment;
other states show no protocol data and members without metadata (but with
their last assignment, as Kafka 4.1 does). An unknown group is reported Dead
with no error up to v5, and GROUP_ID_NOT_FOUND from v6 (KIP-1043).
"""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..coordinator.service import ClassicGroupDescription
from ..security.authorizer import Operation, ResourceType
from . import UNKNOWN_OPERATIONS
from ._groups import coordinator

API_KEY = 15
NAME = "DescribeGroups"
VERSIONS = (0, 6)


def describe(group_id: str, group: ClassicGroupDescription | None, version: int) -> dict:
    if group is None:
        entry = {"group_id": group_id, "group_state": "Dead", "protocol_type": "", "protocol_data": "", "members": [],
                 "authorized_operations": UNKNOWN_OPERATIONS}
        if version >= 6:
            return {**entry, "error_code": ErrorCode.group_id_not_found, "error_message": f"Group {group_id} not found."}
        return {**entry, "error_code": ErrorCode.none, "error_message": None}
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "group_id": group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type,
        "protocol_data": group.protocol_data,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in group.members
        ],
        "authorized_operations": UNKNOWN_OPERATIONS,
    }


async def handle(ctx, req):
    out = []
    authz = ctx.broker.authorizer
    with_ops = ctx.version >= 3 and getattr(req, "include_authorized_operations", False)
    for group_id in req.groups or ():
        if authz is not None and not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append({"group_id": group_id, "error_code": ErrorCode.group_authorization_failed, "error_message": None, "group_state": "", "protocol_type": "",
                        "protocol_data": "", "members": [], "authorized_operations": UNKNOWN_OPERATIONS})
            continue
        try:
            group = await coordinator(ctx).describe_group(group_id)
        except CoordinatorError as exc:
            out.append({"group_id": group_id, "error_code": exc.code, "error_message": None, "group_state": "", "protocol_type": "", "protocol_data": "", "members": []})
            continue
        # None also for a KIP-848 group, which is not a classic group: Dead below v6, GROUP_ID_NOT_FOUND from v6
        entry = describe(group_id, group, ctx.version)
        if with_ops and entry["error_code"] == ErrorCode.none:
            entry["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, group_id)
        out.append(entry)
    return {"throttle_time": 0, "groups": out}
