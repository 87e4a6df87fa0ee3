"""The uniform assignor's incremental path gives exactly what the full homogeneous computation gives."""

from __future__ import annotations

import random

import pytest

from broker.coordinator.assignors.uniform import _assign_homogeneous, rebalance_homogeneous


def _incremental(members: list[str], topics: dict[str, int], current: dict[str, dict[str, frozenset[int]]]):
    names = sorted(topics)
    buckets: dict[int, set[str]] = {}
    claimed = set()
    for m in members:
        asg = current.get(m, {})
        buckets.setdefault(sum(len(v) for v in asg.values()), set()).add(m)
        claimed.update((t, p) for t, ps in asg.items() for p in ps)
    unclaimed = [(t, p) for t in names for p in range(topics[t]) if (t, p) not in claimed]
    changed = rebalance_homogeneous(names, topics, buckets, unclaimed, lambda m: current.get(m, {}))
    out = {m: {t: ps for t, ps in current.get(m, {}).items() if ps} for m in members}
    out.update(changed)
    return out, changed


def _clean(members, topics, rng, fill: float):
    """A current assignment claiming each partition at most once (some left free)."""
    current: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for t, count in topics.items():
        for p in range(count):
            if rng.random() < fill:
                current[rng.choice(members)].setdefault(t, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in asg.items()} for m, asg in current.items()}


@pytest.mark.parametrize("seed", range(300))
def test_random_clean_assignments_match_the_full_computation(seed):
    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(1, 40) for i in range(rng.randint(1, 3))}
    members = [f"m{rng.randrange(10**6):06d}" for _ in range(rng.randint(1, 30))]
    members = sorted(set(members))
    current = _clean(members, topics, rng, rng.choice([0.0, 0.5, 0.9, 1.0]))
    full = _assign_homogeneous(members, sorted(topics), topics, current)
    got, _ = _incremental(members, topics, current)
    assert {m: {t: ps for t, ps in a.items() if ps} for m, a in full.items()} == got


def test_joins_and_leaves_of_a_big_group_touch_few_members():
    rng = random.Random(7)
    topics = {"orders": 100}
    members: list[str] = []
    current: dict[str, dict[str, frozenset[int]]] = {}
    checked = 0
    for step in range(400):
        if members and rng.random() < 0.3:
            gone = rng.choice(members)
            members.remove(gone)
            current.pop(gone)
        else:
            members.append(f"m{step:04d}")
            members.sort()
        if not members:
            continue
        full = _assign_homogeneous(members, ["orders"], topics, current)
        got, changed = _incremental(members, topics, current)
        assert {m: {t: ps for t, ps in a.items() if ps} for m, a in full.items()} == got
        if step > 0 and len(members) >= 20:
            # one join or leave in a balanced group changes the members that give or take a share, not the group
            assert len(changed) <= 100 // len(members) + 2, (step, len(members), len(changed))
            checked += 1
        current = {m: got[m] for m in members}
    assert checked > 100
