"""A full disk: writes are refused as Kafka refuses them, reads go on, nothing is damaged or lost.

The broker's data directory is on a 16 MiB tmpfs the test mounts (root only;
skipped with the reason otherwise), filled to the last byte with a ballast
file. Then Produce answers KAFKA_STORAGE_ERROR (56), OffsetCommit answers
NOT_COORDINATOR (Kafka's group coordinator maps a failed write to
__consumer_offsets, KAFKA_STORAGE_ERROR, to NOT_COORDINATOR:
CoordinatorOperationExceptionHelper), topic creation is refused or done whole,
and Fetch, Metadata and OffsetFetch still answer; a config change that cannot be stored is
refused and not in effect. With the ballast gone writes
succeed again, and a restart on the same directory finds every acknowledged
record and commit, with no torn tail to truncate.
"""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from bench.crashpoints import add_partitions, commit, committed, create_topic, delete_topic, metadata, produce_answer, read_all
from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.raw import RawClient
from tests.wait import wait_until

GROUP = "full-group"
BIG = 4000  # offset metadata this long: a commit record needs a page of its own (fits offset.metadata.max.bytes)


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def _fill(path) -> int:
    """Write ``path`` until the file system is full to the last byte; returns its size."""
    size = 0
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12, 1):
            block = b"\0" * chunk
            while True:
                try:
                    size += f.write(block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    return size


def test_full_disk_refuses_writes_keeps_reads_and_loses_nothing(small_fs):
    b = BrokerProcess(small_fs / "data", "--offsets-topic-num-partitions", "1").start()
    acked: dict = {}  # offset -> value
    try:
        c = RawClient(b.bootstrap)
        assert create_topic(c, "full", 1, {}) == ErrorCode.none
        for i in range(20):
            kvs = [(b"k%d" % i, b"before-%d-" % i + b"x" * 1000)]
            err, base = produce_answer(c, "full", 0, kvs)
            assert err == ErrorCode.none
            acked[base] = kvs[0][1]
        assert commit(c, {("full", 0): 5}, GROUP) == {("full", 0): ErrorCode.none}
        assert create_topic(c, "other", 1, {}) == ErrorCode.none

        ballast = small_fs / "ballast"
        assert _fill(ballast) > 0
        # a batch bigger than a page: some of it may fit in the segment's last page, the rest cannot
        for i in range(3):
            err, _ = produce_answer(c, "full", 0, [(b"k", b"during-%d-" % i + b"y" * 20000)])
            assert err == ErrorCode.kafka_storage_error
        answer = commit(c, {("full", 0): 9}, GROUP, metadata="m" * BIG)
        assert answer == {("full", 0): ErrorCode.not_coordinator}
        # reads go on
        assert "full" in metadata(c)
        wait_until(lambda: committed(c, [("full", 0)], GROUP) == {("full", 0): 5}, what="the group's offset 5 read back")
        _low, records = read_all(b.bootstrap, {"full": 1})[("full", 0)]
        assert {off: v for off, (_k, v) in records.items()} == acked
        # an admin write is refused whole, or done whole; the connection stays
        err = create_topic(c, "while-full", 3, {})
        assert err in (ErrorCode.none, ErrorCode.kafka_storage_error, ErrorCode.unknown_server_error), ErrorCode(err).name
        assert ("while-full" in metadata(c)) == (err == ErrorCode.none)
        refused = (ErrorCode.kafka_storage_error, ErrorCode.unknown_server_error)
        err = add_partitions(c, "other", 3)
        assert err in (ErrorCode.none, *refused), ErrorCode(err).name
        assert metadata(c)["other"][1] == (3 if err == ErrorCode.none else 1)
        err = delete_topic(c, "other")
        assert err in (ErrorCode.none, *refused), ErrorCode(err).name
        other = metadata(c).get("other")
        assert (other is None) == (err == ErrorCode.none)

        # a write no handler maps itself (meta.json for AlterConfigs): KAFKA_STORAGE_ERROR, the connection stays
        body = {"resources": [{"resource_type": 2, "resource_name": "full", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}], "validate_only": False}
        assert [r.error_code for r in c.request(44, 1, body).responses] == [ErrorCode.kafka_storage_error]
        assert "full" in metadata(c)
        shown = c.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": "full", "configuration_keys": ["retention.ms"]}],
                                  "include_synonyms": False, "include_documentation": False})
        assert [(x.name, x.value) for x in shown.results[0].configs] == [("retention.ms", "604800000")]  # refused, so not in effect

        ballast.unlink()
        err, base = produce_answer(c, "full", 0, [(b"k", b"after-" + b"z" * 20000)])
        assert err == ErrorCode.none
        acked[base] = b"after-" + b"z" * 20000
        wait_until(lambda: commit(c, {("full", 0): 12}, GROUP, metadata="m" * BIG) == {("full", 0): ErrorCode.none},
                   what="a commit with large metadata accepted once there is room again")
        c.close()
        b.stop()

        b.start()
        _low, records = read_all(b.bootstrap, {"full": 1})[("full", 0)]
        assert {off: v for off, (_k, v) in records.items()} == acked
        c = RawClient(b.bootstrap)
        assert committed(c, [("full", 0)], GROUP) == {("full", 0): 12}
        assert metadata(c).get("other") == other  # what was answered is what the restart finds
        c.close()
        assert "truncating corrupt/torn tail" not in b.logs()
        assert "handler failed" not in b.logs()
    finally:
        if b.proc is not None:
            b.stop()
