"""A partition's leader epochs: where each epoch's first batch is in the log.

``leader-epoch-checkpoint`` in the partition directory holds, in Kafka's text
format (``0``, the count, then ``<epoch> <start offset>`` per line), the epochs
after 0 that wrote to the partition and the offset each began at. Epoch 0 is
never written down: a single node stays at 0 for ever, and an epoch below the
first one listed ends where that one starts. A cluster node made active at a
higher epoch (broker/multinode/) adds its epoch at its first append.

``end_offset_for`` answers OffsetForLeaderEpoch (KIP-101, KIP-320): the last
epoch at or below the one asked for and the offset it ended at (the next
epoch's start, or the log end offset for the current epoch); a consumer whose
position lies past that end knows the log was truncated under it.

The file is rewritten whole (``write_file_atomic``; fsynced under fsync=always, as the
appends are) when an epoch is added, when truncation at the end drops one, and when
the log start moves past where one began (retention and DeleteRecords: the first epoch
kept then begins at the new log start, as in Kafka). One that cannot be read (damaged by hand, cut by a crash
before the rename) is ignored with a warning: the answers then fall back to
"every earlier epoch ends at the log end offset", as before any epoch was kept.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from pathlib import Path

from .index import write_file_atomic

log = logging.getLogger(__name__)

FILE = "leader-epoch-checkpoint"
VERSION = 0
MAX_ENTRIES = 100_000  # a file listing more is not one this broker wrote
UNDEFINED = (-1, -1)


class LeaderEpochs:
    def __init__(self, directory: Path, *, fsync: bool, present: bool = True) -> None:
        """``present=False``: the caller listed the directory and saw no checkpoint (no read at start)."""
        self.path = Path(directory) / FILE
        self.fsync = fsync
        self.entries: list[tuple[int, int]] = []  # (epoch, start offset), both increasing
        if present:
            self._load()

    def _load(self) -> None:
        try:
            text = self.path.read_text("ascii")
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("leader-epoch-checkpoint unreadable, ignored: %s (%s)", self.path, exc)
            return
        entries = _parse(text)
        if entries is None:
            log.warning("leader-epoch-checkpoint malformed, ignored: %s", self.path)
            return
        self.entries = entries

    @property
    def latest(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def assign(self, epoch: int, start_offset: int) -> None:
        """Epoch ``epoch`` writes from ``start_offset`` on (a no-op unless it is newer than the latest)."""
        if epoch <= self.latest:
            return
        self.entries.append((epoch, start_offset))
        self._save()

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: epochs that began at or after it wrote nothing left."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset`` (retention, DeleteRecords), as Kafka's
        ``truncateFromStart``: epochs that began at or below it go, and the last of them is kept,
        beginning at ``start_offset``, since the records it wrote from there on are still here."""
        below = [e for e in self.entries if e[1] <= start_offset]
        if not below or (len(below) == 1 and below[0][1] == start_offset):
            return
        self.entries = [(below[-1][0], start_offset), *self.entries[len(below):]]
        self._save()

    def end_offset_for(self, requested: int, current: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch asking about ``requested``, on a leader
        at epoch ``current`` whose log ends at ``log_end_offset``; (-1, -1) when undefined."""
        if requested < 0:
            return UNDEFINED
        entries = self.entries
        if not entries or entries[-1][0] < current:  # the current epoch, which has not written yet
            entries = [*entries, (current, log_end_offset)]
        if requested == entries[-1][0]:
            return requested, log_end_offset
        if requested > entries[-1][0]:
            return UNDEFINED
        at = bisect_right(entries, (requested, float("inf")))  # the first entry of a later epoch
        higher_start = entries[at][1]
        if at == 0:  # older than every epoch kept: it ended where the first one began
            return requested, higher_start
        return entries[at - 1][0], higher_start

    def epoch_at(self, offset: int, current: int, log_end_offset: int) -> int:
        """The epoch that wrote ``offset`` (ListOffsets' leader_epoch); the current one at the log end."""
        if offset >= log_end_offset:
            return current
        at = bisect_right(self.entries, offset, key=lambda e: e[1])  # the first epoch that began after it
        return self.entries[at - 1][0] if at else 0

    def _save(self) -> None:
        body = f"{VERSION}\n{len(self.entries)}\n" + "".join(f"{e} {o}\n" for e, o in self.entries)
        write_file_atomic(self.path, body.encode("ascii"), fsync=self.fsync)


def latest_leader_epoch(data_dir: Path) -> int:
    """The highest epoch any partition directory of ``data_dir`` lists (0 if none)."""
    latest = 0
    for path in Path(data_dir).glob(f"*/{FILE}"):
        try:
            entries = _parse(path.read_text("ascii"))
        except (OSError, UnicodeDecodeError):
            continue
        if entries:
            latest = max(latest, entries[-1][0])
    return latest


def _parse(text: str) -> list[tuple[int, int]] | None:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        return None
    try:
        count = int(lines[1])
    except ValueError:
        return None
    if not 0 <= count <= MAX_ENTRIES or len(lines) != count + 2:
        return None
    entries = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != 2:
            return None
        try:
            epoch, offset = int(parts[0]), int(parts[1])
        except ValueError:
            return None
        if epoch < 0 or offset < 0 or (entries and (epoch <= entries[-1][0] or offset < entries[-1][1])):
            return None
        entries.append((epoch, offset))
    return entries
