"""The __consumer_offsets log at scale: a million commits load back, and
compaction keeps the log bounded by the live key set."""

from __future__ import annotations

import json

from protocol.errors import ErrorCode
from protocol.group_records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from protocol.records import Record, build_batch, split_batches
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.broker_process import BrokerProcess
from tests.raw import RawClient

from broker.coordinator.placement import partition_for

GROUPS = 100
TOPICS = 10
PARTITIONS = 10  # 100 groups x 10 topics x 10 partitions = 10,000 live keys
ROUNDS = 100  # commits per key: 1,000,000 records in all
BATCH = 5_000


def _commit_records(round_no: int):
    for g in range(GROUPS):
        group = f"bulk-group-{g}"
        for t in range(TOPICS):
            for p in range(PARTITIONS):
                key = encode_key(OffsetCommitKey(group, f"topic-{t}", p))
                value = encode_value(OffsetCommitValue(offset=round_no * 1000 + p, metadata="m", commit_timestamp=1_700_000_000_000 + round_no))
                yield partition_for(group), key, value


def _write_million(data_dir) -> dict[int, PartitionLog]:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=8 * 1024 * 1024, fsync="never")
    logs: dict[int, PartitionLog] = {}
    pending: dict[int, list] = {}

    def flush(shard: int) -> None:
        recs = pending.pop(shard)
        batch = build_batch([Record(offset=i, timestamp=0, key=k, value=v) for i, (k, v) in enumerate(recs)])
        log = logs.get(shard) or logs.setdefault(shard, PartitionLog.open(data_dir / f"__consumer_offsets-{shard}", cfg))
        log.append(split_batches(batch))

    for round_no in range(ROUNDS):
        for shard, key, value in _commit_records(round_no):
            bucket = pending.setdefault(shard, [])
            bucket.append((key, value))
            if len(bucket) >= BATCH:
                flush(shard)
    for shard in list(pending):
        flush(shard)
    return logs


def _fetch(client: RawClient, group: str, topic: str, partitions: list[int]):
    body = {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": [{"name": topic, "partition_indexes": partitions}]}], "require_stable": False}
    return client.request(9, 9, body).groups[0]


def test_million_commits_load_and_compaction_bounds_the_log(tmp_path):
    data = tmp_path / "data"
    broker = BrokerProcess(data, "--log-format", "json").start()  # creates __consumer_offsets and the topics' metadata
    client = RawClient(broker.bootstrap)
    for t in range(TOPICS):
        client.request(19, 7, {"topics": [{"name": f"topic-{t}", "num_partitions": PARTITIONS, "replication_factor": 1}], "timeout": 5000})
    client.close()
    assert broker.stop() == 0

    logs = _write_million(data)
    before = sum(log.size_bytes for log in logs.values())
    for log in logs.values():
        log.close()

    mark = len(broker.stderr_lines)
    broker.start()
    loaded = _waited_load(broker, mark)
    assert loaded["records"] >= GROUPS * TOPICS * PARTITIONS * ROUNDS
    client = RawClient(broker.bootstrap)
    for g in (0, 37, 99):
        got = _fetch(client, f"bulk-group-{g}", "topic-3", list(range(PARTITIONS)))
        assert got.error_code == ErrorCode.none
        assert [p.committed_offset for p in got.topics[0].partitions] == [(ROUNDS - 1) * 1000 + p for p in range(PARTITIONS)]
    client.close()
    assert broker.stop() == 0

    # compaction: every key keeps only its latest value
    after = 0
    for shard in logs:
        log = PartitionLog.open(data / f"__consumer_offsets-{shard}", LogConfig(cleanup_policy="compact", segment_bytes=8 * 1024 * 1024, fsync="never", min_cleanable_dirty_ratio=0.0))
        log.roll()
        log.compact()
        after += log.size_bytes
        log.close()
    assert after < before / 20, (before, after)

    mark = len(broker.stderr_lines)
    broker.start()
    _waited_load(broker, mark)
    client = RawClient(broker.bootstrap)
    got = _fetch(client, "bulk-group-5", "topic-9", [0, 9])
    assert [p.committed_offset for p in got.topics[0].partitions] == [(ROUNDS - 1) * 1000, (ROUNDS - 1) * 1000 + 9]
    client.close()
    broker.stop()


def _waited_load(broker: BrokerProcess, start_line: int) -> dict:
    return json.loads(broker.wait_for_log('"coordinator loaded"', timeout=180, start=start_line))
