"""What the group coordinator's describe and list operations answer: plain, frozen data.

Kafka builds its ``DescribedGroup`` and ``ListedGroup`` inside the shard; so
do these functions, called by the shard's read operations (``GroupShard``'s
``describe_group``, ``describe_consumer_group``, ``describe_share_group`` and
``list_groups``), so that no group object leaves the coordinator and a
description is one consistent view of the group. The handlers turn them into
their answers (wire fields, versions, authorization); the service
(``service.py``) re-exports the classes.

This module does not import the share-group code (imported by the first
share-group request, with its ``simple`` assignor): the shard tells which
kind a group is.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from .assignors import choose_assignor
from .classic_group import STABLE

# ListGroups' group types (KIP-848), as Kafka names them
CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"


@dataclass(frozen=True)
class GroupListing:
    """One group as ListGroups shows it (and what ShareGroupDescribe knows of a group of another kind)."""

    group_id: str
    group_type: str  # CLASSIC, CONSUMER or SHARE
    protocol_type: str
    state: str


@dataclass(frozen=True)
class ClassicMemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # of the group's protocol when the group is Stable, else empty
    assignment: bytes


@dataclass(frozen=True)
class ClassicGroupDescription:
    """A classic group as DescribeGroups shows it."""

    group_id: str
    state: str
    protocol_type: str
    protocol_data: str  # the protocol name when the group is Stable, else empty
    members: tuple[ClassicMemberDescription, ...]


@dataclass(frozen=True)
class TopicAssignment:
    topic_id: uuid.UUID
    topic_name: str  # "" for a topic id the cluster does not know
    partitions: tuple[int, ...]  # sorted


@dataclass(frozen=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str  # "" for none
    assignment: tuple[TopicAssignment, ...]
    target_assignment: tuple[TopicAssignment, ...]
    classic: bool  # a member speaking the classic protocol


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """A KIP-848 consumer group as ConsumerGroupDescribe shows it."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ConsumerMemberDescription, ...]


@dataclass(frozen=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[TopicAssignment, ...]


@dataclass(frozen=True)
class ShareGroupDescription:
    """A share group as ShareGroupDescribe shows it."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ShareMemberDescription, ...]


def listing(group, group_type: str) -> GroupListing:
    return GroupListing(group.group_id, group_type, group.protocol_type or "", group.state)


def classic_group(group) -> ClassicGroupDescription:
    stable = group.state == STABLE
    return ClassicGroupDescription(
        group.group_id, group.state, group.protocol_type or "", (group.protocol_name or "") if stable else "",
        tuple(
            ClassicMemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.metadata(group.protocol_name) if stable else b"", m.assignment)
            for m in group.members.values()
        ),
    )


def assignment(by_id: Mapping, assigned: Mapping) -> tuple[TopicAssignment, ...]:
    """{topic id: partitions} as topics named from ``by_id`` (topic id -> name), those with no partition left out."""
    return tuple(TopicAssignment(tid, by_id.get(tid, ""), tuple(sorted(parts))) for tid, parts in assigned.items() if parts)


def consumer_group(group, by_id: Mapping) -> ConsumerGroupDescription:
    return ConsumerGroupDescription(
        group.group_id, group.state, group.group_epoch, group.assignment_epoch,
        choose_assignor(m.server_assignor for m in group.members.values()),
        tuple(
            ConsumerMemberDescription(
                m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host, tuple(m.subscribed_topic_names),
                m.subscribed_topic_regex or "", assignment(by_id, m.assigned), assignment(by_id, group.target.get(m.member_id, {})),
                m.uses_classic_protocol,
            )
            for m in group.members.values()
        ),
    )


def share_group(group, by_id: Mapping) -> ShareGroupDescription:
    from .assignors.simple import NAME as SIMPLE  # share-group code: imported with the first share group

    return ShareGroupDescription(
        group.group_id, group.state, group.group_epoch, group.assignment_epoch, SIMPLE,
        tuple(
            ShareMemberDescription(m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host, tuple(m.subscribed_topic_names),
                                   assignment(by_id, m.assigned))
            for m in group.members.values()
        ),
    )
