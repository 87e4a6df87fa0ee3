"""Every handler answers every well-formed request, and answers it as Kafka does.

A handler that raises is a broker bug: the server logs "handler failed" and
closes the client's connection. The brokers here fail the test when that
happens (``broker.testing`` notes it, ``tests.broker_process`` finds it in the
broker's stderr at stop), on top of what each test asserts.

What Kafka 4.1 answers was checked against a real broker (tests/reference_kafka.py):
an empty Fetch is answered at once, a parked Fetch is woken by the deletion of
its topic and answered UNKNOWN_TOPIC_OR_PARTITION, an unknown or zero topic id
is UNKNOWN_TOPIC_ID in Fetch v13+ and Produce v13, a compacted topic refuses a
keyless record with INVALID_RECORD and the LogValidator's messages, and a null
array where the schema has none closes the connection.
"""

from __future__ import annotations

import asyncio
import os
import select
import struct
import time
import uuid
from dataclasses import fields
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, get_field_tag, is_optional

from broker.handlers import HANDLERS, supported_versions
from broker.testing import Broker, BrokerThread, HandlerFailed
from protocol.codec import build, encode, request_class
from protocol.compression import GZIP, ZSTD
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch, split_batches
from tests.raw import RawClient

ZERO_ID = uuid.UUID(int=0)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(c: RawClient, topic: str, partitions: int = 1, configs: dict | None = None) -> uuid.UUID:
    configs = [{"name": k, "value": v} for k, v in (configs or {}).items()]
    body = {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "configs": configs}], "timeout": 5000}
    result = c.request(19, 7, body).topics[0]
    assert result.error_code == ErrorCode.none, result
    return result.topic_id


def _produce(c: RawClient, topic: str, records: bytes, partition: int = 0, version: int = 9):
    body = {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    return c.request(0, version, body).responses[0].partition_responses[0]


def _fetch_body(topic: str, partitions, *, max_wait: int, max_bytes: int = 1 << 20, partition_max: int = 1 << 20, topic_id=None) -> dict:
    return {
        "replica_id": -1,
        "max_wait": max_wait,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [{"partition": p, "fetch_offset": offset, "partition_max_bytes": partition_max, "current_leader_epoch": -1} for p, offset in partitions],
            }
        ],
    }


def _frame(c: RawClient, api_key: int, version: int, body: dict) -> bytes:
    """One request frame, as ``RawClient.request`` sends it; read its answer later with ``c.read_response``."""
    c.corr += 1
    cls = request_class(api_key, version)
    header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
    header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=c.corr, client_id="raw")
    payload = encode(header) + encode(build(cls, body))
    return struct.pack(">i", len(payload)) + payload


def _send(c: RawClient, api_key: int, version: int, body: dict) -> None:
    c.sock.sendall(_frame(c, api_key, version, body))


def _answered_yet(c: RawClient) -> bool:
    return bool(select.select([c.sock], [], [], 0)[0])


def _alive(c: RawClient) -> bool:
    """The connection still answers (ApiVersions)."""
    return c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == ErrorCode.none


def _batch(n: int = 1, *, value: bytes = b"v", keyed: bool = True, compression: int = 0) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(offset=i, timestamp=now, key=(b"k%d" % i) if keyed else None, value=value) for i in range(n)], compression=compression)


@pytest.fixture
def raw(shared_broker):
    c = RawClient(shared_broker.bootstrap)
    yield c
    c.close()


# ------------------------------------------------------------------ 1. fetch long polls


def test_empty_fetch_is_answered_at_once_and_parked_fetches_do_not_block_others(shared_broker, raw):
    """The frame from the bug report (Fetch v4, no topics, max_wait 5 s) spun the event loop.

    Kafka answers a fetch with no partition to wait on at once; a fetch that
    has one parks without holding anyone else up.
    """
    frame = bytes.fromhex("00000023000100040000000100047370696effffffff0000138800000001001000000000000000")
    raw.sock.sendall(frame)
    raw.corr = 1
    assert raw.read_response(1, 4).responses == ()

    topic = _name("park")
    _create(raw, topic)
    parked = RawClient(shared_broker.bootstrap)
    parked.sock.settimeout(60)
    # one fetch parks on an empty partition for up to 30 s ...
    _send(parked, 1, 11, _fetch_body(topic, [(0, 0)], max_wait=30_000))
    # ... then one asks for nothing with a longer wait: were it parked for its wait
    # (or spinning through it), the first would time out, empty, before it is answered
    empty = RawClient(shared_broker.bootstrap)
    empty.sock.settimeout(60)
    _send(empty, 1, 11, {"replica_id": -1, "max_wait": 60_000, "min_bytes": 1, "max_bytes": 1 << 20, "session_epoch": -1, "topics": []})
    assert empty.read_response(1, 11).responses == ()
    # another client is served while the first is parked, before it is answered
    other = RawClient(shared_broker.bootstrap)
    assert _alive(other)
    assert not _answered_yet(parked)
    # it is still parked: the produce wakes it and it carries the record
    assert _produce(raw, topic, _batch()).error_code == ErrorCode.none
    woken = parked.read_response(1, 11).responses[0].partitions[0]
    assert woken.error_code == ErrorCode.none and split_batches(woken.records)[0][0].records_count == 1
    for c in (parked, empty, other):
        c.close()


# ------------------------------------------------------------------ 2. fetch max_bytes


def test_fetch_max_bytes_bounds_the_whole_response(raw):
    topic = _name("maxbytes")
    _create(raw, topic, 3, {"max.message.bytes": str(3 << 20)})
    batch = _batch(value=os.urandom(300_000))
    for p in range(3):
        for _ in range(4):
            assert _produce(raw, topic, batch, partition=p).error_code == ErrorCode.none
    body = _fetch_body(topic, [(p, 0) for p in range(3)], max_wait=0, max_bytes=1 << 20, partition_max=10 << 20)
    parts = raw.request(1, 12, body).responses[0].partitions
    sizes = [len(p.records) for p in parts]
    assert 0 < sum(sizes) <= 1 << 20
    # whole batches only, and all partitions are still reported with their high watermark
    assert sizes[0] == 3 * len(batch)
    assert [p.high_watermark for p in parts] == [4, 4, 4]
    # max_bytes 0: only the one batch KIP-74 allows
    body["max_bytes"] = 0
    sizes = [len(p.records) for p in raw.request(1, 12, body).responses[0].partitions]
    assert sizes == [len(batch), 0, 0]

    # a single batch larger than max_bytes comes back whole, and alone
    big = _batch(value=os.urandom(2_000_000))
    assert _produce(raw, topic, big, partition=1).error_code == ErrorCode.none
    body = _fetch_body(topic, [(1, 4), (0, 0)], max_wait=0, max_bytes=1 << 20, partition_max=10 << 20)
    parts = raw.request(1, 12, body).responses[0].partitions
    assert [len(p.records) for p in parts] == [len(big), 0]
    assert split_batches(parts[0].records)[0][0].base_offset == 4


def test_librdkafka_with_small_fetch_max_bytes_consumes_large_messages(shared_broker, raw):
    """librdkafka refuses a response larger than it allowed ("Invalid response size") and stalls."""
    topic = _name("rdk-maxbytes")
    _create(raw, topic, 3, {"max.message.bytes": str(3 << 20)})
    # one message a batch, so that no single batch is near the consumer's limit
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "message.max.bytes": 3 << 20, "linger.ms": 0, "batch.num.messages": 1})
    values = {}
    for i in range(12):
        value = b"%03d" % i + os.urandom(300_000)
        values[(i % 3, i // 3)] = value
        p.produce(topic, value, key=b"k%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": shared_broker.bootstrap,
            "group.id": _name("g"),
            "fetch.max.bytes": 1 << 20,
            "max.partition.fetch.bytes": 10 << 20,
            "receive.message.max.bytes": (1 << 20) + 512,
            "fetch.error.backoff.ms": 10,
        }
    )
    got = {}
    errors = []
    try:
        c.assign([TopicPartition(topic, part, 0) for part in range(3)])
        deadline = time.monotonic() + 60
        while len(got) < 12 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                errors.append(msg.error())
                continue
            got[(msg.partition(), msg.offset())] = msg.value()
    finally:
        c.close()
    assert errors == []
    assert got == values


# ------------------------------------------------------------------ 3. compacted topics refuse keyless records


def _keyless_message(topic: str, partition: int, indexes: list[int]) -> tuple[list[tuple[int, str]], str]:
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in indexes[:3])
    summary = (
        f"One or more records have been rejected due to {len(indexes)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]"
    )
    return [(i, message) for i in indexes], summary


@pytest.mark.parametrize("compression", [0, GZIP, ZSTD], ids=["none", "gzip", "zstd"])
def test_compacted_topic_refuses_records_without_key(raw, compression):
    topic = _name("compacted")
    topic_id = _create(raw, topic, 1, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    keys = [b"a", None, b"c", None, None, None]
    batch = build_batch([Record(offset=i, timestamp=now, key=k, value=b"v") for i, k in enumerate(keys)], compression=compression)
    errors, summary = _keyless_message(topic, 0, [1, 3, 4, 5])
    for version in (3, 7, 8, 12):
        part = _produce(raw, topic, batch, version=version)
        assert part.error_code == ErrorCode.invalid_record
        assert part.base_offset == -1
        if version >= 8:
            assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == errors
            assert part.error_message == summary
            assert part.log_start_offset == 0
    v13 = raw.request(0, 13, {"acks": -1, "timeout": 5000, "topic_data": [{"topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}]})
    part = v13.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.invalid_record and part.error_message == summary
    # nothing was appended; keyed records are taken
    assert _produce(raw, topic, _batch(2, compression=compression)).base_offset == 0


def test_compacted_refusal_stops_at_the_first_batch_with_keyless_records(raw):
    topic = _name("compacted-multi")
    _create(raw, topic, 1, {"cleanup.policy": "compact,delete"})
    now = int(time.time() * 1000)
    first = build_batch([Record(offset=0, timestamp=now, key=b"a", value=b"v")])
    second = build_batch([Record(offset=0, timestamp=now, key=None, value=b"v"), Record(offset=1, timestamp=now, key=b"b", value=b"v")])
    part = _produce(raw, topic, first + second)
    assert part.error_code == ErrorCode.invalid_record
    assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == _keyless_message(topic, 0, [0])[0]
    assert _produce(raw, topic, first).base_offset == 0  # nothing of the refused request was stored


def test_keyless_records_on_plain_topic_are_taken(raw):
    topic = _name("plain")
    _create(raw, topic)
    part = _produce(raw, topic, _batch(3, keyed=False))
    assert part.error_code == ErrorCode.none and part.base_offset == 0


def test_confluent_producer_gets_invalid_record_for_keyless_message(shared_broker, raw):
    topic = _name("compacted-rdk")
    _create(raw, topic, 1, {"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 0, "retries": 0})
    reports = []
    p.produce(topic, b"no key", on_delivery=lambda err, msg: reports.append(("nokey", err)))
    assert p.flush(30) == 0
    # apart: in one batch with the keyless one it would be refused with it, as Kafka does
    p.produce(topic, b"keyed", key=b"k", on_delivery=lambda err, msg: reports.append(("keyed", err)))
    assert p.flush(30) == 0
    outcome = dict(reports)
    assert outcome["nokey"] is not None and outcome["nokey"].code() == KafkaError.INVALID_RECORD
    assert outcome["keyed"] is None


# ------------------------------------------------------------------ 4. topic ids


@pytest.mark.parametrize("version", [13, 15, 18])
def test_fetch_unknown_or_zero_topic_id(raw, version):
    topic = _name("by-id")
    known = _create(raw, topic)
    assert _produce(raw, topic, _batch()).error_code == ErrorCode.none
    for topic_id in (ZERO_ID, uuid.uuid4()):
        body = _fetch_body("", [(0, 0)], max_wait=5000, topic_id=topic_id)
        answer = raw.request(1, version, body).responses[0]
        assert (answer.topic_id or ZERO_ID) == topic_id
        part = answer.partitions[0]
        assert part.error_code == ErrorCode.unknown_topic_id
        assert (part.high_watermark, part.last_stable_offset, part.log_start_offset, part.records) == (-1, -1, -1, b"")
    # beside a known one, in the same request
    body = _fetch_body("", [(0, 0)], max_wait=0, topic_id=known)
    body["topics"].append({"topic_id": ZERO_ID, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]})
    first, second = raw.request(1, version, body).responses
    assert first.topic_id == known and first.partitions[0].error_code == ErrorCode.none and first.partitions[0].high_watermark == 1
    assert second.partitions[0].error_code == ErrorCode.unknown_topic_id
    assert _alive(raw)


def test_produce_v13_unknown_or_zero_topic_id(raw):
    topic = _name("by-id")
    known = _create(raw, topic)
    for topic_id, code in ((ZERO_ID, ErrorCode.unknown_topic_id), (uuid.uuid4(), ErrorCode.unknown_topic_id), (known, ErrorCode.none)):
        body = {"acks": -1, "timeout": 5000, "topic_data": [{"topic_id": topic_id, "partition_data": [{"index": 0, "records": _batch()}]}]}
        answer = raw.request(0, 13, body).responses[0]
        assert (answer.topic_id or ZERO_ID) == topic_id
        part = answer.partition_responses[0]
        assert part.error_code == code
        if code != ErrorCode.none:
            assert (part.base_offset, part.log_start_offset) == (-1, -1)
    assert _alive(raw)


# ------------------------------------------------------------------ 6. races with DeleteTopics


@pytest.mark.parametrize("version", [11, 12, 13, 18])
def test_parked_fetch_is_answered_when_its_topic_is_deleted(shared_broker, raw, version):
    topic = _name("doomed")
    topic_id = _create(raw, topic, 2)
    assert _produce(raw, topic, _batch(), partition=1).error_code == ErrorCode.none
    fetcher = RawClient(shared_broker.bootstrap)
    fetcher.sock.settimeout(60)
    # ApiVersions, then the Fetch, in one write: the broker serves a connection's requests in
    # order without yielding in between, so once ApiVersions is answered the Fetch is parked
    probe = _frame(fetcher, 18, 3, {})
    fetch = _frame(fetcher, 1, version, _fetch_body(topic, [(0, 0), (1, 1)], max_wait=30_000, topic_id=topic_id))
    fetcher.sock.sendall(probe + fetch)
    fetcher.corr -= 1
    assert fetcher.read_response(18, 3).error_code == ErrorCode.none
    fetcher.corr += 1
    assert not _answered_yet(fetcher)
    deleted = raw.request(20, 6, {"topics": [{"name": topic}], "timeout": 5000}).responses[0]
    assert deleted.error_code == ErrorCode.none
    parts = fetcher.read_response(1, version).responses[0].partitions
    # as Kafka: woken by the deletion, every partition UNKNOWN_TOPIC_OR_PARTITION (by name or by id)
    assert [p.error_code for p in parts] == [ErrorCode.unknown_topic_or_partition] * 2
    assert all((p.high_watermark, p.log_start_offset, p.records) == (-1, -1, b"") for p in parts)
    assert _alive(fetcher)
    fetcher.close()


def test_produce_delete_loop_keeps_connections(shared_broker, raw):
    topic = _name("churn")
    producer = RawClient(shared_broker.bootstrap)
    fetcher = RawClient(shared_broker.bootstrap)
    lister = RawClient(shared_broker.bootstrap)
    ok = {ErrorCode.none, ErrorCode.unknown_topic_or_partition}
    for i in range(40):
        _create(raw, topic, 2)
        # requests queued on three connections, then the deletion: the broker serves them interleaved
        _send(producer, 0, 8, {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": i % 2, "records": _batch()}]}]})
        _send(fetcher, 1, 11, _fetch_body(topic, [(0, 0), (1, 0)], max_wait=10_000))
        _send(lister, 2, 5, {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}]})
        assert raw.request(20, 5, {"topic_names": [topic], "timeout": 5000}).responses[0].error_code == ErrorCode.none
        produced = producer.read_response(0, 8).responses[0].partition_responses[0].error_code
        fetched = [p.error_code for p in fetcher.read_response(1, 11).responses[0].partitions]
        listed = lister.read_response(2, 5).topics[0].partitions[0].error_code
        assert {produced, listed, *fetched} <= ok
        # after the deletion, every API that names the topic answers UNKNOWN_TOPIC_OR_PARTITION
        epochs = producer.request(23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
        assert epochs.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        assert _produce(lister, topic, _batch()).error_code == ErrorCode.unknown_topic_or_partition
    for c in (producer, fetcher, lister):
        assert _alive(c)
        c.close()


# ------------------------------------------------------------------ 4b. Metadata topics with a null name or an id
#
# Found by the network fuzzer: Metadata v10/v11 with a null topic name made the
# handler answer a null name where the v10/v11 response has none, and the
# answer could not be encoded. What Kafka 4.1 answers (run against both):
# v10/v11 refuse a null name or a non-zero id with INVALID_REQUEST for the whole
# request (no brokers, controller -1, every topic echoed, a null name as ""),
# v12+ refuse a topic with neither name nor id as UNKNOWN_SERVER_ERROR the same
# way, v12+ look a non-zero id up by id even when a name is given, and a
# topic asked for twice is answered once.

_RANDOM_ID = uuid.UUID("6c1f3a52-8a51-4f0e-9d8b-3f0c2f6f1a77")
_METADATA_REFUSALS = [
    (10, [(None, None)], ErrorCode.invalid_request),
    (11, [(None, ZERO_ID)], ErrorCode.invalid_request),
    (11, [("fz-meta", ZERO_ID), (None, ZERO_ID)], ErrorCode.invalid_request),
    (10, [("fz-meta", _RANDOM_ID)], ErrorCode.invalid_request),
    (12, [(None, ZERO_ID)], ErrorCode.unknown_server_error),
    (13, [(None, ZERO_ID), ("fz-meta", ZERO_ID)], ErrorCode.unknown_server_error),
]


def _metadata(c: RawClient, version: int, topics):
    body = {
        "topics": [{"name": name, "topic_id": topic_id} for name, topic_id in topics],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    return c.request(3, version, body)


@pytest.mark.parametrize(("version", "topics", "code"), _METADATA_REFUSALS, ids=[f"v{v}-{i}" for i, (v, _, _) in enumerate(_METADATA_REFUSALS)])
def test_metadata_null_name_or_id_refuses_the_request_as_kafka(group_broker, version, topics, code):
    c = RawClient(group_broker.bootstrap)
    try:
        r = _metadata(c, version, topics)
        assert (r.brokers, r.cluster_id, r.controller_id) == ((), None, -1)
        got = [(t.error_code, t.name, t.topic_id or ZERO_ID, t.partitions) for t in r.topics]
        assert got == [(code, name if name is not None else "", topic_id or ZERO_ID, ()) for name, topic_id in topics]
        if version >= 13:
            assert r.error_code == code
        assert _alive(c)
    finally:
        c.close()


@pytest.mark.parametrize("version", [12, 13])
def test_metadata_v12_looks_a_topic_id_up_even_with_a_name_and_answers_each_topic_once(group_broker, version):
    c = RawClient(group_broker.bootstrap)
    try:
        r = _metadata(c, version, [("fz-meta", _RANDOM_ID), (None, _RANDOM_ID)])
        assert r.controller_id != -1 and len(r.brokers) == 1
        # the same id twice is answered once
        assert [(t.error_code, t.name, t.topic_id) for t in r.topics] == [(ErrorCode.unknown_topic_id, None, _RANDOM_ID)]
        r = _metadata(c, version, [("fz-meta-dup", ZERO_ID), ("fz-meta-dup", ZERO_ID)])
        assert [(t.error_code, t.name) for t in r.topics] == [(ErrorCode.unknown_topic_or_partition, "fz-meta-dup")]
    finally:
        c.close()


def test_metadata_fuzzer_frames_are_answered(shared_broker):
    """The fuzzer's frames, byte for byte (v11 and v10, one topic with a null name and the zero id)."""
    for frame, version in [
        ("000000250003000b00000aec000466757a7a0002000000000000000000000000000000000000010000", 11),
        ("000000260003000a00000cc2000466757a7a000200000000000000000000000000000000000000000100", 10),
    ]:
        c = RawClient(shared_broker.bootstrap)
        try:
            c.sock.sendall(bytes.fromhex(frame))
            c.corr = struct.unpack(">i", bytes.fromhex(frame)[8:12])[0]
            r = c.read_response(3, version)
            assert [(t.error_code, t.name) for t in r.topics] == [(ErrorCode.invalid_request, "")]
            assert _alive(c)
        finally:
            c.close()


# ------------------------------------------------------------------ 5. null arrays, every API and version
#
# For every API key and version served, a plausible request (every array with
# one element, names pointing at a real topic and a fresh group), then one
# variant per array field with that field null. Kafka answers a null where the
# schema allows one (Metadata topics v1+, OffsetFetch topics v2+, ...) and
# refuses the request as unparseable (closing the connection) where it does
# not. Either way no handler may raise: the in-process broker notes every
# handler exception, checked after each request.

_TOPIC_STRINGS = {"topic", "name", "resource_name", "topic_names", "subscribed_topic_names"}
_GROUP_STRINGS = {"group_id", "groups", "group_ids", "groups_names", "coordinator_keys", "key"}
_INTS = {
    "acks": -1,
    "max_bytes": 1 << 20,
    "partition_max_bytes": 1 << 20,
    "resource_type": 2,
    "timestamp": -1,
    "replica_id": -1,
    "generation_id": -1,
    "generation_id_or_member_epoch": -1,
    "producer_id": -1,
    "producer_epoch": -1,
    "session_epoch": -1,
    "num_partitions": 1,
    "replication_factor": 1,
    "endpoint_type": 1,
    "current_leader_epoch": -1,
    "committed_leader_epoch": -1,
    "last_fetched_epoch": -1,
    "log_start_offset": -1,
    # the ACL APIs' codes: 0 (UNKNOWN) closes the connection, as Kafka's parser does, so the samples name
    # TOPIC/LITERAL/READ/ALLOW, and ANY in filters
    "resource_pattern_type": 3,
    "resource_type_filter": 1,
    "pattern_type_filter": 1,
    "operation": 3,
    "permission_type": 3,
}
_DURATIONS = {"max_wait": 0, "timeout": 1000, "session_timeout": 10_000, "rebalance_timeout": 10_000, "retention_time": -1, "transaction_timeout": 60_000}


class _Env:
    def __init__(self, topic: str, topic_id: uuid.UUID, group: str, records: bytes) -> None:
        self.topic, self.topic_id, self.group, self.records = topic, topic_id, group, records


def _primitive(name: str, kafka_type: str, env: _Env):
    """A plausible value, or ``...`` for the schema's zero value."""
    if kafka_type == "uuid":
        return env.topic_id
    if kafka_type == "records":
        return env.records
    if kafka_type == "string":
        if name in _TOPIC_STRINGS:
            return env.topic
        if name in _GROUP_STRINGS:
            return env.group
        return {"protocol_type": "consumer", "client_software_name": "hostile", "client_software_version": "1"}.get(name, ...)
    if kafka_type.startswith("timedelta"):
        return _DURATIONS.get(name, ...)
    return _INTS.get(name, ...)


def _sample(cls, env: _Env) -> dict:
    body = {}
    for f in fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            value = [_sample(kind.type_, env)]
        elif isinstance(kind, EntityField):
            value = _sample(kind.type_, env)
        elif isinstance(kind, PrimitiveTupleField):
            kafka_type = f.metadata["kafka_type"]
            item = _primitive(f.name, kafka_type, env)
            value = [item if item is not ... else "" if kafka_type == "string" else 0]
        else:
            value = _primitive(f.name, f.metadata["kafka_type"], env)
        if value is not ...:
            body[f.name] = value
    return body


def _array_paths(cls, prefix=()) -> list[tuple[tuple[str, ...], bool]]:
    """(path, nullable) of every array field, nested ones through the first element of their parents."""
    out = []
    for f in fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        if kind.is_array:
            out.append(((*prefix, f.name), is_optional(f)))
        if isinstance(kind, (EntityTupleField, EntityField)):
            out += _array_paths(kind.type_, (*prefix, f.name))
    return out


def _set_null(body: dict, path: tuple[str, ...]) -> dict:
    node = body
    for name in path[:-1]:
        node = node[name]
        if isinstance(node, list):
            node = node[0]
    node[path[-1]] = None
    return body


def _ask(bootstrap: str, api_key: int, version: int, body: dict) -> str:
    """The outcome: "answered", or "closed" when the broker closed the connection."""
    c = RawClient(bootstrap)
    try:
        c.sock.settimeout(20)
        c.sock.sendall(_frame(c, api_key, version, body))
        frame = c.read_frame()
        return "closed" if frame is None else "answered"
    finally:
        c.close()


@pytest.fixture(scope="module")
def inproc():
    b = BrokerThread(settings={"group.initial.rebalance.delay.ms": 0}).start()
    yield b
    b.close()


def _api_ids():
    return [f"{HANDLERS[key].NAME}" for key in sorted(supported_versions())]


@pytest.mark.parametrize("acls", [False, True], ids=["", "acls"])
@pytest.mark.parametrize("api_key", sorted(supported_versions()), ids=_api_ids())
def test_null_arrays_never_make_a_handler_raise(request, api_key, acls):
    inproc = request.getfixturevalue("inproc_acls" if acls else "inproc")
    lo, hi = supported_versions()[api_key]
    topic = f"nulls-{api_key}"
    inproc.create_topic(topic, 1)
    topic_id = inproc.broker.cluster.topics[topic].topic_id
    problems = []
    asked = 0
    for version in range(lo, hi + 1):
        cls = request_class(api_key, version)
        variants = [((), False)] + _array_paths(cls)
        for n, (path, nullable) in enumerate(variants):
            # DeleteTopics names a topic that does not exist, so the others keep theirs
            env = _Env("no-such-topic" if api_key == 20 else topic, topic_id, f"g-{api_key}-{version}-{n}", _batch())
            body = _sample(cls, env)
            if path:
                _set_null(body, path)
            label = f"v{version} {'.'.join(path) or '(no null)'}"
            try:
                outcome = _ask(inproc.bootstrap_servers, api_key, version, body)
            except TimeoutError:
                outcome = "no answer"
            asked += 1
            # no null, or a null the schema allows: Kafka answers; otherwise answering or closing are both fine
            if outcome == "no answer" or (outcome == "closed" and (not path or nullable)):
                problems.append(f"{label}: {outcome}")
            try:
                inproc.check_handler_errors()
            except AssertionError as exc:
                problems.append(f"{label}: {exc}")
    assert asked > 0
    assert problems == []


@pytest.fixture(scope="module")
def inproc_acls():
    """A broker with ACLs on and none made: every handler takes its refusal paths."""
    settings = {"group.initial.rebalance.delay.ms": 0, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    b = BrokerThread(settings=settings).start()
    yield b
    b.close()


def test_handlers_take_null_arrays_even_past_the_decoder(inproc):
    """The handlers themselves never raise on a null array, should the decoder let one through.

    Each request goes straight to its handler on the broker's loop (no decoding),
    and the answer must build and encode for the request's version.
    """
    _null_arrays_past_the_decoder(inproc)


def test_handlers_with_acls_take_null_arrays_even_past_the_decoder(inproc_acls):
    """The same with ACLs on (docs/security.md): the refusals never raise on a null array either."""
    _null_arrays_past_the_decoder(inproc_acls)


def _null_arrays_past_the_decoder(inproc):
    from broker.handlers import RequestContext
    from broker.logs import get_logger
    from protocol.codec import response_class
    from protocol.connection import Request

    server = inproc.broker.server
    log = get_logger("hostile-test")
    problems = []
    for api_key, (lo, hi) in sorted(supported_versions().items()):
        topic = f"direct-{api_key}"
        inproc.create_topic(topic, 1)
        topic_id = server.cluster.topics[topic].topic_id
        for version in range(lo, hi + 1):
            cls = request_class(api_key, version)
            for n, (path, _) in enumerate(_array_paths(cls)):
                env = _Env("no-such-topic" if api_key == 20 else topic, topic_id, f"d-{api_key}-{version}-{n}", _batch())
                req = build(cls, _set_null(_sample(cls, env), path))
                conn = SimpleNamespace(peer="127.0.0.1:1", draining=False, sends_files=lambda: False, listener=None, log=log, identify=lambda software: None)
                ctx = RequestContext(server, conn, log, request=Request(api_key, version, 1, "direct", req, 0))
                label = f"{HANDLERS[api_key].NAME} v{version} {'.'.join(path)}"
                try:
                    body = asyncio.run_coroutine_threadsafe(HANDLERS[api_key].handle(ctx, req), inproc.loop).result(20)
                    if body is not None:
                        encode(build(response_class(api_key, version), body))
                except Exception as exc:  # noqa: BLE001 - every failure is reported with its case
                    problems.append(f"{label}: {type(exc).__name__}: {exc}")
    inproc.handler_failures.clear()  # the ones above were reported here, case by case
    assert problems == []


# ------------------------------------------------------------------ 7. a handler exception fails the test


def _planted_bug(monkeypatch):
    def boom(ctx):
        raise RuntimeError("planted bug")

    # DescribeCluster asks its listener for the address to give out
    monkeypatch.setattr("broker.handlers.describe_cluster.advertised_for", boom)


def _describe_cluster_is_refused(bootstrap: str) -> None:
    c = RawClient(bootstrap)
    c.sock.sendall(_frame(c, 60, 0, {}))
    assert c.read_frame() is None  # the server closed the connection
    c.close()


def test_in_process_broker_reports_a_raising_handler(monkeypatch):
    _planted_bug(monkeypatch)
    b = BrokerThread().start()
    try:
        _describe_cluster_is_refused(b.bootstrap_servers)
        with pytest.raises(HandlerFailed, match="planted bug") as info:
            b.check_handler_errors()
        assert "DescribeCluster v0" in str(info.value) and len(info.value.failures) == 1
        b.check_handler_errors()  # each failure is reported once
        _describe_cluster_is_refused(b.bootstrap_servers)
    except BaseException:
        b.broker.fail_on_handler_errors = False
        b.handler_failures.clear()
        b.close()
        raise
    # close reports what was not checked
    with pytest.raises(HandlerFailed, match="planted bug"):
        b.close()
    assert b.loop is None  # and still closed everything


def test_async_broker_reports_a_raising_handler_at_exit(monkeypatch):
    _planted_bug(monkeypatch)

    async def run():
        async with Broker() as b:
            host, port = b.bootstrap_servers.rsplit(":", 1)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(_frame(SimpleNamespace(corr=0), 60, 0, {}))
            assert await reader.read() == b""  # closed without an answer
            writer.close()

    with pytest.raises(HandlerFailed, match="DescribeCluster"):
        asyncio.run(run())


def test_an_answer_that_cannot_be_encoded_is_a_handler_failure(monkeypatch):
    """Encoding the answer is part of handling: a None in a non-nullable field closes the
    connection (it does not leave it hanging) and fails the test like a raising handler."""

    async def bad_answer(ctx, req):
        return {"error_code": 0, "cluster_id": None, "brokers": []}  # cluster_id is not nullable

    monkeypatch.setattr("broker.handlers.describe_cluster.handle", bad_answer)
    b = BrokerThread().start()
    try:
        _describe_cluster_is_refused(b.bootstrap_servers)
        with pytest.raises(HandlerFailed, match="DescribeCluster v0"):
            b.check_handler_errors()
    finally:
        b.handler_failures.clear()
        b.close()


def test_opting_out_of_handler_failure_checks(monkeypatch):
    _planted_bug(monkeypatch)
    b = BrokerThread(fail_on_handler_errors=False).start()
    try:
        _describe_cluster_is_refused(b.bootstrap_servers)
        b.check_handler_errors()
    finally:
        b.close()
    assert b.handler_failures == []


# ------------------------------------------------------------------ 8. nulls and zero ids in scalar fields
#
# The same sweep for scalars: every nullable string/bytes field of a request set
# to null, and every uuid set to the zero id, one field at a time and all at
# once. The decoder lets these through, so each goes straight to its handler and
# the answer must build and encode for the request's version (a None where the
# response schema has a non-nullable field would fail to encode).


def _scalar_paths(cls, prefix=()) -> list[tuple[tuple[str, ...], object]]:
    """(path, value) for every nullable scalar (None) and uuid (the zero id), nested ones through first elements."""
    out = []
    for f in fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        if isinstance(kind, (EntityTupleField, EntityField)):
            out += _scalar_paths(kind.type_, (*prefix, f.name))
        elif not kind.is_array:
            if f.metadata.get("kafka_type") == "uuid":
                out.append(((*prefix, f.name), ZERO_ID))
            elif is_optional(f):
                out.append(((*prefix, f.name), None))
    return out


def _set_path(body: dict, path: tuple[str, ...], value) -> dict:
    node = body
    for name in path[:-1]:
        node = node[name]
        if isinstance(node, list):
            node = node[0]
    node[path[-1]] = value
    return body


def test_null_and_zero_scalars_never_break_a_handler_or_its_answer(inproc):
    from broker.handlers import RequestContext
    from broker.logs import get_logger
    from protocol.codec import response_class
    from protocol.connection import Request

    server = inproc.broker.server
    log = get_logger("hostile-test")
    problems = []
    tried = 0
    for api_key, (lo, hi) in sorted(supported_versions().items()):
        topic = f"scalars-{api_key}"
        inproc.create_topic(topic, 1)
        topic_id = server.cluster.topics[topic].topic_id
        for version in range(lo, hi + 1):
            cls = request_class(api_key, version)
            paths = _scalar_paths(cls)
            variants = [[p] for p in paths] + ([paths] if len(paths) > 1 else [])
            for n, variant in enumerate(variants):
                env = _Env("no-such-topic" if api_key == 20 else topic, topic_id, f"s-{api_key}-{version}-{n}", _batch())
                body = _sample(cls, env)
                for path, value in variant:
                    _set_path(body, path, value)
                req = build(cls, body)
                conn = SimpleNamespace(peer="127.0.0.1:1", draining=False, sends_files=lambda: False, listener=None, log=log, identify=lambda software: None)
                ctx = RequestContext(server, conn, log, request=Request(api_key, version, 1, "direct", req, 0))
                label = f"{HANDLERS[api_key].NAME} v{version} {' + '.join('.'.join(p) for p, _ in variant)}"
                tried += 1
                try:
                    answer = asyncio.run_coroutine_threadsafe(HANDLERS[api_key].handle(ctx, req), inproc.loop).result(20)
                    if answer is not None:
                        encode(build(response_class(api_key, version), answer))
                except Exception as exc:  # noqa: BLE001 - every failure is reported with its case
                    problems.append(f"{label}: {type(exc).__name__}: {exc}")
    inproc.handler_failures.clear()  # the ones above were reported here, case by case
    assert tried > 100
    assert problems == []
