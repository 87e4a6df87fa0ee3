"""Classic consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup).

Deterministic: a manual clock, timers fired by hand, no sockets, no sleeping.
The behavioural reference is shared/reference/group-coordinator.md (Kafka
4.1): section 1 for the classic protocol and the classic items of section 9.
Item 9.1 (partition placement) is covered by tests/unit/test_placement.py;
offsets (9.7, 9.8 and the OffsetCommit matrix) by test_coordinator_offsets.py.

The ``Harness`` plays the runtime's part (broker/coordinator/runtime.py): a
operation runs through ``GroupShard.run`` and its Result is made durable
(``commit_record`` + ``on_commit``), or the append is failed
(``on_failure``); Results the shard submits by itself (timers, failure paths)
go through the same path.
"""

from __future__ import annotations

import asyncio
import re
import struct
from types import SimpleNamespace

import pytest

from broker.coordinator.classic_group import ClassicGroup
from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v1.data import TopicPartition as AssignedTopic
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription

from broker.coordinator.classic import JoinParams
from broker.coordinator.classic_group import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from broker.coordinator.common import GroupConfig, Result, merge_results
from protocol.consumer_protocol import assigned_partitions
from broker.coordinator.offsets import CommitPartition
from broker.coordinator.service import leave_op
from broker.coordinator.shard import GroupShard
from protocol.codec import encode
from protocol.errors import ErrorCode
from protocol.group_records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, OffsetCommitKey, decode_key, decode_value, encode_key, encode_value

E = ErrorCode
G = "group-1"
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


# =========================================================================== harness
def _encode(key, value) -> tuple[bytes, bytes | None]:
    """A record as the runtime writes it to the log."""
    return encode_key(key), None if value is None else encode_value(value)


class _DryRun(Exception):
    pass


class StubLog:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def _add(self, event, **kw):
        self.events.append((event, kw))

    info = warning = error = exception = debug = _add

    def bind(self, **_kw):
        return self


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v1 bytes, as the Java consumer sends them."""
    return struct.pack(">h", 1) + encode(ConsumerProtocolSubscription(topics=tuple(topics), owned_partitions=()))


def assignment(**parts: list[int]) -> bytes:
    """ConsumerProtocolAssignment v1 bytes: assignment(t=[0, 1])."""
    tps = tuple(AssignedTopic(topic=t, partitions=tuple(ps)) for t, ps in parts.items())
    return struct.pack(">h", 1) + encode(ConsumerProtocolAssignment(assigned_partitions=tps))


class Harness:
    def __init__(self, loop: asyncio.AbstractEventLoop, **config) -> None:
        self.now = 0
        self.loop = loop
        self.config = GroupConfig(**config)
        self.log = StubLog()
        self.held: list[Result] = []  # appended but not yet durable
        self.hold = False  # when set, new Results wait for commit_held()/fail_held()
        self.durable: list[tuple[bytes, bytes | None]] = []  # every record made durable, in order
        self.shard = GroupShard(0, self.config, lambda: self.now, self.log, loop.create_future, submit=self._submit)

    # ---------------------------------------------------------------- runtime emulation
    def dry(self, op) -> Result:
        """Run an operation and roll it back (``GroupShard.run`` on failure): its Result, nothing kept."""
        box = {}

        def once(shard):
            box["result"] = merge_results(op(shard))
            raise _DryRun

        with pytest.raises(_DryRun):
            self.shard.run(once)
        return box["result"]

    def _submit(self, op) -> None:
        self.apply(op)

    def apply(self, op) -> Result:
        """Run one operation as the runtime does (``GroupShard.run``), hold or commit its Result."""
        result = self.shard.run(op)
        self.last_records = [_encode(k, v) for k, v in result.records]
        self.held.append(result)
        if not self.hold:
            self.commit_held()
        self.check_invariants()
        return result

    def check_invariants(self) -> None:
        """Counts kept incrementally match the members themselves."""
        from collections import Counter

        from broker.coordinator.consumer_group import ConsumerGroup, TargetIndex

        for g in self.shard.groups.values():
            if isinstance(g, ClassicGroup):
                assert g.num_awaiting_join == sum(1 for m in g.members.values() if m.join_future is not None), g.group_id
                assert g.protocol_counts == Counter(n for m in g.members.values() for n, _ in m.protocols), g.group_id
            elif isinstance(g, ConsumerGroup):
                by_name = Counter(n for m in g.members.values() for n in set(m.subscribed_topic_names))
                by_regex = Counter(m.subscribed_topic_regex for m in g.members.values() if m.subscribed_topic_regex is not None)
                assert (dict(g.topic_users), dict(g.regex_users)) == (dict(by_name), dict(by_regex)), g.group_id
                naive = set(by_name)
                for regex in by_regex:
                    naive |= set(g.regexes.get(regex, (frozenset(),))[0])
                assert g.subscribed_topic_names() == naive, g.group_id
                assert dict(g.subscriptions) == dict(Counter(m.counted for m in g.members.values() if m.counted is not None)), g.group_id
                assert all(m.counted == (frozenset(m.subscribed_topic_names), m.subscribed_topic_regex) for m in g.members.values() if m.counted), g.group_id
                assert dict(g.assignor_votes) == dict(Counter(m.server_assignor for m in g.members.values() if m.server_assignor is not None)), g.group_id
                fresh = TargetIndex()
                for mid, asg in g.target.items():
                    fresh.update(mid, None, asg)
                index = g.target_index
                assert (index.count, index.buckets, index.claims, dict(index.per_topic), index.doubles) == (
                    fresh.count, fresh.buckets, fresh.claims, dict(fresh.per_topic), fresh.doubles), g.group_id
                assert index.untargeted == g.members.keys() - g.target.keys(), g.group_id
                assert g.waiting == sum(1 for m in g.members.values() if m.state != 0), g.group_id
                assert g.revoking == sum(1 for m in g.members.values() if m.state == 1), g.group_id  # UNREVOKED_PARTITIONS
                assert index.orphans == g.target.keys() - g.members.keys(), g.group_id

    def commit_held(self) -> None:
        while self.held:
            result = self.held.pop(0)
            for k, v in result.records:
                self.shard.commit_record(k, v)
                self.durable.append(_encode(k, v))
            if result.on_commit is not None:
                result.on_commit()

    def fail_held(self, error: ErrorCode = E.not_coordinator) -> None:
        held, self.held = self.held, []
        for result in held:
            if result.on_failure is not None:
                result.on_failure(error)

    def advance(self, ms: int) -> list:
        """Move the clock and run due timers (one at a time, in deadline order)."""
        target = self.now + ms
        records: list = []
        while True:
            deadline = self.shard.timers.next_deadline()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            self.apply(lambda shard: shard.fire_timers())
            records += self.last_records
        self.now = target
        return records

    # ---------------------------------------------------------------- requests
    def join(self, member_id: str = "", *, group: str = G, instance: str | None = None, protocols=None, session: int = 10_000,
             rebalance: int = 30_000, version: int = 9, ptype: str = "consumer", client: str = "client", topics=("t",)):
        if protocols is None:
            protocols = [("range", subscription(*topics))]
        p = JoinParams(group_id=group, member_id=member_id, group_instance_id=instance, protocol_type=ptype, protocols=list(protocols),
                       session_timeout_ms=session, rebalance_timeout_ms=rebalance, reason=None, version=version,
                       client_id=client, client_host="/127.0.0.1")
        return self.apply(lambda s: s.classic.join(p)).response

    def new_member(self, **kw):
        """KIP-394 two-step join for a dynamic v4+ member: returns (member_id, parked future)."""
        first = self.join(**kw)
        assert first.result()["error_code"] == E.member_id_required
        mid = first.result()["member_id"]
        return mid, self.join(mid, **kw)

    def sync(self, member_id: str, generation: int, assignments: dict | None = None, *, group: str = G, instance: str | None = None,
             ptype: str | None = "consumer", pname: str | None = None):
        return self.apply(lambda s: s.classic.sync(group, generation, member_id, instance, ptype, pname, assignments or {})).response

    def heartbeat(self, member_id: str, generation: int, *, group: str = G, instance: str | None = None) -> ErrorCode:
        return self.apply(lambda s: Result(response=s.classic.heartbeat(group, generation, member_id, instance))).response

    def leave(self, *members, group: str = G):
        return self.apply(leave_op(group, [m if isinstance(m, tuple) else (m, None, None) for m in members])).response

    def commit(self, member_id: str = "", generation: int = -1, *, group: str = G, instance: str | None = None, version: int = 9,
               retention: int = -1, parts=(("t", 0, 10, None),)):
        cps = [CommitPartition(t, p, off, -1, md) for t, p, off, md in parts]
        return self.apply(lambda s: s.offset_commit(group, member_id, generation, instance, version, retention, cps)).response

    # ---------------------------------------------------------------- state
    def group(self, gid: str = G):
        return self.shard.groups.get(gid)

    def state(self, gid: str = G):
        g = self.group(gid)
        return None if g is None else g.state

    def group_records(self, gid: str = G) -> list[GroupMetadataValue | None]:
        out = []
        for k, v in self.durable:
            key = decode_key(k)
            if isinstance(key, GroupMetadataKey) and key.group == gid:
                out.append(decode_value(key, v))
        return out

    def stable_group(self, n: int = 2, *, instances=None, session: int = 10_000, rebalance: int = 30_000, version: int = 9, **kw):
        """n members (dynamic, or static with ``instances``) through a full join + sync; returns member ids, leader first."""
        futs = []
        for i in range(n):
            inst = instances[i] if instances else None
            if inst is None and version >= 4:
                futs.append(self.new_member(session=session, rebalance=rebalance, version=version, client=f"c{i}", **kw)[1])
            else:
                futs.append(self.join(instance=inst, session=session, rebalance=rebalance, version=version, client=f"c{i}", **kw))
        # everyone joined before the first delay ran out: it is extended once (3.0 s delay: 6 s in all)
        self.advance(2 * self.config.group_initial_rebalance_delay_ms)
        answers = [f.result() for f in futs]
        assert all(a["error_code"] == E.none for a in answers), answers
        gen = answers[0]["generation_id"]
        ids = [a["member_id"] for a in answers]
        leader = answers[0]["leader"]
        ids.sort(key=lambda m: m != leader)
        plan = {m: assignment(t=[i]) for i, m in enumerate(ids)}
        ptype = kw.get("ptype", "consumer")
        syncs = [self.sync(m, gen, plan if m == leader else {}, ptype=ptype, instance=self.group().members[m].group_instance_id) for m in ids]
        assert all(s.result()["error_code"] == E.none for s in syncs)
        assert self.state() == STABLE
        return ids, gen


@pytest.fixture
def h(loop):
    return Harness(loop)


def err(fut) -> ErrorCode:
    return fut.result()["error_code"]


# =========================================================================== states and transitions (1.1, 9.4)
def test_full_lifecycle_empty_preparing_completing_stable(loop):
    h = Harness(loop, group_initial_rebalance_delay_ms=3000)
    a, fa = h.new_member(client="ca", topics=("t",))
    assert h.state() == PREPARING_REBALANCE
    # a brand-new group is persisted by an empty GroupMetadata record (generation 0)
    [created] = h.group_records()
    assert (created.generation, created.protocol_type, created.members) == (0, "", [])
    b, fb = h.new_member(client="cb", topics=("t", "u"))
    assert not fa.done() and not fb.done()
    h.advance(3000)  # b joined during the initial delay: extended once
    assert not fa.done()
    h.advance(3000)
    ra, rb = fa.result(), fb.result()
    assert h.state() == COMPLETING_REBALANCE
    assert ra["generation_id"] == rb["generation_id"] == 1
    assert ra["leader"] == rb["leader"] == a  # first member added leads
    assert ra["protocol_type"] == "consumer" and ra["protocol_name"] == "range"
    assert ra["skip_assignment"] is False
    # only the leader gets the member list, with the selected protocol's metadata
    assert {(m["member_id"], m["metadata"]) for m in ra["members"]} == {(a, subscription("t")), (b, subscription("t", "u"))}
    assert rb["members"] == []
    assert len(h.group_records()) == 1  # a non-empty completed join writes nothing

    # followers are parked, not rejected
    sb = h.sync(b, 1)
    assert not sb.done()
    # the leader's assignment is written; nothing is answered before it is durable
    h.hold = True
    sa = h.sync(a, 1, {a: assignment(t=[0, 1])})  # b is missing from the assignment
    assert not sa.done() and not sb.done() and h.state() == COMPLETING_REBALANCE
    h.commit_held()
    h.hold = False
    assert h.state() == STABLE
    assert sa.result() == {"error_code": E.none, "assignment": assignment(t=[0, 1]), "protocol_type": "consumer", "protocol_name": "range"}
    assert sb.result()["error_code"] == E.none and sb.result()["assignment"] == b""
    rec = h.group_records()[-1]
    assert (rec.generation, rec.protocol, rec.leader) == (1, "range", a)
    assert {m.member_id: m.assignment for m in rec.members} == {a: assignment(t=[0, 1]), b: b""}
    assert {m.member_id: m.subscription for m in rec.members} == {a: subscription("t"), b: subscription("t", "u")}
    assert h.heartbeat(a, 1) == E.none and h.heartbeat(b, 1) == E.none


def test_last_member_leaving_empties_group_with_generation_bump_and_record(h):
    (a, b), gen = h.stable_group(2)
    top, res = h.leave(a)
    assert top == E.none and res[0]["error_code"] == E.none
    assert h.state() == PREPARING_REBALANCE
    h.now = 5_000
    h.leave(b)
    g = h.group()
    assert g.state == EMPTY and g.generation == gen + 1
    assert g.protocol_name is None and g.leader_id is None and g.state_timestamp == 5_000
    rec = h.group_records()[-1]
    assert rec.members == [] and rec.generation == gen + 1 and rec.protocol is None and rec.current_state_timestamp == 5_000


def test_session_expiry_of_only_member_empties_group(h):
    [a], gen = h.stable_group(1, session=10_000)
    h.advance(9_999)
    assert h.heartbeat(a, gen) == E.none  # re-armed: expires 10s from now
    h.advance(9_999)
    assert h.state() == STABLE
    records = h.advance(1)
    assert h.state() == EMPTY and h.group().generation == gen + 1
    assert [decode_value(decode_key(k), v).members for k, v in records] == [[]]


def test_illegal_transition_is_refused():
    from broker.coordinator.classic_group import ClassicGroup, IllegalTransition

    g = ClassicGroup("x")
    with pytest.raises(IllegalTransition):
        g.transition(STABLE, 0)
    with pytest.raises(IllegalTransition):
        g.transition(COMPLETING_REBALANCE, 0)


# =========================================================================== KIP-394 (9.3)
def test_v4_dynamic_member_gets_member_id_required_and_is_pending(h):
    fut = h.join(version=4, client="my-client")
    r = fut.result()
    assert r["error_code"] == E.member_id_required
    assert re.fullmatch(rf"my-client-{UUID_RE}", r["member_id"])
    g = h.group()
    assert r["member_id"] in g.pending_members and not g.members
    # coming back with the id adds the member
    f2 = h.join(r["member_id"], version=4, client="my-client")
    assert not f2.done() and r["member_id"] in g.members and not g.pending_members


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_v0_to_v3_members_are_added_directly(h, version):
    fut = h.join(version=version)
    assert not fut.done()
    h.advance(0)
    r = fut.result()
    assert r["error_code"] == E.none and r["generation_id"] == 1 and r["member_id"] in h.group().members


def test_static_members_never_get_member_id_required(h):
    fut = h.join(instance="inst-1", version=5)
    h.advance(0)
    r = fut.result()
    assert r["error_code"] == E.none
    assert re.fullmatch(rf"inst-1-{UUID_RE}", r["member_id"])
    assert h.group().static_members == {"inst-1": r["member_id"]}


def test_pending_member_blocks_join_completion_until_it_expires(h):
    (a,), gen = h.stable_group(1, session=10_000, rebalance=60_000)
    pending = h.join(session=6_000).result()["member_id"]
    fa = h.join(a)  # the leader rejoining forces a rebalance
    assert h.state() == PREPARING_REBALANCE
    # every member rejoined, but a KIP-394 pending member is outstanding
    assert not fa.done()
    h.advance(5_999)
    assert not fa.done()
    h.advance(1)  # the pending member's session timeout: removed, the join completes
    assert fa.result()["generation_id"] == gen + 1 and h.state() == COMPLETING_REBALANCE
    assert pending not in h.group().pending_members
    # the expired id is no longer accepted
    assert err(h.join(pending)) == E.unknown_member_id


def test_pending_member_rejoining_completes_the_rebalance(h):
    (a,), gen = h.stable_group(1)
    pending = h.join().result()["member_id"]
    fa = h.join(a)
    assert not fa.done()
    fp = h.join(pending)
    assert fa.result()["generation_id"] == fp.result()["generation_id"] == gen + 1
    assert {m["member_id"] for m in fa.result()["members"]} == {a, pending}


def test_unknown_member_id_for_new_group_or_unknown_member(h):
    assert err(h.join("nobody")) == E.unknown_member_id
    assert h.group() is None  # not created
    h.stable_group(1)
    assert err(h.join("nobody")) == E.unknown_member_id


# =========================================================================== protocols (1.4)
def test_protocol_vote_picks_most_voted_common_protocol(h):
    h.config.group_initial_rebalance_delay_ms = 1000
    meta = subscription("t")
    fa = h.join(version=3, protocols=[("range", meta), ("roundrobin", meta), ("sticky", meta)])
    fb = h.join(version=3, protocols=[("roundrobin", meta), ("range", meta)])
    fc = h.join(version=3, protocols=[("roundrobin", meta), ("range", meta), ("sticky", meta)])
    h.advance(5000)
    for f in (fa, fb, fc):
        assert f.result()["protocol_name"] == "roundrobin"
    assert h.group().protocol_name == "roundrobin"


def test_inconsistent_group_protocol(h):
    # a new (Empty) group needs a protocol type and at least one protocol
    assert err(h.join(ptype="")) == E.inconsistent_group_protocol
    assert err(h.join(protocols=[])) == E.inconsistent_group_protocol
    (a,), _ = h.stable_group(1)
    meta = subscription("t")
    assert err(h.join(ptype="connect")) == E.inconsistent_group_protocol
    assert err(h.join(protocols=[("roundrobin", meta)])) == E.inconsistent_group_protocol
    assert err(h.join(a, protocols=[("roundrobin", meta)])) == E.inconsistent_group_protocol
    # one protocol in common is enough
    assert err(h.join(protocols=[("roundrobin", meta), ("range", meta)])) == E.member_id_required


def test_rejoin_with_other_protocols_or_metadata_updates_the_vote_and_the_record(h):
    (a, b), gen = h.stable_group(2)
    meta_a = subscription("t", "u")
    # same protocol names, new metadata: the member's metadata is what the next generation carries
    h.join(a, protocols=[("range", meta_a)])
    fb = h.join(b, protocols=[("roundrobin", subscription("t")), ("range", subscription("t"))])
    assert fb.result()["protocol_name"] == "range"
    assert h.group().candidate_protocols() == {"range"}
    assert h.group().members[a].metadata("range") == meta_a
    assert h.group().subscribed == frozenset({"t", "u"})
    # once a offers roundrobin too, both names are common, and both members vote roundrobin first
    gen = fb.result()["generation_id"]
    h.sync(a, gen, {a: assignment(t=[0]), b: assignment(t=[1])})
    h.sync(b, gen)
    h.join(a, protocols=[("roundrobin", meta_a), ("range", meta_a)])
    h.join(b, protocols=[("roundrobin", subscription("t")), ("range", subscription("t"))])
    assert h.group().candidate_protocols() == {"range", "roundrobin"}
    assert h.group().protocol_name == "roundrobin"


def test_subscribed_topics_are_the_union_of_distinct_subscriptions(h):
    futs = [h.new_member(topics=topics)[1] for topics in (("t",), ("t",), ("u", "v"), ("t",))]
    h.advance(h.config.group_initial_rebalance_delay_ms)
    assert all(err(f) == E.none for f in futs)
    assert h.group().subscribed == frozenset({"t", "u", "v"})


def test_one_unparseable_subscription_makes_the_subscribed_topics_unknown(h):
    futs = [h.new_member(topics=("t",))[1] for _ in range(3)] + [h.new_member(protocols=[("range", b"\x00")])[1]]
    h.advance(h.config.group_initial_rebalance_delay_ms)
    assert all(err(f) == E.none for f in futs)
    assert h.group().subscribed is None


# =========================================================================== join phase completion (1.5, 9.2)
def test_rebalance_completes_as_soon_as_all_members_rejoined(h):
    (a, b), gen = h.stable_group(2)
    fa = h.join(a)
    assert h.state() == PREPARING_REBALANCE and not fa.done()
    fb = h.join(b)
    # no timer needed: completed by b's join
    assert fa.result()["generation_id"] == fb.result()["generation_id"] == gen + 1
    assert h.state() == COMPLETING_REBALANCE


def test_follower_rejoin_with_same_metadata_in_stable_is_answered_without_rebalance(h):
    (a, b), gen = h.stable_group(2)
    r = h.join(b).result()
    assert r["error_code"] == E.none and r["generation_id"] == gen and r["leader"] == a and r["members"] == []
    assert h.state() == STABLE
    # changed metadata does trigger one
    fb = h.join(b, topics=("t", "other"))
    assert not fb.done() and h.state() == PREPARING_REBALANCE


def test_rejoin_in_completing_rebalance(h):
    (a, b), gen = h.stable_group(2)
    h.join(a)
    h.join(b)
    assert h.state() == COMPLETING_REBALANCE
    # same metadata: current generation again (the leader gets the members)
    ra = h.join(a).result()
    assert ra["generation_id"] == gen + 1 and len(ra["members"]) == 2 and h.state() == COMPLETING_REBALANCE
    # changed metadata: parked syncs get REBALANCE_IN_PROGRESS and a new rebalance starts
    sb = h.sync(b, gen + 1)
    fb = h.join(b, topics=("x",))
    assert err(sb) == E.rebalance_in_progress and not fb.done() and h.state() == PREPARING_REBALANCE


def test_rebalance_timeout_drops_dynamic_non_rejoiners_and_keeps_static(h):
    ids, gen = h.stable_group(3, instances=[None, "static-b", None], session=60_000, rebalance=20_000)
    a, b, c = ids
    g = h.group()
    assert g.members[b].group_instance_id == "static-b" and g.leader_id == a
    fa = h.join(a, session=60_000, rebalance=20_000)
    h.advance(19_999)
    assert not fa.done()
    h.advance(1)
    r = fa.result()
    assert r["generation_id"] == gen + 1
    assert set(g.members) == {a, b}  # c (dynamic) removed, b (static) kept
    assert {m["member_id"] for m in r["members"]} == {a, b}
    assert h.heartbeat(c, gen + 1) == E.unknown_member_id


def test_new_leader_elected_from_rejoined_members(h):
    (a, b), gen = h.stable_group(2, rebalance=20_000, session=60_000)
    fb = h.join(b, rebalance=20_000, session=60_000, topics=("t", "v"))  # follower changes metadata
    assert h.state() == PREPARING_REBALANCE
    h.advance(20_000)  # the leader never rejoins
    r = fb.result()
    assert r["leader"] == b and [m["member_id"] for m in r["members"]] == [b] and h.group().leader_id == b


# ---------------------------------------------------------------- initial delay
def initial_group(loop, delay=3000):
    return Harness(loop, group_initial_rebalance_delay_ms=delay)


def test_initial_rebalance_waits_for_the_delay_even_if_everyone_joined(loop):
    h = initial_group(loop)
    a, fa = h.new_member(rebalance=10_000)
    assert h.group().has_all_members_joined()
    h.advance(2_999)
    assert not fa.done()
    h.advance(1)
    assert fa.result()["generation_id"] == 1


def test_initial_delay_extended_by_new_members_and_capped_by_rebalance_timeout(loop):
    h = initial_group(loop)
    futs = [h.new_member(rebalance=10_000)[1]]  # t=0: timer at 3000, 7000 remaining
    h.advance(1_000)
    futs.append(h.new_member(rebalance=10_000)[1])  # t=1000: extends
    h.advance(2_000)  # t=3000: re-armed for 3000 more (remaining 4000)
    assert not futs[0].done()
    h.advance(2_000)
    futs.append(h.new_member(rebalance=10_000)[1])  # t=5000
    h.advance(1_000)  # t=6000: re-armed for 3000 (remaining 1000)
    assert not futs[0].done()
    h.advance(2_000)
    futs.append(h.new_member(rebalance=10_000)[1])  # t=8000
    h.advance(1_000)  # t=9000: re-armed for min(3000, 1000) = 1000, remaining 0
    assert not futs[0].done()
    h.advance(500)
    futs.append(h.new_member(rebalance=10_000)[1])  # t=9500: nothing remains to extend
    h.advance(499)
    assert not futs[0].done()
    h.advance(1)  # t=10000 = the rebalance timeout
    assert all(f.result()["generation_id"] == 1 for f in futs)
    assert len(h.group().members) == 5


def test_initial_delay_without_new_members_completes_after_one_delay(loop):
    h = initial_group(loop)
    _, fa = h.new_member(rebalance=10_000)
    h.advance(3_000)
    assert fa.done()


def test_initial_delay_is_also_extended_when_a_group_restarts_from_empty(loop):
    """Kafka 4.1 flags newMemberAdded when previousState == EMPTY (not only at generation 0)."""
    h = initial_group(loop)
    ids, gen = h.stable_group(1, rebalance=10_000)
    h.leave(ids[0])
    assert h.state() == EMPTY and h.group().generation == gen + 1
    _, fa = h.new_member(rebalance=10_000)
    h.advance(1_000)
    _, fb = h.new_member(rebalance=10_000)
    h.advance(2_000)  # the first delay ran out, but a member joined: extended by 3000
    assert not fa.done()
    h.advance(3_000)
    assert fa.result()["generation_id"] == fb.result()["generation_id"] == gen + 2


def test_initial_rebalance_not_completed_early_by_leave(loop):
    h = initial_group(loop)
    _, fa = h.new_member(rebalance=10_000)
    b, fb = h.new_member(rebalance=10_000)
    h.leave(b)
    assert err(fb) == E.unknown_member_id
    assert not fa.done()  # every remaining member has joined, but this is the initial rebalance
    h.advance(3_000)  # b had joined during the delay: extended once
    assert not fa.done()
    h.advance(3_000)
    assert fa.result()["generation_id"] == 1


# =========================================================================== heartbeats and timeouts (1.8, 9.5)
def test_heartbeat_answer_per_state(h):
    assert h.heartbeat("m", 0) == E.unknown_member_id  # no group
    (a, b), gen = h.stable_group(2)
    assert h.heartbeat(a, gen) == E.none  # Stable
    h.join(a)
    assert h.heartbeat(b, gen) == E.rebalance_in_progress  # PreparingRebalance
    h.join(b)
    assert h.state() == COMPLETING_REBALANCE
    assert h.heartbeat(b, gen + 1) == E.none  # CompletingRebalance: NONE, not REBALANCE_IN_PROGRESS
    h.group().state = DEAD
    assert h.heartbeat(b, gen + 1) == E.coordinator_not_available


def test_heartbeat_check_order(h):
    ids, gen = h.stable_group(2, instances=["i-a", None])
    a, b = ids
    # unknown member before generation
    assert h.heartbeat("stranger", gen + 7) == E.unknown_member_id
    # instance id known but mapped to another member: fenced, before generation
    assert h.heartbeat(b, gen + 7, instance="i-a") == E.fenced_instance_id
    # unknown instance id
    assert h.heartbeat(a, gen, instance="i-zz") == E.unknown_member_id
    assert h.heartbeat(a, gen + 1, instance="i-a") == E.illegal_generation
    assert h.heartbeat(a, gen, instance="i-a") == E.none


def test_heartbeat_in_empty_group_is_unknown_member(h):
    # Empty has no members, so validation already answers UNKNOWN_MEMBER_ID
    h.commit()  # a simple (Empty) group
    assert h.state() == EMPTY
    assert h.heartbeat("x", -1) == E.unknown_member_id


def test_heartbeat_keeps_member_alive_and_expiry_rebalances(h):
    (a, b), gen = h.stable_group(2, session=10_000)
    h.advance(9_000)
    assert h.heartbeat(a, gen) == E.none
    h.advance(9_000)
    # b stopped heartbeating and was removed at t=10 s: a rebalance started
    assert b not in h.group().members
    assert h.state() == PREPARING_REBALANCE
    assert h.heartbeat(a, gen) == E.rebalance_in_progress
    fa = h.join(a)
    assert fa.result()["generation_id"] == gen + 1


def test_new_member_join_timeout_is_five_minutes(h):
    (a,), gen = h.stable_group(1, session=10_000, rebalance=600_000)
    # a new member joins: the group rebalances, but the leader takes its time
    b, fb = h.new_member(session=10_000, rebalance=600_000)
    assert h.state() == PREPARING_REBALANCE
    for _ in range(33):  # 297 s of heartbeats from the old member
        h.advance(9_000)
        assert h.heartbeat(a, gen) == E.rebalance_in_progress
    assert not fb.done() and b in h.group().members  # far past its 10 s session timeout
    h.advance(3_000)  # 300 s after it joined: the new member is dropped though still parked
    assert err(fb) == E.unknown_member_id
    assert b not in h.group().members
    fa = h.join(a)
    assert fa.result()["generation_id"] == gen + 1 and len(fa.result()["members"]) == 1


def test_members_parked_in_join_are_not_expired(h):
    (a, b), gen = h.stable_group(2, session=10_000, rebalance=120_000)
    fa = h.join(a, session=10_000, rebalance=120_000)
    for _ in range(6):  # 54 s: a, parked in JoinGroup, does not heartbeat
        h.advance(9_000)
        assert h.heartbeat(b, gen) == E.rebalance_in_progress
    assert a in h.group().members and not fa.done()
    fb = h.join(b, session=10_000, rebalance=120_000)
    assert fa.result()["generation_id"] == fb.result()["generation_id"] == gen + 1


def test_members_parked_in_sync_are_not_expired(h):
    (a, b), gen = h.stable_group(2, session=10_000, rebalance=60_000)
    h.join(a, session=10_000, rebalance=60_000)
    h.join(b, session=10_000, rebalance=60_000)
    assert h.state() == COMPLETING_REBALANCE
    sb = h.sync(b, gen + 1)  # parked, waiting for the leader
    for _ in range(4):  # 36 s: the leader heartbeats (NONE in CompletingRebalance), b does not
        h.advance(9_000)
        assert h.heartbeat(a, gen + 1) == E.none
    assert b in h.group().members and not sb.done()
    h.sync(a, gen + 1, {a: b"x", b: b"y"})
    assert sb.result()["assignment"] == b"y"
    # b's session timer restarted with its answer
    h.advance(9_999)
    assert b in h.group().members
    h.advance(1)
    assert b not in h.group().members


def test_pending_sync_expiry_removes_members_that_never_synced(h):
    (a, b), gen = h.stable_group(2, session=60_000, rebalance=20_000)
    h.join(a, session=60_000, rebalance=20_000)
    h.join(b, session=60_000, rebalance=20_000)
    sa = h.sync(a, gen + 1, {a: assignment(t=[0]), b: assignment(t=[1])})
    assert err(sa) == E.none and h.state() == STABLE
    h.advance(19_999)
    assert b in h.group().members
    h.advance(1)  # rebalance timeout after the join completed: b never sent SyncGroup
    assert b not in h.group().members
    assert h.state() == PREPARING_REBALANCE


def test_sync_from_everyone_cancels_pending_sync_expiry(h):
    (a, b), gen = h.stable_group(2, session=60_000, rebalance=20_000)
    h.advance(25_000)
    assert set(h.group().members) == {a, b} and h.state() == STABLE


def test_heartbeat_timer_restarts_for_synced_members_only_when_assignment_is_durable(h):
    (a, b), gen = h.stable_group(2, session=10_000, rebalance=60_000)
    h.join(a, session=10_000, rebalance=60_000)
    h.join(b, session=10_000, rebalance=60_000)  # join completes at t0: heartbeats re-armed (10 s)
    h.advance(8_000)
    assert h.heartbeat(b, gen + 1) == E.none  # b: 10 s from t0+8
    h.advance(1_000)
    sa = h.sync(a, gen + 1, {a: b"x", b: b"y"})  # t0+9: a's timer restarts with its sync answer
    assert err(sa) == E.none
    h.advance(9_000)  # t0+18: a (re-armed at t0+9) still alive, b (t0+8) has expired
    assert a in h.group().members and b not in h.group().members


def test_sync_in_stable_does_not_count_as_a_heartbeat(h):
    """Kafka answers a SyncGroup in Stable from memory without re-arming the session timer."""
    (a, b), gen = h.stable_group(2, session=10_000)
    h.advance(9_000)
    h.heartbeat(a, gen)
    assert h.sync(b, gen).result()["error_code"] == E.none
    h.advance(1_000)
    assert b not in h.group().members


def test_heartbeat_handler_answers_none_while_loading(loop):
    from broker.coordinator.common import CoordinatorError
    from broker.coordinator.service import GroupCoordinator
    from broker.handlers import heartbeat

    def shard_for(group_id):
        raise CoordinatorError(E.coordinator_load_in_progress)

    service = GroupCoordinator(None, GroupConfig(), fsync_always=False)
    service.shard_for = shard_for
    ctx = SimpleNamespace(version=4, broker=SimpleNamespace(coordinator=service, authorizer=None))
    req = SimpleNamespace(group_id=G, member_id="m", generation_id=1, group_instance_id=None)
    assert loop.run_until_complete(heartbeat.handle(ctx, req))["error_code"] == E.none


# =========================================================================== SyncGroup (1.6)
def test_sync_validation(h):
    assert err(h.sync("m", 0)) == E.unknown_member_id  # no group
    h.commit()  # a simple, Empty group
    assert err(h.sync("m", 0)) == E.unknown_member_id
    h2 = Harness(h.loop)
    (a, b), gen = h2.stable_group(2, instances=["i-a", None])
    assert err(h2.sync("stranger", gen)) == E.unknown_member_id
    assert err(h2.sync(b, gen, instance="i-a")) == E.fenced_instance_id
    assert err(h2.sync(b, gen + 1)) == E.illegal_generation
    assert err(h2.sync(b, gen, ptype="connect")) == E.inconsistent_group_protocol
    assert err(h2.sync(b, gen, pname="roundrobin")) == E.inconsistent_group_protocol
    # null protocol type/name (v<5) are not checked
    r = h2.sync(b, gen, ptype=None, pname=None).result()
    assert r["error_code"] == E.none and r["assignment"] == assignment(t=[1])  # Stable: stored assignment
    h2.join(a, instance="i-a")
    assert err(h2.sync(b, gen)) == E.rebalance_in_progress
    h2.group().state = DEAD
    assert err(h2.sync(b, gen)) == E.coordinator_not_available


def test_failed_assignment_write_errors_parked_syncs_and_rebalances(h):
    (a, b), gen = h.stable_group(2)
    h.join(a)
    h.join(b)
    sb = h.sync(b, gen + 1)
    h.hold = True
    sa = h.sync(a, gen + 1, {a: assignment(t=[0]), b: assignment(t=[1])})
    assert not sa.done()
    h.hold = False
    h.fail_held(E.not_coordinator)
    assert err(sa) == E.not_coordinator and err(sb) == E.not_coordinator
    g = h.group()
    assert g.state == PREPARING_REBALANCE and all(m.assignment == b"" for m in g.members.values())
    # nothing was made durable for that generation
    assert all(r.generation != gen + 1 for r in h.group_records())


def test_assignment_commit_after_generation_moved_on_is_ignored(h):
    (a, b), gen = h.stable_group(2)
    h.join(a)
    h.join(b)
    h.hold = True
    sa = h.sync(a, gen + 1, {a: b"x", b: b"y"})
    fb = h.join(b, topics=("other",))  # metadata change: new rebalance before the write is durable
    assert err(sa) == E.rebalance_in_progress
    h.commit_held()
    h.hold = False
    assert h.state() == PREPARING_REBALANCE and not fb.done()


# =========================================================================== static membership (1.7, 9.6)
def static_group(h, version=9, **kw):
    ids, gen = h.stable_group(2, instances=["i-a", "i-b"], version=version, **kw)
    return ids[0], ids[1], gen


def test_static_leader_replacement_in_stable_v9(h):
    a, b, gen = static_group(h)
    old_assignment = h.group().members[a].assignment
    n_records = len(h.group_records())
    h.hold = True
    fut = h.join(instance="i-a", version=9)
    assert not fut.done()  # answered once the GroupMetadata record is durable
    h.commit_held()
    h.hold = False
    r = fut.result()
    new = r["member_id"]
    assert new != a and re.fullmatch(rf"i-a-{UUID_RE}", new)
    assert r["error_code"] == E.none and r["generation_id"] == gen and r["leader"] == new and r["skip_assignment"] is True
    assert {m["member_id"] for m in r["members"]} == {new, b}
    g = h.group()
    assert g.state == STABLE and g.generation == gen and g.leader_id == new
    assert g.members[new].assignment == old_assignment
    rec = h.group_records()
    assert len(rec) == n_records + 1
    assert {m.member_id for m in rec[-1].members} == {new, b} and rec[-1].leader == new
    assert {m.member_id: m.assignment for m in rec[-1].members}[new] == old_assignment
    # the old id is fenced everywhere
    assert h.heartbeat(a, gen, instance="i-a") == E.fenced_instance_id
    assert err(h.sync(a, gen, instance="i-a")) == E.fenced_instance_id
    assert err(h.join(a, instance="i-a")) == E.fenced_instance_id
    assert {c for _, _, c in h.commit(a, gen, instance="i-a")} == {E.fenced_instance_id}
    assert h.heartbeat(a, gen) == E.unknown_member_id
    # the new member syncs and gets its old assignment, no rebalance happened
    assert h.sync(new, gen, instance="i-a").result()["assignment"] == old_assignment
    assert h.heartbeat(new, gen, instance="i-a") == E.none and h.state() == STABLE


@pytest.mark.parametrize("version", [5, 8])
def test_static_replacement_before_v9_reports_old_leader(h, version):
    a, b, gen = static_group(h, version=version)
    r = h.join(instance="i-a", version=version).result()
    # the restarted leader is told the *old* leader id, so it acts as a follower
    assert r["leader"] == a and r["members"] == [] and r["skip_assignment"] is False
    assert r["generation_id"] == gen and h.group().leader_id == r["member_id"]
    rb = h.join(instance="i-b", version=version).result()
    assert rb["leader"] == r["member_id"] and rb["members"] == []
    assert h.state() == STABLE


def test_static_follower_replacement_v9(h):
    a, b, gen = static_group(h)
    r = h.join(instance="i-b").result()
    assert r["leader"] == a and r["members"] == [] and r["skip_assignment"] is False and r["generation_id"] == gen
    assert h.state() == STABLE


def test_static_replacement_failed_write_reverts(h):
    a, b, gen = static_group(h)
    h.hold = True
    fut = h.join(instance="i-a")
    h.hold = False
    h.fail_held(E.not_coordinator)
    r = fut.result()
    assert r["error_code"] == E.not_coordinator and r["member_id"] == ""
    g = h.group()
    assert g.static_members["i-a"] == a and a in g.members and g.leader_id == a
    assert h.heartbeat(a, gen, instance="i-a") == E.none


def test_static_replacement_with_protocol_change_in_stable_rebalances(h):
    a, b, gen = static_group(h)
    meta = subscription("t")
    both = [("roundrobin", meta), ("range", meta)]
    r = h.join(instance="i-b", protocols=both).result()
    # range is still the only common protocol: no rebalance
    assert r["error_code"] == E.none and r["generation_id"] == gen and h.state() == STABLE
    # now both members prefer roundrobin: the selection would change, so a rebalance runs
    fut = h.join(instance="i-a", protocols=both)
    assert not fut.done() and h.state() == PREPARING_REBALANCE
    fb = h.join(r["member_id"], instance="i-b", protocols=both)
    assert fut.result()["protocol_name"] == fb.result()["protocol_name"] == "roundrobin"


def test_static_replacement_during_completing_rebalance_rebalances(h):
    a, b, gen = static_group(h)
    h.join(a, instance="i-a")
    h.join(b, instance="i-b")
    assert h.state() == COMPLETING_REBALANCE
    sb = h.sync(b, gen + 1, instance="i-b")
    fut = h.join(instance="i-b")
    assert err(sb) == E.fenced_instance_id  # the old id's parked sync is fenced
    assert h.state() == PREPARING_REBALANCE and not fut.done()
    new_b = h.group().static_members["i-b"]
    fa = h.join(a, instance="i-a")
    assert fa.result()["generation_id"] == fut.result()["generation_id"] == gen + 2
    assert fut.result()["member_id"] == new_b


def test_static_replacement_fences_parked_join(h):
    a, b, gen = static_group(h)
    fa = h.join(a, instance="i-a")  # the leader rejoins: rebalance, a parked
    assert not fa.done() and h.state() == PREPARING_REBALANCE
    fresh = h.join(instance="i-a")  # ...and restarts meanwhile
    r = fa.result()
    assert r["error_code"] == E.fenced_instance_id and r["member_id"] == a and r["leader"] == ""
    assert not fresh.done() and h.state() == PREPARING_REBALANCE
    fb = h.join(b, instance="i-b")
    r = fresh.result()
    assert r["generation_id"] == fb.result()["generation_id"] == gen + 1
    assert r["leader"] == r["member_id"]  # leadership moved with the instance


def test_static_members_expire_only_by_session_timeout(h):
    ids, gen = h.stable_group(2, instances=["i-a", "i-b"], session=30_000, rebalance=10_000)
    a, b = ids
    fa = h.join(a, instance="i-a", session=30_000, rebalance=10_000)
    h.advance(10_000)  # join timeout: b (static) did not rejoin but is kept
    assert fa.result()["generation_id"] == gen + 1
    assert b in h.group().members
    assert {m["member_id"] for m in fa.result()["members"]} == {a, b}
    h.sync(a, gen + 1, {a: b"x", b: b"y"}, instance="i-a")
    assert h.sync(b, gen + 1, instance="i-b").result()["assignment"] == b"y"
    for _ in range(4):  # only the leader heartbeats: b goes by its session timeout
        h.advance(9_000)
        h.heartbeat(a, gen + 1, instance="i-a")
    assert b not in h.group().members and a in h.group().members


def test_static_member_known_id_checks(h):
    a, b, gen = static_group(h)
    assert err(h.join(a, instance="unknown")) == E.unknown_member_id
    assert err(h.join(b, instance="i-a")) == E.fenced_instance_id


# =========================================================================== LeaveGroup (1.9)
def test_leave_group_batch(h):
    ids, gen = h.stable_group(3, instances=[None, "i-b", "i-c"])
    a, b, c = ids
    top, res = h.leave((c, "i-b", None), (a, None, "bye"), ("", "i-b", None), ("", "i-zz", None), ("ghost", None, None))
    assert top == E.none
    assert [r["error_code"] for r in res] == [E.fenced_instance_id, E.none, E.none, E.unknown_member_id, E.unknown_member_id]
    assert [(r["member_id"], r["group_instance_id"]) for r in res] == [(c, "i-b"), (a, None), ("", "i-b"), ("", "i-zz"), ("ghost", None)]
    g = h.group()
    assert set(g.members) == {c} and "i-b" not in g.static_members
    assert g.state == PREPARING_REBALANCE


def test_leave_unknown_group_and_dead_group(h):
    # Kafka 4.1 (seen in the conformance suite): top-level NONE, each member UNKNOWN_MEMBER_ID
    top, per_member = h.leave("m")
    assert top == E.none and [r["error_code"] for r in per_member] == [E.unknown_member_id]
    (a,), _ = h.stable_group(1)
    h.group().state = DEAD
    assert h.leave(a)[0] == E.coordinator_not_available


def test_leave_answers_parked_join_and_completes_the_rebalance(h):
    (a, b), gen = h.stable_group(2)
    fa = h.join(a)
    top, res = h.leave(b)
    # b was the only one missing: the join phase completes at once
    assert fa.result()["generation_id"] == gen + 1 and len(fa.result()["members"]) == 1
    fa2 = h.join(a)
    assert fa2.done()  # CompletingRebalance, same metadata: current generation
    top, res = h.leave(a)
    assert h.state() == EMPTY


def test_leave_of_a_member_parked_in_join(h):
    (a, b), gen = h.stable_group(2)
    fa = h.join(a)
    h.leave(a)
    assert err(fa) == E.unknown_member_id


def test_leave_of_a_pending_member(h):
    (a,), gen = h.stable_group(1)
    pending = h.join().result()["member_id"]
    top, res = h.leave(pending)
    assert res[0]["error_code"] == E.none and pending not in h.group().pending_members
    # Kafka counts it as a member that left: a Stable group rebalances
    assert h.state() == PREPARING_REBALANCE


# =========================================================================== group.max.size (1.3)
def test_group_max_size(loop):
    h = Harness(loop, group_max_size=2)
    (a, b), gen = h.stable_group(2)
    r = h.join().result()
    assert r["error_code"] == E.group_max_size_reached and r["member_id"] == ""
    # existing members are accepted
    fa = h.join(a)
    assert h.state() == PREPARING_REBALANCE
    # PreparingRebalance: new joiners only while fewer than max.size are awaiting join
    assert not h.join(version=3).done()  # 1 awaiting < 2: accepted, parked
    assert err(h.join(version=3)) == E.group_max_size_reached  # 2 awaiting
    assert not fa.done()


def test_group_max_size_sheds_rejoining_members_of_an_oversized_loaded_group(loop):
    h = Harness(loop, group_max_size=2)
    members = [MemberMetadata(f"m{i}", None, "c", "/h", 30_000, 10_000, subscription("t"), b"") for i in range(3)]
    value = GroupMetadataValue("consumer", 4, "range", "m0", 1, members)
    h.shard.replay_bytes(encode_key(GroupMetadataKey(G)), encode_value(value))
    h.apply(lambda s: s.on_loaded())
    assert h.state() == PREPARING_REBALANCE  # over group.max.size: rebalance at load
    f0, f1 = h.join("m0"), h.join("m1")
    f2 = h.join("m2")
    assert err(f2) == E.group_max_size_reached and f2.result()["member_id"] == ""
    assert "m2" not in h.group().members
    # like Kafka, the shed member's removal does not complete the join phase by itself
    assert not f0.done()
    h.advance(30_000)
    assert f0.result()["generation_id"] == f1.result()["generation_id"] == 5


# =========================================================================== JoinGroup handler checks (1.3 service layer)
def test_join_handler_checks_session_timeout_bounds_and_group_id(loop):
    from broker.handlers import join_group

    ctx = SimpleNamespace(version=9, broker=SimpleNamespace(coordinator=SimpleNamespace(config=GroupConfig()), authorizer=None))

    def req(group_id="g", session=10_000):
        return SimpleNamespace(group_id=group_id, member_id="", session_timeout=session, rebalance_timeout=30_000, protocol_type="consumer", protocols=[])

    run = loop.run_until_complete
    assert run(join_group.handle(ctx, req(session=5_999)))["error_code"] == E.invalid_session_timeout
    assert run(join_group.handle(ctx, req(session=1_800_001)))["error_code"] == E.invalid_session_timeout
    assert run(join_group.handle(ctx, req(group_id="")))["error_code"] == E.invalid_group_id


# =========================================================================== loading (5.4) and record round trip
def test_replay_rebuilds_stable_group_and_arms_session_timers(h, loop):
    ids, gen = h.stable_group(2, instances=["i-a", None], session=10_000)
    a, b = ids
    h.commit(a, gen, instance="i-a", parts=(("t", 0, 42, "meta"),))
    fresh = Harness(loop)
    fresh.now = h.now
    for k, v in h.durable:
        fresh.shard.replay_bytes(k, v)
    fresh.apply(lambda s: s.on_loaded())
    g, old = fresh.group(), h.group()
    assert g.state == STABLE and g.generation == gen and g.protocol_type == "consumer" and g.protocol_name == "range"
    assert g.leader_id == old.leader_id and g.static_members == {"i-a": a}
    assert {m: x.assignment for m, x in g.members.items()} == {m: x.assignment for m, x in old.members.items()}
    assert g.members[a].protocols == [("range", subscription("t"))]
    assert fresh.shard.offset_fetch(G, [("t", [0])], stable=False)[0][2].offset == 42
    assert fresh.heartbeat(a, gen, instance="i-a") == E.none
    assert fresh.sync(b, gen).result()["assignment"] == old.members[b].assignment
    fresh.advance(5_000)
    assert fresh.heartbeat(a, gen, instance="i-a") == E.none
    fresh.advance(5_000)  # b never heartbeated after the load: expired
    assert b not in fresh.group().members and fresh.state() == PREPARING_REBALANCE


def test_replay_of_empty_record_gives_empty_group_and_tombstone_deletes(h, loop):
    (a,), gen = h.stable_group(1)
    h.leave(a)
    fresh = Harness(loop)
    for k, v in h.durable:
        fresh.shard.replay_bytes(k, v)
    g = fresh.group()
    assert g.state == EMPTY and g.generation == gen + 1 and not g.members and g.protocol_type == "consumer"
    assert g.state_timestamp == h.group().state_timestamp
    fresh.shard.replay_bytes(encode_key(GroupMetadataKey(G)), None)
    assert fresh.group() is None


def test_replay_missing_rebalance_timeout_defaults_to_session_timeout(loop):
    h = Harness(loop)
    m = MemberMetadata("m0", None, "c", "/h", -1, 12_000, subscription("t"), b"")
    h.shard.replay_bytes(encode_key(GroupMetadataKey(G)), encode_value(GroupMetadataValue("consumer", 1, "range", "m0", -1, [m])))
    assert h.group().members["m0"].rebalance_timeout_ms == 12_000


def test_every_written_record_decodes_and_replays(h, loop):
    """All records a busy group writes round-trip through the codecs and replay."""
    ids, gen = h.stable_group(3, instances=[None, "i-b", None])
    h.commit(ids[0], gen, parts=(("t", 0, 1, "x"), ("t", 1, 2, None)))
    h.join(instance="i-b")
    h.leave(ids[2])
    for k, v in h.durable:
        key = decode_key(k)
        assert isinstance(key, GroupMetadataKey | OffsetCommitKey)
        value = decode_value(key, v)
        assert value is None or encode_value(value) == v
    fresh = Harness(loop)
    for k, v in h.durable:
        fresh.shard.replay_bytes(k, v)
    assert fresh.shard.offsets.latest == h.shard.offsets.latest
    assert fresh.group().generation == h.group().generation


def test_assignment_bytes_helper_is_consumer_protocol():
    assert assigned_partitions(assignment(t=[0, 2])) == {("t", 0), ("t", 2)}


def test_rebalance_record_counts_partitions_of_members_that_left(h):
    """When every member leaves, all their partitions show as moved in the rebalance event."""
    a, b = h.stable_group(2)[0]
    h.leave(a, b)
    done = [kw for event, kw in h.log.events if event == "rebalance completed"]
    assert done[-1]["state"] == "Empty"
    assert sorted(done[-1]["partitions_moved"]) == ["t-0", "t-1"]
    assert {m["member"] for m in done[-1]["members_left"]} == {a, b}


# =========================================================================== a stalled event loop (runtime.LoopWatch)
# One loop reads the sockets and fires the timers; with uvloop, timers that came
# due while the loop could not run fire before the requests that arrived meanwhile
# are read. The shard's timers are given the time the loop lost, once.
def lossy(h):
    """Let the shard's timers see ``h.lost``: the ms the event loop could not run (LoopWatch.lost_ms in the broker)."""
    h.lost = 0
    h.shard.lost_ms = h.shard.timers.lost_ms = lambda: h.lost
    return h


def test_session_timer_due_after_a_stall_waits_for_the_heartbeat_queued_behind_it(h):
    lossy(h)
    (a, b), gen = h.stable_group(2, session=10_000)
    h.advance(1_000)
    assert h.heartbeat(a, gen) == E.none and h.heartbeat(b, gen) == E.none  # both due at 11 s
    h.lost += 9_500  # the loop stalls from 1.5 s to 11 s; a heartbeats meanwhile, b has died
    h.advance(10_000)
    assert set(h.group().members) == {a, b} and h.state() == STABLE  # neither is fenced for the broker's delay
    assert h.heartbeat(a, gen) == E.none  # a's heartbeat, read once the timers have run
    h.advance(5_000)
    assert h.heartbeat(a, gen) == E.none
    h.advance(4_499)  # b's timer, due at 11 s, was given the 9.5 s back: 20.5 s
    assert b in h.group().members
    h.advance(1)
    assert b not in h.group().members and a in h.group().members
    assert h.state() == PREPARING_REBALANCE
    expired = [kw for event, kw in h.log.events if event == "member expired"]
    assert [(kw["member"], kw["timer_late_ms"]) for kw in expired] == [(b, 0)]


def test_time_given_back_is_at_most_the_timers_own_delay(h):
    lossy(h)
    [a], gen = h.stable_group(1, session=10_000)  # due at 10 s
    h.lost += 3_600_000  # the broker's machine slept for an hour
    h.advance(10_000)
    assert a in h.group().members
    h.advance(9_999)  # given back 10 s, not an hour
    assert a in h.group().members
    h.advance(1)
    assert h.state() == EMPTY


def test_time_is_given_back_once_even_if_the_loop_keeps_stalling(h):
    lossy(h)
    [a], gen = h.stable_group(1, session=10_000)  # a's session: due at 10 s
    h.lost += 4_000
    h.advance(10_000)  # due: 4 s lost while pending, so it moves to 14 s
    assert a in h.group().members
    h.lost += 4_000  # more stalls: no second extension
    h.advance(3_999)
    assert a in h.group().members
    h.advance(1)
    assert h.state() == EMPTY


def test_timers_armed_after_a_stall_are_not_extended_for_it(h):
    lossy(h)
    h.lost = 60_000  # long gone
    [a], gen = h.stable_group(1, session=10_000)
    h.advance(9_999)
    assert a in h.group().members
    h.advance(1)
    assert h.state() == EMPTY


def test_join_phase_timeout_after_a_stall_waits_for_the_queued_rejoin(h):
    lossy(h)
    (a, b), gen = h.stable_group(2, session=60_000, rebalance=30_000)
    fa = h.join(a, session=60_000, rebalance=30_000)  # rebalance: b has 30 s to rejoin
    assert h.state() == PREPARING_REBALANCE
    h.lost += 31_000
    h.advance(31_000)
    assert not fa.done() and b in h.group().members  # the join phase did not end without b
    fb = h.join(b, session=60_000, rebalance=30_000)  # b's JoinGroup, waiting behind the stall
    assert fa.result()["generation_id"] == fb.result()["generation_id"] == gen + 1
    assert len(fa.result()["members"]) == 2


def test_loop_watch_counts_late_ticks_and_a_stall_still_in_progress(loop):
    from broker.coordinator.runtime import LoopWatch

    now = [0]
    watch = LoopWatch(loop, clock_ms=lambda: now[0], period_ms=100, tolerance_ms=50)
    watch.start()
    try:
        now[0] = 100
        watch.tick()  # on time
        now[0] = 230
        watch.tick()  # 30 ms late: within the tolerance
        assert watch.lost_ms() == 0 and watch.stalls == 0
        now[0] = 3_330  # no tick for 3.1 s: a stall in progress is counted before the tick runs
        assert watch.lost_ms() == 3_000
        watch.tick()
        assert watch.lost_ms() == 3_000 and watch.stalls == 1
        now[0] = 3_430
        watch.tick()
        assert watch.lost_ms() == 3_000
    finally:
        watch.stop()
    now[0] = 10_000
    assert watch.lost_ms() == 3_000  # stopped: no stall in progress


def test_loop_watch_remembers_the_longest_stall_of_the_last_30_s(loop):
    from broker.coordinator.runtime import RECENT_MS, LoopWatch

    now = [0]
    watch = LoopWatch(loop, clock_ms=lambda: now[0], period_ms=100, tolerance_ms=50)

    def stall(late: int) -> None:
        now[0] += 100 + late
        watch.tick()

    def on_time(ms: int) -> None:
        for _ in range(ms // 100):
            now[0] += 100
            watch.tick()

    watch.start()
    try:
        on_time(1_000)
        assert watch.recent_stall_ms() == 0
        stall(400)
        on_time(1_000)
        stall(200)
        assert watch.recent_stall_ms() == 400
        now[0] += 1_100  # a stall in progress, 1 s over: counted before its tick
        assert watch.recent_stall_ms() == 1_000
        watch.tick()
        on_time(RECENT_MS - 1_000)  # the 400 ms stall is older than 30 s now; the 1 s one is not
        assert watch.recent_stall_ms() == 1_000
        on_time(1_500)
        assert watch.recent_stall_ms() == 0  # all older than 30 s
    finally:
        watch.stop()


def test_loop_watch_gives_a_shorter_later_stall_once_a_longer_earlier_one_is_older_than_30_s(loop):
    from broker.coordinator.runtime import RECENT_MS, LoopWatch

    now = [0]
    watch = LoopWatch(loop, clock_ms=lambda: now[0], period_ms=100, tolerance_ms=50)
    watch.start()
    try:
        for late in (600, 0, 300, 0, 0):  # at 700 ms a 600 ms stall, at 1,200 ms a 300 ms one
            now[0] += 100 + late
            watch.tick()
        assert watch.recent_stall_ms() == 600
        while now[0] <= 700 + RECENT_MS:
            now[0] += 100
            watch.tick()
        assert watch.recent_stall_ms() == 300  # the 600 ms stall has left the window
        while now[0] <= 1_200 + RECENT_MS:
            now[0] += 100
            watch.tick()
        assert watch.recent_stall_ms() == 0
    finally:
        watch.stop()


def test_stalls_of_a_burst_of_work_are_not_a_stalling_loop_three_of_100_ms_in_30_s_are(loop):
    from broker.coordinator.runtime import RECENT_MS, SUSTAINED_OVER_MS, SUSTAINED_STALLS, LoopWatch

    now = [0]
    watch = LoopWatch(loop, clock_ms=lambda: now[0], period_ms=100, tolerance_ms=50)
    watch.start()
    try:
        assert (SUSTAINED_STALLS, SUSTAINED_OVER_MS) == (3, 100)
        for late in (78, 0, 76, 0, 61, 0):  # a thousand members joining at once (measured: bench.handover)
            now[0] += 100 + late
            watch.tick()
        assert watch.recent_stall_ms() == 78 and watch.sustained_stall_ms() == 0
        for late in (120, 0, 150, 0):  # two stalls of 100 ms or more: not yet
            now[0] += 100 + late
            watch.tick()
        assert watch.sustained_stall_ms() == 0
        first = now[0] - 100 - 250 - 100  # when the 120 ms stall came
        now[0] += 100 + 300  # a third, still in progress: counted
        assert watch.sustained_stall_ms() == 300
        watch.tick()
        assert watch.sustained_stall_ms() == 300
        while now[0] <= first + RECENT_MS:  # the 120 ms one leaves the window: two left
            now[0] += 100
            watch.tick()
        assert watch.sustained_stall_ms() == 0 and watch.recent_stall_ms() == 300
    finally:
        watch.stop()


def test_runtime_shards_see_the_loop_watch(loop):
    from broker.coordinator.runtime import LoopWatch, ShardRuntime

    async def build():
        watch = LoopWatch(asyncio.get_running_loop())
        partition = SimpleNamespace(index=0, log=None)
        rt = ShardRuntime(0, partition, GroupConfig(), fsync_always=False, log=StubLog(), watch=watch)
        return watch, rt

    watch, rt = loop.run_until_complete(build())
    assert rt.shard.timers.lost_ms == watch.lost_ms
    rt.shard.reset()  # a failed append rebuilds the shard's timers: they keep the watch
    assert rt.shard.timers.lost_ms == watch.lost_ms
    assert rt.shard.recent_stall_ms == watch.sustained_stall_ms  # the KIP-848 interval's floor


def test_a_replay_failure_after_the_append_answers_the_waiting_request(loop):
    """A bug in replaying durable records must not leave the request parked forever: the
    write fails with a coordinator error and the shard is rebuilt from its log."""
    from broker.coordinator.common import CoordinatorError
    from broker.coordinator.runtime import ACTIVE, LOADING, ShardRuntime

    appended = []
    log = SimpleNamespace(config=SimpleNamespace(max_message_bytes=1_000_000), append=lambda batches, leader_epoch: appended.append(batches))
    async def run():
        partition = SimpleNamespace(index=0, log=log, append=lambda batches, origin: log.append(batches, 0))
        rt = ShardRuntime(0, partition, GroupConfig(), fsync_always=False, log=StubLog())
        rt.state = ACTIVE

        async def no_reload():  # the stub log has nothing to load from
            return None

        rt.load = no_reload

        def broken_commit(key, value):
            raise RuntimeError("replay bug")

        rt.shard.commit_record = broken_commit
        key = OffsetCommitKey("g", "t", 0)
        from protocol.group_records import OffsetCommitValue

        value = OffsetCommitValue(offset=5, leader_epoch=-1, metadata="", commit_timestamp=0, expire_timestamp=-1)

        def op(shard):
            shard.emit(key, value)
            return Result(response="ok")

        with pytest.raises(CoordinatorError):
            # the bound only keeps a regression from hanging the suite
            await asyncio.wait_for(rt.write(op), 30)
        return rt

    rt = loop.run_until_complete(run())
    assert appended, "the records were appended before the replay failed"
    assert rt.state == LOADING  # rebuilt from the log, where the records are


def test_rebalance_event_names_only_the_partitions_whose_owner_changed(h, monkeypatch):
    """Members whose assignment bytes did not change are not parsed, and their partitions never count as moved."""
    import broker.coordinator.classic as classic_mod

    parsed = []
    real = classic_mod.assigned_partitions
    monkeypatch.setattr(classic_mod, "assigned_partitions", lambda raw: parsed.append(bytes(raw)) or real(raw))
    ids, gen = h.stable_group(3)
    leader, b, c = ids
    futs = [h.join(m) for m in ids]  # every member rejoins (the leader first: a new generation)
    h.advance(2 * h.config.group_initial_rebalance_delay_ms)
    answers = [f.result() for f in futs]
    assert all(a["error_code"] == E.none for a in answers), answers
    gen2 = answers[0]["generation_id"]
    assert gen2 == gen + 1
    # the leader and b keep their bytes; c's partition 2 goes to the leader, c takes partition 3
    plan = {leader: assignment(t=[0, 2]), b: assignment(t=[1]), c: assignment(t=[3])}
    parsed.clear()
    syncs = [h.sync(m, gen2, plan if m == leader else {}) for m in ids]
    assert all(s.result()["error_code"] == E.none for s in syncs)
    done = [kw for event, kw in h.log.events if event == "rebalance completed"]
    assert sorted(done[-1]["partitions_moved"]) == ["t-2", "t-3"]
    assert assignment(t=[1]) not in parsed  # b kept its bytes: not parsed


# =========================================================================== liveness from what arrived (arrivals.py)
def test_a_classic_member_whose_heartbeat_is_queued_is_not_expired_and_a_dead_one_is(h):
    from broker.coordinator.arrivals import Arrivals

    arrivals = Arrivals(clock=lambda: h.now / 1000)
    h.shard.waiting, h.shard.silent_ms = arrivals.waiting, arrivals.silent_ms
    (a, b), gen = h.stable_group(2, session=10_000)
    hb = SimpleNamespace(api_key=12, body=SimpleNamespace(group_id=G, member_id=a))
    h.advance(9_990)
    arrivals.arrived(hb)  # a's heartbeat is read, and waits behind other work
    h.advance(10)  # both sessions are due
    assert a in h.group().members and b not in h.group().members
    arrivals.started(hb)
    assert h.heartbeat(a, gen) in (E.none, E.rebalance_in_progress)
    expired = [kw["member"] for event, kw in h.log.events if event == "member expired"]
    assert expired == [b]


def test_a_join_phase_waits_for_a_join_that_arrived(h):
    from broker.coordinator.arrivals import Arrivals

    arrivals = Arrivals(clock=lambda: h.now / 1000)
    h.shard.waiting, h.shard.silent_ms = arrivals.waiting, arrivals.silent_ms
    (a, b), gen = h.stable_group(2, session=10_000, rebalance=10_000)
    h.join(a, rebalance=10_000)  # a rejoins: the join phase starts, b has 10 s to rejoin
    assert h.state() == PREPARING_REBALANCE
    join_b = SimpleNamespace(api_key=11, body=SimpleNamespace(group_id=G, member_id=b))
    h.advance(9_900)
    arrivals.arrived(join_b)  # b's JoinGroup is read, not yet handled
    h.advance(100)
    assert h.state() == PREPARING_REBALANCE and b in h.group().members
    arrivals.started(join_b)
    h.join(b, rebalance=10_000)
    assert h.state() == COMPLETING_REBALANCE and set(h.group().members) == {a, b}


def test_a_join_phase_waits_for_a_queued_join_for_at_most_the_rebalance_timeout_again(h):
    from broker.coordinator.arrivals import Arrivals

    arrivals = Arrivals(clock=lambda: h.now / 1000)
    h.shard.waiting, h.shard.silent_ms = arrivals.waiting, arrivals.silent_ms
    (a, b), gen = h.stable_group(2, session=60_000, rebalance=10_000)
    h.join(a, session=60_000, rebalance=10_000)
    arrivals.arrived(SimpleNamespace(api_key=11, body=SimpleNamespace(group_id=G, member_id=b)))  # never handled
    h.advance(19_999)
    assert h.state() == PREPARING_REBALANCE
    h.advance(1)
    assert h.state() == COMPLETING_REBALANCE and set(h.group().members) == {a}
