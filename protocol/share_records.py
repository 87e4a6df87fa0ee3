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
import uuid
from dataclasses import dataclass, field

from .compression import CorruptRecordError
from .group_records._codec import _DECODE_ERRORS, _I32, _Reader, _Writer

SNAPSHOT, UPDATE = 0, 1
_KEY_HEAD = struct.Struct(">hh")
_BATCH = struct.Struct(">qqbh")
_TAG_DELIVERY_COMPLETE_COUNT = 0


class ShareRecordError(CorruptRecordError):
    """Malformed ``__share_group_state`` record bytes."""


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int  # 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareKey:
    record_type: int  # SNAPSHOT or UPDATE
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: list[StateBatch] = field(default_factory=list)
    delivery_complete_count: int = -1


@dataclass(slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch] = field(default_factory=list)
    delivery_complete_count: int = -1


def encode_key(key: ShareKey) -> bytes:
    g = key.group_id.encode("utf-8", "replace")
    if len(g) > 0x7FFF:
        raise ValueError("group id longer than 32767 bytes")
    return _KEY_HEAD.pack(key.record_type, len(g)) + g + key.topic_id.bytes + _I32.pack(key.partition)


def _put_batches(w: _Writer, batches: list[StateBatch]) -> None:
    w.carray_len(len(batches))
    for b in batches:
        w.buf += _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        w.buf.append(0)  # the batch's tagged fields


def _put_tags(w: _Writer, delivery_complete_count: int) -> None:
    w.tags([(_TAG_DELIVERY_COMPLETE_COUNT, _I32.pack(delivery_complete_count))] if delivery_complete_count != -1 else None)


def encode_value(value: ShareSnapshotValue | ShareUpdateValue | None) -> bytes | None:
    if value is None:
        return None
    w = _Writer(0)
    if isinstance(value, ShareSnapshotValue):
        w.i32(value.snapshot_epoch)
        w.i32(value.state_epoch)
        w.i32(value.leader_epoch)
        w.i64(value.start_offset)
        w.i64(value.create_timestamp)
        w.i64(value.write_timestamp)
    else:
        w.i32(value.snapshot_epoch)
        w.i32(value.leader_epoch)
        w.i64(value.start_offset)
    _put_batches(w, value.state_batches)
    _put_tags(w, value.delivery_complete_count)
    return w.done()


def decode_key(data: bytes) -> ShareKey | None:
    """The key, or None for a record type this topic does not define (skipped, as Kafka does)."""
    try:
        r = _Reader(data)
        rtype = r.i16()
        if rtype not in (SNAPSHOT, UPDATE):
            return None
        return ShareKey(rtype, r.string(), r.uuid(), r.i32())
    except ShareRecordError:
        raise
    except _DECODE_ERRORS as exc:
        raise ShareRecordError(f"malformed share state key: {exc}") from None


def _batches(r: _Reader) -> list[StateBatch]:
    n = r.carray_len()
    out = []
    for _ in range(n):
        first, last, state, count = _BATCH.unpack_from(r.data, r.pos)
        r.pos += _BATCH.size
        r.tags()
        out.append(StateBatch(first, last, state, count))
    return out


def _dcc(r: _Reader) -> int:
    tags = r.tags() or {}
    raw = tags.get(_TAG_DELIVERY_COMPLETE_COUNT)
    if raw is None:
        return -1
    if len(raw) != 4:
        raise ShareRecordError("DeliveryCompleteCount must be 4 bytes")
    return _I32.unpack(raw)[0]


def decode_value(rtype: int, data: bytes | None) -> ShareSnapshotValue | ShareUpdateValue | None:
    if data is None:
        return None
    try:
        r = _Reader(data)
        version = r.i16()
        if version != 0:
            raise ShareRecordError(f"unknown share state value version {version}")
        if rtype == SNAPSHOT:
            head = (r.i32(), r.i32(), r.i32(), r.i64(), r.i64(), r.i64())
            batches = _batches(r)
            return ShareSnapshotValue(*head, batches, _dcc(r))
        head = (r.i32(), r.i32(), r.i64())
        batches = _batches(r)
        return ShareUpdateValue(*head, batches, _dcc(r))
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
