"""Bytes that recovery cuts from a log are moved aside, never deleted.

When recovery (storage/recovery.py) finds a torn or corrupt batch, the log is
truncated there, as Kafka does: the batch, everything after it in its segment
and every later segment are dropped. The dropped bytes go to
``<segment>.log.corrupt-<UTC time>`` files next to the segment first (the
tail of a segment is copied and the copy fsynced before the segment is
truncated; a later segment is renamed whole), so that an operator can look at
them. Nothing reads them again: segment listing, retention and compaction
only know ``<base>.log`` files (and the other suffixes of storage/log.py's
layout); deleting the topic deletes them with its directory. Deleting them by
hand is safe at any time (docs/reliability.md).

``readable_batches`` finds the batches that still parse in such a file (a
batch whose CRC is right, wherever it starts): recovery names the last offset
dropped from them, and a coordinator the groups or transactions whose records
were cut.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from protocol.records import HEADER_SIZE, MAGIC, MAGIC_OFFSET, BatchHeader, scan_valid_prefix

log = logging.getLogger("storage.log")

CORRUPT_MARK = ".corrupt-"
# how much of a moved-aside file is searched for batches that still parse: its first and its
# last SEARCH_WINDOW bytes (all of it when it is no larger than two windows)
SEARCH_WINDOW = 16 << 20
_COPY_CHUNK = 1 << 20
_MAGIC_BYTE = bytes([MAGIC])


def is_quarantined(name: str) -> bool:
    """Whether ``name`` is a moved-aside file (``<segment>.log.corrupt-<time>``)."""
    return CORRUPT_MARK in name


@dataclass(frozen=True, slots=True)
class Truncation:
    """What recovery cut from a log (the fields of its WARNING)."""

    directory: Path
    reason: str
    first_offset: int  # the first offset dropped: the next offset after the last good batch
    last_offset: int | None  # the last offset of the batches that still parse in the dropped bytes
    byte_ranges: tuple[tuple[str, int, int], ...]  # (segment file, start, end) of the bytes dropped
    moved_to: tuple[Path, ...]
    readable_batches: int
    readable_records: int

    @property
    def bytes_dropped(self) -> int:
        return sum(end - start for _, start, end in self.byte_ranges)

    def fields(self) -> dict:
        """The WARNING's fields (JSON-ready)."""
        return {
            "partition": self.directory.name,
            "directory": str(self.directory),
            "reason": self.reason,
            "first_offset_dropped": self.first_offset,
            "last_offset_dropped": self.last_offset,
            "bytes_dropped": self.bytes_dropped,
            "byte_ranges": [{"file": f, "start": s, "end": e} for f, s, e in self.byte_ranges],
            "moved_to": [str(p) for p in self.moved_to],
            "readable_batches_dropped": self.readable_batches,
            "readable_records_dropped": self.readable_records,
        }


def aside_path(directory: Path, log_name: str, now_ms: int) -> Path:
    """A new ``<log_name>.corrupt-<UTC time>`` path in ``directory`` (``-1``, ``-2``... if taken)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_ms / 1000))
    p = directory / f"{log_name}{CORRUPT_MARK}{stamp}"
    n = 0
    while p.exists():
        n += 1
        p = directory / f"{log_name}{CORRUPT_MARK}{stamp}-{n}"
    return p


def save_range(src_fd: int, start: int, end: int, dest: Path) -> None:
    """Copy bytes [start, end) of ``src_fd`` to the new file ``dest`` and fsync it (the caller
    fsyncs the directory). A failure removes the partial copy and raises OSError."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        pos = start
        while pos < end:
            chunk = os.pread(src_fd, min(_COPY_CHUNK, end - pos), pos)
            if not chunk:
                raise OSError(f"{dest}: source ended at {pos} of {end}")
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
            pos += len(chunk)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            dest.unlink()
        except OSError:
            pass
        raise
    os.close(fd)


def find_batches(buf: bytes) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every batch in ``buf`` whose framing and CRC are right, wherever it
    starts: after a bad stretch the search resumes at the next byte that could be a magic byte."""
    mv = memoryview(buf)
    n = len(buf)
    pos = 0
    while pos + HEADER_SIZE <= n:
        entries, vlen = scan_valid_prefix(mv[pos:], verify_crc=True)
        for p, hdr in entries:
            yield pos + p, hdr
        if entries:
            pos += vlen
            continue
        q = buf.find(_MAGIC_BYTE, pos + 1 + MAGIC_OFFSET)
        if q < 0:
            return
        pos = q - MAGIC_OFFSET


def framed_batches(path: Path, window: int = SEARCH_WINDOW) -> list[tuple[BatchHeader, bytes]]:
    """The batches at the start of the file ``path`` whose framing is plausible, whatever their
    CRC (the first of them is usually the batch recovery found damaged: its records may still
    decode, or be garbled); [] if it cannot be read."""
    try:
        with open(path, "rb") as f:
            buf = f.read(window)
    except OSError:
        return []
    entries, _ = scan_valid_prefix(buf, verify_crc=False)
    return [(hdr, buf[p:p + hdr.size]) for p, hdr in entries]


def readable_batches(path: Path, window: int = SEARCH_WINDOW) -> list[tuple[BatchHeader, bytes]]:
    """The batches that still parse in the file ``path`` (searched as ``SEARCH_WINDOW`` says), in
    file order; [] if it cannot be read."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            spans = [(0, size)] if size <= 2 * window else [(0, window), (size - window, size)]
            out = []
            for start, end in spans:
                f.seek(start)
                buf = f.read(end - start)
                out.extend((hdr, buf[p:p + hdr.size]) for p, hdr in find_batches(buf))
            return out
    except OSError:
        return []
