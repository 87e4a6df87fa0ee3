"""Kafka RecordBatch v2 (magic 2).

Hot path (Produce / log append / recovery) treats batches as opaque bytes:
``split_batches`` / ``scan_valid_prefix`` validate framing + CRC-32C, and
``patch_base_offset`` / ``set_log_append_time`` patch in place.  No per-record
work happens there.

Full record decoding (``iter_records``) and encoding (``build_batch``) are for
compaction and the coordinators.

Batch layout (big-endian)::

    off  field
      0  baseOffset            i64
      8  batchLength           i32   (bytes after this field; batch size = batchLength + 12)
     12  partitionLeaderEpoch  i32
     16  magic                 i8    (= 2)
     17  crc                   u32   (CRC-32C of bytes [21, size))
     21  attributes            i16
     23  lastOffsetDelta       i32
     27  baseTimestamp         i64
     35  maxTimestamp          i64
     43  producerId            i64
     51  producerEpoch         i16
     53  baseSequence          i32
     57  recordsCount          i32
     61  records...
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from collections.abc import Iterator, Sequence

from .crc import crc32c as _crc32c

from .compression import MAX_CLIENT_DECOMPRESSED_BYTES, CorruptRecordError, compress, decompress
from .varint import put_uvarint, uvarint_rest

__all__ = [
    "HEADER_SIZE",
    "CorruptRecordError",
    "BatchHeader",
    "Record",
    "read_header",
    "split_batches",
    "scan_valid_prefix",
    "patch_base_offset",
    "set_log_append_time",
    "verify_crc",
    "iter_records",
    "keyless_records",
    "build_batch",
    "build_key_value_batch",
    "build_empty_batch",
    "validate_produce_batch",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "build_end_txn_marker",
    "parse_control_key",
    "parse_end_txn_marker_value",
]

# --------------------------------------------------------------------------- constants

MAGIC = 2
HEADER_SIZE = 61
_HDR = struct.Struct(">qiibIhiqqqhii")
assert _HDR.size == HEADER_SIZE

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
RECORDS_COUNT_OFFSET = 57

LOG_OVERHEAD = 12  # baseOffset + batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_INT32_MAX = 0x7FFFFFFF
_INT32_MIN = -0x80000000
_INT64_MAX = 0x7FFFFFFFFFFFFFFF
_INT64_MIN = -0x8000000000000000

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_U32 = struct.Struct(">I")
_LEN = struct.Struct(">i")


# --------------------------------------------------------------------------- header


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    length: int  # batchLength field (bytes after it)
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total size of the batch in bytes."""
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (stored in baseTimestamp) if bit 6 is set, else None."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_sequence(self) -> int:
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        inc = self.last_offset_delta
        # Kafka's DefaultRecordBatch.incrementSequence: wraps to 0 past Integer.MAX_VALUE
        if base > _INT32_MAX - inc:
            return inc - (_INT32_MAX - base) - 1
        return base + inc


def _as_view(buf) -> memoryview:
    mv = buf if type(buf) is memoryview else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte batch header at ``pos`` (no validation beyond the size)."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated batch header at position {pos}: {max(len(buf) - pos, 0)} bytes available, "
            f"need {HEADER_SIZE}"
        )
    return BatchHeader(*_HDR.unpack_from(buf, pos))


def _check(fields: tuple, pos: int, avail: int) -> str | None:
    """Structural checks of an unpacked header; returns an error message or None."""
    length = fields[1]
    if length < MIN_BATCH_LENGTH:
        return f"batch at position {pos}: batchLength {length} is smaller than the minimum {MIN_BATCH_LENGTH}"
    if length + LOG_OVERHEAD > avail:
        return (
            f"truncated batch at position {pos}: batch size {length + LOG_OVERHEAD} "
            f"but only {avail} bytes available"
        )
    if fields[3] != MAGIC:
        return f"batch at position {pos}: unsupported magic {fields[3]} (only magic 2 is supported)"
    if fields[12] < 0:
        return f"batch at position {pos}: negative recordsCount {fields[12]}"
    if fields[6] < 0:
        return f"batch at position {pos}: negative lastOffsetDelta {fields[6]}"
    return None


def split_batches(buf, *, verify_crc: bool = True) -> list[tuple[BatchHeader, memoryview]]:
    """Split a Produce records blob into batches (strict).

    ``buf`` must consist of a whole number of magic-2 batches.  Raises
    CorruptRecordError on truncation, batchLength < 49, magic != 2, negative
    counts/deltas or a CRC mismatch.  Each returned memoryview covers exactly
    one batch (``header.size`` bytes) and aliases ``buf``.
    """
    mv = _as_view(buf)
    n = len(mv)
    pos = 0
    out = []
    unpack = _HDR.unpack_from
    append = out.append
    while pos < n:
        avail = n - pos
        if avail < HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated batch at position {pos}: {avail} trailing bytes, need at least {HEADER_SIZE}"
            )
        fields = unpack(mv, pos)
        length = fields[1]
        end = pos + length + LOG_OVERHEAD
        if length < MIN_BATCH_LENGTH or end > n or fields[3] != MAGIC or fields[12] < 0 or fields[6] < 0:
            raise CorruptRecordError(_check(fields, pos, avail) or f"bad batch at position {pos}")
        if verify_crc:
            actual = _crc32c(mv[pos + ATTRIBUTES_OFFSET:end])
            if actual != fields[4]:
                raise CorruptRecordError(
                    f"batch at position {pos} (baseOffset {fields[0]}): CRC mismatch, "
                    f"stored {fields[4]:#010x}, computed {actual:#010x}"
                )
        append((BatchHeader(*fields), mv[pos:end]))
        pos = end
    return out


def scan_valid_prefix(buf, *, verify_crc: bool = True) -> tuple[list[tuple[int, BatchHeader]], int]:
    """Walk batches from position 0 and stop at the first truncated/corrupt one (log recovery).

    Returns ``([(position, header), ...], valid_length)`` where ``valid_length``
    is the byte length of the valid prefix (the truncation point).
    """
    mv = _as_view(buf)
    n = len(mv)
    pos = 0
    out = []
    unpack = _HDR.unpack_from
    append = out.append
    while n - pos >= HEADER_SIZE:
        fields = unpack(mv, pos)
        length = fields[1]
        end = pos + length + LOG_OVERHEAD
        if length < MIN_BATCH_LENGTH or end > n or fields[3] != MAGIC or fields[12] < 0 or fields[6] < 0:
            break
        if verify_crc and _crc32c(mv[pos + ATTRIBUTES_OFFSET:end]) != fields[4]:
            break
        append((pos, BatchHeader(*fields)))
        pos = end
    return out, pos


def patch_base_offset(
    buf: bytearray | memoryview,
    pos: int,
    base_offset: int,
    partition_leader_epoch: int | None = None,
) -> None:
    """Overwrite baseOffset (and optionally partitionLeaderEpoch) in place.

    Both fields precede the CRC-covered region, so the CRC stays valid.
    """
    _Q.pack_into(buf, pos, base_offset)
    if partition_leader_epoch is not None:
        _I.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, ts: int) -> None:
    """Apply LogAppendTime in place: set the timestampType bit and maxTimestamp = ts, recompute CRC.

    (Kafka's DefaultRecordBatch.setMaxTimestamp semantics; record timestamps
    then read as ``ts`` via ``iter_records``.)
    """
    (length,) = _LEN.unpack_from(buf, pos + LENGTH_OFFSET)
    end = pos + length + LOG_OVERHEAD
    if length < MIN_BATCH_LENGTH or end > len(buf):
        raise CorruptRecordError(f"batch at position {pos}: bad batchLength {length}")
    (attrs,) = _H.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _H.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _Q.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts)
    mv = _as_view(buf)
    _U32.pack_into(buf, pos + CRC_OFFSET, _crc32c(mv[pos + ATTRIBUTES_OFFSET:end]))


def verify_crc(batch) -> bool:
    """True iff ``batch`` (bytes-like starting at a batch) is long enough and its CRC-32C matches."""
    mv = _as_view(batch)
    if len(mv) < HEADER_SIZE:
        return False
    (length,) = _LEN.unpack_from(mv, LENGTH_OFFSET)
    end = length + LOG_OVERHEAD
    if length < MIN_BATCH_LENGTH or end > len(mv):
        return False
    return _crc32c(mv[ATTRIBUTES_OFFSET:end]) == _U32.unpack_from(mv, CRC_OFFSET)[0]


def validate_produce_batch(header: BatchHeader) -> str | None:
    """Produce-side semantic checks Kafka's LogValidator applies to client batches.

    Returns an error message (-> INVALID_RECORD) or None.  Not applied by
    ``split_batches`` because compacted batches legitimately violate them.
    """
    if header.is_control:
        return "clients are not allowed to write control batches"
    if header.records_count <= 0:
        return f"invalid record count {header.records_count}"
    if header.last_offset_delta + 1 != header.records_count:
        return (
            f"inconsistent batch: lastOffsetDelta {header.last_offset_delta} "
            f"does not match recordsCount {header.records_count}"
        )
    if header.is_transactional and header.producer_id < 0:
        return "transactional batch without a producer id"
    return None


# --------------------------------------------------------------------------- records


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint/varlong at ``pos``; returns (value, new_pos)."""
    b = data[pos]
    pos += 1
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos
    z, pos = uvarint_rest(data, pos, b & 0x7F, 63, CorruptRecordError, "varint too long")
    return (z >> 1) ^ -(z & 1), pos


def iter_records(batch) -> Iterator[Record]:
    """Decode every record of one batch (decompressing as needed).

    Offsets and timestamps are absolute.  With timestampType = LogAppendTime
    every record's timestamp is the batch maxTimestamp.  Raises
    CorruptRecordError on malformed record data (during iteration).
    """
    mv = _as_view(batch)
    hdr = read_header(mv)
    end = hdr.size
    if hdr.length < MIN_BATCH_LENGTH or end > len(mv):
        raise CorruptRecordError(f"bad batchLength {hdr.length} for a {len(mv)}-byte buffer")
    payload = mv[HEADER_SIZE:end]
    codec = hdr.attributes & COMPRESSION_MASK
    if codec:
        data = decompress(codec, payload)
    else:
        data = payload.tobytes()
    return _iter_decoded(hdr, data)


def records_data(batch, limit: int | None = None) -> tuple[BatchHeader, bytes | memoryview]:
    """A batch's header and its records section, decompressed (bounded by ``limit`` if given)."""
    mv = _as_view(batch)
    hdr = read_header(mv)
    end = hdr.size
    if hdr.length < MIN_BATCH_LENGTH or end > len(mv):
        raise CorruptRecordError(f"bad batchLength {hdr.length} for a {len(mv)}-byte buffer")
    codec = hdr.attributes & COMPRESSION_MASK
    return hdr, (decompress(codec, mv[HEADER_SIZE:end], limit) if codec else mv[HEADER_SIZE:end])


def key_value_at(data, pos: int) -> tuple[bytes | None, bytes | None, int]:
    """The key and value of the record at ``pos`` of a records section, and where the next
    record starts. Raises CorruptRecordError (or IndexError) when the section ends inside it."""
    rec_len, p = _varint(data, pos)
    end = p + rec_len
    p += 1  # attributes
    p = _varint(data, p)[1]  # timestamp delta
    p = _varint(data, p)[1]  # offset delta
    klen, p = _varint(data, p)
    key = None
    if klen >= 0:
        key = bytes(data[p:p + klen])
        p += klen
    vlen, p = _varint(data, p)
    value = None if vlen < 0 else bytes(data[p:p + vlen])
    if p + max(vlen, 0) > len(data) or end > len(data) or (klen >= 0 and len(key) != klen):
        raise CorruptRecordError("record data truncated")
    return key, value, end


def iter_key_values(batch) -> Iterator[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record in one batch, skipping everything else (no Record objects)."""
    hdr, data = records_data(batch)
    pos = 0
    try:
        for _ in range(hdr.records_count):
            key, value, pos = key_value_at(data, pos)
            yield key, value
    except IndexError as exc:
        raise CorruptRecordError("record data truncated") from exc


def keyless_records(batch) -> list[int]:
    """Indexes (within the batch) of the records that have no key.

    What a compacted topic refuses (Kafka's LogValidator: "Compacted topic
    cannot accept message without key"). Only the key length of each record is
    decoded, after decompression; nothing else is copied. Raises
    CorruptRecordError on malformed record data or an unknown codec.
    """
    try:
        hdr, data = records_data(batch, limit=MAX_CLIENT_DECOMPRESSED_BYTES)
    except ValueError as exc:  # an unknown codec id
        raise CorruptRecordError(str(exc)) from exc
    n = len(data)
    varint = _varint
    pos = 0
    missing = []
    try:
        for i in range(hdr.records_count):
            rec_len, pos = varint(data, pos)
            rec_end = pos + rec_len
            if rec_len <= 0 or rec_end > n:
                raise CorruptRecordError(f"record length {rec_len} exceeds remaining batch data")
            pos += 1  # attributes
            while data[pos] & 0x80:  # timestamp delta
                pos += 1
            pos += 1
            while data[pos] & 0x80:  # offset delta
                pos += 1
            pos += 1
            b = data[pos]
            klen = ((b >> 1) ^ -(b & 1)) if b < 0x80 else varint(data, pos)[0]
            if klen < 0:
                missing.append(i)
            pos = rec_end
    except IndexError as exc:
        raise CorruptRecordError("truncated record data") from exc
    return missing


def _nullable_bytes(data, pos: int):
    """The bytes at ``pos`` behind their varint length (-1: None), and the position after them."""
    n, pos = _varint(data, pos)
    if n < 0:
        return None, pos
    return data[pos:pos + n], pos + n


def _iter_decoded(hdr: BatchHeader, data: bytes) -> Iterator[Record]:
    base_offset = hdr.base_offset
    base_ts = hdr.base_timestamp
    log_append = bool(hdr.attributes & TIMESTAMP_TYPE_MASK)
    max_ts = hdr.max_timestamp
    n = len(data)
    pos = 0
    varint = _varint
    try:
        for _ in range(hdr.records_count):
            rec_len, pos = varint(data, pos)
            rec_end = pos + rec_len
            if rec_len < 0 or rec_end > n:
                raise CorruptRecordError(f"record length {rec_len} exceeds remaining batch data")
            pos += 1  # record attributes (unused)
            ts_delta, pos = varint(data, pos)
            off_delta, pos = varint(data, pos)
            key, pos = _nullable_bytes(data, pos)
            value, pos = _nullable_bytes(data, pos)
            hcount, pos = varint(data, pos)
            if hcount < 0:
                raise CorruptRecordError(f"negative header count {hcount}")
            headers = []
            for _h in range(hcount):
                hklen, pos = varint(data, pos)
                if hklen < 0:
                    raise CorruptRecordError("null header key")
                hkey = data[pos:pos + hklen].decode("utf-8")
                pos += hklen
                hval, pos = _nullable_bytes(data, pos)
                headers.append((hkey, hval))
            if pos != rec_end:
                raise CorruptRecordError(
                    f"record at offset delta {off_delta}: declared length {rec_len} "
                    f"but fields occupy {rec_len + pos - rec_end} bytes"
                )
            yield Record(
                base_offset + off_delta,
                max_ts if log_append else base_ts + ts_delta,
                key,
                value,
                headers,
            )
    except IndexError as exc:
        raise CorruptRecordError("truncated record data") from exc
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"header key is not valid UTF-8: {exc}") from exc
    if pos != n:
        raise CorruptRecordError(f"{n - pos} unexpected trailing bytes after {hdr.records_count} records")


# --------------------------------------------------------------------------- encoding

_SMALL_VARINT = [bytes([z]) for z in range(128)]


def _zz(n: int) -> bytes:
    """Zigzag varlong encoding (also valid for varint within int32 range)."""
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return _SMALL_VARINT[z]
    out = bytearray()
    put_uvarint(out, z)
    return bytes(out)


def _encode_record(r: Record, off_delta: int, ts_delta: int) -> bytes:
    if not _INT32_MIN <= off_delta <= _INT32_MAX:
        raise ValueError(f"offset delta {off_delta} out of int32 range")
    if not _INT64_MIN <= ts_delta <= _INT64_MAX:
        raise ValueError(f"timestamp delta {ts_delta} out of int64 range")
    parts = [b"\x00", _zz(ts_delta), _zz(off_delta)]
    key = r.key
    if key is None:
        parts.append(b"\x01")  # zigzag(-1)
    else:
        parts.append(_zz(len(key)))
        parts.append(bytes(key))
    value = r.value
    if value is None:
        parts.append(b"\x01")
    else:
        parts.append(_zz(len(value)))
        parts.append(bytes(value))
    headers = r.headers or ()
    parts.append(_zz(len(headers)))
    for hk, hv in headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)
        parts.append(_zz(len(hkb)))
        parts.append(hkb)
        if hv is None:
            parts.append(b"\x01")
        else:
            parts.append(_zz(len(hv)))
            parts.append(bytes(hv))
    body = b"".join(parts)
    return _zz(len(body)) + body


def _assemble(payload: bytes, base_offset: int, attributes: int, last_offset_delta: int, base_timestamp: int, max_timestamp: int,
              producer_id: int, producer_epoch: int, base_sequence: int, records_count: int, partition_leader_epoch: int) -> bytes:
    length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    if length > _INT32_MAX:
        raise ValueError("batch too large")
    buf = bytearray(HEADER_SIZE + len(payload))
    _HDR.pack_into(
        buf,
        0,
        base_offset,
        length,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    buf[HEADER_SIZE:] = payload
    _U32.pack_into(buf, CRC_OFFSET, _crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def _attributes(compression: int, timestamp_type: int, is_transactional: bool, is_control: bool,
                delete_horizon: bool) -> int:
    if not 0 <= compression <= 4:
        raise ValueError(f"unknown compression codec {compression}")
    attrs = compression
    if timestamp_type:
        attrs |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= TRANSACTIONAL_MASK
    if is_control:
        attrs |= CONTROL_MASK
    if delete_horizon:
        attrs |= DELETE_HORIZON_MASK
    return attrs


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
    is_transactional: bool = False, is_control: bool = False, timestamp_type: int = 0,
    partition_leader_epoch: int = -1, delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode ``records`` into one RecordBatch v2.

    Record offsets / timestamps are absolute: offset deltas are relative to
    ``base_offset`` (gaps allowed, lastOffsetDelta = last record offset -
    base_offset), timestamp deltas relative to baseTimestamp, which is the
    first record's timestamp (Kafka's MemoryRecordsBuilder), or
    ``delete_horizon_ms`` when given (attribute bit 6 is then set).
    maxTimestamp = max record timestamp.  Raises ValueError for an empty list
    (use ``build_empty_batch``).
    """
    if not records:
        raise ValueError("build_batch needs at least one record (use build_empty_batch)")
    compression = int(compression)
    attrs = _attributes(compression, timestamp_type, is_transactional, is_control,
                        delete_horizon_ms is not None)
    base_ts = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    max_ts = records[0].timestamp
    prev_off = None
    parts = []
    for r in records:
        off = r.offset
        if prev_off is not None and off <= prev_off:
            raise ValueError(f"record offsets must be strictly increasing ({off} after {prev_off})")
        if off < base_offset:
            raise ValueError(f"record offset {off} is below base_offset {base_offset}")
        prev_off = off
        ts = r.timestamp
        if ts > max_ts:
            max_ts = ts
        parts.append(_encode_record(r, off - base_offset, ts - base_ts))
    last_offset_delta = prev_off - base_offset
    raw = b"".join(parts)
    payload = compress(compression, raw) if compression else raw
    return _assemble(payload, base_offset, attrs, last_offset_delta, base_ts, max_ts,
                     producer_id, producer_epoch, base_sequence, len(records), partition_leader_epoch)


_KV_HEAD = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_KV_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount: the CRC-covered header fields


def build_key_value_batch(
    pairs: Sequence[tuple[bytes, bytes | None]],
    timestamp: int,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> tuple[BatchHeader, bytes]:
    """One uncompressed RecordBatch v2 of ``(key, value)`` records (value None: a tombstone),
    offsets 0.., every record at ``timestamp``, no record headers, base offset 0; with its
    header, as ``split_batches`` would read it back. A producer id makes it transactional.

    The same bytes as ``build_batch`` gives for such records, without a ``Record`` per
    record: the coordinators write their records this way on every append.
    """
    n = len(pairs)
    if not n:
        raise ValueError("build_key_value_batch needs at least one record")
    zz = _zz
    parts = []
    add = parts.append
    for i, (key, value) in enumerate(pairs):
        # attributes 0, timestamp delta 0, offset delta i, the key, the value, 0 headers
        head = b"\x00\x00" + zz(i) + zz(len(key))
        if value is None:
            body_len = len(head) + len(key) + 2
            add(zz(body_len) + head)
            add(key)
            add(b"\x01\x00")
        else:
            vlen = zz(len(value))
            body_len = len(head) + len(key) + len(vlen) + len(value) + 1
            add(zz(body_len) + head)
            add(key)
            add(vlen)
            add(value)
            add(b"\x00")
    attrs = TRANSACTIONAL_MASK if producer_id >= 0 else 0
    tail = _KV_TAIL.pack(attrs, n - 1, timestamp, timestamp, producer_id, producer_epoch, -1, n) + b"".join(parts)
    length = ATTRIBUTES_OFFSET - LOG_OVERHEAD + len(tail)  # batchLength: the bytes after that field
    crc = _crc32c(tail)
    header = BatchHeader(0, length, -1, MAGIC, crc, attrs, n - 1, timestamp, timestamp, producer_id, producer_epoch, -1, n)
    return header, _KV_HEAD.pack(0, length, -1, MAGIC, crc) + tail


def build_empty_batch(
    *,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
    is_transactional: bool = False, is_control: bool = False, timestamp_type: int = 0,
    partition_leader_epoch: int = -1, delete_horizon_ms: int | None = None,
) -> bytes:
    """A batch header with recordsCount 0 and no records (compaction keeps these to
    preserve producer state; mirrors Kafka's DefaultRecordBatch.writeEmptyHeader).
    Compression is always none."""
    attrs = _attributes(0, timestamp_type, is_transactional, is_control, delete_horizon_ms is not None)
    base_ts = base_timestamp if delete_horizon_ms is None else delete_horizon_ms
    return _assemble(b"", base_offset, attrs, last_offset_delta, base_ts, max_timestamp,
                     producer_id, producer_epoch, base_sequence, 0, partition_leader_epoch)


# --------------------------------------------------------------------------- control records

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


def parse_control_key(key: bytes) -> tuple[int, int]:
    """(version, type) of a control record key; type 0 = ABORT, 1 = COMMIT."""
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key too short")
    return _CONTROL_KEY.unpack_from(key, 0)


def parse_end_txn_marker_value(value: bytes) -> tuple[int, int]:
    """(version, coordinator_epoch) of a COMMIT/ABORT marker value."""
    if value is None or len(value) < 6:
        raise CorruptRecordError("end transaction marker value too short")
    return _END_TXN_VALUE.unpack_from(value, 0)


def build_end_txn_marker(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker record."""
    rec = Record(
        offset=base_offset,
        timestamp=timestamp,
        key=_CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT),
        value=_END_TXN_VALUE.pack(0, coordinator_epoch),
    )
    return build_batch(
        [rec],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
