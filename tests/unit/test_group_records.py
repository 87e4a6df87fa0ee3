"""Tests for protocol.group_records (``__consumer_offsets`` record codecs).

The golden-bytes tests spell the expected bytes out field by field with
``struct.pack``, following the JSON schemas (OffsetCommitKey/Value,
GroupMetadataValue, ConsumerGroup*Value in Kafka's group-coordinator module)
rather than the codec, so they check field order and encodings independently.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionMetadata,
    RecordFormatError,
    TopicMetadata,
    TopicPartitions,
    UnknownRecordType,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    encode_value_version,
)

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
TOPIC_ID_2 = uuid.UUID("11111111-2222-3333-4444-555555555555")


# --------------------------------------------------------------------------- byte helpers for golden tests
# Classic (non-flexible) encodings


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):  # int16 length + UTF-8
    b = s.encode()
    return i16(len(b)) + b


def nstring(s):  # -1 length = null
    return i16(-1) if s is None else string(s)


def bytes32(b):  # int32 length + raw
    return i32(len(b)) + b


# Flexible (compact) encodings


def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def cstring(s):  # uvarint(length + 1) + UTF-8
    b = s.encode()
    return uvarint(len(b) + 1) + b


def cnstring(s):  # 0 = null
    return b"\x00" if s is None else cstring(s)


def cbytes(b):
    return uvarint(len(b) + 1) + b


def carray(n):  # compact array length prefix
    return uvarint(n + 1)


NO_TAGS = b"\x00"


# --------------------------------------------------------------------------- sample values

SAMPLE_KEYS = [
    OffsetCommitKey("my-group", "orders", 7),
    OffsetCommitKey("", "", 0),
    OffsetCommitKey("gr\u00fcppe-\u6d88\u8d39", "t\U0001f680", 2**31 - 1),
    GroupMetadataKey("my-group"),
    GroupMetadataKey(""),
    ConsumerGroupMetadataKey("cg"),
    ConsumerGroupPartitionMetadataKey("cg"),
    ConsumerGroupMemberMetadataKey("cg", "member-1"),
    ConsumerGroupTargetAssignmentMetadataKey("cg"),
    ConsumerGroupTargetAssignmentMemberKey("cg", "member-1"),
    ConsumerGroupCurrentMemberAssignmentKey("cg", "member-1"),
    ConsumerGroupRegularExpressionKey("cg", "orders-.*"),
]

KEY_TYPES = {
    OffsetCommitKey: 1,
    GroupMetadataKey: 2,
    ConsumerGroupMetadataKey: 3,
    ConsumerGroupPartitionMetadataKey: 4,
    ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6,
    ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8,
    ConsumerGroupRegularExpressionKey: 16,
}


def full_offset_value():
    return OffsetCommitValue(
        offset=123456789012,
        leader_epoch=17,
        metadata="meta-\u00e9",
        commit_timestamp=1_700_000_000_123,
        expire_timestamp=1_700_086_400_123,
        topic_id=TOPIC_ID,
    )


def full_group_value():
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=42,
        protocol="range",
        leader="m-1",
        current_state_timestamp=1_700_000_000_000,
        members=[
            MemberMetadata("m-1", "instance-1", "client-1", "/10.0.0.1", 300000, 45000, b"\x00\x01sub", b"\x00\x01asg"),
            MemberMetadata("m-2", None, "client-2", "/10.0.0.2", 60000, 10000, b"", b""),
        ],
    )


def offset_value_at(v: OffsetCommitValue, version: int) -> OffsetCommitValue:
    """What a round trip at ``version`` keeps of ``v``."""
    return OffsetCommitValue(
        offset=v.offset,
        leader_epoch=v.leader_epoch if version >= 3 else -1,
        metadata=v.metadata,
        commit_timestamp=v.commit_timestamp,
        expire_timestamp=v.expire_timestamp if version == 1 else -1,
        topic_id=v.topic_id if version >= 4 and v.topic_id is not None and v.topic_id.int != 0 else None,
    )


def group_value_at(v: GroupMetadataValue, version: int) -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type=v.protocol_type,
        generation=v.generation,
        protocol=v.protocol,
        leader=v.leader,
        current_state_timestamp=v.current_state_timestamp if version >= 2 else -1,
        members=[
            dataclasses.replace(
                m,
                group_instance_id=m.group_instance_id if version >= 3 else None,
                rebalance_timeout=m.rebalance_timeout if version >= 1 else -1,
            )
            for m in v.members
        ],
    )


CG_SAMPLES = [
    (ConsumerGroupMetadataKey("cg"), ConsumerGroupMetadataValue(epoch=5)),
    (ConsumerGroupMetadataKey("cg"), ConsumerGroupMetadataValue(epoch=6, metadata_hash=-0x123456789ABCDEF)),
    (ConsumerGroupPartitionMetadataKey("cg"), ConsumerGroupPartitionMetadataValue([])),
    (
        ConsumerGroupPartitionMetadataKey("cg"),
        ConsumerGroupPartitionMetadataValue(
            [
                TopicMetadata(TOPIC_ID, "orders", 3, [PartitionMetadata(0, ["r1", "r2"]), PartitionMetadata(1, [])]),
                TopicMetadata(TOPIC_ID_2, "audit", 1, []),
            ]
        ),
    ),
    (
        ConsumerGroupMemberMetadataKey("cg", "m1"),
        ConsumerGroupMemberMetadataValue(
            instance_id=None,
            rack_id=None,
            client_id="c",
            client_host="/127.0.0.1",
            subscribed_topic_names=[],
            subscribed_topic_regex=None,
            rebalance_timeout_ms=-1,
            server_assignor=None,
            classic_member_metadata=None,
        ),
    ),
    (
        ConsumerGroupMemberMetadataKey("cg", "m2"),
        ConsumerGroupMemberMetadataValue(
            instance_id="inst",
            rack_id="rack-a",
            client_id="consumer-1",
            client_host="/10.1.2.3",
            subscribed_topic_names=["orders", "audit", "\u6d88\u8d39"],
            subscribed_topic_regex="orders-.*",
            rebalance_timeout_ms=300000,
            server_assignor="uniform",
            classic_member_metadata=ClassicMemberMetadata(
                45000, [ClassicProtocol("range", b"\x00\x03abc"), ClassicProtocol("cooperative-sticky", b"")]
            ),
        ),
    ),
    (
        ConsumerGroupMemberMetadataKey("cg", "m3"),
        ConsumerGroupMemberMetadataValue(client_id="x", client_host="h", classic_member_metadata=ClassicMemberMetadata(10000, [])),
    ),
    (ConsumerGroupTargetAssignmentMetadataKey("cg"), ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=9)),
    (ConsumerGroupTargetAssignmentMemberKey("cg", "m1"), ConsumerGroupTargetAssignmentMemberValue([])),
    (
        ConsumerGroupTargetAssignmentMemberKey("cg", "m1"),
        ConsumerGroupTargetAssignmentMemberValue([TopicPartitions(TOPIC_ID, [0, 2, 4]), TopicPartitions(TOPIC_ID_2, [])]),
    ),
    (
        ConsumerGroupCurrentMemberAssignmentKey("cg", "m1"),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=12,
            previous_member_epoch=11,
            state=2,
            assigned_partitions=[TopicPartitions(TOPIC_ID, [1, 3])],
            partitions_pending_revocation=[TopicPartitions(TOPIC_ID_2, [0, 5, 2**31 - 1])],
        ),
    ),
    (ConsumerGroupCurrentMemberAssignmentKey("cg", "m1"), ConsumerGroupCurrentMemberAssignmentValue(0, -1, 0, [], [])),
    (ConsumerGroupRegularExpressionKey("cg", "a.*"), ConsumerGroupRegularExpressionValue(["a1", "a2"], 77, 1_700_000_000_000)),
    (ConsumerGroupRegularExpressionKey("cg", "none.*"), ConsumerGroupRegularExpressionValue([], 0, -1)),
]


def all_encoded_samples():
    """(key, key bytes, value, value bytes) for every type and value version."""
    out = []
    key = OffsetCommitKey("g", "t", 1)
    for version in range(5):
        out.append((key, encode_key(key), full_offset_value(), encode_value_version(full_offset_value(), version)))
    gkey = GroupMetadataKey("g")
    for version in range(5):
        out.append((gkey, encode_key(gkey), full_group_value(), encode_value_version(full_group_value(), version)))
    for k, v in CG_SAMPLES:
        out.append((k, encode_key(k), v, encode_value(v)))
    return out


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("key", SAMPLE_KEYS, ids=lambda k: type(k).__name__)
def test_key_round_trip(key):
    raw = encode_key(key)
    assert struct.unpack_from(">h", raw)[0] == KEY_TYPES[type(key)]
    assert decode_key(raw) == key
    # buffer types other than bytes are accepted too
    assert decode_key(memoryview(raw)) == key
    assert decode_key(bytearray(raw)) == key


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_value_round_trip_every_version(version):
    key = OffsetCommitKey("g", "t", 0)
    value = full_offset_value()
    raw = encode_value_version(value, version)
    assert struct.unpack_from(">h", raw)[0] == version
    assert decode_value(key, raw) == offset_value_at(value, version)


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_value_round_trip_every_version(version):
    key = GroupMetadataKey("g")
    value = full_group_value()
    raw = encode_value_version(value, version)
    assert struct.unpack_from(">h", raw)[0] == version
    assert decode_value(key, raw) == group_value_at(value, version)
    empty = GroupMetadataValue("consumer", 0, None, None)
    assert decode_value(key, encode_value_version(empty, version)) == group_value_at(empty, version)


@pytest.mark.parametrize(("key", "value"), CG_SAMPLES, ids=lambda x: type(x).__name__)
def test_consumer_group_round_trip(key, value):
    kraw = encode_key(key)
    assert decode_key(kraw) == key
    raw = encode_value(value)
    assert raw == encode_value_version(value, 0)
    assert struct.unpack_from(">h", raw)[0] == 0
    assert decode_value(decode_key(kraw), raw) == value


def test_encode_value_picks_the_versions_kafka_41_writes():
    v = OffsetCommitValue(5, 3, "m", 100, -1, TOPIC_ID)
    assert struct.unpack_from(">h", encode_value(v))[0] == 4
    with_expiry = dataclasses.replace(v, expire_timestamp=200)
    raw = encode_value(with_expiry)
    assert struct.unpack_from(">h", raw)[0] == 1
    # v1 has no leader epoch or topic id
    assert decode_value(OffsetCommitKey("g", "t", 0), raw) == OffsetCommitValue(5, -1, "m", 100, 200, None)
    assert struct.unpack_from(">h", encode_value(full_group_value()))[0] == 3


def test_encode_value_version_rejects_undefined_versions():
    with pytest.raises(ValueError):
        encode_value_version(full_offset_value(), 5)
    with pytest.raises(ValueError):
        encode_value_version(full_offset_value(), -1)
    with pytest.raises(ValueError):
        encode_value_version(full_group_value(), 5)
    with pytest.raises(ValueError):
        encode_value_version(ConsumerGroupMetadataValue(1), 1)
    with pytest.raises(TypeError):
        encode_value(object())
    with pytest.raises(TypeError):
        encode_key("not a key")


def test_tombstone():
    for key in SAMPLE_KEYS:
        assert decode_value(key, None) is None


def test_zero_topic_id_is_not_written_and_reads_as_none():
    v = OffsetCommitValue(1, 0, "", 2, -1, uuid.UUID(int=0))
    raw = encode_value(v)
    assert raw.endswith(NO_TAGS)
    assert decode_value(OffsetCommitKey("g", "t", 0), raw).topic_id is None


# --------------------------------------------------------------------------- hypothesis

int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
texts = st.text(max_size=40)
uuids = st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))

offset_values = st.builds(
    OffsetCommitValue,
    offset=int64s,
    leader_epoch=int32s,
    metadata=st.text(max_size=300),
    commit_timestamp=int64s,
    expire_timestamp=int64s,
    topic_id=st.none() | uuids,
)
members = st.builds(
    MemberMetadata,
    member_id=texts,
    group_instance_id=st.none() | texts,
    client_id=texts,
    client_host=texts,
    rebalance_timeout=int32s,
    session_timeout=int32s,
    subscription=st.binary(max_size=200),
    assignment=st.binary(max_size=200),
)
group_values = st.builds(
    GroupMetadataValue,
    protocol_type=texts,
    generation=int32s,
    protocol=st.none() | texts,
    leader=st.none() | texts,
    current_state_timestamp=int64s,
    members=st.lists(members, max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(key=st.builds(OffsetCommitKey, group=texts, topic=texts, partition=int32s), value=offset_values, version=st.integers(0, 4))
def test_offset_commit_property(key, value, version):
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, encode_value_version(value, version)) == offset_value_at(value, version)
    raw = encode_value(value)
    expected_version = 1 if value.expire_timestamp >= 0 else 4
    assert decode_value(key, raw) == offset_value_at(value, expected_version)


@settings(max_examples=200, deadline=None)
@given(group=texts, value=group_values, version=st.integers(0, 4))
def test_group_metadata_property(group, value, version):
    key = GroupMetadataKey(group)
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, encode_value_version(value, version)) == group_value_at(value, version)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=80), version=st.integers(0, 4))
def test_garbage_never_escapes_as_another_exception(data, version):
    # Whatever the bytes, decoding either works or raises RecordFormatError.
    for key in (OffsetCommitKey("g", "t", 0), GroupMetadataKey("g"), ConsumerGroupMemberMetadataKey("g", "m")):
        try:
            decode_value(key, struct.pack(">h", version) + data)
        except RecordFormatError:
            pass
    try:
        decode_key(data)
    except RecordFormatError:
        pass


# --------------------------------------------------------------------------- golden bytes


def test_golden_offset_commit_key():
    expected = (
        i16(1)  # record type 1 = OffsetCommitKey
        + i16(8)
        + b"my-group"  # group: string
        + i16(6)
        + b"orders"  # topic: string
        + i32(7)  # partition: int32
    )
    assert encode_key(OffsetCommitKey("my-group", "orders", 7)) == expected
    assert decode_key(expected) == OffsetCommitKey("my-group", "orders", 7)


def test_golden_offset_commit_value_v1():
    expected = (
        i16(1)  # version
        + i64(1234)  # offset
        + string("md")  # metadata (no leaderEpoch before v3)
        + i64(1_700_000_000_000)  # commitTimestamp
        + i64(1_700_086_400_000)  # expireTimestamp (v1 only)
    )
    v = OffsetCommitValue(1234, -1, "md", 1_700_000_000_000, 1_700_086_400_000)
    assert encode_value_version(v, 1) == expected
    assert encode_value(v) == expected  # expiry set -> v1
    assert decode_value(OffsetCommitKey("g", "t", 0), expected) == v


def test_golden_offset_commit_value_v3():
    expected = (
        i16(3)  # version
        + i64(1234)  # offset
        + i32(9)  # leaderEpoch (v3+)
        + string("md")  # metadata
        + i64(1_700_000_000_000)  # commitTimestamp
    )
    v = OffsetCommitValue(1234, 9, "md", 1_700_000_000_000)
    assert encode_value_version(v, 3) == expected
    assert decode_value(OffsetCommitKey("g", "t", 0), expected) == v


def test_golden_offset_commit_value_v4():
    body = (
        i16(4)  # version
        + i64(1234)  # offset
        + i32(9)  # leaderEpoch
        + bytes([3])
        + b"md"  # metadata: compact string, uvarint(len + 1)
        + i64(1_700_000_000_000)  # commitTimestamp
    )
    without_id = body + NO_TAGS  # tagged-field count 0
    with_id = (
        body
        + uvarint(1)  # one tagged field
        + uvarint(0)  # tag 0 = topicId
        + uvarint(16)  # its size
        + TOPIC_ID.bytes  # uuid: msb int64 + lsb int64
    )
    v = OffsetCommitValue(1234, 9, "md", 1_700_000_000_000)
    assert encode_value(v) == without_id
    assert decode_value(OffsetCommitKey("g", "t", 0), without_id) == v
    v_id = dataclasses.replace(v, topic_id=TOPIC_ID)
    assert encode_value(v_id) == with_id
    assert decode_value(OffsetCommitKey("g", "t", 0), with_id) == v_id
    assert TOPIC_ID.bytes == struct.pack(">QQ", TOPIC_ID.int >> 64, TOPIC_ID.int & (2**64 - 1))


def test_golden_group_metadata_value_v3():
    expected = (
        i16(3)  # version
        + string("consumer")  # protocolType
        + i32(42)  # generation
        + nstring("range")  # protocol (nullable)
        + nstring("m-1")  # leader (nullable)
        + i64(1_700_000_000_000)  # currentStateTimestamp (v2+)
        + i32(2)  # members: int32 count
        # member 1
        + string("m-1")  # memberId
        + nstring("instance-1")  # groupInstanceId (v3+, nullable)
        + string("client-1")  # clientId
        + string("/10.0.0.1")  # clientHost
        + i32(300000)  # rebalanceTimeout (v1+)
        + i32(45000)  # sessionTimeout
        + bytes32(b"\x00\x01sub")  # subscription
        + bytes32(b"\x00\x01asg")  # assignment
        # member 2
        + string("m-2")
        + nstring(None)  # no group instance id -> length -1
        + string("client-2")
        + string("/10.0.0.2")
        + i32(60000)
        + i32(10000)
        + bytes32(b"")
        + bytes32(b"")
    )
    assert encode_value(full_group_value()) == expected
    assert decode_value(GroupMetadataKey("g"), expected) == full_group_value()


def test_golden_group_metadata_value_v0_and_v4():
    v = GroupMetadataValue("consumer", 1, None, None, 5, [MemberMetadata("m", "i", "c", "h", 7, 8, b"s", b"a")])
    v0 = (
        i16(0)
        + string("consumer")
        + i32(1)
        + nstring(None)
        + nstring(None)  # no currentStateTimestamp before v2
        + i32(1)
        + string("m")  # no groupInstanceId before v3
        + string("c")
        + string("h")  # no rebalanceTimeout in v0
        + i32(8)
        + bytes32(b"s")
        + bytes32(b"a")
    )
    assert encode_value_version(v, 0) == v0
    v4 = (
        i16(4)
        + cstring("consumer")
        + i32(1)
        + cnstring(None)
        + cnstring(None)
        + i64(5)
        + carray(1)
        + cstring("m")
        + cnstring("i")
        + cstring("c")
        + cstring("h")
        + i32(7)
        + i32(8)
        + cbytes(b"s")
        + cbytes(b"a")
        + NO_TAGS  # member's tagged fields
        + NO_TAGS  # value's tagged fields
    )
    assert encode_value_version(v, 4) == v4
    assert decode_value(GroupMetadataKey("g"), v4) == v


def test_golden_consumer_group_records():
    # type 5 key: two classic strings
    assert encode_key(ConsumerGroupMemberMetadataKey("cg", "m1")) == i16(5) + string("cg") + string("m1")
    assert encode_key(ConsumerGroupRegularExpressionKey("cg", "a.*")) == i16(16) + string("cg") + string("a.*")

    # ConsumerGroupMetadataValue with the 4.1 MetadataHash tagged field
    assert encode_value(ConsumerGroupMetadataValue(5, 99)) == i16(0) + i32(5) + uvarint(1) + uvarint(0) + uvarint(8) + i64(99)
    assert encode_value(ConsumerGroupMetadataValue(5)) == i16(0) + i32(5) + NO_TAGS

    # member metadata with the tagged, nullable ClassicMemberMetadata struct:
    # tag 0, size, presence varint 1, then the struct (with its own tag sections)
    classic = (
        i32(45000)  # SessionTimeoutMs
        + carray(1)  # SupportedProtocols
        + cstring("range")
        + cbytes(b"\x01\x02")
        + NO_TAGS  # ClassicProtocol tags
        + NO_TAGS  # ClassicMemberMetadata tags
    )
    expected = (
        i16(0)
        + cnstring("inst")  # InstanceId
        + cnstring(None)  # RackId
        + cstring("c")  # ClientId
        + cstring("h")  # ClientHost
        + carray(2)
        + cstring("a")
        + cstring("b")  # SubscribedTopicNames
        + cnstring(None)  # SubscribedTopicRegex
        + i32(30000)  # RebalanceTimeoutMs
        + cnstring("uniform")  # ServerAssignor
        + uvarint(1)
        + uvarint(0)
        + uvarint(len(classic) + 1)
        + uvarint(1)
        + classic
    )
    v = ConsumerGroupMemberMetadataValue(
        "inst", None, "c", "h", ["a", "b"], None, 30000, "uniform", ClassicMemberMetadata(45000, [ClassicProtocol("range", b"\x01\x02")])
    )
    assert encode_value(v) == expected
    assert decode_value(ConsumerGroupMemberMetadataKey("cg", "m"), expected) == v

    # current member assignment
    expected = (
        i16(0)
        + i32(12)  # MemberEpoch
        + i32(11)  # PreviousMemberEpoch
        + i8(2)  # State
        + carray(1)  # AssignedPartitions
        + TOPIC_ID.bytes
        + carray(2)
        + i32(1)
        + i32(3)
        + NO_TAGS
        + carray(0)  # PartitionsPendingRevocation
        + NO_TAGS
    )
    v = ConsumerGroupCurrentMemberAssignmentValue(12, 11, 2, [TopicPartitions(TOPIC_ID, [1, 3])], [])
    assert encode_value(v) == expected
    assert decode_value(ConsumerGroupCurrentMemberAssignmentKey("cg", "m"), expected) == v

    # regular expression
    expected = i16(0) + carray(1) + cstring("a1") + i64(3) + i64(4) + NO_TAGS
    assert encode_value(ConsumerGroupRegularExpressionValue(["a1"], 3, 4)) == expected


# --------------------------------------------------------------------------- legacy type 0


def test_legacy_offset_commit_key_and_value():
    raw_key = i16(0) + string("g") + string("t") + i32(3)
    key = decode_key(raw_key)
    assert isinstance(key, OffsetCommitKey)
    assert key.legacy
    # same identity as the type-1 key; re-encoded as type 1
    assert key == OffsetCommitKey("g", "t", 3)
    assert hash(key) == hash(OffsetCommitKey("g", "t", 3))
    assert encode_key(key) == i16(1) + string("g") + string("t") + i32(3)
    # LegacyOffsetCommitValue v0: offset, metadata, commitTimestamp
    raw_value = i16(0) + i64(55) + string("x") + i64(66)
    assert decode_value(key, raw_value) == OffsetCommitValue(55, -1, "x", 66, -1, None)
    # it defines no other version
    with pytest.raises(RecordFormatError):
        decode_value(key, encode_value_version(OffsetCommitValue(1, 2, "", 3, 4), 1))


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("rtype", [9, 17, 19, 23, 100, 32767, -1])
def test_unknown_record_type(rtype):
    raw = i16(rtype) + string("g")
    key = decode_key(raw)
    assert isinstance(key, UnknownRecordType)
    assert key.record_type == rtype
    assert key.data == raw
    assert encode_key(key) == raw
    with pytest.raises(TypeError):
        decode_value(key, i16(0))


@pytest.mark.parametrize(
    ("key", "version"),
    [
        (OffsetCommitKey("g", "t", 0), 5),
        (OffsetCommitKey("g", "t", 0), -1),
        (GroupMetadataKey("g"), 5),
        (ConsumerGroupMetadataKey("g"), 1),
        (ConsumerGroupPartitionMetadataKey("g"), 1),
        (ConsumerGroupMemberMetadataKey("g", "m"), 1),
        (ConsumerGroupTargetAssignmentMetadataKey("g"), 1),
        (ConsumerGroupTargetAssignmentMemberKey("g", "m"), 1),
        (ConsumerGroupCurrentMemberAssignmentKey("g", "m"), 1),
        (ConsumerGroupRegularExpressionKey("g", "r"), 1),
    ],
    ids=lambda x: type(x).__name__ if not isinstance(x, int) else str(x),
)
def test_unknown_value_version(key, version):
    with pytest.raises(RecordFormatError, match="version"):
        decode_value(key, i16(version) + b"\x00" * 64)


def test_truncated_keys():
    for key in SAMPLE_KEYS:
        raw = encode_key(key)
        for cut in range(len(raw)):
            with pytest.raises(RecordFormatError):
                decode_key(raw[:cut])


def test_truncated_values_every_type_and_version():
    for key, _kraw, _value, raw in all_encoded_samples():
        for cut in range(len(raw)):
            with pytest.raises(RecordFormatError):
                decode_value(key, raw[:cut])


def test_trailing_bytes_are_ignored():
    # Kafka's deserializer reads the struct and ignores what follows.
    for key, kraw, _value, raw in all_encoded_samples():
        decoded = decode_value(key, raw)
        assert decode_value(key, raw + b"\x00\x01\x02") == decoded
        assert decode_key(kraw + b"\xff\xff") == key


def test_null_or_negative_lengths_are_format_errors():
    key = OffsetCommitKey("g", "t", 0)
    # metadata (non-nullable) with length -1
    with pytest.raises(RecordFormatError):
        decode_value(key, i16(3) + i64(1) + i32(0) + i16(-1) + i64(2))
    # compact non-nullable metadata encoded as null (0)
    with pytest.raises(RecordFormatError):
        decode_value(key, i16(4) + i64(1) + i32(0) + b"\x00" + i64(2) + NO_TAGS)
    # key group with length -2
    with pytest.raises(RecordFormatError):
        decode_key(i16(1) + i16(-2) + string("t") + i32(0))
    # GroupMetadataValue: nullable protocol with length -2; null subscription bytes
    gkey = GroupMetadataKey("g")
    with pytest.raises(RecordFormatError):
        decode_value(gkey, i16(0) + string("c") + i32(1) + i16(-2) + nstring(None) + i32(0))
    member_null_sub = string("m") + string("c") + string("h") + i32(1) + i32(-1) + bytes32(b"")
    with pytest.raises(RecordFormatError):
        decode_value(gkey, i16(0) + string("c") + i32(1) + nstring(None) + nstring(None) + i32(1) + member_null_sub)
    # members array count -1 (null) or absurdly large
    with pytest.raises(RecordFormatError):
        decode_value(gkey, i16(0) + string("c") + i32(1) + nstring(None) + nstring(None) + i32(-1))
    with pytest.raises(RecordFormatError):
        decode_value(gkey, i16(0) + string("c") + i32(1) + nstring(None) + nstring(None) + i32(2**31 - 1))


def test_short_buffers():
    with pytest.raises(RecordFormatError):
        decode_key(b"")
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00")
    with pytest.raises(RecordFormatError):
        decode_value(OffsetCommitKey("g", "t", 0), b"")
    with pytest.raises(RecordFormatError):
        decode_value(OffsetCommitKey("g", "t", 0), b"\x00")


def test_overlong_varint_is_a_format_error():
    raw = i16(4) + i64(1) + i32(0) + b"\xff\xff\xff\xff\xff\x01" + i64(2) + NO_TAGS
    with pytest.raises(RecordFormatError):
        decode_value(OffsetCommitKey("g", "t", 0), raw)


def test_invalid_utf8_is_decoded_leniently():
    raw = i16(1) + i16(2) + b"\xff\xfe" + string("t") + i32(0)
    key = decode_key(raw)
    assert key.group == "\ufffd\ufffd"


# --------------------------------------------------------------------------- unknown tagged fields


def test_unknown_tagged_fields_are_skipped():
    okey = OffsetCommitKey("g", "t", 0)
    body = i16(4) + i64(7) + i32(1) + cstring("") + i64(8)
    # tag 3 (unknown) before, tag 0 (topicId) in the middle, tag 9 after
    raw = body + uvarint(3) + uvarint(3) + uvarint(2) + b"zz" + uvarint(0) + uvarint(16) + TOPIC_ID.bytes + uvarint(9) + uvarint(0)
    assert decode_value(okey, raw) == OffsetCommitValue(7, 1, "", 8, -1, TOPIC_ID)
    raw = body + uvarint(1) + uvarint(200) + uvarint(300) + b"q" * 300
    assert decode_value(okey, raw) == OffsetCommitValue(7, 1, "", 8, -1, None)

    # GroupMetadataValue v4: unknown tags on the member struct and on the value
    raw = (
        i16(4)
        + cstring("consumer")
        + i32(1)
        + cnstring("range")
        + cnstring("m")
        + i64(-1)
        + carray(1)
        + cstring("m")
        + cnstring(None)
        + cstring("c")
        + cstring("h")
        + i32(1)
        + i32(2)
        + cbytes(b"s")
        + cbytes(b"a")
        + uvarint(1)
        + uvarint(4)
        + uvarint(1)
        + b"?"
        + uvarint(1)
        + uvarint(7)
        + uvarint(2)
        + b"??"
    )
    assert decode_value(GroupMetadataKey("g"), raw) == GroupMetadataValue(
        "consumer", 1, "range", "m", -1, [MemberMetadata("m", None, "c", "h", 1, 2, b"s", b"a")]
    )

    # consumer-group values
    raw = i16(0) + i32(5) + uvarint(2) + uvarint(0) + uvarint(8) + i64(77) + uvarint(1) + uvarint(1) + b"!"
    assert decode_value(ConsumerGroupMetadataKey("g"), raw) == ConsumerGroupMetadataValue(5, 77)
    raw = i16(0) + carray(1) + TOPIC_ID.bytes + carray(1) + i32(4) + uvarint(1) + uvarint(5) + uvarint(0) + NO_TAGS
    assert decode_value(ConsumerGroupTargetAssignmentMemberKey("g", "m"), raw) == ConsumerGroupTargetAssignmentMemberValue(
        [TopicPartitions(TOPIC_ID, [4])]
    )


def test_classic_member_metadata_null_marker():
    # A tagged ClassicMemberMetadata written as explicitly null (presence varint 0).
    raw = (
        i16(0)
        + cnstring(None)
        + cnstring(None)
        + cstring("c")
        + cstring("h")
        + carray(0)
        + cnstring(None)
        + i32(1)
        + cnstring(None)
        + uvarint(1)
        + uvarint(0)
        + uvarint(1)
        + uvarint(0)
    )
    value = decode_value(ConsumerGroupMemberMetadataKey("g", "m"), raw)
    assert value.classic_member_metadata is None
    assert value.client_id == "c"


def test_caches_do_not_leak_between_distinct_keys(monkeypatch):
    from protocol.group_records import _codec
    from protocol.group_records import classic as classic_records

    monkeypatch.setattr(_codec, "_CACHE_MAX", 4)
    monkeypatch.setattr(classic_records, "_CACHE_MAX", 4)
    keys = [OffsetCommitKey(f"g{i % 3}", f"t{i % 5}", i) for i in range(50)]
    for k in keys * 2:
        assert decode_key(encode_key(k)) == k
    # a legacy and a current key with equal fields decode to their own flags
    assert decode_key(i16(0) + string("g") + string("t") + i32(1)).legacy
    assert not decode_key(i16(1) + string("g") + string("t") + i32(1)).legacy


# --------------------------------------------------------------------------- KIP-1251 assignment epochs
# ConsumerGroupCurrentMemberAssignmentValue as Kafka 4.4.0's generated class writes it
# (MessageUtil.toVersionPrefixedBytes): member epoch 7, previous 5, STABLE, assigned topic
# 00000000-0000-0000-0000-0000000000a1 partitions [0, 2] assigned at epochs [3, 7] (tag 0 of the
# topic's struct), pending revocation partition 1 of the same topic without epochs (no tag).
KAFKA_44_CURRENT_WITH_EPOCHS = bytes.fromhex(
    "000000000007000000050002000000000000000000000000000000a103000000000000000201000903000000030000000702"
    "000000000000000000000000000000a102000000010000"
)


def test_current_assignment_with_assignment_epochs_matches_kafka_44_bytes():
    tid = uuid.UUID(int=0xA1)
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=7, previous_member_epoch=5, state=0,
        assigned_partitions=[TopicPartitions(tid, [0, 2], [3, 7])],
        partitions_pending_revocation=[TopicPartitions(tid, [1])],
    )
    assert encode_value(value) == KAFKA_44_CURRENT_WITH_EPOCHS
    assert decode_value(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), KAFKA_44_CURRENT_WITH_EPOCHS) == value


def test_current_assignment_epochs_must_match_the_partitions():
    tid = uuid.UUID(int=0xA1)
    with pytest.raises(ValueError):
        encode_value(ConsumerGroupCurrentMemberAssignmentValue(7, 5, 0, [TopicPartitions(tid, [0, 2], [3])], []))
    # the same record with one epoch for two partitions: the tag holds [3] (compact array of 1)
    bad = KAFKA_44_CURRENT_WITH_EPOCHS.replace(bytes.fromhex("01000903000000030000000702"), bytes.fromhex("010005020000000302"))
    with pytest.raises(RecordFormatError):
        decode_value(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), bad)
