"""The two scenarios every client of the matrix goes through, and their checks.

``round_trip``: the client produces 30 records over 3 partitions and reads them
back in a fresh group: every record at the partition and offset it was sent to,
with its key and value.

``commit_resume``: 30 records (written by confluent-kafka, so that only the
client's consumer is under test) are read by the client in a group: 12 records,
commit, leave; the broker's committed offsets (read back with confluent-kafka's
AdminClient) must be the offsets after the last record read from each partition.
A second run of the client in the same group must then start each partition
exactly at its committed offset and read the other 18 records, ending with
every partition committed at its end.
"""

from __future__ import annotations

import uuid

from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.clients import harness
from tests.wait import wait_until

PARTITIONS = 3
COUNT = 30
FIRST = 12  # records read before the commit


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def broker_tail(broker, last: int = 40) -> str:
    return "\n--- kafkalite log (tail) ---\n" + "\n".join(broker.logs().splitlines()[-last:])


def create_topic(broker, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=15)[topic].result(30)
    wait_until(lambda: len(getattr(admin.list_topics(topic=topic, timeout=10).topics.get(topic), "partitions", {}) or {}) == partitions,
               what=f"metadata of {topic} with {partitions} partitions")


def produce_python(broker, topic: str, count: int = COUNT, partitions: int = PARTITIONS, prefix: str = "v") -> None:
    """Record i (key k<i>, value <prefix>-<i>) to partition i % partitions, through confluent-kafka."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    errors: list = []
    for i in range(count):
        p.produce(topic, key=f"k{i}", value=f"{prefix}-{i}", partition=i % partitions, on_delivery=lambda err, _m: err and errors.append(err))
    assert p.flush(30) == 0 and not errors, errors[:3]


def committed_offsets(broker, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of ``topic`` as the broker reports them (OffsetFetch through confluent-kafka)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=15)[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}


def records(run: harness.Run) -> list[tuple[int, int, str, str]]:
    return [(e["partition"], e["offset"], e["key"], e["value"]) for e in run.of("record")]


def check_records(got, count: int = COUNT, partitions: int = PARTITIONS, prefix: str = "v") -> None:
    """Each record is where record i belongs: partition i % P, offset i // P, its value."""
    for p, o, k, v in got:
        i = int(k[1:])
        assert (p, o, v) == (i % partitions, i // partitions, f"{prefix}-{i}"), f"record {k} at partition {p} offset {o} with value {v!r}"


def assigned_partitions(run: harness.Run, topic: str) -> set[int]:
    return {p for e in run.of("assigned") for t, p, *_ in e["partitions"] if t == topic}


def round_trip(client, broker) -> None:
    topic, group = unique(f"rt-{client.name.replace('/', '-')}"), unique("rt")
    create_topic(broker, topic)
    produced = client.produce(broker.bootstrap, topic, COUNT, PARTITIONS)
    assert len(produced.of("produced")) == COUNT, produced.describe() + broker_tail(broker)
    assert sorted(e["key"] for e in produced.of("produced")) == sorted(f"k{i}" for i in range(COUNT)), produced.describe()
    for e in produced.of("produced"):  # where the client reports it: each record acknowledged where it belongs
        i = int(e["key"][1:])
        assert e["partition"] == i % PARTITIONS and e.get("offset", i // PARTITIONS) == i // PARTITIONS, (e, produced.describe())

    back = client.consume(broker.bootstrap, topic, group, COUNT, commit=False)
    got = records(back)
    detail = back.describe() + broker_tail(broker)
    assert sorted(k for _p, _o, k, _v in got) == sorted(f"k{i}" for i in range(COUNT)), detail
    check_records(got)
    assert assigned_partitions(back, topic) == set(range(PARTITIONS)), detail


def group_type(broker, group: str) -> str:
    """"classic" or "consumer" (KIP-848), as ListGroups reports it."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=15).result(30)
    [g] = [g for g in listed.valid if g.group_id == group]
    return g.type.name.lower()


def commit_resume(client, broker) -> str:
    """The scenario; returns the group's name."""
    topic, group = unique(f"cr-{client.name.replace('/', '-')}"), unique("cr")
    create_topic(broker, topic)
    produce_python(broker, topic)

    first = client.consume(broker.bootstrap, topic, group, FIRST, commit=True)
    detail = first.describe() + broker_tail(broker)
    got = records(first)
    assert len(got) == FIRST, detail
    check_records(got)
    assert assigned_partitions(first, topic) == set(range(PARTITIONS)), f"the only member must be assigned every partition\n{detail}"
    expected = {}
    for p, o, _k, _v in got:
        expected[p] = max(expected.get(p, 0), o + 1)
    for e in first.of("committed"):  # clients that commit explicitly say what they committed
        assert {p: o for _t, p, o in e["offsets"]} == expected, detail
    committed = committed_offsets(broker, group, topic)
    assert committed == expected, f"committed {committed}, expected {expected}\n{detail}"

    # a new client process in the same group: it must resume exactly at the committed offsets
    second = client.consume(broker.bootstrap, topic, group, COUNT - FIRST, commit=True)
    detail = second.describe() + broker_tail(broker)
    rest = records(second)
    check_records(rest)
    for p in range(PARTITIONS):
        offsets = [o for q, o, _k, _v in rest if q == p]
        assert offsets == list(range(expected.get(p, 0), COUNT // PARTITIONS)), (
            f"partition {p}: resumed at {offsets[:3]}..., committed {expected.get(p, 0)}\n{detail}")
    assert sorted(k for _p, _o, k, _v in got + rest) == sorted(f"k{i}" for i in range(COUNT)), detail
    end = committed_offsets(broker, group, topic)
    assert end == {p: COUNT // PARTITIONS for p in range(PARTITIONS)}, f"final commit {end}\n{detail}"
    return group
