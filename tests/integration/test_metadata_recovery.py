"""The data directory survives the loss of any one metadata file (issue 24).

Real broker processes (tests/broker_process.py) and a real client (confluent-kafka):
records are produced (acks=all) and an offset committed, the broker is stopped or
SIGKILLed, ``meta.json`` (and then also ``meta.json.prev``) is deleted, truncated or
garbled, and the broker is started again on the same directory. Every topic must be
back with its id and partition count (internal ones included), every acknowledged
record at its offset, the committed offset kept, and nothing attached to a topic
whose id is not its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.broker_process import ROOT, BrokerProcess
from tests.integration.clients import ConfluentClient

PER_PARTITION = (19, 7, 11)


def _topic_ids(data_dir) -> dict[str, tuple[str, int]]:
    """name -> (id, partitions), as the broker wrote them at its last start or change."""
    meta = json.loads((data_dir / "meta.json").read_text())
    return {name: (t["id"], t["partitions"]) for name, t in meta["topics"].items()}


def _client_topic_id(bootstrap: str, topic: str) -> str:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_topics(TopicCollection([topic]), request_timeout=15)[topic].result(30)
    return str(desc.topic_id), len(desc.partitions)


def _commit(bootstrap: str, group: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition("orders", 0, offset)], asynchronous=False)
    finally:
        c.close()


def _committed(bootstrap: str, group: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [tp] = c.committed([TopicPartition("orders", 0)], timeout=30)
        return tp.offset
    finally:
        c.close()


def _transaction(bootstrap: str) -> None:
    """One committed transaction: the broker creates __transaction_state."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "meta-recovery-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("orders", key=b"txn", value=b"in a transaction", partition=2)
    p.commit_transaction(30)


def _records(client: ConfluentClient) -> list[tuple[int, int, bytes, bytes]]:
    msgs = client.consume("orders", [0, 1, 2], sum(PER_PARTITION) + 1)
    return sorted((m.partition, m.offset, m.key, m.value) for m in msgs)


@pytest.fixture
def loaded(tmp_path):
    """A stopped broker's data directory holding orders (3 partitions), a committed offset, a
    transaction; returns (broker, what was acknowledged, topic ids, orders' id from the client)."""
    b = BrokerProcess(tmp_path).start()
    try:
        client = ConfluentClient(b.bootstrap)
        client.create_topic("orders", 3, {"retention.ms": "86400000"})
        produced = [(p, b"k%d-%d" % (p, i), b"v%d-%d" % (p, i)) for p, n in enumerate(PER_PARTITION) for i in range(n)]
        acked = client.produce("orders", produced)
        assert len(acked) == sum(PER_PARTITION)
        _commit(b.bootstrap, "g1", 7)
        _transaction(b.bootstrap)
        expected = _records(client)
        assert len(expected) == sum(PER_PARTITION) + 1  # the transaction's record
        client_id = _client_topic_id(b.bootstrap, "orders")
    except BaseException:
        b.kill()
        raise
    yield b, expected, client_id
    if b.proc is not None:
        b.stop()


def _damage(path, how: str) -> None:
    if how == "deleted":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "altered":  # still valid JSON with valid values: only the checksum tells
        doc = json.loads(path.read_text())
        doc["topics"]["orders"]["partitions"] = 1
        path.write_text(json.dumps(doc))
    elif how == "garbled":
        data = bytearray(path.read_bytes())
        data[:: max(1, len(data) // 40)] = b"\xff" * len(data[:: max(1, len(data) // 40)])
        path.write_bytes(bytes(data))


def _check_everything_back(b: BrokerProcess, expected, client_id, ids_before) -> None:
    client = ConfluentClient(b.bootstrap)
    assert _topic_ids(b.data_dir) == ids_before  # every topic, internal ones too: same id, same partitions
    assert _client_topic_id(b.bootstrap, "orders") == client_id
    assert _records(client) == expected  # 0 acknowledged records lost, none moved
    assert _committed(b.bootstrap, "g1") == 7
    # a new idempotent producer gets a producer id of its own (a reused one would be refused:
    # the partitions know its sequences) and its records land after the old ones, same topic id
    acked = client.produce("orders", [(p, b"after", b"after") for p in range(3)])
    assert sorted(acked) == [(0, PER_PARTITION[0]), (1, PER_PARTITION[1]), (2, PER_PARTITION[2] + 2)]
    assert _client_topic_id(b.bootstrap, "orders") == client_id
    assert "Traceback" not in b.logs()


@pytest.mark.parametrize("how", ["deleted", "truncated", "garbled", "altered"])
def test_a_damaged_meta_json_is_replaced_by_its_previous_version(loaded, how):
    b, expected, client_id = loaded
    b.stop()
    ids_before = _topic_ids(b.data_dir)
    _damage(b.data_dir / "meta.json", how)
    seen = len(b.stderr_lines)
    b.start()
    line = b.wait_for_log("cluster metadata unreadable, its previous version is used", timeout=5, start=seen)
    assert "meta.json" in line
    _check_everything_back(b, expected, client_id, ids_before)


@pytest.mark.parametrize("how", ["deleted", "empty", "truncated", "garbled"])
def test_without_any_readable_metadata_the_topics_are_rebuilt_from_the_partition_directories(loaded, how):
    b, expected, client_id = loaded
    b.kill()  # the crash path: no clean shutdown either
    ids_before = _topic_ids(b.data_dir)
    assert {"__consumer_offsets", "__transaction_state", "__kafkalite_group_events", "orders"} <= set(ids_before)
    for name in ("meta.json", "meta.json.prev"):
        _damage(b.data_dir / name, how)
    seen = len(b.stderr_lines)
    b.start()
    line = b.wait_for_log("cluster metadata rebuilt from the partition directories", timeout=5, start=seen)
    for name in ("orders (3 partitions", "__consumer_offsets (50 partitions", "__transaction_state (50 partitions", "group configs", "topic configs"):
        assert name in line
    _check_everything_back(b, expected, client_id, ids_before)
    # what could not be rebuilt: the topic's configs are the defaults now; internal topics have theirs
    meta = json.loads((b.data_dir / "meta.json").read_text())
    assert meta["topics"]["orders"]["configs"] == {}
    assert meta["topics"]["__consumer_offsets"]["configs"]["cleanup.policy"] == "compact"
    assert meta["topics"]["__transaction_state"]["configs"]["cleanup.policy"] == "compact"


def test_a_directory_of_a_deleted_topic_is_not_attached_to_a_new_topic_of_the_same_name(loaded, tmp_path_factory):
    """The defect of issue 24: a new ``orders`` must not take over an old ``orders-0``."""
    b, expected, client_id = loaded
    b.stop()
    saved = tmp_path_factory.mktemp("saved")
    for p in range(3):
        shutil.copytree(b.data_dir / f"orders-{p}", saved / f"orders-{p}")
    b.start()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept: a destroyed handle fails its futures
    admin.delete_topics(["orders"])["orders"].result(30)
    b.stop()
    for p in range(3):  # as if the deletion had crashed before removing the directories
        shutil.copytree(saved / f"orders-{p}", b.data_dir / f"orders-{p}")
    seen = len(b.stderr_lines)
    b.start()
    b.wait_for_log("partition directory set aside, not used", timeout=5, start=seen)
    client = ConfluentClient(b.bootstrap)
    acked = client.produce("orders", [(0, b"new", b"new")])  # auto-created: 1 partition, a new id
    assert acked == [(0, 0)]
    new_id, partitions = _client_topic_id(b.bootstrap, "orders")
    assert new_id != client_id[0] and partitions == 1
    assert [(m.offset, m.value) for m in client.consume("orders", [0], 1)] == [(0, b"new")]
    strays = sorted(n for n in os.listdir(b.data_dir) if n.startswith("orders-") and n.endswith("-stray"))
    assert [n.split(".")[0] for n in strays] == ["orders-0", "orders-1", "orders-2"]  # kept, for an operator


def test_corrupt_metadata_and_no_partition_directory_is_one_line_and_exit_1(tmp_path):
    (tmp_path / "meta.json").write_bytes(b'{"cluster_id": "x", "topics": {"orders": {"id": ')
    proc = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(tmp_path), "--log-format", "json"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "READY" not in proc.stdout
    [line] = [json.loads(x) for x in proc.stderr.splitlines() if '"cannot start"' in x]
    assert line["level"] == "error" and str(tmp_path / "meta.json") in line["error"] and "restore" in line["error"]
