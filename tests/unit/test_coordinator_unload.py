"""Loading and unloading coordinator partitions on demand (broker/coordinator_runtime), for the group,
transaction and share coordinators: an unload answers every waiter NOT_COORDINATOR, leaves nothing
armed and drops the state; requests meanwhile get NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while
loading); an unload during a load wins; a load rebuilds the state the log holds, as it was."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.coordinator.classic import JoinParams
from broker.coordinator.common import CoordinatorError
from broker.coordinator.offsets import CommitPartition
from broker.coordinator_runtime.runtime import ACTIVE, LOADING, UNLOADED
from broker.pending import Pending, settle
from broker.share.state import ShareStateError, WriteData
from broker.testing import Broker
from protocol.errors import ErrorCode
from protocol.share_records import StateBatch
from tests.wait import async_wait_until

from .test_coordinator_load import state as group_state

ONE_PARTITION = {
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 600_000,  # a first JoinGroup stays parked
}


def _nothing_armed(rt) -> None:
    assert rt._timer_handle is None and rt._flush_handle is None
    assert not rt._handles and not rt._pending and rt._batch_future is None


def _join(group: str) -> JoinParams:
    # v3: no member id required, so the first member's join waits for the (long) initial rebalance delay
    return JoinParams(group, "", None, "consumer", [("range", b"")], 30_000, 30_000, None, 3, "client", "/127.0.0.1")


def _commit(co, group: str, offset: int):
    return co.begin_offset_commit(group, "", -1, None, 2, -1, [CommitPartition("t", 0, offset, -1, "")])


async def _load_then_unload(owner, rt) -> None:
    """A load that an unload overtakes: it stops, and the partition stays unloaded and empty."""
    loading = asyncio.ensure_future(owner.load(0))
    await asyncio.sleep(0)  # the load has read its first chunk and yields
    assert rt.state == LOADING and rt.loading_now
    owner.unload(0)
    await loading
    assert rt.state == UNLOADED and not rt.loading_now


# ============================================================================ the group coordinator
async def test_group_unload_answers_every_waiter_and_a_load_rebuilds_the_same_state(tmp_path):
    async with Broker(tmp_path, settings=ONE_PARTITION) as b:
        co = b.server.coordinator
        await co.loaded.wait()
        assert await co.offset_commit("g", "", -1, None, 2, -1, [CommitPartition("t", 0, 5, -1, "")]) == [("t", 0, ErrorCode.none)]
        rt = co.runtimes[0]
        co.unload(0)
        await co.load(0)
        # what a load of this log builds (a live write sets a new group's state timestamp, a replay does not)
        before = group_state(rt.shard)
        assert before[0] == ["g"] and rt._timer_handle is not None  # the offsets retention timer

        join = asyncio.ensure_future(co.join_group(_join("parked")))
        await asyncio.sleep(0)
        assert "parked" in rt.shard.groups and not join.done()  # the member waits for the rebalance
        pending = _commit(co, "g", 9)  # in the pending batch, not appended yet
        assert type(pending) is Pending

        co.unload(0)
        assert rt.state == UNLOADED
        with pytest.raises(CoordinatorError) as commit_error:
            pending.result()
        assert commit_error.value.code is ErrorCode.not_coordinator
        with pytest.raises(CoordinatorError) as join_error:
            await join
        assert join_error.value.code is ErrorCode.not_coordinator
        _nothing_armed(rt)
        assert not rt.shard.groups and not rt.shard.offsets.latest  # the state is gone

        # while unloaded: NOT_COORDINATOR for writes and reads alike
        with pytest.raises(CoordinatorError) as unloaded:
            _commit(co, "g", 10)
        assert unloaded.value.code is ErrorCode.not_coordinator
        with pytest.raises(CoordinatorError) as unloaded_read:
            await co.offset_fetch("g", None, stable=False)
        assert unloaded_read.value.code is ErrorCode.not_coordinator

        await _load_then_unload(co, rt)
        assert not rt.shard.offsets.latest
        with pytest.raises(CoordinatorError) as still_unloaded:
            await co.offset_fetch("g", None, stable=False)
        assert still_unloaded.value.code is ErrorCode.not_coordinator

        await co.load(0)
        assert rt.state == ACTIVE
        assert group_state(rt.shard) == before  # what the log holds: the pending commit and the parked join never got there
        [(_, _, value)] = await co.offset_fetch("g", [("t", [0])], stable=False)
        assert value.offset == 5
        assert rt._timer_handle is not None  # its timers are armed again


async def test_group_requests_while_loading_get_load_in_progress(tmp_path):
    async with Broker(tmp_path, settings=ONE_PARTITION) as b:
        co = b.server.coordinator
        await co.loaded.wait()
        await co.offset_commit("g", "", -1, None, 2, -1, [CommitPartition("t", 0, 5, -1, "")])
        co.unload(0)
        loading = asyncio.ensure_future(co.load(0))
        await asyncio.sleep(0)
        with pytest.raises(CoordinatorError) as error:
            _commit(co, "g", 6)
        assert error.value.code is ErrorCode.coordinator_load_in_progress
        await loading
        assert await co.offset_commit("g", "", -1, None, 2, -1, [CommitPartition("t", 0, 6, -1, "")]) == [("t", 0, ErrorCode.none)]


async def test_a_failed_append_answers_its_batch_and_reloads_the_shard_from_its_log(tmp_path):
    """``_fail_batch``: every request of the batch whose append failed (a full disk: OSError) is answered
    NOT_COORDINATOR, a parked join too (``_drop``), the shard reloads from its log, and serves again with
    only what was durable."""
    async with Broker(tmp_path, settings=ONE_PARTITION) as b:
        co = b.server.coordinator
        await co.loaded.wait()
        assert await co.offset_commit("g", "", -1, None, 2, -1, [CommitPartition("t", 0, 5, -1, "")]) == [("t", 0, ErrorCode.none)]
        rt = co.runtimes[0]
        join = asyncio.ensure_future(co.join_group(_join("parked")))
        await asyncio.sleep(0)
        assert "parked" in rt.shard.groups and not join.done()
        real_append, failures = rt._append, []

        def full(parts, records):
            failures.append(len(records))
            raise OSError(28, "No space left on device")

        rt._append = full
        first, second = _commit(co, "g", 9), _commit(co, "h", 3)  # one batch: both fail together
        assert type(first) is Pending and type(second) is Pending
        for pending in (first, second):
            with pytest.raises(CoordinatorError) as failed:
                await asyncio.wait_for(settle(pending), 10)
            assert failed.value.code is ErrorCode.not_coordinator
        with pytest.raises(CoordinatorError) as join_error:
            await asyncio.wait_for(join, 10)
        assert join_error.value.code is ErrorCode.not_coordinator
        assert len(failures) == 1 and failures[0] >= 2  # one append for the batch, both commits in it
        rt._append = real_append
        await async_wait_until(lambda: rt.state == ACTIVE, what="the shard reloaded from its log")
        [(_, _, value)] = await co.offset_fetch("g", [("t", [0])], stable=False)
        assert value.offset == 5  # the failed commit never became visible
        assert await co.offset_fetch("h", [("t", [0])], stable=False) == [("t", 0, None)]  # nor did the other one
        assert "parked" not in rt.shard.groups
        assert await co.offset_commit("g", "", -1, None, 2, -1, [CommitPartition("t", 0, 9, -1, "")]) == [("t", 0, ErrorCode.none)]


# ============================================================================ the transaction coordinator
async def test_txn_unload_stops_completions_and_a_load_completes_them_from_the_log(tmp_path):
    async with Broker(tmp_path, settings=ONE_PARTITION) as b:
        await b.create_topic("data", 1)
        txn = b.server.transactions
        txn.ensure_started()
        await txn.wait_loaded()
        rt = txn.runtimes[0]
        answer = txn.init_producer_id("tx", 60_000, -1, -1)
        assert answer.error is ErrorCode.none
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert txn.add_partitions("tx", pid, epoch, [("data", 0)]) == {("data", 0): ErrorCode.none}
        assert txn.end_txn("tx", pid, epoch, True).error is ErrorCode.none  # PREPARE_COMMIT: its markers are due
        before = dict(rt.shard.txns)
        completing = list(rt._tasks)
        assert completing and rt._timer_handle is not None  # the completion, and the expiry timer

        txn.unload(0)
        assert rt.state == UNLOADED
        await asyncio.gather(*completing, return_exceptions=True)
        assert all(task.cancelled() for task in completing)
        assert b.cluster.partition("data", 0).log.log_end_offset == 0  # no marker was written
        _nothing_armed(rt)
        assert not rt._tasks and not rt.shard.txns

        with pytest.raises(CoordinatorError) as unloaded:
            txn.init_producer_id("other", 60_000, -1, -1)
        assert unloaded.value.code is ErrorCode.not_coordinator
        [described] = txn.describe(["tx"])
        assert described.error is ErrorCode.not_coordinator

        await _load_then_unload(txn, rt)
        assert not rt.shard.txns

        loading = asyncio.ensure_future(txn.load(0))
        await asyncio.sleep(0)
        with pytest.raises(CoordinatorError) as in_progress:
            txn.init_producer_id("other", 60_000, -1, -1)
        assert in_progress.value.code is ErrorCode.coordinator_load_in_progress
        await loading
        assert rt.state == ACTIVE and rt.shard.txns == before  # PREPARE_COMMIT, as the log holds it
        # the load's completion writes the markers, then COMPLETE_COMMIT
        await async_wait_until(lambda: rt.shard.txns["tx"].state.name == "COMPLETE_COMMIT", what="the reloaded transaction completed")
        assert b.cluster.partition("data", 0).log.log_end_offset == 1  # the COMMIT marker


# ============================================================================ the share coordinator
async def test_share_unload_drops_the_state_and_a_load_rebuilds_it(tmp_path):
    async with Broker(tmp_path, settings=ONE_PARTITION) as b:
        await b.create_topic("s", 2)
        tid: uuid.UUID = b.cluster.topics["s"].topic_id
        co = b.server.share_coordinator
        co.ensure_started()
        for p in (0, 1):
            co.initialize("g", tid, p, 0, 0)
        co.write("g", tid, WriteData(0, 0, 0, -1, [StateBatch(0, 4, 2, 1)]))
        rt = co.runtimes[0]
        states, offsets = dict(rt.shard.states), dict(rt.shard.snapshot_offsets)
        assert co.peek("g", tid, 0) is not None

        co.unload(0)
        assert rt.state == UNLOADED and not rt.shard.states and co.peek("g", tid, 0) is None
        _nothing_armed(rt)
        for call in (lambda: co.read("g", tid, 0, 0), lambda: co.write("g", tid, WriteData(1, 0, 0, -1, [StateBatch(0, 0, 2, 1)]))):
            with pytest.raises(ShareStateError) as unloaded:
                call()
            assert unloaded.value.code is ErrorCode.not_coordinator

        await _load_then_unload(co, rt)
        assert not rt.shard.states

        await co.load(0)
        assert rt.state == ACTIVE
        assert rt.shard.states == states and rt.shard.snapshot_offsets == offsets
        assert co.read("g", tid, 0, 0).state_batches == states[("g", tid, 0)].state_batches
