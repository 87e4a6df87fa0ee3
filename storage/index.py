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


class _SparseIndex:
    """What both indexes share: two parallel arrays (named by ``_COLUMNS``), a bound on
    the entries, and the file they are saved to and loaded from."""

    ENTRY_SIZE = 0  # bytes of an entry in the file
    _COLUMNS: tuple[tuple[str, str], ...] = ()  # (attribute, array typecode) of each column
    __slots__ = ("max_entries",)

    def __init_subclass__(cls) -> None:
        cls.ENTRY_SIZE = struct.calcsize(">" + "".join(typecode for _, typecode in cls._COLUMNS))

    def __init__(self, max_entries: int) -> None:
        for name, typecode in self._COLUMNS:
            setattr(self, name, array(typecode))
        self.max_entries = max(1, max_entries)

    @classmethod
    def for_index_bytes(cls, segment_index_bytes: int):
        return cls(segment_index_bytes // cls.ENTRY_SIZE)

    def __len__(self) -> int:
        return len(getattr(self, self._COLUMNS[0][0]))

    @property
    def full(self) -> bool:
        return len(self) >= self.max_entries

    def last(self) -> tuple[int, int] | None:
        first, second = (getattr(self, name) for name, _ in self._COLUMNS)
        return (first[-1], second[-1]) if first else None

    def _truncate(self, i: int) -> None:
        """Drop the entries from the ``i``-th on."""
        for name, _ in self._COLUMNS:
            del getattr(self, name)[i:]

    def clear(self) -> None:
        self._truncate(0)

    def save(self, path: Path, *, fsync: bool) -> None:
        write_file_atomic(path, self.to_bytes(), fsync=fsync)

    def to_bytes(self) -> bytes:
        raise NotImplementedError

    @classmethod
    def from_bytes(cls, data: bytes, max_entries: int, *bounds: int):
        """The index a file's bytes hold, or None for anything suspicious (the caller rebuilds it)."""
        if len(data) % cls.ENTRY_SIZE:
            return None
        n = len(data) // cls.ENTRY_SIZE
        idx = cls(max(max_entries, n))
        return idx._fill(data, n, *bounds) if n else idx

    def _fill(self, data: bytes, n: int, *bounds: int):
        """Take the ``n`` entries of ``data``; self, or None when they are not in order."""
        raise NotImplementedError

    @classmethod
    def _read(cls, path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None


class OffsetIndex(_SparseIndex):
    _COLUMNS = (("rel", "I"), ("pos", "I"))
    __slots__ = ("rel", "pos")

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

    def truncate_to_position(self, pos: int) -> None:
        """Drop entries pointing at ``pos`` or beyond."""
        self._truncate(bisect_left(self.pos, pos))

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

    def _fill(self, data: bytes, n: int, log_size: int) -> OffsetIndex | None:  # type: ignore[override]
        flat = array("I", struct.unpack(f">{2 * n}I", data))
        rel = flat[0::2]
        pos = flat[1::2]
        if not all(map(operator.lt, rel, rel[1:])) or not all(map(operator.lt, pos, pos[1:])):
            return None
        if pos[-1] >= log_size:
            return None
        self.rel = rel
        self.pos = pos
        return self

    @classmethod
    def load(cls, path: Path, max_entries: int, log_size: int) -> OffsetIndex | None:
        data = cls._read(path)
        return None if data is None else cls.from_bytes(data, max_entries, log_size)


class TimeIndex(_SparseIndex):
    _COLUMNS = (("ts", "q"), ("rel", "I"))
    __slots__ = ("ts", "rel")

    def maybe_append(self, ts: int, rel: int) -> None:
        if ts < 0 or rel > _U32_MAX or rel < 0:
            return
        if self.ts and (ts <= self.ts[-1] or rel < self.rel[-1]):
            return
        if len(self.ts) >= self.max_entries:
            return
        self.ts.append(ts)
        self.rel.append(rel)

    def lookup_before(self, ts: int) -> tuple[int, int] | None:
        """The entry with the largest timestamp strictly below ``ts``, or None."""
        i = bisect_left(self.ts, ts) - 1
        return None if i < 0 else (self.ts[i], self.rel[i])

    def truncate_to_rel(self, rel: int) -> None:
        """Drop entries whose offset is >= base + rel."""
        self._truncate(bisect_left(self.rel, rel))

    def to_bytes(self) -> bytes:
        n = len(self.ts)
        if n == 0:
            return b""
        flat: list[int] = [0] * (2 * n)
        flat[0::2] = self.ts
        flat[1::2] = self.rel
        return struct.pack(">" + "qI" * n, *flat)

    def _fill(self, data: bytes, n: int) -> TimeIndex | None:  # type: ignore[override]
        flat = struct.unpack(">" + "qI" * n, data)
        ts = array("q", flat[0::2])
        rel = array("I", flat[1::2])
        if ts[0] < 0 or not all(map(operator.lt, ts, ts[1:])) or not all(map(operator.le, rel, rel[1:])):
            return None
        self.ts = ts
        self.rel = rel
        return self

    @classmethod
    def load(cls, path: Path, max_entries: int) -> TimeIndex | None:
        data = cls._read(path)
        return None if data is None else cls.from_bytes(data, max_entries)
