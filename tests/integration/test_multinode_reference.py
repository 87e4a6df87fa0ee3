"""Side by side (issue 26): a 3-node kafkalite cluster (``serve --nodes 3``) and a 3-broker
Apache Kafka cluster (KRaft, a controller of its own: ``tests.reference_kafka.ReferenceKafkaCluster``)
in the same scenarios, asserting what a client observes on both:

a. Metadata after the leader of a partition is killed (SIGKILL), and after it is back;
b. Produce and Fetch sent to a node that does not lead the partition;
c. FindCoordinator and OffsetFetch after the group coordinator's node is killed;
d. Produce with acks=all under ``min.insync.replicas`` while a node is down.

One cluster of each kind serves the whole module; after each test the nodes it killed are
started again and the test waits for every partition's ISR to be full. Who leads a partition
or hosts a coordinator is asked (Metadata, FindCoordinator), never assumed.

What differs by design is in ``KNOWN_DIFFERENCES``; what differs in a way a client notices is
asserted as Kafka does it and marked ``xfail(strict=True)`` on kafkalite, with the difference
as the reason.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests import reference_kafka
from tests.multinode_support import Recorder, create_topic
from tests.raw import RawClient
from tests.wait import wait_until

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from protocol.records import Record, build_batch  # noqa: E402

NONE, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS = 0, 6, 7, 19
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS = 3, 39, 85
NODES = (1, 2, 3)
METADATA_V = 12  # both answer 0..13; 12 has topic ids and names
PRODUCE_VERSIONS = (10, 11, 12, 13)  # KIP-951's current_leader and node_endpoints from 10; 13 (topic ids) is the highest of both
FETCH_VERSIONS = (12, 16, 17, 18)  # current_leader from 12, node_endpoints from 16; 18 is the highest of both
FIND_COORDINATOR_V, OFFSET_FETCH_V = 4, 8

# What legitimately differs between the two clusters (by kafkalite's design, docs/multinode.md);
# the tests assert around these, and name the entry where they do.
KNOWN_DIFFERENCES = {
    "placement": "kafkalite: one node (the active one) leads every partition and hosts every coordinator, and every "
                 "partition's replicas are all the nodes whatever replication factor was asked (it is reported as the "
                 "number of nodes); Kafka places each partition's replicas and leader, and each group's coordinator "
                 "(the leader of its __consumer_offsets partition), on brokers of its choice",
    "non_replica": "a Kafka broker that hosts no replica of a partition answers NOT_LEADER_OR_FOLLOWER to a Fetch; a "
                   "kafkalite standby node answers so although Metadata lists it as a replica. The Fetch scenarios use, "
                   "on Kafka, a topic placed on one broker and another broker; on kafkalite a standby node",
    "fetch_current_leader_before_v16": "Kafka 4.4 fills a Fetch answer's current_leader (KIP-951) from v16 only "
                                       "(-1/-1 in v12-v15, where the field exists since KIP-595); a kafkalite standby "
                                       "fills it from v12. A client reading it gets a correct hint, or none",
    "failure_detection": "a killed Kafka broker is fenced broker.session.timeout.ms (2.5 s here) after its last "
                         "heartbeat; kafkalite's controller knows at once (the node's channel closes)",
    "controller_id": "Metadata's controller_id: kafkalite names the active node, Kafka (KRaft) a live broker of its "
                     "choice; both name a live broker",
    "reassignment": "AlterPartitionReassignments: Kafka moves a partition's replicas to any set of registered brokers and "
                    "keeps the order asked for; kafkalite, where every node holds every partition, accepts only a target "
                    "naming every node (complete at once, Metadata's order unchanged) and refuses other sets "
                    "INVALID_REPLICA_ASSIGNMENT",
}


# -- the two clusters -------------------------------------------------------------------------------

class Side:
    """One cluster under the same controls, whichever its kind, and what the tests ask it."""

    def __init__(self, kind: str, cluster) -> None:
        self.kind = kind
        self.cluster = cluster
        self.down: set[int] = set()

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.cluster.address(i) for i in NODES if i not in self.down)

    def address(self, node: int) -> str:
        return self.cluster.address(node)

    def live(self) -> list[int]:
        return [i for i in NODES if i not in self.down]

    def kill_node(self, node: int) -> None:
        self.down.add(node)
        self.cluster.kill_node(node)

    def start_node(self, node: int) -> None:
        self.cluster.start_node(node)
        self.down.discard(node)

    # -- raw requests to one node
    def request(self, node: int, api_key: int, version: int, body: dict):
        raw = RawClient(self.address(node))
        try:
            return raw.request(api_key, version, body)
        finally:
            raw.close()

    def metadata(self, node: int, topics: list[str] | None = None):
        body = {"topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        return self.request(node, 3, METADATA_V, body)

    def partition(self, node: int, topic: str, index: int = 0):
        """(Metadata from ``node``, the partition's entry in it)."""
        md = self.metadata(node, [topic])
        (t,) = md.topics
        assert t.error_code == NONE, (self.kind, topic, t.error_code)
        return md, next(p for p in t.partitions if p.partition_index == index)

    def settled(self, topic: str, *, full_isr: bool = True) -> None:
        """Wait until every live node knows ``topic`` with a leader (and, with ``full_isr``, every
        node in each partition's ISR): Kafka's brokers learn a new topic from the controller."""
        def known() -> bool:
            for node in self.live():
                try:
                    (t,) = self.metadata(node, [topic]).topics
                except OSError:
                    return False
                if t.error_code != NONE or not t.partitions:
                    return False
                if any(p.leader_id < 0 or (full_isr and sorted(p.isr_nodes) != self.live()) for p in t.partitions):
                    return False
            return True

        wait_until(known, timeout=60, what=f"{topic} on every live {self.kind} node")

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.metadata(self.live()[0], [topic]).topics[0].topic_id

    def restore(self) -> None:
        """Start the nodes a test killed; wait until every node lists every node and every
        partition (internal topics too) has all its replicas in its ISR."""
        for node in sorted(self.down):
            self.start_node(node)

        def full() -> bool:
            for node in NODES:
                try:
                    md = self.metadata(node)
                except (OSError, AssertionError):
                    return False
                if sorted(b.node_id for b in md.brokers) != list(NODES):
                    return False
                if any(sorted(p.isr_nodes) != sorted(p.replica_nodes) or p.offline_replicas for t in md.topics for p in t.partitions):
                    return False
            return True

        wait_until(full, timeout=90, interval=0.1, what=f"the {self.kind} cluster whole again")


@pytest.fixture(scope="module", params=["kafkalite", pytest.param("kafka", marks=pytest.mark.reference)])
def side(request, tmp_path_factory):
    if request.param == "kafka":
        ok, reason = reference_kafka.available()
        if not ok:
            pytest.skip(reason)
        cluster = reference_kafka.ReferenceKafkaCluster(tmp_path_factory.mktemp("reference-kafka-cluster"), brokers=len(NODES)).start()
    else:
        from broker.multinode.testing import ClusterProcess

        cluster = ClusterProcess(tmp_path_factory.mktemp("kafkalite-cluster") / "data", nodes=len(NODES),
                                 settings={"group.initial.rebalance.delay.ms": 0}).start()
    s = Side(request.param, cluster)
    try:
        yield s
    finally:
        cluster.close()


@pytest.fixture
def cluster(side):
    """The module's cluster of this kind; whole again after the test."""
    yield side
    side.restore()


def _topic(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def _lite_xfail(request, side: Side, reason: str) -> None:
    """This case fails on kafkalite as ``reason`` says: expected, strictly (it must fail)."""
    if side.kind == "kafkalite":
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def _endpoints(answer) -> list[tuple[int, str]]:
    """The answer's node_endpoints, [] in a version without them."""
    return [(e.node_id, f"{e.host}:{e.port}") for e in getattr(answer, "node_endpoints", ())]


# -- a. Metadata after a leader loss ----------------------------------------------------------------

def _kill_the_leader(cluster: Side, topic: str):
    create_topic(cluster.bootstrap_servers, topic, 1, rf=3)
    cluster.settled(topic)
    _, before = cluster.partition(1, topic)
    dead = before.leader_id
    cluster.kill_node(dead)
    survivors = cluster.live()

    def after():
        md, p = cluster.partition(survivors[0], topic)
        brokers = sorted(b.node_id for b in md.brokers)
        if p.leader_id in survivors and dead not in brokers and dead in p.offline_replicas and dead not in p.isr_nodes:
            return md, p
        return None

    md, p = wait_until(after, timeout=60, what=f"a new leader of {topic}-0 after node {dead} was killed",
                       describe=lambda: cluster.partition(survivors[0], topic))
    return before, dead, survivors, md, p


def test_metadata_after_a_leader_loss(cluster):
    topic = _topic("loss")
    before, dead, survivors, md, p = _kill_the_leader(cluster, topic)
    assert sorted(b.node_id for b in md.brokers) == survivors
    assert {b.node_id: f"{b.host}:{b.port}" for b in md.brokers} == {i: cluster.address(i) for i in survivors}
    assert md.controller_id in survivors  # KNOWN_DIFFERENCES["controller_id"]
    assert p.error_code == NONE
    assert p.leader_id in survivors and p.leader_id != dead
    assert sorted(p.replica_nodes) == list(NODES)  # the dead node is still a replica, only offline
    assert list(p.offline_replicas) == [dead]
    assert sorted(p.isr_nodes) == survivors
    for node in survivors:  # every surviving node tells the same
        _, seen = cluster.partition(node, topic)
        assert (seen.leader_id, sorted(seen.isr_nodes), list(seen.offline_replicas)) == (p.leader_id, survivors, [dead])

    cluster.start_node(dead)

    def back():
        md, p = cluster.partition(survivors[0], topic)
        return sorted(b.node_id for b in md.brokers) == list(NODES) and sorted(p.isr_nodes) == list(NODES) and not p.offline_replicas

    wait_until(back, timeout=60, what=f"node {dead} back in {topic}-0's ISR", describe=lambda: cluster.partition(survivors[0], topic))
    md, p = cluster.partition(dead, topic)  # and the node itself tells so
    assert sorted(b.node_id for b in md.brokers) == list(NODES)
    assert p.leader_id in survivors and sorted(p.replica_nodes) == list(NODES)


def test_the_leader_epoch_rises_when_the_leader_is_lost(cluster):
    """Clients use the epoch to fence stale metadata and to validate their positions (KIP-320)."""
    before, dead, survivors, md, p = _kill_the_leader(cluster, _topic("epoch"))
    assert p.leader_epoch > before.leader_epoch


# -- b. a request to a node that does not lead -------------------------------------------------------

def _records() -> bytes:
    return build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])])


@pytest.fixture(scope="module")
def replicated(side):
    """A topic of 3 replicas: (name, its id)."""
    topic = _topic("hint")
    create_topic(side.bootstrap_servers, topic, 1, rf=3)
    side.settled(topic)
    return topic, side.topic_id(topic)


@pytest.fixture(scope="module")
def unreplicated(side):
    """A topic whose partition only its leader serves: (name, its id).

    KNOWN_DIFFERENCES["non_replica"]: on Kafka the partition's one replica is on node 1; on
    kafkalite every standby node is a node that does not serve it."""
    topic = _topic("placed")
    admin = AdminClient({"bootstrap.servers": side.bootstrap_servers})
    if side.kind == "kafka":
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1]])])[topic].result(30)
    else:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    side.settled(topic, full_isr=False)  # Kafka: one replica
    return topic, side.topic_id(topic)


def _leader_and_other(cluster: Side, topic: str) -> tuple[int, int]:
    """The partition's leader now (an earlier test may have moved it) and another node."""
    leader = cluster.partition(cluster.live()[0], topic)[1].leader_id
    return leader, next(i for i in NODES if i != leader)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_to_a_non_leader(cluster, replicated, version):
    topic, topic_id = replicated
    leader, follower = _leader_and_other(cluster, topic)
    _, p = cluster.partition(follower, topic)
    name = {"name": topic} if version < 13 else {"topic_id": topic_id}
    answer = cluster.request(follower, 0, version, {"transactional_id": None, "acks": -1, "timeout": 5000,
                                                    "topic_data": [{**name, "partition_data": [{"index": 0, "records": _records()}]}]})
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == NOT_LEADER_OR_FOLLOWER
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, p.leader_epoch)
    assert _endpoints(answer) == [(leader, cluster.address(leader))]


def _fetch(cluster: Side, node: int, topic: str, topic_id, version: int):
    part = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    name = {"topic": topic} if version < 13 else {"topic_id": topic_id}
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": [{**name, "partitions": [part]}], "forgotten_topics_data": [], "rack_id": ""}
    return cluster.request(node, 1, version, body)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_to_a_non_leader(cluster, unreplicated, version):
    topic, topic_id = unreplicated
    leader, other = _leader_and_other(cluster, topic)
    _, p = cluster.partition(other, topic)
    answer = _fetch(cluster, other, topic, topic_id, version)
    (t,) = answer.responses
    (part,) = t.partitions
    assert part.error_code == NOT_LEADER_OR_FOLLOWER
    assert part.high_watermark == -1 and not part.records
    hint = (part.current_leader.leader_id, part.current_leader.leader_epoch)
    if version >= 16 or cluster.kind == "kafkalite":  # KNOWN_DIFFERENCES["fetch_current_leader_before_v16"]
        assert hint == (leader, p.leader_epoch)
    else:
        assert hint == (-1, -1)
    assert _endpoints(answer) == ([(leader, cluster.address(leader))] if version >= 16 else [])


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_to_a_non_leader_has_no_top_level_error(cluster, unreplicated, version):
    """The top-level code is for fetch-session errors: Kafka's Java consumer (FetchSessionHandler)
    drops a response whose top-level code is an error, leader hints included."""
    topic, topic_id = unreplicated
    leader, other = _leader_and_other(cluster, topic)
    answer = _fetch(cluster, other, topic, topic_id, version)
    assert answer.error_code == NONE
    assert answer.responses[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER


def test_fetch_from_a_follower_replica(cluster, replicated, request):
    _lite_xfail(request, cluster, "a kafkalite standby node is listed as an in-sync replica but serves no Fetch: it answers "
                                  "NOT_LEADER_OR_FOLLOWER, where a Kafka follower serves a consumer's Fetch (v11+, KIP-392 "
                                  "follower fetching) up to its high watermark. Clients go to a follower only when a broker's "
                                  "replica.selector.class names it as preferred_read_replica, which kafkalite never does")
    topic, topic_id = replicated
    leader, follower = _leader_and_other(cluster, topic)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    producer.produce(topic, b"on every replica", partition=0)
    assert producer.flush(30) == 0

    def served():
        part = _fetch(cluster, follower, topic, topic_id, 16).responses[0].partitions[0]
        return part if part.error_code != NONE or part.high_watermark >= 1 else None

    part = wait_until(served, what=f"node {follower} serving {topic}-0 up to its high watermark")
    assert part.error_code == NONE
    assert part.high_watermark >= 1 and part.records


# -- c. FindCoordinator after a coordinator move -----------------------------------------------------

def _find_coordinator(cluster: Side, node: int, group: str) -> tuple[int, int, str]:
    (c,) = cluster.request(node, 10, FIND_COORDINATOR_V, {"key_type": 0, "coordinator_keys": [group]}).coordinators
    return c.error_code, c.node_id, f"{c.host}:{c.port}"


def _offset_fetch(cluster: Side, node: int, group: str, topic: str):
    """(the group's error code, {partition: (committed offset, its error code)})."""
    answer = cluster.request(node, 9, OFFSET_FETCH_V, {"groups": [{"group_id": group, "topics": None}], "require_stable": False})
    (g,) = answer.groups
    return g.error_code, {p.partition_index: (p.committed_offset, p.error_code) for t in g.topics if t.name == topic for p in t.partitions}


def test_find_coordinator_after_the_coordinator_is_killed(cluster):
    topic, group = _topic("committed"), _topic("moving")
    create_topic(cluster.bootstrap_servers, topic, 2, rf=3)
    cluster.settled(topic)
    committer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    offsets = [ck.TopicPartition(topic, 0, 150), ck.TopicPartition(topic, 1, 77)]

    def commit() -> bool:
        try:
            committer.commit(offsets=offsets, asynchronous=False)
        except ck.KafkaException as exc:  # a coordinator still loading its partition of a new __consumer_offsets
            if exc.args[0].code() not in (ck.KafkaError.NOT_COORDINATOR, ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                          ck.KafkaError.COORDINATOR_NOT_AVAILABLE):
                raise
            return False
        return True

    try:
        wait_until(commit, what=f"{group}'s commit")
    finally:
        committer.close()
    committed = {0: (150, NONE), 1: (77, NONE)}
    answers = {node: _find_coordinator(cluster, node, group) for node in NODES}
    (error, coordinator, address), = set(answers.values())  # every node names the same coordinator
    assert (error, address) == (NONE, cluster.address(coordinator))
    assert _offset_fetch(cluster, coordinator, group, topic) == (NONE, committed)

    cluster.kill_node(coordinator)
    survivors = cluster.live()

    def moved():
        error, node, address = _find_coordinator(cluster, survivors[0], group)
        return (node, address) if error == NONE and node in survivors else None

    node, address = wait_until(moved, timeout=60, what=f"a live coordinator of {group} after node {coordinator} was killed",
                               describe=lambda: _find_coordinator(cluster, survivors[0], group))
    assert node != coordinator and address == cluster.address(node)
    for other in survivors:  # every surviving node names it
        assert _find_coordinator(cluster, other, group) == (NONE, node, address)
    # The new coordinator has the commits once it has loaded the group (NOT_COORDINATOR, then
    # COORDINATOR_LOAD_IN_PROGRESS meanwhile). Kafka 4.4 then answers, for a moment (under a second
    # here), NONE without the group's offsets: its coordinator reads at its partition's high watermark,
    # which the new leader advances once the other follower has fetched from it. No answer may show
    # an offset other than the committed ones (none going backwards).
    answers = []

    def loaded():
        answers.append(_offset_fetch(cluster, node, group, topic))
        return answers[-1] == (NONE, committed)

    wait_until(loaded, timeout=60, what=f"{group}'s offsets from node {node}", describe=lambda: answers[-3:])
    assert all(offsets in ({}, committed) for error, offsets in answers if error == NONE), answers


# -- d. acks=all under min.insync.replicas ------------------------------------------------------------

def _send(bootstrap: str, topic: str, acks: str) -> list[str]:
    """One record with ``acks`` and no retries: ["ok"] or the delivery error's name."""
    rec = Recorder()
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0, "enable.idempotence": False})
    producer.produce(topic, value=acks.encode(), partition=0, on_delivery=rec)
    producer.flush(30)
    return rec.errors or ["ok"]


def _raw_produce(cluster: Side, node: int, topic: str, acks: int, timeout_ms: int = 5000) -> int:
    answer = cluster.request(node, 0, 11, {"transactional_id": None, "acks": acks, "timeout": timeout_ms,
                                           "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": _records()}]}]})
    return answer.responses[0].partition_responses[0].error_code


def test_acks_all_under_min_insync_replicas(cluster):
    topic = _topic("safe")
    create_topic(cluster.bootstrap_servers, topic, 1, rf=3, config={"min.insync.replicas": "3"})
    cluster.settled(topic)
    leader = cluster.partition(1, topic)[1].leader_id
    assert _send(cluster.address(leader), topic, "all") == ["ok"]
    follower = max(i for i in NODES if i != leader)  # on kafkalite a standby node
    cluster.kill_node(follower)
    wait_until(lambda: follower not in cluster.partition(leader, topic)[1].isr_nodes, timeout=60,
               what=f"node {follower} out of {topic}-0's ISR")
    assert cluster.partition(leader, topic)[1].leader_id == leader  # a follower's loss moves no leadership
    # Kafka 4.4 refuses before appending once its leader's ISR is below min.insync.replicas:
    # NOT_ENOUGH_REPLICAS. A Kafka broker's Metadata shows the shrunk ISR a moment (tens of ms) before
    # its partition applies it; a Produce appended in between waits for a high watermark that does not
    # move while the ISR is below min.insync.replicas (KIP-966's eligible leader replicas, on in 4.x),
    # and times out: REQUEST_TIMED_OUT, not NOT_ENOUGH_REPLICAS_AFTER_APPEND. So: retry until refused.
    def refused() -> bool:
        code = _raw_produce(cluster, leader, topic, -1, timeout_ms=1000)
        assert code in (NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT), code
        return code == NOT_ENOUGH_REPLICAS

    wait_until(refused, timeout=60, what=f"node {leader} refusing acks=all to {topic}")
    assert _raw_produce(cluster, leader, topic, -1) == NOT_ENOUGH_REPLICAS
    assert _send(cluster.address(leader), topic, "all") == ["NOT_ENOUGH_REPLICAS"]
    assert _send(cluster.address(leader), topic, "1") == ["ok"]  # acks=1 needs only the leader
    assert _raw_produce(cluster, leader, topic, 1) == NONE
    cluster.start_node(follower)
    wait_until(lambda: sorted(cluster.partition(leader, topic)[1].isr_nodes) == list(NODES), timeout=60,
               what=f"node {follower} back in {topic}-0's ISR")
    assert _send(cluster.address(leader), topic, "all") == ["ok"]
    assert _raw_produce(cluster, leader, topic, -1) == NONE


# -- e. partition reassignments ---------------------------------------------------------------------

def _reassign(cluster: Side, node: int, topic: str, targets: list[list[int] | None]) -> list[int]:
    answer = cluster.request(node, 45, 1, {"timeout": 10_000, "allow_replication_factor_change": True, "topics": [
        {"name": topic, "partitions": [{"partition_index": i, "replicas": t} for i, t in enumerate(targets)]}]})
    assert answer.error_code == NONE
    return [p.error_code for t in answer.responses for p in t.partitions]


def _ongoing(cluster: Side, node: int) -> list:
    answer = cluster.request(node, 46, 0, {"timeout": 10_000, "topics": None})
    assert answer.error_code == NONE
    return [(t.name, p.partition_index) for t in answer.topics for p in t.partitions]


def test_partition_reassignments(cluster):
    """The same reassignments through a node that does not lead partition 0 (on kafkalite a standby node, which
    forwards them): a reordering of every replica completes at once, a cancel with nothing in progress, an unknown
    broker and an unknown partition are refused; a subset is KNOWN_DIFFERENCES["reassignment"]."""
    topic = _topic("moves")
    create_topic(cluster.bootstrap_servers, topic, 4, rf=3)
    cluster.settled(topic)
    leader = cluster.partition(cluster.live()[0], topic)[1].leader_id
    other = next(i for i in NODES if i != leader)
    every = list(reversed(NODES))
    codes = _reassign(cluster, other, topic, [every, None, [*NODES[:2], 9], [NODES[0], NODES[0], NODES[1]]])
    assert codes == [NONE, NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICA_ASSIGNMENT]
    missing = cluster.request(other, 45, 1, {"timeout": 10_000, "allow_replication_factor_change": True, "topics": [
        {"name": topic, "partitions": [{"partition_index": 7, "replicas": every}]}]})
    assert [p.error_code for t in missing.responses for p in t.partitions] == [UNKNOWN_TOPIC_OR_PARTITION]
    wait_until(lambda: _ongoing(cluster, other) == [] and _ongoing(cluster, leader) == [], timeout=60, what="no reassignment in progress")
    assert sorted(cluster.partition(other, topic)[1].replica_nodes) == list(NODES)
    subset = _reassign(cluster, other, topic, [None, NODES[:2]])  # KNOWN_DIFFERENCES["reassignment"]
    assert subset[1] == (INVALID_REPLICA_ASSIGNMENT if cluster.kind == "kafkalite" else NONE)
