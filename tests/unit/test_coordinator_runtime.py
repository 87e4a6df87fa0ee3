"""The coordinator runtime: batching, durability and what a client hanging up may not do.

Everything runs on a private event loop with an in-memory stand-in for the
partition log, so the order of events is exact and nothing sleeps.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from broker.coordinator.common import GroupConfig, Result
from broker.coordinator.runtime import ACTIVE, ShardRuntime
from protocol.group_records import OffsetCommitKey, OffsetCommitValue

from .test_coordinator_classic import StubLog


class MemoryLog:
    """Collects appended batches (appends are synchronous, as the partition log's are)."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(max_message_bytes=1_000_000)
        self.appended: list = []

    def append(self, batches, leader_epoch=0):
        self.appended.append(batches)

    def flush(self):
        pass


def commit(shard, group: str, offset: int, answer="ok") -> Result:
    """An operation that writes one offset record, as OffsetCommit does."""
    key = OffsetCommitKey(group, "t", 0)
    shard.emit(key, OffsetCommitValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=0, expire_timestamp=-1))
    return Result(response=answer)


def active_runtime(log: MemoryLog, linger_ms: int = 5) -> ShardRuntime:
    partition = SimpleNamespace(index=0, log=log, append=lambda batches, origin: log.append(batches))  # broker.partition.Partition's shape
    rt = ShardRuntime(0, partition, GroupConfig(append_linger_ms=linger_ms), fsync_always=False, log=StubLog())
    rt.state = ACTIVE
    return rt


def test_a_client_hanging_up_does_not_cancel_the_batch_for_the_others(loop):
    """Two commits ride in one batch; the first client's task is cancelled (its connection
    closed) while both wait for the append. The second must still get its answer: before the
    fix the shared batch future was cancelled with the task, and every other request in the
    batch silently lost its answer (the network fuzzer's hangs, seed 1061561437)."""
    log = MemoryLog()

    async def run():
        rt = active_runtime(log)
        first = asyncio.get_running_loop().create_task(rt.write(lambda s: commit(s, "a", 1, "first")))
        second = asyncio.get_running_loop().create_task(rt.write(lambda s: commit(s, "b", 2, "second")))
        await asyncio.sleep(0)  # both ran up to their wait for the batch
        assert rt._batch_future is not None and not rt._batch_future.done()
        first.cancel()
        answer = await asyncio.wait_for(second, 30)  # the bound only keeps a regression from hanging the suite
        with pytest.raises(asyncio.CancelledError):
            await first
        return rt, answer

    rt, answer = loop.run_until_complete(run())
    assert answer == "second"
    assert len(log.appended) == 1, "both commits were written in one append"
    view = rt.shard.offsets.committed
    assert view["a"][("t", 0)].offset == 1 and view["b"][("t", 0)].offset == 2


def test_a_response_is_released_only_after_its_batch_is_appended(loop):
    log = MemoryLog()
    order: list[str] = []
    real_append = log.append

    def append(batches, leader_epoch=0):
        order.append("append")
        real_append(batches, leader_epoch)

    log.append = append

    async def run():
        rt = active_runtime(log, linger_ms=50)
        answer = await asyncio.wait_for(rt.write(lambda s: commit(s, "g", 7)), 30)
        order.append("answer")
        return answer

    assert loop.run_until_complete(run()) == "ok"
    assert order == ["append", "answer"]


def test_a_failed_append_answers_with_an_error_and_never_shows_the_write(loop):
    """A log that cannot be written: the commit is answered NOT_COORDINATOR (Kafka's answer for a
    storage failure), never as a success, and reads never see the offset; the shard reloads."""
    from broker.coordinator.common import CoordinatorError
    from broker.coordinator.runtime import LOADING
    from protocol.errors import ErrorCode

    log = MemoryLog()

    def broken(batches, leader_epoch=0):
        raise OSError(5, "Input/output error")

    log.append = broken

    async def run():
        rt = active_runtime(log)

        async def no_reload():  # the stand-in log has nothing to load
            return None

        rt.load = no_reload
        with pytest.raises(CoordinatorError) as failure:
            await asyncio.wait_for(rt.write(lambda s: commit(s, "g", 7)), 30)
        return rt, failure.value

    rt, error = loop.run_until_complete(run())
    assert error.code is ErrorCode.not_coordinator
    assert rt.state == LOADING  # rebuilt from the log, which never got the record
    assert "g" not in rt.shard.offsets.committed and "g" not in rt.shard.offsets.latest


def test_a_timer_whose_callback_raises_is_consumed_not_refired(loop):
    """A failing timer operation is rolled back, but the timer that fired stays consumed:
    restoring it (its deadline past) would fire it again at once, for ever."""
    log = MemoryLog()
    calls = []

    async def run():
        rt = active_runtime(log)

        def broken():
            calls.append(1)
            raise RuntimeError("timer bug")

        rt.shard.timers.schedule("broken", 0, broken)
        rt._arm_timer(rt.shard.timers.next_deadline())
        for _ in range(20):  # loop turns, no waiting: a re-armed past-due timer would fire on each
            await asyncio.sleep(0)
        return rt

    rt = loop.run_until_complete(run())
    assert calls == [1]
    assert not rt.shard.timers.is_scheduled("broken")


def test_the_adaptive_linger_batches_what_the_loop_already_has_and_arms_no_timer(loop):
    """group.coordinator.append.linger.ms=-1 (Kafka 4.2+'s default): writes started in the same
    turn of the event loop share one append, and no write waits for a timer."""
    log = MemoryLog()

    async def run():
        rt = active_runtime(log, linger_ms=-1)
        running = asyncio.get_running_loop()

        def no_timer(*args, **kwargs):
            raise AssertionError("the adaptive linger armed a timer")

        running.call_later = no_timer
        together = [running.create_task(rt.write(lambda s, g=g: commit(s, g, 1, g))) for g in ("a", "b", "c")]
        answers = await asyncio.gather(*together)
        alone = await rt.write(lambda s: commit(s, "d", 2, "d"))
        return answers, alone

    answers, alone = loop.run_until_complete(run())
    assert answers == ["a", "b", "c"] and alone == "d"
    assert len(log.appended) == 2  # the three together in one append, the lone one in another
