"""Wire-level behaviour that clients rely on but rarely show: idempotence,
fetch sessions, offset lookups, size limits."""

from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode
from protocol.records import Record, build_batch, iter_records, split_batches
from tests.raw import RawClient


def records(n, start_ts=1_000, value=b"v"):
    return [Record(offset=i, timestamp=start_ts + i, key=b"k%d" % i, value=value, headers=[]) for i in range(n)]


def create(c: RawClient, topic: str, partitions: int = 1, configs=None):
    body = {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "configs": configs or []}], "timeout": 5000}
    assert c.request(19, 7, body).topics[0].error_code == ErrorCode.none


def produce(c: RawClient, topic: str, batch: bytes):
    resp = c.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return resp.responses[0].partition_responses[0]


def fetch(c: RawClient, topic: str, offset: int, *, max_bytes=1 << 20, partition_max=1 << 20, session_id=0, session_epoch=-1, max_wait=0):
    body = {
        "max_wait": max_wait,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": session_epoch,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1, "partition_max_bytes": partition_max}]}],
    }
    return c.request(1, 12, body)


def list_offset(c: RawClient, topic: str, ts: int):
    resp = c.request(2, 7, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": ts}]}]})
    return resp.topics[0].partitions[0]


@pytest.fixture
def raw(shared_broker):
    c = RawClient(shared_broker.bootstrap)
    yield c
    c.close()


def test_idempotent_duplicates_and_gaps(raw):
    create(raw, "idem")
    init = raw.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})
    assert init.error_code == ErrorCode.none and init.producer_id >= 0
    pid = init.producer_id
    b0 = build_batch(records(5), producer_id=pid, producer_epoch=0, base_sequence=0)
    b1 = build_batch(records(3), producer_id=pid, producer_epoch=0, base_sequence=5)
    assert produce(raw, "idem", b0).base_offset == 0
    assert produce(raw, "idem", b1).base_offset == 5
    # a retried batch is not written twice and gets its first offset back
    dup = produce(raw, "idem", b0)
    assert (dup.error_code, dup.base_offset) == (ErrorCode.none, 0)
    gap = build_batch(records(2), producer_id=pid, producer_epoch=0, base_sequence=20)
    assert produce(raw, "idem", gap).error_code == ErrorCode.out_of_order_sequence_number
    assert list_offset(raw, "idem", -1).offset == 8
    # a second producer id is handed out, never the same
    again = raw.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})
    assert again.producer_id != pid


def test_duplicate_detected_after_restart(broker):
    c = RawClient(broker.bootstrap)
    create(c, "idem-restart")
    pid = c.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}).producer_id
    b0 = build_batch(records(4), producer_id=pid, producer_epoch=0, base_sequence=0)
    assert produce(c, "idem-restart", b0).base_offset == 0
    c.close()
    broker.restart()
    c = RawClient(broker.bootstrap)
    assert produce(c, "idem-restart", b0).base_offset == 0
    assert list_offset(c, "idem-restart", -1).offset == 4
    newer = c.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}).producer_id
    assert newer > pid
    c.close()


def test_a_transactional_id_gets_a_producer_id_once_the_coordinator_has_loaded(raw):
    """The first transactional request makes __transaction_state; until its partitions are loaded the
    answer is the retriable COORDINATOR_LOAD_IN_PROGRESS, then a producer id at epoch 0, then epoch 1."""
    body = {"transactional_id": "txn-1", "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    deadline = time.monotonic() + 30
    resp = raw.request(22, 4, body)
    while resp.error_code == ErrorCode.coordinator_load_in_progress and time.monotonic() < deadline:
        resp = raw.request(22, 4, body)
    assert resp.error_code == ErrorCode.none and resp.producer_id >= 0 and resp.producer_epoch == 0
    again = raw.request(22, 4, body)
    assert again.error_code == ErrorCode.none and again.producer_id == resp.producer_id and again.producer_epoch == 1


def test_fetch_sessions_are_declined(raw):
    create(raw, "sessions")
    produce(raw, "sessions", build_batch(records(2)))
    full = fetch(raw, "sessions", 0, session_id=0, session_epoch=0)
    assert full.error_code == ErrorCode.none and full.session_id == 0
    assert len(list(iter_records(full.responses[0].partitions[0].records))) == 2
    incremental = fetch(raw, "sessions", 0, session_id=1234, session_epoch=1)
    assert incremental.error_code == ErrorCode.fetch_session_id_not_found


def test_fetch_out_of_range_and_first_batch_beyond_max_bytes(raw):
    create(raw, "sizes")
    big = build_batch(records(4, value=b"x" * 4000))
    produce(raw, "sizes", big)
    produce(raw, "sizes", build_batch(records(1)))
    resp = fetch(raw, "sizes", 99)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
    # KIP-74: the first batch comes back whole even when larger than the limits
    part = fetch(raw, "sizes", 0, max_bytes=100, partition_max=100).responses[0].partitions[0]
    batches = split_batches(part.records)
    assert part.error_code == ErrorCode.none and len(batches) == 1 and batches[0][0].records_count == 4
    assert part.high_watermark == 5
    # fetching from the middle of a batch returns that whole batch, as Kafka does
    mid = fetch(raw, "sizes", 2).responses[0].partitions[0]
    assert split_batches(mid.records)[0][0].base_offset == 0


def test_list_offsets_special_timestamps(raw):
    create(raw, "special-ts")
    produce(raw, "special-ts", build_batch([Record(offset=i, timestamp=ts, key=None, value=b"v", headers=[]) for i, ts in enumerate([5_000, 9_000, 7_000])]))
    produce(raw, "special-ts", build_batch(records(2, start_ts=6_000)))
    assert list_offset(raw, "special-ts", -2).offset == 0
    assert list_offset(raw, "special-ts", -1).offset == 5
    biggest = list_offset(raw, "special-ts", -3)
    assert (biggest.offset, biggest.timestamp) == (1, 9_000)
    found = list_offset(raw, "special-ts", 8_000)
    assert (found.offset, found.timestamp) == (1, 9_000)


def test_offset_for_leader_epoch(raw):
    create(raw, "epochs")
    produce(raw, "epochs", build_batch(records(3)))
    body = {"replica_id": -1, "topics": [{"topic": "epochs", "partitions": [{"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]}
    part = raw.request(23, 4, body).topics[0].partitions[0]
    assert (part.error_code, part.leader_epoch, part.end_offset) == (ErrorCode.none, 0, 3)


def test_log_append_time_topic(raw):
    create(raw, "lat", configs=[{"name": "message.timestamp.type", "value": "LogAppendTime"}])
    part = produce(raw, "lat", build_batch(records(2, start_ts=1)))
    assert part.log_append_time is not None and part.log_append_time.year >= 2026
    data = fetch(raw, "lat", 0).responses[0].partitions[0].records
    stamped = {r.timestamp for r in iter_records(split_batches(data)[0][1])}
    assert stamped == {int(part.log_append_time.timestamp() * 1000)}


def test_message_too_large(raw):
    create(raw, "small-max", configs=[{"name": "max.message.bytes", "value": "1000"}])
    part = produce(raw, "small-max", build_batch(records(1, value=b"x" * 2000)))
    assert part.error_code == ErrorCode.message_too_large


def test_offset_commit_larger_than_max_message_bytes_is_split_into_batches(raw):
    """600 commits with 4000-byte metadata (2.4 MB of records) in one request all land."""
    create(raw, "wide", partitions=600)
    body = {
        "group_id": "wide-group",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": "wide", "partitions": [{"partition_index": p, "committed_offset": p, "committed_leader_epoch": -1, "committed_metadata": "m" * 4000} for p in range(600)]}],
    }
    resp = raw.request(8, 9, body)
    assert {p.error_code for p in resp.topics[0].partitions} == {ErrorCode.none}
    fetched = raw.request(9, 8, {"groups": [{"group_id": "wide-group", "topics": [{"name": "wide", "partition_indexes": [0, 599]}]}], "require_stable": True})
    assert [p.committed_offset for p in fetched.groups[0].topics[0].partitions] == [0, 599]
