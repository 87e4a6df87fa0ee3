"""A cluster of kafkalite processes (``serve --nodes 3``) with real clients, and real
processes killed with SIGKILL (issue 26; docs/multinode.md).

One node at a time (the active one) leads every partition and hosts every
coordinator; the others answer with the leader's address. Each test starts its own
cluster through the pytest plugin's ``kafkalite_cluster``.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
import uuid

import pytest

from tests.multinode_support import Recorder
from tests.multinode_support import create_topic as _create
from tests.raw import RawClient
from tests.wait import wait_until

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

NOT_LEADER_OR_FOLLOWER = 6
NOT_COORDINATOR = 16


def _await_exit(pids: list[int], timeout: float = 30.0) -> list[int]:
    """The pids still running after waiting for their exit (a pidfd each: no polling)."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    try:
        while fds and time.monotonic() < deadline:
            ready, _, _ = select.select(list(fds), [], [], max(0.0, deadline - time.monotonic()))
            for fd in ready:
                fds.pop(fd)
                os.close(fd)
        return sorted(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


def _read_all(bootstrap: str, topic: str, count: int, *, group: str | None = None, isolation: str = "read_uncommitted") -> list:
    consumer = ck.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group or f"read-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": isolation,
    })
    consumer.subscribe([topic])
    got = []
    try:
        wait_until(lambda: _drain(consumer, got) >= count, timeout=60, what=f"{count} records of {topic}", describe=lambda: len(got))
    finally:
        consumer.close()
    return got


def _drain(consumer, got: list) -> int:
    for msg in consumer.consume(500, timeout=0.2):
        if msg.error() is None:
            got.append((msg.partition(), msg.offset(), msg.value()))
    return len(got)


def test_three_nodes_each_describe_the_cluster_and_serve_clients_through_any_of_them(kafkalite_cluster):
    cluster = kafkalite_cluster(nodes=3)
    assert sorted(cluster.nodes) == [1, 2, 3]
    assert len({address for address, _ in cluster.nodes.values()}) == 3
    assert len({pid for _, pid in cluster.nodes.values()}) == 3
    assert cluster.ready_address == cluster.address(1)
    for node_id in (1, 2, 3):
        md = AdminClient({"bootstrap.servers": cluster.address(node_id)}).list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 2, 3]
        assert {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()} == {i: cluster.address(i) for i in (1, 2, 3)}
        assert md.controller_id == 1
    # a client that knows only node 3 creates, writes and reads a replicated topic
    only3 = cluster.address(3)
    _create(only3, "t", 2)
    md = AdminClient({"bootstrap.servers": only3}).list_topics("t", timeout=10)
    parts = md.topics["t"].partitions
    assert [(p.leader, sorted(p.replicas), sorted(p.isrs)) for p in parts.values()] == [(1, [1, 2, 3], [1, 2, 3])] * 2
    rec = Recorder()
    producer = ck.Producer({"bootstrap.servers": only3, "acks": "all"})
    for i in range(200):
        producer.produce("t", value=b"%d" % i, partition=i % 2, on_delivery=rec)
    assert producer.flush(30) == 0
    assert rec.errors == [] and len(rec.acked) == 200
    assert sorted(_read_all(only3, "t", 200)) == sorted(rec.acked)


def test_a_standby_node_answers_with_the_leader(kafkalite_cluster):
    cluster = kafkalite_cluster(nodes=2)
    _create(cluster.address(1), "t", 1, rf=2)
    wait_until(lambda: "t" in AdminClient({"bootstrap.servers": cluster.address(2)}).list_topics(timeout=10).topics, what="t on node 2")
    raw = RawClient(cluster.address(2))
    try:
        produce = {"transactional_id": None, "acks": -1, "timeout": 5000,
                   "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}]}
        answer = raw.request(0, 11, produce)
        part = answer.responses[0].partition_responses[0]
        assert part.error_code == NOT_LEADER_OR_FOLLOWER
        assert part.current_leader.leader_id == 1  # KIP-951: the client goes to node 1 without another Metadata
        host, port = cluster.address(1).rsplit(":", 1)
        assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [(1, host, int(port))]
        find = raw.request(10, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        assert [(c.error_code, c.node_id, c.port) for c in find.coordinators] == [(0, 1, int(port))]
        heartbeat = raw.request(12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None})
        assert heartbeat.error_code == NOT_COORDINATOR
    finally:
        raw.close()


def test_a_standby_node_forwards_admin_requests_to_the_active_node(kafkalite_cluster):
    """KIP-590: CreateTopics, DeleteTopics, config changes and reassignments sent to a standby node are forwarded, and
    answered once the standby node shows the change (NOT_CONTROLLER without an active node:
    tests/unit/test_multinode_parts.py)."""
    cluster = kafkalite_cluster(nodes=3)
    raw = RawClient(cluster.address(2))
    try:
        create = raw.request(19, 7, {"topics": [{"name": "u", "num_partitions": 3, "replication_factor": 2, "assignments": [],
                                                 "configs": [{"name": "retention.ms", "value": "60000"}]}],
                                     "timeout": 5000, "validate_only": False})
        assert [(t.name, t.error_code, t.num_partitions) for t in create.topics] == [("u", 0, 3)]
        # answered once node 2 applied it: its own Metadata lists the topic at once
        md = raw.request(3, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": "u"}], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
        assert [(t.name, t.error_code, len(t.partitions)) for t in md.topics] == [("u", 0, 3)]
        again = raw.request(19, 7, {"topics": [{"name": "u", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
                                    "timeout": 5000, "validate_only": False})
        assert again.topics[0].error_code == 36  # TOPIC_ALREADY_EXISTS, from the active node
        alter = raw.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": "u",
                                                   "configs": [{"name": "retention.ms", "config_operation": 0, "value": "120000"}]}],
                                    "validate_only": False})
        assert [(r.error_code, r.resource_name) for r in alter.responses] == [(0, "u")]
        for node_id in (2, 3):  # every node shows the new value at once
            admin = AdminClient({"bootstrap.servers": cluster.address(node_id)})
            configs = admin.describe_configs([ck.admin.ConfigResource("topic", "u")])
            assert next(iter(configs.values())).result(10)["retention.ms"].value == "120000"
        # the partition reassignments too: a target naming every node is complete at once, any other set refused
        moves = raw.request(45, 1, {"timeout": 5000, "allow_replication_factor_change": True, "topics": [
            {"name": "u", "partitions": [{"partition_index": 0, "replicas": [3, 1, 2]}, {"partition_index": 1, "replicas": [1, 2]}]}]})
        assert [(p.partition_index, p.error_code) for t in moves.responses for p in t.partitions] == [(0, 0), (1, 39)]  # INVALID_REPLICA_ASSIGNMENT
        listed = raw.request(46, 0, {"timeout": 5000, "topics": None})
        assert (listed.error_code, listed.topics) == (0, ())
        delete = raw.request(20, 6, {"topics": [{"name": "u", "topic_id": uuid.UUID(int=0)}], "timeout": 5000})
        assert [(r.name, r.error_code) for r in delete.responses] == [("u", 0)]
        md = raw.request(3, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": "u"}], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
        assert md.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION on node 2 as soon as the delete is answered
    finally:
        raw.close()


def test_create_partitions_takes_an_assignment_naming_any_node(kafkalite_cluster):
    """CreatePartitions, as CreateTopics, takes a manual assignment naming any node of the cluster (each
    at most once per partition); it used to allow only the active node's id (librdkafka's 0081_admin
    on 3 nodes: INVALID_REPLICA_ASSIGNMENT)."""
    from confluent_kafka.admin import NewPartitions

    cluster = kafkalite_cluster(nodes=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    _create(cluster.bootstrap_servers, "grow", 1, rf=3)
    admin.create_partitions([NewPartitions("grow", 2, replica_assignment=[[3, 2, 1]])])["grow"].result(30)
    assert len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 2
    for wrong in ([4, 2, 1], [2, 2, 1]):
        with pytest.raises(ck.KafkaException) as refused:
            admin.create_partitions([NewPartitions("grow", 3, replica_assignment=[wrong])])["grow"].result(30)
        assert refused.value.args[0].code() == ck.KafkaError.INVALID_REPLICA_ASSIGNMENT


def test_an_idempotent_producer_loses_nothing_when_the_leader_is_killed(kafkalite_cluster):
    """Must-have 1: acks=all, idempotent, writing while the leader of its partitions gets SIGKILL."""
    cluster = kafkalite_cluster(nodes=3)
    _create(cluster.bootstrap_servers, "orders", 3)
    rec = Recorder()
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True, "linger.ms": 2})
    before = cluster.active
    i = 0
    while len(rec.acked) < 2000:
        producer.produce("orders", key=b"%d" % (i % 11), value=b"%d" % i, on_delivery=rec)
        i += 1
        producer.poll(0)
        if i % 500 == 0:
            producer.poll(0.05)
    cluster.kill_node(before)
    after = wait_until(lambda: cluster.active if cluster.active not in (before, -1) else None, what="a new leader")
    target = len(rec.acked) + 2000
    while len(rec.acked) < target:
        producer.produce("orders", key=b"%d" % (i % 11), value=b"%d" % i, on_delivery=rec)
        i += 1
        producer.poll(0)
        if i % 500 == 0:
            producer.poll(0.05)
    assert producer.flush(60) == 0
    assert rec.errors == []
    assert after != before
    got = _read_all(cluster.bootstrap_servers, "orders", len(rec.acked))
    assert len(got) == len(set(got)) == len(rec.acked)  # every acknowledged record once
    assert sorted(got) == sorted(rec.acked)
    for p in range(3):  # in order per partition: offsets and values rise together
        values = [int(v) for part, _, v in sorted(got) if part == p]
        assert values == sorted(values)


def test_the_leader_epoch_rises_with_each_new_leader(kafkalite_cluster):
    """KIP-101/KIP-320: each election gives every partition a higher leader epoch, reported by every
    node's Metadata and written into the batches; OffsetForLeaderEpoch says where an earlier epoch
    ended, and a client naming a stale epoch is fenced."""
    from protocol.errors import ErrorCode

    fenced, unknown = ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch
    cluster = kafkalite_cluster(nodes=3)
    _create(cluster.bootstrap_servers, "epochs", 1)

    def epoch_on(node: int) -> int:
        raw = RawClient(cluster.address(node))
        try:
            md = raw.request(3, 12, {"topics": [{"name": "epochs", "topic_id": None}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        finally:
            raw.close()
        (part,) = md.topics[0].partitions
        return part.leader_epoch

    def produce(n: int) -> None:
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(n):
            producer.produce("epochs", value=b"%d" % i, partition=0)
        assert producer.flush(60) == 0

    first = cluster.active
    old = epoch_on(first)
    assert [epoch_on(n) for n in (1, 2, 3)] == [old] * 3
    produce(5)
    cluster.kill_node(first)
    new_leader = wait_until(lambda: cluster.active if cluster.active not in (first, -1) else None, what="a new leader")
    live = [n for n in (1, 2, 3) if n != first]
    wait_until(lambda: all(epoch_on(n) > old for n in live), what="every live node to report the new epoch")
    new = epoch_on(new_leader)
    assert [epoch_on(n) for n in live] == [new, new]
    produce(3)

    raw = RawClient(cluster.address(new_leader))
    try:
        def end_of(epoch: int, current: int):
            body = {"replica_id": -1, "topics": [{"topic": "epochs", "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]}
            p = raw.request(23, 4, body).topics[0].partitions[0]
            return p.error_code, p.leader_epoch, p.end_offset

        assert end_of(old, new) == (0, old, 5)  # the old epoch ended where the new leader began
        assert end_of(new, new) == (0, new, 8)
        assert end_of(old, -1) == (0, old, 5)
        assert end_of(new + 1, new)[1:] == (-1, -1)
        assert end_of(old, old)[0] == fenced
        assert end_of(old, new + 1)[0] == unknown

        def list_offset(timestamp: int, current: int):
            body = {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "epochs", "partitions": [{"partition_index": 0, "current_leader_epoch": current, "timestamp": timestamp}]}]}
            p = raw.request(2, 7, body).topics[0].partitions[0]
            return p.error_code, p.offset, p.leader_epoch

        assert list_offset(-1, new) == (0, 8, new)
        assert list_offset(-2, new) == (0, 0, old)
        assert list_offset(-1, old)[0] == fenced

        fetch = {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                 "session_epoch": -1, "topics": [{"topic": "epochs", "partitions": [
                     {"partition": 0, "current_leader_epoch": old, "fetch_offset": 0, "last_fetched_epoch": -1, "log_start_offset": -1,
                      "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
        answer = raw.request(1, 12, fetch)
        assert answer.error_code == 0 and answer.responses[0].partitions[0].error_code == fenced
    finally:
        raw.close()

    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "epochs", "auto.offset.reset": "earliest"})
    consumer.assign([ck.TopicPartition("epochs", 0, 0)])
    got = []
    try:
        wait_until(lambda: got.extend(m for m in consumer.consume(10, timeout=0.2) if m.error() is None) or len(got) >= 8, what="8 records")
    finally:
        consumer.close()
    assert [m.leader_epoch() for m in got] == [old] * 5 + [new] * 3  # the epoch each batch was written in


@pytest.mark.parametrize("how", ["kill", "stop"])
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_carries_on_when_its_coordinator_is_killed(kafkalite_cluster, protocol, how):
    """Must-have 2 (``kill``: SIGKILL) and must-have 4 for groups (``stop``: a controlled shutdown of the
    node, SIGTERM): no committed offset goes backwards, no partition owned by two members at once.

    The members stop committing for the moment of the kill: librdkafka has a known bug
    (confluentinc/librdkafka#3645, open) where an OffsetCommit queued for a coordinator that goes
    away loops "Closing connection due to nodename change" until the request times out, so the
    member sends no heartbeat and its session expires (seen here once in five runs; it is the
    client's bug, and would hit it against Kafka as well)."""
    cluster = kafkalite_cluster(nodes=3)
    topic, group, partitions = "events", f"g-{protocol}", 4
    _create(cluster.bootstrap_servers, topic, partitions)
    stop = threading.Event()
    owners: dict[int, str] = {}
    overlaps: list[tuple] = []
    lock = threading.Lock()
    consumed: list[tuple[int, int]] = []
    committing = threading.Event()
    committing.set()
    in_commit = [0]  # members inside a synchronous commit now
    commit_errors: list = []  # those of the commits sent from the move on
    moved = threading.Event()

    def member(name: str) -> None:
        conf = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "group.protocol": protocol}
        if protocol == "classic":
            conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500, "partition.assignment.strategy": "cooperative-sticky"})

        def assigned(consumer, parts):
            with lock:
                for p in parts:
                    if owners.get(p.partition) not in (None, name):
                        overlaps.append((p.partition, owners[p.partition], name))
                    owners[p.partition] = name

        def revoked(consumer, parts):
            with lock:
                for p in parts:
                    if owners.get(p.partition) == name:
                        del owners[p.partition]

        consumer = ck.Consumer(conf)
        consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            with lock:
                consumed.append((msg.partition(), msg.offset()))
            with lock:
                if not committing.is_set():
                    continue  # the next commit after the move carries the offset
                in_commit[0] += 1
            try:
                consumer.commit(msg, asynchronous=False)
            except ck.KafkaException as exc:  # while the coordinator moves; the next commit carries the offset
                with lock:
                    if moved.is_set():  # not the first rebalances' REBALANCE_IN_PROGRESS and ILLEGAL_GENERATION
                        commit_errors.append(exc.args[0])
            finally:
                with lock:
                    in_commit[0] -= 1
        consumer.close()

    threads = [threading.Thread(target=member, args=(f"m{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    sampler = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    tps = [ck.TopicPartition(topic, p) for p in range(partitions)]
    seen: dict[int, int] = {}
    backwards: list[tuple] = []

    def sample() -> None:
        try:
            committed = sampler.committed(tps, timeout=5)
        except ck.KafkaException:
            return  # the coordinator is moving
        for tp in committed:
            if tp.offset >= 0:
                if tp.offset < seen.get(tp.partition, -1):
                    backwards.append((tp.partition, seen[tp.partition], tp.offset))
                seen[tp.partition] = max(tp.offset, seen.get(tp.partition, -1))

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic, value=b"%d" % i, partition=i % partitions)
        assert producer.flush(60) == 0

    try:
        produce(400)
        wait_until(lambda: len(consumed) >= 200, timeout=60, what="the group consuming")
        sample()
        before = cluster.active
        with lock:
            committing.clear()
        wait_until(lambda: in_commit[0] == 0, what="the commits in flight to finish")  # see the docstring
        moved.set()
        (cluster.kill_node if how == "kill" else cluster.stop_node)(before)
        wait_until(lambda: cluster.active not in (before, -1), what="a new coordinator")
        committing.set()
        produce(400)
        wait_until(lambda: (sample(), len({p for p, _ in consumed}) == partitions and sum(seen.values()) >= 800)[1], timeout=90,
                   what="every record consumed and committed after the move", describe=lambda: (seen, len(consumed)))
        assert cluster.active not in (before, -1)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        sampler.close()
    assert overlaps == []
    assert backwards == []
    assert sum(seen.values()) == 800  # every partition committed to its end: 200 records each
    assert [e.name() for e in commit_errors if not e.retriable()] == []  # must-have 4: only retriable errors


def test_kill_9_of_the_controller_stops_the_nodes_and_a_restart_keeps_everything(kafkalite_cluster, tmp_path):
    """Must-have 5: the nodes exit; the cluster started again on the directory has every record and commit."""
    cluster = kafkalite_cluster(nodes=3)
    _create(cluster.bootstrap_servers, "keep", 2)
    rec = Recorder()
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    for i in range(300):
        producer.produce("keep", value=b"%d" % i, partition=i % 2, on_delivery=rec)
    assert producer.flush(30) == 0 and len(rec.acked) == 300
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "keeper", "enable.auto.commit": False})
    consumer.commit(offsets=[ck.TopicPartition("keep", 0, 150), ck.TopicPartition("keep", 1, 77)], asynchronous=False)
    consumer.close()
    pids = [pid for _, pid in cluster.nodes.values()]
    cluster.kill()
    assert _await_exit(pids) == []
    from broker.multinode.testing import ClusterProcess

    with ClusterProcess(cluster.data_dir, nodes=3) as again:
        got = _read_all(again.bootstrap_servers, "keep", 300)
        assert sorted(got) == sorted(rec.acked)
        reader = ck.Consumer({"bootstrap.servers": again.bootstrap_servers, "group.id": "keeper"})
        committed = reader.committed([ck.TopicPartition("keep", 0), ck.TopicPartition("keep", 1)], timeout=30)
        reader.close()
        assert [tp.offset for tp in committed] == [150, 77]


def test_stop_start_and_move_leader(kafkalite_cluster):
    """Controlled shutdown, a restart, and a move of the leadership, with a producer writing throughout:
    it sees no error (retriable ones are retried inside the client)."""
    cluster = kafkalite_cluster(nodes=3)
    _create(cluster.bootstrap_servers, "moves", 2)
    rec = Recorder()
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True, "linger.ms": 2})
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            producer.produce("moves", value=b"%d" % i, on_delivery=rec)
            i += 1
            producer.poll(0.002)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until(lambda: len(rec.acked) > 200, what="writes")
        answer = cluster.stop_node(1)
        assert [n["live"] for n in answer["nodes"]] == [False, True, True]
        assert wait_until(lambda: cluster.active in (2, 3) and cluster.active) in (2, 3)
        mark = len(rec.acked)
        wait_until(lambda: len(rec.acked) > mark + 200, what="writes after the stop")
        cluster.start_node(1)
        assert [n["live"] for n in cluster.describe()["nodes"]] == [True, True, True]
        moved = cluster.move_leader("moves", 0, 1)
        assert moved["active"] == 1
        mark = len(rec.acked)
        wait_until(lambda: len(rec.acked) > mark + 200, what="writes after the move")
    finally:
        stop.set()
        writer.join(30)
    assert producer.flush(60) == 0
    assert rec.errors == []
    got = _read_all(cluster.bootstrap_servers, "moves", len(rec.acked))
    assert sorted(got) == sorted(rec.acked)


def test_elect_leaders_moves_leadership_back_to_the_preferred_replica(kafkalite_cluster):
    """ElectLeaders PREFERRED, sent to a standby node (forwarded, KIP-590): the lowest node id, the first
    of every partition's replicas, leads again; not needed while it leads, not available while it is down."""
    from protocol.errors import ErrorCode

    cluster = kafkalite_cluster(nodes=3)
    _create(cluster.bootstrap_servers, "elect", 2)

    def elect(node: int, partitions=(0, 1), election_type: int = 0):
        raw = RawClient(cluster.address(node))
        try:
            body = {"election_type": election_type, "timeout": 30_000,
                    "topic_partitions": None if partitions is None else [{"topic": "elect", "partitions": list(partitions)}]}
            answer = raw.request(43, 2, body)
        finally:
            raw.close()
        assert answer.error_code == 0
        return {(t.topic, r.partition_id): r.error_code for t in answer.replica_election_results for r in t.partition_result}

    def leaders(node: int) -> set[int]:
        md = AdminClient({"bootstrap.servers": cluster.address(node)}).list_topics("elect", timeout=10)
        return {p.leader for p in md.topics["elect"].partitions.values()}

    assert cluster.active == 1
    assert elect(3) == {("elect", 0): ErrorCode.election_not_needed, ("elect", 1): ErrorCode.election_not_needed}
    assert cluster.move_leader("elect", 0, 2)["active"] == 2
    assert elect(2, election_type=1) == {("elect", 0): ErrorCode.election_not_needed, ("elect", 1): ErrorCode.election_not_needed}  # unclean: it has a leader
    assert elect(3) == {("elect", 0): ErrorCode.none, ("elect", 1): ErrorCode.none}
    wait_until(lambda: cluster.active == 1 and leaders(3) == {1}, what="node 1 leading again", describe=lambda: cluster.describe())
    wait_until(lambda: [n["live"] for n in cluster.describe()["nodes"]] == [True, True, True], what="the old leader back as a standby")
    assert cluster.move_leader("elect", 0, 2)["active"] == 2
    cluster.kill_node(1)
    every = elect(3, partitions=None)  # every partition, __consumer_offsets' too
    assert {k: v for k, v in every.items() if k[0] == "elect"} == {("elect", 0): ErrorCode.preferred_leader_not_available, ("elect", 1): ErrorCode.preferred_leader_not_available}
    assert set(every.values()) == {ErrorCode.preferred_leader_not_available} and len(every) > 2
    assert cluster.active == 2


def test_transactions_commit_exactly_once_across_a_coordinator_kill(kafkalite_cluster):
    """Must-have 3: batches written in transactions while the transaction coordinator's node is
    killed; a read_committed consumer sees every committed batch once and nothing else."""
    cluster = kafkalite_cluster(nodes=3)
    _create(cluster.bootstrap_servers, "out", 3)
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "tx-move", "transaction.timeout.ms": 20000}
    producer = ck.Producer(conf)
    producer.init_transactions(30)
    committed: list[int] = []
    before = None
    batch = 0
    while batch < 30:
        if batch == 10 and before is None:
            before = cluster.active
            cluster.kill_node(before)
        try:
            producer.begin_transaction()
            for i in range(20):
                producer.produce("out", value=b"%d-%d" % (batch, i), partition=i % 3)
            producer.commit_transaction(30)
            committed.append(batch)
            batch += 1
        except ck.KafkaException as exc:
            err = exc.args[0]
            if err.txn_requires_abort():
                producer.abort_transaction(30)
            elif err.fatal():
                producer = ck.Producer(conf)
                producer.init_transactions(30)
            elif not err.retriable():
                raise
    assert cluster.active not in (before, -1)
    got = _read_all(cluster.bootstrap_servers, "out", 600, isolation="read_committed")
    values = [v for _, _, v in got]
    assert len(values) == len(set(values)) == 600
    assert sorted(values) == sorted(b"%d-%d" % (b, i) for b in committed for i in range(20))


def test_a_hung_node_is_fenced_when_its_lease_expires(kafkalite_cluster):
    """A node that stops heartbeating (SIGSTOP) holds its lease only ``broker.session.timeout.ms``:
    the controller kills it, and another node leads."""
    import signal

    cluster = kafkalite_cluster(nodes=2, settings={"broker.session.timeout.ms": 1000, "broker.heartbeat.interval.ms": 100})
    _create(cluster.bootstrap_servers, "h", 1, rf=2)
    pid = cluster.pid(1)
    os.kill(pid, signal.SIGSTOP)
    assert _await_exit([pid]) == []  # the controller killed it (a stopped process dies on SIGKILL)
    wait_until(lambda: cluster.active == 2, what="node 2 active")
    rec = Recorder()
    producer = ck.Producer({"bootstrap.servers": cluster.address(2), "acks": "all"})
    producer.produce("h", value=b"after", on_delivery=rec)
    assert producer.flush(30) == 0 and rec.errors == [] and len(rec.acked) == 1


def test_the_java_producer_loses_nothing_when_the_leader_is_killed(kafkalite_cluster):
    """Must-have 1 with Kafka's Java client (acks=all and idempotent by default)."""
    from tests import java_harness

    ok, reason = java_harness.available()
    if not ok:
        pytest.skip(reason)
    cluster = kafkalite_cluster(nodes=3)
    _create(cluster.bootstrap_servers, "jorders", 3)
    count = 60_000
    java = java_harness.JavaClient("produce", cluster.bootstrap_servers, "--topic", "jorders", "--count", str(count), "--partitions", "3", name="java-producer")
    watcher = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "watch"})
    try:
        def written() -> int:
            try:
                return sum(watcher.get_watermark_offsets(ck.TopicPartition("jorders", p), timeout=5)[1] for p in range(3))
            except ck.KafkaException:
                return 0
        wait_until(lambda: written() > 5000, timeout=120, what="the Java producer writing", describe=java.describe)
        before = cluster.active
        at_kill = written()
        cluster.kill_node(before)
        java.wait_for("done", "done", timeout=180)
        assert at_kill < count  # killed while the producer was still writing
    finally:
        watcher.close()
        java.close()
    produced = java.of("produced")
    assert len(produced) == count
    assert len({(e["partition"], e["offset"]) for e in produced}) == count
    got = _read_all(cluster.bootstrap_servers, "jorders", count)
    assert len(got) == len(set(got)) == count
    for p in range(3):  # the values of each partition in the order sent
        values = [int(v.split(b"-")[1]) for part, _, v in sorted(got) if part == p]
        assert values == sorted(values) == list(range(p, count, 3))


def test_acks_all_under_min_insync_replicas_and_the_isr_shrinking_and_growing(kafkalite_cluster):
    cluster = kafkalite_cluster(nodes=2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("safe", 1, 2, config={"min.insync.replicas": "2"})])["safe"].result(30)

    def isr() -> list[int]:
        md = AdminClient({"bootstrap.servers": cluster.address(1)}).list_topics("safe", timeout=10)
        return sorted(md.topics["safe"].partitions[0].isrs)

    def send(acks: str) -> list[str]:
        rec = Recorder()
        producer = ck.Producer({"bootstrap.servers": cluster.address(1), "acks": acks, "retries": 0, "enable.idempotence": False})
        producer.produce("safe", value=acks.encode(), on_delivery=rec)
        producer.flush(30)
        return rec.errors or ["ok"]

    assert isr() == [1, 2]
    assert send("all") == ["ok"]
    cluster.kill_node(2)
    assert wait_until(lambda: isr() == [1] and isr()) == [1]
    assert send("all") == ["NOT_ENOUGH_REPLICAS"]
    assert send("1") == ["ok"]  # acks=1 needs only the leader
    cluster.start_node(2)
    assert wait_until(lambda: isr() == [1, 2] and isr()) == [1, 2]
    assert send("all") == ["ok"]


def test_admin_changes_are_seen_at_once_on_every_node(kafkalite_cluster):
    """Created, altered and deleted through any node: answered once every node has applied it."""
    from confluent_kafka.admin import ConfigResource

    cluster = kafkalite_cluster(nodes=3)
    admins = {i: AdminClient({"bootstrap.servers": cluster.address(i)}) for i in (1, 2, 3)}
    admins[2].create_topics([NewTopic("seen", 2, 3, config={"retention.ms": "12345"})])["seen"].result(30)
    for i in (1, 2, 3):  # no wait: the answer came after every node had the topic
        assert len(admins[i].list_topics("seen", timeout=10).topics["seen"].partitions) == 2
        described = admins[i].describe_configs([ConfigResource("topic", "seen")])
        configs = next(iter(described.values())).result(30)
        assert configs["retention.ms"].value == "12345"
    # an incremental AlterConfigs through the active node: seen at once on the standby nodes too
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    change = ConfigResource("topic", "seen", incremental_configs=[ConfigEntry("retention.ms", "54321", incremental_operation=AlterConfigOpType.SET)])
    next(iter(admins[1].incremental_alter_configs([change]).values())).result(30)
    for i in (2, 3):
        configs = next(iter(admins[i].describe_configs([ConfigResource("topic", "seen")]).values())).result(30)
        assert configs["retention.ms"].value == "54321", i
    admins[3].delete_topics(["seen"])["seen"].result(30)
    for i in (1, 2, 3):
        assert "seen" not in admins[i].list_topics(timeout=10).topics
    # a producer that knows only a standby node auto-creates a topic through it
    rec = Recorder()
    producer = ck.Producer({"bootstrap.servers": cluster.address(3), "acks": "all"})
    producer.produce("auto-made", value=b"x", on_delivery=rec)
    assert producer.flush(30) == 0
    assert rec.errors == [] and len(rec.acked) == 1


def test_the_control_socket_refuses_other_users(kafkalite_cluster):
    """An abstract Unix socket has no file permissions: the controller checks the caller's uid."""
    import json
    import socket

    from broker.multinode.control import control_address

    if os.getuid() != 0:
        pytest.skip("needs root to run a client as another user")
    cluster = kafkalite_cluster(nodes=2)
    address = control_address(cluster.data_dir)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the other user: only system calls here, then _exit
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(30)
                sock.connect(address)
                try:
                    sock.sendall(b'{"op": "kill-node", "id": 1}\n')
                except OSError:
                    pass  # the controller refuses before reading the command, and may have closed already
                os.write(write_end, sock.recv(4096))
        finally:
            os._exit(0)
    os.close(write_end)
    answer = b""
    while chunk := os.read(read_end, 4096):
        answer += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    assert json.loads(answer) == {"ok": False, "error": f"uid 65534 may not control this cluster (uid {os.getuid()} and root may)"}
    assert [n["live"] for n in cluster.describe()["nodes"]] == [True, True]  # nothing was killed


def _serve(data_dir, *args: str) -> tuple[int | None, str]:
    """``python -m broker serve`` on ``data_dir``: (its exit code, or None if it was still running
    after 30 s and was killed; what it logged)."""
    proc = subprocess.Popen([sys.executable, "-m", "broker", "serve", "--port", "0", "--data-dir", str(data_dir), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=30)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return None, out


def test_a_directory_serves_one_cluster_or_one_broker(kafkalite_cluster, tmp_path):
    """A cluster's directory refuses a second cluster and a single broker, even while no node holds
    the directory's ``.lock`` (every node stopped: a single broker used to start there, and the
    next active node then waited for its lock); a single broker's directory refuses a cluster."""
    cluster = kafkalite_cluster(nodes=2)
    code, out = _serve(cluster.data_dir, "--nodes", "2")
    assert code == 1 and "data directory in use by another cluster or broker" in out, (code, out[-500:])
    cluster.stop_node(2)
    cluster.stop_node(1)
    assert cluster.active == -1
    code, out = _serve(cluster.data_dir)
    assert code == 1 and "data directory in use by a cluster" in out, (code, out[-500:])
    cluster.start_node(2)  # the cluster still has its directory
    assert cluster.active == 2

    single_dir = tmp_path / "single"
    single = subprocess.Popen([sys.executable, "-m", "broker", "serve", "--port", "0", "--data-dir", str(single_dir)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert any(line.startswith("READY") for line in single.stdout), "the single broker did not start"
        code, out = _serve(single_dir, "--nodes", "2")
        assert code == 1 and "data directory in use by another cluster or broker" in out, (code, out[-500:])
    finally:
        single.kill()
        single.wait()
