"""Classic consumer groups through real clients, against kafkalite and real Kafka.

Every test runs twice (see ``group_broker`` in conftest.py): against kafkalite
and against an Apache Kafka 4.1 reference broker, which shows the assertions
describe Kafka's behaviour rather than our reading of it.

Each group member is a real consumer that lives in a thread of its own and
polls continuously (heartbeats, rebalance callbacks and joins only progress
while a consumer polls); it publishes its current assignment and generation,
and the test waits, with bounded loops, for the group to reach the state it
expects. Names of topics and groups are unique per test.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import struct
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.wait import wait_until

WAIT_S = 60  # upper bound of every wait loop
SESSION_MS = 10000
HEARTBEAT_MS = 1000


# -- small helpers -----------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def bounded(what: str, fn: Callable[[], object], timeout: float = WAIT_S):
    """Run a client call that has no timeout of its own (librdkafka's synchronous commit and
    close wait for the group coordinator indefinitely) in a daemon thread; fail if it overruns."""
    box: list = []

    def run():
        try:
            box.append((True, fn()))
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box.append((False, e))

    t = threading.Thread(target=run, name=what, daemon=True)
    t.start()
    t.join(timeout)
    if not box:
        raise AssertionError(f"{what} did not return within {timeout}s")
    ok, value = box[0]
    if not ok:
        raise value
    return value


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(broker, topic: str, partitions: int) -> None:
    a = admin(broker)
    a.create_topics([NewTopic(topic, partitions, 1)], request_timeout=15)[topic].result(30)
    wait_until(lambda: len(getattr(a.list_topics(topic=topic, timeout=10).topics.get(topic), "partitions", {})) == partitions,
               timeout=WAIT_S, what=f"metadata of {topic} with {partitions} partitions")


def produce(broker, topic: str, records: list[tuple[int, bytes]]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    errors = []
    for partition, value in records:
        p.produce(topic, value=value, partition=partition, on_delivery=lambda err, _m: err and errors.append(err))
    assert p.flush(WAIT_S) == 0 and not errors, errors[:3]


def java_string_hash(s: str) -> int:
    """Java's String.hashCode(): over UTF-16 code units, 32-bit signed wrap-around."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int = 50) -> int:
    """Kafka's GroupCoordinatorService.partitionFor: Utils.abs(hashCode) % partitions.

    Utils.abs maps Integer.MIN_VALUE to 0 and is otherwise Math.abs (not ``& 0x7fffffff``).
    """
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def librdkafka_generation(cgmd: bytes) -> int:
    """Generation id from confluent's consumer_group_metadata().

    The binding returns librdkafka's serialised rd_kafka_consumer_group_metadata_t:
    b"CGMDv2:" + int32 generation (host byte order) + group id NUL + member id NUL + ...
    There is no public getter; this is the only client-side view of the generation.
    """
    assert cgmd[:7] == b"CGMDv2:", cgmd[:16]
    return struct.unpack("=i", cgmd[7:11])[0]


def librdkafka_member_id(cgmd: bytes) -> str:
    return cgmd[11:].split(b"\0")[1].decode()


# -- group members: one real consumer per thread ------------------------------------


class Member:
    """A subscribed consumer polling in its own thread; publishes its assignment and generation.

    ``call(fn)`` runs ``fn(consumer)`` in that thread (clients are not thread-safe).
    ``close()`` closes the consumer (a dynamic member sends LeaveGroup) and joins the thread.
    """

    client = "?"

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str | None = None, name: str | None = None, **conf) -> None:
        self.bootstrap, self.group, self.topic, self.strategy, self.conf = bootstrap, group, topic, strategy, conf
        self.name = name or unique(self.client)
        self._assignment: frozenset[int] = frozenset()
        self.generation: int | None = None
        self.member_id: str | None = None
        self.assigned: list[frozenset[int]] = []  # partitions handed over by each assign callback
        self.revoked: list[frozenset[int]] = []  # partitions taken away by each revoke callback (non-empty only)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._calls: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)

    # public view
    @property
    def assignment(self) -> frozenset[int]:
        return self._assignment

    def start(self) -> Member:
        self._thread.start()
        return self

    def call(self, fn, timeout: float = WAIT_S):
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._calls.put((fn, fut))
        return fut.result(timeout)

    def close(self, timeout: float = WAIT_S) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not close within {timeout}s"
        if self.error is not None:
            raise AssertionError(f"{self.name} failed: {self.error!r}") from self.error

    def __repr__(self) -> str:
        return f"<{self.name} gen={self.generation} assignment={sorted(self._assignment)}>"

    # thread side
    def _main(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - reported by close() and by the wait loops
            self.error = e

    def _serve_calls(self, consumer) -> None:
        while True:
            try:
                fn, fut = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                fut.set_result(fn(consumer))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                fut.set_exception(e)

    def _publish(self, partitions) -> None:
        self._assignment = frozenset(tp.partition for tp in partitions if tp.topic == self.topic)

    def _run(self) -> None:
        raise NotImplementedError


class ConfluentMember(Member):
    client = "confluent"

    def _run(self) -> None:
        conf = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": self.name,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **({"partition.assignment.strategy": self.strategy} if self.strategy else {}),
            **self.conf,
        }
        c = Consumer(conf)
        cooperative = self.strategy == "cooperative-sticky"

        def on_assign(consumer, partitions):
            self.assigned.append(frozenset(tp.partition for tp in partitions))
            # the binding (incremental_)assigns after the callback returns; publish the result
            if cooperative:
                self._assignment = self._assignment | self.assigned[-1]
            else:
                self._assignment = self.assigned[-1]

        def on_revoke(consumer, partitions):
            if partitions:
                self.revoked.append(frozenset(tp.partition for tp in partitions))
            self._assignment = self._assignment - frozenset(tp.partition for tp in partitions)

        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        try:
            while not self._stop.is_set():
                c.poll(0.05)
                self._serve_calls(c)
                self._publish(c.assignment())
                md = c.consumer_group_metadata()
                self.generation = librdkafka_generation(md)
                self.member_id = librdkafka_member_id(md)
        finally:
            c.close()


KAFKA_PYTHON_ASSIGNORS = {
    "range": "kafka.coordinator.assignors.range:RangePartitionAssignor",
    "roundrobin": "kafka.coordinator.assignors.roundrobin:RoundRobinPartitionAssignor",
    "sticky": "kafka.coordinator.assignors.sticky.sticky_assignor:StickyPartitionAssignor",
    "cooperative-sticky": "kafka.coordinator.assignors.cooperative_sticky:CooperativeStickyAssignor",
}
AIOKAFKA_ASSIGNORS = {
    "range": "aiokafka.coordinator.assignors.range:RangePartitionAssignor",
    "roundrobin": "aiokafka.coordinator.assignors.roundrobin:RoundRobinPartitionAssignor",
    "sticky": "aiokafka.coordinator.assignors.sticky.sticky_assignor:StickyPartitionAssignor",
}


def load(path: str):
    import importlib

    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


class KafkaPythonMember(Member):
    client = "kafka-python"

    def _run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                parts = frozenset(tp.partition for tp in revoked)
                if parts:
                    member.revoked.append(parts)
                member._assignment = member._assignment - parts

            def on_partitions_assigned(self, assigned):
                member.assigned.append(frozenset(tp.partition for tp in assigned))

        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=[load(KAFKA_PYTHON_ASSIGNORS[self.strategy or "range"])],
            **self.conf,
        )
        try:
            # Know the topic's partitions before joining. kafka-python 3.0.12 has a bug: a leader that
            # assigned without topic metadata rejoins, and if that rejoin finishes while poll() is not
            # waiting for it, the result is dropped and the member never applies it (it stops heartbeating).
            wait_until(lambda: c.partitions_for_topic(self.topic), timeout=WAIT_S, what=f"{self.name}: metadata of {self.topic}")
            c.subscribe(topics=[self.topic], listener=Listener())
            coordinator = c._coordinator
            while not self._stop.is_set():
                c.poll(timeout_ms=200)
                if coordinator._join_task is not None and coordinator._join_task.is_done and not coordinator.need_rejoin():
                    coordinator.request_rejoin()  # the same bug's other ways in: join again rather than hang
                self._serve_calls(c)
                self._publish(c.assignment())
                md = c.group_metadata()
                self.generation, self.member_id = md.generation_id, md.member_id
        finally:
            c.close(autocommit=False)


class AioKafkaMember(Member):
    """aiokafka drives its group membership from a coordination task; its own loop here."""

    client = "aiokafka"

    def _run(self) -> None:
        asyncio.run(self._amain())

    async def _amain(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                parts = frozenset(tp.partition for tp in revoked)
                if parts:
                    member.revoked.append(parts)
                member._assignment = member._assignment - parts

            async def on_partitions_assigned(self, assigned):
                member.assigned.append(frozenset(tp.partition for tp in assigned))

        c = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=(load(AIOKAFKA_ASSIGNORS[self.strategy or "range"]),),
            **self.conf,
        )
        await c.start()
        try:
            c.subscribe(topics=[self.topic], listener=Listener())
            while not self._stop.is_set():
                await c.getmany(timeout_ms=50)
                self._serve_calls(c)
                self._publish(c.assignment())
                coordinator = c._coordinator  # no public view of the generation
                self.generation = getattr(coordinator, "generation", None)
                self.member_id = getattr(coordinator, "member_id", None)
        finally:
            await c.stop()


MEMBER_CLASSES = {cls.client: cls for cls in (ConfluentMember, KafkaPythonMember, AioKafkaMember)}


def close_all(members: list[Member]) -> None:
    """Close every member (each closes within a bound); report the first failure afterwards."""
    failures = []
    for m in members:
        try:
            m.close()
        except AssertionError as e:
            failures.append(e)
    members.clear()
    if failures:
        raise failures[0]


def balanced(members: list[Member], partitions: int, after_generation: int = 0) -> list[frozenset[int]] | None:
    """The members' assignments if they partition range(partitions) with no member empty-handed
    and all members report the same generation, newer than ``after_generation``; else None."""
    for m in members:
        if m.error is not None:
            raise AssertionError(f"{m.name} failed: {m.error!r}") from m.error
    snapshot = [(m.assignment, m.generation) for m in members]
    assignments = [a for a, _ in snapshot]
    if any(not a for a in assignments):
        return None
    if sum(map(len, assignments)) != partitions or frozenset().union(*assignments) != frozenset(range(partitions)):
        return None
    generations = {g for _, g in snapshot}
    if len(generations) != 1 or not (generations.pop() or 0) > after_generation:
        return None
    return assignments


def wait_balanced(members: list[Member], partitions: int, after_generation: int = 0) -> list[frozenset[int]]:
    """Wait for a rebalance to settle: see ``balanced``."""
    return wait_until(lambda: balanced(members, partitions, after_generation), timeout=WAIT_S,
                      what=f"{len(members)} members to share {partitions} partitions in a generation after {after_generation}",
                      describe=lambda: repr(members))


# -- 1 + 2: membership changes rebalance the group, for every client and assignor -----------

GROUP_CASES = [
    ("confluent", "range"),
    ("confluent", "roundrobin"),
    ("confluent", "cooperative-sticky"),
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
    ("kafka-python", "sticky"),
    ("aiokafka", "range"),
    ("aiokafka", "roundrobin"),
    ("aiokafka", "sticky"),
]


@pytest.mark.parametrize(("client", "strategy"), GROUP_CASES, ids=[f"{c}-{s}" for c, s in GROUP_CASES])
def test_group_rebalances_on_join_and_leave(group_broker, client, strategy):
    topic, group = unique("rebalance"), unique("group")
    create_topic(group_broker, topic, 6)
    cls = MEMBER_CLASSES[client]
    members: list[Member] = []

    def join():
        members.append(cls(group_broker.bootstrap, group, topic, strategy, name=f"{client}-{len(members)}-{uuid.uuid4().hex[:6]}").start())

    try:
        for _ in range(3):
            join()
        three = wait_balanced(members, 6)
        assert sorted(map(len, three)) == [2, 2, 2], three
        generation_3 = members[0].generation
        assert generation_3 >= 1
        generations = [generation_3]

        revoked_before = [len(m.revoked) for m in members]
        join()  # a fourth member: everybody gets a share, no partition twice
        four = wait_balanced(members, 6, after_generation=generation_3)
        assert sorted(map(len, four)) == [1, 1, 2, 2], four
        if strategy == "cooperative-sticky" or (strategy == "sticky" and client != "aiokafka"):
            # (aiokafka's StickyPartitionAssignor keeps the previous assignment in class attributes,
            # shared by all consumers of a process, so several members in one process do not stick)
            # sticky: old members keep a subset of what they had; only the surplus moves
            assert all(after <= before for before, after in zip(three, four[:3], strict=True)), (three, four)
        if strategy == "cooperative-sticky":
            # incremental: an old member gives up only the partitions that move, never all it had
            for m, before, after, n in zip(members, three, four, revoked_before, strict=False):
                assert frozenset().union(*m.revoked[n:]) == before - after, (m, before, after, m.revoked[n:])

        generation_4 = members[0].generation
        generations.append(generation_4)
        leaving = members.pop(1)  # a dynamic member leaves: the others take over its partitions
        leaving.close()
        after_leave = wait_balanced(members, 6, after_generation=generation_4)
        assert sorted(map(len, after_leave)) == [2, 2, 2], after_leave
        generations.append(members[0].generation)
        print(f"{client}/{strategy}: generations when settled with 3, 4, 3 members: {generations}")
    finally:
        close_all(members)


# -- 3: static membership ----------------------------------------------------------


def test_static_member_rejoins_without_rebalance(group_broker):
    """A static member that restarts within session.timeout.ms gets its partitions back,
    with no rebalance: the generation is unchanged and the other member keeps its partitions."""
    topic, group, instance = unique("static"), unique("group"), unique("instance")
    create_topic(group_broker, topic, 4)
    static_conf = {"group.instance.id": instance, "session.timeout.ms": 30000}
    members: list[Member] = []
    try:
        # the static member joins first, so it is also the group leader (the harder case)
        static = ConfluentMember(group_broker.bootstrap, group, topic, "range", name="static-1", **static_conf).start()
        members.append(static)
        wait_balanced(members, 4)
        other = ConfluentMember(group_broker.bootstrap, group, topic, "range", name="dynamic").start()
        members.append(other)
        static_parts, other_parts = wait_balanced(members, 4)
        generation = other.generation
        revocations_before = len(other.revoked)
        old_member_id = static.member_id

        # close without LeaveGroup (librdkafka sends none for static members) ...
        members.remove(static)
        static.close()
        # ... and come back under the same group.instance.id
        again = ConfluentMember(group_broker.bootstrap, group, topic, "range", name="static-2", **static_conf).start()
        members.append(again)
        wait_until(lambda: again.assignment and again.generation == generation, timeout=WAIT_S,
                   what="the restarted static member's assignment", describe=lambda: repr(members))
        assert again.assignment == static_parts
        assert again.member_id and again.member_id != old_member_id  # a replacement gets a new member id
        assert other.assignment == other_parts and other.generation == generation
        assert len(other.revoked) == revocations_before  # the other member never rebalanced

        a = admin(group_broker)  # keep the client alive while its future is pending
        desc = a.describe_consumer_groups([group])[group].result(30)
        assert desc.state.name == "STABLE" and len(desc.members) == 2
        by_instance = {m.group_instance_id: m for m in desc.members}
        assert by_instance[instance].member_id == again.member_id
        assert {tp.partition for tp in by_instance[instance].assignment.topic_partitions} == static_parts
    finally:
        close_all(members)


# -- 4: committed offsets survive a restart -----------------------------------------


def consume_in_group(broker, group: str, topic: str, count: int, timeout: float = WAIT_S):
    """Subscribe as a group member and return the first ``count`` messages, with the consumer (still open)."""
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
        }
    )
    try:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                raise AssertionError(f"consume error: {m.error()}")
            got.append((m.partition(), m.offset()))
        assert len(got) == count, f"consumed {len(got)} of {count} within {timeout}s"
        return got, c
    except BaseException:
        bounded("consumer close", c.close)
        raise


RETRIABLE = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}


def committed_offsets(broker, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch) for topic, {partition: offset}.

    librdkafka's committed() surfaces NOT_COORDINATOR and friends instead of retrying them;
    right after a restart Kafka answers so until the group's coordinator shard is loaded.
    """
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        def fetch():
            try:
                return c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
            except KafkaException as e:
                if e.args[0].code() not in RETRIABLE:
                    raise
                return None

        tps = wait_until(fetch, timeout=WAIT_S, what=f"{group}'s coordinator to answer OffsetFetch")
        assert all(tp.error is None for tp in tps), tps
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    finally:
        bounded("consumer close", c.close)


@pytest.mark.parametrize("how", ["graceful", "sigkill"])
def test_committed_offsets_survive_restart(group_broker, how):
    topic, group = unique("commits"), unique("group")
    create_topic(group_broker, topic, 3)
    produce(group_broker, topic, [(i % 3, b"v%d" % i) for i in range(100)])

    got, c = consume_in_group(group_broker, group, topic, 60)
    try:
        committed = bounded("synchronous commit", lambda: c.commit(asynchronous=False))
    finally:
        bounded("consumer close", c.close)
    expected = {}
    for partition, offset in got:
        expected[partition] = max(expected.get(partition, 0), offset + 1)
    assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == expected
    assert committed_offsets(group_broker, group, topic, 3) == expected

    if how == "graceful":
        group_broker.stop()
    else:
        group_broker.kill()
    group_broker.start()

    assert committed_offsets(group_broker, group, topic, 3) == expected
    rest, c = consume_in_group(group_broker, group, topic, 40)
    bounded("consumer close", c.close)
    first = {}
    for partition, offset in rest:
        first.setdefault(partition, offset)
    # a new member resumes exactly where the group committed; uncommitted partitions start at 0
    sizes = {p: len(range(p, 100, 3)) for p in range(3)}
    resume = {p: expected.get(p, 0) for p in range(3)}
    assert {p: first.get(p) for p in range(3)} == {p: (o if o < sizes[p] else None) for p, o in resume.items()}
    assert sorted(rest) == sorted({(i % 3, i // 3) for i in range(100)} - set(got))


# -- 5: group administration ------------------------------------------------------------


class ConfluentGroupAdmin:
    def __init__(self, broker):
        self.a = admin(broker)

    def describe(self, group):
        """(state, protocol type, assignor, {member id: partitions})"""
        d = self.a.describe_consumer_groups([group])[group].result(30)
        # librdkafka reports a missing group as state Dead, a "simple" group without members
        return d.state.name, ("" if d.is_simple_consumer_group else "consumer"), d.partition_assignor, {
            m.member_id: frozenset(tp.partition for tp in m.assignment.topic_partitions) for m in d.members
        }

    def list(self):
        """{group id: state}"""
        r = self.a.list_consumer_groups().result(30)
        assert not r.errors, r.errors
        return {g.group_id: g.state.name for g in r.valid}

    def delete(self, group):
        """None on success, else the error name"""
        try:
            self.a.delete_consumer_groups([group])[group].result(30)
            return None
        except KafkaException as e:
            return e.args[0].name()

    def offsets(self, group, topic, partitions):
        from confluent_kafka import ConsumerGroupTopicPartitions

        [fut] = self.a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
        return {tp.partition: tp.offset for tp in fut.result(30).topic_partitions if tp.topic == topic and tp.offset >= 0}


class KafkaPythonGroupAdmin:
    def __init__(self, broker):
        from kafka.admin import KafkaAdminClient

        self.a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)

    def close(self):
        self.a.close()

    def describe(self, group):
        d = self.a.describe_groups([group])[group]
        if d["error"] is not None:  # v6+: a missing group is GROUP_ID_NOT_FOUND (state "Dead")
            assert "GroupIdNotFoundError" in d["error"] and d["group_state"] == "Dead", d
            return "DEAD", d["protocol_type"], d["protocol_data"], {}
        members = {
            m["member_id"]: frozenset(p for t in m["member_assignment"]["assigned_partitions"] for p in t["partitions"])
            for m in d["members"]
        }
        state = {"PreparingRebalance": "PREPARING_REBALANCE", "CompletingRebalance": "COMPLETING_REBALANCE"}.get(d["group_state"])
        return state or d["group_state"].upper(), d["protocol_type"], d["protocol_data"], members

    def list(self):
        return {g["group_id"]: g.get("group_state", "").upper() for g in self.a.list_groups()}

    def delete(self, group):
        result = self.a.delete_groups([group])[group]
        return None if result == "OK" else result

    def offsets(self, group, topic, partitions):
        res = self.a.list_group_offsets({group: None})[group]
        return {tp.partition: om.offset for tp, om in res.items() if tp.topic == topic and om.offset >= 0}


ADMINS = {"confluent": ConfluentGroupAdmin, "kafka-python": KafkaPythonGroupAdmin}
NON_EMPTY = {"confluent": "NON_EMPTY_GROUP", "kafka-python": "NonEmptyGroupError"}
GROUP_NOT_FOUND = {"confluent": "GROUP_ID_NOT_FOUND", "kafka-python": "GroupIdNotFoundError"}


@pytest.mark.parametrize("admin_client", ["confluent", "kafka-python"])
def test_describe_list_delete_group(group_broker, admin_client):
    topic, group = unique("admin"), unique("group")
    create_topic(group_broker, topic, 4)
    produce(group_broker, topic, [(p, b"x") for p in range(4) for _ in range(5)])
    a = ADMINS[admin_client](group_broker)
    members: list[Member] = []
    try:
        members += [ConfluentMember(group_broker.bootstrap, group, topic, "range").start() for _ in range(2)]
        assignments = wait_balanced(members, 4)
        # each member commits offsets for its own partitions, as a group member (generation checked)
        expected = {}
        for m, parts in zip(members, assignments, strict=True):
            offsets = [TopicPartition(topic, p, p + 1) for p in sorted(parts)]
            m.call(lambda c, offsets=offsets: c.commit(offsets=offsets, asynchronous=False))
            expected.update({p: p + 1 for p in parts})

        state, protocol_type, assignor, described = a.describe(group)
        assert (state, protocol_type, assignor) == ("STABLE", "consumer", "range")
        assert described == {m.member_id: m.assignment for m in members}
        assert a.list().get(group) == "STABLE"
        assert a.offsets(group, topic, 4) == expected
        assert a.delete(group) == NON_EMPTY[admin_client]

        close_all(members)  # both leave: the group is Empty but keeps its offsets
        state, protocol_type, _, described = a.describe(group)
        assert (state, protocol_type, described) == ("EMPTY", "consumer", {})
        assert a.list().get(group) == "EMPTY"
        assert a.offsets(group, topic, 4) == expected

        assert a.delete(group) is None
        assert a.describe(group)[0] == "DEAD"
        assert group not in a.list()
        assert a.delete(group) == GROUP_NOT_FOUND[admin_client]
        assert a.offsets(group, topic, 4) == {}
        assert committed_offsets(group_broker, group, topic, 4) == {}
    finally:
        close_all(members)
        if hasattr(a, "close"):
            a.close()


# -- 6: a group's records land in partition partition_for(group) of __consumer_offsets -----


def group_with_negative_hash(prefix: str) -> str:
    """A unique group id whose Java hashCode is negative, where abs() and `& 0x7fffffff` disagree."""
    while True:
        g = unique(prefix)
        h = java_string_hash(g)
        if h < 0 and abs(h) % 50 != (h & 0x7FFFFFFF) % 50:
            return g


def test_commits_land_in_the_groups_offsets_partition(group_broker):
    topic = unique("placement")
    create_topic(group_broker, topic, 1)
    groups = [group_with_negative_hash("placement"), group_with_negative_hash("grüße-é"), unique("группа-组-🦄")]
    for g in groups:  # a standalone commit (no membership) creates the group and writes an offset record
        c = Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": g, "enable.auto.commit": False})
        try:
            bounded("standalone commit", lambda c=c: c.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False))
        finally:
            bounded("consumer close", c.close)

    found = read_offset_commit_keys(group_broker, set(groups))
    for g in groups:
        assert found.get(g) == {partition_for(g)}, (g, found.get(g), partition_for(g))


def read_offset_commit_keys(broker, groups: set[str], timeout: float = WAIT_S) -> dict[str, set[int]]:
    """Read all of __consumer_offsets; return {group: partitions holding its offset-commit records}."""
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("offsets-reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    found: dict[str, set[int]] = {}
    try:
        c.assign([TopicPartition("__consumer_offsets", p, OFFSET_BEGINNING) for p in range(50)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (len(at_end) == 50 and groups <= found.keys()):
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                    continue
                raise AssertionError(f"reading __consumer_offsets: {m.error()}")
            key = m.key() or b""
            if len(key) >= 4 and struct.unpack(">h", key[:2])[0] in (0, 1):  # (legacy) offset-commit key
                (n,) = struct.unpack(">h", key[2:4])
                group = key[4 : 4 + n].decode()
                if group in groups:
                    found.setdefault(group, set()).add(m.partition())
        assert groups <= found.keys(), f"no offset-commit record for {groups - found.keys()} in __consumer_offsets"
        return found
    finally:
        bounded("consumer close", c.close)
