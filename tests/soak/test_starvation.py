"""The group's promises on a machine starved of CPU, on kafkalite and on the reference Kafka.

The churn of ``bench/churn.py`` (members join, leave and are killed with
SIGKILL at random) runs with four busy-loop CPU hogs beside it, as on a CI
runner that shares its cores with builds: classic members with cooperative-sticky
and 6 s sessions, KIP-848 members with the broker's 1 s heartbeat interval and
10 s sessions. The invariants are those of ``test_churn.py``: no partition owned
by two live members at once, every partition owned by exactly one member once
the churn stops and the group settles, no commit going backwards.

This is the bounded gate (``KAFKALITE_STARVATION_SECONDS``, 45 s of churn by
default); ``make soak-starved`` runs the long version. It gates kafkalite; on
the reference Kafka a broken promise is an expected failure that carries the
figures (the reference is what kafkalite is compared with, not what is tested). Each run's load average, the
broker's longest event-loop stall and how many members were expired are written
to ``build/starvation/<broker>-<protocol>.json`` and printed at the end of the
session.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.churn import ChurnConfig, run
from tests import reference_kafka
from tests.soak.test_churn import xfail_known_start_burst

SECONDS = float(os.environ.get("KAFKALITE_STARVATION_SECONDS", "45"))
MEMBERS = int(os.environ.get("KAFKALITE_STARVATION_MEMBERS", "50"))
HOGS = int(os.environ.get("KAFKALITE_STARVATION_HOGS", "4"))
OUT = Path(__file__).resolve().parents[2] / "build" / "starvation"


def summary(broker: str, protocol: str, r: dict) -> dict:
    """What the run says about starvation: load, the loop's longest stall, members expired."""
    log = r.get("broker_log", {})
    if broker == "kafkalite":
        expired = sum(n for reason, n in log.get("members_removed", {}).items() if "timeout" in reason)
        if protocol == "classic":
            expired = log.get("members_expired", expired)
    else:
        expired = log.get("members_expired", sum(n for reason, n in log.get("members_removed", {}).items() if "timeout" in reason or "expired" in reason))
    return {
        "broker": broker, "protocol": protocol, "hogs": HOGS, "seconds": SECONDS, "members": MEMBERS,
        "overlaps": r["overlaps"], "last_overlap_s": r.get("last_overlap_s"), "settled": r["settled"], "settle_seconds": r.get("settle_seconds"),
        "unowned_after_settle": r["unowned_after_settle"], "backwards_commits": r["backwards_commits"],
        "members_expired": expired, "crashes": r["crashes"],
        "loop_stall_max_ms": log.get("loop_lag_max_ms"), "loop_worst_stall_cpu_ms": log.get("loop_worst_stall_cpu_ms"), "loop_cpu_ms": log.get("loop_cpu_ms"), "loop_runq_wait_ms": log.get("loop_runq_wait_ms"),
        "loadavg_start": r.get("loadavg_start"), "loadavg_end": r.get("loadavg_end"), "loadavg_samples": r.get("loadavg_samples"),
    }


@pytest.mark.soak
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("broker", ["kafkalite", pytest.param("kafka", marks=pytest.mark.reference)])
def test_churn_under_cpu_hogs_keeps_ownership_and_settles(broker, protocol, tmp_path):
    if broker == "kafka":
        ok, reason = reference_kafka.available()
        if not ok:
            pytest.skip(reason)
    cfg = ChurnConfig(
        broker=broker, protocol=protocol, members=MEMBERS, seconds=SECONDS, partitions=60, seed=23,
        consumer_heartbeat_ms=1_000, consumer_session_ms=10_000, classic_session_ms=6_000, settle=90,
        hog=HOGS, loop_monitor=broker == "kafkalite", work_dir=str(tmp_path),
    )
    r = run(cfg)
    s = summary(broker, protocol, r)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{broker}-{protocol}.json").write_text(json.dumps(s, indent=1))
    # a string, so that pytest prints it whole (a dict is cut to its first keys) and CI's log shows why
    detail = json.dumps({**s, "populated_s": r.get("populated_s"), "joins": r["joins"], "doubly_owned_after_settle": r["doubly_owned_after_settle"],
                         "overlap_examples": r["overlap_examples"][:5], "backwards_examples": r["backwards_examples"][:5],
                         "commit_errors": r["commit_errors"], "stall_stacks": (r.get("broker_log", {}).get("stall_stacks") or [])[:2]}, default=str)
    (OUT / f"{broker}-{protocol}-detail.json").write_text(detail)
    # the churn happened under the hogs, and members did their work
    assert r["joins"] > MEMBERS and r["leaves"] > 0 and r["crashes"] > 0, detail
    assert r["commits_ok"] > 0 and r["final_offsets_read"], detail
    assert r["backwards_commits"] == 0, detail
    kept = r["overlaps"] == 0 and r["settled"] and r["unowned_after_settle"] == 0 and r["doubly_owned_after_settle"] == 0
    if broker == "kafka" and not kept:
        # the reference is measured, not gated: its figures are printed beside kafkalite's
        pytest.xfail(f"Apache Kafka broke a group promise under {HOGS} CPU hogs: {detail}")
    if protocol == "consumer" and not kept:
        xfail_known_start_burst(broker, r, detail)
    # the promises
    assert r["overlaps"] == 0, detail
    assert r["settled"] and r["unowned_after_settle"] == 0 and r["doubly_owned_after_settle"] == 0, detail
