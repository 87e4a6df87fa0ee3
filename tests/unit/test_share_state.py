"""The share coordinator's shard (broker/share/state.py): records, Kafka 4.4's snapshot rule, replay."""

from __future__ import annotations

import uuid

import pytest

from broker.share.batches import merge_batches
from broker.share.coordinator import coordinator_key, java_uuid, parse_coordinator_key
from broker.share.state import ShareConfig, ShareStateError, ShareStateShard, WriteData
from protocol.errors import ErrorCode
from protocol.share_records import (
    SNAPSHOT,
    UPDATE,
    ShareKey,
    ShareRecordError,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

TID = uuid.UUID("0b1c3a6e-0f4e-4d59-9d3e-2f6f0b2a4c11")


def _shard(per_snapshot: int = 3) -> ShareStateShard:
    return ShareStateShard(ShareConfig(snapshot_update_records_per_snapshot=per_snapshot), lambda: 42, lambda tid: 4)


def _commit(shard, records, log):
    for key, value in records:
        raw = (encode_key(key), encode_value(value))
        log.append(raw)
        shard.replay_bytes(*raw)


def test_records_round_trip_in_kafkas_layout():
    key = ShareKey(SNAPSHOT, "g", TID, 3)
    raw = encode_key(key)
    assert raw[:2] == b"\x00\x00" and raw[2:4] == b"\x00\x01" and raw[4:5] == b"g" and raw[5:21] == TID.bytes and raw[21:] == b"\x00\x00\x00\x03"
    assert decode_key(raw) == key
    snap = ShareSnapshotValue(1, 2, 3, 10, 100, 200, [StateBatch(10, 12, 2, 1)], 7)
    assert decode_value(SNAPSHOT, encode_value(snap)) == snap
    upd = ShareUpdateValue(1, 3, -1, [StateBatch(1, 1, 4, 5)], -1)
    body = encode_value(upd)
    assert body.endswith(b"\x00") and decode_value(UPDATE, body) == upd  # no tagged field at its default
    assert decode_key(b"\x00\x07xyz") is None  # another record type: skipped
    for bad in (body[:-3], b"\x00\x01" + body[2:], body[:6] + b"\xff\xff\xff\xff\x0f"):
        with pytest.raises(ShareRecordError):
            decode_value(UPDATE, bad)


def test_snapshot_after_n_updates_and_replay_rebuilds_the_state():
    shard, log = _shard(per_snapshot=3), []
    _commit(shard, shard.initialize("g", TID, 0, 0, 0), log)
    kinds = []
    for i in range(8):
        records = shard.write("g", TID, WriteData(0, 0, 0, -1, [StateBatch(i, i, 2, 1)]))
        kinds.append(records[0][0].record_type)
        _commit(shard, records, log)
    # Kafka 4.4: an update while fewer than N updates followed the last snapshot, then a snapshot
    assert kinds == [UPDATE, UPDATE, UPDATE, UPDATE, SNAPSHOT, UPDATE, UPDATE, UPDATE]
    state = shard.states[("g", TID, 0)]
    assert state.snapshot_epoch == 1 and state.state_batches == [StateBatch(0, 7, 2, 1)]
    fresh = _shard(per_snapshot=3)
    for raw in log:
        fresh.replay_bytes(*raw)
    assert fresh.states == shard.states and fresh.leader_epochs == shard.leader_epochs and fresh.update_counts == shard.update_counts


def test_cold_partitions_get_a_new_snapshot():
    clock = [1_000]
    shard = ShareStateShard(ShareConfig(cold_snapshot_interval_ms=500), lambda: clock[0], lambda tid: 4)
    for key, value in shard.initialize("g", TID, 0, 0, 3) + shard.initialize("g", TID, 1, 0, 0):
        shard.replay(key, value, 0)
    for key, value in shard.write("g", TID, WriteData(0, 0, 0, -1, [StateBatch(3, 4, 2, 1)])):
        shard.replay(key, value, 1)
    assert shard.cold_snapshots() == []
    clock[0] += 501
    cold = shard.cold_snapshots()
    assert [(k.record_type, k.partition) for k, _ in cold] == [(SNAPSHOT, 0), (SNAPSHOT, 1)]
    assert cold[0][1].snapshot_epoch == 1 and cold[0][1].state_batches == [StateBatch(3, 4, 2, 1)] and cold[0][1].write_timestamp == 1_501
    for key, value in cold:
        shard.replay(key, value, 2)
    assert shard.cold_snapshots() == [] and shard.redundant_offset(10) == 2


def test_tombstone_forgets_and_epochs_fence():
    shard, log = _shard(), []
    _commit(shard, shard.initialize("g", TID, 1, 2, 5), log)
    with pytest.raises(ShareStateError) as err:
        shard.initialize("g", TID, 1, 1, 5)
    assert err.value.code == ErrorCode.fenced_state_epoch
    records, _ = shard.read("g", TID, 1, 4)
    assert records and records[0][1].leader_epoch == 4  # a newer leader epoch is written by the read
    _commit(shard, records, log)
    with pytest.raises(ShareStateError) as err:
        shard.write("g", TID, WriteData(1, 2, 3, -1, []))
    assert err.value.code == ErrorCode.fenced_leader_epoch
    _commit(shard, shard.delete("g", TID, 1), log)
    assert ("g", TID, 1) not in shard.states and shard.delete("g", TID, 1) == []
    with pytest.raises(ShareStateError) as err:
        shard.write("g", TID, WriteData(1, 2, 4, -1, []))
    assert err.value.message == "Write operation on uninitialized share partition not allowed."
    with pytest.raises(ShareStateError) as err:
        shard.initialize("g", TID, 4, 0, 0)  # the topic has 4 partitions
    assert err.value.code == ErrorCode.unknown_topic_or_partition


def test_merge_batches():
    cur = [StateBatch(0, 9, 0, 1)]
    assert merge_batches(cur, [StateBatch(3, 4, 2, 1)], 0) == [StateBatch(0, 2, 0, 1), StateBatch(3, 4, 2, 1), StateBatch(5, 9, 0, 1)]
    assert merge_batches(cur, [StateBatch(3, 4, 2, 1)], 4) == [StateBatch(4, 4, 2, 1), StateBatch(5, 9, 0, 1)]
    assert merge_batches(cur, [StateBatch(0, 9, 0, 1)], 0) == [StateBatch(0, 9, 0, 1)]
    # reversed batches are dropped; adjacent equal ones are joined
    assert merge_batches([], [StateBatch(5, 1, 2, 1), StateBatch(0, 1, 2, 1), StateBatch(2, 3, 2, 1)], -1) == [StateBatch(0, 3, 2, 1)]


def test_coordinator_keys():
    key = coordinator_key("grp", TID, 7)
    assert key == f"grp:{java_uuid(TID)}:7" and len(java_uuid(TID)) == 22
    assert parse_coordinator_key(key) == ("grp", TID, 7)
    for bad in ("grp", "grp:x:1", f"grp:{java_uuid(TID)}:z", f":{java_uuid(TID)}:1", "a:b:c:d"):
        with pytest.raises(ValueError):
            parse_coordinator_key(bad)


async def test_pruning_keeps_what_rebuilds_the_state(tmp_path):
    """Records below every key's latest snapshot are deleted, and a restart still rebuilds the same state."""
    from broker.testing import Broker

    async with Broker(tmp_path, settings={"share.coordinator.state.topic.num.partitions": 1,
                                          "share.coordinator.snapshot.update.records.per.snapshot": 3}) as b:
        await b.create_topic("pr", 2)
        tid = b.cluster.topics["pr"].topic_id
        co = b.server.share_coordinator
        co.ensure_started()
        for p in (0, 1):
            co.initialize("g", tid, p, 0, 0)
        for i in range(9):
            co.write("g", tid, WriteData(0, 0, 0, -1, [StateBatch(i, i, 2, 1)]))
        co.write("g", tid, WriteData(1, 0, 0, -1, [StateBatch(0, 0, 4, 2)]))
        [rt] = co.runtimes
        # partition 1's only snapshot is its initialization (offset 1): only partition 0's first snapshot goes
        assert rt.shard.snapshot_offsets[("g", tid, 1)] == 1 and rt.prune() == 1
        co.initialize("g", tid, 1, 1, 5)  # a new snapshot for partition 1
        start = rt.prune()
        assert start > 0 and start == rt.shard.snapshot_offsets[("g", tid, 0)]
        before = {k: v for k, v in rt.shard.states.items()}
        await b.restart()
        co = b.server.share_coordinator
        await co.loaded()
        assert co.runtimes[0].partition.log.log_start_offset == start
        assert co.runtimes[0].shard.states == before
        # every state deleted: nothing is needed any more
        co.delete("g", tid, 0)
        co.delete("g", tid, 1)
        plog = co.runtimes[0].partition.log
        assert co.runtimes[0].prune() == plog.log_end_offset


async def test_deleting_a_topic_writes_tombstones_for_its_share_state(tmp_path):
    from broker.testing import Broker

    async with Broker(tmp_path, settings={"share.coordinator.state.topic.num.partitions": 1}) as b:
        await b.create_topic("doomed", 2)
        await b.create_topic("kept", 1)
        doomed, kept = b.cluster.topics["doomed"].topic_id, b.cluster.topics["kept"].topic_id
        co = b.server.share_coordinator
        co.ensure_started()
        for tid, p in ((doomed, 0), (doomed, 1), (kept, 0)):
            co.initialize("g", tid, p, 0, 0)
        await b.delete_topic("doomed")
        assert set(co.runtimes[0].shard.states) == {("g", kept, 0)}
        await b.restart()
        await b.server.share_coordinator.loaded()
        assert set(b.server.share_coordinator.runtimes[0].shard.states) == {("g", kept, 0)}
