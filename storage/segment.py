"""One log segment: ``<base>.log`` plus its in-memory sparse indexes.

File naming (Kafka style, base offset zero-padded to 20 digits)::

    00000000000000000000.log        record batches, back to back
    00000000000000000000.index      sparse offset index (see storage.index)
    00000000000000000000.timeindex  sparse time index
    00000000000000000000.txnindex   aborted transactions whose ABORT marker is in this
                                    segment (storage.txn; only once there is one)

The segment's file descriptor is wrapped in a :class:`FileHandle` that closes
itself when garbage collected.  Segments dropped by retention or replaced by
compaction are *not* closed explicitly, so a reader that grabbed the segment
before the swap keeps a valid descriptor (unlinked files stay readable).

The ``.txnindex`` file of a segment replaced by compaction is left in place
(``delete_files`` keeps it unless asked): its entries belong to the cleaned
segment that now covers its offsets, and the log merges them into that
segment's file (storage/log.py, and storage/recovery.py after a crash).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from bisect import bisect_right
from pathlib import Path
from collections.abc import Iterator

from protocol.records import HEADER_SIZE, BatchHeader, iter_records, read_header, scan_valid_prefix
from protocol.regions import Region

from .crashpoints import crash_point
from .index import OffsetIndex, TimeIndex
from .txn import ENTRY_SIZE, TXNINDEX_SUFFIX

__all__ = ["FileHandle", "FileRegion", "Segment", "segment_name", "parse_segment_name", "LOG_SUFFIX"]

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"

_LEN = struct.Struct(">i")
_BASE_LEN = struct.Struct(">qi")
_LOD = struct.Struct(">i")  # lastOffsetDelta at +23
_MAXTS = struct.Struct(">q")  # maxTimestamp at +35
_LOG_OVERHEAD = 12
_MIN_BATCH_LENGTH = HEADER_SIZE - _LOG_OVERHEAD
_SCAN_WINDOW = 8 << 20
_HEADER_CHUNK = 64 << 10
_REL_MAX = 0x7FFFFFFF
try:
    _IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024)
except (AttributeError, ValueError, OSError):  # pragma: no cover
    _IOV_MAX = 16
if _IOV_MAX <= 0:  # pragma: no cover - sysconf says "no limit"
    _IOV_MAX = 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def parse_segment_name(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    if len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


def _fdatasync(fd: int) -> None:
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS
        os.fsync(fd)


def _pread_all(fd: int, n: int, pos: int) -> bytes:
    data = os.pread(fd, n, pos)
    if len(data) < n:
        # short reads only happen at EOF for regular files; loop just in case
        parts = [data]
        got = len(data)
        while got < n:
            more = os.pread(fd, n - got, pos + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        data = b"".join(parts)
    return data


class FileRegion(Region):
    """Whole batches of a segment file, not read into memory: ``size`` bytes at ``pos``.

    A Fetch answer carries them in place of the bytes (a ``protocol.regions.Region``,
    which the encoders know), and the connection sends them from the file
    (broker/server.py): with ``sendfile``, or read a piece at a time as the client
    takes them. ``last_offset`` is that of the last batch. ``pos`` and ``size``
    advance as the bytes are sent.
    """

    __slots__ = ("fh", "fd", "pinned", "pos", "size", "last_offset")

    def __init__(self, fh: FileHandle, pos: int, size: int, last_offset: int) -> None:
        self.fh = fh
        self.fd = fh.fd
        self.pinned = False
        self.pos = pos
        self.size = size
        self.last_offset = last_offset

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, pos={self.pos}, size={self.size})"

    def pin(self) -> None:
        """Keep the file's descriptor open until ``release``, even if its log is closed
        meanwhile (a topic deleted, a segment removed by retention or compaction while the
        answer waits for the client), as Kafka's segment files stay until
        ``file.delete.delay.ms``. No descriptor of its own: the file's is shared
        (``FileHandle.use``). Call it before the event loop runs anything else."""
        if not self.pinned:
            self.fh.use()
            self.pinned = True

    def release(self) -> None:
        if self.pinned:
            self.pinned = False
            self.fh.unuse()

    def read(self, n: int | None = None) -> bytes:
        """The bytes not sent yet, or the next ``n`` of them (not consumed: see ``pos``)."""
        return _pread_all(self.fd, self.size if n is None or n > self.size else n, self.pos)


class FileHandle:
    """An OS file descriptor closed on ``close()`` or garbage collection; while FileRegions
    of the file wait to be sent (``use``), ``close`` marks it closed and the descriptor
    itself is closed by the last ``unuse``."""

    __slots__ = ("fd", "closed", "users", "_lock", "__weakref__")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closed = False
        self.users = 0
        self._lock = threading.Lock()

    def use(self) -> None:
        with self._lock:
            self.users += 1

    def unuse(self) -> None:
        with self._lock:
            self.users -= 1
            if self.users == 0 and self.closed:
                os.close(self.fd)

    def pread(self, n: int, pos: int) -> bytes:
        return _pread_all(self.fd, n, pos)

    def pwrite_all(self, buf, pos: int) -> None:
        view = memoryview(buf)
        while view:
            n = os.pwrite(self.fd, view, pos)
            view = view[n:]
            pos += n

    def pwritev_all(self, buffers: list, pos: int) -> None:
        """Write ``buffers`` (bytes-like, one byte per item) back to back at ``pos``, with no copy:
        pwritev(2), at most ``IOV_MAX`` buffers a call, short writes resumed."""
        if len(buffers) == 1:
            self.pwrite_all(buffers[0], pos)
            return
        iov = [b if type(b) is memoryview else memoryview(b) for b in buffers]
        i = 0
        n = len(iov)
        while i < n:
            written = os.pwritev(self.fd, iov[i : i + _IOV_MAX], pos)
            if written <= 0 and any(len(b) for b in iov[i : i + _IOV_MAX]):
                raise OSError(f"pwritev wrote {written} bytes")
            pos += written
            while i < n and written >= len(iov[i]):
                written -= len(iov[i])
                i += 1
            if written:
                iov[i] = iov[i][written:]

    def fsync(self) -> None:
        with self._lock:
            if not self.closed:
                _fdatasync(self.fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                if not self.users:
                    os.close(self.fd)

    def __del__(self) -> None:  # no region holds it (a pinned one holds a reference)
        if not self.closed:
            self.closed = True
            try:
                os.close(self.fd)
            except OSError:
                pass


class Segment:
    """A segment file plus in-memory metadata.  Not thread-safe by itself; see PartitionLog."""

    __slots__ = (
        "base_offset",
        "dir",
        "fh",
        "size",
        "index",
        "time_index",
        "max_timestamp",
        "offset_of_max_timestamp",
        "next_offset",
        "first_batch_time_ms",
        "bytes_since_index",
        "index_interval",
        "flushed_size",
        "indexes_saved",
        "min_delete_horizon",
        "deleted",
        "txn_fh",
        "txn_size",
        "txn_flushed",
    )

    def __init__(self, directory: Path, base_offset: int, fh: FileHandle, index_bytes: int, index_interval: int) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.fh = fh
        self.size = 0
        self.index = OffsetIndex.for_index_bytes(index_bytes)
        self.time_index = TimeIndex.for_index_bytes(index_bytes)
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.next_offset = base_offset
        self.first_batch_time_ms: int | None = None
        self.bytes_since_index = 0
        self.index_interval = index_interval
        self.flushed_size = 0
        self.indexes_saved = False
        self.min_delete_horizon: int | None = None
        self.deleted = False
        self.txn_fh: FileHandle | None = None  # the .txnindex, opened at its first append
        self.txn_size = 0
        self.txn_flushed = 0

    def __repr__(self) -> str:
        return f"<Segment base={self.base_offset} size={self.size} next={self.next_offset}>"

    # ------------------------------------------------------------------ paths
    @property
    def name(self) -> str:
        return segment_name(self.base_offset)

    @property
    def log_path(self) -> Path:
        return self.dir / (self.name + LOG_SUFFIX)

    @property
    def index_path(self) -> Path:
        return self.dir / (self.name + INDEX_SUFFIX)

    @property
    def timeindex_path(self) -> Path:
        return self.dir / (self.name + TIMEINDEX_SUFFIX)

    @property
    def txnindex_path(self) -> Path:
        return self.dir / (self.name + TXNINDEX_SUFFIX)

    # ------------------------------------------------------------------ creation
    @classmethod
    def create(cls, directory: Path, base_offset: int, index_bytes: int, index_interval: int, *, path: Path | None = None) -> Segment:
        """Create a new empty segment file (truncating any stale file of that name).

        With ``path`` the data goes to that (temporary) file instead of ``<base>.log``
        and existing index files of ``<base>`` are left alone.
        """
        p = path or directory / (segment_name(base_offset) + LOG_SUFFIX)
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        seg = cls(directory, base_offset, FileHandle(fd), index_bytes, index_interval)
        if path is not None:
            return seg
        # stale index files of a previous segment with the same base must not survive
        for q in (seg.index_path, seg.timeindex_path, seg.txnindex_path):
            try:
                q.unlink()
            except FileNotFoundError:
                pass
        return seg

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        index_bytes: int,
        index_interval: int,
        *,
        full_scan: bool,
    ) -> tuple[Segment, int | None]:
        """Open an existing segment.

        With ``full_scan`` (active segment, or missing/invalid index files) every
        batch is CRC-checked and the indexes are rebuilt.  Returns
        ``(segment, valid_length)``; ``valid_length`` is None when the file was
        entirely valid, else the length of its valid prefix: the segment's
        metadata and indexes then describe that prefix, but the file is left as
        it is (``size`` is still its length) for the caller to move the rest
        aside and truncate (storage/recovery.py).
        """
        p = directory / (segment_name(base_offset) + LOG_SUFFIX)
        fd = os.open(p, os.O_RDWR | os.O_CLOEXEC)
        seg = cls(directory, base_offset, FileHandle(fd), index_bytes, index_interval)
        file_size = os.fstat(fd).st_size
        seg.size = file_size
        seg.flushed_size = file_size
        if not full_scan and seg._load_indexes(index_bytes):
            seg.indexes_saved = True
            return seg, None
        valid = seg.rebuild(verify_crc=True)
        if valid < file_size:
            return seg, valid
        return seg, None

    def _load_indexes(self, index_bytes: int) -> bool:
        idx = OffsetIndex.load(self.index_path, index_bytes // OffsetIndex.ENTRY_SIZE, max(self.size, 1))
        tidx = TimeIndex.load(self.timeindex_path, index_bytes // TimeIndex.ENTRY_SIZE)
        if idx is None or tidx is None:
            return False
        if self.size == 0:
            if len(idx) or len(tidx):
                return False
            self.index, self.time_index = idx, tidx
            return True
        self.index, self.time_index = idx, tidx
        # walk the tail from the last index entry to find next_offset / max timestamp
        last = idx.last()
        pos = last[1] if last else 0
        prev_next = self.base_offset
        if tidx.last():
            ts, rel = tidx.last()
            self.max_timestamp = ts
            self.offset_of_max_timestamp = self.base_offset + rel
        try:
            end = pos
            for p, hdr in self.iter_headers(pos):
                if hdr.base_offset < prev_next or hdr.last_offset_delta < 0:
                    return False
                prev_next = hdr.base_offset + hdr.last_offset_delta + 1
                if hdr.max_timestamp > self.max_timestamp:
                    self.max_timestamp = hdr.max_timestamp
                    self.offset_of_max_timestamp = prev_next - 1
                end = p + hdr.size
            if end != self.size:
                return False
        except (ValueError, OSError):
            return False
        if last and self.base_offset + last[0] >= prev_next:
            return False
        if tidx.last() and self.base_offset + tidx.last()[1] >= prev_next:
            return False
        self.next_offset = prev_next
        first = self.read_header_at(0)
        # the first batch is read anyway: a damaged header there (its length, its magic) makes
        # the segment be scanned whole, as after an unclean shutdown
        if first is None or first.length < _MIN_BATCH_LENGTH or first.size > self.size or first.magic != 2:
            return False
        self.first_batch_time_ms = first.max_timestamp
        self.bytes_since_index = 0
        return True

    def rebuild(self, *, verify_crc: bool) -> int:
        """Rescan the whole file, rebuilding indexes and metadata; returns the valid length."""
        self.index.clear()
        self.time_index.clear()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.next_offset = self.base_offset
        self.first_batch_time_ms = None
        self.bytes_since_index = 0
        file_size = self.size
        pos = 0
        window = _SCAN_WINDOW
        while pos < file_size:
            n = min(window, file_size - pos)
            buf = self.fh.pread(n, pos)
            entries, vlen = scan_valid_prefix(buf, verify_crc=verify_crc)
            for p, hdr in entries:
                if hdr.base_offset < self.next_offset or hdr.last_offset_delta < 0 or (
                    hdr.base_offset + hdr.last_offset_delta - self.base_offset > _REL_MAX
                ):
                    log.warning("%s: batch at %d has out-of-order offset %d", self.log_path, pos + p, hdr.base_offset)
                    return pos + p
                self.note_batch(pos + p, hdr.base_offset + hdr.last_offset_delta, hdr.max_timestamp, hdr.size)
            pos += vlen
            if pos >= file_size:
                break
            rest = len(buf) - vlen
            if pos - vlen + n >= file_size:
                return pos  # stopped inside the final window: torn or corrupt tail
            # stopped before the window end: corrupt, or a batch straddling the window
            if rest >= _LOG_OVERHEAD:
                (length,) = _LEN.unpack_from(buf, vlen + 8)
            elif pos + _LOG_OVERHEAD > file_size:
                return pos
            else:
                length = _LEN.unpack(self.fh.pread(_LOG_OVERHEAD, pos)[8:12])[0]
            size = length + _LOG_OVERHEAD
            if length < _MIN_BATCH_LENGTH or pos + size > file_size or size <= rest:
                return pos  # corrupt batch fully inside the window, or torn
            window = max(_SCAN_WINDOW, size)
        return pos

    # ------------------------------------------------------------------ metadata
    def note_batch(self, pos: int, last_offset: int, max_timestamp: int, size: int) -> None:
        """Account for a batch written at ``pos`` (index maintenance, Kafka's rules)."""
        if self.first_batch_time_ms is None:
            self.first_batch_time_ms = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_index > self.index_interval:
            base = self.base_offset
            crash_point("index.append")
            self.index.append(last_offset - base, pos)
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - base)
            self.bytes_since_index = 0
        self.bytes_since_index += size
        self.next_offset = last_offset + 1

    def seal(self) -> None:
        """Called when the segment stops being active: final time index entry (as Kafka)."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)

    def index_full(self) -> bool:
        return self.index.full or self.time_index.full

    def save_indexes(self, *, fsync: bool) -> None:
        crash_point("index.save.before")
        self.index.save(self.index_path, fsync=fsync)
        crash_point("index.save.mid")
        self.time_index.save(self.timeindex_path, fsync=fsync)
        crash_point("index.save.after")
        self.indexes_saved = True

    def delete_files(self, *, txn_index: bool = False) -> None:
        """Remove the segment's files; its ``.txnindex`` only with ``txn_index`` (see the module doc)."""
        self.deleted = True
        paths = [self.log_path, self.index_path, self.timeindex_path]
        if txn_index:
            self.close_txn_index()
            paths.append(self.txnindex_path)
        for p in paths:
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    # ------------------------------------------------------------------ transaction index
    def append_txn_entry(self, entry: bytes) -> bool:
        """Append one ``.txnindex`` entry (opening or creating the file); True if the file is new."""
        created = False
        fh = self.txn_fh
        if fh is None or fh.closed:
            fd = os.open(self.txnindex_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            fh = FileHandle(fd)
            size = os.fstat(fd).st_size
            created = size == 0
            self.txn_size = size - size % ENTRY_SIZE
            self.txn_flushed = self.txn_size
            self.txn_fh = fh
        fh.pwrite_all(entry, self.txn_size)
        self.txn_size += len(entry)
        return created

    def sync_txn_index(self) -> None:
        """fsync the ``.txnindex`` if entries were appended since the last time."""
        fh = self.txn_fh
        if fh is not None and self.txn_flushed < self.txn_size:
            size = self.txn_size
            fh.fsync()
            self.txn_flushed = size

    def close_txn_index(self) -> None:
        fh, self.txn_fh = self.txn_fh, None
        if fh is not None:
            fh.close()

    # ------------------------------------------------------------------ reading
    def read_header_at(self, pos: int) -> BatchHeader | None:
        if pos + HEADER_SIZE > self.size:
            return None
        return read_header(self.fh.pread(HEADER_SIZE, pos))

    def iter_headers(
        self, pos: int = 0, end: int | None = None, chunk: int = _HEADER_CHUNK
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield (position, header) of batches from ``pos`` (a batch boundary) to ``end``."""
        end = self.size if end is None else end
        while pos < end:
            n = min(chunk, end - pos)
            buf = self.fh.pread(n, pos)
            p = 0
            while p + HEADER_SIZE <= len(buf):
                hdr = read_header(buf, p)
                if hdr.length < _MIN_BATCH_LENGTH:
                    raise ValueError(f"{self.log_path}: bad batch length at {pos + p}")
                yield pos + p, hdr
                p += hdr.size
            if p == 0 and len(buf) < HEADER_SIZE:
                raise ValueError(f"{self.log_path}: truncated batch header at {pos}")
            pos += p

    def iter_batches(self, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """Yield (position, header, batch bytes) from ``pos`` to ``end``, reading big chunks."""
        end = self.size if end is None else end
        want = _SCAN_WINDOW
        while pos < end:
            n = min(want, end - pos)
            buf = memoryview(self.fh.pread(n, pos))
            if len(buf) < HEADER_SIZE:
                raise ValueError(f"{self.log_path}: truncated batch at {pos}")
            p = 0
            while p + HEADER_SIZE <= len(buf):
                hdr = read_header(buf, p)
                if hdr.length < _MIN_BATCH_LENGTH:
                    raise ValueError(f"{self.log_path}: bad batch length at {pos + p}")
                sz = hdr.size
                if p + sz > len(buf):
                    break
                yield pos + p, hdr, buf[p:p + sz]
                p += sz
            if p == 0:
                sz = read_header(buf).size
                if pos + sz > end:
                    raise ValueError(f"{self.log_path}: truncated batch at {pos}")
                want = sz
            else:
                want = _SCAN_WINDOW
            pos += p

    def find_batch(self, offset: int, end: int | None = None) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset >= ``offset``."""
        end = self.size if end is None else end
        pos = self.index.lookup(offset - self.base_offset) if offset > self.base_offset else 0
        if pos >= end:
            pos = 0
        # the index bounds the scan to about index_interval bytes: read just that much
        chunk = min(_HEADER_CHUNK, max(self.index_interval, 1024) + HEADER_SIZE)
        for p, hdr in self.iter_headers(pos, end, chunk):
            if hdr.base_offset + hdr.last_offset_delta >= offset:
                return p, hdr
        return None

    def read_batches(self, pos: int, max_bytes: int, *, min_one: bool, end: int | None = None) -> bytes | memoryview:
        """Whole batches from ``pos``: as many as fit in ``max_bytes``; at least one if ``min_one``."""
        end = self.size if end is None else end
        avail = end - pos
        if avail <= 0:
            return b""
        n = min(max(max_bytes, 0), avail)
        data = self.fh.pread(n, pos) if n > 0 else b""
        p = 0
        ln = len(data)
        unpack = _LEN.unpack_from
        while p + _LOG_OVERHEAD <= ln:
            sz = unpack(data, p + 8)[0] + _LOG_OVERHEAD
            if p + sz > ln:
                break
            p += sz
        if p == 0:
            if not min_one:
                return b""
            head = data if ln >= _LOG_OVERHEAD else self.fh.pread(_LOG_OVERHEAD, pos)
            sz = unpack(head, 8)[0] + _LOG_OVERHEAD
            return self.fh.pread(min(sz, avail), pos)
        if p == ln:
            return data
        return memoryview(data)[:p]

    def region(self, pos: int, max_bytes: int, *, min_one: bool, end: int | None = None) -> FileRegion | None:
        """What ``read_batches`` would return, as a ``FileRegion``: found from the batch headers,
        without reading the batches (the offset index says where to start walking them).
        None where there is nothing to return or the headers are odd (``read_batches`` then
        decides)."""
        end = self.size if end is None else end
        if end - pos < HEADER_SIZE:
            return None
        limit = min(pos + max(max_bytes, 0), end)
        # index entries are batch starts: the batch at the last but one entry at or below the
        # limit ends at or before the last one, so the walk from it finds at least that batch
        positions = self.index.pos
        i = bisect_right(positions, limit) - 2
        start = positions[i] if i >= 0 and positions[i] > pos else pos
        stop = last = None
        # reads of about an index interval: a few headers of small batches, or one of a large one
        chunk = min(_HEADER_CHUNK, max(self.index_interval, 1024) + HEADER_SIZE, limit - start + HEADER_SIZE)
        try:
            for p, hdr in self.iter_headers(start, end, chunk):
                if p + hdr.size > limit:
                    if p == pos and min_one:  # the first batch alone is over the limit: it goes whole
                        return FileRegion(self.fh, pos, min(hdr.size, end - pos), hdr.base_offset + hdr.last_offset_delta)
                    break
                stop, last = p + hdr.size, hdr
        except ValueError:  # a damaged header: read_batches returns what it makes of it
            return None
        if last is None:
            return None
        return FileRegion(self.fh, pos, stop - pos, last.base_offset + last.last_offset_delta)

    def find_timestamp(self, ts: int, start_offset: int) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) with timestamp >= ts and offset >= start_offset."""
        if self.max_timestamp < ts or self.size == 0:
            return None
        entry = self.time_index.lookup_before(ts)
        pos = 0
        if entry is not None:
            pos = self.index.lookup(entry[1])
        from_offset = max(start_offset, self.base_offset)
        if from_offset > self.base_offset:
            pos = max(pos, self.index.lookup(from_offset - self.base_offset))
        for p, hdr in self.iter_headers(pos):
            if hdr.max_timestamp < ts or hdr.base_offset + hdr.last_offset_delta < start_offset:
                continue
            if hdr.records_count == 0:
                continue
            for rec in iter_records(self.fh.pread(hdr.size, p)):
                if rec.timestamp >= ts and rec.offset >= start_offset:
                    return rec.offset, rec.timestamp
        return None

    def exact_max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record carrying this segment's max timestamp."""
        if self.max_timestamp < 0 or self.size == 0:
            return None
        found = self.find_batch(self.offset_of_max_timestamp)
        if found is not None:
            p, hdr = found
            if hdr.max_timestamp == self.max_timestamp and hdr.records_count:
                for rec in iter_records(self.fh.pread(hdr.size, p)):
                    if rec.timestamp == self.max_timestamp:
                        return rec.timestamp, rec.offset
        return self.max_timestamp, self.offset_of_max_timestamp

    # ------------------------------------------------------------------ truncation
    def truncate_to_position(self, pos: int, next_offset: int) -> None:
        self.fh.truncate(pos)
        self.size = pos
        self.flushed_size = min(self.flushed_size, pos)
        self.index.truncate_to_position(pos)
        self.time_index.truncate_to_rel(next_offset - self.base_offset)
        self.next_offset = next_offset
        # recompute max timestamp from the remaining data (rare operation)
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_time_ms = None
        for _p, hdr in self.iter_headers(0, pos):
            if self.first_batch_time_ms is None:
                self.first_batch_time_ms = hdr.max_timestamp
            if hdr.max_timestamp > self.max_timestamp:
                self.max_timestamp = hdr.max_timestamp
                self.offset_of_max_timestamp = hdr.base_offset + hdr.last_offset_delta
        self.bytes_since_index = self.index_interval + 1
        self.indexes_saved = False
