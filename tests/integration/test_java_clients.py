"""Kafka's own Java clients (kafka-clients 4.1.0) against kafkalite and real Kafka.

The clients run as child processes of ``tests/java/clients/Harness.java`` (built
and driven by ``tests/java_harness.py``) and report what happens as JSON events
(assigned / revoked / record / committed / ...). Every test runs against
kafkalite and against the Apache Kafka 4.1 reference broker that
test_consumer_protocol.py starts with the same short KIP-848 heartbeat interval
(the ``kip848_broker`` fixtures are imported from there). Tests are skipped,
with the reason, where Java 17+, javac or (for the first fetch) Maven is missing.
"""

from __future__ import annotations

import pytest

from tests import java_harness
from tests.raw import RawClient
from tests.integration.test_consumer_protocol import (  # noqa: F401 - fixtures used by name
    _module_kip848_broker,
    broker_logs,
    create_topic,
    kip848_broker,
    kip848_reference_broker,
    unique,
)
from tests.wait import wait_until

WAIT_S = 60


@pytest.fixture(scope="session")
def java_clients():
    """Skips, with the reason, where the harness cannot be built; session-scoped so it runs before any broker starts."""
    ok, reason = java_harness.available()
    if not ok:
        pytest.skip(reason)


@pytest.fixture
def broker(java_clients, kip848_broker):  # noqa: F811 - the imported fixture, by name
    """kip848_broker: kafkalite, or real Kafka with the same KIP-848 timings."""
    return kip848_broker


# -- helpers -------------------------------------------------------------------------


def produce(broker, topic: str, count: int, partitions: int, prefix: str = "v") -> list[dict]:
    events = java_harness.run_java("produce", broker.bootstrap, "--topic", topic, "--count", count, "--partitions", partitions, "--prefix", prefix)
    produced = [e for e in events if e["event"] == "produced"]
    assert len(produced) == count, events[-5:]
    return produced


def consumer(broker, topic: str, group: str, protocol: str, *extra, name: str | None = None) -> java_harness.JavaClient:
    name = name or unique(f"java-{protocol}")
    return java_harness.JavaClient("consume", broker.bootstrap, "--topic", topic, "--group", group, "--protocol", protocol,
                                   "--client-id", name, *map(str, extra), name=name)


def status(c: java_harness.JavaClient, timeout: float = 30) -> dict:
    """The consumer's current assignment etc., asked for on stdin and answered between two polls."""
    start = c.send("status")
    return c.wait_for("a status event", "status", timeout=timeout, start=start)


def partitions_of(c: java_harness.JavaClient, topic: str) -> frozenset[int]:
    return frozenset(p for t, p in status(c)["assignment"] if t == topic)


def wait_split(broker, clients: list[java_harness.JavaClient], topic: str, partitions: int, what: str) -> dict[str, frozenset[int]]:
    """Wait until the clients' assignments are complete, disjoint and each non-empty."""
    last: dict[str, frozenset[int]] = {}

    def check():
        for c in clients:
            last[c.name] = partitions_of(c, topic)
        seen = sorted(p for a in last.values() for p in a)
        return seen == list(range(partitions)) and all(last.values())

    wait_until(check, timeout=WAIT_S, what=what, describe=lambda: f"{last}\n" + "\n".join(c.describe(15) for c in clients)
               + f"\n--- broker log tail ---\n{broker_logs(broker)}")
    return dict(last)


def records(c: java_harness.JavaClient) -> list[tuple[int, int, str, str]]:
    return [(e["partition"], e["offset"], e["key"], e["value"]) for e in c.of("record")]


def commit(c: java_harness.JavaClient) -> dict[int, int]:
    start = c.send("commit")
    e = c.wait_for("a commit", lambda e: e["event"] in ("committed", "commit_failed"), timeout=WAIT_S, start=start)
    assert e["event"] == "committed", f"commit failed: {e}\n{c.describe()}"
    return {p: off for _t, p, off in e["offsets"]}


def close(*clients: java_harness.JavaClient) -> None:
    for c in clients:
        try:
            c.close(WAIT_S)
        finally:
            c.kill()


def admin(broker, op: str, *args) -> dict:
    return java_harness.admin(broker.bootstrap, op, *map(str, args))


def group_offsets(broker, group: str, topic: str) -> dict[int, int]:
    r = admin(broker, "list-offsets", group)
    assert r["event"] == "result", r
    return {p: off for t, p, off in r["offsets"] if t == topic}


# -- tests ---------------------------------------------------------------------------


def test_java_producer_to_classic_consumer_commit_and_resume(broker):
    topic, group = unique("tjava"), unique("gjava")
    partitions, count = 3, 30
    create_topic(broker, topic, partitions)
    produced = produce(broker, topic, count, partitions)
    assert sorted((e["partition"], e["offset"]) for e in produced) == [(p, o) for p in range(partitions) for o in range(count // partitions)]

    first = consumer(broker, topic, group, "classic", "--max-records", 12, "--commit")
    try:
        assert first.wait(WAIT_S) == 0, first.describe()
    finally:
        first.kill()
    got = records(first)
    assert len(got) >= 12, first.describe()
    [assigned] = first.of("assigned")
    assert sorted(p for _t, p in assigned["assignment"]) == list(range(partitions)), assigned
    [committed_event] = first.of("committed")
    committed = {p: off for _t, p, off in committed_event["offsets"]}
    expected = {p: 1 + max((o for q, o, _k, _v in got if q == p), default=-1) for p in range(partitions)}
    assert committed == expected, (committed, expected)
    for p, o, k, v in got:  # partition i % 3 holds record i
        i = int(k[1:])
        assert (p, v) == (i % partitions, f"v-{i}") and o == i // partitions, (p, o, k, v)
    assert group_offsets(broker, group, topic) == expected

    rest = consumer(broker, topic, group, "classic", "--max-records", count - len(got), "--commit")
    try:
        assert rest.wait(WAIT_S) == 0, rest.describe()
    finally:
        rest.kill()
    resumed = records(rest)
    for p in range(partitions):
        offsets = [o for q, o, _k, _v in resumed if q == p]
        assert offsets == list(range(expected[p], count // partitions)), f"partition {p} resumed at {offsets[:3]}, committed {expected[p]}"
    assert sorted(k for _p, _o, k, _v in got + resumed) == sorted(f"k{i}" for i in range(count))
    assert group_offsets(broker, group, topic) == {p: count // partitions for p in range(partitions)}


def test_java_kip848_consumers_share_consume_and_commit(broker):
    topic, group = unique("tjava"), unique("gjava")
    partitions = 4
    create_topic(broker, topic, partitions)
    a = consumer(broker, topic, group, "consumer")
    b = None
    try:
        a.wait_for("the first member's assignment", "assigned")
        wait_split(broker, [a], topic, partitions, "one KIP-848 member to own every partition")
        b = consumer(broker, topic, group, "consumer")
        split = wait_split(broker, [a, b], topic, partitions, "two KIP-848 members to split the partitions")
        assert sorted(len(s) for s in split.values()) == [2, 2], split
        # KIP-848: the member keeps 2 partitions and gives up 2; the revocation is incremental
        revoked = {p for e in a.of("revoked") for _t, p in e["partitions"]}
        assert revoked == set(range(partitions)) - split[a.name], (revoked, split)
        assert [g for g in (e["generation"] for e in a.of("assigned")) if g <= 0] == [], a.of("assigned")

        produce(broker, topic, 20, partitions)
        wait_until(lambda: len(records(a)) + len(records(b)) >= 20, timeout=WAIT_S, what="both members to consume the 20 records",
                   describe=lambda: a.describe(10) + b.describe(10))
        got = records(a) + records(b)
        assert sorted(k for _p, _o, k, _v in got) == sorted(f"k{i}" for i in range(20)), got
        for c in (a, b):
            assert {p for p, *_ in records(c)} <= split[c.name], (c.name, split)
        assert commit(a) == {p: 5 for p in split[a.name]}
        assert commit(b) == {p: 5 for p in split[b.name]}
        assert group_offsets(broker, group, topic) == {p: 5 for p in range(partitions)}

        d = admin(broker, "describe-groups", group)["groups"][group]
        assert d["type"] == "Consumer" and d["state"] == "Stable", d
        assert d["assignor"] == "uniform", d
        assert len(d["members"]) == 2 and all(m["upgraded"] is True for m in d["members"]), d
    finally:
        close(*(c for c in (a, b) if c is not None))
    for c in (a, b):
        assert c.of("closed") and not c.of("error"), c.describe()


@pytest.mark.parametrize("first_protocol", ["consumer", "classic"])
def test_java_kip848_and_classic_members_in_one_group(broker, first_protocol):
    """A KIP-848 member and a classic member share one group.

    consumer first: the classic JoinGroup joins a consumer group (classic members inside a consumer group);
    classic first: the KIP-848 heartbeat converts the classic group online (upgrade).
    """
    topic, group = unique("tjava"), unique("gjava")
    partitions = 4
    create_topic(broker, topic, partitions)
    second_protocol = "classic" if first_protocol == "consumer" else "consumer"
    first = consumer(broker, topic, group, first_protocol, name=f"first-{first_protocol}")
    second = None
    try:
        wait_split(broker, [first], topic, partitions, f"the {first_protocol} member to own every partition")
        second = consumer(broker, topic, group, second_protocol, name=f"second-{second_protocol}")
        split = wait_split(broker, [first, second], topic, partitions, f"the {first_protocol} and {second_protocol} members to split the partitions")
        assert sorted(len(s) for s in split.values()) == [2, 2], split

        d = admin(broker, "describe-groups", group)["groups"][group]
        assert d["type"] == "Consumer", d
        upgraded = {m["client_id"]: m["upgraded"] for m in d["members"]}
        # MemberType (ConsumerGroupDescribe v1): only the member speaking the KIP-848 protocol is "upgraded"
        assert upgraded == {first.name: first_protocol == "consumer", second.name: second_protocol == "consumer"}, d

        produce(broker, topic, 20, partitions)
        wait_until(lambda: len(records(first)) + len(records(second)) >= 20, timeout=WAIT_S, what="both members to consume the 20 records",
                   describe=lambda: first.describe(10) + second.describe(10) + broker_logs(broker))
        got = records(first) + records(second)
        assert sorted(k for _p, _o, k, _v in got) == sorted(f"k{i}" for i in range(20)), got
        assert commit(first) == {p: 5 for p in partitions_of(first, topic)}
        assert commit(second) == {p: 5 for p in partitions_of(second, topic)}
        assert group_offsets(broker, group, topic) == {p: 5 for p in range(partitions)}
    finally:
        close(*(c for c in (first, second) if c is not None))


def test_java_admin_describe_list_alter_delete(broker):
    topic, group = unique("tjava"), unique("gjava")
    partitions = 3
    create_topic(broker, topic, partitions)
    produce(broker, topic, 9, partitions)
    c = consumer(broker, topic, group, "consumer")
    try:
        wait_until(lambda: len(records(c)) >= 9, timeout=WAIT_S, what="the member to consume 9 records", describe=c.describe)
        assert commit(c) == {p: 3 for p in range(partitions)}

        d = admin(broker, "describe-groups", group)["groups"][group]
        assert d["group_id"] == group and d["type"] == "Consumer" and d["state"] == "Stable", d
        assert d["assignor"] == "uniform" and d["simple"] is False, d
        assert d["group_epoch"] >= 1 and d["target_assignment_epoch"] == d["group_epoch"], d
        [m] = d["members"]
        assert m["client_id"] == c.name and m["instance_id"] is None and m["upgraded"] is True, m
        assert m["member_epoch"] == d["group_epoch"], d
        assert sorted(p for _t, p in m["assignment"]) == list(range(partitions)), m
        assert m["target_assignment"] == m["assignment"], m

        listed = {g["group_id"]: g for g in admin(broker, "list-groups")["groups"]}
        assert listed[group]["type"] == "Consumer" and listed[group]["state"] == "Stable", listed[group]
        assert listed[group]["protocol"] == "consumer", listed[group]
        assert group in {g["group_id"] for g in admin(broker, "list-groups", "consumer")["groups"]}

        # an active group refuses administrative changes
        r = admin(broker, "alter-offsets", group, f"{topic}:0=1")
        assert r["event"] == "error" and r["error"] == "UnknownMemberIdException", r
        r = admin(broker, "delete-groups", group)
        assert r["groups"][group]["error"] == "GroupNotEmptyException", r
        r = admin(broker, "delete-offsets", group, f"{topic}:0")
        assert r["event"] == "error" and r["error"] == "GroupSubscribedToTopicException", r
    finally:
        close(c)

    wait_until(lambda: admin(broker, "describe-groups", group)["groups"][group].get("state") == "Empty", timeout=WAIT_S,
               what="the group to be Empty after the member left")
    assert group_offsets(broker, group, topic) == {p: 3 for p in range(partitions)}

    r = admin(broker, "alter-offsets", group, f"{topic}:0=1", f"{topic}:1=2")
    assert r["event"] == "result", r
    assert group_offsets(broker, group, topic) == {0: 1, 1: 2, 2: 3}
    r = admin(broker, "delete-offsets", group, f"{topic}:2")
    assert r["event"] == "result", r
    assert group_offsets(broker, group, topic) == {0: 1, 1: 2}

    # a member resumes from the altered offsets, and from the earliest offset where there is none
    again = consumer(broker, topic, group, "consumer", "--max-records", 2 + 1 + 3)
    try:
        assert again.wait(WAIT_S) == 0, again.describe()
    finally:
        again.kill()
    starts = {}
    for p, o, *_ in records(again):
        starts.setdefault(p, o)
    assert starts == {0: 1, 1: 2, 2: 0}, again.describe()
    assert len(records(again)) == 6, again.describe()

    wait_until(lambda: admin(broker, "describe-groups", group)["groups"][group].get("state") == "Empty", timeout=WAIT_S,
               what="the group to be Empty again")
    r = admin(broker, "delete-groups", group, unique("gjava-missing"))
    assert r["groups"][group] == "ok", r
    missing = [g for g in r["groups"] if g != group][0]
    assert r["groups"][missing]["error"] == "GroupIdNotFoundException", r
    assert group not in {g["group_id"] for g in admin(broker, "list-groups")["groups"]}
    assert group_offsets(broker, group, topic) == {}
    d = admin(broker, "describe-groups", group)["groups"][group]
    assert d.get("error") == "GroupIdNotFoundException" or (d.get("state") == "Dead" and not d["members"]), d



def test_java_admin_configs_delete_records_log_dirs_elect(broker):
    """The Java AdminClient's incrementalAlterConfigs, describeConfigs (topic, group), deleteRecords,
    describeLogDirs and electLeaders."""
    topic, group = unique("tjcfg"), unique("gjcfg")
    create_topic(broker, topic, 2)
    produce(broker, topic, 10, 1)
    assert admin(broker, "alter-configs", "topic", topic, "retention.ms=3600000", "max.message.bytes=2000")["event"] == "result"
    assert admin(broker, "alter-configs", "group", group, "consumer.session.timeout.ms=50000")["event"] == "result"
    wait_until(lambda: admin(broker, "describe-configs", "topic", topic)["configs"]["retention.ms"]["value"] == "3600000", timeout=WAIT_S,
               what="the topic's configs to be described")
    configs = admin(broker, "describe-configs", "topic", topic)["configs"]
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG" and configs["max.message.bytes"]["value"] == "2000"
    wait_until(lambda: admin(broker, "describe-configs", "group", group)["configs"]["consumer.session.timeout.ms"]["value"] == "50000",
               timeout=WAIT_S, what="the group's configs to be described")
    assert admin(broker, "describe-configs", "group", group)["configs"]["consumer.session.timeout.ms"]["source"] == "DYNAMIC_GROUP_CONFIG"
    r = admin(broker, "alter-configs", "group", group, "consumer.session.timeout.ms=1")
    assert r["event"] == "error" and r["error"] == "InvalidConfigurationException", r

    r = admin(broker, "delete-records", f"{topic}:0=4")
    assert r["partitions"] == {f"{topic}-0": 4}, r
    r = admin(broker, "delete-records", f"{topic}:0=99")
    assert r["partitions"][f"{topic}-0"]["error"] == "OffsetOutOfRangeException", r

    dirs = admin(broker, "describe-log-dirs")["dirs"]
    [d] = dirs.values()
    assert d["error"] is None and d["total_bytes"] >= d["usable_bytes"] > 0, d
    assert d["sizes"][f"{topic}-0"] > 0 and d["sizes"][f"{topic}-1"] == 0, d

    r = admin(broker, "elect-leaders", f"{topic}:0")
    assert r["event"] == "error" and r["error"] == "ElectionNotNeededException" or r["partitions"] == {f"{topic}-0": "ElectionNotNeededException"}, r


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_consume_transform_produce_with_send_offsets_to_transaction(broker, protocol):
    """The Java client's exactly-once loop: read_committed input, output and the group's offsets in one
    transaction (sendOffsetsToTransaction with the consumer's group metadata), every third one aborted."""
    source, sink, group = unique("eos-in"), unique("eos-out"), unique("eos-group")
    create_topic(broker, source, 2)
    create_topic(broker, sink, 2)
    produce(broker, source, 60, 2, prefix="in")
    tid = unique("eos-tx")
    events = java_harness.run_java("transform", broker.bootstrap, "--input", source, "--output", sink, "--group", group, "--protocol", protocol,
                                   "--transactional-id", tid, "--count", 60, "--abort-every", 3, "--max-poll-records", 7,
                                   timeout=180)
    done = [e for e in events if e["event"] == "done"]
    assert done and done[0]["committed"] == 60 and done[0]["aborted"] >= 1, events[-5:]
    # transactions V2 (both brokers finalize transaction.version 2): every EndTxn bumped the epoch of the
    # producer's first InitProducerId (0); under V1 it would have stayed 0
    raw = RawClient(broker.bootstrap)
    try:
        (state,) = raw.request(65, 0, {"transactional_ids": [tid]}).transaction_states
    finally:
        raw.close()
    assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "CompleteCommit", done[0]["transactions"])
    out = consumer(broker, sink, unique("eos-check"), "classic", "--max-records", 60, "--isolation-level", "read_committed")
    try:
        assert out.wait(WAIT_S) == 0, out.describe()
    finally:
        out.kill()
    got = sorted(v for _, _, _, v in records(out))
    assert got == sorted(f"IN-{i}" for i in range(60))
    assert group_offsets(broker, group, source) == {0: 30, 1: 30}
