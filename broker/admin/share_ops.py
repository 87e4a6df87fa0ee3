"""``kafkalite groups describe`` of a KIP-932 share group (ShareGroupDescribe, API 77)."""

from __future__ import annotations

from protocol.errors import ErrorCode

from .client import SHARE_GROUP_DESCRIBE, AdminClient, check


def modern_group(group: str, kind: str, g, coordinator: dict) -> dict:
    """What ``describe_group`` shows of a KIP-848 or KIP-932 group besides its members."""
    return {"group": group, "type": kind, "state": g.group_state, "coordinator": coordinator, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "assignor": g.assignor_name}


def describe_share_group(client: AdminClient, group: str, coordinator: dict) -> dict | None:
    """The share group ``group`` as ``describe_group`` shows groups, or None when it is not a share
    group (or the broker has no ShareGroupDescribe)."""
    if not client.coordinator(group).supports(SHARE_GROUP_DESCRIBE):
        return None
    g, code = client.describe_group(group, SHARE_GROUP_DESCRIBE)
    if code == ErrorCode.group_id_not_found:
        return None
    check(code, f"ShareGroupDescribe({group})", g.error_message)
    return {
        **modern_group(group, "share", g, coordinator),
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": None,
                "rack": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "host": m.client_host,
                "subscribed_topics": list(m.subscribed_topic_names),
                "subscribed_regex": None,
                "assignment": sorted([tp.topic_name, p] for tp in m.assignment.topic_partitions for p in tp.partitions),
                "target_assignment": None,  # ShareGroupDescribe has none: a share member takes its target whole
            }
            for m in g.members
        ],
    }
