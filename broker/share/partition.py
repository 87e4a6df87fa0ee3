"""One share partition: the in-flight records of a share group on one topic partition (KIP-932).

Kafka 4.4's ``SharePartition`` rules, kept as per-offset entries between the
share-partition start offset (SPSO, ``start``) and the end of what was ever
acquired (SPEO, ``end``; ``start - 1`` when nothing is in flight):

* an offset is AVAILABLE (0), ACQUIRED (1), ACKNOWLEDGED (2) or ARCHIVED (4);
  an offset in the window with no entry (a gap the log does not hold) counts
  as done;
* ``acquire`` hands out AVAILABLE offsets of the batches just read from the
  log, then new offsets past ``end``, each with its delivery count + 1 and an
  acquisition lock of ``share.record.lock.duration.ms``; no new offset is
  acquired once the window holds ``share.partition.max.record.locks``
  offsets (Kafka's max in-flight records), nor more than ``max_records``;
* ``acknowledge`` of ACQUIRED offsets of the same member: ACCEPT makes them
  ACKNOWLEDGED, REJECT (and a GAP, type 0) ARCHIVED, RELEASE makes them
  AVAILABLE again (ARCHIVED once the delivery count reached
  ``share.delivery.count.limit``), RENEW restarts their lock; anything else is
  INVALID_RECORD_STATE (offsets past what was acquired: INVALID_REQUEST, as
  Kafka 4.4) and the whole acknowledgement of the partition is refused
  (validated before anything changes);
* an expired lock releases its offsets as RELEASE does;
* the SPSO moves past ACKNOWLEDGED and ARCHIVED offsets at the front.

Every change Kafka persists (acknowledgements, releases, lock expiry; not
acquisition) is handed to ``persist(start, batches, delivery complete count)`` before it takes effect
in memory; if that raises, nothing changed. Acquired offsets are persisted
as AVAILABLE, so a restart delivers them again.

No asyncio, no clock of its own: time is ``clock_ms`` and locks are keys of
the given ``Timers`` (broker/coordinator/common.py), which the tests fire by
moving a manual clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.share_records import StateBatch

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_DONE = (ACKNOWLEDGED, ARCHIVED)

MSG_NOT_ACQUIRED = "The offset cannot be acknowledged. The offset is not acquired."
MSG_NOT_OWNER = "Member is not the owner of offset"
MSG_NOT_FOUND = "Batch record not found. The request batch offsets are not found in the cache."
MSG_RENEW_DISABLED = "Renewing acquisition locks is not enabled for the group."
MSG_FIRST_PAST = "Batch record not found. The first offset in request is past acquired records."
MSG_LAST_PAST = "Batch record not found. The last offset in request is past acquired records."


@dataclass(slots=True)
class Limits:
    """The settings a share partition reads at each use (group config over broker default)."""

    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000
    renew_enabled: bool = True  # the group config share.renew.acknowledge.enable


class Entry:
    __slots__ = ("count", "lock", "member", "state")

    def __init__(self, state: int, count: int, member: str | None = None, lock: int = 0) -> None:
        self.state = state
        self.count = count
        self.member = member
        self.lock = lock


class AckError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SharePartition:
    def __init__(self, name: str, limits: Callable[[], Limits], timers, persist: Callable[[int, list[StateBatch], int], None]) -> None:
        self.name = name  # the timers' key prefix
        self.limits = limits
        self.timers = timers
        self.persist = persist
        self.start = 0
        self.end = -1
        self.entries: dict[int, Entry] = {}
        self.locks: dict[int, list[int]] = {}  # lock id -> [first, last, offsets still holding it]
        self._next_lock = 1

    # ================================================================ loading
    def load(self, start: int, batches: list[StateBatch]) -> None:
        """The persisted state: the SPSO and the state batches (AVAILABLE, ACKNOWLEDGED, ARCHIVED).

        Only the first ``2 * max_record_locks`` offsets past the SPSO are kept (a state
        this share partition wrote never holds more); offsets beyond are treated as
        never delivered."""
        batches = sorted((b for b in batches if b.last_offset >= start and b.last_offset >= b.first_offset), key=lambda b: b.first_offset)
        # leading done ranges move the SPSO without being expanded
        for b in batches:
            if b.first_offset > start or b.delivery_state not in _DONE:
                break
            start = max(start, b.last_offset + 1)
        self.start, self.end, self.entries = start, start - 1, {}
        cap = start + 2 * max(self.limits().max_record_locks, 1)
        for b in batches:
            state = b.delivery_state if b.delivery_state in _DONE else AVAILABLE
            for o in range(max(b.first_offset, start), min(b.last_offset + 1, cap)):
                self.entries[o] = Entry(state, max(b.delivery_count, 0))
                self.end = max(self.end, o)
        self._advance()

    # ================================================================ reading
    def next_fetch_offset(self) -> int:
        avail = [o for o, e in self.entries.items() if e.state == AVAILABLE]
        return min(avail) if avail else self.end + 1

    def can_acquire(self) -> bool:
        if any(e.state == AVAILABLE for e in self.entries.values()):
            return True
        return self.end - self.start + 1 < self.limits().max_record_locks

    def move_start(self, log_start: int) -> None:
        """The log lost offsets below ``log_start`` (retention, DeleteRecords): so does the window."""
        if log_start <= self.start:
            return
        for o in [o for o in self.entries if o < log_start]:
            entry = self.entries.pop(o)
            if entry.state == ACQUIRED:
                self._lock_done(entry.lock)
        self.start = log_start
        self.end = max(self.end, log_start - 1)

    # ================================================================ acquiring
    def acquire(self, member: str, batches: list[tuple[int, int]], max_records: int, control: frozenset = frozenset()) -> list[tuple[int, int, int]]:
        """Acquire offsets of the batches read (``(base, last)`` in log order) for ``member``;
        returns the acquired ranges ``(first, last, delivery count)``. Batches whose base offset
        is in ``control`` (transaction markers, aborted batches under read_committed) are never
        handed out: the window moves past them."""
        limits = self.limits()
        lock = self._next_lock
        acquired: list[int] = []
        full = False
        for base, last in batches:
            if full:
                break
            if base in control:
                for o in range(max(base, self.start), min(last, self.end) + 1):
                    entry = self.entries.get(o)
                    if entry is not None and entry.state == AVAILABLE:
                        del self.entries[o]  # a record no one gets counts as done
                if last > self.end and (not acquired or acquired[-1] < base):
                    self.end = last
                continue
            for o in range(max(base, self.start), last + 1):
                if len(acquired) >= max_records:
                    full = True
                    break
                if o <= self.end:
                    entry = self.entries.get(o)
                    if entry is None or entry.state != AVAILABLE:
                        continue
                    entry.state, entry.count, entry.member, entry.lock = ACQUIRED, entry.count + 1, member, lock
                else:
                    if o - self.start + 1 > limits.max_record_locks:
                        full = True
                        break
                    self.entries[o] = Entry(ACQUIRED, 1, member, lock)
                    self.end = o
                acquired.append(o)
        if not acquired:
            self._advance()
            return []
        self._next_lock += 1
        self.locks[lock] = [acquired[0], acquired[-1], len(acquired)]
        self.timers.schedule(self._lock_key(lock), limits.lock_duration_ms, lambda: self._expire(lock))
        self._advance()
        return self._ranges(acquired)

    def _ranges(self, offsets: list[int]) -> list[tuple[int, int, int]]:
        out: list[list[int]] = []
        for o in offsets:
            count = self.entries[o].count
            if out and out[-1][1] == o - 1 and out[-1][2] == count:
                out[-1][1] = o
            else:
                out.append([o, o, count])
        return [tuple(r) for r in out]

    # ================================================================ acknowledging
    def acknowledge(self, member: str, batches: list[tuple[int, int, list[int]]]) -> None:
        """Apply ``(first, last, types)`` acknowledgement batches of ``member`` (validated by the
        caller: ordered, not overlapping, types of the right length); all or nothing.
        Raises AckError (nothing changed) or what ``persist`` raises."""
        if not self.limits().renew_enabled and any(RENEW in types for _, _, types in batches):
            raise AckError(ErrorCode.invalid_record_state, MSG_RENEW_DISABLED)
        changes: list[tuple[int, int]] = []  # (offset, acknowledge type)
        for first, last, types in batches:
            if first > self.end:
                raise AckError(ErrorCode.invalid_request, MSG_FIRST_PAST)
            if last > self.end:
                raise AckError(ErrorCode.invalid_request, MSG_LAST_PAST)
            if first < self.start:
                raise AckError(ErrorCode.invalid_record_state, MSG_NOT_FOUND)
            for o in range(first, last + 1):
                t = types[0] if len(types) == 1 else types[o - first]
                entry = self.entries.get(o)
                if entry is None or entry.state != ACQUIRED:
                    if t == GAP and (entry is None or entry.state in _DONE):
                        continue
                    raise AckError(ErrorCode.invalid_record_state, MSG_NOT_ACQUIRED)
                if entry.member != member:
                    raise AckError(ErrorCode.invalid_record_state, MSG_NOT_OWNER)
                changes.append((o, t))
        self._apply(changes)

    def _apply(self, changes: list[tuple[int, int]], *, strict: bool = True) -> None:
        """Persist, then apply. ``strict=False`` (lock expiry, a session's end) applies the change
        even if persisting fails, as Kafka's does: the offsets are delivered again either way."""
        limit = self.limits().delivery_count_limit
        renew = [o for o, t in changes if t == RENEW]
        final = {}
        for o, t in changes:
            if t == RENEW:
                continue
            if t == ACCEPT:
                final[o] = ACKNOWLEDGED
            elif t == RELEASE:
                final[o] = ARCHIVED if self.entries[o].count >= limit else AVAILABLE
            else:  # REJECT, GAP
                final[o] = ARCHIVED
        if final:
            try:
                self._persist_states(final)
            except Exception:
                if strict:
                    raise
        for o, state in final.items():
            entry = self.entries[o]
            lock = entry.lock
            entry.state, entry.member, entry.lock = state, None, 0
            self._lock_done(lock)
        if renew:
            self._renew(renew)
        self._advance()

    def _renew(self, offsets: list[int]) -> None:
        lock = self._next_lock
        self._next_lock += 1
        for o in offsets:
            entry = self.entries[o]
            old = entry.lock
            entry.lock = lock
            self._lock_done(old)
        self.locks[lock] = [min(offsets), max(offsets), len(offsets)]
        self.timers.schedule(self._lock_key(lock), self.limits().lock_duration_ms, lambda: self._expire(lock))

    def release_member(self, member: str) -> None:
        """The member's share session ended: its acquired offsets are released (RELEASE)."""
        changes = [(o, RELEASE) for o, e in self.entries.items() if e.state == ACQUIRED and e.member == member]
        if changes:
            self._apply(changes, strict=False)

    # ================================================================ locks
    def _lock_key(self, lock: int) -> str:
        return f"{self.name}/{lock}"

    def _lock_done(self, lock: int) -> None:
        """One offset no longer holds ``lock``: forget it (and its timer) once none does."""
        span = self.locks.get(lock)
        if span is None:
            return
        span[2] -= 1
        if span[2] <= 0:
            del self.locks[lock]
            self.timers.cancel(self._lock_key(lock))

    def _expire(self, lock: int) -> None:
        span = self.locks.pop(lock, None)
        if span is None:
            return
        first, last, _ = span
        changes = [(o, RELEASE) for o in range(first, last + 1)
                   if (e := self.entries.get(o)) is not None and e.state == ACQUIRED and e.lock == lock]
        if changes:
            self._apply(changes, strict=False)

    # ================================================================ persisting
    def _persist_states(self, final: dict[int, int]) -> None:
        batches: list[StateBatch] = []
        for o in sorted(final):
            state, count = final[o], self.entries[o].count
            prev = batches[-1] if batches else None
            if prev is not None and prev.last_offset == o - 1 and prev.delivery_state == state and prev.delivery_count == count:
                batches[-1] = StateBatch(prev.first_offset, o, state, count)
            else:
                batches.append(StateBatch(o, o, state, count))
        # as Kafka 4.4 writes it: the start offset as it is before this change moves it (the next write
        # carries the new one), and the offsets at or above it whose delivery is complete after the change
        start = self.start
        done = sum(1 for o, e in self.entries.items() if o >= start and final.get(o, e.state) in _DONE)
        self.persist(start, batches, done)

    def _advance(self) -> None:
        while self.start <= self.end:
            entry = self.entries.get(self.start)
            if entry is not None and entry.state not in _DONE:
                break
            self.entries.pop(self.start, None)
            self.start += 1

    # ================================================================ views
    def state_of(self, offset: int) -> tuple[int, int] | None:
        """(state, delivery count) of an offset in flight (tests, DescribeShareGroupOffsets)."""
        entry = self.entries.get(offset)
        return None if entry is None else (entry.state, entry.count)
