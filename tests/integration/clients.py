"""The same few operations through each real client library.

Each adapter talks to the broker only through its library's public API, so a
test written once runs against confluent-kafka (librdkafka), kafka-python and
aiokafka.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

DEADLINE_S = 60


@dataclass(frozen=True)
class Msg:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


class ConfluentClient:
    name = "confluent"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create_topic(self, topic: str, partitions: int, config: dict | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fut = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], request_timeout=15)
        fut[topic].result(timeout=30)

    def produce(self, topic: str, records, compression: str = "none", idempotent: bool = True) -> list[tuple[int, int]]:
        from confluent_kafka import Producer

        acked: list[tuple[int, int]] = []
        errors = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
            else:
                acked.append((msg.partition(), msg.offset()))

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "compression.type": compression,
                "enable.idempotence": idempotent,
                "linger.ms": 5,
            }
        )
        for partition, key, value, *ts in records:
            extra = {"timestamp": ts[0]} if ts else {}
            while True:
                try:
                    p.produce(topic, value=value, key=key, partition=partition, on_delivery=on_delivery, **extra)
                    break
                except BufferError:
                    p.poll(0.05)
        remaining = p.flush(DEADLINE_S)
        assert remaining == 0 and not errors, (remaining, errors[:3])
        return acked

    def consume(self, topic: str, partitions: list[int], count: int, start: int = 0, fetch_wait_ms: int = 500, on_message=None) -> list[Msg]:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.auto.commit": False,
                "group.id": "kafkalite-tests-unused",
                "fetch.wait.max.ms": fetch_wait_ms,
                "check.crcs": True,
            }
        )
        c.assign([TopicPartition(topic, p, start) for p in partitions])
        out: list[Msg] = []
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(out) < count and time.monotonic() < deadline:
                for m in c.consume(num_messages=1000, timeout=1.0):
                    if m.error():
                        raise AssertionError(f"consume error: {m.error()}")
                    out.append(Msg(m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
                    if on_message:
                        on_message(out[-1])
        finally:
            c.close()
        return out

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "kafkalite-tests-unused"})
        try:
            [tp] = c.offsets_for_times([TopicPartition(topic, partition, ts_ms)], timeout=15)
            return tp.offset
        finally:
            c.close()


class KafkaPythonClient:
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create_topic(self, topic: str, partitions: int, config: dict | None = None) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=config or {})])
        finally:
            admin.close()

    def produce(self, topic: str, records, compression: str = "none", idempotent: bool = True) -> list[tuple[int, int]]:
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            compression_type=None if compression == "none" else compression,
            enable_idempotence=idempotent,
            linger_ms=5,
        )
        try:
            futures = [
                p.send(topic, key=key, value=value, partition=partition, timestamp_ms=ts[0] if ts else None)
                for partition, key, value, *ts in records
            ]
            p.flush(DEADLINE_S)
            return [(md.partition, md.offset) for md in (f.get(DEADLINE_S) for f in futures)]
        finally:
            p.close()

    def consume(self, topic: str, partitions: list[int], count: int, start: int = 0, fetch_wait_ms: int = 500, on_message=None) -> list[Msg]:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=fetch_wait_ms,
            check_crcs=True,
            request_timeout_ms=max(30000, fetch_wait_ms + 10000),
        )
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, start)
        out: list[Msg] = []
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(out) < count and time.monotonic() < deadline:
                for tp, msgs in c.poll(timeout_ms=1000, max_records=5000).items():
                    for m in msgs:
                        out.append(Msg(tp.partition, m.offset, m.key, m.value, m.timestamp))
                        if on_message:
                            on_message(out[-1])
        finally:
            c.close()
        return out

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
        try:
            tp = TopicPartition(topic, partition)
            found = c.offsets_for_times({tp: ts_ms})[tp]
            return -1 if found is None else found.offset
        finally:
            c.close()


class AioKafkaClient:
    name = "aiokafka"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def _run(self, coro):
        return asyncio.run(coro)

    def create_topic(self, topic: str, partitions: int, config: dict | None = None) -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        async def go():
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=config or {})])
            finally:
                await admin.close()

        self._run(go())

    def produce(self, topic: str, records, compression: str = "none", idempotent: bool = True) -> list[tuple[int, int]]:
        from aiokafka import AIOKafkaProducer

        async def go():
            p = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap,
                compression_type=None if compression == "none" else compression,
                enable_idempotence=idempotent,
                linger_ms=5,
            )
            await p.start()
            try:
                futures = [
                    await p.send(topic, key=key, value=value, partition=partition, timestamp_ms=ts[0] if ts else None)
                    for partition, key, value, *ts in records
                ]
                mds = await asyncio.gather(*futures)
                return [(md.partition, md.offset) for md in mds]
            finally:
                await p.stop()

        return self._run(go())

    def consume(self, topic: str, partitions: list[int], count: int, start: int = 0, fetch_wait_ms: int = 500, on_message=None) -> list[Msg]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def go():
            c = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=None,
                enable_auto_commit=False,
                fetch_max_wait_ms=fetch_wait_ms,
                check_crcs=True,
                request_timeout_ms=max(40000, fetch_wait_ms + 10000),
            )
            await c.start()
            out: list[Msg] = []
            try:
                tps = [TopicPartition(topic, p) for p in partitions]
                c.assign(tps)
                for tp in tps:
                    c.seek(tp, start)
                deadline = time.monotonic() + DEADLINE_S
                while len(out) < count and time.monotonic() < deadline:
                    batches = await c.getmany(timeout_ms=1000, max_records=5000)
                    for tp, msgs in batches.items():
                        for m in msgs:
                            out.append(Msg(tp.partition, m.offset, m.key, m.value, m.timestamp))
                            if on_message:
                                on_message(out[-1])
            finally:
                await c.stop()
            return out

        return self._run(go())

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def go():
            c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
            await c.start()
            try:
                tp = TopicPartition(topic, partition)
                found = (await c.offsets_for_times({tp: ts_ms}))[tp]
                return -1 if found is None else found.offset
            finally:
                await c.stop()

        return self._run(go())


CLIENTS = [ConfluentClient, KafkaPythonClient, AioKafkaClient]
