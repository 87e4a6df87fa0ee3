"""The coordinator's fast load gives exactly the state of replaying every record in log order.

``broker.coordinator.loader`` replays offset commits by runs of same-layout
records and decodes values lazily (only those no later record replaced).
These tests build logs with many superseded and tombstoned keys — offset
commits of every value version and shape, classic group metadata, KIP-848
records from a real scenario, unknown record types, legacy keys — cut into
batches of every kind (compressed, with offset gaps as compaction leaves
them, transactional, control) and compare the state the fast path builds
with the state ``GroupShard.replay_bytes`` of each record, in order, builds.
"""

from __future__ import annotations

import random
import struct
import uuid
from types import SimpleNamespace

import pytest

from broker.coordinator.classic_group import ClassicGroup
from broker.coordinator.common import GroupConfig
from broker.coordinator.consumer_group import ConsumerGroup
from broker.coordinator.loader import ShardLoader, finish, records_section, replay_log_batch
from broker.coordinator.runtime import ShardRuntime
from broker.coordinator.shard import GroupShard
from protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, CorruptRecordError
from protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    encode_value_version,
)
from protocol.group_records import runs
from protocol.records import Record, build_batch, build_end_txn_marker, split_batches
from storage.config import LogConfig
from storage.log import PartitionLog

from .test_coordinator_classic import StubLog
from .test_coordinator_consumer import ConsumerHarness, busy_scenario, snapshot

T0 = 1_700_000_000_000


# =========================================================================== building logs
METADATA = ["", "", "", "m", "meta-", "meta-meta-", "é✓"]


def offset_value(rng: random.Random, version: int | None = None, md: str | None = None) -> tuple[OffsetCommitValue, int]:
    version = version if version is not None else rng.choice([1, 3, 4, 4, 4])
    md = rng.choice(METADATA) if md is None else md
    value = OffsetCommitValue(
        offset=rng.randint(0, 1 << 40), leader_epoch=-1 if version == 1 else rng.randint(-1, 9), metadata=md,
        commit_timestamp=T0 + rng.randint(0, 10**6), expire_timestamp=T0 + 10**7 if version == 1 else -1,
        topic_id=uuid.UUID(int=rng.randint(1, 1 << 100)) if version == 4 and rng.random() < 0.05 else None,
    )
    return value, version


def classic_group_value(rng: random.Random, members: int) -> GroupMetadataValue:
    ms = [MemberMetadata(f"m-{i}", None, "client", "/10.0.0.1", 30_000, 10_000, b"sub", b"asg") for i in range(members)]
    return GroupMetadataValue("consumer", rng.randint(1, 9), "range" if ms else None, ms[0].member_id if ms else None, T0, ms)


def mixed_records(seed: int, kip848: list[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
    """Offset commits over and over for a few groups (every version, metadata, topic ids), partitions
    and whole groups tombstoned, classic group metadata written and deleted (before, between and after
    the group's offsets), the KIP-848 scenario's records spliced in, unknown types and legacy keys."""
    rng = random.Random(seed)
    groups = ["g-01", "g-02", "g-03", "grp-long-name-4", "cg", "r-1", "r-2", "r-3"]  # "cg": the KIP-848 scenario's group
    topics = ["t", "topic-b", "t3"]
    out: list[tuple[bytes, bytes | None]] = []
    k848 = list(kip848)
    for _round in range(12):
        for g in rng.sample(groups, len(groups)):
            # None: each record its own version; the "r-" groups always write one layout (runs only)
            version = 4 if g.startswith("r-") else rng.choice([1, 3, 4, 4, None])
            for t in rng.sample(topics, rng.randint(1, 3)):
                md = rng.choice(METADATA + [None])  # None: each record its own metadata
                for p in range(rng.choice([3, 40, 90]) if not g.startswith("r-") else 64):
                    value, _ = offset_value(rng, version, md)
                    out.append((encode_key(OffsetCommitKey(g, t, p)), encode_value_version(value, version or rng.choice([1, 3, 4]))))
        roll = rng.random()
        g = rng.choice(groups[:4] + groups[5:])
        if roll < 0.3:  # offsets expired / deleted: tombstones of a stretch of partitions
            t = rng.choice(topics)
            out += [(encode_key(OffsetCommitKey(g, t, p)), None) for p in range(rng.randint(1, 60))]
        elif roll < 0.5:  # a classic group's metadata, maybe deleted again
            out.append((encode_key(GroupMetadataKey(g)), encode_value(classic_group_value(rng, rng.randint(0, 3)))))
            if rng.random() < 0.5:
                out.append((encode_key(GroupMetadataKey(g)), None))
        elif roll < 0.6:  # a group deleted: its offsets then its metadata
            for t in topics:
                out += [(encode_key(OffsetCommitKey(g, t, p)), None) for p in range(90)]
            out.append((encode_key(GroupMetadataKey(g)), None))
        elif roll < 0.65:  # the retention job: tombstones of several groups' partitions in one stretch
            out += [(encode_key(OffsetCommitKey(g2, "t", p)), None) for g2 in ("r-1", "r-2", "r-3") for p in range(rng.randint(5, 30))]
        elif roll < 0.7:  # odd records: an unknown type, a legacy (type 0) key with a v0 value
            out.append((struct.pack(">hh", 99, 1) + b"x", b"\x00\x00whatever"))
            legacy_key = encode_key(OffsetCommitKey(g, "t", 1))
            legacy_key = b"\x00\x00" + legacy_key[2:]
            value, _ = offset_value(rng, 1)
            out.append((legacy_key, encode_value_version(value, 0)))
        take = rng.randint(0, max(1, len(k848) // 6))
        out += k848[:take]
        del k848[:take]
    return out + k848


def batches_of(records: list[tuple[bytes, bytes | None]], seed: int) -> list[bytes]:
    """Cut records into batches of every kind the log can hold."""
    rng = random.Random(seed)
    out = []
    i = 0
    offset = 0
    while i < len(records):
        n = rng.choice([1, 7, 64, 100, 300, 1000, 64])
        chunk = records[i:i + n]
        i += n
        compression = rng.choice([NONE, NONE, NONE, GZIP, LZ4, SNAPPY, ZSTD])
        gaps = rng.random() < 0.15  # a compacted batch: offsets with holes
        spread = rng.random() < 0.1  # records with different timestamps
        recs = []
        for j, (k, v) in enumerate(chunk):
            recs.append(Record(offset=offset + j * (3 if gaps else 1), timestamp=T0 + (j % 3 if spread else 0), key=k, value=v))
        out.append(build_batch(recs, base_offset=offset, compression=compression, is_transactional=rng.random() < 0.05))
        offset = recs[-1].offset + 1
        if rng.random() < 0.05:
            out.append(build_end_txn_marker(commit=True, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=T0, base_offset=offset))
            offset += 1
    return out


def kip848_records(loop) -> list[tuple[bytes, bytes | None]]:
    h = ConsumerHarness(loop)
    h.topic("t", 4, uuid.UUID(int=0xA1))
    h.topic("u", 2, uuid.UUID(int=0xB2))
    busy_scenario(h)
    return list(h.durable)


def new_shard(loop) -> GroupShard:
    return GroupShard(0, GroupConfig(), lambda: T0, StubLog(), loop.create_future)


def state(shard: GroupShard):
    classic = {
        gid: (g.state, g.previous_state, g.state_timestamp, g.generation, g.protocol_type, g.protocol_name, g.leader_id, sorted(g.members),
              dict(g.static_members), dict(g.protocol_counts), g.subscribed)
        for gid, g in shard.groups.items() if isinstance(g, ClassicGroup)
    }
    offsets = {g: list(d.items()) for g, d in shard.offsets.latest.items()}  # values and insertion order
    order = {gid: (list(g.members), list(g.target)) for gid, g in shard.groups.items() if isinstance(g, ConsumerGroup)}
    return (list(shard.groups), classic, snapshot(shard), order, list(shard.offsets.latest), offsets, shard.skipped_records)


def load_both(loop, blobs: list[bytes]) -> tuple[GroupShard, GroupShard]:
    fast, slow = new_shard(loop), new_shard(loop)
    loader = ShardLoader(fast)
    for blob in blobs:
        for header, batch in split_batches(blob):
            loader.add_batch(header, batch)
            replay_log_batch(slow, header, batch)
    loader.apply()
    finish(fast)
    fast.loader = loader
    return fast, slow


# =========================================================================== tests
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_fast_load_equals_in_order_replay_of_every_record(loop, seed):
    records = mixed_records(seed, kip848_records(loop))
    assert len(records) > 3000
    blobs = batches_of(records, seed)
    by_run = 0
    for blob in blobs:
        for header, batch in split_batches(blob):
            if not header.is_control:
                by_run += sum(len(a) for kind, a, _ in runs.scan(records_section(header, batch), header.records_count) if kind != runs.SINGLE)
    assert by_run > len(records) // 4, "the test must exercise the runs (and the single records)"
    fast, slow = load_both(loop, blobs)
    assert state(fast) == state(slow)
    assert all(type(v) is OffsetCommitValue for d in fast.offsets.latest.values() for v in d.values())
    kinds = {type(g) for g in fast.groups.values()}
    assert ConsumerGroup in kinds and ClassicGroup in kinds


def kip848_churn(loop, groups: int = 6) -> list[tuple[bytes, bytes | None]]:
    """KIP-848 groups at work: members join, reconcile epoch after epoch, leave and come back;
    then a commit and a deletion of one group's offsets."""
    rng = random.Random(groups)
    out = []
    for gi in range(groups):
        h = ConsumerHarness(loop)
        h.topic("t", 24, uuid.UUID(int=0xA1))
        gid = f"cg-{gi}"
        members = [f"m{i}" for i in range(8)]
        for m in members:
            h.hb(m, 0, group=gid, topics=["t"], rebalance=30_000, owned={}, instance=f"i-{m}" if m == "m0" else None)
        for _ in range(5):
            for m in members:
                g = h.shard.groups[gid]
                if m in g.members:
                    h.hb(m, g.members[m].member_epoch, group=gid, owned=h.names(g.members[m].assigned))
            m = rng.choice(members[1:])
            if m in h.shard.groups[gid].members:
                h.hb(m, -1, group=gid)
                h.hb(m, 0, group=gid, topics=["t"], rebalance=30_000, owned={})
        out += h.durable
        out += [(encode_key(OffsetCommitKey(gid, "t", p)), encode_value(OffsetCommitValue(p, 3, "", T0))) for p in range(24)]
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_superseded_group_records_are_skipped_and_the_state_is_the_same(loop, seed):
    """Current assignments, group and target epochs that a later record of the same key replaces are
    not decoded; the groups (members, epochs, assignments, targets, derived counts) come out the same."""
    churn = kip848_churn(loop)
    records = churn + mixed_records(seed, [])
    fast, slow = load_both(loop, batches_of(records, seed))
    assert state(fast) == state(slow)
    assert fast.loader.skipped_decodes > len(churn) // 5
    assert sum(len(g.members) for g in fast.groups.values() if isinstance(g, ConsumerGroup)) > 20


def test_a_skipped_record_keeps_the_place_its_replay_gives(loop):
    """A skipped current assignment still creates its member (and its group) where replay would:
    the members' order, and the groups' order, stay those of in-order replay."""
    from protocol.group_records import (
        ConsumerGroupCurrentMemberAssignmentKey as CurKey,
        ConsumerGroupCurrentMemberAssignmentValue as CurValue,
        ConsumerGroupMetadataKey as MetaKey,
        ConsumerGroupMetadataValue as MetaValue,
        TopicPartitions,
    )

    tid = uuid.UUID(int=7)

    def cur(g, m, epoch, parts):
        return encode_key(CurKey(g, m)), encode_value(CurValue(epoch, epoch - 1, 0, [TopicPartitions(tid, parts)], []))

    records = [
        cur("a", "m1", 1, [0]), (encode_key(MetaKey("b")), encode_value(MetaValue(1, 0))), cur("a", "m2", 1, [1]),
        (encode_key(MetaKey("b")), encode_value(MetaValue(2, 0))), cur("a", "m1", 2, [0, 2]),
    ]
    fast, slow = load_both(loop, [build_batch([Record(offset=i, timestamp=T0, key=k, value=v) for i, (k, v) in enumerate(records)])])
    assert fast.loader.skipped_decodes == 2  # a/m1's first assignment, b's first epoch
    assert state(fast) == state(slow)
    assert list(fast.groups) == ["a", "b"] and list(fast.groups["a"].members) == ["m1", "m2"]
    assert fast.groups["a"].partition_epochs == {(tid, 1): 1, (tid, 0): 2, (tid, 2): 2}


def test_a_skipped_assignment_releases_its_partitions_where_replay_would(loop):
    """A hand-over: m1 gives up partition 1 (its second assignment, which its third replaces), then
    m2 takes partition 1. Skipping m1's second assignment must not leave m1 holding partition 1
    until its third: the partition's epoch must stay m2's."""
    from protocol.group_records import (
        ConsumerGroupCurrentMemberAssignmentKey as CurKey,
        ConsumerGroupCurrentMemberAssignmentValue as CurValue,
        TopicPartitions,
    )

    tid = uuid.UUID(int=7)

    def cur(m, epoch, parts, state=0):
        return encode_key(CurKey("a", m)), encode_value(CurValue(epoch, epoch - 1, state, [TopicPartitions(tid, parts)], []))

    from protocol.group_records import ConsumerGroupMemberMetadataKey as MemberKey, ConsumerGroupMemberMetadataValue as MemberValue

    member = (encode_key(MemberKey("a", "m1")), encode_value(MemberValue(client_id="c", subscribed_topic_names=["t"])))
    # m1's first assignment is replayed (its member metadata follows), its second is skipped
    records = [cur("m1", 1, [0, 1]), member, cur("m1", 2, [0], state=2), cur("m2", 2, [1]), cur("m1", 3, [0])]
    fast, slow = load_both(loop, [build_batch([Record(offset=i, timestamp=T0, key=k, value=v) for i, (k, v) in enumerate(records)])])
    assert fast.loader.skipped_decodes == 1
    assert state(fast) == state(slow)
    group = fast.groups["a"]
    assert group.partition_epochs == {(tid, 1): 2, (tid, 0): 3} and group.waiting == 0


def test_runs_cover_the_common_batches(loop):
    """The coordinator's own batches (one layout, thousands of records) go by runs, not record by record."""
    recs = [Record(offset=i, timestamp=T0, key=encode_key(OffsetCommitKey(f"g{i // 100:04d}", "t", i % 100)),
                   value=encode_value(OffsetCommitValue(i, -1, "", T0, -1))) for i in range(3000)]
    header, batch = split_batches(build_batch(recs))[0]
    kinds = [item[0] for item in runs.scan(records_section(header, batch), header.records_count)]
    assert runs.SINGLE not in kinds and len(kinds) == 2  # deltas 0-63 and 64-2999 (one- and two-byte varints)
    fast, slow = load_both(loop, [build_batch(recs)])
    assert state(fast) == state(slow)
    assert fast.offsets.count() == 3000 and len(fast.groups) == 30


def test_superseded_values_are_never_decoded(loop, monkeypatch):
    """Three rounds of the same keys, then tombstones for half: only the survivors become values."""
    made = []
    real = runs.value_of_row
    monkeypatch.setattr("broker.coordinator.loader.value_of_row", lambda row: made.append(row[2]) or real(row))
    monkeypatch.setattr("broker.coordinator.loader.OffsetCommitValue", lambda *a: made.append(a[0]) or OffsetCommitValue(*a))
    blobs = []
    for r in range(3):
        recs = [Record(offset=r * 200 + i, timestamp=T0, key=encode_key(OffsetCommitKey("g", "t", i)),
                       value=encode_value(OffsetCommitValue(r * 1000 + i, 1, "", T0 + r, -1))) for i in range(200)]
        blobs.append(build_batch(recs, base_offset=r * 200))
    blobs.append(build_batch([Record(offset=600 + i, timestamp=T0, key=encode_key(OffsetCommitKey("g", "t", i)), value=None) for i in range(100)],
                             base_offset=600))
    fast, slow = load_both(loop, blobs)
    assert state(fast) == state(slow)
    assert sorted(made) == [2000 + i for i in range(100, 200)]


@pytest.mark.parametrize("version", [1, 3, 4])
@pytest.mark.parametrize("metadata", ["", "x", "ü" * 70, "z" * 9000])
def test_run_rows_decode_as_decode_value_does(version, metadata):
    rng = random.Random(version)
    recs = []
    for i in range(80):
        v = OffsetCommitValue(rng.randint(-5, 1 << 62), -1 if version == 1 else rng.randint(-1, 5), metadata, rng.randint(-1, 1 << 45),
                              rng.randint(-1, 1 << 45) if version == 1 else -1)
        recs.append(Record(offset=i, timestamp=T0, key=encode_key(OffsetCommitKey("grp", "tp", rng.randint(0, 1 << 30))),
                           value=encode_value_version(v, version)))
    header, batch = split_batches(build_batch(recs))[0]
    found = [(row, names) for kind, a, names in runs.scan(records_section(header, batch), 80) if kind == runs.VALUES for row in a]
    assert len(found) == 80
    for (row, names), rec in zip(found, recs, strict=True):
        key = decode_key(rec.key)
        assert (names[0].decode(), names[1].decode(), row[0]) == (key.group, key.topic, key.partition)
        assert runs.value_of_row(row) == decode_value(key, rec.value)


def test_a_truncated_records_section_is_a_corrupt_record_error(loop):
    recs = [Record(offset=i, timestamp=T0, key=encode_key(OffsetCommitKey("g", "t", i)), value=encode_value(OffsetCommitValue(i))) for i in range(50)]
    header, batch = split_batches(build_batch(recs))[0]
    header.records_count = 60  # claims more records than it holds
    with pytest.raises(CorruptRecordError):
        ShardLoader(new_shard(loop)).add(header, batch)


# =========================================================================== through the runtime and storage
class _Quiet(StubLog):
    pass


def runtime_load(loop, path) -> ShardRuntime:
    plog = PartitionLog.open(path, LogConfig(cleanup_policy="compact", fsync="never"))

    async def go():
        rt = ShardRuntime(0, SimpleNamespace(index=0, log=plog), GroupConfig(), fsync_always=False, log=_Quiet())
        await rt.load()
        rt.close()
        return rt

    try:
        return loop.run_until_complete(go())
    finally:
        plog.close()


def test_runtime_load_from_a_log_with_a_torn_tail(loop, tmp_path):
    """A log written in small chunks (so a load reads it in several pieces), then a torn batch at
    its end as kill -9 leaves it: recovery truncates the tail, the load equals in-order replay of the rest."""
    records = mixed_records(7, kip848_records(loop))
    blobs = batches_of(records, 7)
    plog = PartitionLog.open(tmp_path, LogConfig(cleanup_policy="compact", fsync="never", segment_bytes=64 * 1024))
    for blob in blobs:
        plog.append(split_batches(blob), assign_offsets=False)
    plog.close()
    segment = sorted(tmp_path.glob("*.log"))[-1]
    with open(segment, "ab") as f:
        f.write(blobs[0][: len(blobs[0]) // 2])  # a torn batch
    (tmp_path / "clean-shutdown").unlink()
    rt = runtime_load(loop, tmp_path)
    fast = rt.shard
    _, slow = load_both(loop, blobs)
    assert state(fast) == state(slow)
    assert rt.load_stats["records"] == sum(h.records_count for b in blobs for h, _ in split_batches(b) if not h.is_control)
