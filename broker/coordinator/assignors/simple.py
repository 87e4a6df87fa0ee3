"""Kafka's ``simple`` share-group assignor (KIP-932), the only one ``group.share.assignors`` has.

Unlike the consumer assignors, several members may hold the same partition:
with M members and P assignable partitions, each partition is shared by
``ceil(M / P)`` members (``desired sharing``) and member ``i`` (in the order
Kafka's ``HashMap`` of member ids iterates) wants
``ceil(avg * (i + 1)) - ceil(avg * i)`` partitions, ``avg = sharing * P / M``.
The steps follow Kafka 4.4's SimpleHomogeneousAssignmentBuilder:

1. keep each member's previous target partitions of the topics it still
   subscribes to; members short of their count are *unfilled*,
   those above it *overfilled*;
2. take the surplus off overfilled members;
3. take holders off partitions shared by more than the desired sharing
   (those members become unfilled);
4. walk the partitions, handing each one still under its sharing to the next
   unfilled member that does not hold it (one round-robin over the unfilled
   members in index order), until every member is filled.

The collections are iterated in the order Kafka's Java ``HashMap``s and
``HashSet``s give (``broker/javahash.py``), so the result is Kafka's
partition for partition (``tests/unit/test_share_assignor.py`` runs Kafka's
own assignor on the same groups). Members subscribed to different topics
are assigned as Kafka's SimpleHeterogeneousAssignmentBuilder does: topic by
topic, each over the members subscribed to it, with the same steps.

Pure: ``assign`` takes the members' subscriptions (topic ids), the assignable
partitions per topic id, and the previous target; it returns the new target.
"""

from __future__ import annotations

import math
import struct
import uuid

from broker.javahash import JavaHashTable, java_string_hash

NAME = "simple"

Assignment = dict[uuid.UUID, frozenset[int]]


def member_order(member_ids) -> list[str]:
    """The order a ``java.util.HashMap<String, ...>`` (default capacity) iterates ``member_ids``."""
    table = JavaHashTable()
    for mid in member_ids:
        table.put(mid, java_string_hash(mid))
    return table.keys()


def _desired_counts(members: int, partitions: int) -> tuple[int, list[int]]:
    """(members per partition, partitions per member index), as Kafka's builder computes them."""
    if partitions == 0:
        return 0, [0] * members
    sharing = (members + partitions - 1) // partitions
    avg = sharing * partitions / members
    return sharing, [math.ceil(avg * (i + 1)) - math.ceil(avg * i) for i in range(members)]


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def uuid_hash(u: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode()``: the two halves of ``msb ^ lsb`` xored."""
    h = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    return _int32((h >> 32) ^ h)


def _tp_hash(tp: tuple[uuid.UUID, int]) -> int:
    """``TopicIdPartition.hashCode()`` (a record: ``31 * topicId.hashCode() + partition``)."""
    return _int32(31 * uuid_hash(tp[0]) + tp[1])


def _sized_capacity(n: int) -> int:
    """``AssignorHelpers.newHashMap(n)``: ``new HashMap<>((int) ((n + 1) / 0.75f + 1))``, in float32."""
    f32 = struct.Struct(">f")
    q = f32.unpack(f32.pack(f32.unpack(f32.pack(n + 1))[0] / f32.unpack(f32.pack(0.75))[0]))[0]
    return int(f32.unpack(f32.pack(q + 1.0))[0])


class _JavaSet:
    """A ``java.util.HashSet``'s iteration order, with removal (and a set for lookups)."""

    __slots__ = ("table", "hash", "keys")

    def __init__(self, hash_fn, capacity: int | None = None) -> None:
        self.table = JavaHashTable(capacity)
        self.hash = hash_fn
        self.keys: set = set()

    def add(self, key) -> bool:
        if key in self.keys:
            return False
        self.keys.add(key)
        return self.table.put(key, self.hash(key))

    def add_absent(self, key) -> bool:
        """``computeIfAbsent`` into a map (the key goes to the head of its chain)."""
        if key in self.keys:
            return False
        self.keys.add(key)
        return self.table.compute_if_absent(key, self.hash(key))

    def discard(self, key) -> bool:
        if key not in self.keys:
            return False
        self.keys.discard(key)
        return self.table.remove(key, self.hash(key))

    def __contains__(self, key) -> bool:
        return key in self.keys

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self):
        return iter(self.table.keys())


def _int_hash(i: int) -> int:
    return i


def _revoke_overshared(part_order: _JavaSet, by_part: dict, sharing: int, take_back) -> None:
    """Kafka's revokeOversharedPartitions: holders come off a partition shared by too many, first
    holders first; ``take_back(member, partition)`` removes it from the member (False: it had not)."""
    for part in list(part_order):
        holders = by_part[part]
        count = len(holders)
        if count <= sharing:
            continue
        for i in list(holders):
            if take_back(i, part):
                count -= 1
                holders.discard(i)
                if count <= sharing:
                    break


def _assign_remaining(part_order: _JavaSet, by_part: dict, sharing: int, unfilled: set, give, filled) -> None:
    """Kafka's assignRemainingPartitions: one iterator over the unfilled members (index order),
    restarted while it still assigns, hands each partition under its sharing to members that do not
    hold it; the partitions' holder sets are not updated (as in Kafka)."""
    if not unfilled:
        return
    order, pos, assigned = sorted(unfilled), 0, False
    for part in list(part_order):
        holders = by_part[part]
        need = sharing - len(holders)
        while need > 0:
            while pos < len(order) and order[pos] not in unfilled:
                pos += 1
            if pos >= len(order):
                if not assigned:
                    break
                order, pos, assigned = sorted(unfilled), 0, False
                continue
            i = order[pos]
            pos += 1
            if i in holders:
                continue
            give(i, part)
            need -= 1
            assigned = True
            if filled(i):
                unfilled.discard(i)
        if not unfilled:
            return


def _assign_topics(ids: list[str], targets: list[tuple[uuid.UUID, int]], previous: dict[str, Assignment],
                   subscribed: frozenset[uuid.UUID]) -> dict[str, set]:
    """Kafka's SimpleHomogeneousAssignmentBuilder over members ``ids`` (in its member order) and the
    assignable partitions ``targets``, with its hash collections' iteration orders."""
    n = len(ids)
    sharing, desired = _desired_counts(n, len(targets))
    by_part: dict = {}  # partition -> its holders (a HashSet of member indexes)
    part_order = _JavaSet(_tp_hash, _sized_capacity(len(targets)))  # finalAssignmentByPartition's keys
    by_member: list[_JavaSet] = [_JavaSet(_tp_hash) for _ in range(n)]
    unfilled: set[int] = set()  # HashSets of indexes below their capacity: numeric order
    overfilled: list[int] = []

    def holders_of(tp) -> _JavaSet:
        if part_order.add_absent(tp):
            by_part[tp] = _JavaSet(_int_hash)
        return by_part[tp]

    # revokeUnassignablePartitions: keep what the member had of the topics it subscribes to
    for i, mid in enumerate(ids):
        old = previous.get(mid, {})
        for tid in member_topic_order(old):
            if tid not in subscribed:
                continue
            for p in sorted(old[tid]):
                tp = (tid, p)
                holders_of(tp).add(i)
                by_member[i].add(tp)
        if len(by_member[i]) < desired[i]:
            unfilled.add(i)
        elif len(by_member[i]) > desired[i]:
            overfilled.append(i)
    # revokeOverfilledMembers
    for i in overfilled:
        for tp in list(by_member[i]):
            if len(by_member[i]) <= desired[i]:
                break
            by_member[i].discard(tp)
            by_part[tp].discard(i)
    def take_back(i: int, tp) -> bool:
        if tp not in by_member[i]:
            return False
        by_member[i].discard(tp)
        unfilled.add(i)
        return True

    _revoke_overshared(part_order, by_part, sharing, take_back)
    for tp in targets:
        holders_of(tp)
    _assign_remaining(part_order, by_part, sharing, unfilled, lambda i, tp: by_member[i].add(tp),
                      lambda i: len(by_member[i]) >= desired[i])
    return {ids[i]: set(by_member[i]) for i in range(n)}


def _assign_one_topic(tid: uuid.UUID, members: list[int], targets: list[int], n_members: int, old: list[Assignment],
                      new: list[dict], union: frozenset[uuid.UUID]) -> None:
    """Kafka's SimpleHeterogeneousAssignmentBuilder.TopicAssignmentPartialBuilder: topic ``tid`` over
    the indexes ``members`` subscribed to it; ``new`` (index -> {topic: set}) is updated in place."""
    n = len(members)
    sharing = 0 if not targets else (n + len(targets) - 1) // len(targets)
    counts = [0] * n_members
    if n:
        avg = sharing * len(targets) / n
        for k, i in enumerate(members):
            counts[i] = math.ceil(avg * (k + 1)) - math.ceil(avg * k)
    part_order = _JavaSet(_int_hash, _sized_capacity(len(targets)))  # finalAssignmentByPartition
    by_part: dict[int, _JavaSet] = {}
    member_order_ = _JavaSet(_int_hash, _sized_capacity(n))  # finalAssignmentByMember's keys
    by_member: dict[int, _JavaSet] = {}

    def holders_of(p: int, capacity: int | None = None) -> _JavaSet:
        if part_order.add_absent(p):
            by_part[p] = _JavaSet(_int_hash, capacity)
        return by_part[p]

    def parts_of(i: int) -> _JavaSet:
        if member_order_.add_absent(i):
            by_member[i] = _JavaSet(_int_hash)
        return by_member[i]

    for i in range(n_members):  # revokeUnassignablePartitions
        parts = old[i].get(tid)
        if not parts:
            continue
        if tid in union:
            for p in sorted(parts):
                holders_of(p).add(i)
                parts_of(i).add(p)
        else:
            new[i].pop(tid, None)
    for i in list(member_order_):  # revokeOverfilledMembers
        held = by_member[i]
        for p in list(held):
            if len(held) <= counts[i]:
                break
            by_part[p].discard(i)
            held.discard(p)
            new[i].get(tid, set()).discard(p)
    def take_back(i: int, p: int) -> bool:
        if p not in new[i].get(tid, ()):
            return False
        new[i][tid].discard(p)
        by_member[i].discard(p)
        return True

    def give(i: int, p: int) -> None:
        new[i].setdefault(tid, set()).add(p)
        parts_of(i).add(p)

    _revoke_overshared(part_order, by_part, sharing, take_back)
    for p in targets:
        holders_of(p, _sized_capacity(n))
    unfilled = {i for i in members if len(by_member.get(i, ())) < counts[i]}
    _assign_remaining(part_order, by_part, sharing, unfilled, give, lambda i: len(by_member[i]) >= counts[i])


def _assign_heterogeneous(ids: list[str], subscriptions: dict[str, frozenset[uuid.UUID]], partitions: dict,
                          previous: dict[str, Assignment]) -> dict[str, dict]:
    """Kafka's SimpleHeterogeneousAssignmentBuilder: each subscribed topic over its subscribers."""
    old = [previous.get(mid, {}) for mid in ids]
    new = [{tid: set(ps) for tid, ps in asg.items()} for asg in old]
    union = frozenset(t for mid in ids for t in subscriptions[mid])
    for tid in sorted(union, key=str):  # each topic's builder touches that topic only: any order
        parts = partitions.get(tid)
        targets = [] if parts is None else list(range(parts)) if isinstance(parts, int) else sorted(parts)
        members = [i for i, mid in enumerate(ids) if tid in subscriptions[mid]]
        _assign_one_topic(tid, members, targets, len(ids), old, new, union)
    return {mid: new[i] for i, mid in enumerate(ids)}


def member_topic_order(assignment: Assignment) -> list[uuid.UUID]:
    """The topics of a member's assignment as a ``HashMap<Uuid, ...>`` (default capacity) iterates them."""
    table = _JavaSet(uuid_hash)
    for tid in sorted(assignment, key=str):
        table.add(tid)
    return list(table)


def assign(subscriptions: dict[str, frozenset[uuid.UUID]], partitions: dict[uuid.UUID, int | frozenset[int]],
           previous: dict[str, Assignment], *, homogeneous: bool | None = None) -> dict[str, Assignment]:
    """The new target: member id -> {topic id: partitions} (every member listed, maybe empty).

    ``subscriptions``: member id -> subscribed topic ids (the topics that exist);
    ``partitions``: topic id -> its assignable partitions (a count: all of them); a subscribed topic
    without any has nothing to hand out. ``homogeneous``: whether every member subscribes to the
    same topic names (Kafka's SubscriptionType); by default, whether the topic ids are the same."""
    ids = member_order(subscriptions)
    if not ids:
        return {}
    if homogeneous is None:
        homogeneous = len({subscriptions[mid] for mid in ids}) == 1
    if homogeneous:
        subscribed = subscriptions[ids[0]]
        if not subscribed:
            return {mid: {} for mid in ids}
        targets = []
        for tid in sorted(subscribed, key=str):
            parts = partitions.get(tid)
            if parts is not None:
                targets += [(tid, p) for p in (range(parts) if isinstance(parts, int) else sorted(parts))]
        out: dict[str, dict] = {mid: {} for mid in ids}
        for mid, tps in _assign_topics(ids, targets, previous, subscribed).items():
            for tid, p in tps:
                out[mid].setdefault(tid, set()).add(p)
    else:
        out = _assign_heterogeneous(ids, subscriptions, partitions, previous)
    return {mid: {tid: frozenset(ps) for tid, ps in asg.items() if ps} for mid, asg in out.items()}
