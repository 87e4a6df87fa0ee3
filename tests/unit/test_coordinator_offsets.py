"""Offsets of classic groups: OffsetCommit, OffsetFetch, expiry, OffsetDelete, DeleteGroups.

Reference: shared/reference/group-coordinator.md sections 2.1 (every classic
row of the OffsetCommit table), 2.3-2.6, 5.4 (loading) and items 9.7-9.9.
Same deterministic harness as test_coordinator_classic.py.
"""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.classic_group import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from protocol.errors import ErrorCode
from protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tests.unit.test_coordinator_classic import G, Harness, assignment, subscription

E = ErrorCode
DAY = 1_000_000  # the retention used by these tests (ms); sessions must fit an int32


@pytest.fixture
def h(loop):
    return Harness(loop)


def codes(answer) -> set[ErrorCode]:
    return {c for _, _, c in answer}


def fetch(h, topics=(("t", [0]),), *, stable=False, group=G):
    return {(t, p): (None if v is None else v.offset) for t, p, v in h.shard.offset_fetch(group, None if topics is None else list(topics), stable=stable)}


def offset_records(records):
    out = []
    for k, v in records:
        key = decode_key(k)
        if isinstance(key, OffsetCommitKey):
            out.append((key.group, key.topic, key.partition, None if v is None else decode_value(key, v).offset))
    return out


def empty_consumer_group(h, **kw):
    """A consumer-protocol classic group that had a member and is Empty again."""
    (a,), gen = h.stable_group(1, **kw)
    h.leave(a)
    assert h.state() == EMPTY
    return a, gen + 1


# =========================================================================== OffsetCommit matrix (2.1, 9.7)
@pytest.mark.parametrize("version", [2, 5, 8, 9])
def test_nonexistent_group_negative_generation_creates_simple_group(h, version):
    assert codes(h.commit("", -1, version=version)) == {E.none}
    g = h.group()
    assert g.state == EMPTY and g.protocol_type is None and not g.members
    assert fetch(h) == {("t", 0): 10}


@pytest.mark.parametrize(("version", "code"), [(9, E.group_id_not_found), (8, E.illegal_generation), (2, E.illegal_generation)])
def test_nonexistent_group_with_generation(h, version, code):
    answer = h.commit("m", 0, version=version, parts=(("t", 0, 1, None), ("t", 1, 1, None)))
    assert [c for _, _, c in answer] == [code, code]  # errors are per partition
    assert h.group() is None and h.durable == []


def test_dead_group(h):
    h.commit()
    h.group().state = DEAD
    assert codes(h.commit()) == {E.coordinator_not_available}
    assert codes(h.commit("m", 3)) == {E.coordinator_not_available}


def test_empty_classic_group_accepts_negative_generation(h):
    empty_consumer_group(h)
    assert codes(h.commit("", -1)) == {E.none}
    # Kafka checks "generation < 0 and Empty" before anything else: member / instance ids are not validated
    assert codes(h.commit("whoever", -1)) == {E.none}
    assert codes(h.commit("whoever", -1, instance="i-x")) == {E.none}


def test_empty_classic_group_with_generation_validates_member(h):
    a, gen = empty_consumer_group(h)
    assert codes(h.commit("", gen)) == {E.unknown_member_id}
    assert codes(h.commit(a, gen)) == {E.unknown_member_id}  # it left


def test_member_validation_on_stable_group(h):
    (a, b), gen = h.stable_group(2, instances=["i-a", None])
    assert codes(h.commit(a, gen, instance="i-a")) == {E.none}
    assert codes(h.commit(b, gen)) == {E.none}
    assert codes(h.commit("stranger", gen)) == {E.unknown_member_id}
    assert codes(h.commit(b, gen, instance="i-a")) == {E.fenced_instance_id}
    assert codes(h.commit(a, gen, instance="i-unknown")) == {E.unknown_member_id}
    assert codes(h.commit(b, gen + 1)) == {E.illegal_generation}
    assert codes(h.commit(b, gen - 1)) == {E.illegal_generation}
    # a member id (or instance id) with generation -1 is validated too: the generation then mismatches
    assert codes(h.commit(b, -1)) == {E.illegal_generation}
    assert codes(h.commit("", -1, instance="i-a")) == {E.fenced_instance_id}


@pytest.mark.parametrize("state", [PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE])
def test_non_empty_group_without_member_id_is_unknown_member(h, state):
    (a, b), gen = h.stable_group(2)
    if state != STABLE:
        h.join(a)
    if state == COMPLETING_REBALANCE:
        h.join(b)
    assert h.state() == state
    assert codes(h.commit("", -1)) == {E.unknown_member_id}


def test_completing_rebalance_is_rebalance_in_progress(h):
    (a, b), gen = h.stable_group(2)
    h.join(a)
    h.join(b)
    assert h.state() == COMPLETING_REBALANCE
    assert codes(h.commit(a, gen + 1)) == {E.rebalance_in_progress}
    assert codes(h.commit(a, gen)) == {E.illegal_generation}  # validation comes first
    assert codes(h.commit("x", gen + 1)) == {E.unknown_member_id}


def test_preparing_rebalance_accepts_current_generation(h):
    (a, b), gen = h.stable_group(2)
    h.join(a)
    assert h.state() == PREPARING_REBALANCE
    assert codes(h.commit(b, gen)) == {E.none}  # the generation is only bumped when the join completes
    assert codes(h.commit(a, gen)) == {E.none}
    assert codes(h.commit(a, gen + 1)) == {E.illegal_generation}


def test_offset_metadata_too_large_is_per_partition_and_counts_utf16_units(h):
    limit = h.config.offset_metadata_max_bytes
    parts = (
        ("t", 0, 1, "a" * limit),
        ("t", 1, 2, "a" * (limit + 1)),
        ("t", 2, 3, "é" * limit),  # 2 UTF-8 bytes each, 1 Java char: fits
        ("t", 3, 4, "\U0001F600" * (limit // 2)),  # a surrogate pair each: exactly the limit
        ("t", 4, 5, "\U0001F600" * (limit // 2 + 1)),  # Python len 2049, Java length 4098
        ("t", 5, 6, None),
    )
    answer = h.commit(parts=parts)
    assert [c for _, _, c in answer] == [E.none, E.offset_metadata_too_large, E.none, E.none, E.offset_metadata_too_large, E.none]
    assert [p for _, _, p, _ in offset_records(h.durable)] == [0, 2, 3, 5]
    got = h.shard.offset_fetch(G, [("t", [5])], stable=False)[0][2]
    assert got.metadata == ""


def test_commit_stores_offset_epoch_metadata_and_timestamps(h):
    h.now = 1234
    h.commit(version=9, parts=(("t", 0, 77, "m"),))
    [(k, v)] = h.durable
    value = decode_value(decode_key(k), v)
    assert (value.offset, value.metadata, value.commit_timestamp, value.expire_timestamp) == (77, "m", 1234, -1)
    assert struct.unpack(">h", v[:2])[0] == 4  # 4.1 writes OffsetCommitValue v4...
    h.commit(version=4, retention=5000, parts=(("t", 1, 1, None),))
    k, v = h.durable[-1]
    assert decode_value(decode_key(k), v).expire_timestamp == 1234 + 5000
    assert struct.unpack(">h", v[:2])[0] == 1  # ...and v1 when an explicit retention was given
    h.commit(version=5, retention=5000, parts=(("t", 2, 1, None),))  # v5+ has no retention
    assert h.shard.offsets.latest[G][("t", 2)].expire_timestamp == -1
    h.commit(version=2, retention=-1, parts=(("t", 3, 1, None),))
    assert h.shard.offsets.latest[G][("t", 3)].expire_timestamp == -1


def test_offset_commit_refreshes_the_session(h):
    (a, b), gen = h.stable_group(2, session=10_000)
    for _ in range(4):  # b never heartbeats, it only commits
        h.advance(9_000)
        assert h.heartbeat(a, gen) == E.none
        assert codes(h.commit(b, gen)) == {E.none}
    assert b in h.group().members and h.state() == STABLE
    h.advance(10_000)
    assert b not in h.group().members


def test_offset_commit_refreshes_the_session_in_preparing_rebalance(h):
    (a, b), gen = h.stable_group(2, session=10_000, rebalance=60_000)
    h.join(a, session=10_000, rebalance=60_000)
    for _ in range(3):
        h.advance(9_000)
        assert codes(h.commit(b, gen)) == {E.none}
    assert b in h.group().members


def test_commit_result_is_replayed_then_made_durable(h):
    result = h.apply(lambda s: s.offset_commit(G, "", -1, None, 9, -1, []))
    assert result.records == [] and result.response == []
    from broker.coordinator.offsets import CommitPartition

    h.hold = True
    result = h.apply(lambda s: s.offset_commit(G, "", -1, None, 9, -1, [CommitPartition("t", 0, 5, -1, "")]))
    assert result.response == [("t", 0, E.none)]
    [(key, value)] = result.records  # typed: the runtime encodes them once, when it appends
    assert key == OffsetCommitKey(G, "t", 0) and value.offset == 5
    assert fetch(h, stable=True) == {("t", 0): 5} and fetch(h) == {("t", 0): None}  # replayed, not yet durable
    h.commit_held()
    assert fetch(h) == {("t", 0): 5}


# =========================================================================== OffsetFetch (2.3, 9.9)
def test_offset_fetch_reads_committed_state_only(h):
    h.commit(parts=(("t", 0, 1, None),))
    h.hold = True
    h.commit(parts=(("t", 0, 2, None), ("t", 1, 3, None)))
    assert fetch(h, (("t", [0, 1]),)) == {("t", 0): 1, ("t", 1): None}
    assert fetch(h, (("t", [0, 1]),), stable=True) == {("t", 0): 2, ("t", 1): 3}  # require_stable: latest
    h.commit_held()
    assert fetch(h, (("t", [0, 1]),)) == {("t", 0): 2, ("t", 1): 3}


def test_offset_fetch_unknown_group_and_all_topics(h):
    assert fetch(h, (("t", [0, 1]),), group="nope") == {("t", 0): None, ("t", 1): None}
    assert fetch(h, None, group="nope") == {}
    h.commit(parts=(("u", 1, 5, None), ("t", 2, 6, None), ("t", 0, 7, None)))
    rows = h.shard.offset_fetch(G, None, stable=False)
    assert [(t, p, v.offset) for t, p, v in rows] == [("t", 0, 7), ("t", 2, 6), ("u", 1, 5)]


# =========================================================================== expiry (2.4, 9.8)
def expire(h) -> list:
    before = len(h.durable)
    h.apply(lambda s: s.expire_offsets())
    return h.durable[before:]


def tombstoned_group(records) -> bool:
    return any(isinstance(decode_key(k), GroupMetadataKey) and v is None for k, v in records)


def test_simple_group_offsets_expire_from_each_commit(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    h.commit(parts=(("t", 0, 1, None),))
    h.now = 1000
    h.commit(parts=(("t", 1, 1, None),))
    h.now = DAY - 1
    assert expire(h) == []
    h.now = DAY
    out = expire(h)
    assert offset_records(out) == [(G, "t", 0, None)] and not tombstoned_group(out)
    assert fetch(h, (("t", [0, 1]),)) == {("t", 0): None, ("t", 1): 1}
    h.now = DAY + 1000
    out = expire(h)
    # the last offset went: the (Empty) group is deleted too, offsets first
    assert offset_records(out) == [(G, "t", 1, None)] and tombstoned_group(out)
    assert isinstance(decode_key(out[-1][0]), GroupMetadataKey)
    assert h.group() is None


def test_empty_classic_group_offsets_age_from_when_it_became_empty(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    (a,), gen = h.stable_group(1, session=3 * DAY, rebalance=60_000)
    h.commit(a, gen)  # t=0
    h.now = DAY // 2
    h.leave(a)  # Empty from here
    assert h.group().state_timestamp == DAY // 2
    h.now = DAY + 1
    assert expire(h) == []  # a day after the commit, but not after becoming Empty
    h.now = DAY + DAY // 2
    out = expire(h)
    assert offset_records(out) == [(G, "t", 0, None)] and tombstoned_group(out)
    assert h.group() is None


def test_empty_group_loaded_without_state_timestamp_uses_commit_time(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    h.shard.replay_bytes(encode_key(GroupMetadataKey(G)), encode_value(GroupMetadataValue("consumer", 3, None, None, -1, [])))
    h.shard.replay_bytes(encode_key(OffsetCommitKey(G, "t", 0)), encode_value(OffsetCommitValue(5, -1, "", 100, -1)))
    h.apply(lambda s: s.on_loaded())
    h.now = DAY + 99
    assert expire(h) == []
    h.now = DAY + 100
    assert offset_records(expire(h)) == [(G, "t", 0, None)]


def test_stable_consumer_group_only_unsubscribed_topics_expire(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    (a,), gen = h.stable_group(1, session=3 * DAY, topics=("t",))
    h.commit(a, gen, parts=(("t", 0, 1, None), ("old", 0, 2, None)))
    h.now = DAY
    h.heartbeat(a, gen)
    out = expire(h)
    assert offset_records(out) == [(G, "old", 0, None)] and not tombstoned_group(out)
    h.now = 10 * DAY
    h.heartbeat(a, gen)
    assert expire(h) == []  # the subscribed topic never expires while the group is Stable
    assert h.group() is not None


def test_stable_group_with_unparseable_subscription_expires_nothing(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    (a,), gen = h.stable_group(1, session=3 * DAY, protocols=[("range", b"\x00")])
    assert h.group().subscribed is None
    h.commit(a, gen, parts=(("old", 0, 2, None),))
    h.now = 2 * DAY
    assert expire(h) == []


def test_live_non_consumer_group_expires_nothing(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    (a,), gen = h.stable_group(1, session=30 * DAY, ptype="connect", protocols=[("v1", b"opaque")])
    h.commit(a, gen)
    h.now = 10 * DAY
    h.heartbeat(a, gen)
    assert expire(h) == []


def test_rebalancing_consumer_group_expires_nothing(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    (a, b), gen = h.stable_group(2, session=30 * DAY, rebalance=30 * DAY)
    h.commit(a, gen, parts=(("old", 0, 2, None),))
    h.join(a, session=30 * DAY, rebalance=30 * DAY)
    assert h.state() == PREPARING_REBALANCE
    h.now = 10 * DAY
    assert expire(h) == []


def test_explicit_expire_timestamp_overrides_age(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    h.commit(version=3, retention=1000, parts=(("t", 0, 1, None),))
    h.commit(version=3, retention=3 * DAY, parts=(("t", 1, 1, None),))
    h.now = 1000
    assert offset_records(expire(h)) == [(G, "t", 0, None)]
    h.now = 2 * DAY
    assert expire(h) == []  # older than the retention, but its own expire timestamp is later
    h.now = 3 * DAY
    out = expire(h)
    assert offset_records(out) == [(G, "t", 1, None)] and tombstoned_group(out)


def test_explicit_expire_timestamp_does_not_make_subscribed_topics_eligible(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    (a,), gen = h.stable_group(1, session=30 * DAY, topics=("t",))
    h.commit(a, gen, version=4, retention=10, parts=(("t", 0, 1, None), ("old", 0, 1, None)))
    h.now = 100
    assert offset_records(expire(h)) == [(G, "old", 0, None)]


def test_empty_group_without_offsets_is_deleted_by_the_retention_job(loop):
    h = Harness(loop)
    empty_consumer_group(h)
    assert tombstoned_group(expire(h)) and h.group() is None


def test_retention_job_runs_on_its_interval_after_load(loop):
    h = Harness(loop, offsets_retention_ms=1_000_000, offsets_retention_check_interval_ms=600_000)
    h.apply(lambda s: s.on_loaded())
    h.commit(parts=(("t", 0, 1, None),))
    h.advance(600_000)
    assert fetch(h) == {("t", 0): 1}
    h.advance(600_000)  # t=1.2M: older than the retention
    assert fetch(h) == {("t", 0): None} and h.group() is None
    h.advance(600_000)  # and it keeps running
    assert h.shard.timers.is_scheduled("offsets-retention")


# =========================================================================== OffsetDelete (2.5)
def test_offset_delete_group_errors(h):
    assert h.dry(lambda s: s.offset_delete("nope", [("t", [0])])).response == (E.group_id_not_found, [])
    (a,), gen = h.stable_group(1, ptype="connect", protocols=[("v1", b"x")])
    assert h.dry(lambda s: s.offset_delete(G, [("t", [0])])).response == (E.non_empty_group, [])
    h.group().state = DEAD
    assert h.dry(lambda s: s.offset_delete(G, [("t", [0])])).response == (E.group_id_not_found, [])


def test_offset_delete_on_active_consumer_group(h):
    (a,), gen = h.stable_group(1, topics=("t",))
    h.commit(a, gen, parts=(("t", 0, 1, None), ("old", 0, 2, None)))
    before = len(h.durable)
    result = h.apply(lambda s: s.offset_delete(G, [("t", [0]), ("old", [0, 1])]))
    top, answer = result.response
    assert top == E.none
    assert answer == [("t", 0, E.group_subscribed_to_topic), ("old", 0, E.none), ("old", 1, E.none)]
    # a tombstone only where an offset existed
    assert offset_records(h.durable[before:]) == [(G, "old", 0, None)]
    assert fetch(h, (("t", [0]), ("old", [0]))) == {("t", 0): 1, ("old", 0): None}


def test_offset_delete_unknown_subscription_protects_every_topic(h):
    (a,), gen = h.stable_group(1, protocols=[("range", b"garbage")])
    h.commit(a, gen, parts=(("old", 0, 2, None),))
    _, answer = h.dry(lambda s: s.offset_delete(G, [("old", [0])])).response
    assert answer == [("old", 0, E.group_subscribed_to_topic)]


def test_offset_delete_uses_the_subscriptions_of_the_current_generation(h):
    (a, b), gen = h.stable_group(2, topics=("t",))
    h.commit(a, gen, parts=(("new", 0, 2, None),))
    h.join(b, topics=("t", "new"))  # rebalancing to subscribe to "new"; the generation has not changed yet
    assert h.state() == PREPARING_REBALANCE
    _, answer = h.apply(lambda s: s.offset_delete(G, [("new", [0])])).response
    assert answer == [("new", 0, E.none)]
    h.commit(a, gen, parts=(("new", 0, 3, None),))
    h.join(a)
    assert h.state() == COMPLETING_REBALANCE
    _, answer = h.dry(lambda s: s.offset_delete(G, [("new", [0])])).response
    assert answer == [("new", 0, E.group_subscribed_to_topic)]


def test_offset_delete_on_empty_group(h):
    a, gen = empty_consumer_group(h)
    h.commit(parts=(("t", 0, 1, None),))
    _, answer = h.apply(lambda s: s.offset_delete(G, [("t", [0])])).response
    assert answer == [("t", 0, E.none)] and fetch(h) == {("t", 0): None}
    # a simple group too
    h.commit(group="simple")
    _, answer = h.apply(lambda s: s.offset_delete("simple", [("t", [0])])).response
    assert answer == [("t", 0, E.none)]


# =========================================================================== DeleteGroups (2.6)
def test_delete_groups(h):
    (a,), gen = h.stable_group(1)
    h.commit(group="simple", parts=(("t", 0, 1, None), ("u", 1, 2, None)))
    before = len(h.durable)
    result = h.apply(lambda s: s.delete_groups([G, "simple", "missing"]))
    assert result.response == [(G, E.non_empty_group), ("simple", E.none), ("missing", E.group_id_not_found)]
    out = h.durable[before:]
    assert offset_records(out) == [("simple", "t", 0, None), ("simple", "u", 1, None)]
    assert isinstance(decode_key(out[-1][0]), GroupMetadataKey) and decode_key(out[-1][0]).group == "simple" and out[-1][1] is None
    assert h.group("simple") is None and h.group(G) is not None
    assert fetch(h, (("t", [0]),), group="simple") == {("t", 0): None}


@pytest.mark.parametrize("state", [PREPARING_REBALANCE, COMPLETING_REBALANCE])
def test_delete_rebalancing_group_is_non_empty(h, state):
    (a, b), gen = h.stable_group(2)
    h.join(a)
    if state == COMPLETING_REBALANCE:
        h.join(b)
    assert h.dry(lambda s: s.delete_groups([G])).response == [(G, E.non_empty_group)]


def test_delete_empty_classic_group(h):
    a, gen = empty_consumer_group(h)
    h.commit(parts=(("t", 0, 1, None),))
    h.apply(lambda s: s.delete_groups([G]))
    assert h.group() is None and fetch(h) == {("t", 0): None}
    assert h.group_records()[-1] is None
    dead = h.dry(lambda s: s.delete_groups([G])).response
    assert dead == [(G, E.group_id_not_found)]


# =========================================================================== loading (5.4)
def test_replaying_offsets_creates_a_simple_group_and_tombstones_delete(loop):
    h = Harness(loop)
    key = encode_key(OffsetCommitKey(G, "t", 0))
    h.shard.replay_bytes(key, encode_value(OffsetCommitValue(9, 3, "md", 50, -1)))
    g = h.group()
    assert g.state == EMPTY and g.protocol_type is None
    h.apply(lambda s: s.on_loaded())
    got = h.shard.offset_fetch(G, [("t", [0])], stable=False)[0][2]
    assert (got.offset, got.leader_epoch, got.metadata, got.commit_timestamp) == (9, 3, "md", 50)
    h.shard.replay_bytes(key, None)
    assert fetch(h, stable=True) == {("t", 0): None}
    # a GroupMetadata record replaces the simple group; its tombstone removes it
    m = MemberMetadata("m", None, "c", "/h", 1, 6000, subscription("t"), assignment(t=[0]))
    h.shard.replay_bytes(encode_key(GroupMetadataKey(G)), encode_value(GroupMetadataValue("consumer", 2, "range", "m", 7, [m])))
    assert h.state() == STABLE and h.group().subscribed == frozenset({"t"})
    h.shard.replay_bytes(encode_key(GroupMetadataKey(G)), None)
    assert h.group() is None


def test_loaded_explicit_expire_timestamp_round_trips(loop):
    h = Harness(loop, offsets_retention_ms=DAY)
    h.commit(version=2, retention=500, parts=(("t", 0, 1, None),))
    fresh = Harness(loop, offsets_retention_ms=DAY)
    for k, v in h.durable:
        fresh.shard.replay_bytes(k, v)
    fresh.shard.on_loaded()
    assert fresh.shard.offsets.committed[G][("t", 0)].expire_timestamp == 500
    fresh.now = 500
    assert offset_records(expire(fresh)) == [(G, "t", 0, None)]


def test_unknown_record_types_are_skipped(loop):
    h = Harness(loop)
    h.shard.replay_bytes(struct.pack(">h", 999) + b"whatever", b"value")
    assert h.shard.skipped_records == 1 and h.shard.groups == {}


def test_failed_offset_append_does_not_reach_readers(h):
    h.hold = True
    h.commit(parts=(("t", 0, 1, None),))
    h.fail_held()
    # the runtime reloads the shard from its log after a failed append; until then reads stay on committed state
    assert fetch(h) == {("t", 0): None}
