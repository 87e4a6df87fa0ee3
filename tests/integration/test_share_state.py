"""The share coordinator over the wire: FindCoordinator SHARE, the share-state RPCs (83-87), kill -9.

Raw requests (tests/raw.py) to a broker child process (tests/broker_process.py),
so the durability test can SIGKILL it and read the state back after restart.
"""

from __future__ import annotations

import uuid

import pytest

from broker.share.coordinator import coordinator_key, java_uuid
from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.raw import RawClient
from tests.wait import wait_until

INIT, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share-state")).start()
    yield b
    b.stop()


def _topic(raw: RawClient, name: str, partitions: int = 2) -> uuid.UUID:
    resp = raw.request(19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                                           "configs": []}], "timeout": 10000})
    assert resp.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists)
    meta = raw.request(3, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
    return meta.topics[0].topic_id


def _one(resp):
    [result] = resp.results
    [part] = result.partitions
    return part


def _init(raw, group, tid, partition=0, state_epoch=0, start_offset=-1):
    return _one(raw.request(INIT, 0, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
        {"partition": partition, "state_epoch": state_epoch, "start_offset": start_offset}]}]}))


def _write(raw, group, tid, batches, *, partition=0, state_epoch=0, leader_epoch=0, start_offset=-1, version=1):
    return _one(raw.request(WRITE, version, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [{
        "partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset,
        "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c} for f, la, s, c in batches],
    }]}]}))


def _read(raw, group, tid, partition=0, leader_epoch=0):
    return _one(raw.request(READ, 0, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
        {"partition": partition, "leader_epoch": leader_epoch}]}]}))


def _summary(raw, group, tid, partition=0):
    return _one(raw.request(SUMMARY, 1, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
        {"partition": partition, "leader_epoch": 0}]}]}))


def _batches(part):
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in part.state_batches]


def test_find_coordinator_share_key(broker):
    raw = RawClient(broker.bootstrap)
    tid = _topic(raw, "fc-share")
    key = coordinator_key("g", tid, 0)
    resp = raw.request(10, 6, {"key_type": 2, "coordinator_keys": [key, "no-colons", f"g:{java_uuid(tid)}:x", ":x:1"]})
    codes = [c.error_code for c in resp.coordinators]
    assert codes == [ErrorCode.none, ErrorCode.invalid_request, ErrorCode.invalid_request, ErrorCode.invalid_request]
    assert resp.coordinators[0].port == broker.port
    # a SHARE key below v6 is refused, as Kafka 4.4 refuses it
    old = raw.request(10, 5, {"key_type": 2, "coordinator_keys": [key]})
    assert old.coordinators[0].error_code == ErrorCode.invalid_request


def test_state_life_cycle(broker):
    raw = RawClient(broker.bootstrap)
    tid = _topic(raw, "life")
    # nothing yet: a write and a read are refused, the summary is -1
    assert _write(raw, "g1", tid, []).error_code == ErrorCode.invalid_request
    assert _read(raw, "g1", tid).error_message == "Read operation on uninitialized share partition not allowed."
    assert _summary(raw, "g1", tid).start_offset == -1
    assert _init(raw, "g1", tid, start_offset=5).error_code == ErrorCode.none
    assert _write(raw, "g1", tid, [(5, 9, 0, 1), (7, 8, 2, 1)], start_offset=5).error_code == ErrorCode.none
    part = _read(raw, "g1", tid)
    assert part.error_code == ErrorCode.none and part.start_offset == 5
    assert _batches(part) == [(5, 6, 0, 1), (7, 8, 2, 1), (9, 9, 0, 1)]
    # an update moves the start offset: what lies below it goes
    assert _write(raw, "g1", tid, [(9, 9, 4, 5)], start_offset=8).error_code == ErrorCode.none
    assert _batches(_read(raw, "g1", tid)) == [(8, 8, 2, 1), (9, 9, 4, 5)]
    s = _summary(raw, "g1", tid)
    assert (s.error_code, s.start_offset, s.state_epoch) == (ErrorCode.none, 8, 0)
    # epochs: a newer leader epoch by a read fences older writes; a newer state epoch fences older ones
    assert _read(raw, "g1", tid, leader_epoch=3).error_code == ErrorCode.none
    assert _write(raw, "g1", tid, [], leader_epoch=2).error_code == ErrorCode.fenced_leader_epoch
    assert _init(raw, "g1", tid, state_epoch=1, start_offset=20).error_code == ErrorCode.none
    assert _write(raw, "g1", tid, [], state_epoch=0, leader_epoch=3).error_code == ErrorCode.fenced_state_epoch
    assert _read(raw, "g1", tid, leader_epoch=3).start_offset == 20
    assert _init(raw, "g1", tid, state_epoch=0).error_code == ErrorCode.fenced_state_epoch
    # delete: gone, and deleting again is fine
    req = {"group_id": "g1", "topics": [{"topic_id": tid, "partitions": [{"partition": 0}]}]}
    assert _one(raw.request(DELETE, 0, req)).error_code == ErrorCode.none
    assert _summary(raw, "g1", tid).start_offset == -1
    assert _one(raw.request(DELETE, 0, req)).error_code == ErrorCode.none


def test_bad_input(broker):
    raw = RawClient(broker.bootstrap)
    tid = _topic(raw, "bad", partitions=1)
    assert _init(raw, "g2", tid, partition=-1).error_message == "The partition id cannot be a negative number."
    assert _init(raw, "g2", tid, partition=1).error_code == ErrorCode.unknown_topic_or_partition
    assert _init(raw, "g2", uuid.uuid4()).error_code == ErrorCode.unknown_topic_or_partition
    # the zero topic id (the network fuzzer's find: every RPC raised on it) is answered as any unknown id
    zero, unknown = uuid.UUID(int=0), uuid.uuid4()

    def delete(t):
        return _one(raw.request(DELETE, 0, {"group_id": "g2", "topics": [{"topic_id": t, "partitions": [{"partition": 0}]}]}))

    for rpc in (lambda t: _init(raw, "g2", t), lambda t: _write(raw, "g2", t, [(0, 1, 0, 1)]), lambda t: _read(raw, "g2", t),
                lambda t: _summary(raw, "g2", t), delete):
        answer = rpc(zero)
        assert (answer.error_code, answer.error_message) == ((u := rpc(unknown)).error_code, u.error_message)
    assert _init(raw, "g2", tid, state_epoch=-5).error_code == ErrorCode.invalid_request
    assert _init(raw, "g2", tid).error_code == ErrorCode.none
    assert _write(raw, "g2", tid, [], leader_epoch=-1).error_message == "The leader epoch cannot be a negative number."
    # reversed and overlapping batches are merged, never raised on
    assert _write(raw, "g2", tid, [(10, 5, 0, 1), (0, 100, 0, 1), (50, 60, 4, 2), (55, 70, 2, 1)], start_offset=0).error_code == ErrorCode.none
    assert _batches(_read(raw, "g2", tid)) == [(0, 49, 0, 1), (50, 54, 4, 2), (55, 70, 2, 1), (71, 100, 0, 1)]
    # an empty group id or no topics: an empty answer, as Kafka 4.4
    assert raw.request(INIT, 0, {"group_id": "", "topics": [{"topic_id": tid, "partitions": [{"partition": 0}]}]}).results == ()
    assert raw.request(READ, 0, {"group_id": "g2", "topics": []}).results == ()
    # many batches in one write: merged in one pass
    many = [(i * 2, i * 2 + 1, i % 2 * 2, 1) for i in range(20000)]
    assert _write(raw, "g2", tid, many, start_offset=0).error_code == ErrorCode.none
    assert len(_batches(_read(raw, "g2", tid))) == 20000


def test_state_survives_kill_9(tmp_path):
    b = BrokerProcess(tmp_path).start()
    try:
        raw = RawClient(b.bootstrap)
        tid = _topic(raw, "k9", partitions=3)
        for p in range(3):
            assert _init(raw, "k9g", tid, partition=p, start_offset=p).error_code == ErrorCode.none
        # enough writes on partition 0 to pass the 500 updates per snapshot: a ShareSnapshot follows
        for i in range(520):
            assert _write(raw, "k9g", tid, [(i, i, 2, 1)], start_offset=0, leader_epoch=1).error_code == ErrorCode.none
        assert _write(raw, "k9g", tid, [(7, 9, 4, 3)], partition=2, start_offset=2).error_code == ErrorCode.none
        raw.request(DELETE, 0, {"group_id": "k9g", "topics": [{"topic_id": tid, "partitions": [{"partition": 1}]}]})
        expected0 = _batches(_read(raw, "k9g", tid, leader_epoch=1))
        assert expected0 == [(0, 519, 2, 1)]
        b.kill()
        b.start()
        raw = RawClient(b.bootstrap)

        def loaded(ask, **kw):
            """The answer once its share coordinator shard has loaded (each loads in the background
            after start, and partitions of one group may be on different shards)."""
            return wait_until(lambda: (lambda r: r if r.error_code != ErrorCode.coordinator_load_in_progress else None)(ask(raw, "k9g", tid, **kw)),
                              what="the share coordinator shard loaded")

        part = loaded(_read, leader_epoch=1)
        assert part.error_code == ErrorCode.none and _batches(part) == expected0
        part2 = loaded(_read, partition=2)
        assert part2.error_code == ErrorCode.none and _batches(part2) == [(7, 9, 4, 3)]
        assert loaded(_summary, partition=1).start_offset == -1
        # the fence survives too
        assert _write(raw, "k9g", tid, [], leader_epoch=0).error_code == ErrorCode.fenced_leader_epoch
    finally:
        b.stop()


def test_deleting_a_topic_deletes_its_share_state(broker):
    raw = RawClient(broker.bootstrap)
    tid = _topic(raw, "gone", partitions=2)
    for p in (0, 1):
        assert _init(raw, "gd", tid, partition=p, start_offset=3).error_code == ErrorCode.none
    assert _summary(raw, "gd", tid, partition=1).start_offset == 3
    r = raw.request(20, 6, {"topics": [{"name": "gone", "topic_id": None}], "timeout": 10000})
    assert r.responses[0].error_code == ErrorCode.none
    tid2 = _topic(raw, "gone", partitions=2)  # the same name again: a new topic id, no state
    assert _summary(raw, "gd", tid2, partition=1).start_offset == -1
    # the old topic id is unknown now (its state's tombstones: tests/unit/test_share_state.py)
    assert _summary(raw, "gd", tid, partition=1).error_code == ErrorCode.unknown_topic_or_partition
