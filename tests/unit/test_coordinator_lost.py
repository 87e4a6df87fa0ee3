"""A coordinator names what recovery cut from its partition (broker/coordinator/lost.py)."""

from __future__ import annotations

import logging
import time

import structlog

from broker import logs
from broker.coordinator.lost import dropped_names, group_name, report_cuts, transactional_id
from protocol.group_records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from protocol.records import Record, build_batch, read_header
from protocol.txn_records import TransactionLogKey
from protocol.txn_records import encode_key as txn_key
from storage import LogConfig, PartitionLog


def _commit(group: str, offset: int) -> tuple:
    key = encode_key(OffsetCommitKey(group, "t", 0))
    value = encode_value(OffsetCommitValue(offset=offset, metadata="", commit_timestamp=1))
    data = build_batch([Record(0, 1, key, value, [])])
    return read_header(data), data


def _damaged_offsets_log(tmp_path, groups: list[str], bad: int) -> PartitionLog:
    path = tmp_path / "__consumer_offsets-3"
    plog = PartitionLog.open(path, LogConfig(fsync="never"), clock=time.time)
    positions = []
    for i, g in enumerate(groups):
        positions.append(plog.size_bytes)
        plog.append([_commit(g, i)])
    plog.close()
    [seg] = path.glob("*.log")
    with open(seg, "r+b") as f:
        f.seek(positions[bad] + 40)  # inside the header's CRC-covered part: the records stay readable
        f.write(b"\xff")
    return PartitionLog.open(path, LogConfig(fsync="never"), clock=time.time)


def test_groups_of_the_dropped_batches_are_named(tmp_path):
    plog = _damaged_offsets_log(tmp_path, ["kept-a", "kept-b", "damaged", "after-1", "after-2"], bad=2)
    assert plog.log_end_offset == 2
    [cut] = plog.recovery_truncations
    names, maybe, bad = dropped_names(cut.moved_to, group_name)
    assert names == {"after-1", "after-2"}
    assert maybe == {"damaged"}
    assert bad == 0


def test_report_names_partition_and_groups_once(tmp_path):
    plog = _damaged_offsets_log(tmp_path, ["kept", "damaged", "after"], bad=1)
    with structlog.testing.capture_logs() as captured:
        report_cuts(plog, "__consumer_offsets", 3, "groups", group_name)
        report_cuts(plog, "__consumer_offsets", 3, "groups", group_name)  # already reported: nothing
    [entry] = captured
    assert entry["log_level"] == "warning"
    assert entry["topic"] == "__consumer_offsets" and entry["partition"] == 3
    assert entry["first_offset_dropped"] == 1 and entry["last_offset_dropped"] == 2
    assert entry["groups"] == ["after"] and entry["groups_in_damaged_batches"] == ["damaged"]
    assert "partition 3 may have lost state" in entry["note"]
    assert plog.recovery_truncations == []


def test_names_from_garbage_are_none():
    assert group_name(b"\x00") is None
    assert transactional_id(b"\xff\xff\xff") is None
    assert transactional_id(txn_key(TransactionLogKey("tx-1"))) == "tx-1"


def test_stdlib_records_reach_structlog_with_their_fields(capsys):
    """storage/ logs through the stdlib: with the broker's logging set up they are JSON, with
    their level, time stamp and ``extra`` fields."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        logs.configure("json", "info")
        logging.getLogger("storage.log").warning("log truncated", extra={"partition": "t-0", "first_offset_dropped": 7})
        logging.getLogger("storage.log").debug("not shown")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.reset_defaults()
    import json

    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    entry = json.loads(line)
    assert entry["event"] == "log truncated" and entry["level"] == "warning" and entry["timestamp"]
    assert entry["partition"] == "t-0" and entry["first_offset_dropped"] == 7 and entry["logger"] == "storage.log"


def test_transactional_ids_of_a_cut_transaction_state_partition(tmp_path):
    path = tmp_path / "__transaction_state-0"
    plog = PartitionLog.open(path, LogConfig(fsync="never"), clock=time.time)
    positions = []
    for tid in ("tx-kept", "tx-damaged", "tx-after"):
        positions.append(plog.size_bytes)
        data = build_batch([Record(0, 1, txn_key(TransactionLogKey(tid)), b"value bytes", [])])
        plog.append([(read_header(data), data)])
    plog.close()  # a clean shutdown: the coordinator topic is checked whole all the same
    [seg] = path.glob("*.log")
    with open(seg, "r+b") as f:
        f.seek(positions[1] + 40)
        f.write(b"\xff")
    plog = PartitionLog.open(path, LogConfig(fsync="never"), clock=time.time)
    assert plog.log_end_offset == 1
    with structlog.testing.capture_logs() as captured:
        report_cuts(plog, "__transaction_state", 0, "transactional_ids", transactional_id)
    [entry] = captured
    assert entry["transactional_ids"] == ["tx-after"] and entry["transactional_ids_in_damaged_batches"] == ["tx-damaged"]
