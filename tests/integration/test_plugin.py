"""The pytest plugin's fixtures, the in-process broker and fault injection, with real clients."""

from __future__ import annotations

import statistics
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.errors import PolicyViolationError

from broker.faults import error_response
from broker.testing import Broker, BrokerThread
from protocol.codec import build, request_class
from protocol.connection import Request
from protocol.errors import ErrorCode
from tests.wait import wait_until

pytest_plugins = ["pytester"]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _consume(bootstrap: str, topic: str, n: int, **conf) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("g"), "auto.offset.reset": "earliest", **conf})
    out: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
    finally:
        c.close()
    return out


# ---------------------------------------------------------------- fixtures


def test_broker_fixture_topics_and_restart_over_the_same_data(kafkalite_broker):
    b = kafkalite_broker
    assert b.bootstrap_servers == f"127.0.0.1:{b.port}"
    b.create_topic("orders", 3, {"retention.ms": "3600000"})
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    for i in range(30):
        p.produce("orders", b"%d" % i, partition=i % 3)
    assert p.flush(15) == 0
    port = b.port
    b.restart()
    assert b.port == port and b.topics()["orders"] == 3
    # the producer, still open, reconnects to the same port
    p.produce("orders", b"after", partition=0)
    assert p.flush(15) == 0
    assert sorted(_consume(b.bootstrap_servers, "orders", 31)) == sorted([b"%d" % i for i in range(30)] + [b"after"])


@pytest.mark.kafkalite({"auto.create.topics.enable": False}, num_partitions=4)
def test_marker_sets_broker_settings(kafkalite_broker):
    assert kafkalite_broker.config.auto_create_topics is False
    assert kafkalite_broker.config.num_partitions == 4
    md = AdminClient({"bootstrap.servers": kafkalite_broker.bootstrap_servers}).list_topics(topic="nope", timeout=10)
    assert md.topics["nope"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_session_broker_leaves_a_fault_behind(kafkalite_session_broker):
    kafkalite_session_broker.faults.fail("CreateTopics", "POLICY_VIOLATION", count=None)
    assert kafkalite_session_broker.faults.active


def test_session_broker_faults_are_cleared_between_tests(kafkalite_session_broker):
    assert not kafkalite_session_broker.faults.active
    kafkalite_session_broker.create_topic(_name("shared"))
    kafkalite_session_broker.stop()  # the fixture starts it again for the next test


def test_session_broker_is_running_again(kafkalite_session_broker):
    md = AdminClient({"bootstrap.servers": kafkalite_session_broker.bootstrap_servers}).list_topics(timeout=10)
    assert any(t.startswith("shared-") for t in md.topics)


def test_plugin_is_registered_through_its_entry_point(pytester):
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nkafkalite_settings =\n    num.partitions=2\n")
    pytester.makepyfile(
        """
        import pytest

        def test_ini(kafkalite_broker):
            assert kafkalite_broker.config.num_partitions == 2
            assert kafkalite_broker.config.offsets_topic_num_partitions == 1

        @pytest.mark.kafkalite(num_partitions=5)
        def test_marker_wins(kafkalite_broker):
            assert kafkalite_broker.config.num_partitions == 5
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_start_time_is_measured():
    """Not asserted (machines differ): printed for the record, and it must be there."""
    times = []
    for _ in range(5):
        with BrokerThread() as b:
            times.append(b.startup_ms)
            b.restart()
            times.append(b.startup_ms)
    print(f"in-process start: median {statistics.median(times):.1f} ms, max {max(times):.1f} ms over {len(times)} starts")
    assert all(t > 0 for t in times)


# ---------------------------------------------------------------- faults


def test_fail_next_produce_requests_then_the_retry_succeeds(kafkalite_broker):
    b = kafkalite_broker
    b.create_topic("t")
    rec = b.faults.record("Produce")
    rule = b.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "enable.idempotence": False, "retry.backoff.ms": 10, "linger.ms": 0})
    reports = []
    p.produce("t", b"once", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(20) == 0
    assert reports == [None]
    assert rule.fired == 2 and not rule.live
    errors = [r.error for r in rec.of("Produce")]
    assert errors[:2] == [ErrorCode.not_leader_or_follower] * 2 and errors[-1] == ErrorCode.none
    assert [r.faults for r in rec.of("Produce")][:2] == [["failed"], ["failed"]]
    rec.stop()
    assert not b.faults.active
    # the failed attempts appended nothing
    assert _consume(b.bootstrap_servers, "t", 1) == [b"once"]


def test_fail_with_a_non_retriable_error_reaches_kafka_python(kafkalite_broker):
    b = kafkalite_broker
    b.faults.fail("CreateTopics", "POLICY_VIOLATION", message="no topics on Fridays")
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=10000)
    try:
        with pytest.raises(PolicyViolationError):
            admin.create_topics([NewTopic("friday", 1, 1)])
        admin.create_topics([NewTopic("monday", 1, 1)])  # count=1: the next one works
    finally:
        admin.close()
    assert "monday" in b.topics() and "friday" not in b.topics()


def test_delay_responses_of_an_api(kafkalite_broker):
    b = kafkalite_broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.list_topics(timeout=10)
    b.faults.delay("Metadata", 0.4, count=1)
    with b.faults.record("Metadata") as rec:
        admin.list_topics(timeout=10)
        admin.list_topics(timeout=10)
    # one Metadata was delayed, and only one (count=1); every one was answered
    seen = rec.of("Metadata")
    assert len(seen) >= 2 and sum(r.faults == ["delayed"] for r in seen) == 1
    assert all(r.error is ErrorCode.none for r in seen)


def test_drop_connection_on_a_request_and_by_client_id(kafkalite_broker):
    b = kafkalite_broker
    b.create_topic("d")
    rec = b.faults.record()
    b.faults.drop("Produce", count=1)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "client.id": "dropper", "enable.idempotence": True})
    p.produce("d", b"survives a dropped connection")
    assert p.flush(20) == 0
    assert any(r.faults == ["dropped"] for r in rec.of("Produce"))
    assert _consume(b.bootstrap_servers, "d", 1) == [b"survives a dropped connection"]
    assert b.drop_connections(client_id="dropper") >= 1
    p.produce("d", b"and reconnects")
    assert p.flush(20) == 0


@pytest.mark.kafkalite({"group.min.session.timeout.ms": 500})
def test_stop_answering_a_groups_heartbeats_expires_its_member(kafkalite_broker):
    b = kafkalite_broker
    b.create_topic("hb")
    group = _name("hb")
    c = KafkaConsumer(
        bootstrap_servers=b.bootstrap_servers,
        group_id=group,
        session_timeout_ms=1500,
        heartbeat_interval_ms=200,
        request_timeout_ms=30000,
        enable_auto_commit=False,
    )
    # metadata first: a leader that learns of the topic only after its first
    # join rejoins at once, and kafka-python 3.0.12 then sometimes stops
    # heartbeating altogether (seen without any fault, ~1 run in 4)
    c.topics()
    c.subscribe(["hb"])

    def poll_until_stable(describe=None) -> None:
        def stable():
            c.poll(100)  # the client's poll is the interval: it must run for the member to heartbeat
            return b.group_state(group) == "Stable" and c.assignment()

        wait_until(stable, interval=0, what=f"{group} to be Stable with the member assigned",
                   describe=lambda: f"state {b.group_state(group)}" + (f"; {describe()}" if describe else ""))

    try:
        poll_until_stable()
        rec = b.faults.record(client_id=c.config["client_id"])
        rule = b.faults.stop_heartbeats(group)
        # the held heartbeats never reach the coordinator: the session runs out
        b.wait_for(lambda br: br.group_state(group) in ("Empty", "PreparingRebalance"), timeout=20)
        assert rule.fired >= 1
        b.faults.resume_heartbeats(group)
        poll_until_stable(describe=lambda: [(r.api, r.faults, r.error.name) for r in rec.requests])
        # the member rejoined with a new id: the held heartbeat, let through, was told so
        apis = rec.apis()
        assert "JoinGroup" in apis and "SyncGroup" in apis
        held = [r for r in rec.requests if r.faults == ["held"]]
        assert all(r.error == ErrorCode.unknown_member_id for r in held)
    finally:
        c.close()


def test_error_response_mirrors_topics_and_partitions():
    req = build(
        request_class(0, 9),
        {"acks": -1, "timeout": 5000, "topic_data": [{"name": "a", "partition_data": [{"index": 0, "records": None}, {"index": 3, "records": None}]}]},
    )
    out = error_response(Request(0, 9, 1, "c", req, 0), "KAFKA_STORAGE_ERROR")
    (topic,) = out["responses"]
    assert topic["name"] == "a"
    assert [(p["index"], p["error_code"]) for p in topic["partition_responses"]] == [(0, 56), (3, 56)]
    # OffsetFetch v8+: groups, their topics and the partitions named by index
    req = build(request_class(9, 9), {"groups": [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [1, 2]}]}]})
    out = error_response(Request(9, 9, 1, "c", req, 0), 16)
    (group,) = out["groups"]
    assert group["group_id"] == "g" and group["error_code"] == 16
    assert [p["partition_index"] for p in group["topics"][0]["partitions"]] == [1, 2]


# ---------------------------------------------------------------- asyncio


async def test_async_broker_with_aiokafka_faults_and_restart(tmp_path):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async with Broker(tmp_path / "data") as b:
        await b.create_topic("aio", 2)
        b.faults.fail("Produce", "REQUEST_TIMED_OUT", count=1)
        producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers, retry_backoff_ms=10)
        await producer.start()
        try:
            await producer.send_and_wait("aio", b"retried", partition=0)
        finally:
            await producer.stop()
        await b.restart()
        consumer = AIOKafkaConsumer("aio", bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest", group_id=_name("aio"))
        await consumer.start()
        try:
            msg = await consumer.getone()
            assert msg.value == b"retried"
        finally:
            await consumer.stop()
    assert (tmp_path / "data").exists()


async def test_thread_broker_in_an_async_test(kafkalite_broker):
    await kafkalite_broker.arestart()
    assert kafkalite_broker.running
