"""KIP-932 share groups over the wire: ShareGroupHeartbeat (76) and ShareGroupDescribe (77)
against a broker process, raw requests over TCP, a restart on the same data directory,
the group id namespace shared with consumer and classic groups, and hostile input."""

from __future__ import annotations

import uuid

import pytest

from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.raw import RawClient
from tests.wait import wait_until

E = ErrorCode


def create(c: RawClient, topic: str, partitions: int = 1):
    body = {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "configs": []}], "timeout": 5000}
    assert c.request(19, 7, body).topics[0].error_code == E.none


def shb(c: RawClient, group: str, member: str, epoch: int, topics=None, rack=None):
    return c.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": rack, "subscribed_topic_names": topics})


def describe(c: RawClient, *groups: str, ops: bool = False):
    return c.request(77, 1, {"group_ids": list(groups), "include_authorized_operations": ops}).groups


def parts(resp) -> dict:
    if resp.assignment is None:
        return {}
    return {tp.topic_id: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}


def until_assigned(c, group, member, first, timeout=30.0):
    """Heartbeat until the member holds partitions (the first heartbeat initializes their state)."""
    if parts(first):
        return first
    last = [first]

    def assigned():
        resp = shb(c, group, member, last[-1].member_epoch)
        assert resp.error_code == E.none, resp
        last.append(resp)
        return resp if parts(resp) else None

    return wait_until(assigned, timeout=timeout, interval=0.02, what=f"an assignment for {member}", describe=lambda: repr(last[-1]))


@pytest.fixture
def broker(tmp_path):
    # no assignment interval: a second heartbeat sees a new target at once
    b = BrokerProcess(tmp_path / "data", "--set", "group.share.assignment.interval.ms=0").start()
    yield b
    if b.proc is not None:
        b.stop()
    b.check_handler_errors()


def test_join_assign_describe_and_restart(broker):
    c = RawClient(broker.bootstrap)
    create(c, "st", 3)
    first = shb(c, "sg", "member-a", 0, ["st"])
    assert (first.error_code, first.member_id, first.member_epoch) == (E.none, "member-a", 2)
    assert first.heartbeat_interval.total_seconds() == 5.0
    got = until_assigned(c, "sg", "member-a", first)
    assert list(parts(got).values()) == [[0, 1, 2]]
    g = describe(c, "sg")[0]
    assert (g.error_code, g.group_state, g.assignor_name, g.group_epoch, g.assignment_epoch) == (E.none, "Stable", "simple", got.member_epoch, got.member_epoch)
    (m,) = g.members
    assert (m.member_id, m.member_epoch, m.subscribed_topic_names, m.client_id) == ("member-a", got.member_epoch, ("st",), "raw")
    assert [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == [("st", (0, 1, 2))]

    broker.stop()
    broker.start()
    c = RawClient(broker.bootstrap)
    again = describe(c, "sg")[0]
    assert (again.group_epoch, again.assignment_epoch, again.group_state) == (g.group_epoch, g.assignment_epoch, "Stable")
    assert [(x.member_id, x.member_epoch, x.assignment) for x in again.members] == [(m.member_id, m.member_epoch, m.assignment)]
    # the member carries on at its epoch after the restart
    resp = shb(c, "sg", "member-a", got.member_epoch)
    assert (resp.error_code, resp.member_epoch) == (E.none, got.member_epoch)
    left = shb(c, "sg", "member-a", -1)
    assert (left.error_code, left.member_epoch) == (E.none, -1)
    assert describe(c, "sg")[0].group_state == "Empty"


def test_two_members_share_one_partition(broker):
    c = RawClient(broker.bootstrap)
    create(c, "one", 1)
    a = shb(c, "sg2", "a", 0, ["one"])
    b = shb(c, "sg2", "b", 0, ["one"])
    ra = until_assigned(c, "sg2", "a", a)
    rb = until_assigned(c, "sg2", "b", b)
    assert list(parts(ra).values()) == list(parts(rb).values()) == [[0]]


def test_group_id_namespace_and_errors(broker):
    c = RawClient(broker.bootstrap)
    create(c, "ns", 1)
    assert shb(c, "share-ns", "a", 0, ["ns"]).error_code == E.none
    cg = c.request(68, 1, {"group_id": "share-ns", "member_id": "m", "member_epoch": 0, "rebalance_timeout": 30000, "subscribed_topic_names": ["ns"],
                           "topic_partitions": []})
    assert (cg.error_code, cg.error_message) == (E.group_id_not_found, "Group share-ns is not a consumer group.")
    cons = c.request(68, 1, {"group_id": "cons-ns", "member_id": "m", "member_epoch": 0, "rebalance_timeout": 30000, "subscribed_topic_names": ["ns"],
                             "topic_partitions": []})
    assert cons.error_code == E.none
    r = shb(c, "cons-ns", "x", 0, ["ns"])
    assert (r.error_code, r.error_message) == (E.group_id_not_found, "Group cons-ns is not a share group.")
    other = describe(c, "cons-ns", "missing")
    assert [(g.error_code, g.error_message) for g in other] == [(E.group_id_not_found, "Group cons-ns is not a share group."),
                                                               (E.group_id_not_found, "Group missing not found.")]
    assert shb(c, "missing", "x", 3).error_code == E.group_id_not_found


@pytest.mark.parametrize(
    ("member", "epoch", "topics", "rack", "message"),
    [
        ("", 0, ["t"], None, "MemberId can't be empty."),
        ("m", 0, None, None, "SubscribedTopicNames must be set in first request."),
        ("m", 0, [], None, "SubscribedTopicNames must be set in first request."),
        ("m", -2, None, None, "MemberEpoch is invalid."),
        ("m", -(2**31), None, None, "MemberEpoch is invalid."),
        ("m", 0, ["t"], "", "RackId can't be empty."),
    ],
)
def test_invalid_requests(broker, member, epoch, topics, rack, message):
    c = RawClient(broker.bootstrap)
    r = shb(c, "bad", member, epoch, topics, rack)
    # an empty member id is refused before the coordinator, with no message (as Kafka 4.4)
    assert (r.error_code, r.error_message, r.member_epoch) == (E.invalid_request, message if member else None, 0)


def test_hostile_heartbeats(broker):
    c = RawClient(broker.bootstrap)
    create(c, "h", 2)
    huge = [f"topic-{i}-" + "x" * 200 for i in range(2000)]  # topics that do not exist: nothing to assign
    assert shb(c, "hostile", "m" * 30000, 0, ["h"]).error_code == E.invalid_request  # over 36 characters
    r = shb(c, "hostile", "m" * 36, 0, huge + ["h"])
    assert r.error_code == E.none
    assert shb(c, "hostile", "m" * 36, 2**31 - 1).error_code == E.fenced_member_epoch
    assert shb(c, "hostile", str(uuid.uuid4()), 7).error_code == E.unknown_member_id
    assert shb(c, "", "m", 0, ["h"]).error_code == E.invalid_request
    d = describe(c, "hostile")[0]
    assert d.error_code == E.none and len(d.members[0].subscribed_topic_names) == 2001


def test_admin_cli_lists_and_describes_share_groups(broker):
    from tests.integration.test_admin_cli import run, run_json

    c = RawClient(broker.bootstrap)
    create(c, "cli-t", 2)
    got = until_assigned(c, "cli-share", "cli-member", shb(c, "cli-share", "cli-member", 0, ["cli-t"]))
    rows = run_json(broker, "groups", "list")
    assert {"group": "cli-share", "protocol_type": "share", "state": "Stable", "type": "share"} in rows
    d = run_json(broker, "groups", "describe", "cli-share")
    assert (d["type"], d["state"], d["assignor"], d["group_epoch"]) == ("share", "Stable", "simple", got.member_epoch)
    (m,) = d["members"]
    assert (m["member_id"], m["assignment"], m["subscribed_topics"]) == ("cli-member", [["cli-t", 0], ["cli-t", 1]], ["cli-t"])
    rc, out, _ = run(broker, "groups", "describe", "cli-share")
    assert rc == 0 and "Type: share" in out and "cli-t(0,1)" in out


@pytest.mark.reference
def test_replays_the_share_group_records_kafka_44_wrote(tmp_path):
    """Kafka 4.4 runs a share group; its __consumer_offsets partition, read from Kafka's own log
    files, replays into a kafkalite shard as the group Kafka describes (every record type known)."""

    from broker.coordinator.placement import partition_for
    from broker.coordinator.share_group import ShareGroup
    from broker.coordinator.shard import GroupShard
    from broker.coordinator.common import GroupConfig
    from protocol.group_records import decode_key, decode_value, encode_key, encode_value
    from protocol.records import iter_records, split_batches
    from tests import reference_kafka

    ok, reason = reference_kafka.available()
    if not ok:
        pytest.skip(reason)
    config = {"group.share.assignment.interval.ms": 0, "group.share.assignor.offload.enable": "false"}
    k = reference_kafka.ReferenceKafka(tmp_path / "kafka", config=config).start()
    try:
        c = RawClient(k.bootstrap)
        create(c, "kt", 2)
        group = "kafka-written"
        def joined():  # FindCoordinator creates __consumer_offsets; its shard loads a moment later
            c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
            r = shb(c, group, "member-1", 0, ["kt"])
            return r if r.error_code == E.none else None

        first = wait_until(joined, timeout=60, interval=0.1, what="a first share group heartbeat answered without error")
        second = shb(c, group, "member-2", 0, ["kt"])
        until_assigned(c, group, "member-1", first, timeout=60)
        until_assigned(c, group, "member-2", second, timeout=60)
        shb(c, group, "member-2", -1)
        want = describe(c, group)[0]
    finally:
        k.stop()
    logs = sorted((tmp_path / "kafka" / "logs" / f"__consumer_offsets-{partition_for(group)}").glob("*.log"))
    shard = GroupShard(0, GroupConfig(), lambda: 0, None, None)
    replayed = 0
    for log in logs:
        for header, batch in split_batches(log.read_bytes()):
            if header.is_control:
                continue
            for rec in iter_records(batch):
                shard.replay_bytes(rec.key, rec.value, committed=True)
                replayed += 1
                key = decode_key(rec.key)
                # written back byte for byte as Kafka wrote it (one topic: no ordering question)
                assert encode_key(key) == bytes(rec.key)
                if rec.value is not None:
                    assert encode_value(decode_value(key, rec.value)) == bytes(rec.value), key
    assert replayed and shard.skipped_records == 0
    g = shard.groups[group]
    assert isinstance(g, ShareGroup)
    assert (g.state, g.group_epoch, g.assignment_epoch) == (want.group_state, want.group_epoch, want.assignment_epoch)
    (m,) = want.members
    got = g.members[m.member_id]
    assert (got.member_epoch, got.subscribed_topic_names, got.client_id) == (m.member_epoch, tuple(m.subscribed_topic_names), m.client_id)
    assert got.assigned == {tp.topic_id: frozenset(tp.partitions) for tp in m.assignment.topic_partitions}
    assert g.initialized and all(name == "kt" for name, _ in g.initialized.values())


def test_java_admin_client_lists_and_describes_share_groups(broker):
    """Kafka's Java AdminClient (kafka-clients 4.1): listGroups with the share filter, describeShareGroups."""
    from tests import java_harness

    ok, reason = java_harness.available()
    if not ok:
        pytest.skip(reason)
    c = RawClient(broker.bootstrap)
    create(c, "java-t", 2)
    got = until_assigned(c, "java-share", "java-member", shb(c, "java-share", "java-member", 0, ["java-t"]))
    listed = {g["group_id"]: g for g in java_harness.admin(broker.bootstrap, "list-groups", "share")["groups"]}
    assert listed["java-share"]["type"] == "Share" and listed["java-share"]["state"] == "Stable", listed
    assert listed["java-share"]["protocol"] == "share", listed
    d = java_harness.admin(broker.bootstrap, "describe-share-groups", "java-share", "no-such-share")["groups"]
    g = d["java-share"]
    assert (g["state"], g["group_epoch"], g["target_assignment_epoch"]) == ("Stable", got.member_epoch, got.member_epoch), g
    (m,) = g["members"]
    assert (m["member_id"], m["client_id"], m["member_epoch"]) == ("java-member", "raw", got.member_epoch), m
    assert sorted(p for _t, p in m["assignment"]) == [0, 1], m
    assert d["no-such-share"]["error"] == "GroupIdNotFoundException", d
