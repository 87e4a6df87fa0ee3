"""Produce and consume phases with confluent-kafka (librdkafka), measured.

Each phase records wall time, the broker's CPU time (from /proc/<pid>/stat)
and this process's CPU time (the client: Python plus librdkafka's threads)
at its start and end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .procstat import cpu_split, main_thread_cpu_seconds, oncpu_seconds, self_cpu_seconds

PARTITIONS = 3

PRODUCER_CONFIG = {
    "acks": "all",
    "compression.type": "none",
    "enable.idempotence": False,
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "batch.num.messages": 1_000_000,
    "message.max.bytes": 1_000_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,  # 1 GiB
    "max.in.flight.requests.per.connection": 5,
    # only failed deliveries come back to Python: no per-record callback cost
    "delivery.report.only.error": True,
}

CONSUMER_CONFIG = {
    "group.id": "kafkalite-bench",  # required by librdkafka, unused with assign()
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 100,
    "fetch.max.bytes": 52_428_800,  # 50 MiB
    # 4x librdkafka's default; much larger responses cost the broker more per MB
    # (see the 16 MiB variant in bench.run)
    "max.partition.fetch.bytes": 4_194_304,  # 4 MiB
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 262_144,  # 256 MiB
}

CONSUME_BATCH = 10_000


@dataclass
class Phase:
    name: str
    value_size: int
    records: int
    payload_bytes: int
    wall_s: float
    broker_cpu_s: float
    broker_sys_s: float
    client_cpu_s: float
    client_main_cpu_s: float
    variant: str = ""

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / 1e6 / self.wall_s

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s

    @property
    def broker_cpu_ms_per_mb(self) -> float:
        return self.broker_cpu_s * 1000 / (self.payload_bytes / 1e6)

    @property
    def broker_cpu_us_per_record(self) -> float:
        return self.broker_cpu_s * 1e6 / self.records

    @property
    def broker_util(self) -> float:
        """Broker CPU as a fraction of one core over the phase."""
        return self.broker_cpu_s / self.wall_s

    @property
    def broker_sys_share(self) -> float:
        """Fraction of the broker's CPU spent in the kernel."""
        return self.broker_sys_s / self.broker_cpu_s if self.broker_cpu_s else 0.0

    @property
    def client_util(self) -> float:
        """Client CPU (all threads) as a fraction of one core."""
        return self.client_cpu_s / self.wall_s

    @property
    def client_main_util(self) -> float:
        """The client's Python thread as a fraction of one core."""
        return self.client_main_cpu_s / self.wall_s


def _mark(pid: int) -> tuple[float, float, float, float, float]:
    """(broker CPU, broker system CPU, client CPU, client main-thread CPU, wall clock)."""
    # the broker's CPU from schedstat (ns: a consume of 100 MB is a few dozen 10 ms ticks); its
    # system share from utime/stime, which only come in ticks
    _user, sys_ = cpu_split(pid)
    return oncpu_seconds(pid), sys_, self_cpu_seconds(), main_thread_cpu_seconds(), time.perf_counter()


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=10)
    for fut in futures.values():
        fut.result(30)
    # wait until the topic shows up in metadata with all its partitions
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} did not appear in metadata")


def produce(bootstrap: str, broker_pid: int, topic: str, value_size: int, count: int) -> Phase:
    errors: list = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG, "on_delivery": on_delivery})
    producer.list_topics(topic, timeout=10)  # connect and learn the leader before the clock starts
    value = bytes((i * 7 + 13) & 0xFF for i in range(value_size))
    produce_ = producer.produce
    poll = producer.poll

    b0, s0, c0, m0, t0 = _mark(broker_pid)
    for i in range(count):
        part = i % PARTITIONS
        try:
            produce_(topic, value, partition=part)
        except BufferError:
            while True:
                poll(0.005)
                try:
                    produce_(topic, value, partition=part)
                    break
                except BufferError:
                    continue
        if not i & 0x3FFF:
            poll(0)
    left = producer.flush(300)
    b1, s1, c1, m1, t1 = _mark(broker_pid)
    if left or errors:
        raise RuntimeError(f"produce failed: {left} records undelivered, {len(errors)} errors, first: {errors[:1]}")
    return Phase("produce", value_size, count, count * value_size, t1 - t0, b1 - b0, s1 - s0, c1 - c0, m1 - m0)


def consume(
    bootstrap: str,
    broker_pid: int,
    topic: str,
    value_size: int,
    count: int,
    overrides: dict | None = None,
    variant: str = "",
) -> Phase:
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONFIG, **(overrides or {})})
    try:
        consumer.list_topics(topic, timeout=10)  # connect before the clock starts
        got = 0
        nbytes = 0
        b0, s0, c0, m0, t0 = _mark(broker_pid)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = t0 + 300
        batch = consumer.consume
        while got < count:
            msgs = batch(num_messages=CONSUME_BATCH, timeout=1.0)
            for m in msgs:
                if m.error() is not None:
                    raise KafkaException(m.error())
                nbytes += len(m.value())
            got += len(msgs)
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consume timed out after {got} of {count} records")
        b1, s1, c1, m1, t1 = _mark(broker_pid)
    finally:
        consumer.close()
    if got != count or nbytes != count * value_size:
        raise RuntimeError(f"consumed {got} records / {nbytes} bytes, expected {count} / {count * value_size}")
    return Phase("consume", value_size, count, nbytes, t1 - t0, b1 - b0, s1 - s0, c1 - c0, m1 - m0, variant)


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_topics([topic], operation_timeout=10).values():
        fut.result(30)
