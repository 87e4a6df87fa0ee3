"""Kafka's ``simple`` share-group assignor (KIP-932), the only one ``group.share.assignors`` has.

Unlike the consumer assignors, several members may hold the same partition:
with M members and P assignable partitions, each partition is shared by
``ceil(M / P)`` members (``desired sharing``) and member ``i`` (in the order
Kafka's ``HashMap`` of member ids iterates) wants
``ceil(avg * (i + 1)) - ceil(avg * i)`` partitions, ``avg = sharing * P / M``.
The steps follow Kafka 4.4's SimpleHomogeneousAssignmentBuilder:

1. keep each member's previous target partitions that are still assignable
   in a topic it subscribes to; members short of their count are *unfilled*,
   those above it *overfilled*;
2. take the surplus off overfilled members;
3. take holders off partitions shared by more than the desired sharing
   (those members become unfilled);
4. walk the partitions, handing each one still under its sharing to the next
   unfilled member that does not hold it (one round-robin over the unfilled
   members in index order), until every member is filled.

Members subscribed to different topics (Kafka's heterogeneous builder) are
assigned topic by topic, each topic over the members subscribed to it: the
same counts for one topic, not Kafka's balancing across topics.

Pure: ``assign`` takes the members' subscriptions (topic ids), the assignable
partitions per topic id, and the previous target; it returns the new target.
"""

from __future__ import annotations

import math
import uuid

from broker.coordinator.placement import java_string_hash
from broker.txn.javahash import JavaHashTable

NAME = "simple"

Assignment = dict[uuid.UUID, frozenset[int]]


def member_order(member_ids) -> list[str]:
    """The order a ``java.util.HashMap<String, ...>`` (default capacity) iterates ``member_ids``."""
    table = JavaHashTable()
    for mid in member_ids:
        table.put(mid, java_string_hash(mid))
    return table.keys()


def _desired_counts(members: int, partitions: int) -> tuple[int, list[int]]:
    if partitions == 0:
        return 0, [0] * members
    sharing = (members + partitions - 1) // partitions
    avg = sharing * partitions / members
    return sharing, [math.ceil(avg * (i + 1)) - math.ceil(avg * i) for i in range(members)]


def _assign_topics(ids: list[str], targets: list[tuple[uuid.UUID, int]], previous: dict[str, Assignment]) -> dict[str, set]:
    """The homogeneous builder over members ``ids`` (in order) and partitions ``targets``."""
    n = len(ids)
    sharing, desired = _desired_counts(n, len(targets))
    assignable = set(targets)
    by_part: dict[tuple, list[int]] = {}
    by_member: list[set] = [set() for _ in range(n)]
    unfilled: set[int] = set()
    overfilled: list[int] = []
    for i, mid in enumerate(ids):
        for tid, parts in previous.get(mid, {}).items():
            for p in sorted(parts):
                tp = (tid, p)
                if tp in assignable:
                    by_part.setdefault(tp, []).append(i)
                    by_member[i].add(tp)
        if len(by_member[i]) < desired[i]:
            unfilled.add(i)
        elif len(by_member[i]) > desired[i]:
            overfilled.append(i)
    for i in overfilled:
        for tp in sorted(by_member[i], key=lambda tp: (str(tp[0]), tp[1]), reverse=True):
            if len(by_member[i]) <= desired[i]:
                break
            by_member[i].discard(tp)
            by_part[tp].remove(i)
    for tp, holders in by_part.items():
        while len(holders) > sharing:
            i = holders.pop()
            by_member[i].discard(tp)
            unfilled.add(i)
    for tp in targets:
        by_part.setdefault(tp, [])
    # one iterator over the unfilled members runs on across the partitions, restarting when it
    # reaches the end; a member leaves it once it holds its count
    order, pos = sorted(unfilled), 0
    while unfilled:
        progress = False
        for tp, holders in by_part.items():
            need, skipped = sharing - len(holders), 0
            while need > 0 and unfilled and skipped <= len(unfilled):
                if pos >= len(order):
                    order, pos = sorted(unfilled), 0
                i = order[pos]
                pos += 1
                if i not in unfilled:
                    continue
                if i in holders:
                    skipped += 1
                    continue
                holders.append(i)
                by_member[i].add(tp)
                need -= 1
                progress = True
                if len(by_member[i]) >= desired[i]:
                    unfilled.discard(i)
            if not unfilled:
                break
        if not progress:
            break
    return {ids[i]: by_member[i] for i in range(n)}


def assign(subscriptions: dict[str, frozenset[uuid.UUID]], partitions: dict[uuid.UUID, int | frozenset[int]],
           previous: dict[str, Assignment]) -> dict[str, Assignment]:
    """The new target: member id -> {topic id: partitions} (every member listed, maybe empty).

    ``subscriptions``: member id -> subscribed topic ids (only topics that exist);
    ``partitions``: topic id -> its assignable partitions (a count: all of them)."""
    ids = member_order(subscriptions)
    out: dict[str, dict] = {mid: {} for mid in ids}
    if not ids:
        return {}

    def targets_of(tids) -> list[tuple[uuid.UUID, int]]:
        tps = []
        for tid in sorted(tids, key=str):
            parts = partitions.get(tid)
            if parts is None:
                continue
            tps += [(tid, p) for p in (range(parts) if isinstance(parts, int) else sorted(parts))]
        return tps

    groups: list[tuple[list[str], list]] = []
    distinct = {subscriptions[mid] for mid in ids}
    if len(distinct) == 1:
        groups.append((ids, targets_of(next(iter(distinct)))))
    else:
        for tid in sorted({t for s in distinct for t in s}, key=str):
            groups.append(([mid for mid in ids if tid in subscriptions[mid]], targets_of([tid])))
    for members, targets in groups:
        if not members or not targets:
            continue
        for mid, tps in _assign_topics(members, targets, previous).items():
            for tid, p in tps:
                out[mid].setdefault(tid, set()).add(p)
    return {mid: {tid: frozenset(ps) for tid, ps in asg.items()} for mid, asg in out.items()}
