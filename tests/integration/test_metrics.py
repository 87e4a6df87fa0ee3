"""Prometheus metrics (``--metrics-port``), scraped over HTTP while real clients work."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from broker.testing import BrokerThread
from tests.broker_process import BrokerProcess
from tests.wait import wait_until


def scrape_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        return resp.read().decode()


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value}."""
    text = scrape_text(url)
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples, name: str, **labels) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = {(k, str(v)) for k, v in labels.items()}
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def _consume(bootstrap: str, topic: str, group: str, n: int, **conf) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < n and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            got += 1
            c.commit(message=msg, asynchronous=False)
    assert got == n
    return c


@pytest.fixture
def metrics_broker(tmp_path):
    b = BrokerProcess(tmp_path / "data", "--metrics-port", "0").start()
    lines = [b.proc.stdout.readline().split() for _ in range(2)]
    assert lines[0][:2] == ["LISTENER", "PLAINTEXT"] and lines[1][0] == "METRICS", lines
    b.metrics_url = f"http://{lines[1][1]}/metrics"
    yield b
    if b.proc is not None:
        b.stop()


def test_scrape_requests_groups_rebalances_bytes_and_logs(metrics_broker):
    b = metrics_broker
    topic = f"m-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(20):
        p.produce(topic, b"x" * 100, key=b"%d" % i)
    assert p.flush(15) == 0
    c = _consume(b.bootstrap, topic, group, 20)
    try:
        s = scrape(b.metrics_url)
        # requests by API, version and error, with latency
        assert value(s, "kafkalite_requests_total", api="Produce", error="none") >= 1
        assert value(s, "kafkalite_requests_total", api="ApiVersions") >= 2
        assert value(s, "kafkalite_request_duration_seconds_count", api="Fetch") >= 1
        assert value(s, "kafkalite_request_duration_seconds_bucket", api="Fetch", le="+Inf") >= 1
        assert any(n == "kafkalite_requests_total" and dict(ls).get("version", "").isdigit() for n, ls in s)
        # connections
        assert value(s, "kafkalite_connections", listener="PLAINTEXT") >= 2
        assert value(s, "kafkalite_connections_accepted_total", listener="PLAINTEXT") >= 2
        assert value(s, "kafkalite_network_received_bytes_total") > 0 and value(s, "kafkalite_network_sent_bytes_total") > 0
        # groups, members, rebalances
        assert value(s, "kafkalite_groups", state="Stable", type="classic") == 1
        assert value(s, "kafkalite_group_members", type="classic") == 1
        assert value(s, "kafkalite_rebalances_total", type="classic") >= 1
        assert value(s, "kafkalite_rebalance_duration_seconds_count", phase="total") >= 1
        # offset commits, bytes in and out per topic, log sizes
        assert value(s, "kafkalite_offset_commits_total") >= 1
        assert value(s, "kafkalite_requests_total", api="OffsetCommit") >= 1
        assert value(s, "kafkalite_topic_records_in_total", topic=topic) == 20
        assert value(s, "kafkalite_topic_bytes_in_total", topic=topic) > 2000
        assert value(s, "kafkalite_topic_bytes_out_total", topic=topic) >= value(s, "kafkalite_topic_bytes_in_total", topic=topic)
        assert value(s, "kafkalite_log_size_bytes", topic=topic, partition=0) > 2000
        assert value(s, "kafkalite_log_end_offset", topic=topic, partition=0) == 20
        assert value(s, "process_resident_memory_bytes") > 0
    finally:
        c.close()
    # the member left: the group is empty, the connection count falls
    wait_until(lambda: value(scrape(b.metrics_url), "kafkalite_groups", state="Empty", type="classic") == 1, timeout=20,
               what="kafkalite_groups to count one Empty classic group")

    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(b.metrics_url.replace("/metrics", "/nope"), timeout=10)
    assert exc.value.code == 404


def series(samples, name: str, **labels) -> dict[tuple, float]:
    """The samples of ``name`` whose labels include ``labels``."""
    want = {(k, str(v)) for k, v in labels.items()}
    return {ls: v for (n, ls), v in samples.items() if n == name and want <= set(ls)}


def test_group_committed_offsets_and_lag(metrics_broker):
    b = metrics_broker
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(20):
        p.produce(topic, b"x", key=b"%d" % i)
    assert p.flush(15) == 0
    _consume(b.bootstrap, topic, group, 20).close()  # committed: 20, the log end

    s = scrape(b.metrics_url)
    assert value(s, "kafkalite_group_committed_offset", group=group, topic=topic, partition=0) == 20
    assert series(s, "kafkalite_group_lag", group=group, topic=topic, partition=0) == {
        (("group", group), ("partition", "0"), ("topic", topic)): 0
    }
    # the group's offsets are in __consumer_offsets now: that partition is shown, the empty ones are not
    shown = series(s, "kafkalite_log_end_offset", topic="__consumer_offsets")
    assert shown and all(v > 0 for v in shown.values()), shown

    for _ in range(7):  # records the group has not consumed
        p.produce(topic, b"y")
    assert p.flush(15) == 0
    assert value(scrape(b.metrics_url), "kafkalite_group_lag", group=group, topic=topic, partition=0) == 7

    # a committed offset past the log end shows as negative lag, not 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 100)], asynchronous=False)
    finally:
        c.close()
    s = scrape(b.metrics_url)
    assert value(s, "kafkalite_group_committed_offset", group=group, topic=topic, partition=0) == 100
    assert value(s, "kafkalite_group_lag", group=group, topic=topic, partition=0) == 27 - 100


def test_idle_broker_has_no_created_series_and_no_empty_internal_partitions(metrics_broker):
    b = metrics_broker
    text = scrape_text(b.metrics_url)
    names = [line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
    assert not [n for n in names if n.endswith("_created")], "prometheus_client's _created series are exposed"
    assert "__consumer_offsets" not in text  # fifty empty partitions, three series each, all zeros
    assert "kafkalite_log_end_offset" in text and "kafkalite_requests_total" in text
    # nor after requests, which make labelled counters and histograms
    small = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "idle"})
    try:
        assert small.list_topics(timeout=10).brokers
    finally:
        small.close()
    s = scrape(b.metrics_url)
    assert value(s, "kafkalite_requests_total", api="Metadata") >= 1
    assert not [n for n, _ in s if n.endswith("_created")]


def test_error_labels_and_kip848_groups_in_process():
    with BrokerThread(metrics_port=0, settings={"group.consumer.heartbeat.interval.ms": 500}) as b:
        assert b.metrics_url.startswith("http://127.0.0.1:")
        b.create_topic("e")
        b.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=1)
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "retry.backoff.ms": 10})
        p.produce("e", b"v")
        assert p.flush(15) == 0
        c = _consume(b.bootstrap_servers, "e", "g848", 1, **{"group.protocol": "consumer"})
        try:
            s = scrape(b.metrics_url)
            assert value(s, "kafkalite_requests_total", api="Produce", error="not_leader_or_follower") == 1
            assert value(s, "kafkalite_requests_total", api="Produce", error="none") >= 1
            assert value(s, "kafkalite_groups", type="consumer") == 1
            assert value(s, "kafkalite_group_members", type="consumer") == 1
            assert value(s, "kafkalite_rebalances_total", type="consumer") >= 1
            assert value(s, "kafkalite_requests_total", api="ConsumerGroupHeartbeat") >= 1
        finally:
            c.close()
        # the same text without HTTP
        assert "kafkalite_requests_total" in b.metrics_text()


def test_metrics_are_off_by_default(kafkalite_broker):
    assert kafkalite_broker.metrics_url is None
    assert kafkalite_broker.broker.server.metrics is None and not kafkalite_broker.broker.server.hooked
