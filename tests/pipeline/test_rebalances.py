"""The rebalance job (python -m pipeline.rebalances) against groups the test drives.

Two groups consume the same 4-partition topic: a classic group (eager "range"
assignor) and a KIP-848 consumer group. In each, consumer 1 joins, consumer 2
joins, consumer 2 leaves, consumer 1 leaves. Every step is a rebalance (a
generation, or a group epoch); the test knows which partitions consumer 2 got
and so which partitions moved at each step.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[test]')")
import pandas as pd  # noqa: E402 - with pyspark's sql extra
from confluent_kafka import Consumer

from pipeline import rebalances
from tests.pipeline.helpers import create_topic, wait_assigned

pytestmark = pytest.mark.slow

TOPIC = "rb"
ALL = [f"{TOPIC}-{p}" for p in range(4)]


def _consumer(bootstrap: str, group: str, kind: str) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if kind == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"partition.assignment.strategy": "range", "session.timeout.ms": 10000, "heartbeat.interval.ms": 300})
    c = Consumer(conf)
    c.subscribe([TOPIC])
    return c


def _drive(bootstrap: str, group: str, kind: str) -> list[str]:
    """join, join, leave, leave; returns the partitions the second consumer owned."""
    c1 = _consumer(bootstrap, group, kind)
    wait_assigned([c1], 4)
    c2 = _consumer(bootstrap, group, kind)
    wait_assigned([c1, c2], 4)
    second = sorted(f"{tp.topic}-{tp.partition}" for tp in c2.assignment())
    c2.close()
    wait_assigned([c1], 4)
    c1.close()
    return second


def test_rebalances_of_a_driven_scenario(spark, kafkalite, tmp_path, capsys):
    bs = kafkalite.bootstrap
    create_topic(bs, TOPIC, 4)
    moved_classic = _drive(bs, "rb-classic", "classic")
    moved_kip848 = _drive(bs, "rb-kip848", "consumer")
    assert len(moved_classic) == 2 and len(moved_kip848) == 2  # range / uniform: 2 each

    out = tmp_path / "out"
    rows, groups = rebalances.run(spark, bs, str(out))

    for group, kind, second in (("rb-classic", "classic", moved_classic), ("rb-kip848", "consumer", moved_kip848)):
        r = rows[rows["group"] == group].sort_values("seq")
        assert r["group_type"].tolist() == [kind] * 4
        assert r["trigger"].tolist() == ["member joined", "member joined", "member left", "member left"]
        # a KIP-848 group starts at epoch 1 (Kafka 4.2+, KAFKA-20268), so its first rebalance is epoch 2
        first = 1 if kind == "classic" else 2
        assert r["generation"].tolist() == list(range(first, first + 4))
        assert r["members"].tolist() == [1, 2, 1, 0]
        # a departing member's partitions move too (to nobody): all 4 when the last one leaves
        assert [list(v) for v in r["partitions_moved"]] == [ALL, second, second, ALL]
        assert r["moved"].tolist() == [4, 2, 2, 4]
        assert r["kept"].tolist() == [0, 2, 2, 0]
        assert [len(v) for v in r["members_joined"]] == [1, 1, 0, 0]
        assert [len(v) for v in r["members_left"]] == [0, 0, 1, 1]
        assert all(len(v) == 0 for v in r["members_expired"])
        # the one who joined second is the one who left first
        assert list(r["members_joined"].iloc[1]) == list(r["members_left"].iloc[2])
        assert list(r["members_joined"].iloc[0]) == list(r["members_left"].iloc[3])
        assert r["completed"].all()
        g = groups[groups["group"] == group].iloc[0]
        assert (g["rebalances"], g["partitions_moved"], g["partitions_kept"]) == (4, 12, 4)
        assert g["stickiness"] == pytest.approx(4 / 16)
        assert (g["members_joined"], g["members_left"], g["members_expired"]) == (2, 2, 0)
        if kind == "classic":
            assert (r["join_ms"] >= 0).all() and (r["sync_ms"] >= 0).all()
            assert r["stop_the_world_ms"].tolist() == (r["join_ms"] + r["sync_ms"]).tolist()
            assert g["stop_the_world_ms"] == pytest.approx(r["stop_the_world_ms"].sum())
            assert r["protocol"].iloc[:3].tolist() == ["range"] * 3
        else:
            assert r["join_ms"].isna().all() and (r["stop_the_world_ms"] == 0).all()
            # members reached each epoch with a member left: a reconciliation time
            assert (r["reconciliation_ms"].iloc[:3] >= 0).all()
            assert r["assignor_ms"].iloc[:3].notna().all()
            assert g["stop_the_world_ms"] == 0

    written = pd.read_parquet(out / "rebalances")
    assert len(written[written["group"].isin(["rb-classic", "rb-kip848"])]) == 8
    assert len(pd.read_parquet(out / "rebalance_groups")) == len(groups)
    assert (out / "rebalances.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "rebalances per group" in printed and "rb-kip848" in printed


def test_rebalance_rows_from_synthetic_events():
    """The per-group reducer: an unfinished classic rebalance and an expired KIP-848 member."""
    events = [
        {"event": "rebalance started", "ts": 100.0, "group": "g", "generation": 0, "reason": "Adding new member m1"},
        {"event": "rebalance completed", "ts": 100.5, "group": "g", "generation_before": 0, "generation_after": 1,
         "reason": "Adding new member m1", "members_joined": [{"member": "m1", "reason": "x"}], "members_left": [],
         "members_expired": [], "protocol": "range", "members": 1, "join_ms": 300, "sync_ms": 200, "partitions_moved": ["t-0", "t-1"]},
        {"event": "rebalance started", "ts": 200.0, "group": "g", "generation": 1, "reason": "Updating metadata for member m1"},
    ]
    rows = rebalances.group_rebalances("g", events)
    assert [(r["seq"], r["trigger"], r["completed"], r["stop_the_world_ms"]) for r in rows] == [
        (1, "member joined", True, 500.0), (2, "metadata changed", False, None)]
    assert rows[0]["started_at"] == pd.Timestamp(100.0, unit="s")

    events = [
        {"event": "consumer group epoch bumped", "ts": 1.0, "group": "k", "epoch": 1, "reason": "member joined", "member": "a"},
        {"event": "target assignment computed", "ts": 1.001, "group": "k", "epoch": 1, "assignor": "uniform", "members": 1, "assignor_ms": 0.1},
        {"event": "consumer member reconciled", "ts": 1.002, "group": "k", "member": "a", "member_epoch": 1, "group_epoch": 1,
         "state": "STABLE", "revoked": [], "assigned": ["t-0", "t-1"], "ms_without_target": 2},
        {"event": "consumer group epoch bumped", "ts": 2.0, "group": "k", "epoch": 2, "reason": "member joined", "member": "b"},
        {"event": "target assignment computed", "ts": 2.001, "group": "k", "epoch": 2, "assignor": "uniform", "members": 2, "assignor_ms": 0.1},
        {"event": "consumer group member removed", "ts": 9.0, "group": "k", "member": "b", "reason": "session timeout expired", "epoch": 3},
        {"event": "target assignment computed", "ts": 9.001, "group": "k", "epoch": 3, "assignor": "uniform", "members": 1, "assignor_ms": 0.1},
        {"event": "consumer member reconciled", "ts": 9.002, "group": "k", "member": "a", "member_epoch": 3, "group_epoch": 3,
         "state": "STABLE", "revoked": [], "assigned": [], "ms_without_target": 1},
    ]
    rows = rebalances.group_rebalances("k", events)
    assert [(r["generation"], r["trigger"], r["members_expired"], r["moved"], r["kept"]) for r in rows] == [
        (1, "member joined", [], 2, 0), (2, "member joined", [], 0, 2), (3, "member expired", ["b"], 0, 2)]
    assert rows[0]["reconciliation_ms"] == pytest.approx(2.0)
    assert rows[1]["reconciliation_ms"] is None and rows[1]["completed"] is False
