"""Codecs for the records of ``__share_group_state`` (no I/O).

Kafka 4.4's schemas (kafka-share-coordinator's ``common/message``):

* **keys** ``ShareSnapshotKey`` (record type 0) and ``ShareUpdateKey`` (type 1):
  int16 record type, then, not flexible, ``GroupId`` (int16 length + UTF-8),
  ``TopicId`` (16 bytes), ``Partition`` (int32).
* **values**, int16 version 0 then a flexible struct; a null value is a tombstone.

  ``ShareSnapshotValue``: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch
  int32, StartOffset int64, CreateTimestamp int64, WriteTimestamp int64,
  StateBatches compact array of (FirstOffset int64, LastOffset int64,
  DeliveryState int8, DeliveryCount int16, tagged fields), tagged fields with
  tag 0 DeliveryCompleteCount int32 (default -1, written only when not -1).

  ``ShareUpdateValue``: SnapshotEpoch int32, LeaderEpoch int32, StartOffset
  int64, StateBatches as above, tag 0 DeliveryCompleteCount.

Decoding checks every length against the bytes left and raises
:class:`ShareRecordError` on anything malformed.
"""

from __future__ import annotations

import struct

from .compression import CorruptRecordError
from .group_records._codec import _DECODE_ERRORS, _I32, _Reader, _Writer
from .group_records._schema import INT8, INT16, INT32, INT64, STRING, UUID, Array, F, Struct, read_struct, write_struct

SNAPSHOT, UPDATE = 0, 1
_KEY_HEAD = struct.Struct(">hh")


class ShareRecordError(CorruptRecordError):
    """Malformed ``__share_group_state`` record bytes."""


_M = __name__
STATE_BATCH = Struct("StateBatch", [
    F("first_offset", INT64),
    F("last_offset", INT64),
    F("delivery_state", INT8, note="0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED"),
    F("delivery_count", INT16),
], frozen=True, module=_M)
SHARE_KEY = Struct("ShareKey", [
    F("record_type", INT16, note="SNAPSHOT or UPDATE"),
    F("group_id", STRING),
    F("topic_id", UUID),
    F("partition", INT32),
], frozen=True, module=_M)
# the fields both values have (ShareSnapshotValue.json, ShareUpdateValue.json)
_SNAPSHOT_EPOCH, _LEADER_EPOCH, _START_OFFSET = F("snapshot_epoch", INT32), F("leader_epoch", INT32), F("start_offset", INT64)
_STATE_BATCHES = F("state_batches", Array(STATE_BATCH), [])
_DELIVERY_COMPLETE_COUNT = F("delivery_complete_count", INT32, -1, tag=0)
SNAPSHOT_VALUE = Struct("ShareSnapshotValue", [
    _SNAPSHOT_EPOCH, F("state_epoch", INT32), _LEADER_EPOCH, _START_OFFSET,
    F("create_timestamp", INT64), F("write_timestamp", INT64), _STATE_BATCHES, _DELIVERY_COMPLETE_COUNT,
], module=_M)
UPDATE_VALUE = Struct("ShareUpdateValue", [_SNAPSHOT_EPOCH, _LEADER_EPOCH, _START_OFFSET, _STATE_BATCHES, _DELIVERY_COMPLETE_COUNT],
                      module=_M)
_VALUES = {SNAPSHOT: SNAPSHOT_VALUE, UPDATE: UPDATE_VALUE}

StateBatch = STATE_BATCH.cls
ShareKey = SHARE_KEY.cls
ShareSnapshotValue = SNAPSHOT_VALUE.cls
ShareUpdateValue = UPDATE_VALUE.cls


def encode_key(key: ShareKey) -> bytes:
    g = key.group_id.encode("utf-8", "replace")
    if len(g) > 0x7FFF:
        raise ValueError("group id longer than 32767 bytes")
    return _KEY_HEAD.pack(key.record_type, len(g)) + g + key.topic_id.bytes + _I32.pack(key.partition)


def encode_value(value: ShareSnapshotValue | ShareUpdateValue | None) -> bytes | None:
    if value is None:
        return None
    w = _Writer(0)
    write_struct(w, SNAPSHOT_VALUE if isinstance(value, ShareSnapshotValue) else UPDATE_VALUE, value, 0, True)
    return w.done()


def decode_key(data: bytes) -> ShareKey | None:
    """The key, or None for a record type this topic does not define (skipped, as Kafka does)."""
    try:
        r = _Reader(data)
        if r.i16() not in (SNAPSHOT, UPDATE):
            return None
        return read_struct(_Reader(data), SHARE_KEY, 0, False)
    except ShareRecordError:
        raise
    except _DECODE_ERRORS as exc:
        raise ShareRecordError(f"malformed share state key: {exc}") from None


def decode_value(rtype: int, data: bytes | None) -> ShareSnapshotValue | ShareUpdateValue | None:
    if data is None:
        return None
    try:
        r = _Reader(data)
        version = r.i16()
        if version != 0:
            raise ShareRecordError(f"unknown share state value version {version}")
        value = read_struct(r, _VALUES[SNAPSHOT if rtype == SNAPSHOT else UPDATE], 0, True)
        if r.pos > len(data):
            raise ShareRecordError("record truncated")
        return value
    except ShareRecordError:
        raise
    except (*_DECODE_ERRORS, Exception) as exc:  # RecordFormatError of the reader included
        raise ShareRecordError(f"malformed share state value: {exc}") from None


__all__ = [
    "SNAPSHOT",
    "UPDATE",
    "ShareKey",
    "ShareRecordError",
    "ShareSnapshotValue",
    "ShareUpdateValue",
    "StateBatch",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]
