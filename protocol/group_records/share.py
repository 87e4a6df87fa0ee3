"""The KIP-932 share-group records (types 10-15), as Kafka 4.4 writes them.

Keys are non-flexible (version 0); values are flexible, defined at version 0
only. ``_SG_ENCODERS`` / ``_SG_DECODERS`` map them for the dispatch in
:mod:`protocol.group_records`.

====  =========================================  ==========================================
type  key                                        value fields
====  =========================================  ==========================================
10    ShareGroupMemberMetadataKey (group,member)  RackId?, ClientId, ClientHost, SubscribedTopicNames
11    ShareGroupMetadataKey (group)               Epoch, MetadataHash
12    ShareGroupTargetAssignmentMetadataKey       AssignmentEpoch, tag 0: AssignmentTimestamp
13    ShareGroupTargetAssignmentMemberKey         TopicPartitions [TopicId, Partitions]
14    ShareGroupCurrentMemberAssignmentKey        MemberEpoch, PreviousMemberEpoch, State, AssignedPartitions
15    ShareGroupStatePartitionMetadataKey (group) InitializingTopics, InitializedTopics, DeletingTopics
====  =========================================  ==========================================
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from . import _codec, consumer
from ._codec import _fail, _Reader, _Writer

_I64 = _codec._I64


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    group_id: str


@dataclass(slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0  # tagged field 0 (KIP-1263, 4.3+), left out when 0


# a share record's [TopicId, Partitions] entry: the consumer groups' struct (its tagged assignment
# epochs are never set in a share record)
ShareTopicPartitions = consumer.TopicPartitions


@dataclass(slots=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: list[ShareTopicPartitions] = field(default_factory=list)


@dataclass(slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: list[ShareTopicPartitions] = field(default_factory=list)


@dataclass(slots=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    topic_name: str


@dataclass(slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: list[TopicPartitionsInfo] = field(default_factory=list)
    initialized_topics: list[TopicPartitionsInfo] = field(default_factory=list)
    deleting_topics: list[TopicInfo] = field(default_factory=list)


# --------------------------------------------------------------------------
# codecs


def _enc_member(v: ShareGroupMemberMetadataValue) -> bytes:
    w = _Writer(0)
    w.cnstring(v.rack_id)
    w.cstring(v.client_id)
    w.cstring(v.client_host)
    w.cstring_array(v.subscribed_topic_names)
    w.tags()
    return w.done()


def _dec_member(r: _Reader) -> ShareGroupMemberMetadataValue:
    rack = r.cnstring()
    client_id = r.cstring()
    host = r.cstring()
    topics = r.cstring_array()
    r.tags()
    return ShareGroupMemberMetadataValue(rack, client_id, host, topics)


def _enc_metadata(v: ShareGroupMetadataValue) -> bytes:
    w = _Writer(0)
    w.i32(v.epoch)
    w.i64(v.metadata_hash)
    w.tags()
    return w.done()


def _dec_metadata(r: _Reader) -> ShareGroupMetadataValue:
    epoch = r.i32()
    h = r.i64()
    r.tags()
    return ShareGroupMetadataValue(epoch, h)


def _enc_target_metadata(v: ShareGroupTargetAssignmentMetadataValue) -> bytes:
    w = _Writer(0)
    w.i32(v.assignment_epoch)
    w.tags([(0, _I64.pack(v.assignment_timestamp))] if v.assignment_timestamp else None)
    return w.done()


def _dec_target_metadata(r: _Reader) -> ShareGroupTargetAssignmentMetadataValue:
    epoch = r.i32()
    ts = 0
    tags = r.tags()
    if tags and 0 in tags:
        if len(tags[0]) != 8:
            _fail("AssignmentTimestamp is not 8 bytes")
        (ts,) = _I64.unpack(tags[0])
    return ShareGroupTargetAssignmentMetadataValue(epoch, ts)


def _enc_target_member(v: ShareGroupTargetAssignmentMemberValue) -> bytes:
    return consumer._enc_cg_target_member(v)  # the same schema as the consumer group's record


def _dec_target_member(r: _Reader) -> ShareGroupTargetAssignmentMemberValue:
    return ShareGroupTargetAssignmentMemberValue(consumer._dec_cg_target_member(r).topic_partitions)


def _enc_current(v: ShareGroupCurrentMemberAssignmentValue) -> bytes:
    return consumer.write_member_assignment(v, pending=False)


def _dec_current(r: _Reader) -> ShareGroupCurrentMemberAssignmentValue:
    return ShareGroupCurrentMemberAssignmentValue(*consumer.read_member_assignment(r, pending=False))


def _write_infos(w: _Writer, items: list[TopicPartitionsInfo]) -> None:
    w.carray_len(len(items))
    for t in items:
        w.uuid(t.topic_id)
        w.cstring(t.topic_name)
        w.cint32_array(t.partitions)
        w.tags()


def _read_infos(r: _Reader) -> list[TopicPartitionsInfo]:
    out = []
    for _ in range(r.carray_len()):
        tid = r.uuid()
        name = r.cstring()
        parts = r.cint32_array()
        r.tags()
        out.append(TopicPartitionsInfo(tid, name, parts))
    return out


def _enc_state(v: ShareGroupStatePartitionMetadataValue) -> bytes:
    w = _Writer(0)
    _write_infos(w, v.initializing_topics)
    _write_infos(w, v.initialized_topics)
    w.carray_len(len(v.deleting_topics))
    for t in v.deleting_topics:
        w.uuid(t.topic_id)
        w.cstring(t.topic_name)
        w.tags()
    w.tags()
    return w.done()


def _dec_state(r: _Reader) -> ShareGroupStatePartitionMetadataValue:
    initializing = _read_infos(r)
    initialized = _read_infos(r)
    deleting = []
    for _ in range(r.carray_len()):
        tid = r.uuid()
        name = r.cstring()
        r.tags()
        deleting.append(TopicInfo(tid, name))
    r.tags()
    return ShareGroupStatePartitionMetadataValue(initializing, initialized, deleting)


_SG_ENCODERS = {
    ShareGroupMemberMetadataValue: _enc_member,
    ShareGroupMetadataValue: _enc_metadata,
    ShareGroupTargetAssignmentMetadataValue: _enc_target_metadata,
    ShareGroupTargetAssignmentMemberValue: _enc_target_member,
    ShareGroupCurrentMemberAssignmentValue: _enc_current,
    ShareGroupStatePartitionMetadataValue: _enc_state,
}

_SG_DECODERS = {
    ShareGroupMemberMetadataKey: ("ShareGroupMemberMetadataValue", _dec_member),
    ShareGroupMetadataKey: ("ShareGroupMetadataValue", _dec_metadata),
    ShareGroupTargetAssignmentMetadataKey: ("ShareGroupTargetAssignmentMetadataValue", _dec_target_metadata),
    ShareGroupTargetAssignmentMemberKey: ("ShareGroupTargetAssignmentMemberValue", _dec_target_member),
    ShareGroupCurrentMemberAssignmentKey: ("ShareGroupCurrentMemberAssignmentValue", _dec_current),
    ShareGroupStatePartitionMetadataKey: ("ShareGroupStatePartitionMetadataValue", _dec_state),
}
