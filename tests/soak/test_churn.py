"""Membership churn against one consumer group, on kafkalite and on Apache Kafka 4.1.

The engine is ``bench/churn.py`` (its docstring describes the workload and the
invariants); ``python -m bench.churn`` runs the long version. Here each group
protocol churns for ``KAFKALITE_SOAK_SECONDS`` (45 by default) with
``KAFKALITE_SOAK_MEMBERS`` (50) consumer processes, against kafkalite always and,
with ``KAFKALITE_SOAK_REFERENCE=1``, against the reference Kafka broker where Java
and Maven are available (``make test`` compares the two brokers under CPU hogs in
``test_starvation.py``, the same churn, and leaves this baseline out for time), and the
three invariants must hold: no partition owned by two live members at once, every
partition owned by exactly one member once the group has settled, and no
committed offset going backwards.

KIP-848 groups get a 2 s heartbeat interval here (the bench's default is 1 s):
librdkafka gives a ConsumerGroupHeartbeat request no longer than the interval
before it drops the connection, and this suite must not depend on how loaded the
machine that runs it is.

The tests of ``analyse`` at the end need no broker.
"""

from __future__ import annotations

import os

import pytest

from bench.churn import ChurnConfig, Event, analyse, run
from tests import reference_kafka

SECONDS = float(os.environ.get("KAFKALITE_SOAK_SECONDS", "45"))
REFERENCE = os.environ.get("KAFKALITE_SOAK_REFERENCE") == "1"
MEMBERS = int(os.environ.get("KAFKALITE_SOAK_MEMBERS", "50"))


@pytest.mark.soak
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("broker", ["kafkalite", pytest.param("kafka", marks=pytest.mark.reference)])
def test_churn_keeps_ownership_and_offsets_consistent(broker, protocol, tmp_path):
    if broker == "kafka":
        if not REFERENCE:
            pytest.skip("the unstarved Kafka baseline runs with KAFKALITE_SOAK_REFERENCE=1 (make test compares the brokers under CPU hogs: test_starvation.py)")
        ok, reason = reference_kafka.available()
        if not ok:
            pytest.skip(reason)
    cfg = ChurnConfig(
        broker=broker, protocol=protocol, members=MEMBERS, seconds=SECONDS, partitions=60, seed=7,
        consumer_heartbeat_ms=2_000, consumer_session_ms=10_000, settle=90, work_dir=str(tmp_path),
    )
    r = run(cfg)
    summary = {k: r[k] for k in ("overlaps", "overlap_examples", "unowned_partitions", "doubly_owned_after_settle", "backwards_examples",
                                 "commit_errors", "joins", "leaves", "crashes", "settle_seconds", "loadavg_end", "broker_log")}
    # the churn happened, and members did their work
    assert r["joins"] > MEMBERS and r["leaves"] > 0 and r["crashes"] > 0, summary
    assert r["commits_ok"] > 0 and r["rebalance_callbacks"].get("assign", 0) > 0, summary
    assert r["final_offsets_read"], summary
    # the invariants
    assert r["backwards_commits"] == 0, summary
    kept = r["overlaps"] == 0 and r["settled"] and r["unowned_after_settle"] == 0 and r["doubly_owned_after_settle"] == 0
    if not kept and protocol == "consumer":
        xfail_known_start_burst(broker, r, summary)
    assert r["overlaps"] == 0, summary
    assert r["settled"] and r["unowned_after_settle"] == 0 and r["doubly_owned_after_settle"] == 0, summary


# how long after the last initial member's process started a broken promise still counts as the
# known start-burst failure below: one KIP-848 session timeout (10 s in these runs) and some slack
START_BURST_GRACE_S = 15.0


def xfail_known_start_burst(broker: str, r: dict, summary: dict) -> None:
    """A KIP-848 group that broke a promise: known on kafkalite while 50 client processes start
    at once (issue 23). A member's OffsetCommit waits for the coordinator's batch and its
    ConsumerGroupHeartbeat is answered after it, on the same connection; with the loop seconds
    behind, librdkafka times the heartbeat out after about a second, drops its assignment and
    rejoins, and another member may be given a partition before the old owner's application
    has seen it lost. (Two ways there are fixed since: a fenced member's epoch-0 rejoin was
    refused until its session ran out, and a starved broker handed out 100 ms heartbeat
    deadlines; docs/reliability.md, fourth session.) On kafkalite that alone is an expected failure, with the figures: every
    partition owned twice was handed out in the start burst, and the group still settled with
    every partition owned once. Anything else (an overlap later in the churn, a group that
    does not settle) fails. On the reference Kafka, measured and not gated."""
    if broker == "kafkalite":
        last, populated = r.get("last_overlap_s"), r.get("populated_s")
        in_burst = last is not None and populated is not None and last <= populated + START_BURST_GRACE_S
        settled = r["settled"] and r["unowned_after_settle"] == 0 and r["doubly_owned_after_settle"] == 0
        if not (in_burst and settled):
            return  # not the known failure: the caller's assertions fail the test
    pytest.xfail(f"{broker}: a KIP-848 promise broken (issue 23: heartbeat answers held behind commits in the start burst): {summary}")


# =========================================================================== analyse(): no broker
def ev(t, member, kind, **data):
    return Event(t, member, kind, data)


def _broken(last_overlap_s, settled=True, unowned=0):
    return {"overlaps": 3, "last_overlap_s": last_overlap_s, "populated_s": 6.0, "settled": settled,
            "unowned_after_settle": unowned, "doubly_owned_after_settle": 0}


def test_only_a_start_burst_overlap_in_a_settled_group_is_the_known_kafkalite_failure():
    with pytest.raises(pytest.xfail.Exception):
        xfail_known_start_burst("kafkalite", _broken(12.0), {})
    xfail_known_start_burst("kafkalite", _broken(40.0), {})  # later in the churn: not known, the caller fails
    xfail_known_start_burst("kafkalite", _broken(12.0, settled=False), {})
    xfail_known_start_burst("kafkalite", _broken(12.0, unowned=2), {})
    with pytest.raises(pytest.xfail.Exception):  # the reference is measured, not gated
        xfail_known_start_burst("kafka", _broken(40.0, settled=False), {})


def test_analyse_gives_the_time_of_the_last_overlap():
    r = analyse([ev(1, 1, "assign", p=[0, 1]), ev(2, 2, "assign", p=[1]), ev(3, 3, "assign", p=[0]), ev(4, 1, "revoke", p=[0, 1])], 2)
    assert r["overlaps"] == 2 and r["last_overlap_t"] == 3
    assert analyse([ev(1, 1, "assign", p=[0])], 1)["last_overlap_t"] is None


def test_analyse_counts_an_assignment_to_a_second_live_owner_as_an_overlap():
    r = analyse([ev(1, 1, "assign", p=[0, 1]), ev(2, 2, "assign", p=[1]), ev(3, 1, "revoke", p=[0, 1])], 2)
    assert r["overlaps"] == 1 and r["overlap_examples"][0]["partition"] == 1 and r["overlap_examples"][0]["held_by"] == [1]


def test_analyse_a_revoked_lost_killed_or_closed_member_holds_nothing():
    events = [
        ev(1, 1, "assign", p=[0]), ev(2, 1, "revoke", p=[0]), ev(3, 2, "assign", p=[0]),  # revoked first
        ev(4, 2, "lost", p=[0]), ev(5, 3, "assign", p=[0]),  # lost first
        ev(6, 3, "kill"), ev(7, 4, "assign", p=[0]),  # killed first
        ev(8, 4, "closed"), ev(9, 5, "assign", p=[0]),  # closed first
    ]
    r = analyse(events, 1, settle_at=10)
    assert r["overlaps"] == 0 and r["unowned_after_settle"] == 0 and r["doubly_owned_after_settle"] == 0


def test_analyse_orders_by_timestamp_not_by_arrival():
    # member 2's assign arrived first from its pipe, but happened after member 1's revoke
    r = analyse([ev(1, 1, "assign", p=[0]), ev(3, 2, "assign", p=[0]), ev(2, 1, "revoke", p=[0])], 1)
    assert r["overlaps"] == 0


def test_analyse_unowned_and_doubly_owned_at_settle():
    events = [ev(1, 1, "assign", p=[0, 1]), ev(2, 2, "assign", p=[1]), ev(3, 1, "revoke", p=[0]), ev(20, 1, "revoke", p=[1])]
    r = analyse(events, 3, settle_at=10)
    assert r["unowned_partitions"] == [0, 2] and r["doubly_owned_after_settle"] == 1


def test_analyse_backwards_commits_and_final_offsets():
    events = [
        ev(1, 1, "commit", p=0, o=10, err=None),
        ev(2, 1, "commit", p=0, o=7, err=None),  # backwards
        ev(3, 1, "commit", p=0, o=5, err="STALE_MEMBER_EPOCH"),  # failed: does not count
        ev(4, 2, "commit", p=1, o=20, err=None),
        ev(5, 2, "commit", p=2, o=30, err=None),
    ]
    r = analyse(events, 3, final_offsets={0: 7, 1: 19, 2: 31})
    assert r["commits_ok"] == 4 and r["commit_errors"] == {"STALE_MEMBER_EPOCH": 1}
    # 10 -> 7 in the reports, and partition 1 read back below its last successful commit
    assert r["backwards_commits"] == 2
    assert {b["partition"] for b in r["backwards_examples"]} == {0, 1}
    assert r["final_offsets_ahead_of_reports"] == 1  # partition 2: a commit the member did not live to report
