"""PartitionLog: the append-only, segmented log of one topic partition.

On-disk layout of a partition directory::

    00000000000000000000.log         batches (Kafka RecordBatch v2), offsets assigned
    00000000000000000000.index       sparse offset index (written on roll / close)
    00000000000000000000.timeindex   sparse time index   (written on roll / close)
    00000000000000001234.log         next segment, named by its base offset
    ...
    log-start-offset                 only after delete_records_before() moved the log
                                     start offset inside a segment (decimal text)
    clean-shutdown                   written by close(), removed by open(): when present
                                     the active segment is trusted (indexes loaded, only
                                     the tail after the last index entry is re-read);
                                     otherwise it is fully CRC-validated and truncated
                                     at the first torn/corrupt batch

Transient files (see compaction / recovery below)::

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
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable, Sequence

from protocol.records import (
    BatchHeader,
    CorruptRecordError,
    build_batch,
    build_empty_batch,
    iter_records,
    parse_control_key,
    patch_base_offset,
    set_log_append_time,
)

from .config import LogConfig
from .errors import (
    InvalidOffsetError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from .index import write_file_atomic
from .segment import LOG_SUFFIX, Segment, parse_segment_name, segment_name

__all__ = ["PartitionLog", "AppendResult", "CompactionStats"]

log = logging.getLogger(__name__)

LOG_START_FILE = "log-start-offset"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
_REL_MAX = 0x7FFFFFFF
_WRITE_CHUNK = 4 << 20
_CONTROL_COMMIT = 1


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 unless message.timestamp.type=LogAppendTime


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


class _View:
    """Immutable snapshot of the segment list."""

    __slots__ = ("segs", "bases", "log_start")

    def __init__(self, segs: tuple[Segment, ...], log_start: int) -> None:
        self.segs = segs
        self.bases = [s.base_offset for s in segs]
        self.log_start = log_start


class _Abort(Exception):
    pass


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except FileNotFoundError:
        pass


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
        d = self.path
        cfg = self.config
        names = os.listdir(d)
        # 1. temporary files of interrupted operations
        for n in names:
            if n.endswith(".cleaned") or n.endswith(".tmp"):
                log.info("recovery: removing leftover %s", d / n)
                _unlink(d / n)
        for n in sorted(x for x in names if x.endswith(".swap")):
            self._complete_swap(n)
        names = os.listdir(d)
        bases = sorted(b for n in names if n.endswith(LOG_SUFFIX) and (b := parse_segment_name(n)) is not None)
        base_set = set(bases)
        for n in names:
            if n.endswith(".index") or n.endswith(".timeindex"):
                b = parse_segment_name(n)
                if b is not None and b not in base_set:
                    _unlink(d / n)
        # 2. open segments; the last one is fully validated unless shut down cleanly
        clean = CLEAN_SHUTDOWN_FILE in names
        if clean:
            _unlink(d / CLEAN_SHUTDOWN_FILE)
            _fsync_dir(d)
        segs: list[Segment] = []
        for i, b in enumerate(bases):
            last = i == len(bases) - 1
            seg, truncated = Segment.open(
                d, b, cfg.segment_index_bytes, cfg.index_interval_bytes, full_scan=last and not clean
            )
            if segs and seg.base_offset < segs[-1].next_offset:
                log.warning("recovery: segment %s overlaps its predecessor; dropping it and later ones", seg.log_path)
                seg.fh.close()
                for later in bases[i:]:
                    self._delete_segment_files(later)
                break
            segs.append(seg)
            if not seg.indexes_saved and not last:
                seg.seal()
                self._pending_seal.append(seg)
            if truncated is not None and not last:
                log.warning("recovery: corrupt segment %s was not the last; dropping later segments", seg.log_path)
                for later in bases[i + 1:]:
                    self._delete_segment_files(later)
                break
        stored_start = self._read_log_start()
        if not segs:
            start = stored_start or 0
            segs.append(Segment.create(d, start, cfg.segment_index_bytes, cfg.index_interval_bytes))
            self._dir_dirty = True
        active = segs[-1]
        if active in self._pending_seal:
            self._pending_seal.remove(active)
        active.indexes_saved = False
        now = self._now_ms()
        if active.first_batch_time_ms is not None and not 0 <= active.first_batch_time_ms <= now:
            active.first_batch_time_ms = now
        leo = max(s.next_offset for s in segs)
        log_start = segs[0].base_offset
        if stored_start is not None:
            log_start = max(log_start, min(stored_start, leo))
        self._leo = leo
        self._view = _View(tuple(segs), log_start)
        self._clean_upto = log_start

    def _complete_swap(self, name: str) -> None:
        d = self.path
        stem = name[: -len(".swap")]
        try:
            b_s, e_s = stem.split("-")
            b, e = int(b_s), int(e_s)
        except ValueError:
            log.warning("recovery: unrecognised swap file %s; removing it", d / name)
            _unlink(d / name)
            return
        log.info("recovery: completing interrupted compaction swap %s", d / name)
        for n in os.listdir(d):
            x = parse_segment_name(n)
            if x is not None and b <= x < e and (
                n.endswith(LOG_SUFFIX) or n.endswith(".index") or n.endswith(".timeindex")
            ):
                _unlink(d / n)
        os.replace(d / name, d / (segment_name(b) + LOG_SUFFIX))
        _fsync_dir(d)

    def _delete_segment_files(self, base: int) -> None:
        for suffix in (LOG_SUFFIX, ".index", ".timeindex"):
            _unlink(self.path / (segment_name(base) + suffix))

    def _read_log_start(self) -> int | None:
        try:
            return int((self.path / LOG_START_FILE).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _write_log_start(self, offset: int) -> None:
        write_file_atomic(
            self.path / LOG_START_FILE, f"{offset}\n".encode(), fsync=self.config.fsync != "never"
        )

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
            if len(batches) == 1:
                buf = bytearray(batches[0][1])
            else:
                buf = bytearray().join(b for _h, b in batches)
            infos: list[tuple[int, int, int, int]] = []
            pos = 0
            next_off = self._leo
            first_base = -1
            max_ts = -1
            off_of_max = -1
            limit = cfg.max_message_bytes
            for hdr, data in batches:
                n = len(data)
                if n != hdr.size:
                    raise ValueError(f"batch header says {hdr.size} bytes but {n} were given")
                if assign_offsets:
                    if n > limit:
                        raise RecordBatchTooLargeError(n, limit)
                    base = next_off
                    patch_base_offset(buf, pos, base, leader_epoch)
                else:
                    base = hdr.base_offset
                    if base < next_off:
                        raise InvalidOffsetError(
                            f"batch base offset {base} is below the next expected offset {next_off}"
                        )
                    if leader_epoch is not None:
                        patch_base_offset(buf, pos, base, leader_epoch)
                if use_lat:
                    set_log_append_time(buf, pos, lat)
                    bts = lat
                else:
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
            start = seg.size
            try:
                seg.fh.pwrite_all(buf, start)
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
            if cfg.fsync == "always":
                seg.fh.fsync()
                seg.flushed_size = seg.size
        return AppendResult(first_base, next_off - 1, max_ts, off_of_max, lat)

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
        new = Segment.create(self.path, new_base, cfg.segment_index_bytes, cfg.index_interval_bytes)
        self._pending_seal.append(old)
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
        old.delete_files()
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
    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes | memoryview:
        """Whole batches starting with the one containing ``offset`` (KIP-74).

        Returns up to ``max_bytes`` of whole batches from a single segment; if the
        first batch alone exceeds ``max_bytes`` it is returned anyway when
        ``min_one`` (else b"").  Returns b"" at the log end offset.  Raises
        OffsetOutOfRangeError if offset < log start offset or > log end offset.
        """
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")
        view = self._view
        leo = self._leo
        if offset < view.log_start or offset > leo:
            raise OffsetOutOfRangeError(offset, view.log_start, leo)
        if offset == leo:
            return b""
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
                return seg.read_batches(found[0], max_bytes, min_one=min_one, end=end)
            i += 1
        return b""

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
        for seg in doomed:
            seg.delete_files()
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
                    s.delete_files()
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
            seg.delete_files()
        return new_leo

    # ------------------------------------------------------------------ durability
    def flush(self) -> None:
        """fsync everything written so far and persist indexes of rolled segments."""
        with self._flush_lock:
            self._process_pending_locked()
            seg = self._view.segs[-1]
            size = seg.size
            seg.fh.fsync()
            seg.flushed_size = max(seg.flushed_size, size)
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
            self._last_flush_ms = now

    def _process_pending_locked(self) -> None:
        """(flush lock held) fsync rolled segments and write their index files."""
        with self._lock:
            pending, self._pending_seal = self._pending_seal, []
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        sync = self.config.fsync != "never"
        for seg in pending:
            if seg.deleted:
                continue
            seg.fh.fsync()
            seg.flushed_size = seg.size
            seg.save_indexes(fsync=sync)
            if seg.deleted:  # deleted concurrently while we wrote the index files
                _unlink(seg.index_path)
                _unlink(seg.timeindex_path)
        if (pending or dir_dirty) and sync:
            _fsync_dir(self.path)

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
            self._process_pending_locked()
            active = self._view.segs[-1]
            active.fh.fsync()
            active.flushed_size = active.size
            active.save_indexes(fsync=True)
            _fsync_dir(self.path)
            for seg in self._view.segs:
                seg.fh.close()
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
            for s in chosen:
                s.delete_files()
            log.info("retention: deleted %d segment(s) of %s; log start offset now %d", k, self.path, new_start)
            return k

    # ------------------------------------------------------------------ compaction
    def cleanable_info(self, now_ms: int | None = None) -> tuple[int, int, bool]:
        """(dirty bytes, cleanable bytes, tombstone horizon passed) of the non-active segments."""
        cfg = self.config
        now = self._now_ms() if now_ms is None else now_ms
        segs = self._view.segs[:-1]
        lag_limit = now - cfg.min_compaction_lag_ms
        total = dirty = 0
        horizon = False
        for s in segs:
            if cfg.min_compaction_lag_ms > 0 and s.max_timestamp > lag_limit:
                break
            total += s.size
            if s.next_offset > self._clean_upto:
                dirty += s.size
            if s.min_delete_horizon is not None and s.min_delete_horizon <= now:
                horizon = True
        return dirty, total, horizon

    def needs_compaction(self, now_ms: int | None = None) -> bool:
        cfg = self.config
        if not cfg.compact or self._closed:
            return False
        dirty, total, horizon = self.cleanable_info(now_ms)
        if horizon:
            return True
        return dirty > 0 and total > 0 and dirty / total >= cfg.min_cleanable_dirty_ratio

    def compact(self, now_ms: int | None = None) -> CompactionStats | None:
        """Clean the non-active segments (keep the latest record per key).

        Runs without blocking appends: reads a snapshot, writes cleaned segments
        to ``<base>-<end>.cleaned``, renames to ``.swap`` (the commit point), swaps
        the in-memory segment list under the lock, then replaces the old files.
        Returns None when there is nothing to clean.
        """
        cfg = self.config
        if not cfg.compact or self._closed:
            return None
        now = self._now_ms() if now_ms is None else now_ms
        with self._maint_lock:
            if self._closing:
                return None
            with self._flush_lock:
                self._process_pending_locked()
            with self._lock:
                view = self._view
                epoch = self._epoch
                active_end = view.segs[-1].size
                clean_upto = self._clean_upto
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
                offset_map, producer_last, aborted = self._build_offset_map(segs, active_end, clean_upto)
                groups = self._group_segments(cleanable)
                for group in groups:
                    after = segs[segs.index(group[-1]) + 1]
                    self._clean_group(group, after.base_offset, offset_map, producer_last, aborted, now, epoch, stats)
            except _Abort:
                stats.aborted = True
                return stats
            except Exception:
                # a concurrent truncate_to/close can make the snapshot unreadable
                if self._closing or self._closed or self._epoch != epoch:
                    stats.aborted = True
                    return stats
                raise
            with self._lock:
                if self._epoch == epoch:
                    self._clean_upto = max(self._clean_upto, first_uncleanable)
            log.info(
                "compaction of %s: %d -> %d segments, %d -> %d bytes, %d -> %d records",
                self.path, stats.segments_in, stats.segments_out, stats.bytes_in, stats.bytes_out,
                stats.records_in, stats.records_out,
            )
            return stats

    def _check_abort(self, epoch: int) -> None:
        if self._closing or self._closed or self._epoch != epoch:
            raise _Abort()

    def _build_offset_map(
        self, segs: tuple[Segment, ...], active_end: int, clean_upto: int
    ) -> tuple[dict[bytes, int], dict[int, int], set[int]]:
        """key -> latest committed offset (dirty part), producer -> last batch offset,
        and base offsets of aborted transactional batches."""
        offset_map: dict[bytes, int] = {}
        producer_last: dict[int, int] = {}
        aborted: set[int] = set()
        open_txns: dict[int, list[tuple[int, list[tuple[bytes, int]] | None]]] = {}
        epoch = self._epoch
        last_index = len(segs) - 1
        for i, seg in enumerate(segs):
            self._check_abort(epoch)
            end = active_end if i == last_index else seg.size
            if seg.next_offset <= clean_upto and i != last_index:
                # clean section: headers only (control batches decoded individually)
                for pos, hdr in seg.iter_headers(0, end):
                    if hdr.producer_id >= 0:
                        producer_last[hdr.producer_id] = hdr.base_offset + hdr.last_offset_delta
                    if hdr.is_transactional:
                        if hdr.is_control:
                            self._end_txn(seg.fh.pread(hdr.size, pos), hdr, open_txns, offset_map, aborted)
                        else:
                            open_txns.setdefault(hdr.producer_id, []).append((hdr.base_offset, None))
                continue
            for _pos, hdr, data in seg.iter_batches(0, end):
                if self._closing:
                    raise _Abort()
                last = hdr.base_offset + hdr.last_offset_delta
                if hdr.producer_id >= 0:
                    producer_last[hdr.producer_id] = last
                if hdr.is_control:
                    if hdr.is_transactional:
                        self._end_txn(data, hdr, open_txns, offset_map, aborted)
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

    @staticmethod
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

    def _group_segments(self, segs: list[Segment]) -> list[list[Segment]]:
        cfg = self.config
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
        self,
        group: list[Segment],
        end_base: int,
        offset_map: dict[bytes, int],
        producer_last: dict[int, int],
        aborted: set[int],
        now: int,
        epoch: int,
        stats: CompactionStats,
    ) -> None:
        cfg = self.config
        d = self.path
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
                    self._check_abort(epoch)
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
            self._hook("cleaned")
            sync = cfg.fsync != "never"
            os.replace(cleaned_path, swap_path)  # commit point
            if sync:
                _fsync_dir(d)
            self._hook("swap")
            with self._lock:
                cur = self._view.segs
                try:
                    i = cur.index(group[0])
                except ValueError:
                    i = -1
                if (
                    i < 0
                    or self._closed
                    or self._epoch != epoch
                    or cur[i:i + len(group)] != tuple(group)
                ):
                    raise _Abort()
                self._view = _View(cur[:i] + (new,) + cur[i + len(group):], self._view.log_start)
                committed = True
            for seg in group:
                seg.delete_files()
            self._hook("deleted")
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

    def _hook(self, stage: str) -> None:
        if self._crash_hook is not None:
            self._crash_hook(stage)

    # ------------------------------------------------------------------ misc
    def __repr__(self) -> str:
        v = self._view
        return f"<PartitionLog {self.path} start={v.log_start} end={self._leo} segments={len(v.segs)}>"

    def iter_segments(self) -> Iterable[Segment]:
        return iter(self._view.segs)
