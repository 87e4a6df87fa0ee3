"""The group coordinator's runtime: ``GroupShard``s on ``__consumer_offsets``, in the one coordinator runtime.

Each partition of ``__consumer_offsets`` is one ``GroupShard`` served by a
``ShardRuntime``, which is ``broker.coordinator_runtime``'s ``CoordinatorRuntime``
(loading, batching, durable answers, timers, unload) given the group shard, the
group settings (``group.coordinator.append.linger.ms``, ``offsets.load.buffer.size``),
the group event stream and the loop watch below. Every write operation, timers
included, runs atomically through ``GroupShard.run`` and returns one ``Result``
of typed records, a response and group events; a commit storm costs one append
per batch, and answers leave only once their batch is durable.

A single event loop handles the requests and fires the timers, so when it
cannot run for a while (the process starved of CPU, stopped, or stuck in a
long call) the timers that came due meanwhile fire before the requests that
arrived meanwhile are read: with uvloop, due timers run before the loop polls
its sockets. ``LoopWatch`` measures the time the loop lost, and the shard's
``Timers`` give it back once to every timer that was pending during it (see
``common.Timers``), so a member whose heartbeat is waiting behind a stall is
not fenced for the broker's delay.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from ..coordinator_runtime.constants import OFFSETS_LOAD_BUFFER_BYTES, OFFSETS_TOPIC, now_ms
from ..coordinator_runtime.runtime import ACTIVE, FAILED, FREEZE_MIN_RECORDS, LOADING, UNLOADED, CoordinatorRuntime, _chunks
from .common import CoordinatorError, GroupConfig
from .lost import group_name, report_cuts
from .shard import GroupShard

__all__ = ["ACTIVE", "FAILED", "FREEZE_MIN_RECORDS", "LOADING", "UNLOADED", "LoopWatch", "ShardRuntime", "_chunks"]


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


# how far back ``LoopWatch.recent_stall_ms`` looks
RECENT_MS = 30_000
# how many stalls of at least SUSTAINED_OVER_MS in that window make the loop "stalling"
# (``sustained_stall_ms``): the loop busy for 60-80 ms while a thousand members join at once is
# not a starved machine, and answers that late still meet a 100 ms deadline
SUSTAINED_STALLS = 3
SUSTAINED_OVER_MS = 100


class LoopWatch:
    """How much time the event loop has lost, in all: a tick every ``period_ms``, and how late it ran.

    A tick later than ``tolerance_ms`` means the loop could not run (or was
    too busy to) for that long; the lateness is added to ``lost_ms()``, which
    also counts a stall still in progress (the tick overdue right now), so a
    timer that fires first thing after a stall already sees it.
    """

    def __init__(self, loop, clock_ms: Callable[[], int] = _monotonic_ms, period_ms: int = 100, tolerance_ms: int = 50) -> None:
        self.loop = loop
        self.clock_ms = clock_ms
        self.period_ms = period_ms
        self.tolerance_ms = tolerance_ms
        self._lost = 0
        self._last = clock_ms()
        self._handle = None
        self.stalls = 0  # ticks that came late
        # (when, how late) of late ticks of the last RECENT_MS, each later than every one after it: the
        # first is the longest (a monotonic queue, so reading it costs nothing on the heartbeat path)
        self._recent: deque[tuple[int, int]] = deque()
        self._stall_times: deque[int] = deque()  # when each tick late by SUSTAINED_OVER_MS or more came, in the last RECENT_MS

    def start(self) -> None:
        self._last = self.clock_ms()
        self._handle = self.loop.call_later(self.period_ms / 1000, self.tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _overdue(self, now: int) -> int:
        late = now - self._last - self.period_ms
        return late if late > self.tolerance_ms else 0

    def tick(self) -> None:
        now = self.clock_ms()
        late = self._overdue(now)
        if late:
            self._lost += late
            self.stalls += 1
            if late >= SUSTAINED_OVER_MS:
                self._stall_times.append(now)
            recent = self._recent
            while recent and recent[-1][1] <= late:
                recent.pop()  # shorter and older than this one: never the longest again
            recent.append((now, late))
        self._last = now
        if self._handle is not None:
            self._handle = self.loop.call_later(self.period_ms / 1000, self.tick)

    def recent_stall_ms(self) -> int:
        """The longest stall of the last ``RECENT_MS``, a stall in progress included (0: none)."""
        now = self.clock_ms()
        recent = self._recent
        while recent and now - recent[0][0] > RECENT_MS:
            recent.popleft()
        worst = recent[0][1] if recent else 0
        return max(worst, self._overdue(now)) if self._handle is not None else worst

    def sustained_stall_ms(self) -> int:
        """``recent_stall_ms`` once the loop has stalled for ``SUSTAINED_OVER_MS`` or more at least
        ``SUSTAINED_STALLS`` times in the last ``RECENT_MS`` (a stall in progress counts), else 0."""
        now = self.clock_ms()
        times = self._stall_times
        while times and now - times[0] > RECENT_MS:
            times.popleft()
        in_progress = 1 if self._handle is not None and self._overdue(now) >= SUSTAINED_OVER_MS else 0
        if len(times) + in_progress < SUSTAINED_STALLS:
            return 0
        return self.recent_stall_ms()

    def lost_ms(self) -> int:
        """Milliseconds the loop has lost since the watch started, a stall in progress included."""
        if self._handle is None:
            return self._lost
        return self._lost + self._overdue(self.clock_ms())


class ShardRuntime(CoordinatorRuntime):
    """One ``__consumer_offsets`` partition: the coordinator runtime with a ``GroupShard``."""

    def __init__(self, index: int, partition, config: GroupConfig, *, fsync_always: bool, log, clock_ms: Callable[[], int] = now_ms, metadata=None,
                 watch: LoopWatch | None = None, publisher=None, arrivals=None) -> None:
        self.metadata = metadata
        self.watch = watch
        self.arrivals = arrivals  # arrivals.Arrivals: requests read and queued, not handled yet
        self.config = config
        self.share_state_hook = False  # the broker has a share-state hook (GroupCoordinator.share_state): every new shard is told
        super().__init__(index, partition, topic=OFFSETS_TOPIC, fsync_always=fsync_always, log=log.bind(shard=index), clock_ms=clock_ms,
                         load_chunk=OFFSETS_LOAD_BUFFER_BYTES, error=CoordinatorError, publisher=publisher,
                         cuts=lambda plog: report_cuts(plog, OFFSETS_TOPIC, index, "groups", group_name))

    @property
    def linger_ms(self) -> int:  # group.coordinator.append.linger.ms
        return self.config.append_linger_ms

    def _new_shard(self) -> GroupShard:
        shard = GroupShard(
            self.index, self.config, self.clock_ms, self.log, self.loop.create_future, self.submit, metadata=self.metadata,
            lost_ms=self.watch.lost_ms if self.watch is not None else None,
            recent_stall_ms=self.watch.sustained_stall_ms if self.watch is not None else None,
            waiting=self.arrivals.waiting if self.arrivals is not None else None,
            silent_ms=self.arrivals.silent_ms if self.arrivals is not None else None,
        )
        shard.share_state_hook = self.share_state_hook
        shard.timers.on_change = self._arm_timer
        return shard
