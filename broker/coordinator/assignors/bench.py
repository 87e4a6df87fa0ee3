"""Timings for the server assignors: ``python -m broker.coordinator.assignors.bench``.

Each scenario is timed several times and the best run is printed, in ms (the
minimum is the least disturbed by whatever else the machine is doing).
"fresh" has no current assignment; "+1 join" feeds the fresh result back as
``current`` and adds one member; "steady" re-runs with the result as
``current`` and nothing changed (the common case of a heartbeat that bumped
the epoch for an unrelated reason).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from . import ASSIGNORS, GroupSpec, MemberSubscription

__all__ = ["run", "scenarios"]


def _members(n: int, topic_sets: Callable[[int], frozenset[str]]) -> dict[str, MemberSubscription]:
    return {f"member-{i:05d}": MemberSubscription(f"member-{i:05d}", topic_sets(i)) for i in range(n)}


def _time(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return min(samples)


def scenarios() -> list[tuple[str, int, dict[str, int], Callable[[int], frozenset[str]]]]:
    out = []
    for n in (100, 1000, 3000):
        out.append((f"{n} members x {n} partitions, 1 topic", n, {"t": n}, lambda _i: frozenset({"t"})))
    ten = {f"topic-{k}": 300 for k in range(10)}
    everything = frozenset(ten)
    for n in (100, 1000, 3000):
        out.append((f"{n} members, 10 topics x 300 (homogeneous)", n, ten, lambda _i, e=everything: e))
        # Each member subscribes to 5 of the 10 topics (a sliding window).
        out.append(
            (
                f"{n} members, 10 topics x 300 (heterogeneous)",
                n,
                ten,
                lambda i: frozenset(f"topic-{(i + k) % 10}" for k in range(5)),
            )
        )
    return out


def run(repeat: int = 7) -> list[tuple[str, str, float, float, float]]:
    rows = []
    for label, n, topics, topic_sets in scenarios():
        members = _members(n, topic_sets)
        joined = dict(members)
        joined["member-zzzzz"] = MemberSubscription("member-zzzzz", topic_sets(n))
        for name, assignor in ASSIGNORS.items():
            fresh_spec = GroupSpec(members, {})
            fresh = assignor.assign(fresh_spec, topics)
            join_spec = GroupSpec(joined, fresh)
            steady_spec = GroupSpec(members, fresh)
            t_fresh = _time(lambda a=assignor, s=fresh_spec, t=topics: a.assign(s, t), repeat)
            t_join = _time(lambda a=assignor, s=join_spec, t=topics: a.assign(s, t), repeat)
            t_steady = _time(lambda a=assignor, s=steady_spec, t=topics: a.assign(s, t), repeat)
            rows.append((label, name, t_fresh, t_join, t_steady))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"{'scenario':<46} {'assignor':<8} {'fresh':>9} {'+1 join':>9} {'steady':>9}   (ms, best of {args.repeat})")
    for label, name, t_fresh, t_join, t_steady in run(args.repeat):
        print(f"{label:<46} {name:<8} {t_fresh:>9.2f} {t_join:>9.2f} {t_steady:>9.2f}")


if __name__ == "__main__":
    main()
