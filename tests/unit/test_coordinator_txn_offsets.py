"""Transactional offset commits in the group coordinator (TxnOffsetCommit's half of
transactions): offsets that wait for their producer's COMMIT or ABORT marker,
OffsetFetch's UNSTABLE_OFFSET_COMMIT, the most recent commit winning, rollback,
and the same state after a reload of the log the runtime wrote (transactional
and control batches included).
"""

from __future__ import annotations

import asyncio

import pytest

from broker.coordinator.common import CoordinatorError, GroupConfig
from broker.coordinator.offsets import UNSTABLE, CommitPartition
from broker.coordinator.runtime import ShardRuntime
from broker.coordinator.shard import GroupShard
from protocol.errors import ErrorCode as E
from protocol.group_records import OffsetCommitKey
from protocol.records import split_batches
from storage.config import LogConfig
from storage.log import PartitionLog

T0 = 1_700_000_000_000
PID, EPOCH = 4000, 3


class _Quiet:
    def __getattr__(self, name):
        return lambda *a, **k: self if name == "bind" else None


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def shard(loop) -> GroupShard:
    return GroupShard(0, GroupConfig(), lambda: T0, _Quiet(), loop.create_future)


def parts(*offsets: int, topic: str = "t") -> list[CommitPartition]:
    return [CommitPartition(topic, p, off, -1, "") for p, off in enumerate(offsets)]


def txn_commit(s: GroupShard, group: str, *offsets: int, pid: int = PID, generation: int = -1, member: str = ""):
    return s.run(lambda sh: sh.txn_offset_commit(group, member, generation, None, 3, pid, EPOCH, parts(*offsets)))


def plain_commit(s: GroupShard, group: str, *offsets: int):
    return s.run(lambda sh: sh.offset_commit(group, "", -1, None, 8, -1, parts(*offsets)))


def marker(s: GroupShard, commit: bool, pid: int = PID):
    result = s.run(lambda sh: sh.complete_txn(pid, EPOCH, 0, commit))
    if result.on_commit is not None:
        result.on_commit()
    return result


def latest(s: GroupShard, group: str) -> dict:
    return {tp: v.offset for tp, v in s.offsets.latest.get(group, {}).items()}


def fetch(s: GroupShard, group: str, n: int, stable: bool = True) -> list:
    rows = s.offset_fetch(group, [("t", list(range(n)))], stable=stable)
    return ["unstable" if v is UNSTABLE else (v.offset if v else -1) for _, _, v in rows]


def test_transactional_offsets_wait_for_the_commit_marker():
    loop = asyncio.new_event_loop()
    s = shard(loop)
    result = txn_commit(s, "g", 10, 20)
    assert result.producer == (PID, EPOCH) and len(result.records) == 2
    assert result.response == [("t", 0, E.none), ("t", 1, E.none)]
    assert latest(s, "g") == {}
    assert fetch(s, "g", 3) == ["unstable", "unstable", -1]  # require_stable
    assert fetch(s, "g", 3, stable=False) == [-1, -1, -1]
    done = marker(s, True)
    assert done.marker == (PID, EPOCH, 0, True)
    assert latest(s, "g") == {("t", 0): 10, ("t", 1): 20}
    assert fetch(s, "g", 2) == [10, 20] and fetch(s, "g", 2, stable=False) == [10, 20]
    assert not s.offsets.pending and not s.offsets.open_by_group
    loop.close()


def test_an_aborted_transaction_leaves_no_offsets():
    loop = asyncio.new_event_loop()
    s = shard(loop)
    plain_commit(s, "g", 5)
    txn_commit(s, "g", 50, 60)
    marker(s, False)
    assert latest(s, "g") == {("t", 0): 5}
    assert fetch(s, "g", 2) == [5, -1]
    assert not s.offsets.pending and not s.offsets.stale
    loop.close()


def test_the_most_recent_commit_wins():
    loop = asyncio.new_event_loop()
    s = shard(loop)
    plain_commit(s, "g", 1, 1)  # before the transaction: the transaction's offsets replace it
    txn_commit(s, "g", 100, 200)
    plain_commit(s, "g", 7)  # partition 0 again, after the transaction's commit: it stays
    marker(s, True)
    assert latest(s, "g") == {("t", 0): 7, ("t", 1): 200}
    loop.close()


def test_a_tombstone_drops_the_pending_offset_of_its_partition():
    loop = asyncio.new_event_loop()
    s = shard(loop)
    txn_commit(s, "g", 100, 200)
    s.run(lambda sh: sh.offset_delete("g", [("t", [1])]))
    marker(s, True)
    assert latest(s, "g") == {("t", 0): 100}
    loop.close()


def test_two_producers_in_one_group_end_independently():
    loop = asyncio.new_event_loop()
    s = shard(loop)
    txn_commit(s, "g", 1, pid=1)
    txn_commit(s, "g", 2, 2, pid=2)
    marker(s, False, pid=1)
    assert fetch(s, "g", 2) == ["unstable", "unstable"]  # producer 2 still pending on both
    marker(s, True, pid=2)
    assert latest(s, "g") == {("t", 0): 2, ("t", 1): 2}
    assert not s.offsets.open_by_group
    loop.close()


def test_a_failed_operation_puts_the_pending_offsets_back():
    loop = asyncio.new_event_loop()
    s = shard(loop)
    txn_commit(s, "g", 10, 20)
    before = s.offsets.save_txn()

    def failing(sh):
        sh.offset_commit("g", "", -1, None, 8, -1, parts(3, 4))  # outdates both pending offsets
        sh.txn_offset_commit("g", "", -1, None, 3, 77, 0, parts(9))
        raise CoordinatorError(E.unknown_server_error, "injected")

    with pytest.raises(CoordinatorError):
        s.run(failing)
    assert s.offsets.save_txn() == before
    assert latest(s, "g") == {}
    marker(s, True)
    assert latest(s, "g") == {("t", 0): 10, ("t", 1): 20}
    loop.close()


def test_validation_of_transactional_commits_against_a_classic_group():
    loop = asyncio.new_event_loop()
    s = shard(loop)
    # no group and a generation: ILLEGAL_GENERATION (not GROUP_ID_NOT_FOUND, as OffsetCommit v9 would)
    assert txn_commit(s, "nobody", 1, generation=3, member="m").response == [("t", 0, E.illegal_generation)]
    assert "nobody" not in s.groups
    # a simple group: accepted, and the group exists from then on
    assert txn_commit(s, "simple", 1).response == [("t", 0, E.none)]
    assert "simple" in s.groups
    # metadata too large for one partition only
    big = [CommitPartition("t", 0, 1, -1, "x" * (GroupConfig().offset_metadata_max_bytes + 1)), CommitPartition("t", 1, 1, -1, "")]
    r = s.run(lambda sh: sh.txn_offset_commit("simple", "", -1, None, 3, PID, EPOCH, big))
    assert r.response == [("t", 0, E.offset_metadata_too_large), ("t", 1, E.none)]
    loop.close()


# =========================================================================== through the runtime and back from the log
class _Partition:
    def __init__(self, plog: PartitionLog) -> None:
        self.index = 0
        self.log = plog

    def append(self, batches, origin):
        return self.log.append(batches)

    def notify(self) -> None:
        pass


def test_the_runtime_writes_transactional_and_control_batches_and_a_reload_rebuilds_the_same_state(tmp_path):
    loop = asyncio.new_event_loop()
    plog = PartitionLog.open(tmp_path, LogConfig(cleanup_policy="compact", fsync="never"))

    async def write_all():
        rt = ShardRuntime(0, _Partition(plog), GroupConfig(append_linger_ms=1), fsync_always=False, log=_Quiet())
        await rt.load()
        w = rt.write
        await w(lambda sh: sh.offset_commit("g", "", -1, None, 8, -1, parts(1, 1, 1)))
        await w(lambda sh: sh.txn_offset_commit("g", "", -1, None, 3, 1, 0, parts(10, 10)))  # producer 1: committed
        await w(lambda sh: sh.txn_offset_commit("g", "", -1, None, 3, 2, 0, parts(20, 20, 20)))  # producer 2: aborted
        await w(lambda sh: sh.offset_commit("g", "", -1, None, 8, -1, [CommitPartition("t", 1, 5, -1, "")]))  # outdates producer 1's p1
        await w(lambda sh: sh.complete_txn(1, 0, 0, True))
        await w(lambda sh: sh.complete_txn(2, 0, 0, False))
        await w(lambda sh: sh.txn_offset_commit("g", "", -1, None, 3, 3, 0, parts(30)))  # producer 3: still open
        fetched = await rt.read(lambda sh: sh.offset_fetch("g", [("t", [0, 1, 2])], stable=False))
        rt.close()
        return rt.shard, fetched

    live, fetched = loop.run_until_complete(write_all())
    assert [v.offset for _, _, v in fetched] == [10, 5, 1]  # the committed view got producer 1's offsets with its marker
    kinds = [(h.is_transactional, h.is_control, h.producer_id) for h, _ in split_batches(plog.read(0, 1 << 20))]
    assert (True, False, 1) in kinds and (True, True, 1) in kinds and (True, True, 2) in kinds and (True, False, 3) in kinds
    assert (False, False, -1) in kinds

    async def reload():
        rt = ShardRuntime(0, _Partition(plog), GroupConfig(), fsync_always=False, log=_Quiet())
        await rt.load()
        rt.close()
        return rt.shard

    loaded = loop.run_until_complete(reload())
    plog.close()
    assert latest(loaded, "g") == latest(live, "g") == {("t", 0): 10, ("t", 1): 5, ("t", 2): 1}
    assert loaded.offsets.save_txn() == live.offsets.save_txn()
    assert set(loaded.offsets.pending) == {3}
    assert fetch(loaded, "g", 3) == ["unstable", 5, 1]
    assert {tp: v.offset for tp, v in loaded.offsets.committed["g"].items()} == latest(live, "g")
    assert OffsetCommitKey("g", "t", 0) is not None
    loop.close()


def test_deleting_the_group_drops_offsets_that_only_a_transaction_holds():
    loop = asyncio.new_event_loop()
    s = shard(loop)
    plain_commit(s, "g", 1)
    txn_commit(s, "g", 10, 20)  # partition 1 has only the pending offset
    result = s.run(lambda sh: sh.delete_groups(["g"]))
    assert result.response == [("g", E.none)]
    tombstones = sorted((k.topic, k.partition) for k, v in result.records if isinstance(k, OffsetCommitKey) and v is None)
    assert tombstones == [("t", 0), ("t", 1)]
    marker(s, True)
    assert latest(s, "g") == {}
    loop.close()


def test_retention_spares_offsets_with_a_transaction_pending():
    loop = asyncio.new_event_loop()
    now = [T0]
    s = GroupShard(0, GroupConfig(offsets_retention_ms=1000), lambda: now[0], _Quiet(), loop.create_future)
    plain_commit(s, "g", 1, 2)
    txn_commit(s, "g", 10)  # partition 0 pending
    now[0] += 5000
    result = s.run(lambda sh: sh.expire_offsets())
    expired = sorted((k.topic, k.partition) for k, v in result.records if isinstance(k, OffsetCommitKey) and v is None)
    assert expired == [("t", 1)]
    assert "g" in s.groups  # not removed while a transaction holds an offset in it
    marker(s, True)
    assert latest(s, "g") == {("t", 0): 10}
    loop.close()


def test_the_end_of_a_transaction_is_a_group_event():
    loop = asyncio.new_event_loop()
    s = shard(loop)
    txn_commit(s, "g", 10, 20)
    plain_commit(s, "g", 1)  # outdates partition 0 of the transaction
    committed = marker(s, True)
    assert [(e.event, e.group, e.fields["partitions"], e.fields["outdated"]) for e in committed.events] == [
        ("transactional offsets committed", "g", 1, 1)]
    txn_commit(s, "h", 5, pid=9)
    aborted = marker(s, False, pid=9)
    assert [(e.event, e.group, e.fields["partitions"], e.fields["producer_id"]) for e in aborted.events] == [
        ("transactional offsets aborted", "h", 1, 9)]
    assert marker(s, True, pid=12345).events == []  # a producer with nothing pending here
    loop.close()
