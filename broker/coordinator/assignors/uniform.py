"""The ``uniform`` server assignor: balanced first, sticky second.

Two builders, picked by whether every member subscribes to the same set of
(existing) topics, as in Kafka's ``UniformAssignor``.

Homogeneous (``_assign_homogeneous``)
    With ``S`` partitions and ``N`` members every member's quota is
    ``S // N``, and ``S % N`` members get one more. The extra slots go first to
    members that already hold more than ``S // N`` partitions, so the number of
    partitions taken away from a live member is the minimum any balanced
    assignment needs. (Kafka hands the extra slots out in hash-map order, which
    can revoke a partition from one member only to give another member a new
    one; the result is equally balanced but moves more.) Members over quota
    give up partitions from the topic they hold most of, highest partition
    number first. Free partitions (new, orphaned or revoked) are dealt round
    robin, in topic-name/partition order, to the members under quota in
    member-id order.

    Guarantees: every partition of the subscribed topics exactly once, sizes
    within one of each other, and -- when ``current`` is itself balanced --
    one member joining moves at most ``ceil(S / (N + 1))`` partitions (all to
    the newcomer) and one member leaving moves only that member's partitions.

Heterogeneous (``_assign_heterogeneous``)
    Keep every currently owned partition the owner still subscribes to; give
    each free partition to the least-loaded subscriber of its topic, handling
    the most constrained topics (most partitions per subscriber) first; then
    repeatedly move partitions of a topic from its most-loaded owning
    subscriber to its least-loaded subscriber while their totals differ by two
    or more. Each move lowers the sum of squared loads, so this terminates; it
    runs to a fixed point (Kafka caps it at 16 rounds).

    Guarantees: every partition of a subscribed topic exactly once and only to
    a subscriber of it, and the result is *locally balanced*: for every topic
    ``t`` and subscribers ``a``, ``b`` of ``t``, if ``b`` holds at least two
    partitions more than ``a`` (counting all topics) then ``b`` holds no
    partition of ``t``. Feeding the result back as ``current`` returns it
    unchanged.

Members, topics and partitions are processed in sorted order, so the output
depends only on the input's contents, never on dict or set iteration order.
Racks are ignored (Kafka's 4.x uniform assignor is not rack aware either).
"""

from __future__ import annotations

import heapq
import itertools

from .spec import Assignment, GroupSpec, TopicPartitions, effective_subscriptions

__all__ = ["UniformAssignor"]


class UniformAssignor:
    name = "uniform"

    def assign(self, group: GroupSpec, topics: TopicPartitions) -> Assignment:
        if not group.members:
            return {}
        subs = effective_subscriptions(group, topics)
        member_ids = sorted(subs)
        first = subs[member_ids[0]]
        if all(subs[m] == first for m in member_ids):
            if not first:
                return {m: {} for m in member_ids}
            return _assign_homogeneous(member_ids, sorted(first), topics, group.current)
        return _assign_heterogeneous(member_ids, subs, topics, group.current)

    def __repr__(self) -> str:
        return "UniformAssignor()"


# --------------------------------------------------------------------------
# Homogeneous
# --------------------------------------------------------------------------


def _assign_homogeneous(
    member_ids: list[str],
    topic_names: list[str],
    topics: TopicPartitions,
    current: dict[str, dict[str, frozenset[int]]],
) -> Assignment:
    n = len(member_ids)
    # Claimed flags per topic; 1 = owned by some member in the new assignment.
    claimed: dict[str, bytearray] = {t: bytearray(topics[t]) for t in topic_names}
    total = sum(topics[t] for t in topic_names)
    min_quota, extra = divmod(total, n)

    # 1. Retain what each member holds of the subscribed topics. ``kept[i]``
    #    maps topic -> the original frozenset (untouched) or a list (filtered).
    kept: list[dict[str, frozenset[int] | list[int]]] = []
    have = [0] * n
    empty: dict[str, frozenset[int]] = {}
    for i, member_id in enumerate(member_ids):
        mine: dict[str, frozenset[int] | list[int]] = {}
        count = 0
        for t, parts in current.get(member_id, empty).items():
            flags = claimed.get(t)
            if flags is None or not parts:
                continue
            size = len(flags)
            ok = [p for p in parts if 0 <= p < size and not flags[p]]
            if not ok:
                continue
            for p in ok:
                flags[p] = 1
            mine[t] = parts if len(ok) == len(parts) else ok
            count += len(ok)
        kept.append(mine)
        have[i] = count

    # 2. Quotas. Extra slots go to members already above the minimum, then to
    #    members exactly at it, then to the rest, each group in member order.
    quota = [min_quota] * n
    if extra:
        above = [i for i in range(n) if have[i] > min_quota]
        at = [i for i in range(n) if have[i] == min_quota]
        below = [i for i in range(n) if have[i] < min_quota]
        for i in (above + at + below)[:extra]:
            quota[i] = min_quota + 1

    # 3. Revoke the excess of members above quota.
    for i in range(n):
        excess = have[i] - quota[i]
        if excess > 0:
            for t, p in _revoke(kept[i], excess):
                claimed[t][p] = 0
            have[i] = quota[i]

    # 4. Deal the free partitions round robin to members under quota.
    needy = [(i, quota[i] - have[i]) for i in range(n) if have[i] < quota[i]]
    added = _deal(needy, _free_partitions(topic_names, claimed)) if needy else {}

    # 5. Build the result, reusing untouched frozensets.
    return {member_id: _merge(kept[i], added.get(i)) for i, member_id in enumerate(member_ids)}


def _deal(needy: list, free: list) -> dict:
    """Free partitions, round robin, one layer at a time, to ``needy`` = [(key, how many)] in order: {key: {topic: [partitions]}}."""
    added: dict = {}
    pos = 0
    layer = 0
    while needy:
        for key, _need in needy:
            t, p = free[pos]
            pos += 1
            per_topic = added.get(key)
            if per_topic is None:
                per_topic = added[key] = {}
            lst = per_topic.get(t)
            if lst is None:
                per_topic[t] = [p]
            else:
                lst.append(p)
        layer += 1
        needy = [x for x in needy if x[1] > layer]
    assert pos == len(free), "free partitions left over"
    return added


def _merge(mine: dict, more: dict | None) -> dict[str, frozenset[int]]:
    """One member's kept partitions plus what it was dealt, as frozensets."""
    out: dict[str, frozenset[int]] = {}
    for t, parts in mine.items():
        if more is not None and t in more:
            out[t] = frozenset(parts).union(more.pop(t))
        elif parts:
            out[t] = parts if type(parts) is frozenset else frozenset(parts)
    if more:
        for t, lst in more.items():
            out[t] = frozenset(lst)
    return out


def _revoke(mine: dict[str, frozenset[int] | list[int]], excess: int) -> list[tuple[str, int]]:
    """Drop ``excess`` partitions from one member's kept partitions, in place; returns them.

    Takes from the topic the member holds most of (ties: the later topic name),
    highest partition number first.
    """
    dropped = []
    lists = {t: sorted(parts) for t, parts in mine.items()}
    heap = [(-len(lists[t]), -rank, t) for rank, t in enumerate(sorted(lists))]
    heapq.heapify(heap)
    while excess:
        neg_len, key, t = heap[0]
        dropped.append((t, lists[t].pop()))
        excess -= 1
        heapq.heapreplace(heap, (neg_len + 1, key, t))
    for t, lst in lists.items():
        if lst:
            mine[t] = lst
        else:
            del mine[t]
    return dropped


def _free_partitions(topic_names: list[str], claimed: dict[str, bytearray]) -> list[tuple[str, int]]:
    free: list[tuple[str, int]] = []
    for t in topic_names:
        flags = claimed[t]
        p = flags.find(0)
        while p != -1:
            free.append((t, p))
            p = flags.find(0, p + 1)
    return free


# --------------------------------------------------------------------------
# Heterogeneous
# --------------------------------------------------------------------------


def _assign_heterogeneous(
    member_ids: list[str],
    subs: dict[str, frozenset[str]],
    topics: TopicPartitions,
    current: dict[str, dict[str, frozenset[int]]],
) -> Assignment:
    n = len(member_ids)
    subscribers: dict[str, list[int]] = {}
    for i, member_id in enumerate(member_ids):
        for t in subs[member_id]:
            lst = subscribers.get(t)
            if lst is None:
                subscribers[t] = [i]
            else:
                lst.append(i)
    # Most constrained first: partitions per subscriber descending, then
    # fewer subscribers first, then name (Kafka's order, with names for ids).
    from fractions import Fraction  # here, not at the top: a start needs no assignor (and fractions imports decimal)

    order = sorted(subscribers, key=lambda t: (-Fraction(topics[t], len(subscribers[t])), len(subscribers[t]), t))

    owner: dict[str, list[int]] = {t: [-1] * topics[t] for t in order}
    load = [0] * n

    # 1. Retain partitions of topics the owner still subscribes to.
    empty: dict[str, frozenset[int]] = {}
    for i, member_id in enumerate(member_ids):
        mine = subs[member_id]
        for t, parts in current.get(member_id, empty).items():
            if t not in mine:
                continue
            own = owner[t]
            size = len(own)
            for p in parts:
                if 0 <= p < size and own[p] == -1:
                    own[p] = i
                    load[i] += 1

    # 2. Free partitions to the least-loaded subscriber, topic by topic.
    for t in order:
        own = owner[t]
        free = [p for p in range(len(own)) if own[p] == -1]
        if not free:
            continue
        heap = [(load[i], i) for i in subscribers[t]]
        heapq.heapify(heap)
        for p in free:
            lo, i = heap[0]
            own[p] = i
            load[i] = lo + 1
            heapq.heapreplace(heap, (lo + 1, i))

    # 3. Balance to a fixed point: cycle through the topics until every one
    #    of them has been looked at since the last move. A topic that moved
    #    partitions is itself at its fixed point afterwards.
    movable = [t for t in order if len(subscribers[t]) >= 2]
    checked = 0
    idx = 0
    while checked < len(movable):
        t = movable[idx]
        checked = 1 if _balance_topic(owner[t], subscribers[t], load) else checked + 1
        idx = (idx + 1) % len(movable)

    # 4. Build the result.
    per_member: list[dict[str, list[int]]] = [{} for _ in range(n)]
    for t in order:
        for p, i in enumerate(owner[t]):
            d = per_member[i]
            lst = d.get(t)
            if lst is None:
                d[t] = [p]
            else:
                lst.append(p)
    result: Assignment = {}
    for i, member_id in enumerate(member_ids):
        prev = current.get(member_id, empty)
        out: dict[str, frozenset[int]] = {}
        for t, lst in per_member[i].items():
            old = prev.get(t)
            if type(old) is frozenset and len(old) == len(lst) and old.issuperset(lst):
                out[t] = old
            else:
                out[t] = frozenset(lst)
        result[member_id] = out
    return result


def _balance_topic(own: list[int], members: list[int], load: list[int]) -> int:
    """Move partitions of one topic from heavily to lightly loaded subscribers.

    Stops when the most-loaded subscriber still owning a partition of the topic
    is within one of the least-loaded subscriber. Returns the number moved.
    """
    lo = min(load[i] for i in members)
    hi = max(load[i] for i in members)
    if hi - lo <= 1:
        return 0
    owned: dict[int, list[int]] = {i: [] for i in members}
    for p, i in enumerate(own):
        owned[i].append(p)
    receivers = [(load[i], i) for i in members]
    donors = [(-load[i], i) for i in members if owned[i]]
    heapq.heapify(receivers)
    heapq.heapify(donors)
    moved = 0
    while donors and receivers:
        neg, d = donors[0]
        if -neg != load[d] or not owned[d]:
            heapq.heappop(donors)  # stale entry
            continue
        low, a = receivers[0]
        if low != load[a]:
            heapq.heappop(receivers)  # stale entry
            continue
        if load[d] - low <= 1:
            break
        p = owned[d].pop()
        owned[a].append(p)
        own[p] = a
        load[d] -= 1
        load[a] += 1
        moved += 1
        heapq.heappush(receivers, (load[a], a))
        heapq.heappush(receivers, (load[d], d))
        heapq.heappush(donors, (-load[a], a))
        if owned[d]:
            heapq.heappush(donors, (-load[d], d))
    return moved


# --------------------------------------------------------------------------
# Homogeneous, from what changed
# --------------------------------------------------------------------------


def rebalance_homogeneous(
    topic_names: list[str],
    topics: TopicPartitions,
    buckets: dict[int, set[str] | frozenset[str]],
    unclaimed: list[tuple[str, int]],
    current_of,
) -> Assignment:
    """``_assign_homogeneous`` for a current assignment that is already clean, touching only the members that change.

    ``buckets`` maps a partition count to the members whose current assignment holds that many
    (every member once, those holding nothing under 0); ``unclaimed`` lists the subscribed
    partitions nobody holds; ``current_of(member)`` is a member's current assignment. The current
    assignment must claim each partition at most once and only partitions of ``topic_names``.
    Returns only the members whose assignment changes, with their new assignment: exactly what
    ``_assign_homogeneous`` returns for them (it returns the others unchanged). Apart from a few
    passes over the members above the minimum quota (in C, or one comparison each) the work grows
    with the members that change and the partitions that move, not with the group.
    """
    n = sum(len(ms) for ms in buckets.values())
    if not n:
        return {}
    total = sum(topics[t] for t in topic_names)
    min_quota, extra = divmod(total, n)
    high = sorted(c for c in buckets if c > min_quota)
    n_above = sum(len(buckets[c]) for c in high)
    # Quotas: the extra slots go to the members above the minimum in id order, then to those at it,
    # then to those below it (as _assign_homogeneous). Only the exceptions are listed.
    minus: set[str] = set()  # above the minimum but without an extra slot: down to min_quota
    plus_at: list[str] = []  # at the minimum with an extra slot: one more
    plus_below: set[str] = set()  # below the minimum with an extra slot
    if extra < n_above:
        k = n_above - extra  # the last k of the above members, in id order
        above = itertools.chain.from_iterable(buckets[c] for c in high)
        minus = {max(above)} if k == 1 else set(heapq.nlargest(k, above))  # one member joined: one gives way
    elif extra > n_above:
        k = extra - n_above
        at = buckets.get(min_quota, ())
        plus_at = list(at) if k >= len(at) else heapq.nsmallest(k, at)
        if k > len(at):
            below = sorted(m for c, ms in buckets.items() if c < min_quota for m in ms)
            plus_below = set(below[: k - len(at)])

    changed: Assignment = {}
    free = list(unclaimed)
    for c in high:
        over = c - min_quota - 1
        for m in buckets[c] if over > 0 else minus.intersection(buckets[c]):
            excess = over + (m in minus)
            mine = dict(current_of(m))
            free.extend(_revoke(mine, excess))
            changed[m] = mine
    needy = [(m, min_quota + (m in plus_below) - c) for c, ms in buckets.items() if c < min_quota for m in ms]
    needy.extend((m, 1) for m in plus_at)
    needy.sort()
    if all(a < b for a, b in itertools.pairwise(topic_names)):
        free.sort()  # (topic, partition) pairs: topic name order is rank order
    else:
        rank = {t: i for i, t in enumerate(topic_names)}
        free.sort(key=lambda tp: (rank[tp[0]], tp[1]))
    added = _deal(needy, free) if needy else {}
    for m, mine in changed.items():
        changed[m] = _merge(mine, None)
    for m, more in added.items():
        changed[m] = _merge(dict(current_of(m)), more)
    return changed
