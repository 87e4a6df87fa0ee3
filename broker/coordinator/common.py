"""Pieces shared by the coordinator's shard logic and its runtime."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode


@dataclass
class GroupConfig:
    """Kafka 4.1's group coordinator settings (names in comments)."""

    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_topic_segment_bytes: int = 104857600  # offsets.topic.segment.bytes
    offsets_retention_ms: int = 10080 * 60_000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offsets_commit_timeout_ms: int = 5000  # offsets.commit.timeout.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    group_initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms (Kafka: 3000)
    group_max_size: int = 2**31 - 1  # group.max.size
    new_member_join_timeout_ms: int = 300_000  # internal constant in Kafka
    append_linger_ms: int = -1  # group.coordinator.append.linger.ms (-1: adaptive, Kafka 4.2+'s default)
    group_consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    group_consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    # group.consumer.assignment.interval.ms (Kafka 4.4): at most one target assignment per interval; 0: one per change
    group_consumer_assignment_interval_ms: int = 1_000
    # kafkalite's own: the interval handed to a member that waits for partitions or must revoke some
    # (docs/configuration.md, "Hand-over"); the plain interval (or more) turns it off
    group_consumer_pending_heartbeat_interval_ms: int = 100
    group_consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    group_consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    group_share_session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    group_share_heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    group_share_max_size: int = 200  # group.share.max.size
    group_share_assignment_interval_ms: int = 1_000  # group.share.assignment.interval.ms (KIP-1263, 4.3+)
    group_share_initialize_retry_interval_ms: int = 30_000  # group.share.initialize.retry.interval.ms
    # per-group configs set by AlterConfigs (KIP-848): group id -> {Kafka group config name: value};
    # the cluster's dict itself (Cluster.group_configs), so a change applies at the next heartbeat
    group_overrides: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_broker(cls, config) -> GroupConfig:
        """The group coordinator's settings, from the broker's (a ``BrokerConfig``)."""
        return cls(
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            offsets_retention_ms=config.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            group_min_session_timeout_ms=config.group_min_session_timeout_ms,
            group_max_session_timeout_ms=config.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            group_max_size=config.group_max_size,
            append_linger_ms=config.group_coordinator_append_linger_ms,
            group_consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
            group_consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            group_consumer_assignment_interval_ms=config.group_consumer_assignment_interval_ms,
            group_consumer_pending_heartbeat_interval_ms=config.group_consumer_pending_heartbeat_interval_ms,
            group_consumer_max_size=config.group_consumer_max_size,
            group_consumer_migration_policy=config.group_consumer_migration_policy.lower(),
            group_share_session_timeout_ms=config.group_share_session_timeout_ms,
            group_share_heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
            group_share_max_size=config.group_share_max_size,
            group_share_assignment_interval_ms=config.group_share_assignment_interval_ms,
            group_share_initialize_retry_interval_ms=config.group_share_initialize_retry_interval_ms,
        )

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        """``consumer.session.timeout.ms`` of the group, else group.consumer.session.timeout.ms."""
        return self._group_int(group_id, "consumer.session.timeout.ms", self.group_consumer_session_timeout_ms)

    def consumer_assignment_interval_ms(self, group_id: str) -> int:
        """``consumer.assignment.interval.ms`` of the group, else group.consumer.assignment.interval.ms."""
        value = self.group_overrides.get(group_id, {}).get("consumer.assignment.interval.ms") if self.group_overrides else None
        return int(value) if value is not None else self.group_consumer_assignment_interval_ms

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        """``consumer.heartbeat.interval.ms`` of the group, else group.consumer.heartbeat.interval.ms."""
        return self._group_int(group_id, "consumer.heartbeat.interval.ms", self.group_consumer_heartbeat_interval_ms)


    def _group_int(self, group_id: str, name: str, default: int) -> int:
        value = self.group_overrides.get(group_id, {}).get(name) if self.group_overrides else None
        return int(value) if value is not None else default

    def share_session_timeout_ms(self, group_id: str) -> int:
        """``share.session.timeout.ms`` of the group, else group.share.session.timeout.ms."""
        return self._group_int(group_id, "share.session.timeout.ms", self.group_share_session_timeout_ms)

    def share_heartbeat_interval_ms(self, group_id: str) -> int:
        """``share.heartbeat.interval.ms`` of the group, else group.share.heartbeat.interval.ms."""
        return self._group_int(group_id, "share.heartbeat.interval.ms", self.group_share_heartbeat_interval_ms)

    def share_assignment_interval_ms(self, group_id: str) -> int:
        """``share.assignment.interval.ms`` of the group, else group.share.assignment.interval.ms."""
        return self._group_int(group_id, "share.assignment.interval.ms", self.group_share_assignment_interval_ms)


class ShardPart:
    """One kind of group's logic on a shard (consumer, share): shortcuts to the shard it runs on."""

    def __init__(self, shard) -> None:
        self.shard = shard
        self.config = shard.config

    @property
    def timers(self):
        return self.shard.timers

    @property
    def groups(self) -> dict:
        return self.shard.groups

    def now(self) -> int:
        return self.shard.now_ms()

    def _emit(self, key, value) -> None:
        self.shard.emit(key, value)


@dataclass
class Result:
    """What a shard operation hands back to the runtime: data, no side effects.

    ``records`` are typed ``(key, value)`` pairs of ``protocol.group_records``
    for ``__consumer_offsets`` (a ``None`` value is a tombstone), in the order
    they must be written. ``GroupShard.run`` has already applied them to the
    shard's state (see its docstring); the runtime encodes them once, appends
    them, shows offsets to reads once they are durable, and only then releases
    ``response`` and publishes ``events``.
    ``response`` is a value, or a future the group logic resolves later (a
    parked JoinGroup or SyncGroup).
    ``on_commit`` runs once the records are durable; ``on_failure(error)`` if the
    append failed (classic SyncGroup answers its members from these).
    ``producer`` (producer id, epoch) makes the records a transactional batch of
    that producer (TxnOffsetCommit); ``marker`` (producer id, epoch, coordinator
    epoch, commit) is a COMMIT or ABORT control batch written after them.
    ``extra`` is data for the service alone (never part of the answer).
    """

    records: list = field(default_factory=list)
    response: Any = None
    events: list = field(default_factory=list)
    on_commit: Callable[[], None] | None = None
    on_failure: Callable[[ErrorCode], None] | None = None
    producer: tuple[int, int] | None = None
    marker: tuple[int, int, int, bool] | None = None
    extra: Any = None  # data for the service alone, never the client's (DeleteGroups: share state to delete)


@dataclass(slots=True)
class GroupEvent:
    """One entry of the group event stream (``__kafkalite_group_events``, docs/group-events.md)."""

    group: str
    event: str
    ts_ms: int
    fields: dict

    def as_json(self) -> dict:
        # "ts" in seconds, as the stream has always carried it (pipeline/rebalances.py reads it)
        return {"event": self.event, "ts": self.ts_ms / 1000.0, "group": self.group, **self.fields}


def _call_all(callbacks: list) -> Callable:
    def call(*args) -> None:
        for fn in callbacks:
            fn(*args)

    return call


def merge_results(out) -> Result:
    """One Result from what an operation returned: a Result, None, or a list of
    Results and bare records (timer callbacks and the classic phase helpers)."""
    if isinstance(out, Result):
        return out
    result = Result()
    commits: list = []
    failures: list = []
    for item in out or ():
        if isinstance(item, Result):
            result.records += item.records
            result.events += item.events
            if item.on_commit is not None:
                commits.append(item.on_commit)
            if item.on_failure is not None:
                failures.append(item.on_failure)
        else:
            result.records.append(item)
    if commits:
        result.on_commit = commits[0] if len(commits) == 1 else _call_all(commits)
    if failures:
        result.on_failure = failures[0] if len(failures) == 1 else _call_all(failures)
    return result


class CoordinatorError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code

    @property
    def message(self) -> str | None:
        """The error message for the client, or None when there is nothing beyond the code."""
        text = str(self)
        return None if text == self.code.name else text


TIMER = 3  # a journal entry of Timers (see GroupShard.run)


class Timers:
    """Keyed one-shot timers on an injected clock, fired by ``fire_due``.

    Scheduling a key again replaces the previous timer; a cancelled timer
    never fires. The runtime calls ``fire_due`` from the shard's own event
    loop; tests call it after moving a manual clock.

    ``lost_ms``, when given, returns how long (in all, in ms) the event loop
    has been unable to run: CPU starvation, a stopped process, a long blocking
    call (``runtime.LoopWatch``). A timer that comes due after the loop lost
    time while it was pending does not run at once: requests that would have
    re-armed it (a heartbeat, a JoinGroup) may be waiting, unread or unhandled,
    behind the stall. It is re-armed once, as far ahead as the time the loop
    lost (at most its own delay again, so a suspended laptop's broker does not
    keep dead members for hours), and runs then if nothing re-armed or
    cancelled it meanwhile. Kafka's
    coordinator gets the same effect from its event queue: a heartbeat that
    arrived before a timer's expiry event is handled first and cancels it.
    """

    def __init__(self, clock_ms: Callable[[], int], lost_ms: Callable[[], int] | None = None) -> None:
        self.clock_ms = clock_ms
        self.lost_ms = lost_ms
        self._heap: list[tuple[int, int, str]] = []
        # key -> (seq, callback, loop time lost when armed, delay, already given time back, deadline,
        # deadline of its entry in the heap (earlier than the deadline once pushed back))
        self._live: dict[str, tuple[int, Callable[[], Any], int, int, bool, int, int]] = {}
        # while a shard operation runs: (TIMER, key, the entry before) for every change, to undo a failed one
        self.journal: list | None = None
        self._seq = itertools.count()
        self.on_change: Callable[[int], None] | None = None
        # while a timer's callback runs: how long after its deadline it fired
        self.firing_late_ms = 0
        # timers given time back by the last fire_due: (key, ms)
        self.extended: list[tuple[str, int]] = []

    def schedule(self, key: str, delay_ms: int, fn: Callable[[], Any]) -> None:
        deadline = self.clock_ms() + max(delay_ms, 0)
        old = self._live.get(key)
        if self.journal is not None:
            self.journal.append((TIMER, key, old))
        if old is not None and old[6] <= deadline:
            # pushed back (a session timer at every heartbeat): the heap entry already queued stays,
            # and fire_due moves it on when it comes up; the heap holds one entry per timer, not per heartbeat
            self._live[key] = (old[0], fn, self.lost_ms() if self.lost_ms is not None else 0, max(delay_ms, 0), False, deadline, old[6])
            return
        seq = next(self._seq)
        self._live[key] = (seq, fn, self.lost_ms() if self.lost_ms is not None else 0, max(delay_ms, 0), False, deadline, deadline)
        heapq.heappush(self._heap, (deadline, seq, key))
        if self.on_change is not None and self._heap[0][1] == seq:
            self.on_change(deadline)

    def cancel(self, key: str) -> None:
        entry = self._live.pop(key, None)
        if entry is not None and self.journal is not None:
            self.journal.append((TIMER, key, entry))

    def restore(self, key: str, entry) -> None:
        """Put back a timer as it was (undoing a failed operation)."""
        if entry is None:
            self._live.pop(key, None)
            return
        self._live[key] = entry = entry[:6] + (entry[5],)
        heapq.heappush(self._heap, (entry[5], entry[0], key))
        if self.on_change is not None:
            self.on_change(entry[5])

    def is_scheduled(self, key: str) -> bool:
        return key in self._live

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap and self._live.get(heap[0][2], (None,))[0] != heap[0][1]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def fire_due(self) -> list[Any]:
        """Run every timer whose deadline has passed; returns their results."""
        now = self.clock_ms()
        lost_now = self.lost_ms() if self.lost_ms is not None else 0
        out = []
        self.extended = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, seq, key = heapq.heappop(heap)
            live = self._live.get(key)
            if live is None or live[0] != seq:
                continue
            if live[5] > deadline:  # pushed back since this entry was queued: queue it again, for its deadline
                self._live[key] = live[:6] + (live[5],)
                heapq.heappush(heap, (live[5], seq, key))
                continue
            _, fn, lost_at_arm, delay, given, _, _ = live
            lost = min(lost_now - lost_at_arm, delay)
            # not journaled: a timer that fired stays consumed even if its operation is rolled
            # back (a callback that raises is a bug; firing it again at once would spin the loop)
            if lost > 0 and not given:
                seq2 = next(self._seq)
                self._live[key] = (seq2, fn, lost_at_arm, delay, True, now + lost, now + lost)
                heapq.heappush(heap, (now + lost, seq2, key))
                self.extended.append((key, lost))
                continue
            del self._live[key]
            self.firing_late_ms = now - deadline
            try:
                out.append(fn())
            finally:
                self.firing_late_ms = 0
        return out

    def __len__(self) -> int:
        return len(self._live)
