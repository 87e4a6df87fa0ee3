"""Open-time recovery of a partition directory (see the layout in storage/log.py).

``recover`` runs once, before a ``PartitionLog`` serves anything:

1. removes temporaries of interrupted operations (``*.cleaned``, ``*.tmp``),
   completes interrupted compaction swaps (``<base>-<end>.swap``) and removes
   index files that have no segment;
2. opens the segments in offset order. The last one is fully CRC-validated
   unless the previous shutdown was clean (``clean-shutdown`` present), as is
   any segment whose index files are missing or do not match it, and every
   segment of a coordinator topic (``checked_whole``). At the first torn or
   corrupt batch the log is truncated, as Kafka does: the rest of that segment
   and every later segment are dropped, as they are from a segment that
   overlaps its predecessor on. Dropped bytes are moved aside
   (``<segment>.log.corrupt-<time>``, storage/quarantine.py) and the cut is
   logged as a WARNING naming the partition, the offsets and the bytes
   (``cut_log``);
3. derives the log end offset and the log start offset (``log-start-offset``);
4. rebuilds the transactional state (``recover_txn``, see storage/txn.py): the
   open transactions from the newest valid ``.txnsnapshot`` at or below the
   log end offset plus a replay of the batch headers after it (the whole log
   without one), the aborted transactions from the ``.txnindex`` files below
   the snapshot plus the replay. Index files that do not parse, hold entries
   outside their segment (a torn tail was cut) or were left by a compaction
   (``.txnindex`` of a replaced segment) are rewritten to match.

Also home to the small file helpers that log.py and compaction.py share.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.crc import crc32c
from protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, MAGIC, MAGIC_OFFSET, MIN_BATCH_LENGTH

from .config import LogConfig
from .index import write_file_atomic
from .leader_epochs import FILE as LEADER_EPOCHS_FILE
from .quarantine import Truncation, aside_path, readable_batches, save_range
from .segment import LOG_SUFFIX, Segment, parse_segment_name, segment_name
from .txn import (
    ENTRY_SIZE,
    SNAPSHOT_SUFFIX,
    TXNINDEX_SUFFIX,
    AbortedTxn,
    TxnState,
    decode_entries,
    decode_snapshot,
    encode_entries,
    encode_snapshot,
    read_bounded,
    replay,
    snapshot_name,
)

# same logger as before the split out of log.py
log = logging.getLogger("storage.log")

_LEN = struct.Struct(">i")
_CRC = struct.Struct(">I")

LOG_START_FILE = "log-start-offset"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"


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


@dataclass(slots=True)
class Recovered:
    """What ``recover`` found: the state a ``PartitionLog`` starts from."""

    segments: tuple[Segment, ...]  # in offset order; the last one is the active segment
    log_start: int
    leo: int
    pending_seal: list[Segment]  # rolled segments whose index files must still be written
    dir_dirty: bool  # a segment file was created (the directory needs an fsync)
    txn: TxnState  # open and aborted transactions
    txn_dirty: set[int]  # segments whose .txnindex could not be rewritten to match ``txn``
    truncations: list[Truncation]  # what was cut from the log (moved aside), for its readers to report
    has_leader_epochs: bool = False  # the directory holds a leader-epoch-checkpoint (leader_epochs.py)


def recover(path: Path, config: LogConfig, now_ms: Callable[[], int]) -> Recovered:
    """Recover the partition directory ``path`` (which must exist)."""
    d = path
    cfg = config
    pending_seal: list[Segment] = []
    dir_dirty = False
    names = os.listdir(d)
    # 1. temporary files of interrupted operations
    for n in names:
        if n.endswith(".cleaned") or n.endswith(".tmp"):
            log.info("recovery: removing leftover %s", d / n)
            _unlink(d / n)
    for n in sorted(x for x in names if x.endswith(".swap")):
        _complete_swap(d, n)
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
    # the coordinator topics (``__consumer_offsets``...) are replayed whole at start-up: every
    # segment is checked, so that what is replayed is what was written
    whole = checked_whole(d.name)
    segs: list[Segment] = []
    cuts: list[Truncation] = []
    for i, b in enumerate(bases):
        last = i == len(bases) - 1
        seg, valid = Segment.open(
            d, b, cfg.segment_index_bytes, cfg.index_interval_bytes, full_scan=last and not clean
        )
        if whole and valid is None and seg.indexes_saved and not crcs_ok(seg):
            valid = seg.rebuild(verify_crc=True)  # where the damage is, and the metadata of what precedes it
            seg.indexes_saved = False
            if valid >= seg.size:  # the scan found nothing wrong after all: nothing to cut
                valid = None
        if segs and seg.base_offset < segs[-1].next_offset:
            seg.fh.close()
            cuts.append(cut_log(d, segs[-1], None, bases[i:], "segment overlaps its predecessor", now_ms(), sync=cfg.fsync != "never"))
            break
        if valid is not None:
            cuts.append(cut_log(d, seg, valid, bases[i + 1:], "corrupt or torn batch", now_ms(), sync=cfg.fsync != "never"))
        segs.append(seg)
        if not seg.indexes_saved and not last:
            seg.seal()
            pending_seal.append(seg)
        if valid is not None:
            break
    stored_start = _read_log_start(d)
    if not segs:
        start = stored_start or 0
        segs.append(Segment.create(d, start, cfg.segment_index_bytes, cfg.index_interval_bytes))
        dir_dirty = True
    active = segs[-1]
    if active in pending_seal:
        pending_seal.remove(active)
    active.indexes_saved = False
    now = now_ms()
    if active.first_batch_time_ms is not None and not 0 <= active.first_batch_time_ms <= now:
        active.first_batch_time_ms = now
    # 3. offsets
    leo = max(s.next_offset for s in segs)
    log_start = segs[0].base_offset
    if stored_start is not None:
        log_start = max(log_start, min(stored_start, leo))
    # 4. transactions (nothing to read for a partition that never saw one: no transaction files)
    if any(n.endswith((TXNINDEX_SUFFIX, SNAPSHOT_SUFFIX)) for n in names):
        txn, txn_dirty = recover_txn(d, segs, leo, sync=cfg.fsync != "never")
    else:
        txn, txn_dirty = TxnState(), set()
    return Recovered(tuple(segs), log_start, leo, pending_seal, dir_dirty, txn, txn_dirty, cuts, LEADER_EPOCHS_FILE in names)


def _complete_swap(d: Path, name: str) -> None:
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


# Kafka's internal topics that a coordinator replays whole at start-up
COORDINATOR_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")


def checked_whole(dir_name: str) -> bool:
    """Whether every segment of the partition directory ``dir_name`` is CRC-checked at every open,
    not only the active one after an unclean shutdown: a coordinator topic's (its coordinator
    replays it whole at start-up, so what it replays must be what was written)."""
    return dir_name.rpartition("-")[0] in COORDINATOR_TOPICS


def crcs_ok(seg: Segment, window: int = 8 << 20) -> bool:
    """Whether every batch of ``seg`` is framed right and has the right CRC (a lean pass, for a
    segment whose indexes were loaded: nothing is rebuilt)."""
    size = seg.size
    pos = 0
    while pos < size:
        n = min(window, size - pos)
        buf = seg.fh.pread(n, pos)
        if len(buf) < HEADER_SIZE:
            return False
        mv = memoryview(buf)
        p = 0
        while p + HEADER_SIZE <= n:
            length = _LEN.unpack_from(buf, p + 8)[0]
            end = p + 12 + length
            if length < MIN_BATCH_LENGTH or buf[p + MAGIC_OFFSET] != MAGIC:
                return False
            if end > n:
                break
            if crc32c(mv[p + ATTRIBUTES_OFFSET:end]) != _CRC.unpack_from(buf, p + CRC_OFFSET)[0]:
                return False
            p = end
        if p == 0:  # one batch larger than the window: read it whole
            if pos + 12 + length > size:
                return False
            window = 12 + length
            continue
        pos += p
    return True


def cut_log(d: Path, seg: Segment, valid: int | None, later: list[int], reason: str, now: int, *, sync: bool) -> Truncation:
    """Truncate the log of ``d`` after the first ``valid`` bytes of ``seg`` (all of it when None),
    dropping the segments whose bases are ``later`` too, as Kafka does at the first invalid
    batch; the bytes dropped are moved aside first (storage/quarantine.py), then the cut is
    logged as a WARNING. ``seg`` describes its valid prefix already (Segment.open)."""
    ranges: list[tuple[str, int, int]] = []
    moved: list[Path] = []
    if valid is not None and valid < seg.size:
        dest = aside_path(d, seg.log_path.name, now)
        save_range(seg.fh.fd, valid, seg.size, dest)
        ranges.append((seg.log_path.name, valid, seg.size))
        moved.append(dest)
    for b in later:
        src = d / (segment_name(b) + LOG_SUFFIX)
        try:
            size = src.stat().st_size
        except FileNotFoundError:
            continue
        dest = aside_path(d, src.name, now)
        os.rename(src, dest)
        ranges.append((src.name, 0, size))
        moved.append(dest)
        for suffix in (".index", ".timeindex", TXNINDEX_SUFFIX):
            _unlink(d / (segment_name(b) + suffix))
    _fsync_dir(d)  # the copies and renames are durable before the segment loses the bytes
    if valid is not None and valid < seg.size:
        seg.fh.truncate(valid)
        if sync:
            seg.fh.fsync()
        seg.size = valid
        seg.flushed_size = valid
    last_offset = None
    batches = records = 0
    for p in moved:
        for hdr, _ in readable_batches(p):
            batches += 1
            records += hdr.records_count
            last_offset = max(hdr.last_offset, last_offset if last_offset is not None else -1)
    cut = Truncation(d, reason, seg.next_offset, last_offset, tuple(ranges), tuple(moved), batches, records)
    log.warning("log truncated at recovery; the bytes dropped were moved aside", extra=cut.fields())
    return cut


def _read_log_start(d: Path) -> int | None:
    try:
        return int((d / LOG_START_FILE).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


# --------------------------------------------------------------------------- transactions

# the largest snapshot read (a partition with a million open transactions: 16 MB)
MAX_SNAPSHOT_BYTES = 16 << 20


def _txn_files(d: Path) -> tuple[dict[int, str], dict[int, str]]:
    """(segment base -> .txnindex name, offset -> .txnsnapshot name) in ``d``."""
    indexes: dict[int, str] = {}
    snapshots: dict[int, str] = {}
    for n in os.listdir(d):
        if n.endswith(TXNINDEX_SUFFIX):
            b = parse_segment_name(n)
            if b is not None and n == segment_name(b) + TXNINDEX_SUFFIX:
                indexes[b] = n
        elif n.endswith(SNAPSHOT_SUFFIX):
            b = parse_segment_name(n)
            if b is not None and n == snapshot_name(b):
                snapshots[b] = n
    return indexes, snapshots


def load_snapshot(d: Path, names: dict[int, str], lo: int, hi: int, *, remove_bad: bool = True) -> tuple[int, list[tuple[int, int]]] | None:
    """The newest valid snapshot with an offset in [lo, hi]: (offset, open transactions)."""
    for off in sorted((o for o in names if lo <= o <= hi), reverse=True):
        data = read_bounded(d / names[off], MAX_SNAPSHOT_BYTES)
        got = decode_snapshot(data, off) if data is not None else None
        if got is not None:
            return off, got
        log.warning("recovery: transaction snapshot %s is not valid; ignoring it", d / names[off])
        if remove_bad:
            _unlink(d / names[off])
    return None


def recover_txn(d: Path, segs: list[Segment], leo: int, *, sync: bool) -> tuple[TxnState, set[int]]:
    """The transactional state of the recovered segments ``segs`` (see storage/txn.py), and
    the segments whose ``.txnindex`` could not be written.

    Also makes the files match it: ``.txnindex`` files rewritten or removed where they
    differ from what the state says (corrupt, torn, merged after a compaction), stray
    or stale ``.txnsnapshot`` files removed, and a snapshot at ``leo`` written when the
    log had to be replayed (so that the next start need not).
    """
    indexes, snapshots = _txn_files(d)
    if not indexes and not snapshots:
        return TxnState(), set()  # never saw a transactional batch
    first_base = segs[0].base_offset
    bases = [s.base_offset for s in segs]
    # what each segment's own file holds (None: corrupt), and the entries that are in range
    in_file: dict[int, list[AbortedTxn] | None] = {}
    usable: list[AbortedTxn] = []
    bad: list[int] = []  # segment bases whose entries must come from a replay
    stale: list[str] = []  # files to remove once the segments' own files are right
    rewrite: set[int] = set()
    for b, name in sorted(indexes.items()):
        i = bisect_right(bases, b) - 1
        if i < 0:
            stale.append(name)  # below the log: retention got there first
            continue
        seg = segs[i]
        # an entry per marker, and a marker batch holds a header and a record: a bound on the size
        limit = ENTRY_SIZE * (seg.size // HEADER_SIZE + 1)
        data = read_bounded(d / name, limit)
        entries = decode_entries(data) if data is not None else None
        if b == seg.base_offset:
            in_file[b] = entries
        else:
            stale.append(name)  # a segment compaction merged into ``seg``
            rewrite.add(seg.base_offset)
        if entries is None or any(e.last_offset < seg.base_offset for e in entries):
            log.warning("recovery: transaction index %s is not valid; rebuilding it", d / name)
            bad.append(seg.base_offset)
            rewrite.add(seg.base_offset)
            continue
        # entries at or past the segment's end: their markers were cut with a torn tail
        usable.extend(e for e in entries if e.last_offset < seg.next_offset)
    snap = load_snapshot(d, snapshots, first_base, min([leo, *bad]))
    start = snap[0] if snap is not None else first_base
    state = TxnState(snap[1] if snap is not None else (), tracked=True)
    bad_set = set(bad)
    for e in sorted(usable, key=lambda e: e.last_offset):
        if e.last_offset < start and segs[bisect_right(bases, e.last_offset) - 1].base_offset not in bad_set:
            state.add_aborted(e)
    replay(state, segs, start)
    if not state.consistent():
        log.warning("recovery: transaction indexes of %s disagree with the log; rebuilding them", d)
        state = TxnState(tracked=True)
        start = first_base
        snap = None
        rewrite.update(bases)
        replay(state, segs, start)
    return state, _sync_txn_files(d, segs, state, in_file, indexes, rewrite, stale, snapshots, snap, start, leo, sync)


def _sync_txn_files(d, segs, state, in_file, indexes, rewrite, stale, snapshots, snap, start, leo, sync) -> set[int]:
    """Make the files say what ``state`` says; returns the segment bases whose .txnindex could
    not be written (the log rewrites them later, and takes no snapshot until it has)."""
    bases = [s.base_offset for s in segs]
    failed: set[int] = set()
    changed = False
    for i, seg in enumerate(segs):
        b = seg.base_offset
        want = state.entries_between(b, bases[i + 1] if i + 1 < len(bases) else None)
        have = in_file.get(b, [] if b not in indexes else None)
        if b not in rewrite and have == want:
            continue
        try:
            if want:
                write_file_atomic(seg.txnindex_path, encode_entries(want), fsync=sync)
            else:
                _unlink(seg.txnindex_path)
        except OSError as exc:
            log.error("recovery: could not rewrite %s: %s", seg.txnindex_path, exc)
            failed.add(b)
        changed = True
    try:
        if changed and sync:
            _fsync_dir(d)
        for name in stale:
            _unlink(d / name)
            changed = True
        # snapshots: one at each segment base and one at the log end are kept
        if not failed and (snap is None or start < leo):
            write_file_atomic(d / snapshot_name(leo), encode_snapshot(leo, state.open_txns()), fsync=sync)
            snapshots[leo] = snapshot_name(leo)
            changed = True
        base_set = set(bases)
        for off, name in snapshots.items():
            if off != leo and off not in base_set and (d / name).exists():
                _unlink(d / name)
                changed = True
        if changed and sync:
            _fsync_dir(d)
    except OSError as exc:
        log.warning("recovery: could not tidy the transaction files of %s: %s", d, exc)
    return failed
