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

This module holds appends, reads, truncation, durability and retention.
Open-time recovery lives in recovery.py and compaction in compaction.py; the
methods here that run them (``open``, ``cleanable_info``,
``needs_compaction``, ``compact``) delegate to those modules.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable, Sequence

from protocol.records import (
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    patch_base_offset,
    set_log_append_time,
)

from . import compaction
from .compaction import CompactionStats
from .config import LogConfig
from .crashpoints import crash_point
from .errors import (
    InvalidOffsetError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from .index import write_file_atomic
from .recovery import CLEAN_SHUTDOWN_FILE, LOG_START_FILE, _fsync_dir, _txn_files, _unlink, load_snapshot, recover
from .segment import _REL_MAX, FileRegion, Segment
from .txn import AbortedTxn, TxnState, control_kind, encode_entries, encode_snapshot, replay, snapshot_name

__all__ = ["PartitionLog", "AppendResult", "CompactionStats"]

# baseOffset(8) batchLength(4) partitionLeaderEpoch(4): what an append patches, outside the CRC
_HEAD_PATCH = 16
# read_region: batches of at least this many bytes come as a FileRegion (sent with sendfile);
# below it, the read and the copy cost less than setting up the send
FILE_REGION_MIN = 256 * 1024
_TXN_BIT = TRANSACTIONAL_MASK

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 unless message.timestamp.type=LogAppendTime


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


class PartitionLog:
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
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction (at least the log start
        offset), or the log end offset when none is open (Kafka's LSO; the log end
        offset is the high watermark with one replica)."""
        firsts = self._txn.firsts
        if not firsts:
            return self._leo
        first = firsts[0]
        start = self._view.log_start
        return first if first > start else start

    def aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction overlapping
        [start_offset, upper_bound_offset) (exclusive bound), in marker order."""
        return self._txn.collect(start_offset, upper_bound_offset)

    def has_aborted_after(self, offset: int) -> bool:
        """True if an aborted transaction's marker is at or after ``offset`` (cheap: lets a
        fetch skip finding the last offset it returns when nothing could overlap)."""
        return self._txn.has_aborted_from(offset)

    def in_transaction(self, producer_id: int) -> bool:
        """Whether ``producer_id`` has an open transaction in this partition."""
        return producer_id in self._txn.open

    def open_transactions(self) -> list[tuple[int, int]]:
        """(producer id, first offset) of the open transactions, by first offset."""
        return self._txn.open_txns()

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
            # The batches are written as they are, with no copy: each batch's first 16 bytes
            # (baseOffset, batchLength, partitionLeaderEpoch: outside the CRC) go out from a
            # patched copy in ``heads``, the rest straight from the request's buffer, in one
            # pwritev. Only LogAppendTime rewrites CRC-covered bytes: those batches are copied.
            heads = memoryview(bytearray(_HEAD_PATCH * len(batches)))
            iov: list = []
            pos = 0
            next_off = self._leo
            first_base = -1
            max_ts = -1
            off_of_max = -1
            limit = cfg.max_message_bytes
            infos: list[tuple[int, int, int, int]] = []
            txn: list | None = None  # transactional batches: (header, base offset, bytes)
            txn_bit = _TXN_BIT
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
                        raise InvalidOffsetError(
                            f"batch base offset {base} is below the next expected offset {next_off}"
                        )
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
            seg = self._view.segs[-1]
            if seg.size == 0 and not assign_offsets and first_base != seg.base_offset:
                seg = self._replace_empty_active_locked(first_base)
            elif self._should_roll(seg, pos, next_off - 1, now_ms):
                seg = self._roll_locked(first_base)
            if txn is not None and not self._txn.tracked:
                self._start_tracking_locked(txn[0][1])
            start = seg.size
            try:
                seg.fh.pwritev_all(iov, start)
            except BaseException:
                try:
                    seg.fh.truncate(start)
                except OSError:
                    pass
                raise
            seg.size = start + pos
            if seg.first_batch_time_ms is None:
                seg.first_batch_time_ms = now_ms
            for p, last, bts, n in infos:
                seg.note_batch(start + p, last, bts, n)
            self._leo = next_off
            created = self._apply_txn_locked(seg, txn) if txn is not None else False
            if cfg.fsync == "always":
                seg.fh.fsync()
                seg.flushed_size = seg.size
                if txn is not None:
                    seg.sync_txn_index()
                    if created:
                        _fsync_dir(self.path)
        return AppendResult(first_base, next_off - 1, max_ts, off_of_max, lat)

    # ------------------------------------------------------------------ transactions
    def _start_tracking_locked(self, offset: int) -> None:
        """The partition's first transactional batch goes at ``offset``: from now on its
        transaction files exist, starting with a snapshot at ``offset`` (nothing open before)."""
        self._txn.tracked = True
        sync = self.config.fsync != "never"
        try:
            write_file_atomic(self.path / snapshot_name(offset), encode_snapshot(offset, self._txn.open_txns()), fsync=sync)
            if sync:
                _fsync_dir(self.path)
        except OSError as exc:
            log.error("could not write a transaction snapshot in %s: %s", self.path, exc)

    def _apply_txn_locked(self, seg: Segment, txn: list) -> bool:
        """Apply the transactional batches just written to ``seg``; True if its .txnindex was created."""
        st = self._txn
        prune = self._txn_prune_below
        if prune and st.lasts and st.lasts[0] < prune:
            st.drop_aborted_below(prune)
        created = False
        for hdr, base, view in txn:
            pid = hdr.producer_id
            if pid < 0:
                continue
            if hdr.attributes & CONTROL_MASK:
                kind = control_kind(view)
                if kind is None:
                    continue
                entry = st.on_marker(pid, base, kind)
                if entry is not None and seg.base_offset not in self._txn_dirty:
                    try:
                        created = seg.append_txn_entry(encode_entries((entry,))) or created
                    except OSError as exc:
                        log.error("could not append to %s (%s); it will be rewritten", seg.txnindex_path, exc)
                        self._txn_dirty.add(seg.base_offset)
            else:
                st.on_data(pid, base)
        if created:
            self._dir_dirty = True
        return created

    def _rewrite_txn_index_locked(self, seg: Segment, entries: list) -> None:
        """Replace ``seg``'s .txnindex with ``entries`` (none: remove it)."""
        seg.close_txn_index()
        try:
            if entries:
                write_file_atomic(seg.txnindex_path, encode_entries(entries), fsync=self.config.fsync != "never")
            else:
                _unlink(seg.txnindex_path)
        except OSError as exc:
            log.error("could not rewrite %s: %s", seg.txnindex_path, exc)
            self._txn_dirty.add(seg.base_offset)
            return
        self._txn_dirty.discard(seg.base_offset)
        self._dir_dirty = True

    def _repair_txn_indexes(self) -> None:
        """Rewrite the .txnindex files an append failed to extend."""
        with self._lock:
            segs = self._view.segs
            bases = [s.base_offset for s in segs]
            for b in sorted(self._txn_dirty):
                i = bisect_right(bases, b) - 1
                if i < 0 or bases[i] != b:
                    self._txn_dirty.discard(b)
                    continue
                nxt = bases[i + 1] if i + 1 < len(bases) else None
                self._rewrite_txn_index_locked(segs[i], self._txn.entries_between(b, nxt))

    def _write_snapshot(self, offset: int, data: bytes, epoch: int, *, fsync: bool) -> None:
        if epoch != self._epoch:
            return
        path = self.path / snapshot_name(offset)
        try:
            write_file_atomic(path, data, fsync=fsync)
        except OSError as exc:
            log.warning("could not write %s: %s", path, exc)
            return
        if epoch != self._epoch:  # truncated meanwhile: the snapshot may be past the new end
            _unlink(path)

    def _prune_snapshots(self, *, below: int | None = None, above: int | None = None, keep: set[int] | None = None) -> None:
        """Remove the snapshots below ``below`` or not in ``keep`` (but never the newest: it says
        that the partition has seen transactions), and those above ``above``."""
        try:
            snaps = sorted(_txn_files(self.path)[1])
        except OSError:
            return
        newest = snaps[-1] if snaps else None
        for off in snaps:
            old = (below is not None and off < below) or (keep is not None and off not in keep)
            if (old and off != newest) or (above is not None and off > above):
                _unlink(self.path / snapshot_name(off))

    def _merge_txn_orphans(self) -> None:
        """Fold the .txnindex files of segments compaction replaced into the files of the
        segments that now cover their offsets (rewritten from memory), then remove them."""
        with self._maint_lock:
            if self._closing or self._closed:
                return
            try:
                indexes = _txn_files(self.path)[0]
            except OSError:
                return
            with self._lock:
                segs = self._view.segs
                bases = [s.base_offset for s in segs]
                epoch = self._epoch
                base_set = set(bases)
                orphans = [name for b, name in indexes.items() if b not in base_set]
                floors = {bisect_right(bases, b) - 1 for b in indexes if b not in base_set}
                writes = [
                    (segs[i], self._txn.entries_between(bases[i], bases[i + 1] if i + 1 < len(bases) else None))
                    for i in sorted(floors)
                    if 0 <= i < len(segs) - 1  # never the active segment's file: appends own it
                ]
            if not orphans:
                return
            sync = self.config.fsync != "never"
            # under the lock: a truncation meanwhile could make one of these segments the active one
            with self._lock:
                if self._epoch != epoch:
                    return  # truncated meanwhile: the next pass, or recovery, sorts it out
                for seg, entries in writes:
                    if not seg.deleted and seg is not self._view.segs[-1]:
                        self._rewrite_txn_index_locked(seg, entries)
            if sync:
                _fsync_dir(self.path)
            for name in orphans:
                _unlink(self.path / name)
            if sync:
                _fsync_dir(self.path)

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

    def _truncate_txn_locked(self, new_leo: int, segs: list[Segment], *, fresh: bool) -> None:
        """The transaction state after a truncation to ``new_leo``: rebuilt from the newest
        snapshot at or below it (the whole log without one), as recovery does."""
        sync = self.config.fsync != "never"
        self._pending_snaps = [p for p in self._pending_snaps if p[0] <= new_leo]
        old = self._txn
        last = segs[-1]
        if fresh:  # nothing left: nothing open, nothing aborted
            self._prune_snapshots(above=new_leo - 1)
            st = TxnState(tracked=True)
        else:
            self._prune_snapshots(above=new_leo)
            try:
                snap = load_snapshot(self.path, _txn_files(self.path)[1], segs[0].base_offset, new_leo)
            except OSError:
                snap = None
            start = snap[0] if snap is not None else segs[0].base_offset
            st = TxnState(snap[1] if snap is not None else (), tracked=True)
            for entry in old.entries_between(0, start):
                st.add_aborted(entry)
            replay(st, segs, start)
        self._txn = st
        if old.entries_between(last.base_offset) != st.entries_between(last.base_offset) or last.base_offset in self._txn_dirty:
            self._rewrite_txn_index_locked(last, st.entries_between(last.base_offset))
        self._write_snapshot(new_leo, encode_snapshot(new_leo, st.open_txns()), self._epoch, fsync=sync)

    # ------------------------------------------------------------------ durability
    def flush(self) -> None:
        """fsync everything written so far and persist indexes of rolled segments."""
        with self._flush_lock:
            self._process_pending_locked()
            seg = self._view.segs[-1]
            size = seg.size
            seg.fh.fsync()
            seg.flushed_size = max(seg.flushed_size, size)
            seg.sync_txn_index()
            self._last_flush_ms = self._now_ms()

    def flush_if_due(self, now_ms: int | None = None) -> None:
        """Background hook: persist rolled segments; fsync the active one per policy."""
        if self._closed:
            return
        now = self._now_ms() if now_ms is None else now_ms
        with self._flush_lock:
            if self._closed:
                return
            self._process_pending_locked()
            if self.config.fsync != "interval":
                return
            if now - self._last_flush_ms < self.config.fsync_interval_ms:
                return
            seg = self._view.segs[-1]
            size = seg.size
            if size > seg.flushed_size:
                seg.fh.fsync()
                seg.flushed_size = size
            seg.sync_txn_index()
            self._last_flush_ms = now

    def _process_pending_locked(self) -> None:
        """(flush lock held) fsync rolled segments and write their index files."""
        with self._lock:
            pending, self._pending_seal = self._pending_seal, []
            snaps, self._pending_snaps = self._pending_snaps, []
            if not pending and self._pristine():
                # a new, empty log: losing its empty segment file in a crash loses nothing (recovery
                # makes another), so its directory is synced once it holds data, not before; this
                # spares one fsync per partition when thousands are created at once
                dir_dirty = False
            else:
                dir_dirty, self._dir_dirty = self._dir_dirty, False
        sync = self.config.fsync != "never"
        done = 0
        try:
            for seg in pending:
                if not seg.deleted:
                    seg.fh.fsync()
                    seg.flushed_size = seg.size
                    seg.sync_txn_index()
                    seg.save_indexes(fsync=sync)
                    if seg.deleted:  # deleted concurrently while we wrote the index files
                        _unlink(seg.index_path)
                        _unlink(seg.timeindex_path)
                done += 1
            if (pending or dir_dirty) and sync:
                _fsync_dir(self.path)
        except OSError:
            # a full disk (the index files): the segments not done yet, and the snapshots waiting for
            # them, stay pending for the next flush rather than never being fsynced or indexed
            with self._lock:
                rolled = {id(s) for s in self._view.segs[:-1]}  # not truncated away or made active meanwhile
                self._pending_seal[:0] = [s for s in pending[done:] if not s.deleted and id(s) in rolled]
                self._pending_snaps[:0] = snaps
                self._dir_dirty = self._dir_dirty or dir_dirty or bool(pending)
            raise
        if any(seg.txn_fh is not None for seg in pending):
            # rolled: no more appends to their indexes. Closed under the lock appends hold, and
            # only if still not active (a truncation can make a rolled segment active again)
            with self._lock:
                active = self._view.segs[-1]
                for seg in pending:
                    if seg is not active:
                        seg.close_txn_index()
        if self._txn_dirty:
            self._repair_txn_indexes()
        # the rolled segments' transaction indexes are durable: now the snapshots taken at the rolls
        # (not while an index misses entries: recovery would trust it)
        if snaps and not self._txn_dirty:
            for off, data, epoch in snaps:
                self._write_snapshot(off, data, epoch, fsync=sync)

    def close(self) -> None:
        """Clean shutdown: fsync, persist all indexes, close file descriptors."""
        if self._closed:
            return
        self._closing = True
        with self._maint_lock, self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
            if self._pristine():
                # never written (or truncated back to nothing): there is nothing to make durable, and
                # opening it again is as quick without the clean-shutdown marker (an empty file to scan).
                # Skipping the fsyncs keeps closing thousands of idle partitions quick.
                self._view.segs[0].fh.close()
                return
            self._process_pending_locked()
            active = self._view.segs[-1]
            active.fh.fsync()
            active.flushed_size = active.size
            active.save_indexes(fsync=True)
            active.sync_txn_index()
            _fsync_dir(self.path)
            if self._txn.tracked and not self._txn_dirty:  # the open transactions at the log end
                self._write_snapshot(self._leo, encode_snapshot(self._leo, self._txn.open_txns()), self._epoch, fsync=True)
            for seg in self._view.segs:
                seg.fh.close()
                seg.close_txn_index()
            write_file_atomic(self.path / CLEAN_SHUTDOWN_FILE, b"", fsync=True)
            _fsync_dir(self.path)

    def delete(self) -> None:
        """Close without flushing and remove the whole partition directory."""
        self._closing = True
        with self._maint_lock, self._flush_lock:
            with self._lock:
                self._closed = True
                segs = self._view.segs
            for seg in segs:
                seg.deleted = True
                seg.fh.close()
                seg.close_txn_index()
            shutil.rmtree(self.path, ignore_errors=True)

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
            k = 0
            if cfg.retention_ms >= 0:
                while k < len(segs):
                    s = segs[k]
                    is_active = k == len(segs) - 1
                    if is_active and active_size == 0:
                        break
                    ts = s.max_timestamp
                    if ts < 0:
                        try:
                            ts = int(os.stat(s.log_path).st_mtime * 1000)
                        except OSError:
                            break
                    if now - ts > cfg.retention_ms:
                        k += 1
                    else:
                        break
            if cfg.retention_bytes >= 0:
                total = sum(s.size for s in segs[:-1]) + active_size
                diff = total - cfg.retention_bytes - sum(s.size for s in segs[:k])
                while k < len(segs):
                    s = segs[k]
                    is_active = k == len(segs) - 1
                    size = active_size if is_active else s.size
                    if (is_active and size == 0) or diff - size < 0:
                        break
                    diff -= size
                    k += 1
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

    def process_pending(self) -> None:
        """fsync the rolled segments and write their index files now (under the flush lock)."""
        with self._flush_lock:
            self._process_pending_locked()

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
