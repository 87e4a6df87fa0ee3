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
10-15 the KIP-932 share-group records           0 (flexible; see :mod:`.share`)
====  ==========================================  ===========================

Any other type decodes to :class:`UnknownRecordType` (a loader skips those
with a warning). Malformed bytes, and a value version a known type does not
define, raise :class:`RecordFormatError` (a loader must stop). Bytes after
the end of a struct are ignored, as Kafka's deserializer ignores them.

Strings are decoded leniently (invalid UTF-8 becomes U+FFFD) and encoded
with ``?`` for unencodable characters, as Java's ``String`` conversions do.

The offset-commit records dominate a replay, so their key and value have
hand-unrolled paths; every other record is described once (fields, types,
versions, tags, defaults, as Kafka's JSON schemas) and goes through the one
codec of :mod:`._schema`, which also makes its dataclasses.

Layout: :mod:`._codec` (record types, reader/writer, varints, caches,
:class:`RecordFormatError`), :mod:`._schema` (the descriptions' terms and
their codec), :mod:`.classic` (offset commits and group
metadata), :mod:`.consumer` (KIP-848 consumer-group records), :mod:`.share`
(KIP-932 share-group records, imported on first need: a share record's bytes
to decode, a share-group name looked up here); this module
holds the dispatch by record type / value class (``encode_key``,
``decode_key``, ``encode_value``, ``encode_value_version``,
``decode_value``) and :data:`VALUE_VERSIONS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module

from . import _codec, classic, consumer
from ._codec import (
    _DECODE_ERRORS,
    LEGACY_OFFSET_COMMIT,
    OFFSET_COMMIT,
    _fail,
    _key_str,
    _Reader,
    RecordFormatError,
)
from .classic import (
    GROUP_METADATA_RECORD,
    OFFSET_COMMIT_VALUE_VERSION,
    OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    _dec_offset_commit,
    _dec_offset_key,
    _enc_offset_commit,
)
from .consumer import (
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
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)

# the names :mod:`.share` defines, given by ``__getattr__`` below once it is imported
_SHARE_NAMES = (
    "ShareGroupCurrentMemberAssignmentKey",
    "ShareGroupCurrentMemberAssignmentValue",
    "ShareGroupMemberMetadataKey",
    "ShareGroupMemberMetadataValue",
    "ShareGroupMetadataKey",
    "ShareGroupMetadataValue",
    "ShareGroupStatePartitionMetadataKey",
    "ShareGroupStatePartitionMetadataValue",
    "ShareGroupTargetAssignmentMemberKey",
    "ShareGroupTargetAssignmentMemberValue",
    "ShareGroupTargetAssignmentMetadataKey",
    "ShareGroupTargetAssignmentMetadataValue",
    "ShareTopicPartitions",
    "TopicInfo",
    "TopicPartitionsInfo",
)

# Bound by assignment, not imported by name, because the code below calls their
# methods: CPython 3.11 compiles ``name.method(...)`` on an imported name as an
# attribute load plus a call (it assumes a module), which is measurably slower
# than the method call it compiles for other globals.
_I16 = _codec._I16
_I16I16 = _codec._I16I16
_I32 = _codec._I32
_offset_key_cache = classic._offset_key_cache

# the described records (all but the offset commits) by record type, by key class and by value class;
# the KIP-932 ones are added once loaded
_BY_TYPE = {}
_BY_KEY = {}
_BY_VALUE = {}


def _add(records) -> None:
    for rec in records:
        _BY_TYPE[rec.record_type] = rec
        _BY_KEY[rec.key.cls] = rec
        _BY_VALUE[rec.value.cls] = rec
        VALUE_VERSIONS[rec.value.cls] = rec.versions


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
    *_SHARE_NAMES,
]


@dataclass(frozen=True, slots=True)
class UnknownRecordType:
    """A key whose record type this module does not know (``data`` = whole key)."""

    record_type: int
    data: bytes = b""


# value class -> (lowest, highest) version it can be written at
VALUE_VERSIONS: dict[type, tuple[int, int]] = {OffsetCommitValue: (0, 4)}
_add([GROUP_METADATA_RECORD, *consumer.RECORDS])  # and the share-group records once loaded


# --------------------------------------------------------------------------
# keys: encode / decode


def encode_key(key) -> bytes:
    """Serialize a record key (offset-commit keys always as type 1)."""
    cls = type(key)
    if cls is OffsetCommitKey:
        g = _key_str(key.group)
        t = _key_str(key.topic)
        return _I16I16.pack(OFFSET_COMMIT, len(g)) + g + _I16.pack(len(t)) + t + _I32.pack(key.partition)
    rec = _BY_KEY.get(cls) or _share_entry(_BY_KEY, cls)
    if rec is not None:
        return rec.encode_key(key)
    if cls is UnknownRecordType:
        if key.data:
            return bytes(key.data)
        raise TypeError(f"cannot encode a key of unknown record type {key.record_type} without its bytes")
    raise TypeError(f"not a __consumer_offsets record key: {key!r}")


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
        rec = _BY_TYPE.get(rtype) or _share_entry(_BY_TYPE, rtype)
        if rec is None:
            return UnknownRecordType(rtype, data)
        r = _Reader(data, 2)
        key = rec.decode_key(r)
        if r.pos > len(data):
            _fail("record truncated")
        return key
    except RecordFormatError:
        raise
    except _DECODE_ERRORS as e:
        raise RecordFormatError(f"malformed key of record type {rtype}: {e}") from None


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
    return _value_record(value).encode_value(value)


def encode_value_version(value, version: int) -> bytes:
    """Serialize a value at any version its schema defines.

    Fields the version lacks are dropped (they are all ignorable in Kafka's
    schemas); a version the schema does not define raises ``ValueError``.
    """
    cls = type(value)
    if cls is OffsetCommitValue:
        return _enc_offset_commit(value, version)
    return _value_record(value).encode_value(value, version)


def _value_record(value):
    cls = type(value)
    rec = _BY_VALUE.get(cls) or _share_entry(_BY_VALUE, cls)
    if rec is None:
        raise TypeError(f"not a __consumer_offsets record value: {value!r}")
    return rec


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
        rec = _BY_KEY.get(cls) or _share_entry(_BY_KEY, cls)
        if rec is None:
            raise TypeError(f"not a known __consumer_offsets record key: {key!r}")
        return rec.decode_value(data, version)
    except RecordFormatError:
        raise
    except _DECODE_ERRORS as e:
        raise RecordFormatError(f"malformed value (version {version}) for {cls.__name__}: {e}") from None


# --------------------------------------------------------------------------
# the KIP-932 share-group records, imported on first need

_share_loaded = False


def _load_share():
    """Import :mod:`.share` and add its records to the tables above (once); the module."""
    global _share_loaded
    share = import_module(f"{__name__}.share")  # not ``from . import share``: that asks __getattr__ below
    if not _share_loaded:
        _add(share.RECORDS)
        globals().update({name: getattr(share, name) for name in _SHARE_NAMES})
        _share_loaded = True
    return share


def _share_entry(table: dict, key):
    """``table.get(key)`` once the share-group records are loaded (a miss before may be one of theirs)."""
    if _share_loaded:
        return None
    _load_share()
    return table.get(key)


def __getattr__(name: str):
    if name == "share" or name in _SHARE_NAMES:
        share = _load_share()
        return share if name == "share" else getattr(share, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
