"""The metadata files of the data directory: the atomic writer, partition.metadata, meta.json and its recovery.

In-process (a ``Cluster`` on a temporary directory); tests/integration/test_metadata_recovery.py
does the same damage to the data directory of real broker processes.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from broker.cluster import PRODUCER_ID_BLOCK, Cluster
from broker.partition import AppendOrigin
from broker.metadata_load import MetadataError, load_cluster, parse_meta
from protocol.records import Record, build_batch, split_batches
from storage import atomic
from storage.atomic import previous_path, read_with_fallback, write_atomically
from storage.config import LogConfig
from storage.partition_meta import PARTITION_METADATA, decode, encode, read_topic_id


# ---------------------------------------------------------------------------- write_atomically
def test_write_atomically_replaces_whole_and_keeps_the_previous_version(tmp_path):
    path = tmp_path / "m.json"
    write_atomically(path, b"one", keep_previous=True)
    assert path.read_bytes() == b"one" and not previous_path(path).exists()
    write_atomically(path, b"two", keep_previous=True)
    assert path.read_bytes() == b"two" and previous_path(path).read_bytes() == b"one"
    write_atomically(path, b"three")  # without keep_previous the previous version is left as it is
    assert path.read_bytes() == b"three" and previous_path(path).read_bytes() == b"one"
    assert sorted(os.listdir(tmp_path)) == ["m.json", "m.json.prev"]


def test_write_atomically_fsyncs_the_file_before_the_rename_and_then_the_directory(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.path.isdir(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(a, b):
        events.append(("rename", os.path.basename(b)))
        real_replace(a, b)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    path = tmp_path / "m.json"
    path.write_bytes(b"old")
    write_atomically(path, b"new", keep_previous=True)
    # the file's data is on disk before any name points at it; the directory (both renames) last
    assert events == [("fsync", False), ("rename", "m.json.prev"), ("rename", "m.json"), ("fsync", True)]


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "m.json"
    write_atomically(path, b"old")

    def fail(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", fail)
    with pytest.raises(OSError):
        write_atomically(path, b"new", keep_previous=True)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["m.json"]


def test_read_with_fallback_takes_the_previous_version_when_the_file_is_missing_or_damaged(tmp_path):
    path = tmp_path / "m.json"
    assert read_with_fallback(path, json.loads).missing
    write_atomically(path, b'{"v": 1}', keep_previous=True)
    write_atomically(path, b'{"v": 2}', keep_previous=True)
    got = read_with_fallback(path, json.loads)
    assert got.value == {"v": 2} and got.source == path and not got.fell_back
    path.write_bytes(b'{"v": 2')  # torn
    got = read_with_fallback(path, json.loads)
    assert got.value == {"v": 1} and got.fell_back and "unreadable" in got.refused[0][1]
    path.unlink()
    got = read_with_fallback(path, json.loads)
    assert got.value == {"v": 1} and got.refused == [(path, "missing")]
    previous_path(path).write_bytes(b"")
    got = read_with_fallback(path, json.loads)
    assert got.source is None and got.value is None and not got.missing and len(got.refused) == 2


# ---------------------------------------------------------------------------- partition.metadata
def test_partition_metadata_is_kafkas_format():
    tid = uuid.UUID(bytes=bytes(range(16)))
    # Kafka: "version: 0", then the id as Uuid.toString (url-safe base64, no padding)
    assert encode(tid) == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n"
    assert decode(encode(tid)) == tid
    assert decode(b"version: 0\r\ntopic_id: AAECAwQFBgcICQoLDA0ODw") == tid


@pytest.mark.parametrize("data", [
    b"", b"version: 0\n", b"version: 1\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n", b"version: 0\ntopic_id: short\n",
    b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n", b"\xff\xfe", b"x" * 10_000,
])
def test_partition_metadata_refuses_what_is_not_one(data):
    with pytest.raises(ValueError):
        decode(data)


def test_read_topic_id_says_why_not(tmp_path):
    assert read_topic_id(tmp_path) == (None, "missing")
    (tmp_path / PARTITION_METADATA).write_bytes(b"garbage")
    tid, why = read_topic_id(tmp_path)
    assert tid is None and why.startswith("unreadable")


# ---------------------------------------------------------------------------- meta.json
@pytest.mark.parametrize("doc", [
    [], {"topics": []}, {"topics": {"t": {"id": "nope", "partitions": 1}}},
    {"topics": {"t": {"id": str(uuid.uuid4()), "partitions": 0}}},
    {"topics": {"t": {"id": str(uuid.uuid4()), "partitions": 10**9}}},
    {"topics": {"t": {"id": str(uuid.uuid4()), "partitions": True}}},
    {"topics": {"bad name": {"id": str(uuid.uuid4()), "partitions": 1}}},
    {"topics": {"t": {"id": str(uuid.uuid4()), "partitions": 1, "configs": {"a": 1}}}},
    {"producer_id_limit": -1}, {"cluster_id": 5}, {"group_configs": {"g": "x"}},
])
def test_parse_meta_refuses_damaged_documents(doc):
    with pytest.raises((ValueError, TypeError)):
        parse_meta(json.dumps(doc).encode())


def test_a_flipped_bit_that_still_parses_is_refused_by_the_checksum(tmp_path):
    orders, _ = _setup(tmp_path)
    text = (tmp_path / "meta.json").read_text()
    parse_meta(text.encode())  # as written
    doc = json.loads(text)
    assert doc["checksum"]
    doc["topics"]["orders"]["partitions"] = 2  # valid JSON, valid values, wrong
    with pytest.raises(ValueError, match="checksum"):
        parse_meta(json.dumps(doc).encode())
    del doc["checksum"]  # a file written before the checksum existed is read as it is
    assert parse_meta(json.dumps(doc).encode())["topics"]["orders"]["partitions"] == 2


# ---------------------------------------------------------------------------- load_cluster
def _cluster(path) -> Cluster:
    c = Cluster(path, LogConfig())
    load_cluster(c)
    return c


def _append(cluster: Cluster, topic: str, partition: int, values: list[bytes], pid: int = -1) -> None:
    records = [Record(offset=i, timestamp=1, key=None, value=v) for i, v in enumerate(values)]
    batch = build_batch(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1)
    cluster.partition(topic, partition).append(split_batches(batch), AppendOrigin.CLIENT)


def _end_offsets(cluster: Cluster, topic: str) -> list[int]:
    return [p.log.log_end_offset for p in cluster.topics[topic].partitions]


def _setup(tmp_path):
    c = _cluster(tmp_path)
    orders = c.create_topic("orders", 3, {"retention.ms": "1000000"})
    c.create_topic("__consumer_offsets", 2, {"cleanup.policy": "compact"})
    for p in range(3):
        _append(c, "orders", p, [b"o%d-%d" % (p, i) for i in range(p + 2)])
    ids = {name: t.topic_id for name, t in c.topics.items()}
    c.close()
    return orders, ids


def test_a_new_partition_has_its_partition_metadata(tmp_path):
    orders, _ = _setup(tmp_path)
    for p in range(3):
        assert read_topic_id(tmp_path / f"orders-{p}") == (orders.topic_id, None)


@pytest.mark.parametrize("damage", ["deleted", "truncated", "garbled"])
def test_a_damaged_meta_json_falls_back_to_the_previous_version(tmp_path, damage):
    orders, ids = _setup(tmp_path)
    before = json.loads((tmp_path / "meta.json").read_text())["producer_id_limit"]
    meta = tmp_path / "meta.json"
    {"deleted": meta.unlink, "truncated": lambda: meta.write_bytes(meta.read_bytes()[:20]),
     "garbled": lambda: meta.write_bytes(b"\x00" * 300)}[damage]()
    c = _cluster(tmp_path)
    try:
        assert {n: t.topic_id for n, t in c.topics.items()} == ids
        assert _end_offsets(c, "orders") == [2, 3, 4]
        assert c.topics["orders"].overrides == {"retention.ms": "1000000"}
        assert c._pid_limit >= before + PRODUCER_ID_BLOCK  # the lost write may have taken a block
        if damage != "deleted":
            assert [n for n in os.listdir(tmp_path) if n.startswith("meta.json.unreadable-")]
    finally:
        c.close()


@pytest.mark.parametrize("damage", ["deleted", "empty", "garbled"])
def test_without_readable_metadata_the_topics_are_rebuilt_from_their_directories(tmp_path, damage):
    orders, ids = _setup(tmp_path)
    for name in ("meta.json", "meta.json.prev"):
        path = tmp_path / name
        {"deleted": path.unlink, "empty": lambda p=path: p.write_bytes(b""), "garbled": lambda p=path: p.write_bytes(b"{]")}[damage]()
    c = _cluster(tmp_path)
    try:
        assert {n: t.topic_id for n, t in c.topics.items()} == ids
        assert _end_offsets(c, "orders") == [2, 3, 4]
        assert c.topics["__consumer_offsets"].overrides == {}  # no internal_configs given here
        assert c.topics["orders"].overrides == {}  # not rebuilt: named in the warning
    finally:
        c.close()
    # and the rebuilt metadata is written again, with the same ids
    assert json.loads((tmp_path / "meta.json").read_text())["topics"]["orders"]["id"] == str(orders.topic_id)


def test_a_rebuild_gives_internal_topics_their_configs_and_skips_used_producer_ids(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("__consumer_offsets", 2, {"cleanup.policy": "compact"})
    c.create_topic("t", 1)
    _append(c, "t", 0, [b"x"], pid=123_456)
    c.close()
    (tmp_path / "meta.json").unlink()
    (tmp_path / "meta.json.prev").unlink()
    c = Cluster(tmp_path, LogConfig())
    load_cluster(c, lambda name: {"cleanup.policy": "compact"} if name == "__consumer_offsets" else None)
    try:
        assert c.topics["__consumer_offsets"].config.compact
        assert c.allocate_producer_id() > 123_456
    finally:
        c.close()


def test_corrupt_metadata_without_partition_directories_is_one_clear_error(tmp_path):
    (tmp_path / "meta.json").write_bytes(b'{"topics": {')
    with pytest.raises(MetadataError) as info:
        _cluster(tmp_path)
    message = str(info.value)
    assert "meta.json" in message and "restore" in message and "\n" not in message


def test_a_directory_of_another_topic_id_is_never_attached(tmp_path):
    """A directory left by a deleted topic (a crash before it was removed) is set aside, and a
    new topic of the same name starts empty."""
    orders, _ = _setup(tmp_path)
    os.rename(tmp_path / "orders-0", tmp_path / "keep")
    c = _cluster(tmp_path)
    c.delete_topic(c.topics["orders"])
    c.close()
    os.rename(tmp_path / "keep", tmp_path / "orders-0")  # the old directory is back
    c = _cluster(tmp_path)  # meta.json is fine: orders-0 belongs to no topic
    try:
        assert "orders" not in c.topics
        strays = [n for n in os.listdir(tmp_path) if n.startswith("orders-0.") and n.endswith("-stray")]
        assert len(strays) == 1 and read_topic_id(tmp_path / strays[0]) == (orders.topic_id, None)
        new = c.create_topic("orders", 1)
        assert new.topic_id != orders.topic_id and _end_offsets(c, "orders") == [0]
        assert read_topic_id(tmp_path / "orders-0") == (new.topic_id, None)
    finally:
        c.close()


def test_a_partition_directory_with_another_id_than_the_topics_is_set_aside(tmp_path):
    orders, _ = _setup(tmp_path)
    other = uuid.uuid4()
    (tmp_path / "orders-1" / PARTITION_METADATA).write_bytes(encode(other))
    c = _cluster(tmp_path)
    try:
        assert c.topics["orders"].topic_id == orders.topic_id
        assert _end_offsets(c, "orders") == [2, 0, 4]  # partition 1 is not the topic's: it starts empty
        strays = [n for n in os.listdir(tmp_path) if n.startswith("orders-1.") and n.endswith("-stray")]
        assert len(strays) == 1 and read_topic_id(tmp_path / strays[0]) == (other, None)
    finally:
        c.close()


def test_directories_without_partition_metadata_get_it_from_meta_json(tmp_path):
    orders, _ = _setup(tmp_path)
    for p in range(3):
        (tmp_path / f"orders-{p}" / PARTITION_METADATA).unlink()
    c = _cluster(tmp_path)
    try:
        assert _end_offsets(c, "orders") == [2, 3, 4]
        for p in range(3):
            assert read_topic_id(tmp_path / f"orders-{p}") == (orders.topic_id, None)
    finally:
        c.close()


# ---------------------------------------------------------------------------- acls.json, scram-credentials.json
def test_security_files_keep_their_previous_version_and_use_it_only_when_the_file_is_missing(tmp_path):
    import asyncio

    from broker.security.authorizer import AclStore, AclStoreError
    from tests.unit.test_authorizer import acl, authz
    from broker.security.authorizer import Operation

    first, second = acl("t", Operation.READ), acl("u", Operation.READ)
    store = AclStore(authz(), tmp_path)
    asyncio.run(store.create([first]))
    asyncio.run(store.create([second]))
    assert oct((tmp_path / "acls.json.prev").stat().st_mode & 0o777) == "0o600"
    (tmp_path / "acls.json").unlink()  # deleted, or a crash between the write's two renames
    again = authz()
    AclStore(again, tmp_path).load()
    assert again.bindings == {first}  # the version before the last change, with a WARNING
    (tmp_path / "acls.json").write_text("{not json")
    with pytest.raises(AclStoreError) as info:  # unreadable: not passed over (the last change may have removed access)
        AclStore(authz(), tmp_path).load()
    assert "acls.json.prev" in str(info.value) and "\n" not in str(info.value)


def test_every_internal_topic_is_rebuilt_with_the_configs_it_is_created_with(tmp_path):
    from broker.config import BrokerConfig
    from broker.server import Broker

    broker = Broker(BrokerConfig(data_dir=tmp_path))
    configs = {name: broker.internal_topic_configs(name) for name in
               ("__consumer_offsets", "__transaction_state", "__share_group_state", "__kafkalite_group_events", "__other", "orders")}
    assert configs["__consumer_offsets"]["cleanup.policy"] == "compact"
    assert configs["__transaction_state"]["cleanup.policy"] == "compact"
    assert configs["__share_group_state"] == {"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": "104857600"}
    assert configs["__kafkalite_group_events"]["cleanup.policy"] == "delete"
    assert configs["__other"] is None and configs["orders"] is None
    for value in configs.values():
        if value is not None:
            LogConfig.from_kafka(value, LogConfig())  # valid topic configs


def test_a_rebuild_fills_a_missing_partition_and_sets_aside_one_of_another_id(tmp_path):
    import shutil

    orders, _ = _setup(tmp_path)
    shutil.rmtree(tmp_path / "orders-1")  # lost with the metadata
    os.makedirs(tmp_path / "orders-3")
    (tmp_path / "orders-3" / PARTITION_METADATA).write_bytes(encode(uuid.uuid4()))  # not this topic's
    (tmp_path / "meta.json").unlink()
    (tmp_path / "meta.json.prev").unlink()
    c = _cluster(tmp_path)
    try:
        assert c.topics["orders"].topic_id == orders.topic_id
        assert _end_offsets(c, "orders") == [2, 0, 4]  # partition 1 starts empty, 3 is not the topic's
        assert not (tmp_path / "orders-3").exists()  # it held no record: removed
        assert read_topic_id(tmp_path / "orders-1") == (orders.topic_id, None)
    finally:
        c.close()


def test_a_metadata_file_that_may_not_be_read_is_not_taken_for_damage(tmp_path, monkeypatch):
    from pathlib import Path

    _setup(tmp_path)
    real = Path.read_bytes

    def read_bytes(self):
        if self.name == "meta.json":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)  # (chmod 0 does not stop root)
    with pytest.raises(MetadataError, match="permission denied"):
        _cluster(tmp_path)
    assert (tmp_path / "meta.json").exists() and not [n for n in os.listdir(tmp_path) if "unreadable" in n]


def test_permission_errors_are_raised_by_read_with_fallback(tmp_path, monkeypatch):
    from pathlib import Path

    path = tmp_path / "m.json"
    path.write_bytes(b"{}")

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(PermissionError):
        read_with_fallback(path, json.loads)


def test_a_new_topic_never_takes_over_a_directory_already_there(tmp_path):
    import shutil

    orders, _ = _setup(tmp_path)
    shutil.copytree(tmp_path / "orders-2", tmp_path / "saved")
    c = _cluster(tmp_path)
    try:
        c.delete_topic(c.topics["orders"])
        shutil.copytree(tmp_path / "saved", tmp_path / "orders-2")  # appears while the broker runs
        os.makedirs(tmp_path / "orders-1")  # an empty leftover
        new = c.create_topic("orders", 3)
        assert _end_offsets(c, "orders") == [0, 0, 0]
        assert all(read_topic_id(tmp_path / f"orders-{p}") == (new.topic_id, None) for p in range(3))
        strays = [n for n in os.listdir(tmp_path) if n.endswith("-stray")]
        assert len(strays) == 1 and strays[0].startswith("orders-2.") and read_topic_id(tmp_path / strays[0]) == (orders.topic_id, None)
    finally:
        c.close()
