"""Log compaction ("cleaner"): keep only the latest record per key.

``compact`` cleans the non-active segments of a ``PartitionLog`` without
blocking appends:

1. build an offset map (key -> latest committed offset) from the dirty part
   of the log (offsets >= the log's ``_clean_upto``), along with each
   producer's last batch and the aborted transactional batches;
2. group the cleanable segments so that each group fits in one segment;
3. per group, rewrite the batches (drop superseded records, expired
   tombstones and aborted data; keep a producer's last batch, even emptied)
   into ``<base>-<end>.cleaned``, rename it to ``.swap`` (the commit point),
   swap the in-memory segment list, delete the old segments, and rename the
   ``.swap`` file to the segment's ``.log`` name. Recovery (recovery.py)
   deletes a leftover ``.cleaned`` and completes a leftover ``.swap``.

The functions here take the ``PartitionLog`` and work with its private
state under its locks; see "Threading model" in log.py.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.records import (
    BatchHeader,
    CorruptRecordError,
    build_batch,
    build_empty_batch,
    iter_records,
    parse_control_key,
)

from .recovery import _fsync_dir, _unlink
from .segment import _REL_MAX, Segment, segment_name

if TYPE_CHECKING:
    from .log import PartitionLog

__all__ = ["CompactionStats", "cleanable_info", "needs_compaction", "compact"]

# same logger as before the split out of log.py
log = logging.getLogger("storage.log")

_WRITE_CHUNK = 4 << 20
_CONTROL_COMMIT = 1


@dataclass(slots=True)
class CompactionStats:
    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_out: int = 0
    tombstones_dropped: int = 0
    aborted: bool = False


class _Abort(Exception):
    pass


def cleanable_info(plog: PartitionLog, now_ms: int | None = None) -> tuple[int, int, bool]:
    """(dirty bytes, cleanable bytes, tombstone horizon passed) of the non-active segments."""
    cfg = plog.config
    now = plog._now_ms() if now_ms is None else now_ms
    segs = plog._view.segs[:-1]
    lag_limit = now - cfg.min_compaction_lag_ms
    total = dirty = 0
    horizon = False
    for s in segs:
        if cfg.min_compaction_lag_ms > 0 and s.max_timestamp > lag_limit:
            break
        total += s.size
        if s.next_offset > plog._clean_upto:
            dirty += s.size
        if s.min_delete_horizon is not None and s.min_delete_horizon <= now:
            horizon = True
    return dirty, total, horizon


def needs_compaction(plog: PartitionLog, now_ms: int | None = None) -> bool:
    cfg = plog.config
    if not cfg.compact or plog._closed:
        return False
    dirty, total, horizon = plog.cleanable_info(now_ms)
    if horizon:
        return True
    return dirty > 0 and total > 0 and dirty / total >= cfg.min_cleanable_dirty_ratio


def compact(plog: PartitionLog, now_ms: int | None = None) -> CompactionStats | None:
    """Clean the non-active segments (keep the latest record per key).

    Runs without blocking appends: reads a snapshot, writes cleaned segments
    to ``<base>-<end>.cleaned``, renames to ``.swap`` (the commit point), swaps
    the in-memory segment list under the lock, then replaces the old files.
    Returns None when there is nothing to clean.
    """
    cfg = plog.config
    if not cfg.compact or plog._closed:
        return None
    now = plog._now_ms() if now_ms is None else now_ms
    with plog._maint_lock:
        if plog._closing:
            return None
        with plog._flush_lock:
            plog._process_pending_locked()
        with plog._lock:
            view = plog._view
            epoch = plog._epoch
            active_end = view.segs[-1].size
            clean_upto = plog._clean_upto
        segs = view.segs
        lag_limit = now - cfg.min_compaction_lag_ms
        cleanable: list[Segment] = []
        for s in segs[:-1]:
            if not s.indexes_saved:
                break
            if cfg.min_compaction_lag_ms > 0 and s.max_timestamp > lag_limit:
                break
            cleanable.append(s)
        if not cleanable:
            return None
        first_uncleanable = segs[len(cleanable)].base_offset
        stats = CompactionStats()
        try:
            offset_map, producer_last, aborted = _build_offset_map(plog, segs, active_end, clean_upto)
            groups = _group_segments(plog, cleanable)
            for group in groups:
                after = segs[segs.index(group[-1]) + 1]
                _clean_group(plog, group, after.base_offset, offset_map, producer_last, aborted, now, epoch, stats)
        except _Abort:
            stats.aborted = True
            return stats
        except Exception:
            # a concurrent truncate_to/close can make the snapshot unreadable
            if plog._closing or plog._closed or plog._epoch != epoch:
                stats.aborted = True
                return stats
            raise
        with plog._lock:
            if plog._epoch == epoch:
                plog._clean_upto = max(plog._clean_upto, first_uncleanable)
        log.info(
            "compaction of %s: %d -> %d segments, %d -> %d bytes, %d -> %d records",
            plog.path, stats.segments_in, stats.segments_out, stats.bytes_in, stats.bytes_out,
            stats.records_in, stats.records_out,
        )
        return stats


def _check_abort(plog: PartitionLog, epoch: int) -> None:
    if plog._closing or plog._closed or plog._epoch != epoch:
        raise _Abort()


def _build_offset_map(
    plog: PartitionLog, segs: tuple[Segment, ...], active_end: int, clean_upto: int
) -> tuple[dict[bytes, int], dict[int, int], set[int]]:
    """key -> latest committed offset (dirty part), producer -> last batch offset,
    and base offsets of aborted transactional batches."""
    offset_map: dict[bytes, int] = {}
    producer_last: dict[int, int] = {}
    aborted: set[int] = set()
    open_txns: dict[int, list[tuple[int, list[tuple[bytes, int]] | None]]] = {}
    epoch = plog._epoch
    last_index = len(segs) - 1
    for i, seg in enumerate(segs):
        _check_abort(plog, epoch)
        end = active_end if i == last_index else seg.size
        if seg.next_offset <= clean_upto and i != last_index:
            # clean section: headers only (control batches decoded individually)
            for pos, hdr in seg.iter_headers(0, end):
                if hdr.producer_id >= 0:
                    producer_last[hdr.producer_id] = hdr.base_offset + hdr.last_offset_delta
                if hdr.is_transactional:
                    if hdr.is_control:
                        _end_txn(seg.fh.pread(hdr.size, pos), hdr, open_txns, offset_map, aborted)
                    else:
                        open_txns.setdefault(hdr.producer_id, []).append((hdr.base_offset, None))
            continue
        for _pos, hdr, data in seg.iter_batches(0, end):
            if plog._closing:
                raise _Abort()
            last = hdr.base_offset + hdr.last_offset_delta
            if hdr.producer_id >= 0:
                producer_last[hdr.producer_id] = last
            if hdr.is_control:
                if hdr.is_transactional:
                    _end_txn(data, hdr, open_txns, offset_map, aborted)
                continue
            dirty = last >= clean_upto
            if hdr.is_transactional:
                keys = None
                if dirty:
                    keys = [(r.key, r.offset) for r in iter_records(data) if r.key is not None]
                open_txns.setdefault(hdr.producer_id, []).append((hdr.base_offset, keys))
            elif dirty:
                for r in iter_records(data):
                    if r.key is not None:
                        offset_map[r.key] = r.offset
    return offset_map, producer_last, aborted


def _end_txn(data, hdr: BatchHeader, open_txns, offset_map: dict[bytes, int], aborted: set[int]) -> None:
    txn = open_txns.pop(hdr.producer_id, [])
    commit = False
    try:
        for rec in iter_records(data):
            commit = parse_control_key(rec.key)[1] == _CONTROL_COMMIT
            break
    except (CorruptRecordError, ValueError):
        return
    if commit:
        for _base, keys in txn:
            if keys:
                for k, off in keys:
                    if off > offset_map.get(k, -1):
                        offset_map[k] = off
    else:
        for base, _keys in txn:
            aborted.add(base)


def _group_segments(plog: PartitionLog, segs: list[Segment]) -> list[list[Segment]]:
    cfg = plog.config
    max_idx_entries = cfg.segment_index_bytes // 12
    groups: list[list[Segment]] = []
    cur: list[Segment] = []
    size = entries = 0
    for s in segs:
        if cur and (
            size + s.size > cfg.segment_bytes
            or entries + len(s.index) + len(s.time_index) + 2 > max_idx_entries
            or s.next_offset - 1 - cur[0].base_offset > _REL_MAX
        ):
            groups.append(cur)
            cur, size, entries = [], 0, 0
        cur.append(s)
        size += s.size
        entries += len(s.index) + len(s.time_index)
    if cur:
        groups.append(cur)
    return groups


def _clean_group(
    plog: PartitionLog,
    group: list[Segment],
    end_base: int,
    offset_map: dict[bytes, int],
    producer_last: dict[int, int],
    aborted: set[int],
    now: int,
    epoch: int,
    stats: CompactionStats,
) -> None:
    cfg = plog.config
    d = plog.path
    base = group[0].base_offset
    stem = f"{segment_name(base)}-{segment_name(end_base)}"
    cleaned_path = d / (stem + ".cleaned")
    swap_path = d / (stem + ".swap")
    new = Segment.create(d, base, cfg.segment_index_bytes, cfg.index_interval_bytes, path=cleaned_path)
    committed = False
    try:
        out: list[bytes | memoryview] = []
        out_len = 0
        written = 0
        min_horizon: int | None = None

        def emit(data: bytes | memoryview, last: int, max_ts: int) -> None:
            nonlocal out_len, written
            n = len(data)
            new.note_batch(written + out_len, last, max_ts, n)
            out.append(data)
            out_len += n
            if out_len >= _WRITE_CHUNK:
                new.fh.pwrite_all(b"".join(out), written)
                written += out_len
                out.clear()
                out_len = 0

        for seg in group:
            stats.segments_in += 1
            stats.bytes_in += seg.size
            for _pos, hdr, data in seg.iter_batches():
                _check_abort(plog, epoch)
                last = hdr.base_offset + hdr.last_offset_delta
                stats.records_in += hdr.records_count
                if hdr.is_control:
                    stats.records_out += hdr.records_count
                    emit(bytes(data), last, hdr.max_timestamp)
                    continue
                horizon = hdr.delete_horizon_ms
                if hdr.is_transactional and hdr.base_offset in aborted:
                    records = []
                    retained = []
                    has_tombstone = False
                else:
                    records = list(iter_records(data))
                    retained = []
                    has_tombstone = False
                    for r in records:
                        k = r.key
                        if k is not None:
                            latest = offset_map.get(k)
                            if latest is not None and latest > r.offset:
                                continue
                            if r.value is None:
                                if horizon is not None and horizon <= now:
                                    stats.tombstones_dropped += 1
                                    continue
                                has_tombstone = True
                        retained.append(r)
                new_horizon = None
                if has_tombstone:
                    new_horizon = horizon if horizon is not None else now + cfg.delete_retention_ms
                    min_horizon = new_horizon if min_horizon is None else min(min_horizon, new_horizon)
                if retained and len(retained) == len(records) and new_horizon == horizon:
                    stats.records_out += len(retained)
                    emit(bytes(data), last, hdr.max_timestamp)
                elif retained:
                    stats.records_out += len(retained)
                    batch = build_batch(
                        retained,
                        base_offset=hdr.base_offset,
                        compression=hdr.compression,
                        producer_id=hdr.producer_id,
                        producer_epoch=hdr.producer_epoch,
                        base_sequence=hdr.base_sequence,
                        is_transactional=hdr.is_transactional,
                        timestamp_type=hdr.timestamp_type,
                        partition_leader_epoch=hdr.partition_leader_epoch,
                        delete_horizon_ms=new_horizon,
                    )
                    emit(batch, retained[-1].offset, max(r.timestamp for r in retained))
                elif hdr.producer_id >= 0 and producer_last.get(hdr.producer_id) == last:
                    # keep an empty batch: the producer's last sequence/epoch must survive
                    batch = build_empty_batch(
                        base_offset=hdr.base_offset,
                        last_offset_delta=hdr.last_offset_delta,
                        base_timestamp=hdr.base_timestamp if horizon is None else hdr.max_timestamp,
                        max_timestamp=hdr.max_timestamp,
                        producer_id=hdr.producer_id,
                        producer_epoch=hdr.producer_epoch,
                        base_sequence=hdr.base_sequence,
                        is_transactional=hdr.is_transactional,
                        timestamp_type=hdr.timestamp_type,
                        partition_leader_epoch=hdr.partition_leader_epoch,
                    )
                    emit(batch, last, hdr.max_timestamp)
        if out:
            new.fh.pwrite_all(b"".join(out), written)
            written += out_len
            out.clear()
        new.size = written
        new.seal()
        new.min_delete_horizon = min_horizon
        if cfg.fsync != "never":
            new.fh.fsync()
        new.flushed_size = written
        _hook(plog, "cleaned")
        sync = cfg.fsync != "never"
        os.replace(cleaned_path, swap_path)  # commit point
        if sync:
            _fsync_dir(d)
        _hook(plog, "swap")
        with plog._lock:
            cur = plog._view.segs
            try:
                i = cur.index(group[0])
            except ValueError:
                i = -1
            if (
                i < 0
                or plog._closed
                or plog._epoch != epoch
                or cur[i:i + len(group)] != tuple(group)
            ):
                raise _Abort()
            plog._view = plog._view.with_segments(cur[:i] + (new,) + cur[i + len(group):])
            committed = True
        for seg in group:
            seg.delete_files()
        _hook(plog, "deleted")
        os.replace(swap_path, new.log_path)
        new.save_indexes(fsync=sync)
        if sync:
            _fsync_dir(d)
        stats.segments_out += 1
        stats.bytes_out += written
    except Exception:
        if not committed:
            _unlink(cleaned_path)
            _unlink(swap_path)
            new.fh.close()
        raise


def _hook(plog: PartitionLog, stage: str) -> None:
    if plog._crash_hook is not None:
        plog._crash_hook(stage)
