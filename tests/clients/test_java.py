"""The Java client's classic group variants, and kafka-consumer-groups, against kafkalite.

tests/integration/test_java_clients.py already covers the Java producer, the
classic consumer with its default settings, ``group.protocol=consumer`` and the
AdminClient's group and offset operations (its kafkalite runs are rows of the
matrix too, see conftest.EXTERNAL). This file adds what it does not:

* the classic protocol's three ways of rebalancing: eager (RangeAssignor: every
  member gives up everything at each rebalance), cooperative
  (CooperativeStickyAssignor: only the partitions that move are revoked) and
  static membership (``group.instance.id``: a member that restarts within its
  session timeout gets its partitions back without a rebalance), each with a
  commit and a resume from the commit;
* Kafka's ``kafka-consumer-groups`` tool (ConsumerGroupCommand of kafka-tools
  4.1.0): ``--list``, ``--describe`` (offsets, ``--members``, ``--state``),
  ``--reset-offsets`` (refused while the group is active, then ``--dry-run`` and
  ``--execute``) and ``--delete``, for a classic and a KIP-848 group;
* Kafka's ``kafka-reassign-partitions`` tool (ReassignPartitionsCommand):
  ``--list``, ``--generate``, ``--execute`` (with a throttle), ``--verify``
  (which clears the throttle) and ``--cancel``.

The consumers run as tests/clients/java/GroupConsumer.java (any consumer
setting through ``--set``), compiled once by the ``java_toolchain`` fixture.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.clients import harness
from tests.clients.scenarios import broker_tail, committed_offsets, create_topic, produce_python, unique
from tests.clients.toolchains import CONSUMER_GROUPS_MAIN, JAVA_FLAGS, REASSIGN_PARTITIONS_MAIN
from tests.wait import wait_until

WAIT_S = 60
RANGE = "partition.assignment.strategy=org.apache.kafka.clients.consumer.RangeAssignor"
COOPERATIVE = "partition.assignment.strategy=org.apache.kafka.clients.consumer.CooperativeStickyAssignor"


def member(tc, broker, topic: str, group: str, name: str, *settings: str, max_records: int | None = None) -> harness.Harness:
    argv = [tc.paths["java"], *JAVA_FLAGS, "-cp", tc.paths["classpath"], "GroupConsumer", "--bootstrap", broker.bootstrap,
            "--topic", topic, "--group", group, "--client-id", name]
    for s in settings:
        argv += ["--set", s]
    if max_records is not None:
        argv += ["--max-records", str(max_records), "--commit"]
    return harness.Harness(argv, name)


def records(m: harness.Harness) -> list[tuple[int, int, str, str]]:
    return [(e["partition"], e["offset"], e["key"], e["value"]) for e in m.of("record")]


def status(m: harness.Harness) -> dict:
    return m.request("status", "status", timeout=30)


def wait_split(broker, members: list[harness.Harness], partitions: int, what: str) -> dict[str, frozenset[int]]:
    """Wait until the members' assignments are disjoint, complete and each non-empty."""
    last: dict[str, frozenset[int]] = {}

    def check():
        for m in members:
            last[m.name] = frozenset(p for _t, p in status(m)["assignment"])
        owned = sorted(p for a in last.values() for p in a)
        return owned == list(range(partitions)) and all(last.values())

    wait_until(check, timeout=WAIT_S, what=what,
               describe=lambda: f"{last}\n" + "\n".join(m.describe(12) for m in members) + broker_tail(broker))
    return dict(last)


def close(*members: harness.Harness) -> None:
    for m in members:
        try:
            assert m.close(WAIT_S) == 0, m.describe()
            assert not m.of("error"), m.describe()
        finally:
            m.kill()


def shutdown(*members: harness.Harness) -> None:
    """Teardown: close what still runs, without masking the test's own failure."""
    for m in members:
        try:
            m.close(WAIT_S)
        except AssertionError:
            pass
        finally:
            m.kill()


def commit(m: harness.Harness) -> dict[int, int]:
    e = m.request("commit", "committed")
    assert e["event"] == "committed", f"commit failed: {e}\n{m.describe()}"
    return {p: o for _t, p, o in e["offsets"]}


# -- classic: eager, cooperative, static --------------------------------------------------

VARIANTS = {
    "eager": ("Java kafka-clients", "classic group, eager rebalance (RangeAssignor): join, split, commit, resume"),
    "cooperative": ("Java kafka-clients", "classic group, cooperative rebalance (CooperativeStickyAssignor): join, split, commit, resume"),
    "static": ("Java kafka-clients", "classic group, static membership (group.instance.id): restart without rebalance, resume"),
}


@pytest.mark.parametrize("variant", [pytest.param(v, marks=pytest.mark.compat(*VARIANTS[v])) for v in VARIANTS])
def test_java_classic_group(variant, java_toolchain, broker):
    tc = java_toolchain
    topic, group = unique(f"java-{variant}"), unique(f"java-{variant}")
    partitions = 4
    create_topic(broker, topic, partitions)
    settings = {"eager": [RANGE], "cooperative": [COOPERATIVE], "static": [RANGE]}[variant]
    # static members get a session timeout long enough for a JVM restart on a slow machine
    static = ["group.instance.id=static-a", "session.timeout.ms=30000"] if variant == "static" else []
    a = member(tc, broker, topic, group, "member-a", *settings, *static)
    members = [a]
    try:
        a.wait_for("member a's first assignment", "assigned", timeout=WAIT_S)
        wait_split(broker, [a], partitions, "member a alone to own every partition")
        a_events = len(a.events)
        static_b = ["group.instance.id=static-b", "session.timeout.ms=30000"] if variant == "static" else []
        b = member(tc, broker, topic, group, "member-b", *settings, *static_b)
        members.append(b)
        split = wait_split(broker, [a, b], partitions, "members a and b to split the partitions")
        assert sorted(len(s) for s in split.values()) == [2, 2], split
        revoked = [frozenset(p for _t, p in e["partitions"]) for e in a.events[a_events:] if e["event"] == "revoked"]
        moved = frozenset(range(partitions)) - split["member-a"]
        if variant == "cooperative":
            # incremental: a gives up only what b gets, and never what it keeps
            assert set().union(*revoked) == moved, (revoked, split, a.describe())
        else:
            # eager: a gives up everything before rejoining
            assert frozenset(range(partitions)) in revoked, (revoked, a.describe())

        produce_python(broker, topic, count=20, partitions=partitions)
        wait_until(lambda: len(records(a)) + len(records(b)) >= 20, timeout=WAIT_S, what="a and b to consume the 20 records",
                   describe=lambda: a.describe(10) + b.describe(10) + broker_tail(broker))
        got = records(a) + records(b)
        assert sorted(k for _p, _o, k, _v in got) == sorted(f"k{i}" for i in range(20)), got
        for m in (a, b):
            assert {p for p, *_ in records(m)} <= split[m.name], (m.name, split, records(m))
        assert commit(a) == {p: 5 for p in split["member-a"]}
        assert commit(b) == {p: 5 for p in split["member-b"]}
        assert committed_offsets(broker, group, topic) == {p: 5 for p in range(partitions)}

        produce_python(broker, topic, count=8, partitions=partitions, prefix="w")
        if variant == "static":
            # b restarts under the same group.instance.id: it gets its partitions back and resumes at its
            # commit, and a, which stays, sees no rebalance at all
            wait_until(lambda: len(records(a)) + len(records(b)) >= 28, timeout=WAIT_S, what="a and b to consume the 8 new records",
                       describe=lambda: a.describe(10) + b.describe(10))
            b_had = split["member-b"]
            generation = status(a)["generation"]
            a_events = len(a.events)
            close(b)
            members.remove(b)
            b2 = member(tc, broker, topic, group, "member-b2", *settings, *static_b)
            members.append(b2)
            b2.wait_for("the restarted static member's assignment", "assigned", timeout=WAIT_S)
            assert frozenset(p for _t, p in status(b2)["assignment"]) == b_had, b2.describe()
            # b did not commit the 8 new records: b2 reads its 4 again, from the commit
            wait_until(lambda: len(records(b2)) >= 4, timeout=WAIT_S, what="b2 to consume from its commit", describe=b2.describe)
            starts = {}
            for p, o, _k, _v in records(b2):
                starts.setdefault(p, o)
            assert starts == {p: 5 for p in b_had}, (starts, b2.describe())
            assert len(records(b2)) == 4, b2.describe()
            s = status(a)
            assert s["generation"] == generation and frozenset(p for _t, p in s["assignment"]) == split["member-a"], (s, generation)
            assert [e for e in a.events[a_events:] if e["event"] in ("revoked", "assigned", "lost")] == [], a.describe()
            assert status(b2)["generation"] == generation, b2.describe()
        else:
            close(*members)
            members.clear()
            # a new member in the group resumes every partition from the commit
            c = member(tc, broker, topic, group, "member-c", *settings, max_records=8)
            members.append(c)
            assert c.wait(WAIT_S) == 0, c.describe()
            starts = {}
            for p, o, _k, _v in records(c):
                starts.setdefault(p, o)
            assert starts == {p: 5 for p in range(partitions)}, (starts, c.describe())
            assert sorted(k for _p, _o, k, _v in records(c)) == sorted(f"k{i}" for i in range(8)), c.describe()
            assert committed_offsets(broker, group, topic) == {p: 7 for p in range(partitions)}
    finally:
        shutdown(*members)


# -- kafka-consumer-groups --------------------------------------------------------------


def kafka_tool(tc, broker, main: str, name: str, *args: str, ok: bool = True) -> harness.Run:
    """One run of a kafka-tools command (``main``, shown as ``name``) against ``broker``."""
    argv = [tc.paths["java"], *JAVA_FLAGS, "-cp", tc.paths["classpath"], main, "--bootstrap-server", broker.bootstrap, *args]
    r = harness.run(argv, 90, check=False, parse=False)
    r.stdout = r.events[0]["text"]
    if ok:
        assert r.rc == 0, f"{name} {' '.join(args)} exited {r.rc}\n{r.stdout}\n{r.stderr[-3000:]}" + broker_tail(broker)
    return r


def consumer_groups(tc, broker, *args: str, ok: bool = True) -> harness.Run:
    return kafka_tool(tc, broker, CONSUMER_GROUPS_MAIN, "kafka-consumer-groups", *args, ok=ok)


def table(text: str) -> list[dict[str, str]]:
    """The rows of the tool's fixed-width tables, by header (columns are split where the header's are)."""
    rows: list[dict[str, str]] = []
    header = None
    for line in text.splitlines():
        if not line.strip():
            header = None
            continue
        if line.startswith("GROUP ") or line.strip() == "GROUP":
            header = [(m.group(0), m.start()) for m in re.finditer(r"\S+(?: \S+)*", line)]
            continue
        if header:
            cells = {}
            for i, (name, start) in enumerate(header):
                end = header[i + 1][1] if i + 1 < len(header) else None
                cells[name] = line[start:end].strip()
            # a value wider than its column pushes the rest right: fall back to whitespace splitting
            if len(line.split()) == len(header) and any(" " in v for v in cells.values() if v):
                cells = dict(zip([h for h, _ in header], line.split(), strict=True))
            rows.append(cells)
    return rows


PROTOCOLS = {
    "classic": ("kafka-consumer-groups", "--list, --describe (offsets, --members, --state), --reset-offsets, --delete: classic group"),
    "consumer": ("kafka-consumer-groups", "--list, --describe (offsets, --members, --state), --reset-offsets, --delete: KIP-848 group"),
}


@pytest.mark.parametrize("protocol", [pytest.param(p, marks=pytest.mark.compat(*PROTOCOLS[p])) for p in PROTOCOLS])
def test_kafka_consumer_groups_tool(protocol, java_toolchain, broker):
    tc = java_toolchain
    topic, group = unique("cgc"), unique(f"cgc-{protocol}")
    partitions = 3
    create_topic(broker, topic, partitions)
    produce_python(broker, topic)  # 10 records per partition
    settings = ["group.protocol=consumer"] if protocol == "consumer" else []
    m = member(tc, broker, topic, group, "cgc-member", *settings)
    try:
        wait_until(lambda: len(records(m)) >= 30, timeout=WAIT_S, what="the member to consume 30 records",
                   describe=lambda: m.describe() + broker_tail(broker))
        assert commit(m) == {p: 10 for p in range(partitions)}
        member_id = status(m)["member_id"]

        states = {r["GROUP"]: r for r in table(consumer_groups(tc, broker, "--list", "--state", "--type").stdout)}
        assert states[group]["STATE"] == "Stable", states[group]
        assert states[group]["TYPE"] == ("Consumer" if protocol == "consumer" else "Classic"), states[group]

        rows = table(consumer_groups(tc, broker, "--describe", "--group", group).stdout)
        assert sorted(int(r["PARTITION"]) for r in rows) == list(range(partitions)), rows
        for r in rows:
            assert (r["GROUP"], r["TOPIC"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) == (group, topic, "10", "10", "0"), r
            assert (r["CONSUMER-ID"], r["CLIENT-ID"]) == (member_id, "cgc-member"), r

        [mrow] = table(consumer_groups(tc, broker, "--describe", "--group", group, "--members", "--verbose").stdout)
        assert (mrow["CONSUMER-ID"], mrow["CLIENT-ID"], mrow["#PARTITIONS"]) == (member_id, "cgc-member", str(partitions)), mrow
        assert mrow.get("ASSIGNMENT", mrow.get("CURRENT-ASSIGNMENT", "")).replace(" ", "").startswith(f"{topic}:0,1,2"), mrow

        [srow] = table(consumer_groups(tc, broker, "--describe", "--group", group, "--state").stdout)
        assert (srow["STATE"], srow["#MEMBERS"]) == ("Stable", "1"), srow
        assert srow["ASSIGNMENT-STRATEGY"] == ("uniform" if protocol == "consumer" else "range"), srow

        # offsets of an active group cannot be reset
        refused = consumer_groups(tc, broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute", ok=False)
        assert "inactive" in refused.stdout + refused.stderr and "Stable" in refused.stdout + refused.stderr, refused.describe()
        assert committed_offsets(broker, group, topic) == {p: 10 for p in range(partitions)}
    finally:
        close(m)

    wait_until(lambda: table(consumer_groups(tc, broker, "--describe", "--group", group, "--state").stdout)[0]["STATE"] == "Empty",
               timeout=WAIT_S, what="the group to be Empty", describe=lambda: broker_tail(broker))
    dry = table(consumer_groups(tc, broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run").stdout)
    assert sorted((int(r["PARTITION"]), r["NEW-OFFSET"]) for r in dry) == [(p, "0") for p in range(partitions)], dry
    assert committed_offsets(broker, group, topic) == {p: 10 for p in range(partitions)}, "--dry-run changed the offsets"
    done = table(consumer_groups(tc, broker, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "4", "--execute").stdout)
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in done] == [("1", "4")], done
    consumer_groups(tc, broker, "--reset-offsets", "--group", group, "--topic", f"{topic}:0,2", "--shift-by", "-7", "--execute")
    assert committed_offsets(broker, group, topic) == {0: 3, 1: 4, 2: 3}

    # a member resumes from the reset offsets
    again = member(tc, broker, topic, group, "cgc-again", *settings, max_records=7 + 6 + 7)
    try:
        assert again.wait(WAIT_S) == 0, again.describe()
    finally:
        again.kill()
    starts = {}
    for p, o, _k, _v in records(again):
        starts.setdefault(p, o)
    assert starts == {0: 3, 1: 4, 2: 3} and len(records(again)) == 20, again.describe()
    assert committed_offsets(broker, group, topic) == {p: 10 for p in range(partitions)}

    wait_until(lambda: table(consumer_groups(tc, broker, "--describe", "--group", group, "--state").stdout)[0]["STATE"] == "Empty",
               timeout=WAIT_S, what="the group to be Empty again", describe=lambda: broker_tail(broker))
    deleted = consumer_groups(tc, broker, "--delete", "--group", group)
    assert "successful" in deleted.stdout, deleted.stdout
    assert group not in consumer_groups(tc, broker, "--list").stdout.split()
    assert committed_offsets(broker, group, topic) == {}


# -- kafka-reassign-partitions -----------------------------------------------------------


@pytest.mark.compat("kafka-reassign-partitions", "--list, --generate, --execute with a throttle, --verify, --cancel")
def test_kafka_reassign_partitions_tool(java_toolchain, broker, tmp_path):
    """On one broker every reassignment it can take (to itself) is complete at once (tests/conformance has the
    refusals side by side with Kafka); the tool's throttle is set on the broker and cleared by --verify."""
    tc = java_toolchain
    topic = unique("rpt")
    create_topic(broker, topic, 2)
    produce_python(broker, topic, partitions=2)

    def tool(*args: str, ok: bool = True) -> str:
        r = kafka_tool(tc, broker, REASSIGN_PARTITIONS_MAIN, "kafka-reassign-partitions", *args, ok=ok)
        return r.stdout + r.stderr

    node = json.loads(tool("--generate", "--topics-to-move-json-file", _json(tmp_path / "topics.json", {"version": 1, "topics": [{"topic": topic}]}),
                           "--broker-list", "1").split("Proposed partition reassignment configuration", 1)[1].strip().splitlines()[0])
    assert sorted((p["partition"], p["replicas"]) for p in node["partitions"]) == [(0, [1]), (1, [1])], node
    assert "No partition reassignments found." in tool("--list")
    plan = _json(tmp_path / "plan.json", {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": [1]} for p in (0, 1)]})
    executed = tool("--execute", "--reassignment-json-file", plan, "--throttle", "1000000")
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in executed, executed
    assert _broker_config(broker, "leader.replication.throttled.rate") == "1000000"
    verified = tool("--verify", "--reassignment-json-file", plan)
    assert f"Reassignment of partition {topic}-0 is completed." in verified and f"Reassignment of partition {topic}-1 is completed." in verified, verified
    assert "Clearing broker-level throttles on broker 1" in verified, verified
    assert _broker_config(broker, "leader.replication.throttled.rate") is None
    assert "None of the specified partition reassignments are active." in tool("--cancel", "--reassignment-json-file", plan)
    refused = tool("--execute", "--reassignment-json-file", _json(tmp_path / "bad.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [7]}]}), ok=False)
    assert "Unknown broker id 7" in refused, refused


def _json(path, value) -> str:
    path.write_text(json.dumps(value))
    return str(path)


def _broker_config(broker, name: str) -> str | None:
    """A dynamic config of broker 1 as DescribeConfigs shows it, None when not set dynamically."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.describe_configs([ConfigResource("broker", "1")]).values()
    entry = future.result(30).get(name)
    return entry.value if entry is not None and entry.source == 2 else None  # ConfigSource.DYNAMIC_BROKER_CONFIG
