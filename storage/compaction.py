"""Log compaction ("cleaner"): keep only the latest record per key, transaction-aware.

``compact`` cleans a prefix of a ``PartitionLog``'s segments without blocking
appends. The rules are Kafka 4.x's log cleaner's (``Cleaner``,
``CleanedTransactionMetadata``, ``LogCleanerManager.cleanableOffsets``,
``MemoryRecords.filterTo``):

* **What is cleaned.** The segments below the first uncleanable offset: the
  smallest of the active segment's base offset, the last stable offset (no
  data of an open transaction is ever cleaned, nor anything after it) and,
  with ``min.compaction.lag.ms``, the first segment holding a record younger
  than that; rounded down to the base offset of the segment that holds it.
* **The offset map** (key -> latest offset) is built from the dirty part
  (offsets from the log's ``_clean_upto``) up to that offset, leaving out the
  batches of aborted transactions.
* **Aborted transactions** are known from the partition's aborted-transaction
  list (``TxnState.aborted``, what ``.txnindex`` files hold and what a
  READ_COMMITTED fetch is told). Walking the log from its start, a
  transaction's entry becomes "ongoing" once the walk reaches its first
  offset; a transactional batch of that producer until the ABORT marker is
  aborted data and is removed. Every other batch below the last stable offset
  is committed (or not transactional) and is cleaned by key. A walk leaves out
  the entries whose ABORT marker is below where it begins (the offset map's
  walk begins at the dirty part; retention leaves entries below the log start
  until the next marker), as Kafka's ``collectAbortedTransactions(start, end)``
  does: such an entry, ongoing, would stand for its producer's next aborted
  transaction, whose data would then count as committed.
* **Markers.** A COMMIT marker can go once no batch of its transaction is left
  in the log (none was seen on this pass), an ABORT marker likewise; an empty
  control batch can go at once. Like tombstones, such a marker is first given
  a delete horizon (now + ``delete.retention.ms``, stored in the batch's first
  timestamp with attribute bit 6, KIP-534) and removed by a later pass that
  finds the horizon passed; a consumer that read the data meanwhile still
  reads the marker. An ABORT whose transaction has no data left is dropped
  from the aborted-transaction list (and so from the ``.txnindex``) on the
  pass that finds it so, before its marker can go.
* **Tombstones** (a key with a null value, the latest of its key) get a delete
  horizon the first time they are cleaned and are removed once it passed.
* **Producer state.** The batch holding a producer's last data (the last data
  batch of its current epoch), or, when its current epoch has written only
  markers, its markers of that epoch, are kept even when nothing in them is,
  as a batch with no records (Kafka's ``RETAIN_EMPTY``), and so is the last
  batch below the first uncleanable offset. A rewritten batch keeps its base
  offset, last offset delta (the last sequence number), producer id, epoch,
  base sequence and attributes.

Deliberately different from Kafka: records without a key are kept (Kafka's
cleaner drops them; kafkalite refuses them on compacted topics anyway), every
producer id seen in the log counts as active (kafkalite has no
``producer.id.expiration.ms``), and where Kafka would keep a control batch
emptied of its record, the marker is kept whole (it means the same to every
reader; see ``_EMPTY_CONTROL_BATCHES``).

Each group of cleaned segments is written to ``<base>-<end>.cleaned``,
renamed to ``.swap`` (the commit point), swapped into the in-memory segment
list, the old segments deleted and the ``.swap`` renamed to the segment's
``.log`` name; recovery (recovery.py) deletes a leftover ``.cleaned`` and
completes a leftover ``.swap``. Aborted transactions dropped by a group are
removed from the ``.txnindex`` files of its segments before its commit point,
and from the in-memory list in the same locked step as the segment swap. So a
reader, or a restart after a crash at any point, never finds an aborted
transaction listed whose marker is gone (which would hide the producer's later
committed data), nor aborted data without its entry. Transaction snapshots
below the first uncleanable offset that list open transactions are removed
first: replayed over a log whose markers were removed, they would leave those
transactions open for ever.

The functions here take the ``PartitionLog`` and work with its private
state under its locks; see "Threading model" in log.py.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.crc import crc32c
from protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    BatchHeader,
    build_batch,
    build_empty_batch,
    iter_records,
)

from .crashpoints import crash_point
from .index import write_file_atomic
from .recovery import MAX_SNAPSHOT_BYTES, _fsync_dir, _txn_files, _unlink
from .segment import _REL_MAX, Segment, segment_name
from .txn import ABORT, COMMIT, AbortedTxn, control_kind, decode_snapshot, encode_entries, read_bounded

if TYPE_CHECKING:
    from .log import PartitionLog

__all__ = ["CompactionStats", "cleanable_info", "needs_compaction", "compact"]

# same logger as before the split out of log.py
log = logging.getLogger("storage.log")

_WRITE_CHUNK = 4 << 20
_NO_TIMESTAMP = -1
# Kafka keeps a control batch it must retain but whose marker may go (its producer's last batch,
# or the last batch below the first uncleanable offset) as a batch with no records; so does
# kafkalite. Every reader skips such a batch: storage/txn.py, the group coordinator's loader
# (broker/coordinator/loader.py), clients. False keeps the marker whole instead.
_EMPTY_CONTROL_BATCHES = True

_LOD = struct.Struct(">i")
_U32 = struct.Struct(">I")

_EMPTY = "empty"  # a control batch with no records (an already cleaned marker)


@dataclass(slots=True)
class CompactionStats:
    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_out: int = 0
    tombstones_dropped: int = 0
    aborted_batches_dropped: int = 0  # batches of aborted transactions removed (or emptied)
    markers_dropped: int = 0  # COMMIT/ABORT control batches removed
    aborted_txns_dropped: int = 0  # aborted transactions taken off the .txnindex (no data left)
    first_uncleanable: int = -1
    aborted: bool = False


class _Abort(Exception):
    pass


# ---------------------------------------------------------------------------- what is cleanable


def _cleanable_count(plog: PartitionLog, segs, now: int, lso: int, *, saved_only: bool) -> int:
    """How many segments from the start are cleanable: non-active, below the segment holding
    the last stable offset, older than min.compaction.lag.ms (and with saved indexes)."""
    cfg = plog.config
    lag_limit = now - cfg.min_compaction_lag_ms
    n = 0
    for i in range(len(segs) - 1):
        s = segs[i]
        if segs[i + 1].base_offset > lso:
            break  # s holds the last stable offset
        if saved_only and not s.indexes_saved:
            break
        if cfg.min_compaction_lag_ms > 0 and s.max_timestamp > lag_limit:
            break
        n += 1
    return n


def cleanable_info(plog: PartitionLog, now_ms: int | None = None) -> tuple[int, int, bool]:
    """(dirty bytes, cleanable bytes, delete horizon passed) of the cleanable segments."""
    now = plog.now_ms() if now_ms is None else now_ms
    snap = plog.compaction_view()
    segs = snap.segs
    n = _cleanable_count(plog, segs, now, snap.last_stable_offset, saved_only=False)
    total = dirty = 0
    horizon = False
    for s in segs[:n]:
        total += s.size
        if s.next_offset > plog.clean_upto:
            dirty += s.size
        if s.min_delete_horizon is not None and s.min_delete_horizon <= now:
            horizon = True
    return dirty, total, horizon


def needs_compaction(plog: PartitionLog, now_ms: int | None = None) -> bool:
    cfg = plog.config
    if not cfg.compact or plog.closed:
        return False
    dirty, total, horizon = plog.cleanable_info(now_ms)
    if horizon:
        return True
    return dirty > 0 and total > 0 and dirty / total >= cfg.min_cleanable_dirty_ratio


# ---------------------------------------------------------------------------- transactions


class _TxnWalk:
    """The transactions met while walking the log in offset order (Kafka's
    CleanedTransactionMetadata): which data batches are aborted, which markers may go,
    and which aborted transactions have no data left (``dropped``)."""

    __slots__ = ("_todo", "_next", "_aborted", "_committed", "dropped")

    def __init__(self, entries: list[AbortedTxn]) -> None:
        self._todo = sorted(entries, key=lambda e: (e.first_offset, e.last_offset))
        self._next = 0
        self._aborted: dict[int, list] = {}  # producer id -> [entry, a batch of it was seen]
        self._committed: set[int] = set()  # producers with a (non-aborted) transactional batch seen
        self.dropped: list[AbortedTxn] = []

    def _reach(self, offset: int) -> None:
        todo = self._todo
        i = self._next
        while i < len(todo) and todo[i].first_offset <= offset:
            e = todo[i]
            i += 1
            if e.last_offset < offset:
                # its marker is behind the walk, which did not meet it (the walk began past it:
                # the offset map skips the clean part, retention may have deleted it): none of its
                # data is ahead. Made ongoing, it would stand for a later transaction of its
                # producer, whose aborted data would then count as committed.
                continue
            self._aborted.setdefault(e.producer_id, [e, False])
        self._next = i

    def on_data(self, hdr: BatchHeader) -> bool:
        """A data batch; True if it belongs to an aborted transaction."""
        self._reach(hdr.base_offset + hdr.last_offset_delta)
        if not hdr.is_transactional or hdr.producer_id < 0:
            return False
        pid = hdr.producer_id
        cur = self._aborted.get(pid)
        if cur is not None:
            if hdr.base_offset <= cur[0].last_offset:
                cur[1] = True
                return True
            del self._aborted[pid]  # past its marker, which is not in the log: not this transaction
        self._committed.add(pid)
        return False

    def on_marker(self, hdr: BatchHeader, kind) -> bool:
        """A control batch (``kind``: ABORT, COMMIT, another type (None) or _EMPTY); True if
        nothing of its transaction is left, so that it can go once its delete horizon passed."""
        self._reach(hdr.base_offset + hdr.last_offset_delta)
        if kind == _EMPTY:
            return True
        pid = hdr.producer_id
        if kind == ABORT:
            cur = self._aborted.pop(pid, None)
            if cur is None:
                return True
            if cur[1]:
                return False
            self.dropped.append(cur[0])
            return True
        if kind == COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False


def _marker_kind(hdr: BatchHeader, data):
    if hdr.records_count <= 0:
        return _EMPTY
    return control_kind(data)


class _Producers:
    """Each producer's current epoch and last data offset in it (Kafka's ProducerStateEntry),
    from the batch headers of the whole log."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: dict[int, list[int]] = {}  # producer id -> [epoch, last data offset or -1]

    def see(self, hdr: BatchHeader) -> None:
        pid = hdr.producer_id
        if pid < 0:
            return
        st = self.state.get(pid)
        if st is None:
            st = self.state[pid] = [hdr.producer_epoch, -1]
        elif st[0] != hdr.producer_epoch:
            st[0] = hdr.producer_epoch
            st[1] = -1
        if not hdr.is_control:
            st[1] = hdr.base_offset + hdr.last_offset_delta

    def holds_last(self, hdr: BatchHeader) -> bool:
        """Whether the batch carries its producer's last sequence number or, for a producer whose
        epoch has no data, its epoch (a marker): it is kept, emptied if need be."""
        st = self.state.get(hdr.producer_id)
        if st is None:
            return False
        if st[1] >= 0:
            return hdr.base_offset + hdr.last_offset_delta == st[1]
        return hdr.is_control and hdr.producer_epoch == st[0]


# ---------------------------------------------------------------------------- compaction


def compact(plog: PartitionLog, now_ms: int | None = None) -> CompactionStats | None:
    """Clean the cleanable segments (keep the latest record per key; see the module doc).

    Runs without blocking appends: reads a snapshot, writes cleaned segments
    to ``<base>-<end>.cleaned``, renames to ``.swap`` (the commit point), swaps
    the in-memory segment list under the lock, then replaces the old files.
    Returns None when there is nothing to clean.
    """
    cfg = plog.config
    if not cfg.compact or plog.closed:
        return None
    now = plog.now_ms() if now_ms is None else now_ms
    with plog.maintenance():
        if plog.closing:
            return None
        plog.process_pending()
        snap = plog.compaction_view(aborted=True)
        epoch, active_end, clean_upto, lso = snap.epoch, snap.active_end, snap.clean_upto, snap.last_stable_offset
        tracked = snap.txn_tracked
        entries = snap.aborted
        segs = snap.segs
        n = _cleanable_count(plog, segs, now, lso, saved_only=True)
        if n == 0:
            return None
        cleanable = list(segs[:n])
        first_uncleanable = segs[n].base_offset
        entries = [e for e in entries if e.first_offset < first_uncleanable]
        stats = CompactionStats(first_uncleanable=first_uncleanable)
        try:
            offset_map, producers = _build_offset_map(plog, segs, n, active_end, clean_upto, entries, epoch)
            drop_markers = _drop_stale_snapshots(plog, first_uncleanable) if tracked else True
            walk = _TxnWalk(entries)
            groups = _group_segments(plog, cleanable)
            for group in groups:
                after = segs[segs.index(group[-1]) + 1]
                _clean_group(
                    plog, segs, group, after.base_offset, first_uncleanable, offset_map, producers, walk,
                    entries, drop_markers, now, epoch, stats,
                )
        except _Abort:
            stats.aborted = True
            return stats
        except Exception:
            # a concurrent truncate_to/close can make the snapshot unreadable
            if plog.changed_since(epoch):
                stats.aborted = True
                return stats
            raise
        plog.mark_clean(first_uncleanable, epoch)
        log.info(
            "compaction of %s below offset %d: %d -> %d segments, %d -> %d bytes, %d -> %d records "
            "(%d aborted batches, %d markers, %d tombstones removed)",
            plog.path, first_uncleanable, stats.segments_in, stats.segments_out, stats.bytes_in, stats.bytes_out,
            stats.records_in, stats.records_out, stats.aborted_batches_dropped, stats.markers_dropped,
            stats.tombstones_dropped,
        )
        return stats


def _check_abort(plog: PartitionLog, epoch: int) -> None:
    if plog.changed_since(epoch):
        raise _Abort()


def _build_offset_map(
    plog: PartitionLog,
    segs: tuple[Segment, ...],
    n: int,
    active_end: int,
    clean_upto: int,
    entries: list[AbortedTxn],
    epoch: int,
) -> tuple[dict[bytes, int], _Producers]:
    """key -> latest offset among the committed and plain records of the dirty cleanable part
    (offsets in [clean_upto, first uncleanable)), and the producers' state of the whole log."""
    offset_map: dict[bytes, int] = {}
    producers = _Producers()
    walk = _TxnWalk(entries)
    last_index = len(segs) - 1
    for i, seg in enumerate(segs):
        _check_abort(plog, epoch)
        end = active_end if i == last_index else seg.size
        if i >= n or seg.next_offset <= clean_upto:
            for _pos, hdr in seg.iter_headers(0, end):
                producers.see(hdr)
            continue
        for _pos, hdr, data in seg.iter_batches(0, end):
            if plog.closing:
                raise _Abort()
            producers.see(hdr)
            if hdr.is_control:
                walk.on_marker(hdr, _marker_kind(hdr, data) if hdr.is_transactional else None)
                continue
            if walk.on_data(hdr) or hdr.base_offset + hdr.last_offset_delta < clean_upto:
                continue
            for r in iter_records(data):
                if r.key is not None and r.offset >= clean_upto:
                    offset_map[r.key] = r.offset
    return offset_map, producers


def _drop_stale_snapshots(plog: PartitionLog, first_uncleanable: int) -> bool:
    """Remove the transaction snapshots below ``first_uncleanable`` that list open transactions
    (a marker this pass removes could close one of them); False if one of them is the newest
    snapshot, which stays (it says the partition has seen transactions): then no marker goes."""
    try:
        snaps = _txn_files(plog.path)[1]
    except OSError:
        return False
    newest = max(snaps) if snaps else None
    ok = True
    removed = False
    for off, name in snaps.items():
        if off >= first_uncleanable:
            continue
        data = read_bounded(plog.path / name, MAX_SNAPSHOT_BYTES)
        got = decode_snapshot(data, off) if data is not None else None
        if got == []:
            continue  # nothing open there: still true of the cleaned log
        if off == newest:
            ok = False
            continue
        _unlink(plog.path / name)
        removed = True
    if removed and plog.config.fsync != "never":
        _fsync_dir(plog.path)
    return ok


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


def _rebuilt(records, hdr: BatchHeader, horizon: int | None) -> bytes:
    """``records`` (some of the batch's) as a batch with ``hdr``'s offsets, producer fields and
    attributes; the last offset delta stays the original's (it gives the last sequence number)."""
    batch = bytearray(build_batch(records, base_offset=hdr.base_offset, compression=hdr.compression, delete_horizon_ms=horizon,
                                  **_kept_fields(hdr)))
    if _LOD.unpack_from(batch, LAST_OFFSET_DELTA_OFFSET)[0] != hdr.last_offset_delta:
        _LOD.pack_into(batch, LAST_OFFSET_DELTA_OFFSET, hdr.last_offset_delta)
        _U32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def _emptied(hdr: BatchHeader) -> bytes:
    """The batch as Kafka keeps one whose records all went: its header, no records."""
    return build_empty_batch(base_offset=hdr.base_offset, last_offset_delta=hdr.last_offset_delta, base_timestamp=_NO_TIMESTAMP,
                             max_timestamp=hdr.max_timestamp, **_kept_fields(hdr))


def _kept_fields(hdr: BatchHeader) -> dict:
    """What a rebuilt batch keeps of the original's header: its producer and its attributes."""
    return {"producer_id": hdr.producer_id, "producer_epoch": hdr.producer_epoch, "base_sequence": hdr.base_sequence,
            "is_transactional": hdr.is_transactional, "is_control": hdr.is_control, "timestamp_type": hdr.timestamp_type,
            "partition_leader_epoch": hdr.partition_leader_epoch}


class _Output:
    """The cleaned segment being written: its batches buffered and written in chunks of
    ``_WRITE_CHUNK``, each noted in its indexes, and the earliest delete horizon it holds."""

    __slots__ = ("seg", "parts", "pending", "written", "min_horizon")

    def __init__(self, seg: Segment) -> None:
        self.seg = seg
        self.parts: list[bytes | memoryview] = []
        self.pending = 0  # bytes in ``parts``
        self.written = 0  # bytes written to the file
        self.min_horizon: int | None = None

    def emit(self, data: bytes | memoryview, last: int, max_ts: int) -> None:
        n = len(data)
        self.seg.note_batch(self.written + self.pending, last, max_ts, n)
        self.parts.append(data)
        self.pending += n
        if self.pending >= _WRITE_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.seg.fh.pwrite_all(b"".join(self.parts), self.written)
            self.written += self.pending
            self.parts.clear()
            self.pending = 0

    def note_horizon(self, horizon: int) -> None:
        self.min_horizon = horizon if self.min_horizon is None else min(self.min_horizon, horizon)


@dataclass(slots=True)
class _Rules:
    """What decides, batch by batch, what a cleaning pass keeps."""

    offset_map: dict[bytes, int]  # key -> its latest offset
    producers: _Producers
    walk: _TxnWalk
    first_uncleanable: int
    drop_markers: bool
    now: int
    delete_retention_ms: int
    stats: CompactionStats


def _clean_group(
    plog: PartitionLog,
    segs: tuple[Segment, ...],
    group: list[Segment],
    end_base: int,
    first_uncleanable: int,
    offset_map: dict[bytes, int],
    producers: _Producers,
    walk: _TxnWalk,
    entries: list[AbortedTxn],
    drop_markers: bool,
    now: int,
    epoch: int,
    stats: CompactionStats,
) -> None:
    """Clean ``group`` into one segment: written as ``<base>-<end>.cleaned``, renamed ``.swap`` (the
    commit point), put in place of the group in the log, then renamed to the segment's ``.log``."""
    cfg = plog.config
    d = plog.path
    base = group[0].base_offset
    stem = f"{segment_name(base)}-{segment_name(end_base)}"
    cleaned_path = d / (stem + ".cleaned")
    swap_path = d / (stem + ".swap")
    new = Segment.create(d, base, cfg.segment_index_bytes, cfg.index_interval_bytes, path=cleaned_path)
    rules = _Rules(offset_map, producers, walk, first_uncleanable, drop_markers, now, cfg.delete_retention_ms, stats)
    dropped_before = len(walk.dropped)
    committed = False
    try:
        out = _Output(new)
        for seg in group:
            stats.segments_in += 1
            stats.bytes_in += seg.size
            for _pos, hdr, data in seg.iter_batches():
                _check_abort(plog, epoch)
                _clean_batch(rules, out, hdr, data)
        out.flush()
        dropped = walk.dropped[dropped_before:]
        sync = cfg.fsync != "never"
        _stage_cleaned(plog, segs, group, out, entries, dropped, cleaned_path, swap_path, sync)
        # in one step with the segments: a reader never sees a marker gone and its entry still there
        if not plog.swap_segments(group, new, epoch, {e.last_offset for e in dropped}):
            raise _Abort()
        committed = True
        stats.aborted_txns_dropped += len(dropped)
        _finish_swap(plog, group, new, swap_path, sync)
        stats.segments_out += 1
        stats.bytes_out += out.written
    except Exception:
        if not committed:
            _unlink(cleaned_path)
            _unlink(swap_path)
            new.fh.close()
        raise


def _clean_batch(rules: _Rules, out: _Output, hdr: BatchHeader, data) -> None:
    """Keep, empty, rebuild or drop one batch of the group being cleaned."""
    last = hdr.base_offset + hdr.last_offset_delta
    rules.stats.records_in += hdr.records_count
    horizon = hdr.delete_horizon_ms
    control = hdr.is_control
    if control:
        kind = _marker_kind(hdr, data) if hdr.is_transactional else None
        may_go = rules.walk.on_marker(hdr, kind)
        discard = may_go and rules.drop_markers and horizon is not None and horizon <= rules.now
    else:
        may_go = discard = rules.walk.on_data(hdr)
    keep_empty = (hdr.producer_id >= 0 and rules.producers.holds_last(hdr)) or last + 1 == rules.first_uncleanable
    if discard:
        _discard(rules.stats, out, hdr, data, last, control, keep_empty)
    elif control:
        _keep_marker(rules, out, hdr, data, last, horizon, may_go, keep_empty)
    else:
        _keep_records(rules, out, hdr, data, last, horizon, keep_empty)


def _discard(stats: CompactionStats, out: _Output, hdr: BatchHeader, data, last: int, control: bool, keep_empty: bool) -> None:
    """A batch of an aborted transaction, or a marker past its delete horizon: dropped, or kept as an
    empty batch where its producer's last batch or the last offset before the uncleanable part must stay."""
    if not keep_empty:
        if control:
            stats.markers_dropped += 1
        else:
            stats.aborted_batches_dropped += 1
        return
    if not control:
        stats.aborted_batches_dropped += 1
    if control and not _EMPTY_CONTROL_BATCHES and hdr.records_count > 0:
        # kept whole (see _EMPTY_CONTROL_BATCHES); its horizon is not a reason to clean again
        stats.records_out += hdr.records_count
        out.emit(data, last, hdr.max_timestamp)
    else:
        out.emit(_emptied(hdr), last, hdr.max_timestamp)


def _keep_marker(rules: _Rules, out: _Output, hdr: BatchHeader, data, last: int, horizon: int | None,
                 may_go: bool, keep_empty: bool) -> None:
    """A marker that stays: a marker with nothing of its transaction left gets its delete horizon."""
    stats = rules.stats
    stats.records_out += hdr.records_count
    if hdr.records_count > 0 and may_go and horizon is None:
        horizon = rules.now + rules.delete_retention_ms
        out.emit(_rebuilt(list(iter_records(data)), hdr, horizon), last, hdr.max_timestamp)
    elif hdr.records_count > 0 or keep_empty:
        out.emit(data, last, hdr.max_timestamp)
    else:
        stats.markers_dropped += 1  # an empty control batch no one needs
        return
    if hdr.records_count > 0 and may_go and rules.drop_markers:  # it goes once this passed
        out.note_horizon(horizon)


def _keep_records(rules: _Rules, out: _Output, hdr: BatchHeader, data, last: int, horizon: int | None, keep_empty: bool) -> None:
    """A data batch: the records a later one of the same key replaced go, and tombstones past their delete
    horizon; a tombstone that stays gives the batch a delete horizon (``now + delete.retention.ms``)."""
    stats = rules.stats
    offset_map = rules.offset_map
    now = rules.now
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
    if retained:
        stats.records_out += len(retained)
        set_horizon = has_tombstone and horizon is None
        if set_horizon:
            horizon = now + rules.delete_retention_ms
        if has_tombstone:
            out.note_horizon(horizon)
        if len(retained) == len(records) and not set_horizon:
            out.emit(data, last, hdr.max_timestamp)
        else:
            out.emit(_rebuilt(retained, hdr, horizon), last, max(r.timestamp for r in retained))
    elif keep_empty:
        out.emit(_emptied(hdr), last, hdr.max_timestamp)


def _stage_cleaned(plog: PartitionLog, segs: tuple[Segment, ...], group: list[Segment], out: _Output,
                   entries: list[AbortedTxn], dropped: list[AbortedTxn], cleaned_path, swap_path, sync: bool) -> None:
    """Make the written segment durable, take the aborted transactions it no longer holds off the
    transaction indexes, and rename it ``.swap``: the commit point recovery completes."""
    new = out.seg
    new.size = out.written
    new.seal()
    new.min_delete_horizon = out.min_horizon
    if sync:
        new.fh.fsync()
    new.flushed_size = out.written
    if dropped:
        _drop_from_txn_indexes(plog, segs, group, entries, dropped, sync)
    _hook(plog, "cleaned")
    os.replace(cleaned_path, swap_path)  # commit point
    if sync:
        _fsync_dir(plog.path)
    _hook(plog, "swap")


def _finish_swap(plog: PartitionLog, group: list[Segment], new: Segment, swap_path, sync: bool) -> None:
    """After the swap in memory: the replaced segments' files go, the ``.swap`` becomes the ``.log``."""
    for seg in group:
        seg.delete_files()
    _hook(plog, "deleted")
    os.replace(swap_path, new.log_path)
    new.save_indexes(fsync=sync)
    if sync:
        _fsync_dir(plog.path)


def _drop_from_txn_indexes(
    plog: PartitionLog,
    segs: tuple[Segment, ...],
    group: list[Segment],
    entries: list[AbortedTxn],
    dropped: list[AbortedTxn],
    sync: bool,
) -> None:
    """Before the group's commit point: rewrite the .txnindex of each of its segments holding an
    aborted transaction being dropped (they have no data left, so the old segments read the same
    without them). After a crash at any later point recovery finds them gone from the files."""
    gone = {e.last_offset for e in dropped}
    bases = [s.base_offset for s in segs]
    for seg in group:
        i = bases.index(seg.base_offset)
        lo = seg.base_offset
        hi = bases[i + 1] if i + 1 < len(bases) else None
        mine = [e for e in entries if e.last_offset >= lo and (hi is None or e.last_offset < hi)]
        if not any(e.last_offset in gone for e in mine):
            continue
        keep = [e for e in mine if e.last_offset not in gone]
        seg.close_txn_index()
        if keep:
            write_file_atomic(seg.txnindex_path, encode_entries(keep), fsync=sync)
        else:
            _unlink(seg.txnindex_path)
    if sync:
        _fsync_dir(plog.path)


def _hook(plog: PartitionLog, stage: str) -> None:
    crash_point("compaction." + stage)
    plog.reached(stage)
