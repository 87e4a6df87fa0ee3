"""A Kafka client run inside a container on the broker's Docker network (tests/docker).

It runs in the examples image (Python and confluent-kafka, nothing from this
repository), mounted read-only, and prints one JSON object per line on stdout.

    python netclient.py selfcheck BOOTSTRAP TOPIC
        creates TOPIC (3 partitions), produces 30 messages, reads them back through a
        classic group and a KIP-848 group, and prints the advertised brokers and counts.

    python netclient.py member BOOTSTRAP GROUP TOPIC
        joins GROUP (KIP-848) and prints {"assignment": [...]} whenever its assignment
        changes and {"received": [[partition, offset, value], ...]} for what it reads,
        until SIGTERM; then leaves the group and prints {"closed": true}.
"""

from __future__ import annotations

import json
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def create_topic(bootstrap: str, topic: str, partitions: int) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    md = admin.list_topics(timeout=30)
    return [f"{b.host}:{b.port}" for b in md.brokers.values()]


def consume_all(bootstrap: str, group: str, protocol: str, topic: str, expected: int, deadline: float) -> list[str]:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    consumer = Consumer(config)
    consumer.subscribe([topic])
    values: list[str] = []
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    values.append(msg.value().decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def selfcheck(bootstrap: str, topic: str) -> int:
    deadline = time.monotonic() + 90
    brokers = create_topic(bootstrap, topic, 3)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    sent = [f"{topic}-{i}" for i in range(30)]
    for i, value in enumerate(sent):
        producer.produce(topic, key=str(i).encode(), value=value.encode())
    if producer.flush(30):
        raise KafkaException("messages left unflushed")
    result = {"brokers": brokers}
    for protocol in ("classic", "consumer"):
        got = consume_all(bootstrap, f"{topic}-{protocol}", protocol, topic, len(sent), deadline)
        result[protocol] = sorted(got) == sorted(sent)
    emit(**result)
    return 0 if result["classic"] and result["consumer"] else 1


def member(bootstrap: str, group: str, topic: str) -> int:
    stop = False

    def on_signal(signum, frame):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest", "client.id": "netclient-member"})
    consumer.subscribe([topic])
    assignment: list[int] | None = None
    emit(started=True)
    try:
        while not stop:
            received = [[m.partition(), m.offset(), m.value().decode()] for m in consumer.consume(100, 0.2) if m.error() is None]
            if received:
                emit(received=received)
            now = sorted(tp.partition for tp in consumer.assignment())
            if now != assignment:
                assignment = now
                emit(assignment=now)
    finally:
        consumer.close()
    emit(closed=True)
    return 0


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    sys.exit({"selfcheck": selfcheck, "member": member}[mode](*rest))
