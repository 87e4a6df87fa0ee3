"""Open-time recovery of a partition directory (see the layout in storage/log.py).

``recover`` runs once, before a ``PartitionLog`` serves anything:

1. removes temporaries of interrupted operations (``*.cleaned``, ``*.tmp``),
   completes interrupted compaction swaps (``<base>-<end>.swap``) and removes
   index files that have no segment;
2. opens the segments in offset order. The last one is fully CRC-validated
   and truncated at the first torn/corrupt batch unless the previous shutdown
   was clean (``clean-shutdown`` present). A segment that overlaps its
   predecessor, and the segments after a corrupt non-last one, are dropped;
3. derives the log end offset and the log start offset (``log-start-offset``).

Also home to the small file helpers that log.py and compaction.py share.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .config import LogConfig
from .segment import LOG_SUFFIX, Segment, parse_segment_name, segment_name

# same logger as before the split out of log.py
log = logging.getLogger("storage.log")

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
                _delete_segment_files(d, later)
            break
        segs.append(seg)
        if not seg.indexes_saved and not last:
            seg.seal()
            pending_seal.append(seg)
        if truncated is not None and not last:
            log.warning("recovery: corrupt segment %s was not the last; dropping later segments", seg.log_path)
            for later in bases[i + 1:]:
                _delete_segment_files(d, later)
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
    return Recovered(tuple(segs), log_start, leo, pending_seal, dir_dirty)


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


def _delete_segment_files(d: Path, base: int) -> None:
    for suffix in (LOG_SUFFIX, ".index", ".timeindex"):
        _unlink(d / (segment_name(base) + suffix))


def _read_log_start(d: Path) -> int | None:
    try:
        return int((d / LOG_START_FILE).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
