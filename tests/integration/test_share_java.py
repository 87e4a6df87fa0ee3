"""The Java KafkaShareConsumer (kafka-clients 4.4.0) against kafkalite: share groups end to end.

tests/java/share/ShareHarness.java prints every record it gets with its delivery count and how it
acknowledged it. The broker runs with a 1 s acquisition lock and a delivery limit of 3, so
redelivery after a lock timeout and the archiving of a poison record are awaited as events
(the record arriving again, a later record arriving), never slept for.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.java_harness import SHARE, JavaClient
from tests.raw import RawClient
from tests.wait import wait_until

pytestmark = pytest.mark.skipif(not SHARE.available()[0], reason=SHARE.available()[1])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share-java"),
                      "--set", "group.share.record.lock.duration.ms=1000", "--set", "group.share.delivery.count.limit=3",
                      "--set", "group.share.heartbeat.interval.ms=500", "--set", "group.share.assignment.interval.ms=0").start()
    yield b
    b.stop()


def _setup(b, topic: str, group: str, values: list[str]) -> None:
    raw = RawClient(b.bootstrap)
    raw.request(19, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
                        "timeout": 10000})
    r = raw.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
    assert r.responses[0].error_code == ErrorCode.none, r
    raw.close()
    if values:
        _produce(b, topic, values)


def _produce(b, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, v.encode())
    assert p.flush(30) == 0


def _consumer(b, group: str, topic: str, ack: str, name: str, max_poll: int = 500) -> JavaClient:
    return JavaClient("share", b.bootstrap, "--group", group, "--topic", topic, "--ack", ack, "--max-poll-records", str(max_poll),
                      name=name, program=SHARE)


def _close(*clients: JavaClient) -> None:
    for c in clients:
        c.close()


def _wait_members_assigned(b, group: str, n: int, timeout: float = 120.0) -> None:
    """Until ShareGroupDescribe shows ``n`` members, each assigned a partition."""
    raw = RawClient(b.bootstrap)
    last = []

    def assigned() -> bool:
        [g] = raw.request(77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups
        last[:] = [g]
        return len([m for m in g.members if any(tp.partitions for tp in m.assignment.topic_partitions)]) >= n

    try:
        wait_until(assigned, timeout=timeout, interval=0.1, what=f"{n} members of {group} assigned", describe=lambda: repr(last))
    finally:
        raw.close()


def test_consumers_share_one_partition(broker):
    topic, group = f"sj-share-{uuid.uuid4().hex[:6]}", "sj-share"
    _setup(broker, topic, group, [])
    consumers = [_consumer(broker, group, topic, "accept", f"c{i}", max_poll=2) for i in range(3)]
    try:
        _wait_members_assigned(broker, group, 3)  # all three hold the one partition, then the records come
        _produce(broker, topic, [f"v{i}" for i in range(60)])
        def all_in(_e=None) -> bool:
            return {e["offset"] for c in consumers for e in c.of("record")} >= set(range(60))

        for c in consumers:  # the union of what they got grows to every record
            c.wait_for("records", lambda e, c=c: all_in(), timeout=120)
            if all_in():
                break
        records = [e for c in consumers for e in c.of("record")]
        assert {e["offset"] for e in records} == set(range(60))
        assert all(e["ack"] == "ACCEPT" for e in records)
        # every record went to one consumer once: nothing was redelivered
        assert sorted(e["offset"] for e in records) == list(range(60)), [e for e in records if e["delivery"] != 1]
        assert sum(1 for c in consumers if c.of("record")) >= 2, "one partition, several consumers: shared"
    finally:
        _close(*consumers)


def test_redelivery_after_lock_timeout(broker):
    topic, group = f"sj-lock-{uuid.uuid4().hex[:6]}", "sj-lock"
    _setup(broker, topic, group, [f"v{i}" for i in range(5)])
    holder = _consumer(broker, group, topic, "hold", "holder")
    taker = None
    try:
        holder.wait_for("records held", "holding", timeout=120)
        held = {e["offset"] for e in holder.of("record")}
        assert held and all(e["delivery"] == 1 for e in holder.of("record"))
        taker = _consumer(broker, group, topic, "accept", "taker")
        # the holder never acknowledges: its locks (1 s) run out and the taker gets the same records, delivery 2
        taker.wait_for("the held records again", lambda e: held <= {x["offset"] for x in taker.of("record") if x["delivery"] >= 2},
                       timeout=120)
        assert all(e["delivery"] >= 2 for e in taker.of("record") if e["offset"] in held)
    finally:
        _close(holder, *([taker] if taker else []))


def test_redelivery_after_release(broker):
    topic, group = f"sj-rel-{uuid.uuid4().hex[:6]}", "sj-rel"
    _setup(broker, topic, group, [f"v{i}" for i in range(4)])
    c = _consumer(broker, group, topic, "release-first", "releaser")
    try:
        c.wait_for("every record accepted", lambda e: {x["offset"] for x in c.of("record") if x["ack"] == "ACCEPT"} >= set(range(4)),
                   timeout=120)
        for offset in range(4):
            deliveries = [(x["delivery"], x["ack"]) for x in c.of("record") if x["offset"] == offset]
            assert deliveries == [(1, "RELEASE"), (2, "ACCEPT")], (offset, deliveries)
    finally:
        c.close()


def test_poison_record_archived_after_delivery_limit(broker):
    topic, group = f"sj-poison-{uuid.uuid4().hex[:6]}", "sj-poison"
    _setup(broker, topic, group, ["ok1", "poison", "ok2"])
    c = _consumer(broker, group, topic, "release:poison", "poisoned")
    try:
        c.wait_for("the poison record's third delivery", lambda e: e.get("value") == "poison" and e.get("delivery") == 3, timeout=120)
        _produce(broker, topic, ["after"])
        c.wait_for("a record produced after it", lambda e: e.get("value") == "after", timeout=120)
        poison = [x["delivery"] for x in c.of("record") if x["value"] == "poison"]
        assert poison == [1, 2, 3], poison  # delivery limit 3: archived, never delivered again
        assert {x["value"] for x in c.of("record") if x["ack"] == "ACCEPT"} >= {"ok1", "ok2", "after"}
    finally:
        c.close()
