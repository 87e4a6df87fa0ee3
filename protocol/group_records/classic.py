"""The classic-protocol records: offset commits (types 0, 1) and group metadata (type 2).

Keys, values, and their codecs. Offset commits dominate a replay, so their
key and value have hand-unrolled decode paths that read the caches of
:mod:`._codec` inline; group metadata is described once (:mod:`._schema`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from . import _codec
from ._codec import (
    GROUP_METADATA,
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
)
from ._schema import BYTES, INT32, INT64, NSTRING, STRING, Array, F, Record, Struct, key_of

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


@dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1
    # Tagged field 0 of v4+ (Kafka 4.1); the all-zero uuid reads as None.
    topic_id: uuid.UUID | None = None


MEMBER_METADATA = Struct("MemberMetadata", [
    F("member_id", STRING),
    F("group_instance_id", NSTRING, None, since=3),
    F("client_id", STRING),
    F("client_host", STRING),
    F("rebalance_timeout", INT32, -1, since=1),
    F("session_timeout", INT32),
    F("subscription", BYTES),
    F("assignment", BYTES),
], module=__name__)

# GroupMetadataValue (type 2): versions 0-4, flexible from 4 (GroupMetadataValue.json)
GROUP_METADATA_RECORD = Record(GROUP_METADATA, key_of("GroupMetadataKey", "group", module=__name__), Struct("GroupMetadataValue", [
    F("protocol_type", STRING),
    F("generation", INT32),
    F("protocol", NSTRING),
    F("leader", NSTRING),
    F("current_state_timestamp", INT64, -1, since=2),
    F("members", Array(MEMBER_METADATA), []),
], module=__name__), versions=(0, 4), flexible=4, write_version=GROUP_METADATA_VALUE_VERSION)

MemberMetadata = MEMBER_METADATA.cls
GroupMetadataKey = GROUP_METADATA_RECORD.key.cls
GroupMetadataValue = GROUP_METADATA_RECORD.value.cls


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
