"""An append's batches laid out for one write: checked, offsets and leader epoch patched, and
written with one ``pwritev`` at the end of the active segment (``PartitionLog.append``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.records import TRANSACTIONAL_MASK, BatchHeader, patch_base_offset, set_log_append_time

from .errors import InvalidOffsetError, RecordBatchTooLargeError
from .segment import Segment

# baseOffset(8) batchLength(4) partitionLeaderEpoch(4): what an append patches, outside the CRC
_HEAD_PATCH = 16


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 unless message.timestamp.type=LogAppendTime


def lay_out(
    batches: Sequence[tuple[BatchHeader, bytes | bytearray | memoryview]],
    next_off: int,
    limit: int,
    assign_offsets: bool,
    leader_epoch: int | None,
    use_lat: bool,
    lat: int,
) -> tuple[list, list[tuple[int, int, int, int]], int, int, int, int, int, list | None]:
    """Check an append's batches and lay out what one pwritev writes (``PartitionLog.append``):
    (the buffers, (position, last offset, max timestamp, size) of each batch, the bytes in all,
    the next offset after them, the first base offset, the max timestamp and its offset, the
    transactional batches as (header, base offset, bytes) or None).

    The batches are written as they are, with no copy: each batch's first 16 bytes
    (baseOffset, batchLength, partitionLeaderEpoch: outside the CRC) go out from a
    patched copy in ``heads``, the rest straight from the request's buffer. Only
    LogAppendTime (``use_lat``) rewrites CRC-covered bytes: those batches are copied."""
    heads = memoryview(bytearray(_HEAD_PATCH * len(batches)))
    iov: list = []
    pos = 0
    first_base = -1
    max_ts = -1
    off_of_max = -1
    infos: list[tuple[int, int, int, int]] = []
    txn: list | None = None
    txn_bit = TRANSACTIONAL_MASK
    for i, (hdr, data) in enumerate(batches):
        n = len(data)
        if n != hdr.size:
            raise ValueError(f"batch header says {hdr.size} bytes but {n} were given")
        if assign_offsets:
            if n > limit:
                raise RecordBatchTooLargeError(n, limit)
            base = next_off
        else:
            base = hdr.base_offset
            if base < next_off:
                raise InvalidOffsetError(f"batch base offset {base} is below the next expected offset {next_off}")
        view = data if type(data) is memoryview else memoryview(data)
        if hdr.attributes & txn_bit:
            if txn is None:
                txn = []
            txn.append((hdr, base, view))
        if use_lat:
            whole = bytearray(view)
            patch_base_offset(whole, 0, base, leader_epoch)
            set_log_append_time(whole, 0, lat)
            iov.append(whole)
            bts = lat
        else:
            head = heads[i * _HEAD_PATCH : (i + 1) * _HEAD_PATCH]
            head[:] = view[:_HEAD_PATCH]
            if assign_offsets or leader_epoch is not None:
                patch_base_offset(head, 0, base, leader_epoch)
            iov.append(head)
            iov.append(view[_HEAD_PATCH:])
            bts = hdr.max_timestamp
        last = base + hdr.last_offset_delta
        if first_base < 0:
            first_base = base
        if bts > max_ts:
            max_ts, off_of_max = bts, last
        infos.append((pos, last, bts, n))
        next_off = last + 1
        pos += n
    return iov, infos, pos, next_off, first_base, max_ts, off_of_max, txn


def write_appended(seg: Segment, iov: list, nbytes: int, infos: list[tuple[int, int, int, int]], now_ms: int) -> None:
    """Write an append's buffers at the end of ``seg`` in one pwritev (cut back off on failure)
    and note its batches in the segment's indexes."""
    start = seg.size
    try:
        seg.fh.pwritev_all(iov, start)
    except BaseException:
        try:
            seg.fh.truncate(start)
        except OSError:
            pass
        raise
    seg.size = start + nbytes
    if seg.first_batch_time_ms is None:
        seg.first_batch_time_ms = now_ms
    for p, last, bts, n in infos:
        seg.note_batch(start + p, last, bts, n)
