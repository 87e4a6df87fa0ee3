"""The KIP-848 consumer-group records (types 3-8 and 16).

Keys, values, and their codecs. The values are all flexible and defined at
version 0 only; ``_CG_ENCODERS`` / ``_CG_DECODERS`` map them for the dispatch
in :mod:`protocol.group_records`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from . import _codec
from ._codec import RecordFormatError, _fail, _Reader, _Writer

# Bound by assignment, not imported by name, because the code below calls their
# methods: CPython 3.11 compiles ``name.method(...)`` on an imported name as an
# attribute load plus a call (it assumes a module), which is measurably slower
# than the method call it compiles for other globals.
_I64 = _codec._I64

# --------------------------------------------------------------------------
# keys


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str


# --------------------------------------------------------------------------
# values


@dataclass(slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    # Tagged field 0 (KIP-1101, Kafka 4.1); 0 = not set.
    metadata_hash: int = 0


@dataclass(slots=True)
class PartitionMetadata:
    partition: int
    racks: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: list[PartitionMetadata] = field(default_factory=list)


@dataclass(slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: list[TopicMetadata] = field(default_factory=list)


@dataclass(slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(slots=True)
class ClassicMemberMetadata:
    session_timeout_ms: int
    supported_protocols: list[ClassicProtocol] = field(default_factory=list)


@dataclass(slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # Tagged field 0; None when the member uses the consumer protocol.
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    # Kafka 4.4+: when the target was computed (ms), for group.consumer.assignment.interval.ms;
    # tagged field 0, left out when 0 (records written before 4.4)
    assignment_timestamp: int = 0


@dataclass(slots=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: list[int] = field(default_factory=list)
    # KIP-1251 (Kafka 4.3+), current assignments only: the epoch each partition was assigned at,
    # parallel to ``partitions``; tagged field 0, left out when empty (records written before 4.3)
    assignment_epochs: list[int] | None = None


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: list[TopicPartitions] = field(default_factory=list)


@dataclass(slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: list[TopicPartitions] = field(default_factory=list)
    partitions_pending_revocation: list[TopicPartitions] = field(default_factory=list)


@dataclass(slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: list[str]
    version: int
    timestamp: int


# --------------------------------------------------------------------------
# KIP-848 consumer-group values (types 3-8, 16): all flexible, version 0 only


def _check_v0(name: str, version: int) -> None:
    if version != 0:
        raise RecordFormatError(f"unknown {name} version {version}")


def _enc_cg_metadata(v: ConsumerGroupMetadataValue) -> bytes:
    w = _Writer(0)
    w.i32(v.epoch)
    w.tags([(0, _I64.pack(v.metadata_hash))] if v.metadata_hash else None)
    return w.done()


def _dec_cg_metadata(r: _Reader) -> ConsumerGroupMetadataValue:
    epoch = r.i32()
    metadata_hash = 0
    tags = r.tags()
    if tags and 0 in tags:
        (metadata_hash,) = _I64.unpack(tags[0])
    return ConsumerGroupMetadataValue(epoch, metadata_hash)


def _enc_cg_partition_metadata(v: ConsumerGroupPartitionMetadataValue) -> bytes:
    w = _Writer(0)
    w.carray_len(len(v.topics))
    for t in v.topics:
        w.uuid(t.topic_id)
        w.cstring(t.topic_name)
        w.i32(t.num_partitions)
        w.carray_len(len(t.partition_metadata))
        for pm in t.partition_metadata:
            w.i32(pm.partition)
            w.cstring_array(pm.racks)
            w.tags()
        w.tags()
    w.tags()
    return w.done()


def _dec_cg_partition_metadata(r: _Reader) -> ConsumerGroupPartitionMetadataValue:
    topics = []
    for _ in range(r.carray_len()):
        topic_id = r.uuid()
        name = r.cstring()
        num_partitions = r.i32()
        parts = []
        for _ in range(r.carray_len()):
            partition = r.i32()
            racks = r.cstring_array()
            r.tags()
            parts.append(PartitionMetadata(partition, racks))
        r.tags()
        topics.append(TopicMetadata(topic_id, name, num_partitions, parts))
    r.tags()
    return ConsumerGroupPartitionMetadataValue(topics)


def _enc_classic_member_metadata(c: ClassicMemberMetadata) -> bytes:
    w = _Writer()
    w.i32(c.session_timeout_ms)
    w.carray_len(len(c.supported_protocols))
    for p in c.supported_protocols:
        w.cstring(p.name)
        w.cbytes(p.metadata)
        w.tags()
    w.tags()
    return w.done()


def _dec_classic_member_metadata(raw: bytes) -> ClassicMemberMetadata | None:
    r = _Reader(raw, 0)
    # A tagged nullable struct starts with a presence varint (0 = null).
    if r.uvarint() == 0:
        return None
    session_timeout = r.i32()
    protocols = []
    for _ in range(r.carray_len()):
        name = r.cstring()
        metadata = r.cbytes()
        r.tags()
        protocols.append(ClassicProtocol(name, metadata))
    r.tags()
    if r.pos > len(raw):
        _fail("record truncated")
    return ClassicMemberMetadata(session_timeout, protocols)


def _enc_cg_member_metadata(v: ConsumerGroupMemberMetadataValue) -> bytes:
    w = _Writer(0)
    w.cnstring(v.instance_id)
    w.cnstring(v.rack_id)
    w.cstring(v.client_id)
    w.cstring(v.client_host)
    w.cstring_array(v.subscribed_topic_names)
    w.cnstring(v.subscribed_topic_regex)
    w.i32(v.rebalance_timeout_ms)
    w.cnstring(v.server_assignor)
    if v.classic_member_metadata is None:
        w.tags()
    else:
        w.tags([(0, b"\x01" + _enc_classic_member_metadata(v.classic_member_metadata))])
    return w.done()


def _dec_cg_member_metadata(r: _Reader) -> ConsumerGroupMemberMetadataValue:
    instance_id = r.cnstring()
    rack_id = r.cnstring()
    client_id = r.cstring()
    client_host = r.cstring()
    topics = r.cstring_array()
    regex = r.cnstring()
    rebalance_timeout = r.i32()
    assignor = r.cnstring()
    classic = None
    tags = r.tags()
    if tags and 0 in tags:
        classic = _dec_classic_member_metadata(tags[0])
    return ConsumerGroupMemberMetadataValue(
        instance_id, rack_id, client_id, client_host, topics, regex, rebalance_timeout, assignor, classic
    )


def _enc_cg_target_metadata(v: ConsumerGroupTargetAssignmentMetadataValue) -> bytes:
    w = _Writer(0)
    w.i32(v.assignment_epoch)
    w.tags([(0, _I64.pack(v.assignment_timestamp))] if v.assignment_timestamp else None)
    return w.done()


def _dec_cg_target_metadata(r: _Reader) -> ConsumerGroupTargetAssignmentMetadataValue:
    epoch = r.i32()
    tags = r.tags()
    stamp = tags.get(0) if tags else None
    if stamp is not None and len(stamp) != 8:
        _fail("assignment timestamp is not 8 bytes")
    return ConsumerGroupTargetAssignmentMetadataValue(epoch, _I64.unpack(stamp)[0] if stamp is not None else 0)


def _write_topic_partitions(w: _Writer, items: list[TopicPartitions]) -> None:
    w.carray_len(len(items))
    for tp in items:
        w.uuid(tp.topic_id)
        w.cint32_array(tp.partitions)
        if tp.assignment_epochs:
            if len(tp.assignment_epochs) != len(tp.partitions):
                raise ValueError("assignment_epochs must list one epoch per partition")
            epochs = _Writer()
            epochs.cint32_array(tp.assignment_epochs)
            w.tags([(0, epochs.done())])
        else:
            w.tags()


def _read_topic_partitions(r: _Reader) -> list[TopicPartitions]:
    out = []
    for _ in range(r.carray_len()):
        topic_id = r.uuid()
        partitions = r.cint32_array()
        tags = r.tags()
        epochs = None
        if tags and 0 in tags:
            er = _Reader(tags[0], 0)
            epochs = er.cint32_array()
            if epochs and len(epochs) != len(partitions):
                _fail(f"{len(epochs)} assignment epochs for {len(partitions)} partitions")
        out.append(TopicPartitions(topic_id, partitions, epochs or None))
    return out


def _enc_cg_target_member(v: ConsumerGroupTargetAssignmentMemberValue) -> bytes:
    w = _Writer(0)
    _write_topic_partitions(w, v.topic_partitions)
    w.tags()
    return w.done()


def _dec_cg_target_member(r: _Reader) -> ConsumerGroupTargetAssignmentMemberValue:
    tps = _read_topic_partitions(r)
    r.tags()
    return ConsumerGroupTargetAssignmentMemberValue(tps)


def write_member_assignment(v, pending: bool = True) -> bytes:
    """A current member assignment value: MemberEpoch, PreviousMemberEpoch, State, AssignedPartitions
    and (consumer groups) PartitionsPendingRevocation; the share-group record has no pending list."""
    w = _Writer(0)
    w.i32(v.member_epoch)
    w.i32(v.previous_member_epoch)
    w.i8(v.state)
    _write_topic_partitions(w, v.assigned_partitions)
    if pending:
        _write_topic_partitions(w, v.partitions_pending_revocation)
    w.tags()
    return w.done()


def read_member_assignment(r: _Reader, pending: bool = True) -> tuple:
    """(epoch, previous epoch, state, assigned[, pending]) of a current member assignment value."""
    head = (r.i32(), r.i32(), r.i8(), _read_topic_partitions(r))
    if pending:
        head += (_read_topic_partitions(r),)
    r.tags()
    return head


def _enc_cg_current_assignment(v: ConsumerGroupCurrentMemberAssignmentValue) -> bytes:
    return write_member_assignment(v)


def _dec_cg_current_assignment(r: _Reader) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(*read_member_assignment(r))


def _enc_cg_regex(v: ConsumerGroupRegularExpressionValue) -> bytes:
    w = _Writer(0)
    w.cstring_array(v.topics)
    w.i64(v.version)
    w.i64(v.timestamp)
    w.tags()
    return w.done()


def _dec_cg_regex(r: _Reader) -> ConsumerGroupRegularExpressionValue:
    topics = r.cstring_array()
    version = r.i64()
    timestamp = r.i64()
    r.tags()
    return ConsumerGroupRegularExpressionValue(topics, version, timestamp)


# value class -> encoder(value) for the version-0-only consumer-group values
_CG_ENCODERS = {
    ConsumerGroupMetadataValue: _enc_cg_metadata,
    ConsumerGroupPartitionMetadataValue: _enc_cg_partition_metadata,
    ConsumerGroupMemberMetadataValue: _enc_cg_member_metadata,
    ConsumerGroupTargetAssignmentMetadataValue: _enc_cg_target_metadata,
    ConsumerGroupTargetAssignmentMemberValue: _enc_cg_target_member,
    ConsumerGroupCurrentMemberAssignmentValue: _enc_cg_current_assignment,
    ConsumerGroupRegularExpressionValue: _enc_cg_regex,
}

# key class -> (value name, decoder(reader)) for the same
_CG_DECODERS = {
    ConsumerGroupMetadataKey: ("ConsumerGroupMetadataValue", _dec_cg_metadata),
    ConsumerGroupPartitionMetadataKey: ("ConsumerGroupPartitionMetadataValue", _dec_cg_partition_metadata),
    ConsumerGroupMemberMetadataKey: ("ConsumerGroupMemberMetadataValue", _dec_cg_member_metadata),
    ConsumerGroupTargetAssignmentMetadataKey: ("ConsumerGroupTargetAssignmentMetadataValue", _dec_cg_target_metadata),
    ConsumerGroupTargetAssignmentMemberKey: ("ConsumerGroupTargetAssignmentMemberValue", _dec_cg_target_member),
    ConsumerGroupCurrentMemberAssignmentKey: ("ConsumerGroupCurrentMemberAssignmentValue", _dec_cg_current_assignment),
    ConsumerGroupRegularExpressionKey: ("ConsumerGroupRegularExpressionValue", _dec_cg_regex),
}
