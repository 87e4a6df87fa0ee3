"""PartitionLog: the append-only, segmented log of one topic partition.

On-disk layout of a partition directory::

    00000000000000000000.log         batches (Kafka RecordBatch v2), offsets assigned
    00000000000000000000.index       sparse offset index (written on roll / close)
    00000000000000000000.timeindex   sparse time index   (written on roll / close)
    00000000000000001234.log         next segment, named by its base offset
    ...
    00000000000000001234.txnindex    aborted transactions whose ABORT marker is in that
                                     segment (Kafka's format, see txn.py): appended with
                                     the marker, made durable with the segment
    00000000000000001234.txnsnapshot the transactions open at offset 1234 (txn.py): at a
                                     partition's first transactional batch, at each roll
                                     and on clean shutdown (at the log end offset); only
                                     for partitions that have seen a transactional batch
    log-start-offset                 only after delete_records_before() moved the log
                                     start offset inside a segment (decimal text)
    leader-epoch-checkpoint          the leader epochs after 0 that wrote here and the
                                     offset each began at (leader_epochs.py): only on a
                                     partition a cluster node led at a higher epoch
    clean-shutdown                   written by close(), removed by open(): when present
                                     the active segment is trusted (indexes loaded, only
                                     the tail after the last index entry is re-read);
                                     otherwise it is fully CRC-validated and truncated
                                     at the first torn/corrupt batch
    <base>.log.corrupt-<UTC time>    bytes recovery cut from the log, moved aside
                                     (recovery.py, quarantine.py): never read again,
                                     not a segment; deleted with the partition

Transactions (txn.py): a partition knows its open transactions, its last
stable offset (``last_stable_offset``) and its aborted transactions
(``aborted_transactions``); ``read(..., upto=)`` stops before an offset (a
READ_COMMITTED fetch stops at the LSO). Appends without a transactional
batch pay one bit test per batch for this.

Transient files (see compaction.py / recovery.py)::

    <base>.index.tmp, <base>.timeindex.tmp, log-start-offset.tmp   atomic-rename temps
    <base>-<end>.cleaned    compaction output being written   (deleted on recovery)
    <base>-<end>.swap       complete compaction output that replaces the segments
                            with base offsets in [base, end)  (completed on recovery)

Threading model
---------------
* ``append``, ``read``, ``offset_for_timestamp``, ``max_timestamp``,
  ``truncate_to`` and ``delete_records_before`` are called from one thread
  (the broker's event loop).  They never wait for background work except for
  the brief segment-list swap (``_lock``).
* ``flush_if_due``, ``enforce_retention``, ``compact`` (and ``flush``) may run
  in one background thread concurrently with the above.  Retention and
  compaction are serialised with each other (``_maint_lock``).
* ``close`` / ``delete`` must not race with reads or appends (call them from the
  event-loop thread after the partition stops serving); they wait for a running
  compaction to abort (it checks a flag between batches).
* The segment list is copy-on-write: readers take a snapshot (``_view``) without
  locking; a segment dropped by retention or compaction keeps its file
  descriptor open until the last reference goes away.

This module holds appends, rolls, reads, truncation and retention; how an
append's batches are checked, patched and written is in log_append.py. The
transactions' bookkeeping (queries, ``.txnindex``, snapshots) is in log_txn.py
and the durability (flushes, clean shutdown, deletion) in log_durability.py,
both mixins of ``PartitionLog``. Open-time recovery lives in recovery.py and
compaction in compaction.py; the methods here that run them (``open``,
``cleanable_info``, ``needs_compaction``, ``compact``) delegate to those modules.
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable, Sequence

from protocol.records import BatchHeader

from . import compaction
from .compaction import CompactionStats
from .config import LogConfig
from .crashpoints import crash_point
from .errors import (
    LogClosedError,
    OffsetOutOfRangeError,
)
from .index import write_file_atomic
from .leader_epochs import LeaderEpochs
from .log_append import AppendResult, lay_out, write_appended
from .log_durability import DurableLog
from .log_txn import TxnLog
from .retention import expired_segments
from .recovery import LOG_START_FILE, _fsync_dir, _unlink, recover
from .segment import _REL_MAX, FileRegion, Segment
from .txn import AbortedTxn, TxnState, encode_snapshot

__all__ = ["PartitionLog", "AppendResult", "CompactionStats"]

# read_region: batches of at least this many bytes come as a FileRegion (sent with sendfile);
# below it, the read and the copy cost less than setting up the send
FILE_REGION_MIN = 256 * 1024

log = logging.getLogger(__name__)


class _View:
    """Immutable snapshot of the segment list."""

    __slots__ = ("segs", "bases", "log_start")

    def __init__(self, segs: tuple[Segment, ...], log_start: int) -> None:
        self.segs = segs
        self.bases = [s.base_offset for s in segs]
        self.log_start = log_start

    def with_segments(self, segs: tuple[Segment, ...]) -> _View:
        """The same snapshot with another segment list (same log start offset)."""
        return _View(segs, self.log_start)


@dataclass(frozen=True, slots=True)
class CompactionView:
    """What compaction reads of a log, taken at one moment under its lock (``PartitionLog.compaction_view``)."""

    segs: tuple[Segment, ...]
    active_end: int  # the active segment's size then
    epoch: int  # the log's truncation epoch: ``PartitionLog.changed_since(epoch)``
    clean_upto: int
    last_stable_offset: int
    txn_tracked: bool
    aborted: list[AbortedTxn] | None  # the aborted transactions, when asked for


class PartitionLog(TxnLog, DurableLog):
    # ------------------------------------------------------------------ construction
    def __init__(self, path: Path, config: LogConfig, clock: Callable[[], float]) -> None:
        self.path = Path(path)
        self.config = config
        self._clock = clock
        self._lock = threading.Lock()  # segment list / active segment / LEO
        self._maint_lock = threading.Lock()  # retention + compaction
        self._flush_lock = threading.Lock()  # fsync / index persistence
        self._view: _View = _View((), 0)
        self._leo = 0
        self._closed = False
        self._closing = False
        self._pending_seal: list[Segment] = []
        self._dir_dirty = False
        self._last_flush_ms = 0
        self._clean_upto = 0  # segments entirely below this offset are "clean" (compaction)
        self._epoch = 0  # bumped by truncate_to
        self._crash_hook: Callable[[str], None] | None = None  # tests only
        # transactions (txn.py): the state; snapshots taken at rolls, written by _process_pending_locked
        # as (offset, bytes, epoch); segments whose .txnindex must be rewritten whole (a failed append);
        # aborted transactions below this offset are dropped at the next marker (retention ran)
        self._txn = TxnState()
        self._pending_snaps: list[tuple[int, bytes, int]] = []
        self._txn_dirty: set[int] = set()
        self._txn_prune_below = 0
        self.recovery_truncations: list = []
        self.epochs: LeaderEpochs | None = None  # leader-epoch-checkpoint (leader_epochs.py), read by _recover

    @classmethod
    def open(cls, path: Path, config: LogConfig, *, clock: Callable[[], float] = time.time) -> PartitionLog:
        """Open (creating if needed) and recover the log in ``path``."""
        self = cls(path, config, clock)
        self.path.mkdir(parents=True, exist_ok=True)
        self._recover()
        self._last_flush_ms = self._now_ms()
        return self

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _recover(self) -> None:
        r = recover(self.path, self.config, self._now_ms)
        self._pending_seal = r.pending_seal
        self._dir_dirty = r.dir_dirty
        self._leo = r.leo
        self._view = _View(r.segments, r.log_start)
        self._clean_upto = r.log_start
        self._txn = r.txn
        self._txn_dirty = r.txn_dirty
        self.recovery_truncations = r.truncations  # what recovery cut (moved aside): read by the coordinators
        # synced as the appends are: with fsync=always only, so that a failover's first writes to thousands
        # of partitions do not each wait for a disk flush on the loop (a lost file only weakens the answers)
        self.epochs = LeaderEpochs(self.path, fsync=self.config.fsync == "always", present=r.has_leader_epochs)
        self.epochs.truncate_from_end(self._leo)  # an epoch whose writes recovery cut wrote nothing
        self.epochs.truncate_from_start(r.log_start)  # a start moved by a run that stopped before it trimmed them

    def _write_log_start(self, offset: int) -> None:
        write_file_atomic(
            self.path / LOG_START_FILE, f"{offset}\n".encode(), fsync=self.config.fsync != "never"
        )

    def _pristine(self) -> bool:
        """One empty segment at offset 0 and the log starting there: nothing was ever kept."""
        view = self._view
        return len(view.segs) == 1 and not self._pending_seal and view.segs[0].base_offset == 0 == view.log_start == view.segs[0].size

    # ------------------------------------------------------------------ properties
    @property
    def log_start_offset(self) -> int:
        return self._view.log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._view.segs)

    @property
    def closed(self) -> bool:
        return self._closed

    def segment_base_offsets(self) -> list[int]:
        return list(self._view.bases)

    def update_config(self, config: LogConfig) -> None:
        """Apply a new config (takes effect for new segments / next maintenance run)."""
        self.config = config

    # ------------------------------------------------------------------ append
    def append(
        self,
        batches: Sequence[tuple[BatchHeader, bytes | bytearray | memoryview]],
        *,
        log_append_time_ms: int | None = None,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
    ) -> AppendResult:
        """Append whole batches with one write.

        With ``assign_offsets`` (default) batch i gets base offset LEO (patched into a
        copy) and the LEO advances by ``last_offset_delta + 1``.  With
        ``assign_offsets=False`` batches keep their offsets, which must be >= LEO and
        increasing (gaps allowed).  ``leader_epoch`` (if given) is patched into every
        batch.  Under ``message.timestamp.type=LogAppendTime`` (client batches only,
        i.e. with ``assign_offsets``) maxTimestamp is set to ``log_append_time_ms``
        (default: now) and the CRC recomputed.
        """
        if not batches:
            raise ValueError("append() needs at least one batch")
        cfg = self.config
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            now_ms = self._now_ms()
            use_lat = assign_offsets and cfg.message_timestamp_type == "LogAppendTime"
            lat = (log_append_time_ms if log_append_time_ms is not None else now_ms) if use_lat else -1
            iov, infos, nbytes, next_off, first_base, max_ts, off_of_max, txn = lay_out(
                batches, self._leo, cfg.max_message_bytes, assign_offsets, leader_epoch, use_lat, lat
            )
            seg = self._view.segs[-1]
            if seg.size == 0 and not assign_offsets and first_base != seg.base_offset:
                # batches keeping their offsets, which start past the empty active segment's base
                seg = self._replace_empty_active_locked(first_base)
            elif self._should_roll(seg, nbytes, next_off - 1, now_ms):
                seg = self._roll_locked(first_base)
            if txn is not None and not self._txn.tracked:
                self._start_tracking_locked(txn[0][1])
            if leader_epoch and leader_epoch > self.epochs.latest:  # epoch 0 (a single node) is never written down
                self.epochs.assign(leader_epoch, first_base)  # this epoch's first write: where it begins
            write_appended(seg, iov, nbytes, infos, now_ms)
            self._leo = next_off
            created = self._apply_txn_locked(seg, txn) if txn is not None else False
            if cfg.fsync == "always":
                self._sync_appended_locked(seg, txn is not None, created)
        return AppendResult(first_base, next_off - 1, max_ts, off_of_max, lat)

    def _sync_appended_locked(self, seg: Segment, transactional: bool, created: bool) -> None:
        """``fsync=always``: what an append wrote is made durable before it returns (with the
        transaction index it extended, and the directory when that index is new)."""
        seg.fh.fsync()
        seg.flushed_size = seg.size
        if transactional:
            seg.sync_txn_index()
            if created:
                _fsync_dir(self.path)

    # ------------------------------------------------------------------ rolls
    def _should_roll(self, seg: Segment, nbytes: int, last_offset: int, now_ms: int) -> bool:
        if seg.size == 0:
            return False
        cfg = self.config
        if seg.size + nbytes > cfg.segment_bytes:
            return True
        if seg.first_batch_time_ms is not None and now_ms - seg.first_batch_time_ms > cfg.segment_ms:
            return True
        if seg.index_full():
            return True
        if last_offset - seg.base_offset > _REL_MAX:
            return True
        return False

    def _roll_locked(self, new_base: int) -> Segment:
        cfg = self.config
        view = self._view
        old = view.segs[-1]
        old.seal()
        crash_point("segment.roll.before")
        new = Segment.create(self.path, new_base, cfg.segment_index_bytes, cfg.index_interval_bytes)
        crash_point("segment.roll.after")
        self._pending_seal.append(old)
        if self._txn.tracked:  # the state at new_base, written with the rolled segment
            self._pending_snaps.append((new_base, encode_snapshot(new_base, self._txn.open_txns()), self._epoch))
        self._view = _View(view.segs + (new,), view.log_start)
        if cfg.fsync == "always":
            _fsync_dir(self.path)
        else:
            self._dir_dirty = True
        return new

    def _replace_empty_active_locked(self, new_base: int) -> Segment:
        cfg = self.config
        view = self._view
        old = view.segs[-1]
        new = Segment.create(self.path, new_base, cfg.segment_index_bytes, cfg.index_interval_bytes)
        old.delete_files(txn_index=True)
        segs = view.segs[:-1] + (new,)
        self._view = _View(segs, max(view.log_start, segs[0].base_offset) if len(segs) == 1 else view.log_start)
        self.epochs.truncate_from_start(self._view.log_start)
        self._dir_dirty = True
        return new

    def roll(self) -> None:
        """Force a new active segment (no-op if the active one is empty)."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            if self._view.segs[-1].size:
                self._roll_locked(self._leo)

    # ------------------------------------------------------------------ read
    def read(self, offset: int, max_bytes: int, *, min_one: bool = True, upto: int | None = None) -> bytes | memoryview:
        """Whole batches starting with the one containing ``offset`` (KIP-74).

        Returns up to ``max_bytes`` of whole batches from a single segment; if the
        first batch alone exceeds ``max_bytes`` it is returned anyway when
        ``min_one`` (else b"").  Returns b"" at the log end offset.  Raises
        OffsetOutOfRangeError if offset < log start offset or > log end offset.
        With ``upto`` only batches whose last offset is below it are returned (a
        READ_COMMITTED fetch passes the LSO; a batch straddling it is left out),
        and b"" when ``offset`` is at or past it.
        """
        found = self._locate(offset, upto, max_bytes > 0 or min_one)
        if found is None:
            return b""
        seg, pos, end = found
        return seg.read_batches(pos, max_bytes, min_one=min_one, end=end)

    def read_region(self, offset: int, max_bytes: int, *, min_one: bool = True, upto: int | None = None,
                    least: int | None = None) -> bytes | memoryview | FileRegion:
        """``read``, with the batches as a ``FileRegion`` of the segment file instead of bytes
        where there are at least ``least`` bytes of them (``FILE_REGION_MIN`` by default; a Fetch
        sends those from the file); less comes as ``read`` returns it."""
        found = self._locate(offset, upto, max_bytes > 0 or min_one)
        if found is None:
            return b""
        seg, pos, end = found
        region = seg.region(pos, max_bytes, min_one=min_one, end=end)
        if region is None:
            return seg.read_batches(pos, max_bytes, min_one=min_one, end=end)
        if region.size < (FILE_REGION_MIN if least is None else least):
            return region.read()
        return region

    def _locate(self, offset: int, upto: int | None, want: bool) -> tuple[Segment, int, int] | None:
        """(segment, position of the batch containing ``offset``, where reading must stop), or
        None where ``read`` returns nothing; raises as ``read`` does. Without ``want`` (no bytes
        asked for, none required: a Fetch whose ``max_bytes`` is spent) only the offset is checked."""
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")
        view = self._view
        leo = self._leo
        if offset < view.log_start or offset > leo:
            raise OffsetOutOfRangeError(offset, view.log_start, leo)
        if offset == leo or not want:
            return None
        if upto is not None:
            if upto >= leo:
                upto = None
            elif offset >= upto:
                return None
        segs = view.segs
        i = bisect_right(view.bases, offset) - 1
        if i < 0:
            i = 0
        n = len(segs)
        while i < n:
            seg = segs[i]
            end = seg.size
            found = seg.find_batch(offset, end)
            if found is not None:
                if upto is not None and upto < seg.next_offset:
                    stop = seg.find_batch(upto, end)
                    if stop is not None:
                        end = stop[0]
                        if end <= found[0]:
                            return None
                return seg, found[0], end
            i += 1
        return None

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with timestamp >= ts_ms, or None."""
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")
        view = self._view
        for seg in view.segs:
            if seg.max_timestamp >= ts_ms:
                r = seg.find_timestamp(ts_ms, view.log_start)
                if r is not None:
                    return r
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the (first) record with the largest timestamp, or None."""
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")
        best: Segment | None = None
        for seg in self._view.segs:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        return best.exact_max_timestamp() if best is not None else None

    # ------------------------------------------------------------------ truncation
    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (DeleteRecords); returns it.

        Whole segments below the new start are deleted; the value is persisted in
        ``log-start-offset`` so it survives restarts.
        """
        doomed: list[Segment] = []
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            view = self._view
            if offset > self._leo or offset < 0:
                raise OffsetOutOfRangeError(offset, view.log_start, self._leo)
            if offset <= view.log_start:
                return view.log_start
            if offset == self._leo and view.segs[-1].size:
                self._roll_locked(self._leo)
                view = self._view
            segs = list(view.segs)
            while len(segs) > 1 and segs[1].base_offset <= offset:
                doomed.append(segs.pop(0))
            self._view = _View(tuple(segs), offset)
            self.epochs.truncate_from_start(offset)
            self._clean_upto = max(self._clean_upto, segs[0].base_offset)
            if offset > segs[0].base_offset:
                self._write_log_start(offset)
            else:
                _unlink(self.path / LOG_START_FILE)
            tracked = self._txn.tracked
            if tracked and doomed:
                self._txn.drop_aborted_below(segs[0].base_offset)
        for seg in doomed:
            seg.delete_files(txn_index=True)
        if tracked and doomed:
            self._prune_snapshots(below=segs[0].base_offset)
        return offset

    def truncate_to(self, offset: int) -> int:
        """Remove all batches containing offsets >= ``offset``; returns the new LEO.

        Truncation happens at batch boundaries: if ``offset`` falls inside a batch
        the whole batch is removed, so the new LEO can be below ``offset``.
        """
        doomed: list[Segment] = []
        cfg = self.config
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            if offset >= self._leo:
                return self._leo
            self._epoch += 1
            view = self._view
            segs = list(view.segs)
            log_start = view.log_start
            while segs and segs[-1].base_offset >= offset:
                doomed.append(segs.pop())
            if not segs:
                start = max(offset, 0)
                for s in doomed:
                    s.delete_files(txn_index=True)
                doomed.clear()
                segs = [Segment.create(self.path, start, cfg.segment_index_bytes, cfg.index_interval_bytes)]
                log_start = start
                new_leo = start
            else:
                seg = segs[-1]
                found = seg.find_batch(offset)
                if found is not None:
                    pos, hdr = found
                    seg.truncate_to_position(pos, hdr.base_offset)
                new_leo = seg.next_offset
                if seg in self._pending_seal:
                    self._pending_seal.remove(seg)
                seg.indexes_saved = False
                _unlink(seg.index_path)
                _unlink(seg.timeindex_path)
            self._pending_seal = [s for s in self._pending_seal if s not in doomed]
            self._leo = new_leo
            self.epochs.truncate_from_end(new_leo)
            log_start = min(log_start, new_leo)
            self._view = _View(tuple(segs), log_start)
            self._clean_upto = min(self._clean_upto, new_leo)
            self._dir_dirty = True
            for seg in doomed:
                seg.close_txn_index()
            if self._txn.tracked:
                self._truncate_txn_locked(new_leo, segs, fresh=new_leo == segs[0].base_offset == log_start and segs[0].size == 0)
        for seg in doomed:
            seg.delete_files(txn_index=True)
        return new_leo

    # ------------------------------------------------------------------ retention
    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments per retention.ms / retention.bytes ("delete" policy).

        May delete the active segment (after rolling a new empty one) like Kafka.
        Returns the number of segments deleted.
        """
        cfg = self.config
        if not cfg.delete or self._closed:
            return 0
        now = self._now_ms() if now_ms is None else now_ms
        with self._maint_lock:
            if self._closing:
                return 0
            with self._flush_lock:
                self._process_pending_locked()
            view = self._view
            segs = view.segs
            active_size = segs[-1].size
            k = expired_segments(segs, active_size, cfg, now)
            if k == 0:
                return 0
            chosen = segs[:k]
            with self._lock:
                if self._closed:
                    return 0
                cur = self._view
                if cur.segs[:k] != chosen:
                    return 0
                if k == len(cur.segs):
                    if cur.segs[-1].size != active_size:
                        chosen = chosen[:-1]  # new data arrived: keep the active segment
                        k -= 1
                    else:
                        self._roll_locked(self._leo)
                        cur = self._view
                if k == 0:
                    return 0
                rest = cur.segs[k:]
                new_start = max(cur.log_start, rest[0].base_offset)
                self._view = _View(rest, new_start)
                self.epochs.truncate_from_start(new_start)
                self._clean_upto = max(self._clean_upto, rest[0].base_offset)
                if new_start == rest[0].base_offset:
                    _unlink(self.path / LOG_START_FILE)
                tracked = self._txn.tracked
                if tracked:  # applied by the appending thread at the next marker
                    self._txn_prune_below = rest[0].base_offset
            crash_point("retention.delete.before")
            for i, s in enumerate(chosen):
                if i:
                    crash_point("retention.delete.mid")
                s.delete_files(txn_index=True)
            crash_point("retention.delete.after")
            if tracked:
                self._prune_snapshots(below=rest[0].base_offset)
            log.info("retention: deleted %d segment(s) of %s; log start offset now %d", k, self.path, new_start)
            return k

    # ------------------------------------------------------------------ what compaction.py uses
    def now_ms(self) -> int:
        """The log's clock, in milliseconds."""
        return self._now_ms()

    @property
    def closing(self) -> bool:
        """True from the start of ``close`` on."""
        return self._closing

    @property
    def clean_upto(self) -> int:
        """Segments entirely below this offset are clean (compacted since they last changed)."""
        return self._clean_upto

    def changed_since(self, epoch: int) -> bool:
        """True when the log is closing or closed, or ``truncate_to`` ran since ``epoch`` was read."""
        return self._closing or self._closed or self._epoch != epoch

    def compaction_view(self, *, aborted: bool = False) -> CompactionView:
        """The segments, epoch, clean mark, LSO and transactions' state at one moment (under the lock);
        ``aborted``: with a copy of the aborted transactions."""
        with self._lock:
            segs = self._view.segs
            txn = self._txn
            return CompactionView(
                segs, segs[-1].size if segs else 0, self._epoch, self._clean_upto, self.last_stable_offset,
                txn.tracked, list(txn.aborted) if aborted else None,
            )

    @contextmanager
    def maintenance(self) -> Iterator[None]:
        """Hold the maintenance lock: one retention or compaction job at a time."""
        with self._maint_lock:
            yield

    def mark_clean(self, upto: int, epoch: int) -> None:
        """Compaction cleaned everything below ``upto``; ignored if ``truncate_to`` ran since ``epoch``."""
        with self._lock:
            if self._epoch == epoch:
                self._clean_upto = max(self._clean_upto, upto)

    def swap_segments(self, old: list[Segment], new: Segment, epoch: int, dropped_aborted: set[int]) -> bool:
        """Put ``new`` in place of the consecutive segments ``old`` and, in the same step (a reader never
        sees a marker gone and its entry still there), drop the aborted transactions whose markers are at
        the offsets ``dropped_aborted``. False, changing nothing, when the log is closed, was truncated
        since ``epoch``, or ``old`` are no longer its segments."""
        with self._lock:
            cur = self._view.segs
            try:
                i = cur.index(old[0])
            except ValueError:
                return False
            if self._closed or self._epoch != epoch or cur[i:i + len(old)] != tuple(old):
                return False
            self._view = self._view.with_segments(cur[:i] + (new,) + cur[i + len(old):])
            if dropped_aborted:
                self._txn = self._txn.without_aborted(dropped_aborted)
            return True

    def reached(self, stage: str) -> None:
        """A maintenance job reached ``stage``: the tests' crash hook (``_crash_hook``), if set."""
        if self._crash_hook is not None:
            self._crash_hook(stage)

    # ------------------------------------------------------------------ compaction (compaction.py)
    def cleanable_info(self, now_ms: int | None = None) -> tuple[int, int, bool]:
        """(dirty bytes, cleanable bytes, tombstone horizon passed) of the non-active segments."""
        return compaction.cleanable_info(self, now_ms)

    def needs_compaction(self, now_ms: int | None = None) -> bool:
        return compaction.needs_compaction(self, now_ms)

    def compact(self, now_ms: int | None = None) -> CompactionStats | None:
        """Clean the non-active segments (keep the latest record per key).

        Runs without blocking appends: reads a snapshot, writes cleaned segments
        to ``<base>-<end>.cleaned``, renames to ``.swap`` (the commit point), swaps
        the in-memory segment list under the lock, then replaces the old files.
        Returns None when there is nothing to clean. The transaction indexes of the
        replaced segments are merged into the cleaned segments' afterwards.
        """
        stats = compaction.compact(self, now_ms)
        if stats is not None and self._txn.tracked:
            self._merge_txn_orphans()
            with self._lock:
                bases = set(self._view.bases)
            self._prune_snapshots(keep=bases)
        return stats

    # ------------------------------------------------------------------ misc
    def __repr__(self) -> str:
        v = self._view
        return f"<PartitionLog {self.path} start={v.log_start} end={self._leo} segments={len(v.segs)}>"

    def iter_segments(self) -> Iterable[Segment]:
        return iter(self._view.segs)
