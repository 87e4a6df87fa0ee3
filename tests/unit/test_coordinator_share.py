"""KIP-932 share groups (ShareGroupHeartbeat) on one coordinator shard.

Deterministic: a manual clock, timers fired by hand, no sockets, no sleeping.
The behavioural reference is Kafka 4.4's GroupMetadataManager.shareGroupHeartbeat:
a member joins at epoch 0 with its own member id, the group epoch moves when
the subscription or the topics change, partitions are assigned only once
their share state is initialized (here at once, without a share-state hook),
and the ``simple`` assignor shares a partition between several members when
there are more members than partitions.
"""

from __future__ import annotations

import uuid

import pytest

from broker.coordinator.common import CoordinatorError
from broker.coordinator.share import ShareHeartbeatParams
from broker.coordinator.share_group import EMPTY, STABLE_GROUP, ShareGroup
from broker.coordinator.shard import GroupShard
from protocol.errors import ErrorCode
from protocol.group_records import ShareGroupStatePartitionMetadataKey, decode_key, decode_value

from .test_coordinator_classic import Harness
from .test_coordinator_consumer import ConsumerHarness, kinds

E = ErrorCode
G = "sg"
T_ID, U_ID = uuid.UUID(int=0xA1), uuid.UUID(int=0xB2)



class ShareHarness(ConsumerHarness):
    def __init__(self, loop, **config) -> None:
        super().__init__(loop, **config)
        self.now = 1_000_000  # Kafka reads an assignment timestamp of 0 as "never assigned"

    def shb(self, member_id: str, epoch: int = 0, *, group: str = G, topics=None, rack: str | None = None, client: str = "client"):
        """One ShareGroupHeartbeat: (answer, initialize request) or an error answer."""
        p = ShareHeartbeatParams(group_id=group, member_id=member_id, member_epoch=epoch, rack_id=rack,
                                 subscribed_topic_names=None if topics is None else list(topics), client_id=client, client_host="/127.0.0.1")
        try:
            answer, init = self.apply(lambda s: s.share.heartbeat(p)).response
        except CoordinatorError as exc:
            self.last_records = []
            return {"error_code": exc.code, "error_message": exc.message, "member_epoch": 0, "assignment": None}
        self.last_init = init
        return answer

    def sgroup(self, gid: str = G) -> ShareGroup:
        g = self.shard.groups.get(gid)
        assert isinstance(g, ShareGroup), g
        return g

    def shared(self, mid: str, gid: str = G) -> dict[str, list[int]]:
        return self.names(self.sgroup(gid).members[mid].assigned)

    def settle(self, *members: str) -> None:
        """Heartbeat every member at its epoch until nothing changes (the assignment interval passed)."""
        for _ in range(4):
            self.now += 1_000
            for mid in members:
                self.shb(mid, self.sgroup().members[mid].member_epoch)


@pytest.fixture
def h(loop):
    h = ShareHarness(loop)
    h.topic("t", 4, T_ID)
    h.topic("u", 2, U_ID)
    return h


def test_join_initializes_then_assigns_on_next_heartbeat(h):
    resp = h.shb("m1", 0, topics=["t"])
    assert resp["error_code"] == E.none
    assert resp["member_id"] == "m1"  # the member id is the client's (Kafka 4.x)
    # epoch 1 -> 2; nothing assignable yet: the share state of t is initialized by this heartbeat
    assert (resp["member_epoch"], resp["heartbeat_interval"]) == (2, 5000)
    assert resp["assignment"] == {"topic_partitions": []}
    assert ("ShareGroupStatePartitionMetadataKey", False) in kinds(h.last_records)
    g = h.sgroup()
    assert g.initialized == {T_ID: ("t", frozenset(range(4)))} and g.state == STABLE_GROUP
    h.now += 1_000
    resp = h.shb("m1", 2)
    assert resp["member_epoch"] == 3  # initialized partitions not in the target: the epoch moves
    assert h.names(resp["assignment"]) == {"t": [0, 1, 2, 3]}
    resp = h.shb("m1", 3)
    assert resp["assignment"] is None and resp["member_epoch"] == 3  # nothing changed: no assignment


def test_more_members_than_partitions_share_them(h):
    h.topic("one", 1)
    for mid in ("a", "b", "c"):
        h.shb(mid, 0, topics=["one"])
    h.settle("a", "b", "c")
    assert [h.shared(m) for m in ("a", "b", "c")] == [{"one": [0]}] * 3


def test_fewer_members_than_partitions_split_them(h):
    h.shb("a", 0, topics=["t"])
    h.shb("b", 0, topics=["t"])
    h.settle("a", "b")
    a, b = h.shared("a")["t"], h.shared("b")["t"]
    assert sorted(a + b) == [0, 1, 2, 3] and len(a) == len(b) == 2


def test_five_members_two_partitions_sharing_three(h):
    members = [f"m{i}" for i in range(5)]
    for mid in members:
        h.shb(mid, 0, topics=["u"])
    h.settle(*members)
    holders = {0: 0, 1: 0}
    for mid in members:
        for p in h.shared(mid).get("u", []):
            holders[p] += 1
    # desired sharing ceil(5/2) = 3 per partition, six slots: one member holds both
    assert holders == {0: 3, 1: 3}


def test_session_timeout_fences_member(h):
    h.shb("a", 0, topics=["t"])
    h.shb("b", 0, topics=["t"])
    h.settle("a", "b")
    epoch = h.sgroup().group_epoch
    for _ in range(10):  # a keeps heartbeating, b goes silent
        h.advance(5_000)
        h.shb("a", h.sgroup().members["a"].member_epoch)
    assert set(h.sgroup().members) == {"a"}
    assert h.sgroup().group_epoch > epoch
    h.settle("a")
    assert h.shared("a") == {"t": [0, 1, 2, 3]}
    assert h.shb("b", 5)["error_code"] == E.unknown_member_id


def test_session_timeout_of_last_member_leaves_group_empty(h):
    h.shb("a", 0, topics=["t"])
    h.advance(45_000)
    g = h.sgroup()
    assert g.state == EMPTY and not g.members and g.assignment_epoch == g.group_epoch


def test_leave(h):
    h.shb("a", 0, topics=["t"])
    resp = h.shb("a", -1)
    assert (resp["error_code"], resp["member_epoch"], resp["member_id"]) == (E.none, -1, "a")
    assert kinds(h.last_records)[:3] == [("ShareGroupCurrentMemberAssignmentKey", True), ("ShareGroupTargetAssignmentMemberKey", True),
                                         ("ShareGroupMemberMetadataKey", True)]
    assert h.sgroup().state == EMPTY
    assert h.shb("a", -1)["error_code"] == E.unknown_member_id
    assert h.shb("x", -1, group="nope")["error_code"] == E.group_id_not_found


def test_epoch_checks(h):
    h.shb("a", 0, topics=["t"])
    h.settle("a")
    e = h.sgroup().members["a"].member_epoch
    assert h.shb("a", e + 1)["error_code"] == E.fenced_member_epoch
    assert h.shb("a", e - 1)["error_code"] == E.none  # the previous epoch is tolerated
    assert h.shb("a", 1)["error_code"] == E.fenced_member_epoch
    assert h.shb("zz", 3)["error_code"] == E.unknown_member_id
    assert h.shb("a", 0, topics=["t"])["error_code"] == E.none  # epoch 0 always rejoins
    missing = h.shb("x", 1, group="nope")
    assert (missing["error_code"], missing["error_message"]) == (E.group_id_not_found, "Share group nope not found.")


def test_subscription_change_and_topic_deletion(h):
    h.shb("a", 0, topics=["t"])
    h.settle("a")
    h.shb("a", h.sgroup().members["a"].member_epoch, topics=["t", "u"])
    h.settle("a")
    assert h.shared("a") == {"t": [0, 1, 2, 3], "u": [0, 1]}
    del h.topics["u"]
    h.meta.refresh(h.topics)
    h.settle("a")
    assert h.shared("a") == {"t": [0, 1, 2, 3]}
    assert U_ID not in h.sgroup().initialized
    h.topic("t", 6)  # more partitions: initialized, then assigned
    h.settle("a")
    assert h.shared("a") == {"t": [0, 1, 2, 3, 4, 5]}


def test_group_id_namespace(h):
    h.commit("", -1, group="classic")  # a simple (classic) group
    r = h.shb("a", 0, group="classic", topics=["t"])
    assert (r["error_code"], r["error_message"]) == (E.group_id_not_found, "Group classic is not a share group.")
    h.shb("a", 0, topics=["t"])
    r = h.hb("m", 0, group=G, topics=["t"], rebalance=30_000, owned={})
    assert (r["error_code"], r["error_message"]) == (E.group_id_not_found, f"Group {G} is not a consumer group.")
    assert h.commit("", -1, group=G)[0][2] == E.group_id_not_found
    assert Harness.join(h, "", group=G).result()["error_code"] == E.inconsistent_group_protocol


def test_max_size(loop):
    h = ShareHarness(loop, group_share_max_size=2)
    h.topic("t", 1)
    h.shb("a", 0, topics=["t"])
    h.shb("b", 0, topics=["t"])
    assert h.shb("c", 0, topics=["t"])["error_code"] == E.group_max_size_reached
    assert h.shb("a", 0, topics=["t"])["error_code"] == E.none


def test_delete_group(h):
    h.shb("a", 0, topics=["t"])
    assert h.apply(lambda s: s.delete_groups([G])).response == [(G, E.non_empty_group)]
    h.shb("a", -1)
    result = h.apply(lambda s: s.delete_groups([G]))
    assert result.response == [(G, E.none)]
    assert result.extra == {G: {T_ID: [0, 1, 2, 3]}}
    assert ("ShareGroupStatePartitionMetadataKey", True) in kinds(h.last_records)
    assert kinds(h.last_records)[-1] == ("ShareGroupMetadataKey", True)
    assert G not in h.shard.groups


def test_with_hook_partitions_wait_for_initialization(h):
    h.shard.share_state_hook = True
    resp = h.shb("a", 0, topics=["t"])
    assert h.last_init == (G, 2, {T_ID: [0, 1, 2, 3]})
    g = h.sgroup()
    assert g.initializing == {T_ID: ("t", frozenset(range(4)))} and g.initialized == {}
    h.now += 1_000
    assert h.shb("a", 2)["member_epoch"] == 2 and h.last_init is None  # in flight: not asked again
    h.apply(lambda s: s.share.init.initialized(G, {T_ID: [0, 1, 2, 3]}))
    assert (g.initializing, g.initialized) == ({}, {T_ID: ("t", frozenset(range(4)))})
    resp = h.shb("a", 2)
    assert resp["member_epoch"] == 3 and h.names(resp["assignment"]) == {"t": [0, 1, 2, 3]}


def test_with_hook_failed_initialization_is_retried(h):
    h.shard.share_state_hook = True
    h.shb("a", 0, topics=["t"])
    h.apply(lambda s: s.share.init.uninitialized(G, {T_ID: [0, 1, 2, 3]}))
    assert h.sgroup().initializing == {}
    h.now += 1_000
    h.shb("a", 2)
    assert h.last_init == (G, 2, {T_ID: [0, 1, 2, 3]})


def test_replay_rebuilds_groups(h):
    for mid in ("a", "b", "c"):
        h.shb(mid, 0, topics=["t", "u"])
    h.settle("a", "b", "c")
    h.shb("c", -1)
    before = h.sgroup()
    fresh = GroupShard(0, h.config, lambda: h.now, h.log, h.loop.create_future, metadata=h.meta)
    for k, v in h.durable:
        fresh.replay_bytes(k, v, committed=True)
    after = fresh.groups[G]
    assert isinstance(after, ShareGroup)
    assert (after.group_epoch, after.assignment_epoch, after.metadata_hash, after.state) == (before.group_epoch, before.assignment_epoch, before.metadata_hash, before.state)
    assert {m: (x.member_epoch, x.previous_member_epoch, x.assigned, x.subscribed_topic_names) for m, x in after.members.items()} == {
        m: (x.member_epoch, x.previous_member_epoch, x.assigned, x.subscribed_topic_names) for m, x in before.members.items()}
    assert after.target == before.target and after.initialized == before.initialized
    # the records decode as Kafka's type 15 value
    state = [decode_value(decode_key(k), v) for k, v in h.durable if isinstance(decode_key(k), ShareGroupStatePartitionMetadataKey)]
    assert state[-1].initialized_topics


def test_failed_operation_rolls_back(h):
    h.shb("a", 0, topics=["t"])
    h.settle("a")
    before = (h.sgroup().group_epoch, dict(h.sgroup().members["a"].assigned))

    def boom(shard):
        shard.share.heartbeat(ShareHeartbeatParams(G, "b", 0, None, ["t", "u"], "c", "/h"))
        raise RuntimeError("append failed")

    with pytest.raises(RuntimeError):
        h.shard.run(boom)
    g = h.sgroup()
    assert set(g.members) == {"a"} and (g.group_epoch, dict(g.members["a"].assigned)) == before
    assert U_ID not in g.initialized


def test_three_thousand_members(loop):
    h = ShareHarness(loop, group_share_max_size=5000)
    h.topic("t", 8)
    for i in range(3000):
        assert h.shb(f"m{i}", 0, topics=["t"])["error_code"] == E.none
    h.now += 2_000
    assert h.shb("m0", h.sgroup().members["m0"].member_epoch)["error_code"] == E.none
    counts = [0] * 8
    for asg in h.sgroup().target.values():
        for p in asg.get(h.tid("t"), ()):
            counts[p] += 1
    assert counts == [375] * 8  # ceil(3000 / 8) members per partition


def test_topic_created_after_subscribing(h):
    resp = h.shb("a", 0, topics=["later"])
    assert resp["assignment"] == {"topic_partitions": []}
    h.settle("a")
    assert h.shared("a") == {}
    h.topic("later", 2)
    h.settle("a")
    assert h.shared("a") == {"later": [0, 1]}


def test_group_configs_override_session_and_interval(loop):
    h = ShareHarness(loop)
    h.topic("t", 1)
    h.config.group_overrides[G] = {"share.session.timeout.ms": "10000", "share.heartbeat.interval.ms": "2000"}
    assert h.shb("a", 0, topics=["t"])["heartbeat_interval"] == 2000
    h.advance(9_999)
    assert "a" in h.sgroup().members
    h.advance(1)
    assert "a" not in h.sgroup().members


def test_assignment_interval_batches_target_computations(loop):
    h = ShareHarness(loop, group_share_assignment_interval_ms=1000)
    h.topic("t", 2)
    h.shb("a", 0, topics=["t"])
    h.now += 1_000
    h.shb("a", 2)  # initialized partitions: epoch 3, target computed
    computed_at = h.sgroup().assignment_timestamp
    h.now += 10
    h.shb("b", 0, topics=["t"])  # the group epoch moves, the target waits for the interval
    g = h.sgroup()
    assert g.group_epoch == g.assignment_epoch + 1 and g.assignment_timestamp == computed_at
    h.now += 1_000
    h.shb("b", h.sgroup().members["b"].member_epoch)
    assert g.assignment_epoch == g.group_epoch
    targets = [h.names(g.target[m])["t"] for m in ("a", "b")]
    assert sorted(targets[0] + targets[1]) == [0, 1] and h.shared("b")["t"] == targets[1]
