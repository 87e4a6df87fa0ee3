"""KIP-848 consumer groups (``group.protocol=consumer``) through confluent-kafka, against kafkalite and real Kafka.

Every test runs twice (the ``kip848_broker`` fixture): against kafkalite and
against an Apache Kafka 4.1 reference broker (``tests/reference_kafka.py``), which
shows that the assertions describe Kafka's behaviour. Both brokers run with a
short KIP-848 heartbeat interval (500 ms) so that reconciliation, which moves one
heartbeat at a time, takes well under a second per step; real Kafka needs its
``group.consumer.min.*`` bounds lowered for that, so it gets a broker of its own
rather than the session-wide ``reference_broker`` (which keeps Kafka's defaults).

Each group member is a real consumer polling in a thread of its own (the
consumer protocol's heartbeats and rebalance callbacks only progress while it
polls). It publishes its assignment and records what its incremental
``on_assign`` / ``on_revoke`` / ``on_lost`` callbacks were handed, and the test
waits, in bounded loops, for the group to reach the state it expects. Topic and
group names are unique per test.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests import reference_kafka
from tests.broker_process import BrokerProcess
from tests.wait import wait_until

WAIT_S = 60  # upper bound of every wait loop
HEARTBEAT_MS = 500  # group.consumer.heartbeat.interval.ms on both brokers
SESSION_MS = 10000  # group.consumer.session.timeout.ms on both brokers

KAFKALITE_ARGS = (
    "--group-consumer-heartbeat-interval-ms", str(HEARTBEAT_MS),
    "--group-consumer-session-timeout-ms", str(SESSION_MS),
)
# Kafka rejects an interval / timeout below its min.* bound (defaults 5000 and 45000).
REFERENCE_CONFIG = {
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": 1000,
}


# -- brokers -------------------------------------------------------------------------

# One reference broker with the KIP-848 settings above, shared by this module and
# test_java_clients.py (which imports the fixture): a reference count stops it
# when the last user's session-scoped fixture is torn down.
_shared_reference: dict = {"broker": None, "users": 0}
_shared_lock = threading.Lock()


@pytest.fixture(scope="session")
def kip848_reference_broker(tmp_path_factory):
    """An Apache Kafka 4.1 broker whose KIP-848 heartbeat interval / session timeout match kafkalite's here."""
    ok, reason = reference_kafka.available()
    if not ok:
        pytest.skip(reason)
    with _shared_lock:
        if _shared_reference["broker"] is None:
            k = reference_kafka.ReferenceKafka(tmp_path_factory.mktemp("reference-kafka-kip848"), config=REFERENCE_CONFIG)
            _shared_reference["broker"] = k.start()
        _shared_reference["users"] += 1
        k = _shared_reference["broker"]
    yield k
    with _shared_lock:
        _shared_reference["users"] -= 1
        if _shared_reference["users"] == 0:
            _shared_reference["broker"] = None
            k.stop()


@pytest.fixture(scope="module", params=["kafkalite", pytest.param("kafka", marks=pytest.mark.reference)])
def _module_kip848_broker(request, tmp_path_factory):
    if request.param == "kafka":
        yield request.getfixturevalue("kip848_reference_broker")
        return
    b = BrokerProcess(tmp_path_factory.mktemp("kafkalite-kip848"), *KAFKALITE_ARGS)
    b.start()
    b.kind = "kafkalite"
    yield b
    if b.proc is not None:
        b.stop()


@pytest.fixture
def kip848_broker(_module_kip848_broker):
    """A running broker (kafkalite or real Kafka) with a 500 ms KIP-848 heartbeat interval, shared by a module.

    A test may stop or restart it; the next test gets it running again.
    """
    b = _module_kip848_broker
    if b.proc is not None and b.proc.poll() is not None:
        b.proc = None  # died on its own; the failing test has already reported it
    if b.proc is None:
        b.start()
    return b


# -- helpers -------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _quiet_logger() -> logging.Logger:
    log = logging.getLogger("kip848-tests.admin")
    if not log.handlers:
        log.addHandler(logging.NullHandler())
        log.propagate = False
    return log


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "logger": _quiet_logger()})


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


def broker_logs(broker, last: int = 60) -> str:
    """The tail of the broker's log, for failure messages."""
    text = broker.logs()
    return "\n".join(text.splitlines()[-last:])


# -- group members: one KIP-848 consumer per thread -----------------------------------


class Member:
    """A ``group.protocol=consumer`` consumer polling in its own thread.

    ``assignment`` is what ``consumer.assignment()`` reports after each poll;
    ``assigned`` / ``revoked`` / ``lost`` are the partition sets handed to each
    (non-empty) callback, in order. ``call(fn)`` runs ``fn(consumer)`` in the
    consumer's thread (clients are not thread-safe); ``close()`` closes it.
    """

    def __init__(self, broker, group: str, topic: str, name: str | None = None, **conf) -> None:
        self.bootstrap, self.group, self.topic, self.conf = broker.bootstrap, group, topic, conf
        self.name = name or unique("kip848")
        self._assignment: frozenset[int] = frozenset()
        self.assigned: list[frozenset[int]] = []
        self.revoked: list[frozenset[int]] = []
        self.lost: list[frozenset[int]] = []
        self.errors: list[str] = []  # consumer-level errors seen by poll (logged, not fatal)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._calls: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._closed = False

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
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not close within {timeout}s"
        if self.error is not None:
            raise AssertionError(f"{self.name} failed: {self.error!r}") from self.error

    def __repr__(self) -> str:
        return f"<{self.name} assignment={sorted(self._assignment)} revoked={[sorted(r) for r in self.revoked]} errors={self.errors[-3:]}>"

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

    def _run(self) -> None:
        conf = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "group.protocol": "consumer",
            "client.id": self.name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "logger": _quiet_logger(),
            **self.conf,
        }
        c = Consumer(conf)

        def parts(tps) -> frozenset[int]:
            return frozenset(tp.partition for tp in tps if tp.topic == self.topic)

        # With the consumer protocol librdkafka's rebalances are incremental: the
        # binding calls incremental_assign / incremental_unassign after these return.
        def on_assign(consumer, partitions):
            if partitions:
                self.assigned.append(parts(partitions))

        def on_revoke(consumer, partitions):
            if partitions:
                self.revoked.append(parts(partitions))

        def on_lost(consumer, partitions):
            if partitions:
                self.lost.append(parts(partitions))

        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        try:
            while not self._stop.is_set():
                m = c.poll(0.05)
                if m is not None and m.error():
                    self.errors.append(str(m.error()))
                self._serve_calls(c)
                self._assignment = parts(c.assignment())
        finally:
            c.close()


def complete_and_disjoint(members: list[Member], partitions: int) -> bool:
    seen: list[int] = []
    for m in members:
        seen.extend(m.assignment)
    return sorted(seen) == list(range(partitions))


def balanced(members: list[Member], partitions: int) -> bool:
    """Complete, disjoint, and as even as uniform makes it (sizes differ by at most one)."""
    sizes = [len(m.assignment) for m in members]
    return complete_and_disjoint(members, partitions) and max(sizes) - min(sizes) <= 1


def check_alive(members: list[Member]) -> None:
    for m in members:
        if m.error is not None:
            raise AssertionError(f"{m.name} failed: {m.error!r}") from m.error


def wait_group(what: str, members: list[Member], predicate: Callable[[], bool], broker, timeout: float = WAIT_S) -> None:
    def check():
        check_alive(members)
        return predicate()

    wait_until(check, timeout=timeout, what=what, describe=lambda: f"{members}\n--- broker log tail ---\n{broker_logs(broker)}")


def settle(members: list[Member], quiet_s: float = 4 * HEARTBEAT_MS / 1000) -> None:
    """Wait until no member's assignment changes for a few heartbeat intervals (bounded)."""
    seen = {"last": [m.assignment for m in members], "since": time.monotonic()}

    def quiet() -> bool:
        now = [m.assignment for m in members]
        if now != seen["last"]:
            seen.update(last=now, since=time.monotonic())
        return time.monotonic() - seen["since"] >= quiet_s

    wait_until(quiet, timeout=WAIT_S, what="the assignments to stop changing", describe=lambda: repr(members))


def close_all(members: list[Member]) -> None:
    failures = []
    for m in members:
        try:
            m.close()
        except BaseException as e:  # noqa: BLE001 - close every member, then report
            failures.append(e)
    if failures:
        raise failures[0]


# -- tests ---------------------------------------------------------------------------

PARTITIONS = 12


def test_three_members_get_complete_disjoint_assignment(kip848_broker):
    topic, group = unique("t848"), unique("g848")
    create_topic(kip848_broker, topic, PARTITIONS)
    members = [Member(kip848_broker, group, topic).start() for _ in range(3)]
    try:
        wait_group("3 members to share 12 partitions evenly", members, lambda: balanced(members, PARTITIONS), kip848_broker)
        settle(members)
        assert complete_and_disjoint(members, PARTITIONS), members
        assert sorted(len(m.assignment) for m in members) == [4, 4, 4], members
        for m in members:
            # what the callbacks handed over adds up to what the consumer holds
            got = frozenset().union(*m.assigned) - frozenset().union(*m.revoked, *m.lost)
            assert got == m.assignment, m
    finally:
        close_all(members)


def test_fourth_member_moves_only_what_it_gains(kip848_broker):
    topic, group = unique("t848"), unique("g848")
    create_topic(kip848_broker, topic, PARTITIONS)
    members = [Member(kip848_broker, group, topic).start() for _ in range(3)]
    try:
        wait_group("3 members to share 12 partitions evenly", members, lambda: balanced(members, PARTITIONS), kip848_broker)
        settle(members)
        before = {m.name: m.assignment for m in members}
        revoked_mark = {m.name: len(m.revoked) for m in members}
        assigned_mark = {m.name: len(m.assigned) for m in members}

        fourth = Member(kip848_broker, group, topic).start()
        everyone = [*members, fourth]
        members.append(fourth)
        wait_group("4 members with 3 partitions each", everyone, lambda: balanced(everyone, PARTITIONS) and len(fourth.assignment) == 3, kip848_broker)
        settle(everyone)
        assert balanced(everyone, PARTITIONS), everyone

        moved = 0
        for m in everyone[:3]:
            after = m.assignment
            revoked = frozenset().union(*m.revoked[revoked_mark[m.name]:])
            gained = frozenset().union(*m.assigned[assigned_mark[m.name]:])
            assert revoked == before[m.name] - after, (m, before[m.name], after)
            assert after <= before[m.name] and not gained, f"{m.name} was given partitions it did not need: {sorted(gained)}"
            assert len(revoked) == 1, f"{m.name} lost {sorted(revoked)}, more than the one partition it must give up"
            moved += len(revoked)
        assert moved == len(fourth.assignment) == 3, everyone
        assert frozenset().union(*fourth.assigned) == fourth.assignment and not fourth.revoked, fourth
    finally:
        close_all(members)


def test_leaving_member_partitions_are_redistributed_others_keep_theirs(kip848_broker):
    topic, group = unique("t848"), unique("g848")
    create_topic(kip848_broker, topic, PARTITIONS)
    members = [Member(kip848_broker, group, topic).start() for _ in range(4)]
    try:
        wait_group("4 members with 3 partitions each", members, lambda: balanced(members, PARTITIONS), kip848_broker)
        settle(members)
        before = {m.name: m.assignment for m in members}
        revoked_mark = {m.name: len(m.revoked) for m in members}
        leaver, stayers = members[0], members[1:]
        leaver.close()  # leave heartbeat (epoch -1): no session timeout to wait for
        began = time.monotonic()
        wait_group("3 remaining members to take over the leaver's partitions", stayers, lambda: balanced(stayers, PARTITIONS), kip848_broker)
        took = time.monotonic() - began
        settle(stayers)
        assert balanced(stayers, PARTITIONS), stayers
        assert took < SESSION_MS / 1000, f"redistribution took {took:.1f}s: the leave was not seen, only the session timeout"
        for m in stayers:
            assert before[m.name] <= m.assignment, f"{m.name} lost partitions: {sorted(before[m.name])} -> {sorted(m.assignment)}"
            assert not m.revoked[revoked_mark[m.name]:], f"{m.name} had partitions revoked: {m.revoked[revoked_mark[m.name]:]}"
        gained = frozenset().union(*(m.assignment - before[m.name] for m in stayers))
        assert gained == before[leaver.name], (sorted(gained), sorted(before[leaver.name]))
    finally:
        close_all(members)


def test_commit_survives_broker_restart_and_group_resumes(kip848_broker):
    topic, group = unique("t848"), unique("g848")
    partitions, per_partition, first_batch = 4, 10, 15
    create_topic(kip848_broker, topic, partitions)
    produce(kip848_broker, topic, [(p, f"{p}-{i}".encode()) for p in range(partitions) for i in range(per_partition)])
    total = partitions * per_partition

    def take(consumer, want: int, into: list) -> None:
        deadline = time.monotonic() + WAIT_S
        while len(into) < want:
            assert time.monotonic() < deadline, f"consumed only {len(into)} of {want} records"
            m = consumer.poll(0.2)
            if m is None:
                continue
            if m.error():
                continue  # e.g. a transient coordinator error; the next poll retries
            into.append((m.partition(), m.offset()))

    first: list[tuple[int, int]] = []
    c = Consumer({"bootstrap.servers": kip848_broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": _quiet_logger()})
    try:
        c.subscribe([topic])
        take(c, first_batch, first)
        committed_list = c.commit(asynchronous=False)  # the positions of what was consumed
        committed = {tp.partition: tp.offset for tp in committed_list if tp.offset >= 0}
        expected = {}
        for p, off in first:
            expected[p] = max(expected.get(p, 0), off + 1)
        assert {p: o for p, o in committed.items() if p in expected} == expected, (committed, expected)
        fetched = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        assert {tp.partition: tp.offset for tp in fetched if tp.offset >= 0} == expected, fetched
    finally:
        c.close()

    if kip848_broker.kind == "kafkalite":  # real Kafka: no restart (18 s); the resume is what is compared
        kip848_broker.restart()

    rest: list[tuple[int, int]] = []
    c = Consumer({"bootstrap.servers": kip848_broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": _quiet_logger()})
    try:
        c.subscribe([topic])
        take(c, total - first_batch, rest)
        # nothing more arrives: the group resumed exactly at the committed offsets
        extra = c.consume(num_messages=100, timeout=1.0)
        rest.extend((m.partition(), m.offset()) for m in extra if not m.error())
    finally:
        c.close()
    for p in range(partitions):
        offsets = sorted(o for q, o in rest if q == p)
        start = expected.get(p, 0)
        assert offsets == list(range(start, per_partition)), f"partition {p}: resumed at {offsets[:3]}..., committed {start}"
    assert sorted(first + rest) == [(p, o) for p in range(partitions) for o in range(per_partition)]


def test_static_member_restart_gets_its_partitions_back(kip848_broker):
    topic, group = unique("t848"), unique("g848")
    create_topic(kip848_broker, topic, PARTITIONS)
    instance = unique("static")
    static = Member(kip848_broker, group, topic, name="static-1", **{"group.instance.id": instance}).start()
    others = [Member(kip848_broker, group, topic).start() for _ in range(2)]
    members = [static, *others]
    try:
        wait_group("3 members to share 12 partitions evenly", members, lambda: balanced(members, PARTITIONS), kip848_broker)
        settle(members)
        before = {m.name: m.assignment for m in members}
        marks = {m.name: (len(m.revoked), len(m.assigned), len(m.lost)) for m in others}

        static.close()  # a static member leaves temporarily (epoch -2): its partitions stay its own
        back = Member(kip848_broker, group, topic, name="static-2", **{"group.instance.id": instance}).start()
        members.append(back)
        wait_group("the restarted static member to get its partitions back", [back, *others],
                   lambda: back.assignment == before[static.name], kip848_broker)
        settle([back, *others])
        assert back.assignment == before[static.name], back
        assert complete_and_disjoint([back, *others], PARTITIONS)
        for m in others:
            assert m.assignment == before[m.name], f"{m.name}: {sorted(before[m.name])} -> {sorted(m.assignment)}"
            r, a, lost = marks[m.name]
            assert not m.revoked[r:] and not m.assigned[a:] and not m.lost[lost:], f"{m.name} saw a rebalance: {m}"
    finally:
        close_all(members)


def describe(broker, group: str):
    a = admin(broker)  # kept referenced until the future resolves: a collected client never answers
    return a.describe_consumer_groups([group], request_timeout=15)[group].result(30)


def test_describe_consumer_group(kip848_broker):
    topic, group = unique("t848"), unique("g848")
    create_topic(kip848_broker, topic, PARTITIONS)
    instance = unique("static")
    members = [
        Member(kip848_broker, group, topic, name="describe-static", **{"group.instance.id": instance}).start(),
        Member(kip848_broker, group, topic, name="describe-dynamic").start(),
    ]
    try:
        wait_group("2 members to share 12 partitions", members, lambda: balanced(members, PARTITIONS), kip848_broker)
        settle(members)

        def stable():
            d = describe(kip848_broker, group)
            return d if d.state == ConsumerGroupState.STABLE and len(d.members) == 2 else None

        d = wait_until(stable, timeout=WAIT_S, what="the group to be described as Stable with 2 members")
        assert d.group_id == group
        assert d.type == ConsumerGroupType.CONSUMER
        assert d.is_simple_consumer_group is False
        assert d.partition_assignor == "uniform"  # the server-side default assignor
        assert d.coordinator is not None and d.coordinator.port == kip848_broker.port
        by_client = {m.client_id: m for m in d.members}
        assert set(by_client) == {"describe-static", "describe-dynamic"}, by_client
        assert by_client["describe-static"].group_instance_id == instance
        assert by_client["describe-dynamic"].group_instance_id is None
        for m in members:
            md = by_client[m.name]
            assert md.member_id, md
            assert md.host, md
            assigned = {(tp.topic, tp.partition) for tp in md.assignment.topic_partitions}
            assert assigned == {(topic, p) for p in m.assignment}, (md.client_id, assigned, m.assignment)
            assert md.target_assignment is not None, "ConsumerGroupDescribe carries the target assignment"
            target = {(tp.topic, tp.partition) for tp in md.target_assignment.topic_partitions}
            assert target == assigned, (target, assigned)
        assert len({m.member_id for m in d.members}) == 2

        # an unknown group id: ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND, which
        # librdkafka reports as a Dead group of unknown type, or an error
        missing = unique("g848-missing")
        try:
            dm = describe(kip848_broker, missing)
        except KafkaException as e:
            assert e.args[0].name() == "GROUP_ID_NOT_FOUND", e
        else:
            assert dm.state == ConsumerGroupState.DEAD and not dm.members, vars(dm)
    finally:
        close_all(members)


def test_list_groups_shows_consumer_type(kip848_broker):
    topic, group = unique("t848"), unique("g848")
    create_topic(kip848_broker, topic, 3)
    member = Member(kip848_broker, group, topic).start()
    classic_group = unique("g-classic")
    classic = Consumer({"bootstrap.servers": kip848_broker.bootstrap, "group.id": classic_group,
                        "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, "logger": _quiet_logger()})
    try:
        classic.subscribe([topic])
        wait_group("the member to get all 3 partitions", [member], lambda: complete_and_disjoint([member], 3), kip848_broker)
        wait_until(lambda: classic.poll(0.1) is None and classic.assignment(), timeout=WAIT_S,
                   what="the classic consumer to get its assignment")
        a = admin(kip848_broker)

        def listing(**kw):
            result = a.list_consumer_groups(request_timeout=15, **kw).result(30)
            assert not result.errors, result.errors
            return {g.group_id: g for g in result.valid}

        everything = listing()
        assert group in everything and classic_group in everything, sorted(everything)
        assert everything[group].type == ConsumerGroupType.CONSUMER
        assert everything[group].state == ConsumerGroupState.STABLE
        assert everything[group].is_simple_consumer_group is False
        assert everything[classic_group].type == ConsumerGroupType.CLASSIC

        consumer_only = listing(types={ConsumerGroupType.CONSUMER})
        assert group in consumer_only and classic_group not in consumer_only, sorted(consumer_only)
        classic_only = listing(types={ConsumerGroupType.CLASSIC})
        assert classic_group in classic_only and group not in classic_only, sorted(classic_only)
        stable_consumer = listing(types={ConsumerGroupType.CONSUMER}, states={ConsumerGroupState.STABLE})
        assert group in stable_consumer
        assert group not in listing(types={ConsumerGroupType.CONSUMER}, states={ConsumerGroupState.EMPTY})
    finally:
        classic.close()
        member.close()
