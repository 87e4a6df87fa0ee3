"""Codecs for the records of the ``__consumer_offsets`` topic (no I/O).

Framing (see docs: group-coordinator reference, section 5):

* record **key** = int16 record type, then the key struct in its
  non-flexible layout;
* record **value** = int16 version, then the value struct at that version;
  a null value is a tombstone.

Record types handled here:

====  ==========================================  ===========================
type  key                                         value versions
====  ==========================================  ===========================
0     OffsetCommitKey (legacy, read only)         0 (the v0 OffsetCommitValue
                                                  layout)
1     OffsetCommitKey                             OffsetCommitValue 0-4
2     GroupMetadataKey                            GroupMetadataValue 0-4
3     ConsumerGroupMetadataKey                    0 (flexible)
4     ConsumerGroupPartitionMetadataKey           0 (flexible)
5     ConsumerGroupMemberMetadataKey              0 (flexible)
6     ConsumerGroupTargetAssignmentMetadataKey    0 (flexible)
7     ConsumerGroupTargetAssignmentMemberKey      0 (flexible)
8     ConsumerGroupCurrentMemberAssignmentKey     0 (flexible)
16    ConsumerGroupRegularExpressionKey           0 (flexible)
====  ==========================================  ===========================

Any other type decodes to :class:`UnknownRecordType` (a loader skips those
with a warning). Malformed bytes, and a value version a known type does not
define, raise :class:`RecordFormatError` (a loader must stop). Bytes after
the end of a struct are ignored, as Kafka's deserializer ignores them.

Strings are decoded leniently (invalid UTF-8 becomes U+FFFD) and encoded
with ``?`` for unencodable characters, as Java's ``String`` conversions do.

The offset-commit records dominate a replay, so their key and value have
hand-unrolled paths; everything else goes through a small reader/writer.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

__all__ = [
    "ClassicMemberMetadata",
    "ClassicProtocol",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupRegularExpressionKey",
    "ConsumerGroupRegularExpressionValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "PartitionMetadata",
    "RecordFormatError",
    "TopicMetadata",
    "TopicPartitions",
    "UnknownRecordType",
    "VALUE_VERSIONS",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "encode_value_version",
]


class RecordFormatError(ValueError):
    """Malformed record bytes, or a value version its record type does not define."""


# --------------------------------------------------------------------------
# record types

LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16

# The 4.x coordinator's write versions.
OFFSET_COMMIT_VALUE_VERSION = 4
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


# --------------------------------------------------------------------------
# keys


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """Types 0 (legacy, read only) and 1; always encoded as type 1.

    ``legacy`` records that the key was read as type 0, which only allows a
    version-0 value. It takes no part in equality or hashing: a type-0 and a
    type-1 key for the same partition name the same committed offset.
    """

    group: str
    topic: str
    partition: int
    legacy: bool = field(default=False, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


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


@dataclass(frozen=True, slots=True)
class UnknownRecordType:
    """A key whose record type this module does not know (``data`` = whole key)."""

    record_type: int
    data: bytes = b""


# --------------------------------------------------------------------------
# values


@dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1
    # Tagged field 0 of v4+ (Kafka 4.1); the all-zero uuid reads as None.
    topic_id: uuid.UUID | None = None


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


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


@dataclass(slots=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: list[int] = field(default_factory=list)


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


# value class -> (lowest, highest) version it can be written at
VALUE_VERSIONS: dict[type, tuple[int, int]] = {
    OffsetCommitValue: (0, 4),
    GroupMetadataValue: (0, 4),
    ConsumerGroupMetadataValue: (0, 0),
    ConsumerGroupPartitionMetadataValue: (0, 0),
    ConsumerGroupMemberMetadataValue: (0, 0),
    ConsumerGroupTargetAssignmentMetadataValue: (0, 0),
    ConsumerGroupTargetAssignmentMemberValue: (0, 0),
    ConsumerGroupCurrentMemberAssignmentValue: (0, 0),
    ConsumerGroupRegularExpressionValue: (0, 0),
}


# --------------------------------------------------------------------------
# primitives

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16I16 = struct.Struct(">hh")
_I64I16 = struct.Struct(">qh")  # offset, metadata length (v0-v2)
_I64I32I16 = struct.Struct(">qih")  # offset, leader epoch, metadata length (v3)
_I64I32 = struct.Struct(">qi")  # offset, leader epoch (v4)
_I64I64 = struct.Struct(">qq")
_UUID = struct.Struct(">16s")

_ZERO_UUID_BYTES = bytes(16)
_UTF8 = "utf-8"
_LENIENT = "replace"
_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError)


def _utf8(s: str) -> bytes:
    return s.encode(_UTF8, _LENIENT)


def _fail(msg: str):
    raise RecordFormatError(msg)


class _Reader:
    """Cursor over a record; bounds are checked by struct or at the end."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def i8(self) -> int:
        (v,) = _I8.unpack_from(self.data, self.pos)
        self.pos += 1
        return v

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return v

    def i64(self) -> int:
        (v,) = _I64.unpack_from(self.data, self.pos)
        self.pos += 8
        return v

    def uuid(self) -> uuid.UUID:
        (b,) = _UUID.unpack_from(self.data, self.pos)
        self.pos += 16
        return _cached_uuid(b)

    def uvarint(self) -> int:
        data = self.data
        p = self.pos
        b = data[p]
        p += 1
        if b < 0x80:
            self.pos = p
            return b
        result = b & 0x7F
        shift = 7
        while True:
            b = data[p]
            p += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                _fail("unsigned varint longer than 5 bytes")
        self.pos = p
        return result

    def _take(self, n: int) -> bytes:
        p = self.pos
        end = p + n
        if end > len(self.data):
            _fail("record truncated")
        self.pos = end
        return self.data[p:end]

    # -- classic (non-flexible) encodings
    def string(self) -> str:
        n = self.i16()
        if n < 0:
            _fail("non-nullable string is null")
        return self._take(n).decode(_UTF8, _LENIENT)

    def nstring(self) -> str | None:
        n = self.i16()
        if n < 0:
            if n == -1:
                return None
            _fail(f"invalid string length {n}")
        return self._take(n).decode(_UTF8, _LENIENT)

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            _fail("non-nullable bytes field is null")
        return self._take(n)

    def array_len(self) -> int:
        n = self.i32()
        if n < 0:
            _fail("non-nullable array is null")
        if n > len(self.data) - self.pos:
            _fail("array length exceeds record")
        return n

    # -- flexible (compact) encodings
    def cstring(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            _fail("non-nullable string is null")
        return self._take(n).decode(_UTF8, _LENIENT)

    def cnstring(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._take(n).decode(_UTF8, _LENIENT)

    def cbytes(self) -> bytes:
        n = self.uvarint() - 1
        if n < 0:
            _fail("non-nullable bytes field is null")
        return self._take(n)

    def carray_len(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            _fail("non-nullable array is null")
        if n > len(self.data) - self.pos:
            _fail("array length exceeds record")
        return n

    def cstring_array(self) -> list[str]:
        return [self.cstring() for _ in range(self.carray_len())]

    def cint32_array(self) -> list[int]:
        n = self.carray_len()
        p = self.pos
        if p + 4 * n > len(self.data):
            _fail("record truncated")
        self.pos = p + 4 * n
        return list(struct.unpack_from(">%di" % n, self.data, p))

    def tags(self) -> dict[int, bytes] | None:
        """Read a tagged-field section; returns {tag: raw bytes} or None if empty."""
        count = self.uvarint()
        if not count:
            return None
        out = {}
        for _ in range(count):
            tag = self.uvarint()
            size = self.uvarint()
            out[tag] = self._take(size)
        return out


class _Writer:
    __slots__ = ("buf",)

    def __init__(self, version: int | None = None) -> None:
        # With a version, the buffer starts with it (a record value); without,
        # it is a bare struct (the body of a tagged field).
        self.buf = bytearray() if version is None else bytearray(_I16.pack(version))

    def i8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def uvarint(self, v: int) -> None:
        _put_uvarint(self.buf, v)

    def string(self, s: str) -> None:
        b = _utf8(s)
        if len(b) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self.buf += _I16.pack(len(b))
        self.buf += b

    def nstring(self, s: str | None) -> None:
        if s is None:
            self.buf += _I16.pack(-1)
        else:
            self.string(s)

    def bytes_(self, b: bytes) -> None:
        self.buf += _I32.pack(len(b))
        self.buf += b

    def array_len(self, n: int) -> None:
        self.buf += _I32.pack(n)

    def cstring(self, s: str) -> None:
        b = _utf8(s)
        _put_uvarint(self.buf, len(b) + 1)
        self.buf += b

    def cnstring(self, s: str | None) -> None:
        if s is None:
            self.buf.append(0)
        else:
            self.cstring(s)

    def cbytes(self, b: bytes) -> None:
        _put_uvarint(self.buf, len(b) + 1)
        self.buf += b

    def carray_len(self, n: int) -> None:
        _put_uvarint(self.buf, n + 1)

    def cstring_array(self, items: list[str]) -> None:
        self.carray_len(len(items))
        for s in items:
            self.cstring(s)

    def cint32_array(self, items: list[int]) -> None:
        self.carray_len(len(items))
        self.buf += struct.pack(">%di" % len(items), *items)

    def tags(self, fields: list[tuple[int, bytes]] | None = None) -> None:
        """Write a tagged-field section from (tag, raw bytes) in ascending tag order."""
        if not fields:
            self.buf.append(0)
            return
        _put_uvarint(self.buf, len(fields))
        for tag, raw in fields:
            _put_uvarint(self.buf, tag)
            _put_uvarint(self.buf, len(raw))
            self.buf += raw

    def done(self) -> bytes:
        return bytes(self.buf)


def _put_uvarint(buf: bytearray, v: int) -> None:
    if v < 0:
        raise ValueError("negative varint")
    while v >= 0x80:
        buf.append((v & 0x7F) | 0x80)
        v >>= 7
    buf.append(v)


def _uvarint_bytes(v: int) -> bytes:
    b = bytearray()
    _put_uvarint(b, v)
    return bytes(b)


# --------------------------------------------------------------------------
# keys: encode / decode


def _key_str(s: str) -> bytes:
    b = _utf8(s)
    if len(b) > 0x7FFF:
        raise ValueError("key string longer than 32767 bytes")
    return b


def _key_group_only(record_type: int, group: str) -> bytes:
    b = _key_str(group)
    return _I16I16.pack(record_type, len(b)) + b


def _key_two_strings(record_type: int, a: str, b: str) -> bytes:
    ba = _key_str(a)
    bb = _key_str(b)
    return _I16I16.pack(record_type, len(ba)) + ba + _I16.pack(len(bb)) + bb


def encode_key(key) -> bytes:
    """Serialize a record key (offset-commit keys always as type 1)."""
    cls = type(key)
    if cls is OffsetCommitKey:
        g = _key_str(key.group)
        t = _key_str(key.topic)
        return _I16I16.pack(OFFSET_COMMIT, len(g)) + g + _I16.pack(len(t)) + t + _I32.pack(key.partition)
    if cls is GroupMetadataKey:
        return _key_group_only(GROUP_METADATA, key.group)
    if cls is ConsumerGroupMetadataKey:
        return _key_group_only(CONSUMER_GROUP_METADATA, key.group_id)
    if cls is ConsumerGroupPartitionMetadataKey:
        return _key_group_only(CONSUMER_GROUP_PARTITION_METADATA, key.group_id)
    if cls is ConsumerGroupMemberMetadataKey:
        return _key_two_strings(CONSUMER_GROUP_MEMBER_METADATA, key.group_id, key.member_id)
    if cls is ConsumerGroupTargetAssignmentMetadataKey:
        return _key_group_only(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, key.group_id)
    if cls is ConsumerGroupTargetAssignmentMemberKey:
        return _key_two_strings(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, key.group_id, key.member_id)
    if cls is ConsumerGroupCurrentMemberAssignmentKey:
        return _key_two_strings(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, key.group_id, key.member_id)
    if cls is ConsumerGroupRegularExpressionKey:
        return _key_two_strings(CONSUMER_GROUP_REGULAR_EXPRESSION, key.group_id, key.regular_expression)
    if cls is UnknownRecordType:
        if key.data:
            return bytes(key.data)
        raise TypeError(f"cannot encode a key of unknown record type {key.record_type} without its bytes")
    raise TypeError(f"not a __consumer_offsets record key: {key!r}")


# Replay decodes many offset-commit keys, mostly repeats of a few groups and
# topics (and, in an uncompacted tail, of whole keys). Bounded caches from raw
# bytes to decoded objects skip the repeated work; they are cleared when full.
_CACHE_MAX = 1 << 16
_offset_key_cache: dict[bytes, OffsetCommitKey] = {}
_str_cache: dict[bytes, str] = {}
_uuid_cache: dict[bytes, uuid.UUID] = {}

# Keys are frozen; their __init__ goes through object.__setattr__ per field,
# so the decoder fills the slots directly.
_new = object.__new__
_set_group = OffsetCommitKey.group.__set__  # type: ignore[attr-defined]
_set_topic = OffsetCommitKey.topic.__set__  # type: ignore[attr-defined]
_set_partition = OffsetCommitKey.partition.__set__  # type: ignore[attr-defined]
_set_legacy = OffsetCommitKey.legacy.__set__  # type: ignore[attr-defined]


def _cached_str(raw: bytes) -> str:
    s = _str_cache.get(raw)
    if s is None:
        s = raw.decode(_UTF8, _LENIENT)
        if len(_str_cache) >= _CACHE_MAX:
            _str_cache.clear()
        _str_cache[raw] = s
    return s


def _cached_uuid(raw: bytes) -> uuid.UUID:
    u = _uuid_cache.get(raw)
    if u is None:
        u = uuid.UUID(bytes=raw)
        if len(_uuid_cache) >= _CACHE_MAX:
            _uuid_cache.clear()
        _uuid_cache[raw] = u
    return u


def _dec_offset_key(data: bytes, legacy: bool) -> OffsetCommitKey:
    glen = (data[2] << 8) | data[3]
    p = 4 + glen
    tlen = (data[p] << 8) | data[p + 1]
    q = p + 2 + tlen
    if glen >= 0x8000 or tlen >= 0x8000:  # negative int16
        _fail("non-nullable string is null")
    (partition,) = _I32.unpack_from(data, q)
    raw_group = data[4:p]
    raw_topic = data[p + 2 : q]
    key = _new(OffsetCommitKey)
    # (inlined cache hits; "" is falsy and simply takes the slow call)
    _set_group(key, _str_cache.get(raw_group) or _cached_str(raw_group))
    _set_topic(key, _str_cache.get(raw_topic) or _cached_str(raw_topic))
    _set_partition(key, partition)
    _set_legacy(key, legacy)
    if len(_offset_key_cache) >= _CACHE_MAX:
        _offset_key_cache.clear()
    _offset_key_cache[data] = key
    return key


def _dec_key_group(cls):
    def dec(r: _Reader):
        return cls(r.string())

    return dec


def _dec_key_two(cls):
    def dec(r: _Reader):
        a = r.string()
        return cls(a, r.string())

    return dec


_KEY_DECODERS = {
    GROUP_METADATA: _dec_key_group(GroupMetadataKey),
    CONSUMER_GROUP_METADATA: _dec_key_group(ConsumerGroupMetadataKey),
    CONSUMER_GROUP_PARTITION_METADATA: _dec_key_group(ConsumerGroupPartitionMetadataKey),
    CONSUMER_GROUP_MEMBER_METADATA: _dec_key_two(ConsumerGroupMemberMetadataKey),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: _dec_key_group(ConsumerGroupTargetAssignmentMetadataKey),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: _dec_key_two(ConsumerGroupTargetAssignmentMemberKey),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: _dec_key_two(ConsumerGroupCurrentMemberAssignmentKey),
    CONSUMER_GROUP_REGULAR_EXPRESSION: _dec_key_two(ConsumerGroupRegularExpressionKey),
}


def decode_key(data: bytes):
    """Parse a record key. Unknown record types give :class:`UnknownRecordType`."""
    if type(data) is not bytes:
        data = bytes(data)
    key = _offset_key_cache.get(data)
    if key is not None:
        return key
    if len(data) < 2:
        raise RecordFormatError("record key shorter than its type field")
    rtype = (data[0] << 8) | data[1]
    if rtype >= 0x8000:
        rtype -= 0x10000
    try:
        if rtype == OFFSET_COMMIT or rtype == LEGACY_OFFSET_COMMIT:
            return _dec_offset_key(data, rtype == LEGACY_OFFSET_COMMIT)
        dec = _KEY_DECODERS.get(rtype)
        if dec is None:
            return UnknownRecordType(rtype, data)
        r = _Reader(data, 2)
        key = dec(r)
        if r.pos > len(data):
            _fail("record truncated")
        return key
    except RecordFormatError:
        raise
    except _DECODE_ERRORS as e:
        raise RecordFormatError(f"malformed key of record type {rtype}: {e}") from None


# --------------------------------------------------------------------------
# OffsetCommitValue (types 0 and 1)


def _enc_offset_commit(v: OffsetCommitValue, version: int) -> bytes:
    md = _utf8(v.metadata)
    if version == 4:
        head = _I16.pack(4) + _I64I32.pack(v.offset, v.leader_epoch) + _uvarint_bytes(len(md) + 1) + md + _I64.pack(v.commit_timestamp)
        tid = v.topic_id
        if tid is None or tid.int == 0:
            return head + b"\x00"
        # one tagged field: tag 0, size 16, uuid
        return head + b"\x01\x00\x10" + tid.bytes
    if len(md) > 0x7FFF:
        raise ValueError("metadata longer than 32767 bytes")
    if version == 3:
        return _I16.pack(3) + _I64I32I16.pack(v.offset, v.leader_epoch, len(md)) + md + _I64.pack(v.commit_timestamp)
    if version == 1:
        return _I16.pack(1) + _I64I16.pack(v.offset, len(md)) + md + _I64I64.pack(v.commit_timestamp, v.expire_timestamp)
    if version == 0 or version == 2:
        return _I16.pack(version) + _I64I16.pack(v.offset, len(md)) + md + _I64.pack(v.commit_timestamp)
    raise ValueError(f"OffsetCommitValue has no version {version}")


def _dec_offset_commit(data: bytes, version: int) -> OffsetCommitValue:
    n = len(data)
    if version == 4:
        offset, epoch = _I64I32.unpack_from(data, 2)
        b = data[14]
        if b < 0x80:
            mlen = b - 1
            p = 15
        else:
            r = _Reader(data, 14)
            mlen = r.uvarint() - 1
            p = r.pos
        if mlen < 0:
            _fail("non-nullable string is null")
        q = p + mlen
        (commit,) = _I64.unpack_from(data, q)
        q += 8
        topic_id = None
        ntags = data[q]
        if not ntags:
            q += 1
        elif ntags == 1 and data[q + 1] == 0 and data[q + 2] == 16:
            # the usual shape: just tag 0 (topicId), 16 bytes
            raw = data[q + 3 : q + 19]
            q += 19
            if raw != _ZERO_UUID_BYTES:
                topic_id = _uuid_cache.get(raw) or _cached_uuid(raw)
        else:
            r = _Reader(data, q)
            tags = r.tags()
            q = r.pos
            raw = tags.get(0)
            if raw is not None:
                if len(raw) != 16:
                    _fail("topicId tagged field is not 16 bytes")
                if raw != _ZERO_UUID_BYTES:
                    topic_id = _cached_uuid(raw)
        if q > n:
            _fail("record truncated")
        return OffsetCommitValue(offset, epoch, data[p : p + mlen].decode(_UTF8, _LENIENT) if mlen else "", commit, -1, topic_id)
    if version == 3:
        offset, epoch, mlen = _I64I32I16.unpack_from(data, 2)
        p = 16
    elif version == 1 or version == 0 or version == 2:
        offset, mlen = _I64I16.unpack_from(data, 2)
        epoch = -1
        p = 12
    else:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    if mlen < 0:
        _fail("non-nullable string is null")
    q = p + mlen
    if version == 1:
        commit, expire = _I64I64.unpack_from(data, q)
    else:
        (commit,) = _I64.unpack_from(data, q)
        expire = -1
    return OffsetCommitValue(offset, epoch, data[p:q].decode(_UTF8, _LENIENT) if mlen else "", commit, expire, None)


# --------------------------------------------------------------------------
# GroupMetadataValue (type 2)


def _enc_group_metadata(v: GroupMetadataValue, version: int) -> bytes:
    if not 0 <= version <= 4:
        raise ValueError(f"GroupMetadataValue has no version {version}")
    w = _Writer(version)
    if version >= 4:
        w.cstring(v.protocol_type)
        w.i32(v.generation)
        w.cnstring(v.protocol)
        w.cnstring(v.leader)
        w.i64(v.current_state_timestamp)
        w.carray_len(len(v.members))
        for m in v.members:
            w.cstring(m.member_id)
            w.cnstring(m.group_instance_id)
            w.cstring(m.client_id)
            w.cstring(m.client_host)
            w.i32(m.rebalance_timeout)
            w.i32(m.session_timeout)
            w.cbytes(m.subscription)
            w.cbytes(m.assignment)
            w.tags()
        w.tags()
        return w.done()
    w.string(v.protocol_type)
    w.i32(v.generation)
    w.nstring(v.protocol)
    w.nstring(v.leader)
    if version >= 2:
        w.i64(v.current_state_timestamp)
    w.array_len(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        if version >= 3:
            w.nstring(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


def _dec_group_metadata(data: bytes, version: int) -> GroupMetadataValue:
    r = _Reader(data, 2)
    members: list[MemberMetadata] = []
    if version == 4:
        protocol_type = r.cstring()
        generation = r.i32()
        protocol = r.cnstring()
        leader = r.cnstring()
        ts = r.i64()
        for _ in range(r.carray_len()):
            member_id = r.cstring()
            instance_id = r.cnstring()
            client_id = r.cstring()
            client_host = r.cstring()
            rebalance_timeout = r.i32()
            session_timeout = r.i32()
            subscription = r.cbytes()
            assignment = r.cbytes()
            r.tags()
            members.append(
                MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout, subscription, assignment)
            )
        r.tags()
    elif 0 <= version <= 3:
        protocol_type = r.string()
        generation = r.i32()
        protocol = r.nstring()
        leader = r.nstring()
        ts = r.i64() if version >= 2 else -1
        for _ in range(r.array_len()):
            member_id = r.string()
            instance_id = r.nstring() if version >= 3 else None
            client_id = r.string()
            client_host = r.string()
            rebalance_timeout = r.i32() if version >= 1 else -1
            session_timeout = r.i32()
            subscription = r.bytes_()
            assignment = r.bytes_()
            members.append(
                MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout, subscription, assignment)
            )
    else:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    if r.pos > len(data):
        _fail("record truncated")
    return GroupMetadataValue(protocol_type, generation, protocol, leader, ts, members)


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
    w.tags()
    return w.done()


def _dec_cg_target_metadata(r: _Reader) -> ConsumerGroupTargetAssignmentMetadataValue:
    epoch = r.i32()
    r.tags()
    return ConsumerGroupTargetAssignmentMetadataValue(epoch)


def _write_topic_partitions(w: _Writer, items: list[TopicPartitions]) -> None:
    w.carray_len(len(items))
    for tp in items:
        w.uuid(tp.topic_id)
        w.cint32_array(tp.partitions)
        w.tags()


def _read_topic_partitions(r: _Reader) -> list[TopicPartitions]:
    out = []
    for _ in range(r.carray_len()):
        topic_id = r.uuid()
        partitions = r.cint32_array()
        r.tags()
        out.append(TopicPartitions(topic_id, partitions))
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


def _enc_cg_current_assignment(v: ConsumerGroupCurrentMemberAssignmentValue) -> bytes:
    w = _Writer(0)
    w.i32(v.member_epoch)
    w.i32(v.previous_member_epoch)
    w.i8(v.state)
    _write_topic_partitions(w, v.assigned_partitions)
    _write_topic_partitions(w, v.partitions_pending_revocation)
    w.tags()
    return w.done()


def _dec_cg_current_assignment(r: _Reader) -> ConsumerGroupCurrentMemberAssignmentValue:
    epoch = r.i32()
    prev = r.i32()
    state = r.i8()
    assigned = _read_topic_partitions(r)
    pending = _read_topic_partitions(r)
    r.tags()
    return ConsumerGroupCurrentMemberAssignmentValue(epoch, prev, state, assigned, pending)


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


# --------------------------------------------------------------------------
# values: public API


def encode_value(value) -> bytes:
    """Serialize a value at the version Kafka 4.1 writes it.

    OffsetCommitValue: v4, or v1 when ``expire_timestamp >= 0`` (v1 carries
    no leader epoch and no topic id). GroupMetadataValue: v3. Consumer-group
    values: v0.
    """
    cls = type(value)
    if cls is OffsetCommitValue:
        if value.expire_timestamp >= 0:
            return _enc_offset_commit(value, OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        return _enc_offset_commit(value, OFFSET_COMMIT_VALUE_VERSION)
    if cls is GroupMetadataValue:
        return _enc_group_metadata(value, GROUP_METADATA_VALUE_VERSION)
    enc = _CG_ENCODERS.get(cls)
    if enc is None:
        raise TypeError(f"not a __consumer_offsets record value: {value!r}")
    return enc(value)


def encode_value_version(value, version: int) -> bytes:
    """Serialize a value at any version its schema defines.

    Fields the version lacks are dropped (they are all ignorable in Kafka's
    schemas); a version the schema does not define raises ``ValueError``.
    """
    cls = type(value)
    if cls is OffsetCommitValue:
        return _enc_offset_commit(value, version)
    if cls is GroupMetadataValue:
        return _enc_group_metadata(value, version)
    enc = _CG_ENCODERS.get(cls)
    if enc is None:
        raise TypeError(f"not a __consumer_offsets record value: {value!r}")
    if version != 0:
        raise ValueError(f"{cls.__name__} has no version {version}")
    return enc(value)


def decode_value(key, data: bytes | None):
    """Parse the value of a record whose key decoded to ``key``.

    ``None`` (a tombstone) gives ``None``. A version the key's record type
    does not define, or malformed bytes, raise :class:`RecordFormatError`.
    """
    if data is None:
        return None
    if type(data) is not bytes:
        data = bytes(data)
    if len(data) < 2:
        raise RecordFormatError("record value shorter than its version field")
    version = (data[0] << 8) | data[1]
    if version >= 0x8000:
        version -= 0x10000
    cls = type(key)
    try:
        if cls is OffsetCommitKey:
            if key.legacy and version != 0:
                raise RecordFormatError(f"unknown LegacyOffsetCommitValue version {version}")
            return _dec_offset_commit(data, version)
        if cls is GroupMetadataKey:
            return _dec_group_metadata(data, version)
        entry = _CG_DECODERS.get(cls)
        if entry is None:
            raise TypeError(f"not a known __consumer_offsets record key: {key!r}")
        name, dec = entry
        _check_v0(name, version)
        r = _Reader(data, 2)
        value = dec(r)
        if r.pos > len(data):
            _fail("record truncated")
        return value
    except RecordFormatError:
        raise
    except _DECODE_ERRORS as e:
        raise RecordFormatError(f"malformed value (version {version}) for {cls.__name__}: {e}") from None
