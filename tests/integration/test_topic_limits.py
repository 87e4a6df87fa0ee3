"""Huge CreateTopics / CreatePartitions requests: refused as Kafka does, never half done.

Found by the network fuzzer: one request for 30,000 partitions blocked the
loop for seconds, ran the broker out of file descriptors and left them open.

What Kafka 4.1 answers (checked side by side, tests/reference_kafka.py; the
``kafka`` cases below run the same assertions against it):

- CreateTopics asking for more than 10,000 partitions in total, over all its
  topics (``-1`` counting the default, assignments by their number), refuses
  every topic with POLICY_VIOLATION "Excessively large number of partitions per
  request." before any other check;
- otherwise one metadata record per valid topic, per partition and per config
  must stay within 10,000 (QuorumController.MAX_RECORDS_PER_USER_OP) or every
  topic is refused with POLICY_VIOLATION "Unable to perform excessively large
  batch operation."; validate_only included.
- CreatePartitions counts one record per new partition across its topics in
  order. Kafka 4.1 answers the topic that passes the limit UNKNOWN_SERVER_ERROR
  and still keeps the partitions that fitted; kafkalite refuses it with the
  POLICY_VIOLATION above and creates nothing of it (kafkalite only).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid

import pytest

from broker.cluster import Cluster
from broker.testing import BrokerThread
from protocol.errors import ErrorCode
from tests.integration.test_handlers_hostile import _frame
from tests.raw import RawClient
from tests.wait import wait_until

_PARTITIONS_MSG = "Excessively large number of partitions per request."
_BATCH_MSG = "Unable to perform excessively large batch operation."


def _tag() -> str:
    return uuid.uuid4().hex[:8]


def _create_topics(c: RawClient, topics, *, validate_only: bool, version: int = 7):
    body = {
        "topics": [
            {"name": name, "num_partitions": n, "replication_factor": 1, "configs": [{"name": k, "value": v} for k, v in (cfg or {}).items()]}
            for name, n, cfg in topics
        ],
        "timeout": 60_000,
        "validate_only": validate_only,
    }
    return [(t.name, t.error_code, t.error_message) for t in c.request(19, version, body).topics]


def _create_partitions(c: RawClient, topics, *, validate_only: bool, version: int = 3):
    body = {"topics": [{"name": n, "count": count, "assignments": None} for n, count in topics], "timeout": 60_000, "validate_only": validate_only}
    return [(t.name, t.error_code, t.error_message) for t in c.request(37, version, body).results]


def _partition_count(c: RawClient, topic: str) -> int | None:
    t = c.request(3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}).topics[0]
    return None if t.error_code == ErrorCode.unknown_topic_or_partition else len(t.partitions)


def _settled_partition_count(c: RawClient, topic: str) -> int | None:
    """The count once the topic shows in Metadata: Kafka's brokers learn of a new topic a moment
    after CreateTopics answers (kafkalite at once), so this asks until it does."""
    return wait_until(lambda: _partition_count(c, topic), what=f"{topic} in Metadata")


@pytest.fixture
def client(group_broker):
    c = RawClient(group_broker.bootstrap)
    c.sock.settimeout(120)
    yield c
    c.close()


# ------------------------------------------------------------------ the answers, against kafkalite and Kafka


def _cases(t: str):
    ok = ErrorCode.none
    pv = ErrorCode.policy_violation
    return [
        ([(f"a-{t}", 30_000, None)], [(pv, _PARTITIONS_MSG)]),
        ([(f"a-{t}", 1, None), ("bad name!", 20_000, None)], [(pv, _PARTITIONS_MSG)] * 2),
        ([(f"a-{t}", 5, {"no.such.config": "x"}), (f"b-{t}", 9_999, None)], [(pv, _PARTITIONS_MSG)] * 2),
        ([(f"a-{t}", 9_999, None)], [(ok, None)]),
        ([(f"a-{t}", 10_000, None)], [(pv, _BATCH_MSG)]),
        ([(f"a-{t}", 9_998, {"cleanup.policy": "compact"})], [(ok, None)]),
        ([(f"a-{t}", 9_999, {"cleanup.policy": "compact"})], [(pv, _BATCH_MSG)]),
        ([(f"a-{t}", 4_999, None), (f"b-{t}", 4_999, None)], [(ok, None)] * 2),
        ([(f"a-{t}", 5_000, None), (f"b-{t}", 5_000, None)], [(pv, _BATCH_MSG)] * 2),
        # a topic refused on its own counts nothing, but is refused with the others when the rest is too large
        ([(f"a-{t}", -5, None), (f"b-{t}", 9_999, None)], [(ErrorCode.invalid_partitions, ...), (ok, None)]),
        ([(f"a-{t}", 0, None), (f"b-{t}", 10_000, None)], [(pv, _BATCH_MSG)] * 2),
    ]


@pytest.mark.parametrize("case", range(len(_cases(""))))
def test_create_topics_request_limits_as_kafka(client, case):
    topics, expected = _cases(_tag())[case]
    got = _create_topics(client, topics, validate_only=True)
    assert [name for name, _, _ in got] == [name for name, _, _ in topics]
    assert [(code, msg if exp_msg is not ... else ...) for (_, code, msg), (_, exp_msg) in zip(got, expected, strict=True)] == expected


def test_existing_topic_is_refused_with_the_others_when_the_request_is_too_large(client):
    t = _tag()
    assert _create_topics(client, [(f"e-{t}", 1, None)], validate_only=False) == [(f"e-{t}", ErrorCode.none, None)]
    got = _create_topics(client, [(f"e-{t}", 1, None), (f"n-{t}", 9_999, {"retention.ms": "1000"})], validate_only=True)
    assert got == [(f"e-{t}", ErrorCode.policy_violation, _BATCH_MSG), (f"n-{t}", ErrorCode.policy_violation, _BATCH_MSG)]


def test_huge_create_topics_creates_nothing_and_the_broker_keeps_serving(client):
    t = _tag()
    got = _create_topics(client, [(f"huge-{t}", 30_000, None)], validate_only=False)
    assert got == [(f"huge-{t}", ErrorCode.policy_violation, _PARTITIONS_MSG)]
    assert _partition_count(client, f"huge-{t}") is None
    assert _create_topics(client, [(f"after-{t}", 3, None)], validate_only=False) == [(f"after-{t}", ErrorCode.none, None)]
    assert _settled_partition_count(client, f"after-{t}") == 3


def test_create_partitions_within_the_limit(client):
    t = _tag()
    a, b = f"pa-{t}", f"pb-{t}"
    assert [code for _, code, _ in _create_topics(client, [(a, 1, None), (b, 1, None)], validate_only=False)] == [ErrorCode.none] * 2
    assert _create_partitions(client, [(a, 10_001)], validate_only=True) == [(a, ErrorCode.none, None)]
    # Kafka answers the topics of one request in no set order
    assert sorted(_create_partitions(client, [(a, 5_001), (b, 5_001)], validate_only=True)) == [(a, ErrorCode.none, None), (b, ErrorCode.none, None)]
    assert _settled_partition_count(client, a) == 1


# ------------------------------------------------------------------ kafkalite only


@pytest.fixture(scope="module")
def inproc():
    b = BrokerThread().start()
    yield b
    b.close()


@pytest.fixture
def raw(inproc):
    c = RawClient(inproc.bootstrap_servers)
    c.sock.settimeout(120)
    yield c
    c.close()


def test_create_partitions_past_the_limit_is_refused_and_creates_nothing(raw):
    t = _tag()
    a, b, c = f"qa-{t}", f"qb-{t}", f"qc-{t}"
    _create_topics(raw, [(a, 1, None), (b, 1, None), (c, 1, None)], validate_only=False)
    # the fuzzer's frame: CreatePartitions v1 growing a topic to 30,000 partitions
    assert _create_partitions(raw, [(a, 30_000)], validate_only=False, version=1) == [(a, ErrorCode.policy_violation, _BATCH_MSG)]
    assert _partition_count(raw, a) == 1
    # counted across topics in order: the one that passes the limit is refused, and so is any later one
    got = _create_partitions(raw, [(a, 5_002), (b, 5_001), (c, 2)], validate_only=True)
    assert got == [(a, ErrorCode.none, None), (b, ErrorCode.policy_violation, _BATCH_MSG), (c, ErrorCode.policy_violation, _BATCH_MSG)]
    assert _create_partitions(raw, [(a, 40), (b, 3)], validate_only=False) == [(a, ErrorCode.none, None), (b, ErrorCode.none, None)]
    assert (_partition_count(raw, a), _partition_count(raw, b), _partition_count(raw, c)) == (40, 3, 1)


def _fds_under(data_dir: str, topic: str) -> int:
    """Descriptors this process holds on the files or directories of ``topic``'s partitions."""
    root = os.path.realpath(data_dir)
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        path = _fd_target(fd)
        if path and path.startswith(root + os.sep):
            top = os.path.relpath(path, root).split(os.sep)[0]
            count += top.rsplit("-", 1)[0] == topic
    return count


def _fd_target(fd: str) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # closed between the listing and the read
        return None


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.parametrize("api", ["create_topics", "create_partitions"])
def test_a_creation_failing_part_way_keeps_nothing(inproc, raw, monkeypatch, api):
    """Running out of file descriptors at partition 150 (a later chunk): an error, no topic or
    partition, no directory and no descriptor left behind; the broker goes on."""
    t = _tag()
    name = f"fail-{t}"
    if api == "create_partitions":
        _create_topics(raw, [(name, 2, None)], validate_only=False)
    real = inproc.broker.server.cluster.logs.create

    def create(topic, partition, config=None):
        if topic == name and partition == 150:
            raise OSError(24, "Too many open files")
        return real(topic, partition, config)

    monkeypatch.setattr(inproc.broker.server.cluster.logs, "create", create)
    before = _fds_under(inproc.data_dir, name)
    if api == "create_topics":
        got = _create_topics(raw, [(name, 300, None)], validate_only=False)
        assert _partition_count(raw, name) is None
    else:
        got = _create_partitions(raw, [(name, 300)], validate_only=False)
        assert _partition_count(raw, name) == 2
    assert len(got) == 1 and got[0][1] == ErrorCode.unknown_server_error and "Too many open files" in got[0][2]
    # Counted by target, as below: a descriptor some other part of the process opens meanwhile
    # (a directory fsync, a client socket) is no leak of this creation.
    assert _fds_under(inproc.data_dir, name) <= before
    left = sorted(p for p in os.listdir(inproc.data_dir) if p.startswith(name + "-"))
    assert left == ([] if api == "create_topics" else [f"{name}-0", f"{name}-1"])
    monkeypatch.undo()
    assert _create_topics(raw, [(f"ok-{t}", 2, None)], validate_only=False) == [(f"ok-{t}", ErrorCode.none, None)]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_one_descriptor_per_new_partition(inproc, raw):
    t = _tag()
    name = f"fds-{t}"
    assert _create_topics(raw, [(name, 200, None)], validate_only=False) == [(name, ErrorCode.none, None)]
    # Counted by what each descriptor points at, so a descriptor another part of the process
    # holds for a moment (a directory fsync, a client socket) does not count.
    held = [_fd_target(fd) for fd in os.listdir("/proc/self/fd")]
    dirs = {os.path.realpath(os.path.join(inproc.data_dir, f"{name}-{p}")) for p in range(200)}
    mine = [path for path in held if path and os.path.dirname(path) in dirs]
    assert 0 < len(mine) <= 200, len(mine)
    assert {os.path.dirname(path) for path in mine} <= dirs


def test_other_clients_are_served_while_a_big_creation_runs(inproc, raw, monkeypatch):
    """The partitions are opened off the loop: while a creation is held half-way, another
    client's ApiVersions is answered, Metadata sees the topic as not ready yet, and a second
    creation of the same name waits its turn and then finds it taken."""
    t = _tag()
    name = f"slow-{t}"
    started, release = threading.Event(), threading.Event()
    real = Cluster._open_partitions

    def held(self, topic, topic_id, cfg, start, stop):
        if topic == name and start > 0:
            started.set()
            assert release.wait(60)
        return real(self, topic, topic_id, cfg, start, stop)

    monkeypatch.setattr(Cluster, "_open_partitions", held)
    other = RawClient(inproc.bootstrap_servers)
    third = RawClient(inproc.bootstrap_servers)
    try:
        raw.sock.sendall(_frame(raw, 19, 7, {"topics": [{"name": name, "num_partitions": 1000, "replication_factor": 1, "configs": []}], "timeout": 60_000}))
        assert started.wait(60)
        assert other.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == ErrorCode.none
        meta = other.request(3, 9, {"topics": [{"name": name}], "allow_auto_topic_creation": True}).topics[0]
        assert meta.error_code == ErrorCode.leader_not_available
        third.sock.sendall(_frame(third, 19, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "configs": []}], "timeout": 60_000}))
        release.set()
        first = raw.read_response(19, 7).topics[0]
        assert (first.error_code, first.num_partitions) == (ErrorCode.none, 1000)
        second = third.read_response(19, 7).topics[0]
        assert second.error_code == ErrorCode.topic_already_exists
        assert _partition_count(other, name) == 1000
    finally:
        release.set()
        other.close()
        third.close()


# ------------------------------------------------------------------ the open files limit


def test_serve_raises_the_soft_open_files_limit_to_the_hard_one():
    pytest.importorskip("resource")
    code = (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))\n"
        "from broker.cli import raise_open_files_limit\n"
        "was, now = raise_open_files_limit()\n"
        "print(was, now, resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    was, now, soft, hard = map(int, out.stdout.split())
    assert was == min(256, hard)
    assert now == soft
    assert soft == hard or (sys.platform == "darwin" and soft == 10240)
