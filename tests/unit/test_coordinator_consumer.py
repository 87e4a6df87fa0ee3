"""KIP-848 consumer group protocol (ConsumerGroupHeartbeat) on one coordinator shard.

Deterministic: a manual clock, timers fired by hand, no sockets, no sleeping.
The behavioural reference is shared/reference/group-coordinator.md (Kafka
4.1): section 3 (3.3 heartbeat processing, 3.4 reconciliation, 3.5 leaving
and expiry, 3.7 regexes, 3.10 offsets) and item 10 of section 9. Migration
between classic and consumer groups is in test_coordinator_migration.py.

``ConsumerHarness`` extends the classic tests' runtime emulation with a real
``broker.cluster.MetadataView`` (RE2 regexes, a version bumped on every topic
change) and helpers that speak ConsumerGroupHeartbeat in topic names.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from broker.cluster import MetadataView
from broker.coordinator.consumer import PENDING_HEARTBEATS_PER_S, STALL_FACTOR, HeartbeatParams
from broker.coordinator.consumer_group import (
    ASSIGNING,
    EMPTY,
    RECONCILING,
    STABLE,
    STABLE_GROUP,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
)
from broker.coordinator.offsets import CommitPartition
from broker.coordinator.shard import GroupShard
from broker.handlers import consumer_group_heartbeat as cghb
from protocol.errors import ErrorCode
from protocol.group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    OffsetCommitKey,
    decode_key,
    decode_value,
)

from broker.coordinator.common import CoordinatorError

from .test_coordinator_classic import Harness

E = ErrorCode
G = "cg"
T_ID, U_ID = uuid.UUID(int=0xA1), uuid.UUID(int=0xB2)


# =========================================================================== harness
class ConsumerHarness(Harness):
    def __init__(self, loop, **config) -> None:
        super().__init__(loop, **config)
        self.meta = MetadataView()
        self.topics: dict[str, SimpleNamespace] = {}
        self.shard = self._new_shard()

    def _new_shard(self) -> GroupShard:
        return GroupShard(0, self.config, lambda: self.now, self.log, self.loop.create_future, submit=self._submit, metadata=self.meta)

    # ---------------------------------------------------------------- topics
    def topic(self, name: str, partitions: int, topic_id: uuid.UUID | None = None) -> uuid.UUID:
        """Create a topic, or change its partition count; bumps the metadata version."""
        old = self.topics.get(name)
        tid = topic_id or (old.topic_id if old else uuid.uuid5(uuid.NAMESPACE_DNS, name))
        self.topics[name] = SimpleNamespace(name=name, topic_id=tid, partitions=list(range(partitions)), internal=False)
        self.meta.refresh(self.topics)
        return tid

    def tid(self, name: str) -> uuid.UUID:
        return self.topics[name].topic_id

    def ids(self, parts: dict[str, list[int]] | None):
        if parts is None:
            return None
        return {self.tid(t): frozenset(ps) for t, ps in parts.items() if ps}

    def names(self, asg) -> dict[str, list[int]]:
        """{topic_id: frozenset} or a response assignment -> {name: sorted partitions}."""
        if isinstance(asg, dict) and "topic_partitions" in asg:
            asg = {tp["topic_id"]: tp["partitions"] for tp in asg["topic_partitions"]}
        return {self.meta.by_id[tid]: sorted(ps) for tid, ps in asg.items() if ps}

    # ---------------------------------------------------------------- requests
    def hb(self, member_id: str = "", epoch: int = 0, *, group: str = G, instance: str | None = None, rack: str | None = None,
           rebalance: int = -1, topics=None, regex: str | None = None, assignor: str | None = None, owned=None, version: int = 1) -> dict:
        """One ConsumerGroupHeartbeat; ``owned`` is {topic name: [partitions]} (None = not sent)."""
        p = HeartbeatParams(
            group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance, rack_id=rack,
            rebalance_timeout_ms=rebalance, subscribed_topic_names=None if topics is None else list(topics),
            subscribed_topic_regex=regex, server_assignor=assignor, owned=self.ids(owned), version=version,
            client_id="client", client_host="/127.0.0.1",
        )
        try:
            return self.apply(lambda s: s.consumer.heartbeat(p)).response
        except CoordinatorError as exc:  # rolled back: nothing written (the handler answers as below)
            self.last_records = []
            return {"error_code": exc.code, "error_message": exc.message, "member_id": None, "member_epoch": 0}

    def join(self, member_id: str, *, topics=("t",), rebalance: int = 30_000, **kw) -> dict:
        """Epoch-0 (re)join: a full request with an empty owned list."""
        kw.setdefault("owned", {})
        return self.hb(member_id, 0, topics=topics, rebalance=rebalance, **kw)

    def commit(self, member_id: str = "", generation: int = -1, *, group: str = G, instance: str | None = None, version: int = 9,
               retention: int = -1, parts=(("t", 0, 10, None),)):
        cps = [CommitPartition(t, p, off, -1, md) for t, p, off, md in parts]
        return self.apply(lambda s: s.offset_commit(group, member_id, generation, instance, version, retention, cps)).response

    # ---------------------------------------------------------------- state
    def cgroup(self, gid: str = G) -> ConsumerGroup:
        g = self.shard.groups.get(gid)
        assert isinstance(g, ConsumerGroup), g
        return g

    def member(self, mid: str, gid: str = G):
        return self.cgroup(gid).members[mid]

    def assigned(self, mid: str, gid: str = G) -> dict[str, list[int]]:
        return self.names(self.member(mid, gid).assigned)

    def target(self, mid: str, gid: str = G) -> dict[str, list[int]]:
        return self.names(self.cgroup(gid).target.get(mid, {}))


def decoded(records) -> list:
    return [(decode_key(k), None if v is None else decode_value(decode_key(k), v)) for k, v in records]


def kinds(records) -> list[tuple[str, bool]]:
    """(record key class name, is tombstone) per record."""
    return [(type(k).__name__, v is None) for k, v in decoded(records)]


def err(resp) -> ErrorCode:
    return resp["error_code"]


@pytest.fixture
def h(loop):
    h = ConsumerHarness(loop)
    h.topic("t", 4, T_ID)
    h.topic("u", 2, U_ID)
    return h


@pytest.fixture
def kafka_h(loop):
    """``h`` with kafkalite's hand-over lever (the pending heartbeat interval) off: Kafka's exact answers."""
    h = ConsumerHarness(loop, group_consumer_pending_heartbeat_interval_ms=5000)
    h.topic("t", 4, T_ID)
    h.topic("u", 2, U_ID)
    return h


def two_members(h, *, topics=("t",)):
    """a owns everything, then b joins and both reconcile to the new epoch. Returns (a, b)."""
    h.join("a", topics=topics)
    h.join("b", topics=topics)
    ea = h.member("a").member_epoch
    h.hb("a", ea, owned=h.assigned("a"))  # asked to revoke what b gets
    h.hb("a", ea, owned=h.assigned("a"))  # revoked
    eb = h.member("b").member_epoch
    h.hb("b", eb, owned=h.assigned("b"))  # picks up released partitions
    assert h.cgroup().state == STABLE_GROUP
    return "a", "b"


# =========================================================================== join (3.2, 3.3)
def test_join_creates_group_bumps_epoch_and_assigns(h):
    resp = h.hb("", 0, topics=["t"], rebalance=30_000, owned={}, version=0)
    assert err(resp) == E.none
    mid = resp["member_id"]
    # CGHB v0: the coordinator generates the id, Kafka's 22-char Uuid.toString()
    assert len(mid) == 22 and "-" not in mid.replace("_", "").replace("-", "") and "=" not in mid
    # a new group is at epoch 1 with an empty assignment (Kafka 4.2+, KAFKA-20268): the first member's join moves it to 2
    assert resp["member_epoch"] == 2
    assert resp["heartbeat_interval"] == 5000
    assert h.names(resp["assignment"]) == {"t": [0, 1, 2, 3]}
    g = h.cgroup()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (2, 2, STABLE_GROUP)
    m = g.members[mid]
    assert (m.member_epoch, m.previous_member_epoch, m.state, m.rebalance_timeout_ms) == (2, 0, STABLE, 30_000)
    assert all(g.current_partition_epoch(T_ID, p) == 2 for p in range(4))
    assert kinds(h.last_records) == [
        ("ConsumerGroupMemberMetadataKey", False),
        ("ConsumerGroupMetadataKey", False),
        ("ConsumerGroupTargetAssignmentMemberKey", False),
        ("ConsumerGroupTargetAssignmentMetadataKey", False),
        ("ConsumerGroupCurrentMemberAssignmentKey", False),
    ]
    [(_, epoch_rec)] = [kv for kv in decoded(h.last_records) if isinstance(kv[0], ConsumerGroupMetadataKey)]
    assert epoch_rec.epoch == 2


def test_v1_member_id_is_client_supplied(h):
    resp = h.join("client-made-uuid-000001", version=1)
    assert resp["member_id"] == "client-made-uuid-000001"
    assert "client-made-uuid-000001" in h.cgroup().members


def test_null_fields_mean_unchanged_and_assignment_only_when_needed(kafka_h):
    h = kafka_h
    h.join("a", topics=["t"], rack="r1", assignor="range")
    records_before = len(h.durable)
    # a plain heartbeat: nothing sent, nothing changes, no Assignment field
    resp = h.hb("a", 2)
    assert err(resp) == E.none and resp["member_epoch"] == 2 and resp["assignment"] is None
    assert len(h.durable) == records_before
    m = h.member("a")
    assert (m.subscribed_topic_names, m.rack_id, m.server_assignor, m.rebalance_timeout_ms) == (["t"], "r1", "range", 30_000)
    # owned partitions alone (not a full request) do not bring the assignment either
    assert h.hb("a", 2, owned={"t": [0, 1, 2, 3]})["assignment"] is None
    # a full request (rebalance timeout + subscription + owned) does
    full = h.hb("a", 2, rebalance=30_000, topics=["t"], owned={"t": [0, 1, 2, 3]})
    assert h.names(full["assignment"]) == {"t": [0, 1, 2, 3]}
    assert len(h.durable) == records_before  # same values: no record
    # changing the subscription bumps the group epoch and moves the assignment
    resp = h.hb("a", 2, topics=["t", "u"])
    assert resp["member_epoch"] == 3 and h.cgroup().group_epoch == 3
    assert h.names(resp["assignment"]) == {"t": [0, 1, 2, 3], "u": [0, 1]}


def test_empty_subscription_member_gets_nothing(h):
    resp = h.join("a", topics=[])
    assert err(resp) == E.none and resp["member_epoch"] == 1
    assert h.names(resp["assignment"]) == {}


# =========================================================================== reconciliation (3.4, 9.10)
def test_second_member_revoke_before_assign(kafka_h):
    h = kafka_h
    r = h.join("a")
    assert h.names(r["assignment"]) == {"t": [0, 1, 2, 3]}
    n = len(h.durable)
    rb = h.join("b")
    g = h.cgroup()
    assert (g.group_epoch, g.assignment_epoch) == (3, 3)
    # the new target: both members changed, so both TargetAssignmentMember records are written
    targets = [k.member_id for k, v in decoded(h.durable[n:]) if isinstance(k, ConsumerGroupTargetAssignmentMemberKey)]
    assert sorted(targets) == ["a", "b"]
    ta, tb = h.target("a"), h.target("b")
    assert sorted(ta["t"] + tb["t"]) == [0, 1, 2, 3] and len(ta["t"]) == 2
    # b must wait: its partitions are still held by a
    assert rb["member_epoch"] == 3 and h.names(rb["assignment"]) == {}
    assert h.member("b").state == UNRELEASED_PARTITIONS
    assert g.state == RECONCILING
    # a is asked to revoke first: assignment shrinks, epoch unchanged
    ra = h.hb("a", 2, owned={"t": [0, 1, 2, 3]})
    assert ra["member_epoch"] == 2 and h.names(ra["assignment"]) == ta
    ma = h.member("a")
    assert ma.state == UNREVOKED_PARTITIONS and h.names(ma.pending_revocation) == tb
    # b asks again: still unreleased (a still holds them, pending revocation)
    rb2 = h.hb("b", 3, owned={})
    assert rb2["member_epoch"] == 3 and rb2["assignment"] is None and h.member("b").state == UNRELEASED_PARTITIONS
    # a keeps reporting the revoked partitions: nothing moves
    ra2 = h.hb("a", 2, owned={"t": [0, 1, 2, 3]})
    assert ra2["member_epoch"] == 2 and ra2["assignment"] is None
    # a stops reporting them: it moves to the new epoch, the partitions are free
    ra3 = h.hb("a", 2, owned=ta)
    assert ra3["member_epoch"] == 3 and ra3["assignment"] is None  # its assigned set did not change
    assert h.member("a").state == STABLE and h.member("a").previous_member_epoch == 2
    assert all(g.current_partition_epoch(T_ID, p) == -1 for p in tb["t"])
    # b picks them up
    rb3 = h.hb("b", 3, owned={})
    assert rb3["member_epoch"] == 3 and h.names(rb3["assignment"]) == tb
    assert h.member("b").state == STABLE
    assert g.state == STABLE_GROUP
    assert all(g.current_partition_epoch(T_ID, p) == 3 for p in range(4))
    # steady state: no Assignment field any more
    assert h.hb("a", 3, owned=ta)["assignment"] is None
    assert h.hb("b", 3, owned=tb)["assignment"] is None


def test_unrevoked_member_revokes_again_at_the_same_epoch_when_target_changes_again(h):
    """CurrentAssignmentBuilder: after revoking, a member that must give up more stays at its epoch
    (Kafka 4.3+; 4.1 moved it to epoch + 1, KAFKA-16249)."""
    h.topic("w", 6)
    h.join("a", topics=["w"])
    h.join("b", topics=["w"])  # epoch 3: a must revoke
    h.hb("a", 2, owned={"w": [0, 1, 2, 3, 4, 5]})
    assert h.member("a").state == UNREVOKED_PARTITIONS
    h.join("c", topics=["w"])  # epoch 4: a must give up more
    ta3 = h.target("a")
    assert len(ta3["w"]) == 2
    h.hb("a", 2, owned=h.assigned("a"))  # revoked epoch 3's partitions, still holds some of epoch 4's
    m = h.member("a")
    assert (m.state, m.member_epoch, m.previous_member_epoch) == (UNREVOKED_PARTITIONS, 2, 2)
    assert h.names(m.assigned) == ta3
    # the rebalance timer follows the member to its new epoch: it still fences if it never revokes
    h.advance(30_000)
    assert "a" not in h.cgroup().members


def test_partition_pending_revocation_by_self_is_not_unreleased(h):
    """A partition taken back into the target while the member revokes it is not waited for: the member
    gets it back once it acknowledges the revocation (Kafka 4.2+, KAFKA-19449; 4.1 waited a heartbeat)."""
    h.join("a")
    h.join("b")  # a must revoke b's share
    ta = h.target("a")
    h.hb("a", 2, owned={"t": [0, 1, 2, 3]})
    h.hb("b", 3, owned={}, topics=[])  # b unsubscribes: epoch 4, a's target is everything again
    assert h.target("a") == {"t": [0, 1, 2, 3]}
    r = h.hb("a", 2, owned=ta)  # a revoked b's share, which is its own again at once (Kafka 4.2+, KAFKA-19449)
    m = h.member("a")
    assert (m.member_epoch, m.state) == (4, STABLE)
    assert h.names(r["assignment"]) == {"t": [0, 1, 2, 3]} == h.names(m.assigned)
    assert all(h.cgroup().current_partition_epoch(T_ID, p) == 4 for p in range(4))


def test_lost_response_previous_epoch_with_subset_is_accepted(h):
    a, b = two_members(h)
    ma = h.member(a)
    assert (ma.member_epoch, ma.previous_member_epoch) == (3, 2)
    # a never saw epoch 3: it heartbeats with epoch 2 and a subset of its assignment
    resp = h.hb(a, 2, owned=h.assigned(a))
    assert err(resp) == E.none and resp["member_epoch"] == 3
    # previous epoch but owning partitions outside its assignment: fenced
    resp = h.hb(a, 2, owned={"t": [0, 1, 2, 3]})
    assert err(resp) == E.fenced_member_epoch
    # previous epoch with null owned partitions: not a subset, fenced
    assert err(h.hb(a, 2)) == E.fenced_member_epoch
    # an older epoch than the previous one: fenced
    assert err(h.hb(a, 1, owned={})) == E.fenced_member_epoch


def test_epoch_errors(h):
    h.join("a")
    assert err(h.hb("a", 5)) == E.fenced_member_epoch  # greater than the coordinator's
    assert err(h.hb("nobody", 1)) == E.unknown_member_id
    resp = h.hb("x", 1, group="no-such-group")
    assert err(resp) == E.group_id_not_found
    assert "no-such-group" not in h.shard.groups
    assert err(h.hb("x", -1, group="no-such-group")) == E.group_id_not_found
    assert err(h.hb("nobody", -1)) == E.unknown_member_id
    # errors write nothing
    n = len(h.durable)
    h.hb("a", 5)
    assert len(h.durable) == n


def test_fenced_member_rejoins_at_once_with_epoch_zero(h):
    """Kafka 4.3+ (KAFKA-19233): a member fenced for a stale epoch rejoins under its own id with epoch
    0 at once, and gets its assignment back; 4.1 refused it until its session ran out."""
    a, b = two_members(h)
    before = h.member(a)
    epoch, assigned = before.member_epoch, h.assigned(a)
    assert epoch > 2
    assert err(h.hb(a, epoch - 2)) == E.fenced_member_epoch  # a lost answer, retried with an older epoch
    r = h.join(a)
    assert err(r) == E.none
    assert r["member_id"] == a and r["member_epoch"] == epoch
    assert h.names(r["assignment"]) == assigned  # the partitions it dropped on the fence, back
    assert h.cgroup().group_epoch == epoch  # no new member, no rebalance
    assert set(h.cgroup().members) == {a, b}
    # and it goes on heartbeating at that epoch
    assert err(h.hb(a, epoch, owned=assigned)) == E.none


def test_a_member_that_rejoins_with_epoch_zero_while_revoking_has_revoked(h):
    """Epoch 0 with nothing owned while partitions wait for its revocation: they are revoked (it
    dropped them when fenced), and the member waiting for them gets them."""
    h.join("a")
    h.join("b")
    ea = h.member("a").member_epoch
    h.hb("a", ea, owned=h.assigned("a"))  # asked to revoke what b gets
    assert h.member("a").state == UNREVOKED_PARTITIONS
    going = h.names(h.member("a").pending_revocation)
    r = h.join("a")
    assert err(r) == E.none
    assert h.member("a").state == STABLE and not h.member("a").pending_revocation
    eb = h.member("b").member_epoch
    rb = h.hb("b", eb, owned=h.assigned("b"))
    assert h.names(rb["assignment"]) == going


# =========================================================================== timeouts and leaving (3.4, 3.5)
def test_rebalance_timeout_fences_member_that_keeps_revocation(h):
    h.join("a", rebalance=10_000)
    h.join("b")
    h.hb("a", 2, owned={"t": [0, 1, 2, 3]})
    assert h.member("a").state == UNREVOKED_PARTITIONS
    h.advance(5_000)
    h.hb("a", 2, owned={"t": [0, 1, 2, 3]})  # heartbeats keep the session, not the revocation
    h.hb("b", 3, owned={})
    records = h.advance(5_000)
    g = h.cgroup()
    assert "a" not in g.members
    assert g.group_epoch == 4
    assert ("ConsumerGroupCurrentMemberAssignmentKey", True) in kinds(records)
    # b gets everything after the new target
    r = h.hb("b", 3, owned={})
    assert r["member_epoch"] == 4 and h.names(r["assignment"]) == {"t": [0, 1, 2, 3]}
    assert err(h.hb("a", 2, owned={})) == E.unknown_member_id


def test_rebalance_timer_cancelled_once_revoked(h):
    h.join("a", rebalance=10_000)
    h.join("b")
    h.hb("a", 2, owned={"t": [0, 1, 2, 3]})
    h.hb("a", 2, owned=h.assigned("a"))
    h.advance(10_000)
    assert "a" in h.cgroup().members


def test_session_timeout_fences(h):
    a, b = two_members(h)
    h.advance(40_000)
    assert h.hb(b, 3)["member_epoch"] == 3
    h.advance(10_000)
    # a stopped heartbeating 50 s ago: fenced at 45 s
    g = h.cgroup()
    assert a not in g.members and g.group_epoch == 4
    r = h.hb(b, 3, owned=h.assigned(b))
    assert r["member_epoch"] == 4 and h.names(r["assignment"]) == {"t": [0, 1, 2, 3]}


def test_leave_with_minus_one(h):
    a, b = two_members(h)
    resp = h.hb(a, -1)
    assert err(resp) == E.none and resp["member_id"] == a and resp["member_epoch"] == -1
    assert kinds(h.last_records) == [
        ("ConsumerGroupCurrentMemberAssignmentKey", True),
        ("ConsumerGroupTargetAssignmentMemberKey", True),
        ("ConsumerGroupMemberMetadataKey", True),
        ("ConsumerGroupMetadataKey", False),
    ]
    g = h.cgroup()
    assert a not in g.members and g.group_epoch == 4 and g.state == ASSIGNING
    assert not h.shard.timers.is_scheduled(f"consumer-session:{G}:{a}")
    h.hb(b, 3)
    assert g.state == STABLE_GROUP
    # the last member leaves: Empty, still a consumer group
    # and (Kafka 4.2+) the empty target assignment moves to the new group epoch at once
    h.hb(b, -1)
    assert ("ConsumerGroupTargetAssignmentMetadataKey", False) in kinds(h.last_records)
    assert (g.group_epoch, g.assignment_epoch) == (5, 5)
    assert g.state == EMPTY and isinstance(h.shard.groups[G], ConsumerGroup)


# =========================================================================== static members (3.3, 3.5)
def test_static_member_temporary_leave_and_rejoin(h):
    h.join("a1", instance="i-a")
    h.join("b", )
    h.hb("a1", 2, owned={"t": [0, 1, 2, 3]}, instance="i-a")
    h.hb("a1", 2, owned=h.assigned("a1"), instance="i-a")
    h.hb("b", 3, owned={})
    g = h.cgroup()
    assert g.state == STABLE_GROUP
    kept = h.assigned("a1")
    epoch = g.group_epoch
    # -2: the member stays with its partitions, no group-epoch bump
    resp = h.hb("a1", -2, instance="i-a")
    assert err(resp) == E.none and resp["member_epoch"] == -2
    assert kinds(h.last_records) == [("ConsumerGroupCurrentMemberAssignmentKey", False)]
    m = h.member("a1")
    assert m.member_epoch == -2 and h.names(m.assigned) == kept
    assert g.group_epoch == epoch and g.static_members == {"i-a": "a1"}
    assert all(g.current_partition_epoch(T_ID, p) != -1 for p in kept["t"])
    # back under a new member id: inherits the assignment, nobody else is revoked
    resp = h.join("a2", instance="i-a")
    assert err(resp) == E.none and resp["member_epoch"] == epoch
    assert h.names(resp["assignment"]) == kept
    assert g.group_epoch == epoch and "a1" not in g.members and g.static_members == {"i-a": "a2"}
    assert h.member("a2").state == STABLE and h.member("b").state == STABLE
    assert g.state == STABLE_GROUP
    # the old id is gone
    assert err(h.hb("a1", epoch, instance="i-a")) == E.fenced_instance_id
    # the old member's session timer does nothing
    h.advance(44_000)
    h.hb("a2", epoch, instance="i-a")
    h.hb("b", epoch)
    h.advance(44_000)
    assert set(g.members) == {"a2", "b"}


def test_static_rejoin_while_active_is_unreleased_instance_id(h):
    h.join("a1", instance="i-a")
    resp = h.join("a2", instance="i-a")
    assert err(resp) == E.unreleased_instance_id
    assert set(h.cgroup().members) == {"a1"}


def test_static_instance_owned_by_other_member_is_fenced(h):
    h.join("a1", instance="i-a")
    assert err(h.hb("zz", 1, instance="i-a")) == E.fenced_instance_id
    assert err(h.hb("zz", -1, instance="i-a")) == E.fenced_instance_id
    assert err(h.hb("a1", 1, instance="i-unknown")) == E.unknown_member_id
    assert err(h.hb("a1", -2, instance="i-unknown")) == E.unknown_member_id


def test_static_member_that_never_returns_is_fenced_by_session_timeout(h):
    h.join("a1", instance="i-a")
    h.join("b")
    h.hb("a1", -2, instance="i-a")
    epoch = h.cgroup().group_epoch
    for _ in range(2):
        h.advance(30_000)
        h.hb("b", h.member("b").member_epoch)
    g = h.cgroup()
    assert "a1" not in g.members and g.static_members == {} and g.group_epoch == epoch + 1


def test_static_leave_with_minus_one_removes(h):
    h.join("a1", instance="i-a")
    h.hb("a1", -1, instance="i-a")
    g = h.cgroup()
    assert g.members == {} and g.static_members == {} and (g.group_epoch, g.assignment_epoch) == (3, 3)


def test_group_consumer_max_size(loop):
    h = ConsumerHarness(loop, group_consumer_max_size=2)
    h.topic("t", 4)
    h.join("a")
    h.join("b")
    resp = h.join("c")
    assert err(resp) == E.group_max_size_reached
    assert set(h.cgroup().members) == {"a", "b"}
    assert err(h.hb("a", h.member("a").member_epoch)) == E.none  # existing members are fine


# =========================================================================== regexes and metadata (3.7, 3.3 step 4)
def test_regex_subscription_full_match_and_new_topics(h):
    h.topic("orders", 2)
    h.topic("orders-eu", 2)
    h.topic("xorders", 2)
    resp = h.hb("a", 0, regex="orders.*", rebalance=30_000, owned={})
    assert err(resp) == E.none
    assert h.names(resp["assignment"]) == {"orders": [0, 1], "orders-eu": [0, 1]}  # full match: not xorders
    g = h.cgroup()
    [(key, value)] = [kv for kv in decoded(h.last_records) if isinstance(kv[0], ConsumerGroupRegularExpressionKey)]
    assert key.regular_expression == "orders.*" and sorted(value.topics) == ["orders", "orders-eu"]
    epoch = g.group_epoch
    # an unrelated topic: the metadata moves, the resolution does not
    h.topic("zzz", 1)
    assert h.hb("a", epoch)["member_epoch"] == epoch
    # a matching topic appears: re-resolved, epoch bump, new target
    h.topic("orders-us", 3)
    resp = h.hb("a", epoch)
    assert resp["member_epoch"] == epoch + 1
    assert h.names(resp["assignment"]) == {"orders": [0, 1], "orders-eu": [0, 1], "orders-us": [0, 1, 2]}
    assert g.regexes["orders.*"][0] == {"orders", "orders-eu", "orders-us"}
    # dropping the regex tombstones the resolution
    h.hb("a", epoch + 1, regex="", topics=["t"])
    assert "orders.*" not in g.regexes
    assert ("ConsumerGroupRegularExpressionKey", True) in kinds(h.last_records)


def test_two_members_share_a_regex(h):
    h.topic("log-a", 2)
    h.topic("log-b", 2)
    h.hb("a", 0, regex="log-.*", rebalance=30_000, owned={})
    h.hb("b", 0, regex="log-.*", rebalance=30_000, owned={})
    ta, tb = h.target("a"), h.target("b")
    assert sum(len(v) for v in ta.values()) == 2 and sum(len(v) for v in tb.values()) == 2


def test_partitions_added_bump_the_group_epoch(h):
    h.join("a")
    h.topic("t", 6)
    resp = h.hb("a", 2)
    assert resp["member_epoch"] == 3 and h.cgroup().group_epoch == 3
    assert h.names(resp["assignment"]) == {"t": [0, 1, 2, 3, 4, 5]}
    # a topic nobody subscribes to changing does not bump
    h.topic("u", 5)
    assert h.hb("a", 3)["member_epoch"] == 3


def test_subscribed_topic_created_later(h):
    resp = h.join("a", topics=["later"])
    assert h.names(resp["assignment"]) == {} and resp["member_epoch"] == 2
    h.topic("later", 2)
    resp = h.hb("a", 2)
    assert resp["member_epoch"] == 3 and h.names(resp["assignment"]) == {"later": [0, 1]}


# =========================================================================== assignors and validation (3.2, 3.6)
def test_server_assignor_choice(h):
    # uniform (the default) balances the six partitions 3/3
    h.join("a", topics=["t", "u"])
    h.join("b", topics=["t", "u"])
    counts = sorted(sum(len(v) for v in h.target(m).values()) for m in ("a", "b"))
    assert counts == [3, 3]
    # range per topic: t 2/2, u 1/1 -> co-partitioned ranges
    h.join("c", group="g2", topics=["t", "u"], assignor="range")
    h.join("d", group="g2", topics=["t", "u"], assignor="range")
    tc, td = h.target("c", "g2"), h.target("d", "g2")
    assert (tc, td) in (({"t": [0, 1], "u": [0]}, {"t": [2, 3], "u": [1]}), ({"t": [2, 3], "u": [1]}, {"t": [0, 1], "u": [0]}))


def _ctx(version=1, assignors=("uniform", "range"), meta=None):
    config = SimpleNamespace(group_consumer_assignors=assignors)
    return SimpleNamespace(version=version, broker=SimpleNamespace(coordinator=SimpleNamespace(config=config), authorizer=None),
                           cluster=SimpleNamespace(metadata=meta or MetadataView()))


def _req(**kw):
    base = dict(group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout=30_000,
                subscribed_topic_names=["t"], subscribed_topic_regex=None, server_assignor=None, topic_partitions=[])
    base.update(kw)
    return SimpleNamespace(**base)


@pytest.mark.parametrize(
    "version, fields, code",
    [
        (1, {}, None),
        (0, {"member_id": ""}, None),  # v0: the coordinator makes the id
        (1, {"member_id": ""}, E.invalid_request),  # v1: the client must
        (0, {"member_id": "", "member_epoch": 3}, E.invalid_request),
        (0, {"member_id": "", "member_epoch": -1}, E.invalid_request),
        (1, {"group_id": ""}, E.invalid_request),
        (1, {"instance_id": ""}, E.invalid_request),
        (1, {"rack_id": ""}, E.invalid_request),
        (1, {"rebalance_timeout": -1}, E.invalid_request),
        (1, {"topic_partitions": None}, E.invalid_request),
        (1, {"topic_partitions": [SimpleNamespace(topic_id=T_ID, partitions=[0])]}, E.invalid_request),
        (1, {"subscribed_topic_names": None}, E.invalid_request),
        (1, {"subscribed_topic_names": None, "subscribed_topic_regex": "a.*"}, None),
        (1, {"subscribed_topic_names": []}, None),
        (1, {"member_epoch": -2}, E.invalid_request),
        (1, {"member_epoch": -2, "instance_id": "i"}, None),
        (1, {"member_epoch": -3}, E.invalid_request),
        (1, {"server_assignor": "range"}, None),
        (1, {"server_assignor": "sticky"}, E.unsupported_assignor),
        (1, {"server_assignor": ""}, E.unsupported_assignor),
        (1, {"subscribed_topic_regex": "(unclosed"}, E.invalid_regular_expression),
        (1, {"member_epoch": 5, "topic_partitions": None, "subscribed_topic_names": None, "rebalance_timeout": -1}, None),
    ],
)
def test_heartbeat_request_validation(version, fields, code):
    problem = cghb.validate(_ctx(version), _req(**fields))
    assert (problem[0] if problem else None) == code


# =========================================================================== derived group state (3.1)
def test_derived_group_states(h):
    h.join("a")
    g = h.cgroup()
    assert g.state == STABLE_GROUP
    h.join("b")
    assert g.state == RECONCILING
    # Assigning: group epoch ahead of the assignment epoch (a record replayed by itself)
    h.apply(lambda s: s.consumer.write_group_epoch(g, g.group_epoch + 1, g.metadata_hash))
    assert g.state == ASSIGNING
    h.hb("a", 2, owned={"t": [0, 1, 2, 3]})  # recomputes the target
    assert g.assignment_epoch == g.group_epoch and g.state == RECONCILING
    h.hb("a", 2, owned=h.assigned("a"))
    h.hb("b", h.member("b").member_epoch, owned={})
    h.hb("b", h.member("b").member_epoch, owned={})
    assert g.state == STABLE_GROUP
    h.hb("a", -1)
    h.hb("b", -1)
    assert g.state == EMPTY


# =========================================================================== offsets (3.10, 2.1, 2.3-2.6)
def codes(answer) -> set:
    return {e for _, _, e in answer}


def test_offset_commit_with_member_epoch(h):
    a, b = two_members(h)
    assert codes(h.commit(a, 3)) == {E.none}
    kept, given = h.assigned(a)["t"][0], h.assigned(b)["t"][0]
    # KIP-1251 (Kafka 4.3+): an older epoch commits what the member has held since that epoch
    assert codes(h.commit(a, 2, parts=(("t", kept, 10, None),))) == {E.none}
    assert codes(h.commit(a, 2, parts=(("t", kept, 10, None), ("t", given, 10, None)))) == {E.stale_member_epoch}  # one it gave away
    assert codes(h.commit(a, 1, parts=(("t", kept, 10, None),))) == {E.stale_member_epoch}  # older than its assignment
    assert codes(h.commit(b, 2, parts=(("t", given, 10, None),))) == {E.stale_member_epoch}  # b got it at epoch 3
    assert codes(h.commit(a, 4)) == {E.stale_member_epoch}
    assert codes(h.commit("ghost", 3)) == {E.unknown_member_id}
    assert codes(h.commit(a, 3, version=8)) == {E.unsupported_version}
    # admin commit (epoch -1, no member): only when the group has no members
    assert codes(h.commit("", -1)) == {E.unknown_member_id}
    h.hb(a, -1)
    h.hb(b, -1)
    assert codes(h.commit("", -1)) == {E.none}


def test_offset_commit_to_unknown_group(h):
    assert codes(h.commit("m", 1, group="nope")) == {E.group_id_not_found}
    assert codes(h.commit("m", 1, group="nope", version=8)) == {E.illegal_generation}


def test_offset_fetch_member_validation(h):
    a, b = two_members(h)
    assert h.shard.validate_fetch(G, a, 3) is None
    assert h.shard.validate_fetch(G, a, 2) == E.stale_member_epoch
    assert h.shard.validate_fetch(G, "ghost", 3) == E.unknown_member_id
    assert h.shard.validate_fetch(G, None, -1) is None  # admin
    h.commit(a, 3, parts=(("t", 0, 42, "md"),))
    [(t, p, v)] = h.shard.offset_fetch(G, [("t", [0])], stable=False)
    assert (t, p, v.offset, v.metadata) == ("t", 0, 42, "md")


def test_delete_groups(h):
    a, b = two_members(h)
    h.commit(a, 3)
    assert h.apply(lambda s: s.delete_groups([G])).response == [(G, E.non_empty_group)]
    h.hb(a, -1)
    h.hb(b, -1)
    n = len(h.durable)
    assert h.apply(lambda s: s.delete_groups([G])).response == [(G, E.none)]
    ks = decoded(h.durable[n:])
    assert (type(ks[0][0]), ks[0][1]) == (OffsetCommitKey, None)
    assert all(v is None for _, v in ks)
    assert isinstance(ks[-1][0], ConsumerGroupMetadataKey)
    assert {type(k).__name__ for k, _ in ks} >= {"ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupMetadataKey"}
    assert G not in h.shard.groups and not h.shard.offsets.has_offsets(G)
    assert h.apply(lambda s: s.delete_groups([G])).response == [(G, E.group_id_not_found)]


def test_offset_delete_subscribed_topic(h):
    a, b = two_members(h)
    h.commit(a, 3, parts=(("t", 0, 1, None), ("u", 0, 1, None)))
    top, answer = h.apply(lambda s: s.offset_delete(G, [("t", [0]), ("u", [0])])).response
    assert top == E.none
    assert answer == [("t", 0, E.group_subscribed_to_topic), ("u", 0, E.none)]
    assert [tp for tp in h.shard.offsets.latest[G]] == [("t", 0)]


def test_offset_expiry_for_consumer_groups(h):
    a, b = two_members(h)
    h.commit(a, 3, parts=(("t", 0, 1, None), ("u", 0, 1, None)))
    retention = h.config.offsets_retention_ms
    h.now += retention - 1
    h.apply(lambda s: s.expire_offsets())
    assert set(h.shard.offsets.latest[G]) == {("t", 0), ("u", 0)}
    h.now += 1
    h.apply(lambda s: s.expire_offsets())
    # only the topic the group does not subscribe to
    assert set(h.shard.offsets.latest[G]) == {("t", 0)}
    assert isinstance(h.shard.groups.get(G), ConsumerGroup)


def test_empty_consumer_group_offsets_age_from_commit_and_group_goes(h):
    h.join("a")
    h.commit("a", 2)
    h.now += 1000
    h.hb("a", -1)
    h.now += h.config.offsets_retention_ms - 1000  # retention after the commit, not after becoming Empty
    n = len(h.durable)
    h.apply(lambda s: s.expire_offsets())
    assert not h.shard.offsets.has_offsets(G)
    assert G not in h.shard.groups
    ks = decoded(h.durable[n:])
    assert isinstance(ks[0][0], OffsetCommitKey) and isinstance(ks[-1][0], ConsumerGroupMetadataKey) and ks[-1][1] is None


# =========================================================================== replay after restart (5.4)
def snapshot(shard) -> dict:
    out = {}
    for gid, g in shard.groups.items():
        if not isinstance(g, ConsumerGroup):
            out[gid] = ("classic", g.state, g.generation, sorted(g.members))
            continue
        members = {
            mid: (m.instance_id, m.rack_id, tuple(m.subscribed_topic_names), m.subscribed_topic_regex, m.rebalance_timeout_ms,
                  m.server_assignor, m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation, m.assignment_epochs)
            for mid, m in g.members.items()
        }
        index = g.target_index  # derived state, kept by replay: a restart must rebuild it too
        derived = (dict(g.subscriptions), dict(g.assignor_votes), g.waiting, index.count, index.buckets, index.claims, dict(index.per_topic),
                   index.doubles, index.untargeted, index.orphans)
        out[gid] = (g.group_epoch, g.assignment_epoch, g.metadata_hash, members, dict(g.static_members), dict(g.target),
                    dict(g.partition_epochs), {r: v[0] for r, v in g.regexes.items()}, g.state, derived)
    return out


def replayed(h, records, *, folded: bool) -> GroupShard:
    fresh = h._new_shard()
    if folded:
        latest: dict = {}
        for k, v in records:
            latest[k] = v
        records = list(latest.items())
    for k, v in records:
        fresh.replay_bytes(k, v)
    return fresh


def busy_scenario(h):
    h.topic("logs-1", 3)
    two_members(h)  # a, b on t
    h.join("s1", instance="i-s", topics=["t", "u"])  # static member
    h.hb("r", 0, regex="logs-.*", rebalance=30_000, owned={})
    h.hb("a", h.member("a").member_epoch, owned=h.assigned("a"))
    h.hb("b", h.member("b").member_epoch, owned=h.assigned("b"))
    h.hb("s1", -2, instance="i-s")  # static temporary leave
    h.join("s2", instance="i-s", topics=["t", "u"])  # replacement
    h.hb("a", -1)  # a leaves: b revokes nothing, gets more
    h.topic("logs-2", 1)  # regex re-resolution
    h.hb("r", h.member("r").member_epoch, owned={})
    h.hb("b", h.member("b").member_epoch, owned={"t": [0, 1, 2, 3]})  # b in some mid-reconciliation state
    h.commit("b", h.member("b").member_epoch)


@pytest.mark.parametrize("folded", [False, True], ids=["in-order", "folded"])
def test_replay_after_restart_rebuilds_identical_state(h, folded):
    busy_scenario(h)
    before = snapshot(h.shard)
    g = h.cgroup()
    assert g.static_members == {"i-s": "s2"} and g.regexes and len(g.members) == 3
    fresh = replayed(h, h.durable, folded=folded)
    assert snapshot(fresh) == before
    assert fresh.offsets.latest == h.shard.offsets.latest


def test_loaded_consumer_group_gets_session_and_rebalance_timers(h):
    h.join("a", rebalance=10_000)
    h.join("b")
    h.hb("a", 2, owned={"t": [0, 1, 2, 3]})  # a is UNREVOKED_PARTITIONS
    fresh = replayed(h, h.durable, folded=True)
    h.shard = fresh
    h.apply_records = h.shard.on_loaded()
    assert h.shard.timers.is_scheduled(f"consumer-session:{G}:a")
    assert h.shard.timers.is_scheduled(f"consumer-session:{G}:b")
    assert h.shard.timers.is_scheduled(f"consumer-rebalance:{G}:a")
    h.advance(10_000)
    assert "a" not in h.cgroup().members  # rebalance timeout fenced it
    h.advance(45_000)
    assert h.cgroup().members == {}  # b never heartbeat after the load


def test_replayed_records_decode_to_consumer_keys(h):
    two_members(h)
    types = {type(k) for k, _ in decoded(h.durable)}
    assert types == {
        ConsumerGroupMetadataKey,
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupCurrentMemberAssignmentKey,
    }


def test_reset_with_consumer_groups_resolves_parked_classic_requests_only(h):
    """A shard reset (failed append, shutdown) must cope with KIP-848 groups, which park nothing."""
    h.topic("t", 4)
    assert err(h.join("m1")) == E.none
    h.config.group_initial_rebalance_delay_ms = 3000
    parked = Harness.join(h, version=3, group="classic-g")  # a classic group: its JoinGroup waits for the delay
    assert not parked.done()
    h.shard.reset()
    assert h.shard.groups == {}
    assert parked.done() and parked.result() is None


def test_runtime_splits_a_large_write_into_batches_under_max_message_bytes():
    """Thousands of joins in one linger window must not make one oversize record batch."""
    from broker.coordinator.runtime import _chunks

    records = [(b"k" * 40, b"v" * 700) for _ in range(3000)]  # ~2.2 MB in all
    chunks = list(_chunks(records, 1048588 // 2))
    assert sum(len(c) for c in chunks) == 3000 and len(chunks) > 1
    assert all(sum(len(k) + len(v) + 24 for k, v in c) <= 1048588 // 2 for c in chunks)


# =========================================================================== a stalled event loop (runtime.LoopWatch)
def test_session_timer_due_after_a_stall_does_not_fence_a_member_whose_heartbeat_waits(h):
    """The loop could not run for longer than the session: the due timer waits for the queued heartbeat."""
    from .test_coordinator_classic import lossy

    lossy(h)
    a, b = two_members(h)
    h.advance(1_000)
    h.hb(a, 3)
    h.hb(b, 3)  # both due at 46 s
    h.lost += 40_000
    h.advance(46_000)  # the loop could not run from 7 s to 47 s; the timers fire first thing after
    g = h.cgroup()
    assert set(g.members) == {a, b} and g.group_epoch == 3
    assert err(h.hb(a, 3)) == E.none  # a's heartbeat, read after the timers
    h.advance(38_999)  # b, dead all along, is fenced once given the 40 s back (at 86 s)
    h.hb(a, 3)
    assert b in h.cgroup().members
    h.advance(1)
    g = h.cgroup()
    assert b not in g.members and a in g.members and g.group_epoch == 4
    removed = [kw for event, kw in h.log.events if event == "consumer group member removed"]
    assert [(kw["member"], kw["reason"]) for kw in removed] == [(b, "session timeout expired")]


def test_session_timeout_without_a_stall_is_unchanged(h):
    from .test_coordinator_classic import lossy

    lossy(h)
    a, b = two_members(h)
    h.advance(44_999)
    h.hb(b, 2)
    assert a in h.cgroup().members
    h.advance(1)
    assert a not in h.cgroup().members


# =========================================================================== atomic operations
def _fail_reconcile(h):
    """Make the last step of a heartbeat fail, after it has written its member, epoch and target records."""

    def failing(*_args, **_kw):
        raise CoordinatorError(E.fenced_member_epoch, "injected after the records were written")

    h.shard.consumer._reconcile = failing


def test_a_heartbeat_that_fails_part_way_writes_nothing_and_changes_nothing(h):
    two_members(h)
    before, n = snapshot(h.shard), len(h.durable)
    timers = dict(h.shard.timers._live)
    _fail_reconcile(h)
    resp = h.join("c")  # a new member: member metadata, a group epoch bump, a new target ... then the failure
    assert resp["error_code"] == E.fenced_member_epoch and resp["error_message"] == "injected after the records were written"
    assert h.last_records == [] and len(h.durable) == n, "a failed heartbeat writes nothing"
    assert snapshot(h.shard) == before, "and leaves the group exactly as it was"
    assert h.shard.timers._live == timers, "its timers too"
    del h.shard.consumer._reconcile  # the real step again
    assert h.join("c")["error_code"] == E.none
    assert "c" in h.cgroup().members
    for folded in (False, True):
        assert snapshot(replayed(h, h.durable, folded=folded)) == snapshot(h.shard)


def test_a_failed_first_heartbeat_leaves_no_group_behind(h):
    _fail_reconcile(h)
    assert h.join("a")["error_code"] == E.fenced_member_epoch
    assert G not in h.shard.groups and h.durable == [] and len(h.shard.timers) == 0


# =========================================================================== hand-over: the pending heartbeat interval
def test_members_mid_hand_over_get_the_pending_interval_and_the_plain_one_once_reconciled(h):
    assert h.join("a")["heartbeat_interval"] == 5000  # holds its whole target at once
    resp = h.join("b")
    assert (h.member("b").state, resp["heartbeat_interval"]) == (UNRELEASED_PARTITIONS, 100)  # waits for a's partitions
    ea = h.member("a").member_epoch
    resp = h.hb("a", ea, owned=h.assigned("a"))
    assert (h.member("a").state, resp["heartbeat_interval"]) == (UNREVOKED_PARTITIONS, 100)  # must revoke
    resp = h.hb("a", ea, owned=h.assigned("a"))
    assert (h.member("a").state, resp["heartbeat_interval"]) == (STABLE, 5000)  # revoked: reconciled
    resp = h.hb("b", h.member("b").member_epoch, owned=h.assigned("b"))
    assert (h.member("b").state, resp["heartbeat_interval"]) == (STABLE, 5000)  # got them
    assert h.cgroup().waiting == 0


def test_a_broker_whose_loop_stalls_hands_out_no_deadline_shorter_than_its_stalls(h):
    """The interval is the client's request timeout (librdkafka): after a stall of 400 ms the
    pending interval is at least 4 x 400 ms, and after one of 2 s it is the plain interval."""
    stall = [0]
    h.shard.recent_stall_ms = lambda: stall[0]
    h.join("a")
    stall[0] = 400
    resp = h.join("b")
    assert (h.member("b").state, resp["heartbeat_interval"]) == (UNRELEASED_PARTITIONS, STALL_FACTOR * 400)
    stall[0] = 2_000
    ea = h.member("a").member_epoch
    resp = h.hb("a", ea, owned=h.assigned("a"))
    assert (h.member("a").state, resp["heartbeat_interval"]) == (UNREVOKED_PARTITIONS, 5000)
    stall[0] = 10  # stalls under a quarter of the pending interval change nothing
    waiting = h.shard.consumer.heartbeat_interval(h.cgroup(), h.member("b"))
    stall[0] = 0
    assert waiting == h.shard.consumer.heartbeat_interval(h.cgroup(), h.member("b")) < 5000
    resp = h.hb("a", ea, owned=h.assigned("a"))
    resp = h.hb("b", h.member("b").member_epoch, owned={})
    assert resp["heartbeat_interval"] == 5000  # b got a's partitions: reconciled


def test_the_pending_interval_off_and_bounded_by_the_groups_heartbeat_budget(loop):
    off = ConsumerHarness(loop, group_consumer_pending_heartbeat_interval_ms=5000)
    off.topic("t", 4, T_ID)
    off.join("a")
    assert off.join("b")["heartbeat_interval"] == 5000

    h = ConsumerHarness(loop)
    h.topic("t", 3000, T_ID)
    h.join("a")
    check, h.check_invariants = h.check_invariants, lambda: None  # checked once below, not after each join
    for i in range(1999):  # every newcomer waits for partitions "a" still holds
        h.join(f"m{i:04d}")
    check()
    assert h.cgroup().waiting == 1999
    # 1999 members waiting, at most PENDING_HEARTBEATS_PER_S heartbeats a second between them
    assert h.join("last")["heartbeat_interval"] == 2000 * 1000 // PENDING_HEARTBEATS_PER_S > 100
    # once "a" is told to revoke, it comes back on the pending interval (it alone shares the budget)
    # and those waiting for its partitions just after it, instead of sharing the budget two thousand ways
    resp = h.hb("a", h.member("a").member_epoch, owned=h.assigned("a"))
    assert (h.member("a").state, resp["heartbeat_interval"], h.cgroup().revoking) == (UNREVOKED_PARTITIONS, 100, 1)
    resp = h.hb("m0000", h.member("m0000").member_epoch, owned={})
    assert (h.member("m0000").state, resp["heartbeat_interval"]) == (UNRELEASED_PARTITIONS, 200)
    h.hb("a", h.member("a").member_epoch, owned=h.assigned("a"))  # revoked
    assert h.cgroup().revoking == 0 and h.member("a").state == STABLE


@pytest.mark.parametrize("lever", ["on", "off"])
def test_an_answer_lost_to_a_client_timeout_is_repeated_until_confirmed_while_the_pending_interval_is_on(loop, lever):
    # librdkafka drops a heartbeat that is not answered within the interval it was handed, and its
    # next heartbeat is a plain one: without the repeat, a lost revocation would stay unknown to it
    h = ConsumerHarness(loop) if lever == "on" else ConsumerHarness(loop, group_consumer_pending_heartbeat_interval_ms=5000)
    h.topic("t", 4, T_ID)
    h.join("a")
    h.join("b")
    ea = h.member("a").member_epoch
    lost = h.hb("a", ea, owned=h.assigned("a"))  # asks "a" to revoke; the client never reads it
    assert h.member("a").state == UNREVOKED_PARTITIONS and lost["assignment"] is not None
    again = h.hb("a", ea)  # plain: no owned partitions, the same epoch
    assert again["error_code"] == E.none
    if lever == "off":
        assert again["assignment"] is None  # Kafka's answer
        return
    assert again["assignment"] == lost["assignment"]
    kept = h.assigned("a")
    acked = h.hb("a", ea, owned=kept)  # revoked, and says it owns exactly its assignment
    assert h.member("a").state == STABLE and acked["error_code"] == E.none
    assert h.hb("a", h.member("a").member_epoch)["assignment"] is None  # confirmed: no more repeats


def test_a_rolled_back_rebalance_restores_targets_and_current_assignments_exactly(h):
    """Targets and current assignments are journaled as references and turned back into
    records only on a rollback (``consumer_undo``): a join that moves partitions between
    members, and a leave, both rolled back, leave the state (derived indexes included) as
    it was."""
    busy_scenario(h)
    before = snapshot(h.shard)

    def rolled_back(member_id: str, epoch: int, **fields) -> list:
        params = dict(group_id=G, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None, rebalance_timeout_ms=-1,
                      subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None, owned=None, version=1,
                      client_id="client", client_host="/127.0.0.1")
        written: list = []

        def op(shard):
            shard.consumer.heartbeat(HeartbeatParams(**{**params, **fields}))
            written.extend(shard._op.records)
            raise RuntimeError("the append failed")

        with pytest.raises(RuntimeError):
            h.shard.run(op)
        return written

    joined = rolled_back("newcomer", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t", "u"], owned={})
    assert sum(type(k) is ConsumerGroupTargetAssignmentMemberKey for k, _ in joined) >= 2  # someone gave way
    assert any(type(k) is ConsumerGroupCurrentMemberAssignmentKey for k, _ in joined)
    assert snapshot(h.shard) == before
    left = rolled_back("b", -1)
    assert any(type(k) is ConsumerGroupCurrentMemberAssignmentKey and v is None for k, v in left)
    assert snapshot(h.shard) == before


# =========================================================================== KIP-1251 assignment epochs
def test_assignment_epochs_follow_kafka_44(h):
    """A partition keeps the epoch it was assigned at while the member holds it (also pending
    revocation and across epoch bumps that leave it alone); one newly assigned takes the member's
    new epoch. The records carry them, and a replay rebuilds them."""
    h.join("a")  # epoch 2 (a new group starts at 1): a gets everything
    t = T_ID
    assert h.member("a").assignment_epochs == {(t, p): 2 for p in range(4)}
    h.join("b")  # epoch 3: a must give up half
    h.hb("a", 2, owned=h.assigned("a"))
    a = h.member("a")
    assert a.state == UNREVOKED_PARTITIONS
    assert a.assignment_epochs == {(t, p): 2 for p in range(4)}  # pending revocation keeps its epoch
    h.hb("a", 2, owned=h.assigned("a"))  # revoked: a moves to epoch 3, keeping its partitions' epochs
    a = h.member("a")
    assert a.member_epoch == 3 and a.assignment_epochs == {(t, p): 2 for p in h.assigned("a")["t"]}
    h.hb("b", h.member("b").member_epoch, owned={})
    b = h.member("b")
    assert b.member_epoch == 3 and b.assignment_epochs == {(t, p): 3 for p in h.assigned("b")["t"]}
    [(_, value)] = [(k, v) for k, v in decoded(h.durable) if type(k) is ConsumerGroupCurrentMemberAssignmentKey and k.member_id == "b"][-1:]
    assert [tp.assignment_epochs for tp in value.assigned_partitions] == [[3, 3]]
    assert snapshot(replayed(h, h.durable, folded=True)) == snapshot(h.shard)


def test_a_current_assignment_written_before_kafka_43_takes_the_member_epoch(h):
    """Records without assignment epochs (Kafka up to 4.2, kafkalite before this) load with every
    partition assigned at the record's member epoch, 0 if it is negative."""
    from protocol.group_records import ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions, encode_key, encode_value

    shard = h._new_shard()
    for key, value in (
        (ConsumerGroupCurrentMemberAssignmentKey(G, "old"), ConsumerGroupCurrentMemberAssignmentValue(5, 4, 0, [TopicPartitions(T_ID, [0, 1])], [TopicPartitions(T_ID, [2])])),
        (ConsumerGroupCurrentMemberAssignmentKey(G, "static"), ConsumerGroupCurrentMemberAssignmentValue(-2, 3, 0, [TopicPartitions(T_ID, [3])], [])),
    ):
        shard.replay_bytes(encode_key(key), encode_value(value))
    g = shard.groups[G]
    assert g.members["old"].assignment_epochs == {(T_ID, 0): 5, (T_ID, 1): 5, (T_ID, 2): 5}
    assert g.members["static"].assignment_epochs == {(T_ID, 3): 0}


def test_a_replaced_static_member_keeps_its_partitions_assignment_epochs(h):
    h.join("s1", instance="i")
    h.join("b")
    h.hb("s1", 2, owned=h.assigned("s1"))
    h.hb("s1", 2, owned=h.assigned("s1"))
    before = dict(h.member("s1").assignment_epochs)
    assert set(before.values()) == {2}
    h.hb("s1", -2, instance="i")  # temporary leave
    h.join("s2", instance="i")
    assert h.member("s2").assignment_epochs == before


# =========================================================================== liveness from what arrived (arrivals.py)
def arrivals_of(h):
    """The shard sees ``h.arrivals`` as the broker's connections fill it; its clock is the harness's."""
    from broker.coordinator.arrivals import Arrivals

    arrivals = Arrivals(clock=lambda: h.now / 1000)
    h.shard.waiting, h.shard.silent_ms = arrivals.waiting, arrivals.silent_ms
    return arrivals


def request(group, member):
    return SimpleNamespace(api_key=68, body=SimpleNamespace(group_id=group, member_id=member))


def test_a_member_whose_heartbeat_is_queued_is_not_fenced_when_its_session_comes_due(h):
    arrivals = arrivals_of(h)
    a, b = two_members(h)
    h.hb(a, 3)
    h.hb(b, 3)
    h.advance(44_000)
    arrivals.arrived(request(G, a))  # read from a's connection; its handler has not run yet
    h.advance(1_000)  # both sessions are due
    g = h.cgroup()
    assert a in g.members and b not in g.members  # b fenced, a kept for its waiting heartbeat
    h.advance(1_000)  # still waiting: checked again, not fenced
    assert a in h.cgroup().members
    arrivals.started(request(G, a))
    assert err(h.hb(a, 3, owned=h.assigned(a))) == E.none  # the heartbeat is handled: a new session
    h.advance(44_999)
    assert a in h.cgroup().members
    h.advance(1)
    assert a not in h.cgroup().members
    reasons = [kw["reason"] for event, kw in h.log.events if event == "consumer group member removed"]
    assert reasons == ["session timeout expired", "session timeout expired"]


def test_a_session_runs_from_the_last_request_read_even_if_its_connection_closed_unanswered(h):
    arrivals = arrivals_of(h)
    a, b = two_members(h)
    h.advance(40_000)
    h.hb(b, 3)
    arrivals.arrived(request(G, a))  # read at 40 s, then the client gave up and closed the connection
    arrivals.dropped(request(G, a))  # dropped with the connection, never handled
    h.advance(5_000)  # a's session (from its last handled heartbeat, at 0 s) is due at 45 s
    assert a in h.cgroup().members  # it was heard from at 40 s: its session runs to 85 s
    h.advance(39_999)
    h.hb(b, 3)
    assert a in h.cgroup().members
    h.advance(1)
    assert a not in h.cgroup().members and b in h.cgroup().members


def test_a_fenced_member_that_keeps_sending_heartbeats_is_still_expired(h):
    """Heartbeats the coordinator handles and refuses (a stale epoch) are no sign of life:
    the member goes once its session runs out, as in Kafka, and the client rejoins anew."""
    arrivals = arrivals_of(h)
    a, b = two_members(h)
    for _ in range(44):
        h.advance(1_000)
        h.hb(b, 3)
        arrivals.arrived(request(G, a))
        arrivals.started(request(G, a))
        assert err(h.hb(a, 1)) == E.fenced_member_epoch  # an epoch it no longer has
    h.advance(1_000)
    assert a not in h.cgroup().members


def test_a_queued_request_defers_fencing_for_at_most_one_more_session(h):
    """A client that queues heartbeats and never gets them handled (it does not read its
    answers) does not keep its member for ever."""
    arrivals = arrivals_of(h)
    a, b = two_members(h)
    h.advance(44_000)
    h.hb(b, 3)
    arrivals.arrived(request(G, a))  # never started
    h.advance(1_000)
    assert a in h.cgroup().members
    h.advance(44_000)  # deferred at 45 s, for at most one more session: to 90 s
    h.hb(b, 3)
    assert a in h.cgroup().members
    h.advance(1_000)
    assert a not in h.cgroup().members


def revoking(h, arrivals):
    """a owns everything with a 10 s rebalance timeout; b joins, a is asked to revoke (at 0 s)."""
    h.join("a", rebalance=10_000)
    h.join("b", rebalance=10_000)
    h.hb("a", h.member("a").member_epoch, owned=h.assigned("a"))
    assert h.member("a").state == UNREVOKED_PARTITIONS


def removed_reasons(h):
    return [(kw["member"], kw["reason"]) for event, kw in h.log.events if event == "consumer group member removed"]


def test_a_rebalance_timeout_is_not_deferred_because_the_member_heartbeats(h):
    arrivals = arrivals_of(h)
    revoking(h, arrivals)
    h.advance(9_000)
    arrivals.arrived(request(G, "a"))  # heard from (and handled): not a revocation
    arrivals.started(request(G, "a"))
    h.advance(1_000)
    assert "a" not in h.cgroup().members
    assert removed_reasons(h) == [("a", "did not revoke its partitions within the rebalance timeout")]


def test_a_rebalance_timeout_waits_for_a_queued_heartbeat_for_at_most_the_timeout_again(h):
    arrivals = arrivals_of(h)
    revoking(h, arrivals)
    h.advance(9_500)
    arrivals.arrived(request(G, "a"))  # it may carry the revocation: handled next
    h.advance(500)
    assert "a" in h.cgroup().members
    h.advance(9_900)
    assert "a" in h.cgroup().members  # deferred at 10 s, for at most 10 s
    h.advance(100)
    assert "a" not in h.cgroup().members
