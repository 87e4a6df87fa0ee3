"""Sparse offset and time indexes of one segment.

Both indexes live in memory (``array`` based) and are persisted to Kafka-format
files when a segment is rolled or the log is closed:

* ``.index``     entries of 8 bytes:  relative offset (u32 BE), file position (u32 BE)
* ``.timeindex`` entries of 12 bytes: timestamp (i64 BE), relative offset (u32 BE)

An offset index entry ``(rel, pos)`` means: the batch starting at byte ``pos`` of the
segment contains offsets up to ``base + rel``; any batch containing an offset
greater than ``base + rel`` starts at or after ``pos``.

A time index entry ``(ts, rel)`` means: the largest timestamp of all batches up to
and including the batch containing ``base + rel`` is ``ts``.  Entries are only added
when the timestamp grows, so timestamps are strictly increasing.

Persisted files are written to ``<name>.tmp`` and renamed into place.  Loading
validates the structure and returns ``None`` for anything suspicious; the caller
then rebuilds the index by scanning the log.
"""

from __future__ import annotations

import operator
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

__all__ = ["OffsetIndex", "TimeIndex", "write_file_atomic"]

_U32_MAX = 0xFFFFFFFF


def write_file_atomic(path: Path, data: bytes, *, fsync: bool) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class OffsetIndex:
    ENTRY_SIZE = 8
    __slots__ = ("rel", "pos", "max_entries")

    def __init__(self, max_entries: int) -> None:
        self.rel = array("I")
        self.pos = array("I")
        self.max_entries = max(1, max_entries)

    @classmethod
    def for_index_bytes(cls, segment_index_bytes: int) -> OffsetIndex:
        return cls(segment_index_bytes // cls.ENTRY_SIZE)

    def __len__(self) -> int:
        return len(self.rel)

    @property
    def full(self) -> bool:
        return len(self.rel) >= self.max_entries

    def append(self, rel: int, pos: int) -> None:
        if self.rel and (rel <= self.rel[-1] or pos <= self.pos[-1]):
            return  # never break monotonicity; the index is sparse anyway
        if len(self.rel) >= self.max_entries or rel > _U32_MAX or pos > _U32_MAX:
            return
        self.rel.append(rel)
        self.pos.append(pos)

    def lookup(self, rel: int) -> int:
        """File position from which to scan for the batch containing ``base + rel``."""
        i = bisect_right(self.rel, rel) - 1
        return 0 if i < 0 else self.pos[i]

    def position_for_offset_floor(self, rel: int) -> tuple[int, int]:
        """(rel, pos) of the largest entry with entry.rel <= rel, or (-1, 0)."""
        i = bisect_right(self.rel, rel) - 1
        return (-1, 0) if i < 0 else (self.rel[i], self.pos[i])

    def last(self) -> tuple[int, int] | None:
        return (self.rel[-1], self.pos[-1]) if self.rel else None

    def truncate_to_position(self, pos: int) -> None:
        """Drop entries pointing at ``pos`` or beyond."""
        i = bisect_left(self.pos, pos)
        del self.rel[i:]
        del self.pos[i:]

    def clear(self) -> None:
        del self.rel[:]
        del self.pos[:]

    def to_bytes(self) -> bytes:
        n = len(self.rel)
        flat = array("I", bytes(8 * n))
        flat[0::2] = self.rel
        flat[1::2] = self.pos
        if flat.itemsize != 4:  # pragma: no cover - exotic platforms
            return struct.pack(f">{2 * n}I", *flat)
        if struct.pack("=I", 1) != struct.pack(">I", 1):
            flat.byteswap()
        return flat.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes, max_entries: int, log_size: int) -> OffsetIndex | None:
        if len(data) % cls.ENTRY_SIZE:
            return None
        n = len(data) // cls.ENTRY_SIZE
        idx = cls(max(max_entries, n))
        if n == 0:
            return idx
        flat = array("I", struct.unpack(f">{2 * n}I", data))
        rel = flat[0::2]
        pos = flat[1::2]
        if not all(map(operator.lt, rel, rel[1:])) or not all(map(operator.lt, pos, pos[1:])):
            return None
        if pos[-1] >= log_size:
            return None
        idx.rel = rel
        idx.pos = pos
        return idx

    def save(self, path: Path, *, fsync: bool) -> None:
        write_file_atomic(path, self.to_bytes(), fsync=fsync)

    @classmethod
    def load(cls, path: Path, max_entries: int, log_size: int) -> OffsetIndex | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return cls.from_bytes(data, max_entries, log_size)


class TimeIndex:
    ENTRY_SIZE = 12
    __slots__ = ("ts", "rel", "max_entries")

    def __init__(self, max_entries: int) -> None:
        self.ts = array("q")
        self.rel = array("I")
        self.max_entries = max(1, max_entries)

    @classmethod
    def for_index_bytes(cls, segment_index_bytes: int) -> TimeIndex:
        return cls(segment_index_bytes // cls.ENTRY_SIZE)

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def full(self) -> bool:
        return len(self.ts) >= self.max_entries

    def maybe_append(self, ts: int, rel: int) -> None:
        if ts < 0 or rel > _U32_MAX or rel < 0:
            return
        if self.ts and (ts <= self.ts[-1] or rel < self.rel[-1]):
            return
        if len(self.ts) >= self.max_entries:
            return
        self.ts.append(ts)
        self.rel.append(rel)

    def last(self) -> tuple[int, int] | None:
        return (self.ts[-1], self.rel[-1]) if self.ts else None

    def lookup_before(self, ts: int) -> tuple[int, int] | None:
        """The entry with the largest timestamp strictly below ``ts``, or None."""
        i = bisect_left(self.ts, ts) - 1
        return None if i < 0 else (self.ts[i], self.rel[i])

    def truncate_to_rel(self, rel: int) -> None:
        """Drop entries whose offset is >= base + rel."""
        i = bisect_left(self.rel, rel)
        del self.ts[i:]
        del self.rel[i:]

    def clear(self) -> None:
        del self.ts[:]
        del self.rel[:]

    def to_bytes(self) -> bytes:
        n = len(self.ts)
        if n == 0:
            return b""
        flat: list[int] = [0] * (2 * n)
        flat[0::2] = self.ts
        flat[1::2] = self.rel
        return struct.pack(">" + "qI" * n, *flat)

    @classmethod
    def from_bytes(cls, data: bytes, max_entries: int) -> TimeIndex | None:
        if len(data) % cls.ENTRY_SIZE:
            return None
        n = len(data) // cls.ENTRY_SIZE
        idx = cls(max(max_entries, n))
        if n == 0:
            return idx
        flat = struct.unpack(">" + "qI" * n, data)
        ts = array("q", flat[0::2])
        rel = array("I", flat[1::2])
        if ts[0] < 0 or not all(map(operator.lt, ts, ts[1:])) or not all(map(operator.le, rel, rel[1:])):
            return None
        idx.ts = ts
        idx.rel = rel
        return idx

    def save(self, path: Path, *, fsync: bool) -> None:
        write_file_atomic(path, self.to_bytes(), fsync=fsync)

    @classmethod
    def load(cls, path: Path, max_entries: int) -> TimeIndex | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return cls.from_bytes(data, max_entries)
