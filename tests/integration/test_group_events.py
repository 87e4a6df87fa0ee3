"""The coordinator's group events are readable by any client from __kafkalite_group_events."""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def _events(bootstrap: str, group: str, want: set[str], timeout: float = 60.0) -> list[dict]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "events-reader", "enable.auto.commit": False})
    c.assign([TopicPartition("__kafkalite_group_events", 0, 0)])
    found: list[dict] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not want <= {e["event"] for e in found}:
            for m in c.consume(100, 0.5):
                if m.error() is None and m.key() == group.encode():
                    found.append(json.loads(m.value()))
    finally:
        c.close()
    return found


def test_rebalances_are_published_as_json_keyed_by_group(shared_broker):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_topics([NewTopic("events-topic", 2, 1)])["events-topic"].result(15)
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "evented", "session.timeout.ms": 6000})
    consumer.subscribe(["events-topic"])
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert sorted(tp.partition for tp in consumer.assignment()) == [0, 1]
    finally:
        consumer.close()
    events = _events(shared_broker.bootstrap, "evented", {"rebalance completed"})
    done = [e for e in events if e["event"] == "rebalance completed"]
    assert done, [e["event"] for e in events]
    first = done[0]
    assert first["group"] == "evented" and first["generation_after"] == first["generation_before"] + 1
    assert sorted(first["partitions_moved"]) == ["events-topic-0", "events-topic-1"]
    assert first["members_joined"] and first["protocol"] == "range"
    assert isinstance(first["shard"], int)  # the logger's bound context travels with the event
    # a "__" topic: listed only when asked for by name, but not flagged internal
    # (Spark's Kafka source reads nothing from topics flagged internal)
    assert "__kafkalite_group_events" not in admin.list_topics(timeout=10).topics
    from tests.raw import RawClient

    raw = RawClient(shared_broker.bootstrap)
    md = raw.request(3, 12, {"topics": [{"name": "__kafkalite_group_events"}, {"name": "__consumer_offsets"}], "allow_auto_topic_creation": False})
    raw.close()
    assert {t.name: t.is_internal for t in md.topics} == {"__kafkalite_group_events": False, "__consumer_offsets": True}
