"""KIP-848 target assignment: the uniform assignor's incremental path agrees with a full run, in a live shard.

Random joins, leaves, acknowledgements, subscription changes and partition
additions drive one group through ``ConsumerHarness`` (whose invariant check
also rebuilds the group's ``TargetIndex`` from scratch after every operation).
Every time the coordinator takes the incremental path, the full assignor is run
on the same state and must give the same changes.
"""

from __future__ import annotations

import random

import pytest

from broker.coordinator.consumer import ConsumerGroups

from .test_coordinator_consumer import ConsumerHarness


@pytest.fixture
def loop():
    import asyncio

    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


@pytest.fixture
def compared(monkeypatch):
    """Counts (incremental runs, full fallbacks); every incremental run checked against the full assignor."""
    seen = {"incremental": 0, "full": 0}
    original = ConsumerGroups._target_changes

    def checked(self, group, meta):
        got = original(self, group, meta)
        if got is None:
            seen["full"] += 1
            return None
        seen["incremental"] += 1
        assert got == self._full_target(group, meta, "uniform")
        return got

    monkeypatch.setattr(ConsumerGroups, "_target_changes", checked)
    return seen


@pytest.mark.parametrize("seed", range(12))
def test_random_group_life_incremental_equals_full(loop, compared, seed):
    rng = random.Random(seed)
    h = ConsumerHarness(loop)
    h.topic("t", rng.choice([3, 8, 20]))
    h.topic("u", rng.choice([1, 5]))
    live: dict[str, int] = {}  # member -> epoch
    for step in range(150):
        r = rng.random()
        if r < 0.35 or not live:
            mid = f"m{step:03d}"
            topics = ("t",) if rng.random() < 0.97 else ("t", "u")
            resp = h.join(mid, topics=topics, assignor=rng.choice([None, None, None, "uniform"]))
            live[mid] = resp["member_epoch"]
        elif r < 0.5:
            mid = rng.choice(sorted(live))
            h.hb(mid, -1)
            del live[mid]
        elif r < 0.53:
            h.topic("t", len(h.topics["t"].partitions) + rng.randint(1, 3))
        elif r < 0.56:
            mid = rng.choice(sorted(live))
            resp = h.hb(mid, live[mid], topics=rng.choice([("t",), ("t",), ("t",), ("t", "u")]), owned=h.assigned(mid))
            if resp["error_code"] == 0:
                live[mid] = resp["member_epoch"]
        else:
            mid = rng.choice(sorted(live))
            resp = h.hb(mid, live[mid], owned=h.assigned(mid))
            if resp["error_code"] == 0:
                live[mid] = resp["member_epoch"]
            else:
                del live[mid]
    assert compared["incremental"] >= 5, compared  # heterogeneous stretches take the full path


def test_a_thousand_members_join_one_by_one_on_the_incremental_path(loop, compared):
    h = ConsumerHarness(loop)
    h.topic("t", 1000)
    for i in range(1000):
        h.join(f"m{i:04d}")
    assert compared == {"incremental": 1000, "full": 0}
    g = h.cgroup("cg")
    assert sorted(len(a[h.tid("t")]) for a in g.target.values()) == [1] * 1000
