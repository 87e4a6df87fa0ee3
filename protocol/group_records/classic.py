"""The classic-protocol records: offset commits (types 0, 1) and group metadata (type 2).

Keys, values, and their codecs. Offset commits dominate a replay, so their
key and value have hand-unrolled decode paths that read the caches of
:mod:`._codec` inline; everything else goes through ``_Reader`` / ``_Writer``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from . import _codec
from ._codec import (
    _CACHE_MAX,
    _LENIENT,
    _UTF8,
    _ZERO_UUID_BYTES,
    RecordFormatError,
    _cached_str,
    _cached_uuid,
    _fail,
    _Reader,
    _utf8,
    _uvarint_bytes,
    _Writer,
)

# Bound by assignment, not imported by name, because the code below calls their
# methods: CPython 3.11 compiles ``name.method(...)`` on an imported name as an
# attribute load plus a call (it assumes a module), which is measurably slower
# than the method call it compiles for other globals.
_I16 = _codec._I16
_I32 = _codec._I32
_I64 = _codec._I64
_I64I16 = _codec._I64I16
_I64I32 = _codec._I64I32
_I64I32I16 = _codec._I64I32I16
_I64I64 = _codec._I64I64
_str_cache = _codec._str_cache
_uuid_cache = _codec._uuid_cache

# The 4.x coordinator's write versions.
OFFSET_COMMIT_VALUE_VERSION = 4
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


# --------------------------------------------------------------------------
# keys and values


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


# --------------------------------------------------------------------------
# OffsetCommitKey decoding (types 0 and 1)

# whole raw key -> decoded key (bounded by _CACHE_MAX, see ._codec)
_offset_key_cache: dict[bytes, OffsetCommitKey] = {}

# Keys are frozen; their __init__ goes through object.__setattr__ per field,
# so the decoder fills the slots directly.
_new = object.__new__
_set_group = OffsetCommitKey.group.__set__  # type: ignore[attr-defined]
_set_topic = OffsetCommitKey.topic.__set__  # type: ignore[attr-defined]
_set_partition = OffsetCommitKey.partition.__set__  # type: ignore[attr-defined]
_set_legacy = OffsetCommitKey.legacy.__set__  # type: ignore[attr-defined]


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
