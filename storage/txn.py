"""Transactional state of one partition: open transactions, the last stable offset, aborted transactions.

Kafka's rules (its ProducerStateManager, ProducerAppendInfo and TransactionIndex):

* a transactional data batch of producer P opens P's transaction at the batch's base
  offset, unless P already has one open;
* a transactional control batch of P (the record key's type: 0 ABORT, 1 COMMIT) closes
  it. A marker with no transaction open changes nothing, nor does an emptied control
  batch (compaction) or one of another type. An ABORT closing a transaction begun at F,
  with the marker at M, is recorded as an aborted transaction (P, F, M, LSO) where LSO is
  the first offset of the earliest transaction still open, or M + 1;
* the first unstable offset is the smallest first offset of the open transactions; the
  last stable offset (LSO) is that, clamped to the log start offset, or the log end
  offset (the high watermark: one replica) when none is open (``PartitionLog`` does the
  clamping);
* a READ_COMMITTED fetch of [start, upper) is told about every aborted transaction with
  ``last_offset >= start`` and ``first_offset < upper``. Entries are kept in marker order,
  in which both ``last_offset`` and ``last_stable_offset`` grow, and no transaction after
  an entry begins below that entry's LSO: the search stops at the first entry whose LSO
  is at or past ``upper``.

On disk (the partition directory's layout is in storage/log.py):

* ``<base>.txnindex``: the aborted transactions whose ABORT marker is in the segment
  ``<base>``, Kafka's format: 34-byte big-endian entries (version int16 = 0, producer id
  int64, first offset int64, last offset int64, last stable offset int64), appended
  when the marker is appended.
* ``<offset>.txnsnapshot`` (offset zero-padded to 20 digits): the transactions open at
  ``offset`` (a batch boundary): version int16 = 1, CRC-32C (uint32) of the rest, offset
  int64, count int32, then (producer id int64, first offset int64) per transaction. The
  state at ``offset`` depends only on the log below it, so a snapshot stays valid until
  the log is truncated below it. Written when a partition first sees a transactional
  batch (nothing is open before it), at every segment roll and on clean shutdown, but
  only for partitions that have seen one: a partition without any of these files has
  never held a transaction, and opens without reading anything. (Transactional batches
  written by a kafkalite that did not track transactions count as committed: nothing
  ever ended them, and a consumer read them before.)

Opening (storage/recovery.py) takes the newest valid snapshot at or below the log end
offset, the aborted transactions below it from the ``.txnindex`` files, and replays the
batch headers from the snapshot to the end (``replay``); with no usable snapshot it
replays the whole log. Files that do not parse (wrong size, garbage, entries out of
order or outside their segment) are rebuilt from the replay.

Nothing here locks: ``PartitionLog`` changes a ``TxnState`` only under its own lock,
and only from the thread that appends; compaction (storage/compaction.py) replaces it,
under that lock, with one without the aborted transactions it found no data left of
(``without_aborted``).
"""

from __future__ import annotations

import logging
import struct
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from protocol.compression import decompress
from protocol.crc import crc32c
from protocol.records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    TRANSACTIONAL_MASK,
    key_value_at,
    read_header,
)

__all__ = [
    "ABORT",
    "COMMIT",
    "AbortedTxn",
    "TxnState",
    "ENTRY_SIZE",
    "TXNINDEX_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "encode_entries",
    "decode_entries",
    "encode_snapshot",
    "decode_snapshot",
    "control_kind",
    "batches_last_offset",
    "replay",
    "read_bounded",
    "snapshot_name",
]

log = logging.getLogger("storage.log")

ABORT = 0
COMMIT = 1
TXNINDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".txnsnapshot"

_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset
ENTRY_SIZE = _ENTRY.size  # 34
_ENTRY_VERSION = 0

_SNAP_HEAD = struct.Struct(">hI")  # version, crc of what follows
_SNAP_BODY = struct.Struct(">qi")  # offset, count
_SNAP_ENTRY = struct.Struct(">qq")  # producer id, first offset
_SNAP_VERSION = 1
_SNAP_FIXED = _SNAP_HEAD.size + _SNAP_BODY.size  # 18

# a control record's key and value are a few bytes: this much of an uncompressed control
# batch always holds its first record's key
_CONTROL_PREFIX = HEADER_SIZE + 96
# a compressed control batch (Kafka never writes one) is read whole up to this size
_CONTROL_MAX = 1 << 20

_LEN = struct.Struct(">i")
_BATCH_LAST = struct.Struct(">q")  # base offset at +0
_LOD = struct.Struct(">i")  # last offset delta at +23


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the LSO right after the marker


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


# ---------------------------------------------------------------------------- state


class TxnState:
    """Open transactions, first unstable offset and aborted transactions of one partition.

    ``open`` maps producer id -> first offset of its open transaction; ``firsts`` holds
    those first offsets sorted (``firsts[0]`` is the first unstable offset). ``aborted``
    is in marker order, with ``lasts`` and ``lsos`` its last offsets and LSOs for bisection.
    ``tracked`` says the partition has seen a transactional batch (its files exist).
    """

    __slots__ = ("open", "firsts", "aborted", "lasts", "lsos", "tracked")

    def __init__(self, open_txns: Iterable[tuple[int, int]] = (), *, tracked: bool = False) -> None:
        self.open: dict[int, int] = {}
        self.firsts: list[int] = []
        self.aborted: list[AbortedTxn] = []
        self.lasts: list[int] = []
        self.lsos: list[int] = []
        self.tracked = tracked
        for pid, first in open_txns:
            self.on_data(pid, first)

    def __repr__(self) -> str:
        return f"<TxnState open={sorted(self.open.items(), key=lambda x: x[1])} aborted={len(self.aborted)}>"

    # -- transitions
    def on_data(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch of ``producer_id`` at ``base_offset``."""
        if producer_id not in self.open:
            self.open[producer_id] = base_offset
            firsts = self.firsts
            if not firsts or base_offset > firsts[-1]:
                firsts.append(base_offset)
            else:
                insort(firsts, base_offset)

    def on_marker(self, producer_id: int, offset: int, kind: int) -> AbortedTxn | None:
        """A COMMIT or ABORT marker of ``producer_id`` at ``offset``; returns the aborted
        transaction to record, if it closed one with an ABORT."""
        first = self.open.pop(producer_id, None)
        if first is None:
            return None
        firsts = self.firsts
        i = bisect_left(firsts, first)
        if i < len(firsts) and firsts[i] == first:
            del firsts[i]
        if kind != ABORT:
            return None
        entry = AbortedTxn(producer_id, first, offset, firsts[0] if firsts else offset + 1)
        self.add_aborted(entry)
        return entry

    def add_aborted(self, entry: AbortedTxn) -> None:
        """Record an aborted transaction (in marker order; a repeated marker offset is ignored)."""
        lasts = self.lasts
        if lasts and entry.last_offset <= lasts[-1]:
            i = bisect_left(lasts, entry.last_offset)
            if i < len(lasts) and lasts[i] == entry.last_offset:
                return
            self.aborted.insert(i, entry)
            lasts.insert(i, entry.last_offset)
            self.lsos.insert(i, entry.last_stable_offset)
            return
        self.aborted.append(entry)
        lasts.append(entry.last_offset)
        self.lsos.append(entry.last_stable_offset)

    def drop_aborted_below(self, offset: int) -> None:
        """Forget the aborted transactions whose marker is below ``offset`` (their data is gone)."""
        k = bisect_left(self.lasts, offset)
        if k:
            del self.aborted[:k]
            del self.lasts[:k]
            del self.lsos[:k]

    def without_aborted(self, markers: set[int]) -> TxnState:
        """A new state without the aborted transactions whose marker offset is in ``markers``
        (compaction: their data is gone). It shares the open transactions; the aborted lists are
        new, so a reader still holding this state sees it whole and unchanged."""
        new = TxnState(tracked=self.tracked)
        new.open = self.open
        new.firsts = self.firsts
        keep = [i for i, last in enumerate(self.lasts) if last not in markers]
        new.aborted = [self.aborted[i] for i in keep]
        new.lasts = [self.lasts[i] for i in keep]
        new.lsos = [self.lsos[i] for i in keep]
        return new

    # -- queries
    @property
    def first_unstable_offset(self) -> int | None:
        return self.firsts[0] if self.firsts else None

    def open_txns(self) -> list[tuple[int, int]]:
        """(producer id, first offset) of the open transactions, by first offset."""
        return sorted(self.open.items(), key=lambda item: item[1])

    def has_aborted_from(self, offset: int) -> bool:
        """True if some aborted transaction's marker is at or after ``offset``."""
        lasts = self.lasts
        return bool(lasts) and lasts[-1] >= offset

    def collect(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping
        [start_offset, upper_bound_offset) (the upper bound is exclusive)."""
        lasts = self.lasts
        n = len(lasts)
        i = bisect_left(lasts, start_offset)
        if i == n:
            return []
        out = []
        aborted = self.aborted
        lsos = self.lsos
        while i < n:
            entry = aborted[i]
            if entry.first_offset < upper_bound_offset:
                out.append((entry.producer_id, entry.first_offset))
            if lsos[i] >= upper_bound_offset:
                break  # every later transaction begins at or after this LSO
            i += 1
        return out

    def entries_between(self, lo: int, hi: int | None = None) -> list[AbortedTxn]:
        """Aborted transactions whose marker is in [lo, hi) (hi None: no bound)."""
        lasts = self.lasts
        i = bisect_left(lasts, lo)
        j = len(lasts) if hi is None else bisect_left(lasts, hi)
        return self.aborted[i:j]

    def consistent(self) -> bool:
        """The aborted list's invariants: markers strictly increasing, LSOs not decreasing."""
        prev_last = prev_lso = -1
        for e in self.aborted:
            if e.last_offset <= prev_last or e.last_stable_offset < prev_lso:
                return False
            prev_last, prev_lso = e.last_offset, e.last_stable_offset
        return True


# ---------------------------------------------------------------------------- .txnindex


def encode_entries(entries: Iterable[AbortedTxn]) -> bytes:
    pack = _ENTRY.pack
    return b"".join(pack(_ENTRY_VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries)


def decode_entries(data: bytes) -> list[AbortedTxn] | None:
    """The entries of a ``.txnindex`` file, or None if it is not one: its size is not a
    multiple of 34, an entry has another version, negative ids or offsets, a first offset
    past its last, an LSO past its marker + 1, or the entries are out of order."""
    if len(data) % ENTRY_SIZE:
        return None
    out: list[AbortedTxn] = []
    prev_last = prev_lso = -1
    for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
        if version != _ENTRY_VERSION or pid < 0 or first < 0 or first > last or lso < 0 or lso > last + 1:
            return None
        if last <= prev_last or lso < prev_lso:
            return None
        prev_last, prev_lso = last, lso
        out.append(AbortedTxn(pid, first, last, lso))
    return out


# ---------------------------------------------------------------------------- snapshots


def encode_snapshot(offset: int, open_txns: Iterable[tuple[int, int]]) -> bytes:
    items = list(open_txns)
    body = _SNAP_BODY.pack(offset, len(items)) + b"".join(_SNAP_ENTRY.pack(pid, first) for pid, first in items)
    return _SNAP_HEAD.pack(_SNAP_VERSION, crc32c(body)) + body


def decode_snapshot(data: bytes, offset: int | None = None) -> list[tuple[int, int]] | None:
    """The open transactions of a snapshot taken at ``offset``, or None if ``data`` is not
    a valid one (size, version, CRC, offset, entries at or past the offset, repeats)."""
    if len(data) < _SNAP_FIXED:
        return None
    version, crc = _SNAP_HEAD.unpack_from(data, 0)
    if version != _SNAP_VERSION:
        return None
    at, count = _SNAP_BODY.unpack_from(data, _SNAP_HEAD.size)
    if count < 0 or len(data) != _SNAP_FIXED + count * _SNAP_ENTRY.size:
        return None
    if crc32c(memoryview(data)[_SNAP_HEAD.size:]) != crc:
        return None
    if (offset is not None and at != offset) or at < 0:
        return None
    out = []
    pids = set()
    firsts = set()
    for pid, first in _SNAP_ENTRY.iter_unpack(memoryview(data)[_SNAP_FIXED:]):
        if pid < 0 or not 0 <= first < at or pid in pids or first in firsts:
            return None
        pids.add(pid)
        firsts.add(first)
        out.append((pid, first))
    return out


def read_bounded(path: Path, limit: int) -> bytes | None:
    """The contents of ``path``, or None if it is missing, unreadable or longer than ``limit``."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    return None if len(data) > limit else data


# ---------------------------------------------------------------------------- batches


def control_kind(batch) -> int | None:
    """ABORT or COMMIT for a transaction marker batch (``batch`` starts at the batch; for an
    uncompressed one its first ``HEADER_SIZE + 96`` bytes are enough); None for an empty
    control batch, another control type, or anything that does not parse."""
    try:
        mv = batch if type(batch) is memoryview else memoryview(batch)
        hdr = read_header(mv)
        if hdr.records_count <= 0 or hdr.length < HEADER_SIZE - 12:
            return None
        end = min(len(mv), hdr.size)
        codec = hdr.attributes & COMPRESSION_MASK
        if codec:
            if len(mv) < hdr.size or hdr.size > _CONTROL_MAX:
                return None
            section = decompress(codec, mv[HEADER_SIZE:end], _CONTROL_MAX)
        else:
            section = mv[HEADER_SIZE:end]
        key, _value, _next = key_value_at(section, 0)
        if key is None or len(key) < 4:
            return None
        version, kind = struct.unpack_from(">hh", key, 0)
    except (ValueError, IndexError, struct.error):
        return None
    if version < 0 or kind not in (ABORT, COMMIT):
        return None
    return kind


def batches_last_offset(records) -> int:
    """The last offset of the whole batches in ``records`` (as ``PartitionLog.read`` returns
    them); -1 if there is none."""
    n = len(records)
    pos = 0
    last = -1
    unpack = _LEN.unpack_from
    while pos + HEADER_SIZE <= n:
        size = unpack(records, pos + 8)[0] + 12
        if size < HEADER_SIZE:
            break
        last = pos
        pos += size
    if last < 0:
        return -1
    return _BATCH_LAST.unpack_from(records, last)[0] + _LOD.unpack_from(records, last + 23)[0]


def _segment_control_kind(seg, pos: int, hdr) -> int | None:
    if hdr.records_count <= 0:
        return None
    if hdr.attributes & COMPRESSION_MASK:
        if hdr.size > _CONTROL_MAX:
            return None
        n = hdr.size
    else:
        n = min(hdr.size, _CONTROL_PREFIX)
    return control_kind(seg.fh.pread(n, pos))


def replay(
    state: TxnState,
    segments: Iterable,
    start_offset: int,
    on_abort: Callable[[object, AbortedTxn], None] | None = None,
) -> None:
    """Apply to ``state`` the transactional batches of ``segments`` (``storage.segment.Segment``,
    in offset order) from ``start_offset`` (a batch boundary) to each segment's end.

    Only batch headers are parsed (and the first record of each transaction marker). A
    segment that does not parse past some point is replayed up to it (recovery already
    truncated torn tails; this is about damage no check caught).
    """
    for seg in segments:
        end = seg.size
        if end == 0 or seg.next_offset <= start_offset:
            continue
        try:
            pos = 0
            if start_offset > seg.base_offset:
                found = seg.find_batch(start_offset, end)
                if found is None:
                    continue
                pos = found[0]
            for p, hdr in seg.iter_headers(pos, end):
                attrs = hdr.attributes
                if not attrs & TRANSACTIONAL_MASK or hdr.producer_id < 0:
                    continue
                if attrs & CONTROL_MASK:
                    kind = _segment_control_kind(seg, p, hdr)
                    if kind is None:
                        continue
                    entry = state.on_marker(hdr.producer_id, hdr.base_offset, kind)
                    if entry is not None and on_abort is not None:
                        on_abort(seg, entry)
                else:
                    state.on_data(hdr.producer_id, hdr.base_offset)
        except (ValueError, OSError) as exc:
            log.warning("transaction state: %s could not be read past some point: %s", seg.log_path, exc)

