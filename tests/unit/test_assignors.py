"""Server-side (KIP-848) assignors: ``uniform`` and ``range``."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinator.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    GroupSpec,
    MemberSubscription,
    UnsupportedAssignor,
    choose_assignor,
    get_assignor,
    validate_assignor,
)
from broker.coordinator.assignors.range_assignor import range_order
from broker.coordinator.assignors.uniform import _assign_heterogeneous

UNIFORM = ASSIGNORS["uniform"]
RANGE = ASSIGNORS["range"]
TOPIC_NAMES = ["a", "b", "c", "d"]
GHOST = "ghost"  # subscribed to, never exists

PROPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def members_of(subs: dict[str, set[str] | frozenset[str]], instance_ids: dict[str, str] | None = None) -> dict[str, MemberSubscription]:
    instance_ids = instance_ids or {}
    return {m: MemberSubscription(m, frozenset(t), instance_id=instance_ids.get(m)) for m, t in subs.items()}


def owners(result) -> dict[tuple[str, int], str]:
    out = {}
    for m, per_topic in result.items():
        for t, parts in per_topic.items():
            for p in parts:
                assert (t, p) not in out, f"{t}-{p} assigned twice"
                out[(t, p)] = m
    return out


def sizes(result) -> dict[str, int]:
    return {m: sum(len(p) for p in per_topic.values()) for m, per_topic in result.items()}


def check_valid(spec: GroupSpec, topics: dict[str, int], result) -> None:
    assert set(result) == set(spec.members), "every member appears, no one else"
    own = owners(result)
    for m, per_topic in result.items():
        for t, parts in per_topic.items():
            assert isinstance(parts, frozenset) and parts, "no empty topic entries"
            assert t in topics, "only existing topics"
            assert t in spec.members[m].topics, "only subscribed topics"
            assert all(0 <= p < topics[t] for p in parts)
    subscribed = {t for sub in spec.members.values() for t in sub.topics if t in topics}
    assert set(own) == {(t, p) for t in subscribed for p in range(topics[t])}, "every subscribed partition once"


def check_locally_balanced(spec: GroupSpec, topics: dict[str, int], result) -> None:
    """For each topic: no subscriber could take one of its partitions from an
    owner holding two or more partitions more (all topics counted)."""
    load = sizes(result)
    for t in topics:
        subscribers = [m for m, sub in spec.members.items() if t in sub.topics]
        holders = [m for m in subscribers if result[m].get(t)]
        if holders:
            assert max(load[m] for m in holders) - min(load[m] for m in subscribers) <= 1, t


def moved(before, after) -> dict[tuple[str, int], tuple[str, str]]:
    old = owners(before)
    new = owners(after)
    return {tp: (m, new[tp]) for tp, m in old.items() if tp in new and new[tp] != m}


# --------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------

# Generation is kept cheap: hypothesis draws the sizes (so failures shrink
# to small groups and topics) and a seed from which the rest is built.
ID_POOL = ["0", "00", "a", "b", "bb", "m-3", "m1", "m10", "m2", "x-9", "y", "z"]


def _topics(draw, rnd) -> dict[str, int]:
    n = draw(st.integers(1, len(TOPIC_NAMES)))
    counts = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    return dict(zip(rnd.sample(TOPIC_NAMES, n), counts, strict=True))


def _garbage_current(rnd, ids) -> dict[str, dict[str, frozenset[int]]]:
    """A current assignment with departed members, unknown topics, partitions
    out of range and partitions claimed twice."""
    holders = [m for m in [*ids, "gone-1", "gone-2"] if rnd.random() < 0.7]
    return {
        m: {
            t: frozenset(rnd.randint(-1, 35) for _ in range(rnd.randint(0, 12)))
            for t in rnd.sample(TOPIC_NAMES + ["zzz"], rnd.randint(0, 3))
        }
        for m in holders
    }


@st.composite
def topic_counts(draw):
    return _topics(draw, random.Random(draw(st.integers(0, 2**32 - 1))))


@st.composite
def homogeneous(draw):
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    topics = _topics(draw, rnd)
    ids = rnd.sample(ID_POOL, draw(st.integers(1, 10)))
    subscribed = frozenset(topics)
    # Some members also subscribe to a topic that does not exist: the
    # effective subscriptions stay homogeneous.
    subs = {m: subscribed | {GHOST} if rnd.random() < 0.3 else subscribed for m in ids}
    return GroupSpec(members_of(subs), _garbage_current(rnd, ids)), topics


@st.composite
def heterogeneous(draw):
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    topics = _topics(draw, rnd)
    ids = rnd.sample(ID_POOL, draw(st.integers(1, 10)))
    pool = TOPIC_NAMES + [GHOST]
    subs = {m: frozenset(rnd.sample(pool, rnd.randint(0, len(pool)))) for m in ids}
    return GroupSpec(members_of(subs), _garbage_current(rnd, ids)), topics


@st.composite
def with_instance_ids(draw, spec_topics):
    spec, topics = draw(spec_topics)
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    instance = {m: rnd.choice(["i0", "i1", "i10", "j", "k2"]) + str(k) for k, m in enumerate(spec.members) if rnd.random() < 0.5}
    members = {m: MemberSubscription(m, sub.topics, instance_id=instance.get(m)) for m, sub in spec.members.items()}
    return GroupSpec(members, spec.current), topics


# --------------------------------------------------------------------------
# properties: both assignors
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["uniform", "range"])
@PROPS
@given(data=st.one_of(homogeneous(), heterogeneous()))
def test_every_partition_exactly_once_to_a_subscriber(name, data):
    spec, topics = data
    check_valid(spec, topics, ASSIGNORS[name].assign(spec, topics))


@pytest.mark.parametrize("name", ["uniform", "range"])
@PROPS
@given(data=st.one_of(with_instance_ids(homogeneous()), with_instance_ids(heterogeneous())))
def test_deterministic_whatever_the_iteration_order(name, data):
    spec, topics = data
    assignor = ASSIGNORS[name]
    first = assignor.assign(spec, topics)
    assert assignor.assign(spec, topics) == first
    # Same contents, built in the opposite order.
    reordered = GroupSpec(
        {m: spec.members[m] for m in reversed(list(spec.members))},
        {
            m: {t: frozenset(sorted(p, reverse=True)) for t, p in reversed(list(cur.items()))}
            for m, cur in reversed(list(spec.current.items()))
        },
    )
    assert assignor.assign(reordered, dict(reversed(list(topics.items())))) == first


def test_empty_group():
    for assignor in ASSIGNORS.values():
        assert assignor.assign(GroupSpec({}, {}), {"t": 3}) == {}


def test_members_without_existing_topics_get_nothing():
    spec = GroupSpec(members_of({"m1": {GHOST}, "m2": set()}), {"m1": {"t": frozenset({0})}})
    for assignor in ASSIGNORS.values():
        assert assignor.assign(spec, {"t": 3}) == {"m1": {}, "m2": {}}


# --------------------------------------------------------------------------
# uniform
# --------------------------------------------------------------------------


@PROPS
@given(data=homogeneous())
def test_uniform_homogeneous_balanced_within_one(data):
    spec, topics = data
    result = UNIFORM.assign(spec, topics)
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 1


@PROPS
@given(data=heterogeneous())
def test_uniform_heterogeneous_locally_balanced(data):
    spec, topics = data
    result = UNIFORM.assign(spec, topics)
    check_locally_balanced(spec, topics, result)


@PROPS
@given(data=homogeneous())
def test_uniform_heterogeneous_builder_balances_homogeneous_input(data):
    # The general builder must not be worse than the special case.
    spec, topics = data
    subs = {m: frozenset(t for t in sub.topics if t in topics) for m, sub in spec.members.items()}
    result = _assign_heterogeneous(sorted(subs), subs, topics, spec.current)
    check_valid(spec, topics, result)
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 1


@PROPS
@given(data=st.one_of(homogeneous(), heterogeneous()))
def test_uniform_is_a_fixed_point(data):
    spec, topics = data
    result = UNIFORM.assign(spec, topics)
    assert UNIFORM.assign(GroupSpec(spec.members, result), topics) == result


@PROPS
@given(data=homogeneous(), newcomer=st.sampled_from(ID_POOL + ["new"]))
def test_uniform_join_moves_at_most_a_fair_share_all_to_the_newcomer(data, newcomer):
    spec, topics = data
    if newcomer in spec.members:
        return
    before = UNIFORM.assign(spec, topics)
    members = dict(spec.members)
    members[newcomer] = MemberSubscription(newcomer, frozenset(topics))
    after = UNIFORM.assign(GroupSpec(members, before), topics)
    check_valid(GroupSpec(members, before), topics, after)
    total = sum(topics.values())
    changes = moved(before, after)
    assert len(changes) <= math.ceil(total / len(members))
    assert all(new == newcomer for _, new in changes.values())
    assert sizes(after)[newcomer] == len(changes)


@PROPS
@given(data=homogeneous(), pick=st.integers(0, 100))
def test_uniform_leave_moves_only_the_leavers_partitions(data, pick):
    spec, topics = data
    if len(spec.members) < 2:
        return
    before = UNIFORM.assign(spec, topics)
    leaver = sorted(spec.members)[pick % len(spec.members)]
    members = {m: sub for m, sub in spec.members.items() if m != leaver}
    after = UNIFORM.assign(GroupSpec(members, before), topics)
    assert all(old == leaver for old, _ in moved(before, after).values()), "partitions of remaining members stay put"
    assert set(owners(after)) == set(owners(before))


@PROPS
@given(
    data=homogeneous(),
    joiners=st.sets(st.sampled_from(["n", "nn", "q", "q0"]), max_size=4),
    keep=st.lists(st.booleans(), min_size=10, max_size=10),
    new_topics=topic_counts(),
)
def test_uniform_homogeneous_revokes_the_minimum(data, joiners, keep, new_topics):
    """Arbitrary membership and topic changes from a previous result: the
    partitions taken from continuing members are exactly those a balanced
    assignment has to take."""
    spec, topics = data
    before = UNIFORM.assign(spec, topics)
    staying = [m for k, m in enumerate(sorted(spec.members)) if keep[k]]
    ids = staying + [j for j in sorted(joiners) if j not in spec.members]
    if not ids:
        return
    subscribed = frozenset(new_topics)
    new_spec = GroupSpec(members_of(dict.fromkeys(ids, subscribed)), before)
    after = UNIFORM.assign(new_spec, new_topics)
    check_valid(new_spec, new_topics, after)

    total = sum(new_topics.values())
    q, r = divmod(total, len(ids))
    have = {}
    lost = 0
    for m in ids:
        valid = {(t, p) for t, parts in before.get(m, {}).items() if t in new_topics for p in parts if p < new_topics[t]}
        have[m] = len(valid)
        now = {(t, p) for t, parts in after[m].items() for p in parts}
        lost += len(valid - now)
    over = [h for h in have.values() if h > q]
    assert lost == sum(h - q for h in over) - min(r, len(over))


def test_uniform_example_three_then_four_members():
    topics = {"t": 12}
    three = members_of({"m1": {"t"}, "m2": {"t"}, "m3": {"t"}})
    first = UNIFORM.assign(GroupSpec(three, {}), topics)
    assert sizes(first) == {"m1": 4, "m2": 4, "m3": 4}

    four = {**three, **members_of({"m4": {"t"}})}
    second = UNIFORM.assign(GroupSpec(four, first), topics)
    assert sizes(second) == {"m1": 3, "m2": 3, "m3": 3, "m4": 3}
    changes = moved(first, second)
    assert len(changes) == 3
    assert sorted(old for old, _ in changes.values()) == ["m1", "m2", "m3"]
    assert {new for _, new in changes.values()} == {"m4"}
    for m in ("m1", "m2", "m3"):
        assert second[m]["t"] <= first[m]["t"]

    # m2 leaves: only its partitions move, and the others end up with 4 each.
    third = UNIFORM.assign(GroupSpec({m: s for m, s in four.items() if m != "m2"}, second), topics)
    assert sizes(third) == {"m1": 4, "m3": 4, "m4": 4}
    assert all(old == "m2" for old, _ in moved(second, third).values())


def test_uniform_extra_slot_goes_to_the_member_that_already_has_it():
    # 7 partitions, 2 members: whoever holds 4 keeps 4 (Kafka may flip them).
    topics = {"t": 7}
    members = members_of({"a": {"t"}, "b": {"t"}})
    current = {"a": {"t": frozenset({0, 1, 2})}, "b": {"t": frozenset({3, 4, 5, 6})}}
    assert UNIFORM.assign(GroupSpec(members, current), topics) == current


def test_uniform_drops_unsubscribed_and_vanished_partitions():
    members = members_of({"a": {"t"}, "b": {"t"}})
    current = {
        "a": {"t": frozenset({0, 1, 9}), "old": frozenset({0})},  # t-9 no longer exists
        "b": {"t": frozenset({1, 2})},  # t-1 claimed twice: the first member (by id) keeps it
    }
    result = UNIFORM.assign(GroupSpec(members, current), {"t": 4, "old": 1})
    assert result == {"a": {"t": frozenset({0, 1})}, "b": {"t": frozenset({2, 3})}}


def test_uniform_heterogeneous_example():
    # a: t1, b: t1+t2, c: t2. t1 and t2 have 4 partitions each.
    members = members_of({"a": {"t1"}, "b": {"t1", "t2"}, "c": {"t2"}})
    topics = {"t1": 4, "t2": 4}
    result = UNIFORM.assign(GroupSpec(members, {}), topics)
    check_valid(GroupSpec(members, {}), topics, result)
    assert sorted(sizes(result).values()) == [2, 3, 3]
    # One member holding everything it can gets evened out.
    current = {"b": {"t1": frozenset(range(4)), "t2": frozenset(range(4))}}
    result = UNIFORM.assign(GroupSpec(members, current), topics)
    check_locally_balanced(GroupSpec(members, current), topics, result)
    assert sorted(sizes(result).values()) == [2, 3, 3]
    # b kept its partitions as far as balance allows.
    assert sizes(result)["b"] == sum(len(p & current["b"][t]) for t, p in result["b"].items())


def test_uniform_unchanged_member_assignments_are_reused():
    members = members_of({f"m{i}": {"t"} for i in range(4)})
    first = UNIFORM.assign(GroupSpec(members, {}), {"t": 8})
    second = UNIFORM.assign(GroupSpec(members, first), {"t": 8})
    assert all(second[m]["t"] is first[m]["t"] for m in members)


def test_uniform_large_group_join_moves_one_share():
    # speed is measured in bench (python -m broker.coordinator.assignors.bench), not here
    members = members_of({f"member-{i:05d}": {"t"} for i in range(3000)})
    first = UNIFORM.assign(GroupSpec(members, {}), {"t": 3000})
    members["member-new"] = MemberSubscription("member-new", frozenset({"t"}))
    second = UNIFORM.assign(GroupSpec(members, first), {"t": 3000})
    moved = sum(len(first[m]["t"] - second[m].get("t", frozenset())) for m in first)
    assert moved == len(second["member-new"].get("t", ())) <= 1


# --------------------------------------------------------------------------
# range
# --------------------------------------------------------------------------


@PROPS
@given(data=st.one_of(with_instance_ids(homogeneous()), with_instance_ids(heterogeneous())))
def test_range_contiguous_ranges_in_member_order(data):
    spec, topics = data
    result = RANGE.assign(spec, topics)
    order = range_order(spec)
    for t, count in topics.items():
        subscribers = [m for m in order if t in spec.members[m].topics]
        if not subscribers:
            continue
        base, extra = divmod(count, len(subscribers))
        start = 0
        for k, m in enumerate(subscribers):
            size = base + (k < extra)
            assert result[m].get(t, frozenset()) == frozenset(range(start, start + size))
            start += size


@PROPS
@given(data=with_instance_ids(heterogeneous()))
def test_range_co_partitions_and_ignores_current(data):
    spec, topics = data
    result = RANGE.assign(spec, topics)
    assert RANGE.assign(GroupSpec(spec.members, {}), topics) == result
    for t1 in topics:
        for t2 in topics:
            subs1 = {m for m, s in spec.members.items() if t1 in s.topics}
            subs2 = {m for m, s in spec.members.items() if t2 in s.topics}
            if subs1 == subs2 and topics[t1] == topics[t2]:
                for m in subs1:
                    assert result[m].get(t1) == result[m].get(t2)


@PROPS
@given(data=with_instance_ids(homogeneous()))
def test_range_static_members_keep_ranges_across_new_member_ids(data):
    spec, topics = data
    result = RANGE.assign(spec, topics)
    renamed = {}
    mapping = {}
    for m, sub in spec.members.items():
        new_id = "re-" + m if sub.instance_id is not None else m
        mapping[m] = new_id
        renamed[new_id] = MemberSubscription(new_id, sub.topics, instance_id=sub.instance_id)
    again = RANGE.assign(GroupSpec(renamed, {}), topics)
    assert {m: again[mapping[m]] for m in spec.members} == result


def test_range_kafka_example():
    members = members_of({"M0": {"T1", "T2"}, "M1": {"T1", "T2"}})
    result = RANGE.assign(GroupSpec(members, {}), {"T1": 3, "T2": 3})
    assert result == {
        "M0": {"T1": frozenset({0, 1}), "T2": frozenset({0, 1})},
        "M1": {"T1": frozenset({2}), "T2": frozenset({2})},
    }
    # Static members are ordered by instance id, ahead of dynamic ones.
    static = members_of({"M3": {"T1", "T2"}, "M2": {"T1", "T2"}, "A": {"T1", "T2"}}, {"M3": "I0", "M2": "I1"})
    result = RANGE.assign(GroupSpec(static, {}), {"T1": 3, "T2": 3})
    assert result == {
        "M3": {"T1": frozenset({0}), "T2": frozenset({0})},
        "M2": {"T1": frozenset({1}), "T2": frozenset({1})},
        "A": {"T1": frozenset({2}), "T2": frozenset({2})},
    }


def test_range_heterogeneous_and_more_members_than_partitions():
    members = members_of({"a": {"x", "y"}, "b": {"y"}, "c": {"y"}})
    result = RANGE.assign(GroupSpec(members, {}), {"x": 2, "y": 2})
    assert result == {"a": {"x": frozenset({0, 1}), "y": frozenset({0})}, "b": {"y": frozenset({1})}, "c": {}}


# --------------------------------------------------------------------------
# choosing an assignor
# --------------------------------------------------------------------------


def test_choose_assignor():
    assert DEFAULT_ASSIGNOR == "uniform" and list(ASSIGNORS) == ["uniform", "range"]
    assert choose_assignor([]) == "uniform"
    assert choose_assignor([None, None]) == "uniform"
    assert choose_assignor(["range"]) == "range"
    assert choose_assignor([None, "range", None]) == "range"
    assert choose_assignor(["range", "uniform", "range"]) == "range"
    # A tie goes to the assignor configured first (Kafka's HashMap order
    # happens to give the same answer for these two names).
    assert choose_assignor(["range", "uniform"]) == "uniform"
    reversed_config = {"range": RANGE, "uniform": UNIFORM}
    assert choose_assignor(["uniform", "range"], reversed_config) == "range"
    assert choose_assignor([], reversed_config) == "range"
    assert choose_assignor([], default="range") == "range"
    with pytest.raises(UnsupportedAssignor):
        choose_assignor(["uniform", "sticky"])


def test_validate_and_get_assignor():
    validate_assignor(None)
    validate_assignor("range")
    for bad in ("", "Uniform", "cooperative-sticky"):
        with pytest.raises(UnsupportedAssignor) as info:
            validate_assignor(bad)
        assert isinstance(info.value, ValueError) and info.value.supported == ["uniform", "range"]
    assert get_assignor("uniform") is UNIFORM
    with pytest.raises(UnsupportedAssignor):
        get_assignor("nope")
    assert UNIFORM.name == "uniform" and RANGE.name == "range"
