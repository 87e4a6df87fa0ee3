"""Classic <-> consumer group migration (section 3.11 of shared/reference/group-coordinator.md).

Offline conversion both ways (empty groups, offsets kept), online upgrade of a
live classic group by its first KIP-848 member, classic-protocol members
inside a consumer group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup routed as
the handlers do), and online downgrade when the last KIP-848 member leaves.
Deterministic: manual clock, no sockets.
"""

from __future__ import annotations

import struct

import pytest
from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v1.data import TopicPartition as AssignedTopic

from broker.coordinator.classic import JoinParams
from broker.coordinator.classic_group import EMPTY, PREPARING_REBALANCE, ClassicGroup
from broker.coordinator.common import CoordinatorError
from broker.coordinator.consumer_group import STABLE_GROUP, UNRELEASED_PARTITIONS, ConsumerGroup
from protocol.consumer_protocol import parse_assignment
from broker.coordinator.service import heartbeat_op, join_op, leave_op, sync_op
from protocol.codec import encode
from protocol.errors import ErrorCode
from protocol.group_records import ConsumerGroupMetadataKey, GroupMetadataKey

from .test_coordinator_classic import subscription
from .test_coordinator_consumer import G, T_ID, ConsumerHarness, decoded, replayed, snapshot

E = ErrorCode


class MigrationHarness(ConsumerHarness):
    """Routes classic requests the way broker/handlers/{join,sync,heartbeat,leave}_group.py do."""

    def group(self, gid: str = G):
        return self.shard.groups.get(gid)

    def state(self, gid: str = G):
        g = self.group(gid)
        return None if g is None else g.state

    def join(self, member_id: str = "", **kw):  # classic JoinGroup, used by Harness.stable_group
        kw.setdefault("group", G)
        return self.cjoin(member_id, **kw)

    def cjoin(self, member_id: str = "", *, group: str = G, instance: str | None = None, topics=("t",), session: int = 10_000,
              rebalance: int = 30_000, version: int = 9, protocols=None, ptype: str = "consumer", client: str = "client"):
        if protocols is None:
            protocols = [("range", subscription(*topics))]
        p = JoinParams(group_id=group, member_id=member_id, group_instance_id=instance, protocol_type=ptype, protocols=list(protocols),
                       session_timeout_ms=session, rebalance_timeout_ms=rebalance, reason=None, version=version,
                       client_id=client, client_host="/127.0.0.1")
        return self.apply(join_op(p)).response

    def cjoin_new(self, **kw) -> tuple[str, dict]:
        first = self.cjoin(**kw).result()
        assert first["error_code"] == E.member_id_required
        fut = self.cjoin(first["member_id"], **kw)
        if not fut.done():
            self.advance(0)  # a classic group's join phase completes on its (zero) initial delay timer
        return first["member_id"], fut.result()

    def sync(self, member_id: str, generation: int, assignments: dict | None = None, *, group: str = G, instance: str | None = None,
             ptype: str | None = "consumer", pname: str | None = None):
        answer = self.apply(sync_op(group, generation, member_id, instance, ptype, pname, assignments or {})).response
        if not hasattr(answer, "result"):  # a consumer group answers at once: a future, as a classic group's
            fut = self.loop.create_future()
            fut.set_result(answer)
            answer = fut
        return answer

    def heartbeat(self, member_id: str, generation: int, *, group: str = G, instance: str | None = None) -> ErrorCode:
        return self.apply(heartbeat_op(group, generation, member_id, instance)).response

    def leave(self, *members, group: str = G):
        return self.apply(leave_op(group, [m if isinstance(m, tuple) else (m, None, None) for m in members])).response

    def kjoin(self, member_id: str, **kw) -> dict:
        """A KIP-848 (ConsumerGroupHeartbeat) join."""
        kw.setdefault("owned", {})
        kw.setdefault("topics", ["t"])
        return self.hb(member_id, 0, rebalance=30_000, **kw)


def make(loop, **config) -> MigrationHarness:
    h = MigrationHarness(loop, **config)
    h.topic("t", 4, T_ID)
    return h


@pytest.fixture
def h(loop):
    return make(loop)


def assigned_bytes(data: bytes) -> dict[str, list[int]]:
    asg = parse_assignment(data)
    return {tp.topic: sorted(tp.partitions) for tp in asg.assigned_partitions}


def key_types(records) -> list[str]:
    return [type(k).__name__ + ("-" if v is None else "") for k, v in decoded(records)]


# =========================================================================== offline conversion
def test_offline_classic_to_consumer_keeps_offsets(h):
    (a,), gen = h.stable_group(1)
    h.commit(a, gen, version=8)
    h.leave(a)
    assert h.state() == EMPTY
    # an epoch other than 0 does not convert
    assert h.hb("k", 1)["error_code"] == E.group_id_not_found
    resp = h.kjoin("k")
    assert resp["error_code"] == E.none and resp["member_epoch"] == 2
    assert key_types(h.last_records)[0] == "GroupMetadataKey-"
    assert isinstance(h.shard.groups[G], ConsumerGroup)
    assert h.shard.offsets.has_offsets(G)
    # after a restart the log gives the same consumer group
    for folded in (False, True):
        fresh = replayed(h, h.durable, folded=folded)
        assert snapshot(fresh) == snapshot(h.shard)


def test_offline_consumer_to_classic_keeps_offsets(h):
    h.kjoin("k")
    h.commit("k", 2)
    h.hb("k", -1)
    assert h.cgroup().state == "Empty"
    n = len(h.durable)
    mid, _ = h.cjoin_new()
    types = key_types(h.durable[n:])
    assert types[-1] == "GroupMetadataKey"  # the new classic group
    assert "ConsumerGroupMetadataKey-" in types and "ConsumerGroupTargetAssignmentMetadataKey-" in types
    g = h.shard.groups[G]
    assert isinstance(g, ClassicGroup) and mid in g.members
    assert h.shard.offsets.has_offsets(G)
    fresh = replayed(h, h.durable, folded=True)
    assert isinstance(fresh.groups[G], ClassicGroup)


# =========================================================================== online upgrade
def test_online_upgrade_keeps_members_partitions(h):
    (a, b), gen = h.stable_group(2)
    # a rejoins: the group prepares a rebalance and a's JoinGroup is parked
    parked = h.cjoin(a)
    assert h.state() == PREPARING_REBALANCE and not parked.done()
    n = len(h.durable)
    resp = h.kjoin("k")
    assert resp["error_code"] == E.none
    assert parked.result()["error_code"] == E.rebalance_in_progress
    g = h.cgroup()
    types = key_types(h.durable[n:])
    assert types[0] == "GroupMetadataKey-"
    # classic members became consumer-group members at the old generation with their partitions
    for mid, parts in ((a, [0]), (b, [1])):
        m = g.members[mid]
        assert m.classic is not None and m.subscribed_topic_names == ["t"]
        assert h.names(m.assigned) == {"t": parts}
    # the new member bumped the epoch past the generation
    assert g.group_epoch == gen + 1 and resp["member_epoch"] == gen + 1
    assert g.members[a].member_epoch == gen  # not reconciled yet
    for folded in (False, True):
        assert snapshot(replayed(h, h.durable, folded=folded)) == snapshot(h.shard)


def test_online_upgrade_records_epoch_equal_generation(h):
    (a, b), gen = h.stable_group(2)
    h.kjoin("k")
    epochs = [v.epoch for k, v in decoded(h.last_records) if isinstance(k, ConsumerGroupMetadataKey)]
    assert epochs == [gen, gen + 1]


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_online_upgrade_refused_by_policy(loop, policy):
    h = make(loop, group_consumer_migration_policy=policy)
    h.stable_group(2)
    resp = h.kjoin("k")
    assert resp["error_code"] == E.group_id_not_found
    assert isinstance(h.shard.groups[G], ClassicGroup) and h.state() == "Stable"


def test_online_upgrade_refused_with_user_data(h):
    (a, b), gen = h.stable_group(2)
    tps = (AssignedTopic(topic="t", partitions=(0,)),)
    h.group().members[a].assignment = struct.pack(">h", 1) + encode(ConsumerProtocolAssignment(assigned_partitions=tps, user_data=b"custom"))
    resp = h.kjoin("k")
    assert resp["error_code"] == E.group_id_not_found
    assert isinstance(h.shard.groups[G], ClassicGroup)


def test_online_upgrade_at_consumer_max_size(loop):
    """Kafka converts a group of exactly max size, then rejects the joiner as GROUP_MAX_SIZE_REACHED (nothing written)."""
    h = make(loop, group_consumer_max_size=2)
    h.stable_group(2)
    n = len(h.durable)
    assert h.kjoin("k")["error_code"] == E.group_max_size_reached
    assert isinstance(h.shard.groups[G], ClassicGroup) and h.state() == "Stable"
    assert len(h.durable) == n
    h = make(loop, group_consumer_max_size=1)
    h.stable_group(2)
    assert h.kjoin("k")["error_code"] == E.group_id_not_found


# =========================================================================== classic members inside a consumer group
def test_classic_member_inside_consumer_group(h):
    h.kjoin("k")
    # v4+ dynamic joiners still get MEMBER_ID_REQUIRED (a Kafka Uuid)
    first = h.cjoin().result()
    assert first["error_code"] == E.member_id_required and len(first["member_id"]) == 22
    c = first["member_id"]
    ans = h.cjoin(c).result()
    g = h.cgroup()
    assert ans["error_code"] == E.none
    assert (ans["generation_id"], ans["protocol_type"], ans["protocol_name"], ans["leader"], ans["members"]) == (3, "consumer", "range", "", [])
    assert g.members[c].classic is not None and g.members[c].member_epoch == 3
    tc = h.target(c)
    assert len(tc["t"]) == 2
    # its partitions are still k's: nothing yet
    assert g.members[c].state == UNRELEASED_PARTITIONS
    s = h.sync(c, 3).result()
    assert s["error_code"] == E.none and assigned_bytes(s["assignment"]) == {}
    assert (s["protocol_type"], s["protocol_name"]) == ("consumer", "range")
    assert h.heartbeat(c, 3) == E.none  # nothing freed yet
    assert h.heartbeat(c, 2) == E.illegal_generation
    assert h.heartbeat("ghost", 3) == E.unknown_member_id
    # k revokes: c's partitions are free, it must rejoin to get them
    h.hb("k", 2, owned={"t": [0, 1, 2, 3]})
    h.hb("k", 2, owned=h.assigned("k"))
    assert h.heartbeat(c, 3) == E.rebalance_in_progress
    ans = h.cjoin(c).result()
    assert ans["error_code"] == E.none and ans["generation_id"] == 3
    s = h.sync(c, 3).result()
    assert assigned_bytes(s["assignment"]) == tc
    assert h.heartbeat(c, 3) == E.none
    assert g.state == STABLE_GROUP
    # OffsetCommit from the classic member: its generation is the member epoch
    assert {e for *_, e in h.commit(c, 3, version=8)} == {E.none}
    assert {e for *_, e in h.commit(c, 2, version=8)} == {E.illegal_generation}
    # a new KIP-848 member: the classic member must rejoin
    h.kjoin("k2")
    assert h.heartbeat(c, 3) == E.rebalance_in_progress


def test_classic_v3_join_is_added_directly_and_sync_checks_protocol(h):
    h.kjoin("k")
    ans = h.cjoin(version=3).result()
    assert ans["error_code"] == E.none and ans["member_id"]
    c = ans["member_id"]
    assert h.sync(c, ans["generation_id"], pname="roundrobin").result()["error_code"] == E.inconsistent_group_protocol
    assert h.sync(c, ans["generation_id"] + 5).result()["error_code"] == E.illegal_generation


def test_classic_leave_inside_consumer_group(h):
    h.kjoin("k")
    c, ans = h.cjoin_new()
    epoch = h.cgroup().group_epoch
    top, per = h.leave(c)
    assert top == E.none and per[0]["error_code"] == E.none
    g = h.cgroup()
    assert c not in g.members and g.group_epoch == epoch + 1
    top, per = h.leave("ghost")
    assert per[0]["error_code"] == E.unknown_member_id


# =========================================================================== online downgrade
def test_online_downgrade_when_last_consumer_member_leaves(h):
    h.kjoin("k")
    c, ans = h.cjoin_new()
    h.hb("k", 1, owned={"t": [0, 1, 2, 3]})
    h.hb("k", 1, owned=h.assigned("k"))
    h.cjoin(c)
    h.sync(c, 2)
    tc = h.target(c)
    epoch = h.cgroup().group_epoch
    n = len(h.durable)
    resp = h.hb("k", -1)
    assert resp["error_code"] == E.none
    g = h.shard.groups[G]
    assert isinstance(g, ClassicGroup)
    assert g.state == PREPARING_REBALANCE and set(g.members) == {c}
    assert g.protocol_type == "consumer" and g.protocol_name == "range"
    # Kafka's convertToClassicGroup replaces the fencing: generation = the group epoch, not bumped
    assert g.generation == epoch
    types = key_types(h.durable[n:])
    assert "ConsumerGroupMetadataKey" not in types  # no epoch bump record
    assert types[-1] == "GroupMetadataKey" and types[-2] == "ConsumerGroupMetadataKey-"
    [record] = [v for k, v in decoded(h.durable[n:]) if isinstance(k, GroupMetadataKey)]
    assert record.generation == epoch and [m.member_id for m in record.members] == [c]
    # the classic member's assignment is its target assignment, in consumer-protocol bytes
    assert assigned_bytes(g.members[c].assignment) == tc
    # the classic protocol takes over: its heartbeat says rejoin
    assert h.heartbeat(c, g.generation) == E.rebalance_in_progress
    fresh = replayed(h, h.durable, folded=True)
    assert isinstance(fresh.groups[G], ClassicGroup) and set(fresh.groups[G].members) == {c}


def test_downgrade_by_session_timeout_of_last_consumer_member(h):
    h.kjoin("k")
    c, ans = h.cjoin_new(session=60_000)
    h.sync(c, ans["generation_id"])  # else its join timer (rebalance timeout, 30 s) expires it first
    epoch = h.cgroup().group_epoch
    h.advance(45_000)  # k's session expires; c's classic session (60 s) does not
    g = h.shard.groups[G]
    assert isinstance(g, ClassicGroup) and set(g.members) == {c} and g.generation == epoch
    assert g.state == PREPARING_REBALANCE


def test_no_downgrade_when_policy_forbids(loop):
    h = make(loop, group_consumer_migration_policy="upgrade")
    h.kjoin("k")
    c, _ = h.cjoin_new()
    h.hb("k", -1)
    g = h.shard.groups[G]
    assert isinstance(g, ConsumerGroup) and set(g.members) == {c}


def test_a_failed_upgrade_heartbeat_leaves_the_classic_group_untouched(h):
    """The first KIP-848 member converts a live classic group, then fails: the conversion
    is rolled back with it (the classic group, its members' session timers), nothing is written."""
    (a, b), gen = h.stable_group(2)
    group, n = h.group(), len(h.durable)
    timers = dict(h.shard.timers._live)

    def failing(*_args, **_kw):
        raise CoordinatorError(E.fenced_member_epoch, "injected")

    h.shard.consumer._reconcile = failing
    assert h.kjoin("k")["error_code"] == E.fenced_member_epoch
    assert h.shard.groups[G] is group and h.state() == "Stable" and sorted(group.members) == sorted([a, b])
    assert len(h.durable) == n and h.shard.timers._live == timers
    del h.shard.consumer._reconcile
    h.advance(10_001)  # the classic members' session timers still run: both expire
    assert h.state() == EMPTY
