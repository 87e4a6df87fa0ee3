"""Real clients produce to and consume from kafkalite over TCP on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest

from tests.broker_process import BrokerProcess

from .clients import CLIENTS

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N_RECORDS = 10_000
PARTITIONS = 3


@pytest.fixture(params=CLIENTS, ids=lambda c: c.name)
def client_cls(request):
    return request.param


def keyed_records(n: int, tag: str, start: int = 0):
    """(partition, key, value): key i goes to partition i % 3, value carries i."""
    return [(i % PARTITIONS, f"key-{i}".encode(), f"{tag}-{i:08d}-".encode() + b"x" * 80) for i in range(start, start + n)]


def by_partition(msgs):
    parts = defaultdict(list)
    for m in msgs:
        parts[m.partition].append(m)
    return parts


def assert_in_order(msgs, records):
    """Every record came back once, each partition in produce order, offsets dense."""
    expected = defaultdict(list)
    for partition, key, value, *_ in records:
        expected[partition].append((key, value))
    got = by_partition(msgs)
    assert sorted(got) == sorted(expected)
    for partition, items in expected.items():
        assert [(m.key, m.value) for m in got[partition]] == items, f"partition {partition} differs"
        offsets = [m.offset for m in got[partition]]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(shared_broker, client_cls, codec):
    client = client_cls(shared_broker.bootstrap)
    topic = f"codec-{client.name}-{codec}"
    client.create_topic(topic, PARTITIONS)
    records = keyed_records(N_RECORDS, codec)
    acked = client.produce(topic, records, compression=codec)
    assert len(acked) == N_RECORDS
    for partition in range(PARTITIONS):
        offsets = sorted(o for p, o in acked if p == partition)
        assert offsets == list(range(len(offsets)))
    msgs = client.consume(topic, list(range(PARTITIONS)), N_RECORDS)
    assert len(msgs) == N_RECORDS
    assert_in_order(msgs, records)


def test_restart_keeps_records_and_offsets_continue(broker, client_cls):
    client = client_cls(broker.bootstrap)
    topic = f"restart-{client.name}"
    client.create_topic(topic, PARTITIONS)
    first = keyed_records(900, "before")
    client.produce(topic, first, compression="lz4")
    assert broker.restart().port
    msgs = client.consume(topic, list(range(PARTITIONS)), 900)
    assert_in_order(msgs, first)
    second = keyed_records(300, "after", start=900)
    acked = client.produce(topic, second, compression="zstd")
    for partition in range(PARTITIONS):
        assert min(o for p, o in acked if p == partition) == 300
    msgs = client.consume(topic, list(range(PARTITIONS)), 1200)
    assert_in_order(msgs, first + second)


def test_kill9_during_produce_keeps_every_acknowledged_record(tmp_path, client_cls):
    broker = BrokerProcess(tmp_path / "data", "--fsync", "never").start()
    try:
        client = client_cls(broker.bootstrap)
        topic = f"kill9-{client.name}"
        client.create_topic(topic, PARTITIONS)
        acked: dict[tuple[int, int], bytes] = {}
        stop = threading.Event()
        enough = threading.Event()
        failures = []

        def produce_loop():
            batch = 0
            while not stop.is_set():
                records = keyed_records(200, f"b{batch}", start=batch * 200)
                try:
                    offsets = client.produce(topic, records, compression="gzip")
                except Exception as exc:  # the broker went away mid-batch
                    failures.append(exc)
                    continue
                # within a partition, offsets follow produce order
                per_part = defaultdict(list)
                for partition, _key, value in records:
                    per_part[partition].append(value)
                got = defaultdict(list)
                for partition, offset in offsets:
                    got[partition].append(offset)
                for partition, values in per_part.items():
                    for offset, value in zip(sorted(got[partition]), values, strict=True):
                        acked[(partition, offset)] = value
                batch += 1
                if batch >= 3:
                    enough.set()

        t = threading.Thread(target=produce_loop, daemon=True)
        t.start()
        assert enough.wait(120), f"producer made no progress: {failures[:2]}"
        broker.kill()
        broker.start()
        stop.set()
        t.join(180)
        assert not t.is_alive()
        total = len(acked)
        msgs = client.consume(topic, list(range(PARTITIONS)), total)
        stored = {(m.partition, m.offset): m.value for m in msgs}
        missing = [k for k in acked if stored.get(k) != acked[k]]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    finally:
        broker.kill()


def test_list_offsets_by_timestamp(shared_broker, client_cls):
    client = client_cls(shared_broker.bootstrap)
    topic = f"times-{client.name}"
    client.create_topic(topic, 1)
    base = int(time.time() * 1000) - 3_600_000
    records = [(0, f"k{i}".encode(), f"v{i}".encode(), base + i * 1000) for i in range(20)]
    client.produce(topic, records)
    assert client.offset_for_time(topic, 0, base + 5500) == 6
    assert client.offset_for_time(topic, 0, base) == 0
    assert client.offset_for_time(topic, 0, base + 19_000) == 19
    assert client.offset_for_time(topic, 0, base + 60_000) == -1


def test_fetch_long_poll_returns_when_data_arrives(shared_broker, client_cls):
    client = client_cls(shared_broker.bootstrap)
    topic = f"longpoll-{client.name}"
    client.create_topic(topic, 1)
    wait_ms = 20_000
    first_seen = threading.Event()
    seen_at: dict[bytes, float] = {}

    def on_message(m):
        seen_at[m.value] = time.monotonic()
        first_seen.set()

    result = []
    t = threading.Thread(
        target=lambda: result.append(client.consume(topic, [0], 2, fetch_wait_ms=wait_ms, on_message=on_message)),
        daemon=True,
    )
    t.start()
    client.produce(topic, [(0, b"a", b"first")])
    assert first_seen.wait(60)
    # the consumer's next fetch now parks on the empty partition, for up to 20 s
    produced_at = time.monotonic()
    client.produce(topic, [(0, b"b", b"second")])
    t.join(60)
    assert result and [m.value for m in result[0]] == [b"first", b"second"]
    assert seen_at[b"second"] - produced_at < wait_ms / 1000 / 2
