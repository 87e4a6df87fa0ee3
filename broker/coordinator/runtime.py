"""The coordinator runtime: shards on ``__consumer_offsets``, write-then-respond.

Each partition of ``__consumer_offsets`` is one shard with a single writer
(the event loop). Every write operation, timers included, runs atomically
through ``GroupShard.run`` against the shard's latest state and returns one
``Result`` of typed records, a response and group events. The runtime adds it
to the shard's pending batch (flushed once the operations already queued on the
event loop have run, or after ``append_linger_ms`` when it is set, so a commit
storm costs one append per batch), encodes the records once, appends them, and
only when the batch is durable under the broker's fsync policy shows offsets
to reads, publishes the events and releases the responses. A failed append
reloads the shard from its log, which is the last durable state, and fails
the waiting requests with Kafka's translated error.

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

import asyncio
import gc
import time
from collections.abc import Callable

from protocol.errors import ErrorCode
from protocol.group_records import encode_key, encode_value
from protocol.records import build_end_txn_marker, build_key_value_batch, split_batches
from storage.crashpoints import crash_point

from ..cluster import AppendOrigin
from ..pending import Pending, settle
from .common import CoordinatorError, GroupConfig, Result
from .loader import ShardLoader, finish
from .lost import group_name, report_cuts
from .shard import GroupShard

LOADING, ACTIVE, FAILED = "loading", "active", "failed"
LOAD_CHUNK_BYTES = 5 * 1024 * 1024  # offsets.load.buffer.size
# a start-up load of at least this many records moves what it built out of the cyclic GC's reach (gc.freeze)
FREEZE_MIN_RECORDS = 10_000


def _now_ms() -> int:
    return int(time.time() * 1000)


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


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
        self._last = now
        if self._handle is not None:
            self._handle = self.loop.call_later(self.period_ms / 1000, self.tick)

    def lost_ms(self) -> int:
        """Milliseconds the loop has lost since the watch started, a stall in progress included."""
        if self._handle is None:
            return self._lost
        return self._lost + self._overdue(self.clock_ms())


def _chunks(records: list, limit: int):
    """Split records so each record batch stays well under max.message.bytes, as Kafka's coordinator does."""
    chunk: list = []
    size = 0
    for key, value in records:
        n = len(key) + (len(value) if value is not None else 0) + 24  # + per-record framing
        if chunk and size + n > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append((key, value))
        size += n
    if chunk:
        yield chunk


class _BatchFuture(asyncio.Future):
    """The future of one append, awaited by every request riding in it.

    It refuses cancellation: a task awaiting a future cancels it when the task
    is cancelled (a client hanging up), which would end every other request of
    the batch without an answer. The cancelled task ends when the batch does.
    Cheaper than ``asyncio.shield``, which costs a future and two callbacks a wait.
    """

    __slots__ = ()

    def cancel(self, msg=None) -> bool:
        return False


class ShardRuntime:
    def __init__(self, index: int, partition, config: GroupConfig, *, fsync_always: bool, log, clock_ms: Callable[[], int] = _now_ms, metadata=None,
                 watch: LoopWatch | None = None, publisher=None, arrivals=None) -> None:
        self.metadata = metadata
        self.publisher = publisher  # events.EventPublisher: the group event stream, or None
        self.watch = watch
        self.arrivals = arrivals  # arrivals.Arrivals: requests read and queued, not handled yet
        self.index = index
        self.partition = partition  # broker.cluster.Partition of __consumer_offsets
        self.config = config
        self.fsync_always = fsync_always
        self.log = log.bind(shard=index)
        self.clock_ms = clock_ms
        self.loop = asyncio.get_running_loop()
        self.state = LOADING
        self.shard = self._new_shard()
        self._pending: list[Result] = []
        self._pending_records: list = []  # typed (key, value) records of the pending results since the last part
        # what goes before them, in order: ("records", list) runs of plain records, ("txn", (producer id, epoch),
        # list) a transactional batch's records, ("marker", (producer id, epoch, coordinator epoch, commit))
        self._pending_parts: list = []
        self._batch_future: asyncio.Future | None = None
        self._flush_handle: asyncio.Handle | None = None
        self._timer_handle: asyncio.TimerHandle | None = None
        self._timer_deadline = 0
        self.load_stats: dict = {}

    def _new_shard(self) -> GroupShard:
        shard = GroupShard(
            self.index, self.config, self.clock_ms, self.log, self.loop.create_future, self.submit, metadata=self.metadata,
            lost_ms=self.watch.lost_ms if self.watch is not None else None,
            waiting=self.arrivals.waiting if self.arrivals is not None else None,
            silent_ms=self.arrivals.silent_ms if self.arrivals is not None else None,
        )
        shard.timers.on_change = self._arm_timer
        return shard

    # ================================================================ loading
    async def load(self, *, freeze: bool = True) -> None:
        """Replay the partition's log in order, yielding to the loop between chunks.

        The state is exactly what replaying every record in log order gives;
        ``loader.replay_batch`` gets there fast (offset commits by runs of
        same-layout records, their values decoded only if no later record
        replaced them). Control batches carry no coordinator records.

        The cyclic GC is off while the shard loads: it would walk the growing
        state again and again (a quarter of the load's CPU), and nothing the
        load makes is cyclic garbage. Once on again, its first collections
        would walk everything the load made, twice (as many milliseconds as
        the load's own replay, at a million records); so a start-up load
        (``freeze``) of ``FREEZE_MIN_RECORDS`` or more freezes what the
        process holds then (``gc.freeze``): the loaded state stays out of
        every later collection too. Frozen objects are freed by reference
        counting as usual; only a reference cycle among them is never
        collected: in the coordinator's state, a classic group loaded with
        members and later dropped with its members still in it (each member
        points back to its group), one small leak per such group, bounded by
        the start-up state. A reload after a failed append does not freeze.
        """
        t0 = time.perf_counter()
        self.state = LOADING
        plog = self.partition.log
        if getattr(plog, "recovery_truncations", None):
            report_cuts(plog, "__consumer_offsets", self.partition.index, "groups", group_name)
        shard = self.shard
        offset = plog.log_start_offset
        records = 0
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            loader = ShardLoader(shard)
            while offset < plog.log_end_offset:
                offset, n = await self._load_chunk(plog, offset, loader)
                records += n
            loader.apply()
            values = finish(shard)
            self._activate()
            if freeze and records >= FREEZE_MIN_RECORDS:
                gc.freeze()
        finally:
            if gc_was_enabled:
                gc.enable()
        elapsed = time.perf_counter() - t0
        self.load_stats = {"records": records, "seconds": elapsed}
        if records:
            self.log.info(
                "shard loaded",
                records=records,
                groups=len(shard.groups),
                offsets=shard.offsets.count(),
                values_decoded=values,
                group_records_skipped=loader.skipped_decodes,
                load_ms=round(elapsed * 1000, 1),
                skipped=shard.skipped_records,
            )

    async def _load_chunk(self, plog, offset: int, loader: ShardLoader) -> tuple[int, int]:
        """Scan up to LOAD_CHUNK_BYTES of batches from ``offset``, then let the loop run;
        returns the next offset and the records scanned."""
        data = plog.read(offset, LOAD_CHUNK_BYTES)
        if not data:
            return plog.log_end_offset, 0
        records = 0
        for header, batch in split_batches(data, verify_crc=False):  # storage recovery checked the tail
            if header.last_offset < offset:
                continue
            offset = header.last_offset + 1
            loader.add_batch(header, batch)
            if not header.is_control:
                records += header.records_count
        await asyncio.sleep(0)
        return offset, records

    def _activate(self) -> None:
        self.state = ACTIVE
        self._enqueue(self.shard.run(lambda shard: shard.on_loaded()))
        self._arm_timer(self.shard.timers.next_deadline())

    # ================================================================ operations
    def begin(self, op: Callable[[GroupShard], Result]):
        """Run a write operation now: its response if nothing needs to wait, else a ``Pending``
        answered once its records (and earlier ones) are durable.

        The operation runs at once, atomically (``GroupShard.run``): a coordinator
        error it raises reaches the caller with nothing written. A failed append
        fails every request of the batch: NOT_COORDINATOR for a storage error (as
        ``errors.for_exception`` maps it), UNKNOWN_SERVER_ERROR for a bug.
        """
        self._check_active()
        result = self.shard.run(op)
        waiter = self._enqueue(result)
        response = result.response
        if isinstance(response, asyncio.Future):
            # the member's own future: answered by the group logic, after its records are durable
            return Pending(response)
        if waiter is not None:
            # a _BatchFuture: a client hanging up cannot cancel it for the others
            return Pending(waiter, lambda batch: (batch.result(), response)[1])
        return response

    async def write(self, op: Callable[[GroupShard], Result]):
        """``begin``, waited for."""
        return await settle(self.begin(op))

    async def read(self, op: Callable[[GroupShard], object]):
        """A read sees committed state: it needs no waiting."""
        self._check_active()
        return op(self.shard)

    async def barrier(self) -> None:
        """Wait until everything written so far is durable (require_stable reads)."""
        self._check_active()
        if self._batch_future is not None:
            await self._batch_future

    def _check_active(self) -> None:
        if self.state == LOADING:
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress)
        if self.state != ACTIVE:
            raise CoordinatorError(ErrorCode.not_coordinator)

    def submit(self, op: Callable[[GroupShard], object]) -> None:
        """Run a follow-up operation the shard asked for (outside any request)."""
        if self.state != ACTIVE:
            return
        try:
            self._enqueue(self.shard.run(op))
        except CoordinatorError as exc:
            self.log.warning("follow-up coordinator operation refused", error=exc.code.name)

    def _enqueue(self, result: Result) -> asyncio.Future | None:
        """Queue a result for the next append; returns the future of the batch it (or earlier writes) ride in."""
        if result.records or result.events or result.on_commit is not None or result.marker is not None:
            self._pending.append(result)
            if result.producer is not None or result.marker is not None:
                self._queue_txn(result)
            elif result.records:
                self._pending_records.extend(result.records)
            if self._batch_future is None:
                self._batch_future = _BatchFuture(loop=self.loop)
            if self._flush_handle is None:
                linger = self.config.append_linger_ms
                # -1 (Kafka 4.2+'s default): adaptive, the batch closes once the operations already queued on the
                # event loop have run (the flush is queued behind them), so a lone write waits for nothing
                self._flush_handle = self.loop.call_soon(self._flush) if linger < 0 else self.loop.call_later(linger / 1000, self._flush)
        return self._batch_future

    def _queue_txn(self, result: Result) -> None:
        """A transactional result's records, or a marker, go in batches of their own, in order."""
        parts = self._pending_parts
        if self._pending_records:
            parts.append(("records", self._pending_records))
            self._pending_records = []
        if result.records:
            parts.append(("txn", result.producer, list(result.records)))
        if result.marker is not None:
            parts.append(("marker", result.marker))

    def _flush(self) -> None:
        """Encode the pending records once, append them in one write, then (and only then)
        show them to reads, run the commit callbacks, publish the events and release the answers."""
        self._flush_handle = None
        results, records, fut = self._pending, self._pending_records, self._batch_future
        parts = self._pending_parts
        self._pending, self._pending_records, self._batch_future, self._pending_parts = [], [], None, []
        if parts:  # transactions: plain, transactional and control batches in order
            if records:
                parts.append(("records", records))
            records = [r for part in parts if part[0] == "records" for r in part[1]]
        if records or parts:
            now = self.clock_ms()
            try:
                limit = self.partition.log.config.max_message_bytes // 2
                batches = []
                for part in parts or (("records", records),):
                    if part[0] == "marker":
                        pid, epoch, coordinator_epoch, commit = part[1]
                        marker = build_end_txn_marker(commit=commit, producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch, timestamp=now)
                        batches += split_batches(marker, verify_crc=False)
                        continue
                    pid, epoch = part[1] if part[0] == "txn" else (-1, -1)
                    encoded = [(encode_key(k), None if v is None else encode_value(v)) for k, v in part[-1]]
                    for chunk in _chunks(encoded, limit):
                        batches.append(build_key_value_batch(chunk, now, producer_id=pid, producer_epoch=epoch))
                # one write for all of them, so the whole lot is durable (or not) together; it wakes the fetches parked on the partition
                crash_point("coordinator.append.before")
                self.partition.append(batches, AppendOrigin.COORDINATOR)  # trusted: not re-validated
                if self.fsync_always:
                    self.partition.log.flush()
                crash_point("coordinator.append.after")
            except Exception as exc:  # noqa: BLE001 - any storage failure
                self._fail_batch(results, fut, exc)
                return
            try:
                commit = self.shard.commit_record  # transactional offsets reach reads with their COMMIT marker (on_commit)
                for key, value in records:
                    commit(key, value)
            except Exception as exc:  # noqa: BLE001 - a bug: the log is right, the memory is not
                # the records are durable, so rebuilding the shard from its log is the cure; the
                # waiting requests are answered (never left hanging) and their clients retry
                self.log.exception("coordinator replay failed after a durable append")
                self._fail_batch(results, fut, exc)
                return
        events = []
        for result in results:
            if result.on_commit is not None:
                try:
                    result.on_commit()
                except Exception:  # noqa: BLE001 - a callback bug must not stall the shard
                    self.log.exception("commit callback failed")
            if result.events:
                events += result.events
        if self.shard.settled_events:
            events += self.shard.settled_events
            self.shard.settled_events = []
        if events and self.publisher is not None:
            try:
                self.publisher.publish(events)
            except Exception:  # noqa: BLE001 - the event stream must never break the coordinator
                self.log.exception("could not publish group events", events=len(events))
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _fail_batch(self, results: list[Result], fut, exc: Exception) -> None:
        error = ErrorCode.not_coordinator if isinstance(exc, OSError) else ErrorCode.unknown_server_error
        self.log.error("coordinator batch failed; reloading shard from its log", error=str(exc), translated=error.name)
        for result in results:
            if result.on_failure is not None:
                try:
                    result.on_failure(error)
                except Exception:  # noqa: BLE001
                    self.log.exception("failure callback failed")
        if fut is not None and not fut.done():
            fut.set_exception(CoordinatorError(error, str(exc)))
            fut.exception()  # mark retrieved: waiters get it, nobody else must
        self.shard.reset()
        self.shard = self._new_shard()
        self.state = LOADING
        self.loop.create_task(self.load(freeze=False))

    # ================================================================ timers
    def _arm_timer(self, deadline: int | None) -> None:
        """One loop timer per shard, for the earliest deadline (uvloop handles have no when())."""
        if deadline is None:
            return
        if self._timer_handle is not None:
            if self._timer_deadline <= deadline:
                return
            self._timer_handle.cancel()
        self._timer_deadline = deadline
        self._timer_handle = self.loop.call_later(max(deadline - self.clock_ms(), 0) / 1000, self._on_timer)

    def _on_timer(self) -> None:
        self._timer_handle = None
        if self.state != ACTIVE:
            return
        # due timers run two turns of the loop later, after it has polled its sockets once: a
        # heartbeat that arrived while the timer came due is read and queued first, and the
        # expiry sees it waiting (arrivals.py). One turn is not enough: libuv (uvloop) runs its
        # timers before it polls, and asyncio runs a callback queued now before the I/O of its
        # next poll.
        self.loop.call_soon(self.loop.call_soon, self._fire_timers)

    def _fire_timers(self) -> None:
        if self.state != ACTIVE:
            return
        try:
            self._enqueue(self.shard.run(lambda shard: shard.fire_timers()))
        except Exception:  # noqa: BLE001 - rolled back; the next deadline is armed below
            self.log.exception("timer failed")
        extended = self.shard.timers.extended
        if extended and max(ms for _, ms in extended) >= 1000:
            self.log.info("timers given back the time the event loop lost", timers=len(extended), lost_ms=max(ms for _, ms in extended))
        self._arm_timer(self.shard.timers.next_deadline())

    def close(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush()
        if self._timer_handle is not None:
            self._timer_handle.cancel()
        self.state = FAILED
