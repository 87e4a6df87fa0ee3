"""A damaged data directory: the broker starts, keeps what precedes the damage and says what it cut.

A real broker process (``--log-format json``) gets records and commits, is
killed (SIGKILL), and a batch in the middle of a ``__consumer_offsets`` segment and of
a user segment is damaged. On restart the broker is up, the commits before
the damage are served, the group whose commit was cut is named in a JSON
WARNING, the bytes cut are in ``.corrupt-`` files next to the segments, and
``groups lag`` shows the commit now past the log end as a negative lag
(as kafka-consumer-groups.sh does).
"""

from __future__ import annotations

import contextlib
import io
import json

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.admin.cli import run as run_admin
from broker.cli import _parser
from broker.coordinator.placement import partition_for
from protocol.records import HEADER_SIZE, read_header
from storage.quarantine import CORRUPT_MARK
from tests.broker_process import BrokerProcess

TOPIC = "damaged"
RECORDS = 40


def _same_shard_groups() -> tuple[str, str, int]:
    """Two group ids whose commits go to the same ``__consumer_offsets`` partition."""
    first = "early-group"
    shard = partition_for(first)
    for i in range(10_000):
        other = f"late-group-{i}"
        if partition_for(other) == shard:
            return first, other, shard
    raise AssertionError("no second group for the shard")


def _commit(b: BrokerProcess, group: str, offset: int) -> None:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        c.close()


def _committed(b: BrokerProcess, group: str) -> int:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [tp] = c.committed([TopicPartition(TOPIC, 0)], timeout=30)
        return tp.offset
    finally:
        c.close()


def _batch_positions(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos + HEADER_SIZE <= len(data):
        out.append(pos)
        pos += read_header(data, pos).size
    return out


def _damage_batch(path, index: int) -> int:
    """Flip a byte inside the CRC-covered part of batch ``index`` of the segment; its position."""
    data = path.read_bytes()
    pos = _batch_positions(data)[index]
    with open(path, "r+b") as f:
        f.seek(pos + 40)
        f.write(bytes([data[pos + 40] ^ 0xFF]))
    return pos


def _json_lines(b: BrokerProcess, start: int) -> list[dict]:
    out = []
    for line in b.stderr_lines[start:]:
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def _lag(b: BrokerProcess, group: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run_admin(_parser().parse_args(["groups", "lag", group, "--bootstrap", b.bootstrap, "--json"]))
    text_out, text_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(text_out), contextlib.redirect_stderr(text_err):
        run_admin(_parser().parse_args(["groups", "lag", group, "--bootstrap", b.bootstrap]))
    return rc, json.loads(out.getvalue()), text_err.getvalue()


def test_damaged_offsets_and_user_segments_after_a_stop(tmp_path):
    early, late, shard = _same_shard_groups()
    b = BrokerProcess(tmp_path, "--log-format", "json")
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
        for i in range(RECORDS):
            p.produce(TOPIC, b"v%d" % i)
            p.flush(30)  # one batch per record
        _commit(b, early, 30)
        _commit(b, late, 35)
        del p, admin  # no client keeps calling the stopped broker
    finally:
        # SIGKILL: the next start scans the user topic's active segment (after a clean shutdown a
        # user topic's segments are trusted, as in Kafka); __consumer_offsets is checked whole anyway
        b.kill()
    offsets_dir = tmp_path / f"__consumer_offsets-{shard}"
    [offsets_seg] = sorted(offsets_dir.glob("*.log"))
    n_offset_batches = len(_batch_positions(offsets_seg.read_bytes()))
    assert n_offset_batches >= 2
    _damage_batch(offsets_seg, n_offset_batches - 1)  # the late group's commit
    [user_seg] = sorted((tmp_path / f"{TOPIC}-0").glob("*.log"))
    user_cut = _damage_batch(user_seg, 10)  # records 0..9 stay

    start = len(b.stderr_lines)
    b.start()
    try:
        assert b.proc.poll() is None
        # commits before the damage are served; the one after it is gone
        assert _committed(b, early) == 30
        assert _committed(b, late) == -1001  # OFFSET_INVALID: no commit
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "reader"})
        try:
            assert c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30) == (0, 10)
        finally:
            c.close()
        lines = _json_lines(b, start)
        cuts = {entry["partition"]: entry for entry in lines if entry.get("event", "").startswith("log truncated at recovery")}
        assert set(cuts) == {f"__consumer_offsets-{shard}", f"{TOPIC}-0"}
        for entry in cuts.values():
            assert entry["level"] == "warning" and entry["timestamp"]
        user = cuts[f"{TOPIC}-0"]
        assert user["first_offset_dropped"] == 10 and user["last_offset_dropped"] == RECORDS - 1
        assert user["byte_ranges"] == [{"file": user_seg.name, "start": user_cut, "end": user["byte_ranges"][0]["end"]}]
        [aside] = [q for q in user_seg.parent.iterdir() if CORRUPT_MARK in q.name]
        assert user["moved_to"] == [str(aside)]
        assert aside.stat().st_size == user["bytes_dropped"]
        [lost] = [entry for entry in lines if entry.get("event", "").startswith("coordinator state may be lost")]
        assert lost["level"] == "warning"
        assert lost["topic"] == "__consumer_offsets" and lost["partition"] == shard
        # the late group's commit was the damaged batch itself: its key still decodes
        assert lost["groups"] == [] and lost["groups_in_damaged_batches"] == [late]
        # the early group's commit (30) is now past the log end (10): a negative lag, as Kafka's tool shows
        rc, lag, err = _lag(b, early)
        assert rc == 0
        [row] = lag["partitions"]
        assert (row["current_offset"], row["log_end_offset"], row["lag"]) == (30, 10, -20)
        assert lag["past_log_end"] == 1 and lag["total_lag"] == 0
        assert "past the log end" in err
    finally:
        b.stop()


def test_damage_in_a_cleanly_closed_user_segment_is_a_corrupt_message_error(tmp_path):
    """After a clean shutdown a user topic's segments are trusted past their first header (as in
    Kafka): a fetch that walks into a damaged batch header gets CORRUPT_MESSAGE for the
    partition, as Kafka's CorruptRecordException gives, and the connection and broker go on."""
    from tests.raw import RawClient

    b = BrokerProcess(tmp_path, "--log-format", "json")
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("trusted", 1, 1, config={"index.interval.bytes": "100"})])["trusted"].result(30)
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
        for i in range(RECORDS):
            p.produce("trusted", b"v%d" % i)
            p.flush(30)
        del p, admin
    finally:
        b.stop()
    [seg] = sorted((tmp_path / "trusted-0").glob("*.log"))
    pos = _batch_positions(seg.read_bytes())[10]
    with open(seg, "r+b") as f:
        f.seek(pos + 8)
        f.write(b"\x00\x00\x00\x01")  # batch 10's length: below a header's
    start = len(b.stderr_lines)
    b.start()
    try:
        client = RawClient(b.bootstrap)
        body = {
            "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "trusted", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 11, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        }
        [part] = client.request(1, 12, body).responses[0].partitions
        assert part.error_code == 2  # CORRUPT_MESSAGE
        body["topics"][0]["partitions"][0]["fetch_offset"] = 0
        [part] = client.request(1, 12, body).responses[0].partitions
        assert part.error_code == 0 and part.high_watermark == RECORDS  # the connection goes on
        client.close()
        lines = _json_lines(b, start)
        assert any(e.get("event") == "fetch found a damaged batch" and e["partition"] == 0 for e in lines)
        # the start walked the last segments' headers for the producers' state: it said what it found
        assert any(e.get("event", "").startswith("damaged batch header") and e["level"] == "warning" for e in lines)
        assert not any(e.get("event", "").startswith("log truncated") for e in lines)
    finally:
        b.stop()
