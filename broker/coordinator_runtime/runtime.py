"""``CoordinatorRuntime``: one coordinator partition, its shard, write-then-respond, load and unload.

A coordinator partition (of ``__consumer_offsets``, ``__transaction_state`` or
``__share_group_state``) is one shard with a single writer, the event loop.
The runtime owns everything around the shard that is not the coordinator's
own logic (the ``Shard`` protocol below is what it asks of a shard):

* loading: the log replayed in chunks of ``load_chunk`` bytes, yielding to
  the loop between them, into a fresh shard (``load``), the cyclic GC off
  meanwhile; requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS;
* the states LOADING, ACTIVE, FAILED (a load or the shard failed: NOT_COORDINATOR)
  and UNLOADED (``unload``: the partition is not ours; NOT_COORDINATOR);
* writes: an operation runs atomically in the shard (``Shard.run``) and hands
  back a result (``broker.coordinator.common.Result``'s fields); its records join
  the pending batch, which is flushed once the operations already queued on the
  loop have run (``linger_ms`` -1, adaptive) or after ``linger_ms``, encoded
  once, appended in one ``Partition.append`` (fsynced under ``fsync_always``),
  and only then shown to the shard (``Shard.applied``), the commit callbacks run,
  the events published and the answers released. ``write_now`` flushes at once,
  for callers that answer synchronously (transactions, share state);
* a failed append: the batch's waiters get NOT_COORDINATOR (a storage error)
  or UNKNOWN_SERVER_ERROR (a bug), and the shard is rebuilt from its log;
* timers: one loop timer for the shard's earliest deadline (``Shard.next_deadline``),
  fired through ``run``; ``call_later`` and ``spawn`` for the coordinator's own
  delayed work, which stops with the shard;
* ``unload``: every waiter answered NOT_COORDINATOR (the pending batch's and
  those parked in the shard, through ``Shard.reset``), timers and tasks
  cancelled, the state dropped; a load in progress stops at its next chunk.
  A later ``load`` rebuilds the shard from the log.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any, Protocol

from protocol.errors import ErrorCode
from protocol.records import build_end_txn_marker, build_key_value_batch, iter_key_values, split_batches
from storage.crashpoints import crash_point

from ..partition import AppendOrigin
from ..pending import Pending, settle
from .constants import now_ms

LOADING, ACTIVE, FAILED, UNLOADED = "loading", "active", "failed", "unloaded"
# a start-up load of at least this many records moves what it built out of the cyclic GC's reach (gc.freeze)
FREEZE_MIN_RECORDS = 10_000


class Loader(Protocol):
    """Rebuilds a shard from its log: every batch in log order, then ``done``."""

    def add_batch(self, header, batch) -> None: ...  # control batches (transaction markers) included

    def done(self) -> dict: ...  # finish the replay; what the load log line reports


class Shard(Protocol):
    """What the runtime asks of a coordinator shard (GroupShard, the transaction and share shards)."""

    settled_events: list  # events made by commit callbacks, published with the batch (empty for most shards)

    def run(self, op: Callable[[Any], Any]) -> Any: ...  # atomic: a Result, or raises with nothing changed

    def encode(self, records: list) -> list[tuple[bytes, bytes | None]]: ...  # typed records -> key and value bytes

    def loader(self) -> Loader: ...

    def activated(self) -> Any: ...  # once loaded: a Result to write (or None)

    def applied(self, records: list, base_offset: int) -> None: ...  # the records are durable

    def next_deadline(self) -> int | None: ...  # the earliest timer, in clock_ms time

    def fire_timers(self) -> Any: ...  # an operation: the due timers

    def reset(self) -> None: ...  # forget everything, answering what is parked (a None answer: NOT_COORDINATOR)


class KeyValueLoader:
    """A loader that replays every keyed record of the data batches at once, in order:
    ``replay(key bytes, value bytes)`` (with ``with_offset``, also the batch's base offset)."""

    def __init__(self, replay: Callable, *, with_offset: bool = False, summary: Callable[[], dict] | None = None) -> None:
        self.replay = replay
        self.with_offset = with_offset
        self.summary = summary
        self.records = 0

    def add_batch(self, header, batch) -> None:
        if header.is_control:
            return
        replay = self.replay
        for key, value in iter_key_values(batch):
            if key is None:
                continue
            if self.with_offset:
                replay(key, value, header.base_offset)
            else:
                replay(key, value)
            self.records += 1

    def done(self) -> dict:
        return self.summary() if self.summary is not None else {}


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


def _fire(shard) -> Any:
    return shard.fire_timers()


def _activated(shard) -> Any:
    return shard.activated()


class CoordinatorRuntime:
    """One coordinator partition. ``new_shard(runtime)`` makes an empty shard (or override ``_new_shard``);
    ``error(code, message)`` is the exception requests get (the coordinator's error type); ``cuts(plog)``
    reports what storage recovery cut from the log, before a load."""

    linger_ms = -1  # how long a batch waits for more writes; -1: adaptive (the group coordinator's is configured)

    def __init__(self, index: int, partition, *, topic: str, fsync_always: bool, log, load_chunk: int,
                 new_shard: Callable[[CoordinatorRuntime], Shard] | None = None, error: Callable[..., Exception],
                 clock_ms: Callable[[], int] = now_ms, publisher=None,
                 cuts: Callable[[Any], None] | None = None) -> None:
        self.index = index
        self.partition = partition  # broker.partition.Partition
        self.topic = topic
        self.fsync_always = fsync_always
        self.log = log
        self.load_chunk = load_chunk
        self._shard_factory = new_shard
        self.error = error
        self.clock_ms = clock_ms
        self.publisher = publisher  # events.EventPublisher: the group event stream, or None
        self.cuts = cuts
        self.loop = asyncio.get_running_loop()
        self.state = LOADING  # the owner loads every partition at start
        self._pending: list = []
        self._pending_records: list = []  # typed (key, value) records of the pending results since the last part
        # what goes before them, in order: ("records", list) runs of plain records, ("txn", (producer id, epoch),
        # list) a transactional batch's records, ("marker", (producer id, epoch, coordinator epoch, commit))
        self._pending_parts: list = []
        self._batch_future: asyncio.Future | None = None
        self._flush_handle: asyncio.Handle | None = None
        self._timer_handle: asyncio.TimerHandle | None = None
        self._timer_deadline = 0
        self._handles: set[asyncio.TimerHandle] = set()  # call_later's
        self._tasks: set[asyncio.Task] = set()  # spawn's
        self._generation = 0  # moves on at every load, unload and reset: a load of an older one stops
        self._loading = 0  # the generation of the load in progress, 0 for none
        self.load_stats: dict = {}
        self.shard = self._new_shard()

    def _new_shard(self) -> Shard:
        return self._shard_factory(self)

    @property
    def loading_now(self) -> bool:
        """Whether a load is in progress (not just due)."""
        return self._loading == self._generation and self._loading != 0

    # ================================================================ loading and unloading
    async def load(self, *, freeze: bool = False) -> None:
        """Rebuild the shard from the partition's log, in order, yielding to the loop between chunks.

        The cyclic GC is off meanwhile: it would walk the growing state again
        and again, and nothing a load makes is cyclic garbage. With ``freeze``
        (the start-up load), a load of ``FREEZE_MIN_RECORDS`` or more freezes
        what the process holds then (``gc.freeze``), so later collections do
        not walk the loaded state (only a reference cycle among frozen objects
        is never collected). A load overtaken by ``unload`` or another load
        stops at its next chunk, leaving that one's state; one that raises
        leaves the runtime FAILED and raises.
        """
        t0 = time.perf_counter()
        self._generation += 1
        gen = self._loading = self._generation
        self.state = LOADING
        shard = self.shard = self._new_shard()
        plog = self.partition.log
        if self.cuts is not None and getattr(plog, "recovery_truncations", None):
            self.cuts(plog)
        records = 0
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            loader = shard.loader()
            offset = plog.log_start_offset
            while offset < plog.log_end_offset:
                offset, n = await self._load_chunk(plog, offset, loader)
                records += n
                if gen != self._generation:
                    return  # unloaded (or loaded again) meanwhile
            stats = loader.done()
            self._loading = 0
            self._activate()
            if freeze and records >= FREEZE_MIN_RECORDS:
                gc.freeze()
        except BaseException:
            if gen == self._generation:
                self._loading = 0
                self.state = FAILED
            raise
        finally:
            if gc_was_enabled:
                gc.enable()
        elapsed = time.perf_counter() - t0
        self.load_stats = {"records": records, "seconds": elapsed}
        if records:
            self.log.info("coordinator partition loaded", topic=self.topic, partition=self.index, records=records,
                          load_ms=round(elapsed * 1000, 1), **stats)

    async def _load_chunk(self, plog, offset: int, loader: Loader) -> tuple[int, int]:
        """Scan up to ``load_chunk`` bytes of batches from ``offset``, then let the loop run;
        returns the next offset and the records scanned."""
        data = plog.read(offset, self.load_chunk)
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

    def start_empty(self) -> None:
        """A partition just created: nothing to load, active at once."""
        self._generation += 1
        self.shard = self._new_shard()
        self._activate()

    def _activate(self) -> None:
        self.state = ACTIVE
        self._enqueue(self.shard.run(_activated))
        self._arm_timer(self.shard.next_deadline())

    def unload(self) -> None:
        """The partition is no longer ours (Kafka's scheduleUnloadOperation): every waiter is
        answered NOT_COORDINATOR, timers and tasks stop, the state is dropped; requests get
        NOT_COORDINATOR until a ``load``. A load in progress stops at its next chunk."""
        if self.state == UNLOADED:
            return
        self._drop(ErrorCode.not_coordinator, f"{self.topic}-{self.index} was unloaded")
        self.state = UNLOADED

    def close(self) -> None:
        """Shutdown: what is pending is written, timers and tasks stop, requests get NOT_COORDINATOR
        (FAILED). The state stays (for a look after the end); ``shard.reset()`` answers what is parked."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush()
        self._stop()
        self.state = FAILED

    def _stop(self) -> None:
        """No load, flush, timer or task of this shard runs any more."""
        self._generation += 1
        self._loading = 0
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._timer_handle is not None:
            self._timer_handle.cancel()
            self._timer_handle = None
        for handle in self._handles:
            handle.cancel()
        self._handles.clear()
        for task in list(self._tasks):
            task.cancel()

    def _drop(self, error: ErrorCode, message: str) -> None:
        """Answer every waiter ``error``, stop every timer and task, forget the state."""
        self._stop()
        results, fut = self._pending, self._batch_future
        self._pending, self._pending_records, self._pending_parts, self._batch_future = [], [], [], None
        self._fail_waiters(results, fut, error, message)
        self.shard.reset()  # parked answers get None: NOT_COORDINATOR
        self.shard = self._new_shard()

    # ================================================================ operations
    def check(self) -> None:
        """COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR when failed or unloaded."""
        if self.state == LOADING:
            raise self.error(ErrorCode.coordinator_load_in_progress)
        if self.state != ACTIVE:
            raise self.error(ErrorCode.not_coordinator)

    def begin(self, op: Callable[[Any], Any]):
        """Run a write operation now: its response if nothing needs to wait, else a ``Pending``
        answered once its records (and earlier ones) are durable.

        The operation runs at once, atomically (``Shard.run``): an error it raises
        reaches the caller with nothing written. A failed append fails every
        request of the batch (``_fail_batch``).
        """
        self.check()
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

    async def write(self, op: Callable[[Any], Any]):
        """``begin``, waited for."""
        return await settle(self.begin(op))

    def write_now(self, op: Callable[[Any], Any]) -> Any:
        """``begin`` with the batch appended at once (with whatever was pending): the response,
        or the error of a failed append. For coordinators whose callers do not wait."""
        self.check()
        result = self.shard.run(op)
        waiter = self._enqueue(result)
        if waiter is not None:
            if self._flush_handle is not None:
                self._flush_handle.cancel()
            self._flush()
            if waiter.exception() is not None:
                raise waiter.exception()
        return result.response

    async def read(self, op: Callable[[Any], object]):
        """A read sees committed state: it needs no waiting."""
        self.check()
        return op(self.shard)

    async def barrier(self) -> None:
        """Wait until everything written so far is durable (require_stable reads)."""
        self.check()
        if self._batch_future is not None:
            await self._batch_future

    def submit(self, op: Callable[[Any], object]) -> None:
        """Run a follow-up operation the shard asked for (outside any request)."""
        if self.state != ACTIVE:
            return
        try:
            self._enqueue(self.shard.run(op))
        except Exception as exc:
            code = getattr(exc, "code", None)
            if code is None:
                raise
            self.log.warning("follow-up coordinator operation refused", error=code.name)  # the coordinator's error: refused

    def _enqueue(self, result) -> asyncio.Future | None:
        """Queue a result for the next append; returns the future of the batch it (or earlier writes) ride in."""
        if result is None:
            return None
        if result.records or result.events or result.on_commit is not None or result.marker is not None:
            self._pending.append(result)
            if result.producer is not None or result.marker is not None:
                self._queue_txn(result)
            elif result.records:
                self._pending_records.extend(result.records)
            if self._batch_future is None:
                self._batch_future = _BatchFuture(loop=self.loop)
            if self._flush_handle is None:
                linger = self.linger_ms
                # -1 (Kafka 4.2+'s default): adaptive, the batch closes once the operations already queued on the
                # event loop have run (the flush is queued behind them), so a lone write waits for nothing
                self._flush_handle = self.loop.call_soon(self._flush) if linger < 0 else self.loop.call_later(linger / 1000, self._flush)
        return self._batch_future

    def _queue_txn(self, result) -> None:
        """A transactional result's records, or a marker, go in batches of their own, in order."""
        parts = self._pending_parts
        if self._pending_records:
            parts.append(("records", self._pending_records))
            self._pending_records = []
        if result.records:
            parts.append(("txn", result.producer, list(result.records)))
        if result.marker is not None:
            parts.append(("marker", result.marker))

    def _append(self, parts, records) -> int:
        """Encode and append the batch's parts in one write (durable, or not, together); returns the base offset."""
        now = self.clock_ms()
        limit = self.partition.log.config.max_message_bytes // 2
        batches = []
        encode = self.shard.encode
        for part in parts or (("records", records),):
            if part[0] == "marker":
                pid, epoch, coordinator_epoch, commit = part[1]
                marker = build_end_txn_marker(commit=commit, producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch, timestamp=now)
                batches += split_batches(marker, verify_crc=False)
                continue
            pid, epoch = part[1] if part[0] == "txn" else (-1, -1)
            for chunk in _chunks(encode(part[-1]), limit):
                batches.append(build_key_value_batch(chunk, now, producer_id=pid, producer_epoch=epoch))
        # one write for all of them; it wakes the fetches parked on the partition
        crash_point("coordinator.append.before")
        appended = self.partition.append(batches, AppendOrigin.COORDINATOR)  # trusted: not re-validated
        if self.fsync_always:
            self.partition.log.flush()
        crash_point("coordinator.append.after")
        return appended.base_offset if appended is not None else -1

    def _flush(self) -> None:
        """Encode the pending records once, append them in one write, then (and only then)
        show them to the shard, run the commit callbacks, publish the events and release the answers."""
        self._flush_handle = None
        results, records, fut = self._pending, self._pending_records, self._batch_future
        parts = self._pending_parts
        self._pending, self._pending_records, self._batch_future, self._pending_parts = [], [], None, []
        if parts:  # transactions: plain, transactional and control batches in order
            if records:
                parts.append(("records", records))
            records = [r for part in parts if part[0] == "records" for r in part[1]]
        if records or parts:
            try:
                base_offset = self._append(parts, records)
            except Exception as exc:  # noqa: BLE001 - any storage failure
                self._fail_batch(results, fut, exc)
                return
            try:
                self.shard.applied(records, base_offset)  # transactional offsets reach reads with their COMMIT marker (on_commit)
            except Exception as exc:  # noqa: BLE001 - a bug: the log is right, the memory is not
                # the records are durable, so rebuilding the shard from its log is the cure; the
                # waiting requests are answered (never left hanging) and their clients retry
                self.log.exception("coordinator replay failed after a durable append")
                self._fail_batch(results, fut, exc)
                return
        self._settle(results)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _settle(self, results: list) -> None:
        """A batch is durable: its commit callbacks, then its events (and the shard's)."""
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

    def _fail_waiters(self, results: list, fut, error: ErrorCode, message: str) -> None:
        for result in results:
            if result.on_failure is not None:
                try:
                    result.on_failure(error)
                except Exception:  # noqa: BLE001
                    self.log.exception("failure callback failed")
        if fut is not None and not fut.done():
            fut.set_exception(self.error(error, message))
            fut.exception()  # mark retrieved: waiters get it, nobody else must

    def _fail_batch(self, results: list, fut, exc: Exception) -> None:
        """A failed append: its waiters get the translated error, and the shard reloads from its log."""
        error = ErrorCode.not_coordinator if isinstance(exc, OSError) else ErrorCode.unknown_server_error
        self.log.error("coordinator batch failed; reloading the partition from its log", topic=self.topic, partition=self.index,
                       error=str(exc), translated=error.name)
        self._fail_waiters(results, fut, error, str(exc))
        self._drop(error, str(exc))
        self.state = LOADING
        self.spawn(self.load())

    # ================================================================ timers and tasks
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
        # expiry sees it waiting (broker/coordinator/arrivals.py). One turn is not enough: libuv
        # (uvloop) runs its timers before it polls, and asyncio runs a callback queued now before
        # the I/O of its next poll.
        self.loop.call_soon(self.loop.call_soon, self._fire_timers)

    def _fire_timers(self) -> None:
        if self.state != ACTIVE:
            return
        try:
            self._enqueue(self.shard.run(_fire))
        except Exception:  # noqa: BLE001 - rolled back; the next deadline is armed below
            self.log.exception("timer failed")
        self._arm_timer(self.shard.next_deadline())

    def call_later(self, delay_s: float, fn: Callable, *args) -> None:
        """``fn(*args)`` after ``delay_s``, unless the shard is dropped first."""
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            self._handles.discard(handle)
            fn(*args)

        handle = self.loop.call_later(delay_s, fire)
        self._handles.add(handle)

    def spawn(self, coro) -> asyncio.Task:
        """A task that is cancelled if the shard is dropped (unloaded, reloaded, closed)."""
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
