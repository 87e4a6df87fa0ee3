"""Small Kafka helpers for the pipeline tests (confluent-kafka)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.wait import wait_until

_COORDINATOR_NOT_READY = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, records) -> None:
    """records: (partition, key, value, timestamp_ms or None)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, key, value, ts in records:
        kw = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, value=value, key=key, partition=partition, **kw)
    assert p.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int], metadata: str | None = None) -> None:
    """A standalone commit (no membership, generation -1), as admin tools make."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(t, p, o) if metadata is None else TopicPartition(t, p, o, metadata=metadata)
               for (t, p), o in offsets.items()]
        def committed():
            try:
                return c.commit(offsets=tps, asynchronous=False)
            except KafkaException as e:
                # a fresh Apache Kafka answers NOT_COORDINATOR until __consumer_offsets is loaded
                if e.args[0].code() not in _COORDINATOR_NOT_READY:
                    raise
                return None

        result = wait_until(committed, interval=0.1, what=f"{group}'s coordinator to take a commit")
        for tp in result:
            assert tp.error is None, tp.error
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 5.0, isolation: str = "read_committed") -> list:
    """The topic's messages from offset 0, until none came for a second (or ``timeout`` passed without one);
    ``isolation`` is librdkafka's isolation.level (read_committed is its default)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}", "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    idle_until = time.monotonic() + timeout
    while time.monotonic() < idle_until:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        out.append(m)
        idle_until = time.monotonic() + 1.0
    c.close()
    return out


def wait_assigned(consumers, expected_total: int, timeout: float = 30.0) -> None:
    """Poll until the consumers own ``expected_total`` partitions between them, disjointly, each some."""

    def settled() -> bool:
        for c in consumers:
            c.poll(0.05)  # the consumers' polls are the interval: they must run for the group to rebalance
        owned = [tp for c in consumers for tp in c.assignment()]
        return all(c.assignment() for c in consumers) and len(owned) == expected_total == len({(tp.topic, tp.partition) for tp in owned})

    wait_until(settled, timeout=timeout, interval=0, what=f"{len(consumers)} consumers to own {expected_total} partitions between them",
               describe=lambda: repr([[(tp.topic, tp.partition) for tp in c.assignment()] for c in consumers]))
