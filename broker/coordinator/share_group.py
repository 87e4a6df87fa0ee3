"""KIP-932 share group state (Kafka 4.4's ShareGroup / ShareGroupMember) and its replay.

Everything here is rebuilt from the group's records (types 10-15, see
``protocol/group_records/share.py``): ``share.py`` changes a share group only
by emitting records, which the shard replays at once and at load alike.
Assignments are ``{topic_id: frozenset(partitions)}``.

Share groups have two states on the wire, ``Empty`` and ``Stable`` (and
``Dead`` once deleted), and one member state (STABLE): a member takes its
target assignment whole, several members may hold the same partition.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field

from protocol.group_records import share as rec

from .consumer_group import INITIAL_GROUP_EPOCH, EpochGroup
from .consumer_replay import replayed_group


EMPTY, STABLE_GROUP, DEAD = "Empty", "Stable", "Dead"
MEMBER_STABLE = 0

Assignment = dict[uuid.UUID, frozenset[int]]
# topic id -> (topic name, partitions): the share-partition state entries of a group
InitMap = dict[uuid.UUID, tuple[str, frozenset[int]]]

SHARE_KEYS = (
    rec.ShareGroupMetadataKey,
    rec.ShareGroupMemberMetadataKey,
    rec.ShareGroupTargetAssignmentMetadataKey,
    rec.ShareGroupTargetAssignmentMemberKey,
    rec.ShareGroupCurrentMemberAssignmentKey,
    rec.ShareGroupStatePartitionMetadataKey,
)


@dataclass(eq=False)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = MEMBER_STABLE
    assigned: Assignment = field(default_factory=dict)
    has_metadata: bool = False


@dataclass(eq=False)
class ShareGroup(EpochGroup):
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    created: bool = False  # a ShareGroupMetadata record exists
    # ShareGroupStatePartitionMetadata: None until the group's first such record
    initializing: InitMap | None = None
    initialized: InitMap | None = None
    deleting: dict[uuid.UUID, str] | None = None
    initializing_since_ms: int = 0  # not state: when this shard last asked for an initialization
    checked_metadata_version: int = -1  # not state: the cluster metadata the hash was last computed on
    state_timestamp: int = -1
    # kept up to date by replay, so a heartbeat need not walk every member
    topic_users: Counter = field(default_factory=Counter)  # topic name -> members subscribed to it
    target_version: int = 0  # moves whenever a member's target changes
    _held_cache: tuple = (-1, {})  # (target_version, {topic id: partitions in some target})

    protocol_type = "share"

    @property
    def state(self) -> str:
        return STABLE_GROUP if self.members else EMPTY

    def subscribed_topic_names(self) -> set[str]:
        return set(self.topic_users)

    def is_subscribed(self, topic: str) -> bool:
        return topic in self.topic_users

    def held_partitions(self) -> dict[uuid.UUID, set[int]]:
        """Every partition some member's target holds (cached until a target changes)."""
        version, held = self._held_cache
        if version != self.target_version:
            held = {}
            for asg in self.target.values():
                for tid, parts in asg.items():
                    held.setdefault(tid, set()).update(parts)
            self._held_cache = (self.target_version, held)
        return held

    def set_subscription(self, member: ShareMember, names: tuple[str, ...]) -> None:
        self.topic_users.subtract(set(member.subscribed_topic_names))
        self.topic_users.update(set(names))
        self.topic_users += Counter()  # drops the topics no member subscribes to any more
        member.subscribed_topic_names = names

    def drop_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.set_subscription(member, ())

    def set_target(self, member_id: str, assignment) -> None:
        if assignment is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = assignment
        self.target_version += 1

    def has_state_metadata(self) -> bool:
        return self.initializing is not None


# ==================================================================== record forms
def to_share_partitions(assignment: Assignment) -> list[rec.ShareTopicPartitions]:
    items = sorted(assignment.items(), key=lambda kv: str(kv[0]))
    return [rec.ShareTopicPartitions(tid, sorted(parts)) for tid, parts in items if parts]


def from_share_partitions(items) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in items if tp.partitions}


def _infos(m: InitMap | None) -> list[rec.TopicPartitionsInfo]:
    return [rec.TopicPartitionsInfo(tid, name, sorted(parts)) for tid, (name, parts) in sorted((m or {}).items(), key=lambda kv: str(kv[0]))]


def state_value(initializing: InitMap, initialized: InitMap, deleting: dict[uuid.UUID, str]) -> rec.ShareGroupStatePartitionMetadataValue:
    return rec.ShareGroupStatePartitionMetadataValue(
        initializing_topics=_infos(initializing),
        initialized_topics=_infos(initialized),
        deleting_topics=[rec.TopicInfo(tid, name) for tid, name in sorted(deleting.items(), key=lambda kv: str(kv[0]))],
    )


def _from_infos(items) -> InitMap:
    return {t.topic_id: (t.topic_name, frozenset(t.partitions)) for t in items}


# ==================================================================== replay
def replay_share(groups: dict, key, value) -> None:
    gid = key.group_id
    cls = type(key)
    if value is None:
        group = groups.get(gid)
        if not isinstance(group, ShareGroup):
            return
        if cls is rec.ShareGroupMetadataKey:
            del groups[gid]
        elif cls is rec.ShareGroupMemberMetadataKey:
            group.drop_member(key.member_id)
        elif cls is rec.ShareGroupTargetAssignmentMemberKey:
            group.set_target(key.member_id, None)
        elif cls is rec.ShareGroupCurrentMemberAssignmentKey:
            m = group.members.get(key.member_id)
            if m is not None:
                m.member_epoch, m.previous_member_epoch, m.state, m.assigned = 0, -1, MEMBER_STABLE, {}
        elif cls is rec.ShareGroupTargetAssignmentMetadataKey:
            group.assignment_epoch, group.assignment_timestamp = INITIAL_GROUP_EPOCH, 0
        elif cls is rec.ShareGroupStatePartitionMetadataKey:
            group.initializing = group.initialized = group.deleting = None
        return
    group = replayed_group(groups, gid, ShareGroup)
    if cls is rec.ShareGroupMetadataKey:
        group.group_epoch = value.epoch
        group.metadata_hash = value.metadata_hash
        group.created = True
    elif cls is rec.ShareGroupMemberMetadataKey:
        m = group.members.get(key.member_id)
        if m is None:
            m = group.members[key.member_id] = ShareMember(key.member_id)
        m.rack_id, m.client_id, m.client_host = value.rack_id, value.client_id, value.client_host
        group.set_subscription(m, tuple(value.subscribed_topic_names))
        m.has_metadata = True
    elif cls is rec.ShareGroupTargetAssignmentMetadataKey:
        group.assignment_epoch = value.assignment_epoch
        group.assignment_timestamp = value.assignment_timestamp
    elif cls is rec.ShareGroupTargetAssignmentMemberKey:
        group.set_target(key.member_id, from_share_partitions(value.topic_partitions))
    elif cls is rec.ShareGroupCurrentMemberAssignmentKey:
        m = group.members.get(key.member_id)
        if m is None:
            m = group.members[key.member_id] = ShareMember(key.member_id)
        m.member_epoch, m.previous_member_epoch, m.state = value.member_epoch, value.previous_member_epoch, value.state
        m.assigned = from_share_partitions(value.assigned_partitions)
    elif cls is rec.ShareGroupStatePartitionMetadataKey:
        group.initializing = _from_infos(value.initializing_topics)
        group.initialized = _from_infos(value.initialized_topics)
        group.deleting = {t.topic_id: t.topic_name for t in value.deleting_topics}


def share_value(groups: dict, key):
    """The value of ``key`` that replaying would turn into the state as it stands now (replay's
    inverse: what undoes a record of a failed operation)."""
    group = groups.get(key.group_id)
    if not isinstance(group, ShareGroup):
        return None
    cls = type(key)
    if cls is rec.ShareGroupMetadataKey:
        return rec.ShareGroupMetadataValue(group.group_epoch, group.metadata_hash) if group.created else None
    if cls is rec.ShareGroupMemberMetadataKey:
        m = group.members.get(key.member_id)
        if m is None or not m.has_metadata:
            return None
        return rec.ShareGroupMemberMetadataValue(m.rack_id, m.client_id, m.client_host, list(m.subscribed_topic_names))
    if cls is rec.ShareGroupTargetAssignmentMetadataKey:
        return rec.ShareGroupTargetAssignmentMetadataValue(group.assignment_epoch, group.assignment_timestamp)
    if cls is rec.ShareGroupTargetAssignmentMemberKey:
        target = group.target.get(key.member_id)
        return None if target is None else rec.ShareGroupTargetAssignmentMemberValue(to_share_partitions(target))
    if cls is rec.ShareGroupCurrentMemberAssignmentKey:
        m = group.members.get(key.member_id)
        if m is None:
            return None
        return rec.ShareGroupCurrentMemberAssignmentValue(m.member_epoch, m.previous_member_epoch, m.state, to_share_partitions(m.assigned))
    if cls is rec.ShareGroupStatePartitionMetadataKey:
        if group.initializing is None:
            return None
        return state_value(group.initializing, group.initialized, group.deleting)
    return None


def share_undo(groups: dict, key) -> tuple:
    """``(build, arg)`` for the shard's journal: ``build(arg)`` gives the value that restores ``key``.

    A member record's tombstone may remove the member (metadata) while the current assignment
    record of the same member is undone separately; restoring a removed member needs its metadata
    first, which the journal's reverse order provides."""
    return _same, share_value(groups, key)


def _same(value):
    return value
