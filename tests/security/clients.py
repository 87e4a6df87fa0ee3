"""Produce a few records and read them back, with each Python client, given its security settings."""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
import uuid

COUNT = 5


def new_topic(prefix: str = "sec") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def confluent(bootstrap: str, conf: dict, topic: str, count: int = COUNT) -> int:
    """Records read back by confluent-kafka (librdkafka), through a consumer group."""
    from confluent_kafka import Consumer, KafkaException, Producer

    errors = []
    common = {"bootstrap.servers": bootstrap, **conf, "error_cb": errors.append}
    p = Producer({**common, "message.timeout.ms": 30000})
    for i in range(count):
        p.produce(topic, b"v%d" % i, partition=0)
    left = p.flush(40)
    if left:
        raise KafkaException(f"{left} records not delivered; errors: {errors}")
    c = Consumer({**common, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = 0
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 40
        while got < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
    finally:
        c.close()
    return got


def kafka_python(bootstrap: str, conf: dict, topic: str, count: int = COUNT) -> int:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=30000, max_block_ms=30000, **conf)
    try:
        futures = [p.send(topic, b"v%d" % i, partition=0) for i in range(count)]
        p.flush(40)
        for f in futures:
            f.get(30)
    finally:
        p.close(10)
    c = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False, request_timeout_ms=30000, **conf)
    got = 0
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        deadline = time.monotonic() + 40
        while got < count and time.monotonic() < deadline:
            for records in c.poll(500).values():
                got += len(records)
    finally:
        c.close()
    return got


def aiokafka(bootstrap: str, conf: dict, topic: str, count: int = COUNT) -> int:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> int:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=30000, **conf)
        await p.start()
        try:
            for i in range(count):
                await p.send_and_wait(topic, b"v%d" % i, partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False, request_timeout_ms=30000, **conf)
        await c.start()
        got = 0
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            deadline = time.monotonic() + 40
            while got < count and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=500)).values():
                    got += len(records)
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


PYTHON_CLIENTS = {"confluent": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka}


def client_settings(sec, client: str, mechanism: str | None) -> dict:
    if client == "confluent":
        return sec.librdkafka(mechanism=mechanism)
    if client == "kafka-python":
        return sec.kafka_python(mechanism=mechanism)
    return sec.aiokafka(mechanism=mechanism)


def java_props_file(bootstrap: str, props: dict[str, str], directory: str | None = None) -> str:
    f = tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False, dir=directory)
    with f:
        for k, v in {"bootstrap.servers": bootstrap, **props}.items():
            f.write(f"{k}={v.replace(chr(92), chr(92) * 2)}\n")
    return f.name


def java(command: list[str], mode: str, *args: str, timeout: float = 300) -> list[dict]:
    proc = subprocess.run([*command, mode, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 and not lines:
        raise AssertionError(f"SecureClients exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return lines
