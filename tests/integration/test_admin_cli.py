"""``kafkalite topics|groups|health`` against a kafkalite started by the test.

The state the commands read is made by real clients (confluent-kafka
producers, consumers in classic and KIP-848 groups, commits); what the CLI
reports is checked against what those clients did, and what it changes
(reset offsets, deletions) is checked through confluent-kafka again.

The admin client is meant for any Kafka broker, so the same tests also run
against Apache Kafka 4.1 (``group_broker``'s ``kafka`` case, marker
``reference``); only ``groups history``, which reads kafkalite's own event
stream, differs there: it must say the stream is missing.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import socket
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.admin.cli import run as run_admin
from broker.cli import _parser
from tests.broker_process import ROOT, BrokerProcess
from tests.wait import wait_until

DEADLINE = 30


@pytest.fixture
def kb(group_broker):
    """kafkalite, or (marker ``reference``) Apache Kafka 4.1; see tests/integration/conftest.py."""
    return group_broker


def is_kafkalite(b) -> bool:
    return getattr(b, "kind", "kafkalite") == "kafkalite"


def main(argv: list[str]) -> int:
    """What ``broker.cli.main`` does for an admin command, minus its process-wide
    import tweak (which would hide hypothesis from the rest of the test session)."""
    return run_admin(_parser().parse_args(argv))


def run(b: BrokerProcess, *args: str) -> tuple[int, str, str]:
    """The CLI in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*args, "--bootstrap", b.bootstrap])
    return rc, out.getvalue(), err.getvalue()


def run_json(b: BrokerProcess, *args: str):
    rc, out, err = run(b, *args, "--json")
    assert rc == 0, err
    return json.loads(out)


def produce(b: BrokerProcess, topic: str, per_partition: int, partitions: int, timestamp0: int | None = None) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for part in range(partitions):
        for i in range(per_partition):
            extra = {"timestamp": timestamp0 + i * 1000} if timestamp0 is not None else {}
            p.produce(topic, key=b"k", value=json.dumps({"i": i}).encode(), partition=part, **extra)
    assert p.flush(DEADLINE) == 0


def consumer(b: BrokerProcess, group: str, topic: str, protocol: str = "classic") -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **({"session.timeout.ms": 6000} if protocol == "classic" else {}),
        }
    )
    c.subscribe([topic])
    return c


def join(consumers: list[Consumer], partitions: int) -> None:
    def settled():
        for c in consumers:
            c.poll(0.1)
        owned = [tp.partition for c in consumers for tp in c.assignment()]
        return all(c.assignment() for c in consumers) and sorted(owned) == list(range(partitions))

    wait_until(settled, what="every consumer to own partitions")


def committed(b: BrokerProcess, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=DEADLINE)}
    finally:
        c.close()


# ==================================================================== health


def test_health_passes_against_a_broker_and_fails_without_one(kb):
    rc, out, _ = run(kb, "health")
    assert rc == 0 and out.startswith(f"ok {kb.bootstrap}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]  # closed when the block ends: nothing listens there
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["health", "--bootstrap", f"127.0.0.1:{free}", "--timeout", "2"])
    assert rc == 1 and "unhealthy" in err.getvalue()


# ==================================================================== topics


def test_topics_create_list_describe_delete(kb):
    rc, out, err = run(kb, "topics", "create", "cli-topic", "--partitions", "3", "--config", "retention.ms=3600000")
    assert rc == 0 and "Created topic cli-topic (3 partitions" in out, err
    rc, _, err = run(kb, "topics", "create", "cli-topic")
    assert rc == 1 and "TOPIC_ALREADY_EXISTS" in err
    rc, out, _ = run(kb, "topics", "create", "cli-topic", "--if-not-exists")
    assert rc == 0 and "already exists" in out
    # the same through a real client: three partitions
    md = AdminClient({"bootstrap.servers": kb.bootstrap}).list_topics("cli-topic", timeout=DEADLINE)
    assert len(md.topics["cli-topic"].partitions) == 3

    produce(kb, "cli-topic", per_partition=4, partitions=3)
    rc, out, _ = run(kb, "topics", "list")
    assert rc == 0 and out.splitlines()[0].split() == ["TOPIC", "PARTITIONS", "INTERNAL"]
    assert ["cli-topic", "3", "no"] in [line.split() for line in out.splitlines()]
    listed = {t["topic"]: t for t in run_json(kb, "topics", "list")}
    assert listed["cli-topic"]["partitions"] == 3 and not listed["cli-topic"]["internal"]
    external = {t["topic"] for t in run_json(kb, "topics", "list", "--exclude-internal")}
    assert "cli-topic" in external and not any(t.startswith("__") for t in external)

    (desc,) = run_json(kb, "topics", "describe", "cli-topic")
    assert desc["partition_count"] == 3 and desc["replication_factor"] == 1 and desc["topic_id"]
    assert desc["configs"].get("retention.ms") == "3600000"
    assert [(p["partition"], p["log_start_offset"], p["log_end_offset"]) for p in desc["partitions"]] == [(0, 0, 4), (1, 0, 4), (2, 0, 4)]
    rc, out, _ = run(kb, "topics", "describe", "cli-topic")
    assert "PartitionCount: 3" in out and "retention.ms=3600000" in out and "LOG-END-OFFSET" in out
    rc, _, err = run(kb, "topics", "describe", "cli-topic", "no-such-topic")
    assert rc == 1 and "no-such-topic" in err and "UNKNOWN_TOPIC_OR_PARTITION" in err

    rc, out, _ = run(kb, "topics", "create", "cli-validate", "--partitions", "2", "--validate-only")
    assert rc == 0 and "Validated" in out
    assert "cli-validate" not in {t["topic"] for t in run_json(kb, "topics", "list")}

    rc, out, _ = run(kb, "topics", "delete", "cli-topic")
    assert rc == 0 and "Deleted topic cli-topic." in out
    wait_until(lambda: "cli-topic" not in {t["topic"] for t in run_json(kb, "topics", "list")}, what="the topic to go")
    rc, _, err = run(kb, "topics", "delete", "cli-topic")
    assert rc == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err
    rc, out, _ = run(kb, "topics", "delete", "cli-topic", "--if-exists")
    assert rc == 0 and "does not exist" in out


# ==================================================================== classic groups


def check_classic_history(kb, group: str) -> None:
    events = run_json(kb, "groups", "history", group)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "group created" and "rebalance completed" in kinds
    done = [e for e in events if e["event"] == "rebalance completed"]
    assert all(e["group"] == group and e["generation_after"] > e["generation_before"] for e in done), done
    # one rebalance may span generations (a member joined mid-rebalance), but they chain
    assert all(a["generation_after"] == b["generation_before"] for a, b in zip(done, done[1:], strict=False)), done
    assert done[-1]["state"] == "Empty"
    joined = {m["member"] for e in done for m in e["members_joined"]}
    assert len(joined) == 2
    assert [e["event"] for e in run_json(kb, "groups", "history", group, "--event", "rebalance completed", "--limit", "1")] == ["rebalance completed"]
    rc, out, _ = run(kb, "groups", "history", group)
    assert rc == 0 and out.splitlines()[0].split() == ["TIME", "EVENT", "GENERATION", "DETAILS"]
    assert any("rebalance completed" in line and "partitions_moved=" in line for line in out.splitlines())


def test_classic_group_list_describe_lag_reset_history_delete(kb):
    topic, group = "cli-orders", "cli-classic"
    assert run(kb, "topics", "create", topic, "--partitions", "4")[0] == 0
    produce(kb, topic, per_partition=10, partitions=4)
    members = [consumer(kb, group, topic), consumer(kb, group, topic)]
    try:
        join(members, 4)
        for c in members:
            c.commit(offsets=[TopicPartition(topic, tp.partition, 3 + tp.partition) for tp in c.assignment()], asynchronous=False)

        groups = {g["group"]: g for g in run_json(kb, "groups", "list")}
        assert groups[group]["type"] == "classic" and groups[group]["state"] == "Stable" and groups[group]["protocol_type"] == "consumer"
        assert group in {g["group"] for g in run_json(kb, "groups", "list", "--state", "Stable")}
        assert group not in {g["group"] for g in run_json(kb, "groups", "list", "--state", "Empty")}

        desc = run_json(kb, "groups", "describe", group)
        assert desc["type"] == "classic" and desc["state"] == "Stable" and desc["protocol"] == "range"
        assert len(desc["members"]) == 2
        assert sorted(tuple(tp) for m in desc["members"] for tp in m["assignment"]) == [(topic, p) for p in range(4)]
        assert {m["member_id"] for m in desc["members"]} == {c.memberid() for c in members}
        rc, out, _ = run(kb, "groups", "describe", group)
        assert rc == 0 and "State: Stable" in out and "MEMBER-ID" in out and f"{topic}(" in out

        lag = run_json(kb, "groups", "lag", group)
        rows = {r["partition"]: r for r in lag["partitions"]}
        assert sorted(rows) == [0, 1, 2, 3]
        for p, r in rows.items():
            assert (r["current_offset"], r["log_end_offset"], r["lag"]) == (3 + p, 10, 7 - p)
            assert r["member_id"] in {c.memberid() for c in members}
        assert lag["total_lag"] == sum(7 - p for p in range(4))
        rc, out, _ = run(kb, "groups", "lag", group)
        header = out.splitlines()[0].split()
        assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]

        # an active group can be neither reset nor deleted
        rc, _, err = run(kb, "groups", "reset-offsets", group, "--to-earliest", "--execute")
        assert rc == 1 and "inactive" in err and "Stable" in err
        rc, _, err = run(kb, "groups", "delete", group)
        assert rc == 1 and "NON_EMPTY_GROUP" in err
    finally:
        for c in members:
            c.close()
    wait_until(lambda: run_json(kb, "groups", "describe", group)["state"] == "Empty", what="the group to empty")

    # dry run: a plan, nothing committed
    rc, out, err = run(kb, "groups", "reset-offsets", group, "--to-earliest")
    assert rc == 0 and "Dry run" in err
    assert [line.split()[2:] for line in out.splitlines()[1:]] == [[str(p), str(3 + p), "0"] for p in range(4)]
    assert committed(kb, group, topic, 4) == {p: 3 + p for p in range(4)}

    plan = run_json(kb, "groups", "reset-offsets", group, "--to-offset", "2", "--topic", f"{topic}:0,2", "--execute")
    assert plan["executed"] and [(r["partition"], r["new_offset"]) for r in plan["partitions"]] == [(0, 2), (2, 2)]
    assert committed(kb, group, topic, 4) == {0: 2, 1: 4, 2: 2, 3: 6}

    # beyond the end is clamped to the end, as Kafka's tool does
    plan = run_json(kb, "groups", "reset-offsets", group, "--to-offset", "1000", "--topic", f"{topic}:1", "--execute")
    assert plan["partitions"][0]["new_offset"] == 10

    run_json(kb, "groups", "reset-offsets", group, "--to-latest", "--execute")
    assert committed(kb, group, topic, 4) == {p: 10 for p in range(4)}
    assert run_json(kb, "groups", "lag", group)["total_lag"] == 0

    # by time: records of partition 0 carry timestamps t0, t0+1s, ...; t0+5s is offset 5
    stamped = "cli-stamped"
    assert run(kb, "topics", "create", stamped, "--partitions", "1")[0] == 0
    t0 = 1_700_000_000_000
    produce(kb, stamped, per_partition=10, partitions=1, timestamp0=t0)
    at = datetime.datetime.fromtimestamp((t0 + 5000) / 1000, datetime.UTC).isoformat()
    plan = run_json(kb, "groups", "reset-offsets", group, "--to-datetime", at, "--topic", stamped, "--execute")
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in plan["partitions"]] == [(0, None, 5)]
    assert committed(kb, group, stamped, 1) == {0: 5}
    # after the last record: the end
    plan = run_json(kb, "groups", "reset-offsets", group, "--to-datetime", "2100-01-01T00:00:00Z", "--topic", stamped)
    assert plan["partitions"][0]["new_offset"] == 10 and not plan["executed"]
    rc, _, err = run(kb, "groups", "reset-offsets", group, "--to-datetime", "yesterday")
    assert rc == 1 and "ISO 8601" in err

    # history: the rebalances the two members went through, from the event stream
    if is_kafkalite(kb):
        check_classic_history(kb, group)
    else:
        rc, _, err = run(kb, "groups", "history", group)
        assert rc == 1 and "__kafkalite_group_events" in err and "kafkalite only" in err

    rc, out, _ = run(kb, "groups", "delete", group)
    assert rc == 0 and f"Deleted group {group}." in out
    rc, _, err = run(kb, "groups", "describe", group)
    assert rc == 1 and "does not exist" in err
    assert group not in {g["group"] for g in run_json(kb, "groups", "list")}
    assert committed(kb, group, topic, 4) == {p: -1001 for p in range(4)}  # OFFSET_INVALID: no commit left


# ==================================================================== KIP-848 groups


def test_consumer_protocol_group_describe_lag_history(kb):
    topic, group = "cli-848", "cli-consumer-group"
    assert run(kb, "topics", "create", topic, "--partitions", "3")[0] == 0
    produce(kb, topic, per_partition=5, partitions=3)
    c = consumer(kb, group, topic, protocol="consumer")
    try:
        join([c], 3)
        c.commit(offsets=[TopicPartition(topic, p, p) for p in range(3)], asynchronous=False)
        desc = run_json(kb, "groups", "describe", group)
        assert desc["type"] == "consumer" and desc["state"].lower() == "stable"
        assert desc["group_epoch"] >= 1 and desc["assignment_epoch"] == desc["group_epoch"]
        (m,) = desc["members"]
        assert m["member_id"] == c.memberid() and m["subscribed_topics"] == [topic]
        assert m["assignment"] == m["target_assignment"] == [[topic, p] for p in range(3)]
        rc, out, _ = run(kb, "groups", "describe", group)
        assert "Type: consumer" in out and "GroupEpoch:" in out and "TARGET-ASSIGNMENT" in out
        groups = {g["group"]: g for g in run_json(kb, "groups", "list")}
        assert groups[group]["type"] == "consumer"

        lag = run_json(kb, "groups", "lag", group)
        assert [(r["partition"], r["current_offset"], r["lag"], r["member_id"]) for r in lag["partitions"]] == [
            (p, p, 5 - p, c.memberid()) for p in range(3)
        ]
        rc, _, err = run(kb, "groups", "reset-offsets", group, "--to-earliest")
        assert rc == 1 and "inactive" in err
    finally:
        c.close()
    wait_until(lambda: run_json(kb, "groups", "describe", group)["state"].lower() == "empty", what="the group to empty")
    plan = run_json(kb, "groups", "reset-offsets", group, "--to-earliest", "--execute")
    assert [r["new_offset"] for r in plan["partitions"]] == [0, 0, 0]
    assert committed(kb, group, topic, 3) == {0: 0, 1: 0, 2: 0}

    if is_kafkalite(kb):
        events = run_json(kb, "groups", "history", group)
        kinds = {e["event"] for e in events}
        assert {"consumer group epoch bumped", "consumer member reconciled", "consumer group member removed"} <= kinds
        bumped = next(e for e in events if e["event"] == "consumer group epoch bumped")
        assert bumped["reason"] == "member joined" and bumped["member"] == m["member_id"]
        rc, out, _ = run(kb, "groups", "history", group)
        assert any("consumer group epoch bumped" in line and "epoch 2" in line for line in out.splitlines())

    assert run(kb, "groups", "delete", group)[0] == 0
    rc, _, err = run(kb, "groups", "delete", group)
    assert rc == 1 and "GROUP_ID_NOT_FOUND" in err


# ==================================================================== the command itself


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "broker", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def test_command_line_bootstrap_from_environment_usage_errors_and_help(kb):
    out = _cli("groups", "list", "--json", env={"KAFKALITE_BOOTSTRAP": kb.bootstrap})
    assert out.returncode == 0 and isinstance(json.loads(out.stdout), list)
    out = _cli("health", env={"KAFKALITE_BOOTSTRAP": kb.bootstrap})
    assert out.returncode == 0
    out = _cli("groups", "reset-offsets", "g", "--bootstrap", kb.bootstrap)
    assert out.returncode == 2 and "one of the arguments --to-earliest --to-latest --to-offset --to-datetime is required" in out.stderr
    out = _cli("groups", "reset-offsets", "g", "--to-earliest", "--to-latest")
    assert out.returncode == 2
    out = _cli("--help")
    assert out.returncode == 0 and all(word in out.stdout for word in ("serve", "topics", "groups", "health"))
    out = _cli("groups", "reset-offsets", "--help")
    assert "--execute" in out.stdout and "dry run" in out.stdout


def test_examples_make_a_group_the_cli_reports(kb, tmp_path):
    """examples/producer.py and examples/consumer_group.py, as docker-compose.yml runs them."""
    env = {**os.environ, "BOOTSTRAP_SERVERS": kb.bootstrap, "TOPIC": "cli-example-orders"}
    produced = subprocess.run(
        [sys.executable, str(ROOT / "examples/producer.py"), "--count", "60", "--rate", "0", "--partitions", "2"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert produced.returncode == 0 and "acknowledged 60" in produced.stdout, produced.stderr
    consumed = subprocess.run(
        [sys.executable, str(ROOT / "examples/consumer_group.py"), "--group", "cli-example", "--max-messages", "60"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert consumed.returncode == 0 and "done: processed 60" in consumed.stdout, consumed.stderr
    assert "assigned: cli-example-orders-0, cli-example-orders-1" in consumed.stdout
    lag = run_json(kb, "groups", "lag", "cli-example")
    assert lag["total_lag"] == 0 and sum(r["current_offset"] for r in lag["partitions"]) == 60


def test_transactions_list_and_describe(kb):
    """An open transaction, then a committed one, as `kafkalite transactions` shows them (and on Kafka 4.1)."""
    from confluent_kafka import Producer

    topic = f"tx-cli-{uuid.uuid4().hex[:6]}"
    assert run(kb, "topics", "create", topic, "--partitions", "2")[0] == 0
    tid = f"cli-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": kb.bootstrap, "transactional.id": tid, "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=1)
    p.flush(30)
    d = run_json(kb, "transactions", "describe", tid)
    assert d["state"] == "Ongoing" and d["partitions"] == [[topic, 1]] and d["timeout_ms"] == 60_000 and d["start_time"] is not None
    listed = run_json(kb, "transactions", "list", "--state", "Ongoing")
    assert {"transactional_id": tid, "producer_id": d["producer_id"], "state": "Ongoing"} in listed
    p.commit_transaction(30)
    wait_until(lambda: run_json(kb, "transactions", "describe", tid)["state"] == "CompleteCommit", what="the commit to complete")
    assert tid not in {r["transactional_id"] for r in run_json(kb, "transactions", "list", "--state", "Ongoing")}
    code, out, _ = run(kb, "transactions", "describe", tid)
    assert code == 0 and "CompleteCommit" in out and tid in out
    code, _, err = run(kb, "transactions", "describe", "no-such-" + tid)
    assert code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in err.upper()
