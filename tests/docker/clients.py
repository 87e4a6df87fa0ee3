"""Host-side Kafka clients (confluent-kafka) for tests/docker."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def advertised(bootstrap: str) -> list[str]:
    md = admin(bootstrap).list_topics(timeout=30)
    return sorted(f"{b.host}:{b.port}" for b in md.brokers.values())


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    a = admin(bootstrap)  # kept referenced until the answer: a destroyed client fails its futures
    a.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, values: list[str], partition_of=None) -> list[tuple[int, int]]:
    """Writes ``values`` (keyed by index, or to ``partition_of(index)``); returns where
    each one landed, (partition, offset), in the order they were acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors, landed = [], []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            landed.append((msg.partition(), msg.offset()))

    for i, value in enumerate(values):
        kwargs = {"partition": partition_of(i)} if partition_of else {"key": str(i).encode()}
        p.produce(topic, value=value.encode(), on_delivery=on_delivery, **kwargs)
    assert p.flush(30) == 0 and not errors, errors
    return landed


def consume_group(bootstrap: str, group: str, protocol: str, topic: str, expected: int, timeout: float = 60) -> list[str]:
    """Join ``group`` with ``protocol``, read ``expected`` messages, commit, leave."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for msg in c.consume(100, 0.5):
                if msg.error() is None:
                    values.append(msg.value().decode())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return values


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    a = admin(bootstrap)
    result = a.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    finally:
        c.close()
