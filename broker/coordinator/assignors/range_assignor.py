"""The ``range`` server assignor (Kafka 4.x ``RangeAssignor`` semantics).

For each topic, its subscribers are ranked -- static members (with an
instance id) first, by instance id; then dynamic members by member id -- and
the partitions are cut into contiguous ranges in that order: with ``P``
partitions and ``N`` subscribers everyone gets ``P // N`` and the first
``P % N`` get one more (so with ``N > P`` the last ``N - P`` get nothing).

Consequences:

* co-partitioning: two topics with the same subscribers and the same
  partition count give every member the same partition numbers of both;
* the result depends only on membership, subscriptions and partition counts.
  ``GroupSpec.current`` is ignored: like Kafka since KAFKA-16944 (3.9/4.x),
  the assignment is recomputed from scratch, because stickiness and
  co-partitioning cannot both be kept in general. A dynamic member joining
  can therefore move up to about all partitions; static members keep their
  ranges across restarts (a new member id with the same instance id) as long
  as membership, subscriptions and partition counts stay the same.
"""

from __future__ import annotations

from .spec import Assignment, GroupSpec, TopicPartitions, effective_subscriptions

__all__ = ["RangeAssignor", "range_order"]


def range_order(group: GroupSpec) -> list[str]:
    """Member ids in the order ranges are handed out."""
    members = group.members
    static = sorted((sub.instance_id, m) for m, sub in members.items() if sub.instance_id is not None)
    dynamic = sorted(m for m, sub in members.items() if sub.instance_id is None)
    return [m for _, m in static] + dynamic


class RangeAssignor:
    name = "range"

    def assign(self, group: GroupSpec, topics: TopicPartitions) -> Assignment:
        if not group.members:
            return {}
        subs = effective_subscriptions(group, topics)
        ordered = range_order(group)
        result: Assignment = {m: {} for m in ordered}

        first = subs[ordered[0]]
        if all(subs[m] == first for m in ordered):
            # Homogeneous: one set of cut points per distinct partition count.
            n = len(ordered)
            cuts: dict[int, list[frozenset[int]]] = {}
            for t in sorted(first):
                count = topics[t]
                ranges = cuts.get(count)
                if ranges is None:
                    ranges = cuts[count] = _ranges(count, n)
                for m, parts in zip(ordered, ranges, strict=True):
                    if parts:
                        result[m][t] = parts
            return result

        subscribers: dict[str, list[str]] = {}
        for m in ordered:
            for t in subs[m]:
                lst = subscribers.get(t)
                if lst is None:
                    subscribers[t] = [m]
                else:
                    lst.append(m)
        for t in sorted(subscribers):
            members = subscribers[t]
            for m, parts in zip(members, _ranges(topics[t], len(members)), strict=True):
                if parts:
                    result[m][t] = parts
        return result

    def __repr__(self) -> str:
        return "RangeAssignor()"


_EMPTY: frozenset[int] = frozenset()


def _ranges(partitions: int, members: int) -> list[frozenset[int]]:
    base, extra = divmod(partitions, members)
    out: list[frozenset[int]] = []
    start = 0
    for k in range(members):
        end = start + base + (1 if k < extra else 0)
        out.append(frozenset(range(start, end)) if end > start else _EMPTY)
        start = end
    return out
