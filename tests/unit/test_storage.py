"""Unit tests of the storage engine (storage/)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from protocol.records import (
    Record,
    build_batch,
    build_end_txn_marker,
    iter_records,
    read_header,
    split_batches,
)
from storage import (
    InvalidOffsetError,
    LogConfig,
    LogManager,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
)
from storage.manager import parse_partition_dir


# --------------------------------------------------------------------------- helpers
class FakeClock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000.0

    def advance(self, ms: int) -> None:
        self.ms += ms


def mk(records: list[tuple[bytes | None, bytes | None]] | int, ts: int = 1000, **kw) -> tuple:
    """A client batch (base offset 0) of (key, value) records, all with timestamp ``ts``."""
    if isinstance(records, int):
        records = [(None, b"v%d" % i) for i in range(records)]
    base = kw.get("base_offset", 0)
    recs = [Record(base + i, ts, k, v, []) for i, (k, v) in enumerate(records)]
    data = build_batch(recs, **kw)
    return read_header(data), data


def kv(key: str, value: str | None, ts: int = 1000, **kw) -> tuple:
    return mk([(key.encode(), None if value is None else value.encode())], ts=ts, **kw)


def open_log(path: Path, clock=None, **cfg) -> PartitionLog:
    cfg.setdefault("fsync", "never")
    return PartitionLog.open(path, LogConfig(**cfg), clock=clock or time.time)


def read_all(plog: PartitionLog, start: int | None = None, max_bytes: int = 1 << 20) -> list[Record]:
    """All records from ``start`` (default log start) to the LEO, via read()."""
    offset = plog.log_start_offset if start is None else start
    out: list[Record] = []
    while offset < plog.log_end_offset:
        data = plog.read(offset, max_bytes)
        assert len(data) > 0
        batches = split_batches(data)
        for _hdr, b in batches:
            for r in iter_records(b):
                if r.offset >= offset:
                    out.append(r)
        offset = batches[-1][0].last_offset + 1
    return out


def latest_by_key(records: list[Record]) -> dict[bytes, bytes | None]:
    m: dict[bytes, bytes | None] = {}
    for r in records:
        if r.key is not None:
            m[r.key] = r.value
    return m


def seg_files(path: Path, suffix: str) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.name.endswith(suffix))


# --------------------------------------------------------------------------- append / read
def test_append_read_roundtrip(tmp_path):
    plog = open_log(tmp_path / "t-0")
    assert (plog.log_start_offset, plog.log_end_offset, plog.size_bytes) == (0, 0, 0)
    r1 = plog.append([mk(3, ts=10), mk(2, ts=30)])
    assert (r1.base_offset, r1.last_offset) == (0, 4)
    assert (r1.max_timestamp, r1.offset_of_max_timestamp, r1.log_append_time_ms) == (30, 4, -1)
    r2 = plog.append([mk(4, ts=20)])
    assert (r2.base_offset, r2.last_offset) == (5, 8)
    assert plog.log_end_offset == 9
    recs = read_all(plog)
    assert [r.offset for r in recs] == list(range(9))
    assert [r.value for r in recs] == [b"v0", b"v1", b"v2", b"v0", b"v1", b"v0", b"v1", b"v2", b"v3"]
    assert [r.timestamp for r in recs] == [10] * 3 + [30] * 2 + [20] * 4
    # the caller's buffer was not modified (offsets are patched in a copy)
    hdr, data = mk(1)
    plog.append([(hdr, data)])
    assert read_header(data).base_offset == 0
    assert plog.size_bytes == os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log")


def test_read_from_middle_of_batch_and_at_leo(tmp_path):
    plog = open_log(tmp_path / "t-0")
    plog.append([mk(3), mk(3), mk(3)])
    data = plog.read(4, 1 << 20)
    batches = split_batches(data)
    assert batches[0][0].base_offset == 3  # starts with the batch containing 4
    assert [h.base_offset for h, _ in batches] == [3, 6]
    assert plog.read(9, 100) == b""
    assert plog.read(8, 100)  # last batch
    assert split_batches(plog.read(8, 100))[0][0].base_offset == 6


def test_offset_out_of_range(tmp_path):
    plog = open_log(tmp_path / "t-0")
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(1, 100)
    assert plog.read(0, 100) == b""
    plog.append([mk(3), mk(3)])
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 100)
    with pytest.raises(OffsetOutOfRangeError) as ei:
        plog.read(7, 100)
    assert (ei.value.log_start_offset, ei.value.log_end_offset) == (0, 6)
    assert plog.delete_records_before(4) == 4
    assert plog.log_start_offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(3, 100)
    assert split_batches(plog.read(4, 100))[0][0].base_offset == 3
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(7)


def test_read_respects_max_bytes_but_returns_at_least_one_batch(tmp_path):
    plog = open_log(tmp_path / "t-0")
    big = [(None, b"x" * 1000)]
    plog.append([mk(big), mk(big), mk(big)])
    size = read_header(mk(big)[1]).size
    one = plog.read(0, 10)
    assert len(one) == size and len(split_batches(one)) == 1
    assert plog.read(0, 10, min_one=False) == b""
    two = plog.read(0, 2 * size + size // 2)
    assert len(two) == 2 * size
    assert len(plog.read(1, 1 << 20)) == 2 * size
    assert len(plog.read(0, 1 << 20)) == 3 * size


def test_append_validation(tmp_path):
    plog = open_log(tmp_path / "t-0", max_message_bytes=500)
    with pytest.raises(RecordBatchTooLargeError):
        plog.append([mk([(None, b"x" * 600)])])
    assert plog.log_end_offset == 0
    # pre-assigned offsets: must be >= LEO; gaps allowed
    plog.append([mk(2)])
    hdr, data = mk(2, base_offset=10)
    plog.append([(hdr, data)], assign_offsets=False)
    assert plog.log_end_offset == 12
    with pytest.raises(InvalidOffsetError):
        plog.append([mk(1, base_offset=11)], assign_offsets=False)
    assert [r.offset for r in read_all(plog)] == [0, 1, 10, 11]
    assert split_batches(plog.read(5, 1000))[0][0].base_offset == 10


def test_log_append_time(tmp_path):
    clock = FakeClock(5_000_000)
    plog = open_log(tmp_path / "t-0", clock=clock, message_timestamp_type="LogAppendTime")
    r = plog.append([mk(2, ts=7)])
    assert r.log_append_time_ms == 5_000_000 and r.max_timestamp == 5_000_000
    r = plog.append([mk(2, ts=7)], log_append_time_ms=6_000_000)
    assert r.log_append_time_ms == 6_000_000
    recs = read_all(plog)
    assert [x.timestamp for x in recs] == [5_000_000] * 2 + [6_000_000] * 2
    split_batches(plog.read(0, 1 << 20), verify_crc=True)  # CRCs recomputed


# --------------------------------------------------------------------------- segments
def test_roll_by_size(tmp_path):
    plog = open_log(tmp_path / "t-0", segment_bytes=300)
    size = read_header(mk(2)[1]).size
    for _ in range(20):
        plog.append([mk(2)])
    per_seg = max(1, 300 // size)
    bases = plog.segment_base_offsets()
    assert len(bases) == -(-20 // per_seg)
    assert bases == [i * per_seg * 2 for i in range(len(bases))]
    assert [r.offset for r in read_all(plog)] == list(range(40))
    for off in range(40):
        hdr = split_batches(plog.read(off, 1))[0][0]
        assert hdr.base_offset <= off <= hdr.last_offset
    assert len(seg_files(tmp_path / "t-0", ".log")) == len(bases)
    # a single append larger than segment.bytes still goes into one (fresh) segment
    plog.append([mk([(None, b"y" * 500)])])
    assert plog.segment_base_offsets()[-1] == 40


def test_roll_by_time(tmp_path):
    clock = FakeClock()
    plog = open_log(tmp_path / "t-0", clock=clock, segment_ms=1000)
    plog.append([mk(1)])
    clock.advance(500)
    plog.append([mk(1)])
    assert plog.segment_base_offsets() == [0]
    clock.advance(501)
    plog.append([mk(1)])
    assert plog.segment_base_offsets() == [0, 2]
    clock.advance(2000)
    assert plog.segment_base_offsets() == [0, 2]  # rolls only on append
    plog.append([mk(1)])
    assert plog.segment_base_offsets() == [0, 2, 3]


def test_roll_when_index_full(tmp_path):
    plog = open_log(tmp_path / "t-0", index_interval_bytes=0, segment_index_bytes=24)  # 2 time entries
    for _ in range(10):
        plog.append([mk(1, ts=int(time.time() * 1000))])
    assert len(plog.segment_base_offsets()) > 1
    assert [r.offset for r in read_all(plog)] == list(range(10))


def test_index_rebuild_after_deleting_index_files(tmp_path):
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=2000, index_interval_bytes=100)
    for i in range(60):
        plog.append([mk(3, ts=1000 + i)])
    plog.close()
    assert len(seg_files(path, ".index")) > 2
    expected = None
    plog = open_log(path, segment_bytes=2000, index_interval_bytes=100)
    expected = [(r.offset, r.value) for r in read_all(plog)]
    plog.close()
    for p in seg_files(path, ".index")[:2] + seg_files(path, ".timeindex")[1:3]:
        p.unlink()
    idx = seg_files(path, ".index")[0]
    idx.write_bytes(idx.read_bytes()[:-3])  # corrupt (not a multiple of the entry size)
    plog = open_log(path, segment_bytes=2000, index_interval_bytes=100)
    assert plog.log_end_offset == 180
    assert [(r.offset, r.value) for r in read_all(plog)] == expected
    for off in range(0, 180, 7):
        hdr = split_batches(plog.read(off, 1))[0][0]
        assert hdr.base_offset <= off <= hdr.last_offset
    assert plog.offset_for_timestamp(1030) == (90, 1030)
    plog.flush()  # persists rebuilt indexes of non-active segments
    plog.close()
    assert len(seg_files(path, ".index")) == len(seg_files(path, ".log"))
    assert all(p.stat().st_size > 0 for p in seg_files(path, ".index")[:-1])


@pytest.mark.parametrize("damage", ["chop", "garbage", "crc", "chop_header"])
def test_recovery_truncates_torn_tail(tmp_path, damage):
    path = tmp_path / "t-0"
    plog = open_log(path)
    for i in range(10):
        plog.append([mk([(b"k%d" % i, b"v%d" % i)] * 2)])
    # simulate kill -9: no close(); the data already reached the OS
    log_file = seg_files(path, ".log")[-1]
    size = log_file.stat().st_size
    batch_size = size // 10
    with open(log_file, "r+b") as f:
        if damage == "chop":
            f.truncate(size - 7)
        elif damage == "chop_header":
            f.truncate(size - batch_size + 30)
        elif damage == "garbage":
            f.seek(size)
            f.write(os.urandom(100))
        elif damage == "crc":
            f.seek(size - 3)
            b = f.read(1)
            f.seek(size - 3)
            f.write(bytes([b[0] ^ 0xFF]))
    plog2 = open_log(path)
    want = 20 if damage == "garbage" else 18
    assert plog2.log_end_offset == want
    assert log_file.stat().st_size == batch_size * (want // 2)
    r = plog2.append([mk([(b"new", b"x")])])
    assert r.base_offset == want
    recs = read_all(plog2)
    assert [x.offset for x in recs] == list(range(want + 1))
    assert recs[-1].key == b"new"


def test_recovery_of_corrupt_middle_segment_drops_later_segments(tmp_path):
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=400)
    for _ in range(20):
        plog.append([mk(1)])
    # crash without close: rolled segments have no persisted index -> they get fully checked
    logs = seg_files(path, ".log")
    assert len(logs) >= 3
    with open(logs[1], "r+b") as f:
        f.seek(30)  # inside the CRC-covered part of the segment's first batch
        f.write(b"\xff\xff")
    plog2 = open_log(path, segment_bytes=400)
    first_seg_records = plog.segment_base_offsets()[1]
    assert plog2.log_end_offset == first_seg_records
    assert len(seg_files(path, ".log")) == 2
    assert [r.offset for r in read_all(plog2)] == list(range(first_seg_records))
    plog2.append([mk(1)])
    assert plog2.log_end_offset == first_seg_records + 1


def test_reopen_after_clean_close(tmp_path):
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=500)
    for i in range(30):
        plog.append([kv("k%d" % i, "v%d" % i, ts=100 + i)])
    before = [(r.offset, r.key, r.value, r.timestamp) for r in read_all(plog)]
    bases = plog.segment_base_offsets()
    plog.close()
    plog = open_log(path, segment_bytes=500)
    assert plog.log_end_offset == 30
    assert plog.segment_base_offsets() == bases
    assert [(r.offset, r.key, r.value, r.timestamp) for r in read_all(plog)] == before
    assert plog.max_timestamp() == (129, 29)
    assert plog.append([mk(1)]).base_offset == 30
    plog.close()
    plog.close()  # idempotent


def test_delete_records_before_persists_and_truncate_to(tmp_path):
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=300)
    for _ in range(10):
        plog.append([mk(2)])
    plog.delete_records_before(7)
    assert plog.segment_base_offsets()[0] <= 7
    plog.close()
    plog = open_log(path, segment_bytes=300)
    assert plog.log_start_offset == 7
    assert plog.truncate_to(13) == 12  # batch [12, 13] removed entirely
    assert plog.log_end_offset == 12
    assert [r.offset for r in read_all(plog)] == list(range(7, 12))
    assert plog.append([mk(1)]).base_offset == 12
    plog.close()
    plog = open_log(path, segment_bytes=300)
    assert (plog.log_start_offset, plog.log_end_offset) == (7, 13)
    plog.delete_records_before(13)
    assert (plog.log_start_offset, plog.log_end_offset) == (13, 13)
    assert plog.read(13, 100) == b""
    assert plog.append([mk(1)]).base_offset == 13


# --------------------------------------------------------------------------- timestamps
def test_offset_for_timestamp_and_max_timestamp(tmp_path):
    plog = open_log(tmp_path / "t-0", segment_bytes=400, index_interval_bytes=0)
    assert plog.offset_for_timestamp(0) is None
    assert plog.max_timestamp() is None
    # batches with per-record timestamps, not monotonic across batches
    stamps = [[100, 105], [103, 110], [90, 95], [200, 150], [120, 121], [300, 130], [140, 141]]
    for ts_list in stamps:
        recs = [Record(i, t, None, b"x", []) for i, t in enumerate(ts_list)]
        data = build_batch(recs)
        plog.append([(read_header(data), data)])
    flat = [t for ts_list in stamps for t in ts_list]

    def expected(target):
        for off, t in enumerate(flat):
            if t >= target:
                return off, t
        return None

    for target in [0, 90, 100, 101, 104, 105, 106, 110, 111, 150, 151, 200, 201, 300, 301]:
        assert plog.offset_for_timestamp(target) == expected(target), target
    assert plog.max_timestamp() == (300, 10)
    plog.close()
    plog = open_log(tmp_path / "t-0", segment_bytes=400, index_interval_bytes=0)
    for target in [0, 104, 111, 201, 300, 301]:
        assert plog.offset_for_timestamp(target) == expected(target), target
    assert plog.max_timestamp() == (300, 10)


# --------------------------------------------------------------------------- retention
def test_retention_by_size(tmp_path):
    plog = open_log(tmp_path / "t-0", segment_bytes=400, retention_bytes=1000, retention_ms=-1)
    for _ in range(40):
        plog.append([mk(1)])
    total = plog.size_bytes
    n_segs = len(plog.segment_base_offsets())
    deleted = plog.enforce_retention()
    assert deleted > 0
    assert 1000 <= plog.size_bytes < 1000 + 400  # Kafka: never below retention.bytes
    assert len(plog.segment_base_offsets()) == n_segs - deleted
    assert plog.log_start_offset == plog.segment_base_offsets()[0] > 0
    assert len(seg_files(tmp_path / "t-0", ".log")) == n_segs - deleted
    assert plog.log_end_offset == 40
    assert [r.offset for r in read_all(plog)] == list(range(plog.log_start_offset, 40))
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(0, 100)
    assert total > 1000
    assert plog.enforce_retention() == 0


def test_retention_by_time(tmp_path):
    clock = FakeClock()
    now = clock.ms
    plog = open_log(tmp_path / "t-0", clock=clock, segment_bytes=300, retention_ms=10_000)
    for i in range(12):
        plog.append([mk(1, ts=now - 20_000 + i)])  # old
    old_end = plog.log_end_offset
    for _ in range(6):
        plog.append([mk(1, ts=now)])  # fresh
    deleted = plog.enforce_retention(now)
    assert deleted > 0
    assert plog.log_start_offset <= old_end
    assert all(r.timestamp == now for r in read_all(plog) if r.offset >= old_end)
    # everything expires: the active segment is deleted too after rolling a new one
    assert plog.enforce_retention(now + 60_000) > 0
    assert plog.log_start_offset == plog.log_end_offset == 18
    assert plog.read(18, 100) == b""
    assert plog.append([mk(1, ts=now)]).base_offset == 18
    # cleanup.policy=compact never deletes
    plog2 = open_log(tmp_path / "c-0", clock=clock, retention_ms=1, cleanup_policy="compact")
    plog2.append([mk(1, ts=1)])
    assert plog2.enforce_retention(now) == 0


# --------------------------------------------------------------------------- compaction
def _compacted_log(tmp_path, clock=None, **cfg):
    cfg.setdefault("segment_bytes", 400)
    cfg.setdefault("cleanup_policy", "compact")
    return open_log(tmp_path / "c-0", clock=clock, **cfg)


def test_compaction_keeps_latest_per_key_and_offsets(tmp_path):
    plog = _compacted_log(tmp_path)
    expected: dict[bytes, tuple[int, bytes]] = {}
    for i in range(60):
        k = "k%d" % (i % 5)
        r = plog.append([kv(k, "v%d" % i, ts=1000 + i)])
        expected[k.encode()] = (r.base_offset, b"v%d" % i)
    # a batch with several records, some of them superseded later
    r = plog.append([mk([(b"a", b"1"), (b"b", b"1"), (None, b"nokey")], ts=2000)])
    null_key_offset = r.last_offset
    plog.append([kv("a", "2", ts=2001)])
    for i in range(20):
        plog.append([kv("z%d" % i, "tail", ts=3000)])  # push the rest out of the active segment
    before = read_all(plog)
    size_before = plog.size_bytes
    active_base = plog.segment_base_offsets()[-1]
    assert plog.needs_compaction()
    stats = plog.compact()
    assert stats is not None and not stats.aborted
    after = read_all(plog)
    assert plog.size_bytes < size_before
    assert latest_by_key(after) == latest_by_key(before)
    # offsets are preserved and strictly increasing
    offs = [r.offset for r in after]
    assert offs == sorted(set(offs))
    by_offset = {r.offset: r for r in before}
    for r in after:
        assert (by_offset[r.offset].key, by_offset[r.offset].value, by_offset[r.offset].timestamp) == (
            r.key, r.value, r.timestamp)
    # in the cleaned part each key appears once
    cleaned_keys = [r.key for r in after if r.offset < active_base and r.key is not None]
    assert len(cleaned_keys) == len(set(cleaned_keys))
    assert null_key_offset in offs  # null-key records are kept
    assert plog.log_end_offset == before[-1].offset + 1
    assert not plog.needs_compaction()
    # survives reopen; appends continue
    leo = plog.log_end_offset
    plog.close()
    plog = _compacted_log(tmp_path)
    assert [(r.offset, r.key, r.value) for r in read_all(plog)] == [(r.offset, r.key, r.value) for r in after]
    assert plog.append([kv("k0", "new")]).base_offset == leo
    # reading from a removed offset returns the next batch
    first_gap = next(o for o in range(leo) if o not in set(offs))
    assert split_batches(plog.read(first_gap, 1))[0][0].last_offset >= first_gap


def test_compaction_preserves_batch_attributes(tmp_path):
    plog = _compacted_log(tmp_path, segment_bytes=1000)
    recs = [(b"x", b"1"), (b"y", b"1"), (b"x", b"2")]
    plog.append([mk(recs, ts=50, compression=1, producer_id=7, producer_epoch=3, base_sequence=0)])
    for i in range(30):
        plog.append([kv("f%d" % i, "x" * 20)])
    plog.compact()
    hdr, b = split_batches(plog.read(0, 1))[0]
    assert (hdr.base_offset, hdr.compression, hdr.producer_id, hdr.producer_epoch, hdr.base_sequence) == (
        0, 1, 7, 3, 0)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(b)] == [(1, b"y", b"1", 50), (2, b"x", b"2", 50)]


def test_compaction_tombstones_respect_delete_retention(tmp_path):
    clock = FakeClock()
    plog = _compacted_log(tmp_path, clock=clock, delete_retention_ms=10_000)
    plog.append([kv("gone", "v1")])
    plog.append([kv("keep", "v1")])
    plog.append([kv("gone", None)])  # tombstone
    for i in range(20):
        plog.append([kv("f%d" % i, "x" * 20)])
    t0 = clock.ms
    plog.compact(t0)
    recs = read_all(plog)
    gone = [r for r in recs if r.key == b"gone"]
    assert len(gone) == 1 and gone[0].value is None and gone[0].offset == 2  # tombstone kept
    plog.compact(t0 + 9_999)
    assert [r.value for r in read_all(plog) if r.key == b"gone"] == [None]
    assert plog.needs_compaction(t0 + 10_000)  # horizon passed -> cleanable again
    plog.compact(t0 + 10_000)
    recs = read_all(plog)
    assert [r for r in recs if r.key == b"gone"] == []
    assert [r.value for r in recs if r.key == b"keep"] == [b"v1"]


def test_compaction_min_lag_and_dirty_ratio(tmp_path):
    clock = FakeClock()
    plog = _compacted_log(tmp_path, clock=clock, min_compaction_lag_ms=60_000)
    for i in range(30):
        plog.append([kv("k", "v%d" % i, ts=clock.ms)])
    assert not plog.needs_compaction(clock.ms)
    assert plog.compact(clock.ms) is None
    clock.advance(120_000)
    assert plog.needs_compaction(clock.ms)
    active_base = plog.segment_base_offsets()[-1]
    plog.compact(clock.ms)
    recs = read_all(plog)
    # Kafka's cleaner maps keys below the active segment only: there the latest value of k stays
    assert [r.offset for r in recs if r.offset < active_base] == [active_base - 1]
    assert recs[-1].value == b"v29"


def test_compaction_transactions(tmp_path):
    plog = _compacted_log(tmp_path, segment_bytes=600)
    plog.append([mk([(b"a", b"idempotent")], producer_id=9, producer_epoch=0, base_sequence=0)])
    plog.append([kv("a", "committed-old")])
    plog.append([kv("b", "keep-b")])
    # aborted transaction writing a and b
    plog.append([mk([(b"a", b"aborted"), (b"b", b"aborted")], producer_id=5, producer_epoch=0,
                    base_sequence=0, is_transactional=True)])
    m = build_end_txn_marker(commit=False, producer_id=5, producer_epoch=0, coordinator_epoch=0, timestamp=1000)
    plog.append([(read_header(m), m)])
    # committed transaction writing a
    plog.append([mk([(b"a", b"committed-new")], producer_id=6, producer_epoch=0, base_sequence=0,
                    is_transactional=True)])
    m = build_end_txn_marker(commit=True, producer_id=6, producer_epoch=0, coordinator_epoch=0, timestamp=1000)
    plog.append([(read_header(m), m)])
    for i in range(20):
        plog.append([kv("f%d" % i, "x" * 20)])
    plog.compact()
    recs = read_all(plog)
    data_recs = [r for r in recs if r.key in (b"a", b"b")]
    assert [(r.key, r.value) for r in data_recs] == [(b"b", b"keep-b"), (b"a", b"committed-new")]
    # control batches survive, and so does an (emptied) last batch of an idempotent producer
    headers = [h for h, _ in split_batches(plog.read(0, 1 << 20))]
    assert sum(1 for h in headers if h.is_control) == 2
    assert [(h.base_offset, h.records_count, h.base_sequence) for h in headers if h.producer_id == 9] == [(0, 0, 0)]
    # the aborted batch's records are gone; it was producer 5's last data batch: kept empty, as
    # Kafka's cleaner keeps it (it holds the producer's last sequence number)
    assert [(h.records_count, h.last_offset_delta) for h in headers if h.producer_id == 5 and not h.is_control] == [(0, 1)]


class SimulatedCrash(BaseException):
    pass


@pytest.mark.parametrize("stage", ["cleaned", "swap", "deleted"])
def test_crash_during_compaction_leaves_valid_log(tmp_path, stage):
    plog = _compacted_log(tmp_path)
    for i in range(80):
        plog.append([kv("k%d" % (i % 4), "v%d" % i)])
    before = read_all(plog)
    leo = plog.log_end_offset

    def hook(s):
        if s == stage:
            raise SimulatedCrash(s)

    plog._crash_hook = hook
    with pytest.raises(SimulatedCrash):
        plog.compact()
    names = os.listdir(tmp_path / "c-0")
    if stage == "cleaned":
        assert any(n.endswith(".cleaned") for n in names)
    else:
        assert any(n.endswith(".swap") for n in names)
    # "crash": reopen from disk without closing the old instance
    plog2 = _compacted_log(tmp_path)
    names = os.listdir(tmp_path / "c-0")
    assert not any(n.endswith((".cleaned", ".swap", ".tmp")) for n in names)
    after = read_all(plog2)
    assert plog2.log_end_offset == leo
    assert latest_by_key(after) == latest_by_key(before)
    offs = [r.offset for r in after]
    assert offs == sorted(set(offs))
    if stage != "cleaned":
        assert len(after) < len(before)  # the swap was completed
    else:
        assert [r.offset for r in after] == [r.offset for r in before]
    # a second compaction after recovery works
    plog2.flush()
    plog2.compact()
    assert latest_by_key(read_all(plog2)) == latest_by_key(before)


def test_leftover_temp_files_are_cleaned_on_open(tmp_path):
    path = tmp_path / "c-0"
    plog = _compacted_log(tmp_path)
    for i in range(30):
        plog.append([kv("k%d" % (i % 3), "v%d" % i)])
    plog.close()
    (path / "00000000000000000000-00000000000000000010.cleaned").write_bytes(os.urandom(500))
    (path / "00000000000000000000.index.tmp").write_bytes(b"junk")
    (path / "00000000000000099999.index").write_bytes(b"orphan")
    plog = _compacted_log(tmp_path)
    assert plog.log_end_offset == 30
    assert len(read_all(plog)) == 30
    assert sorted(n for n in os.listdir(path) if not n.endswith((".log", ".index", ".timeindex"))) == []
    assert not (path / "00000000000000099999.index").exists()


def test_background_compaction_while_appending(tmp_path):
    cfg = LogConfig(segment_bytes=2000, cleanup_policy="compact", fsync="interval", fsync_interval_ms=5,
                    min_cleanable_dirty_ratio=0.01)
    mgr = LogManager(tmp_path / "data", cfg, maintenance_interval_s=0.002)
    plog = mgr.create("__consumer_offsets", 0)
    mgr.start_background()
    latest: dict[bytes, bytes] = {}
    errors: list[BaseException] = []
    try:
        deadline = time.time() + 3.0
        i = 0
        while i < 3000 and time.time() < deadline:
            k = b"key%d" % (i % 37)
            v = b"value-%d" % i
            plog.append([mk([(k, v)])])
            latest[k] = v
            if i % 97 == 0:
                # reads must keep working while segments are swapped underneath
                read_all(plog, start=plog.log_start_offset)
            i += 1
            if i % 200 == 0:
                time.sleep(0.01)  # give the maintenance thread some GIL time
    except BaseException as e:  # pragma: no cover - reported below
        errors.append(e)
    finally:
        mgr.stop()
    assert not errors
    assert plog.closed
    mgr2 = LogManager(tmp_path / "data", cfg)
    logs = mgr2.open_all()
    plog2 = logs[("__consumer_offsets", 0)]
    assert plog2.log_end_offset == i
    recs = read_all(plog2)
    assert latest_by_key(recs) == latest
    assert len(recs) < i  # some compaction happened
    offs = [r.offset for r in recs]
    assert offs == sorted(set(offs))
    mgr2.stop()


# --------------------------------------------------------------------------- manager
def test_manager_open_all_create_delete(tmp_path):
    clock = FakeClock()
    mgr = LogManager(tmp_path, LogConfig(fsync="never"), clock=clock)
    a = mgr.create("my.topic-with_dash-es", 3)
    b = mgr.create("other", 0, LogConfig(segment_bytes=300, fsync="never", retention_bytes=0))
    assert mgr.create("other", 0) is b
    a.append([mk(2)])
    for _ in range(10):
        b.append([mk(1)])
    mgr.run_maintenance_once(clock.ms)  # retention.bytes=0 deletes everything old
    assert b.log_start_offset > 0
    mgr.stop()
    (tmp_path / "not-a-partition").mkdir()
    (tmp_path / "stale-0.abc-delete").mkdir()
    mgr = LogManager(tmp_path, LogConfig(fsync="never"), clock=clock)
    logs = mgr.open_all()
    assert set(logs) == {("my.topic-with_dash-es", 3), ("other", 0)}
    assert logs[("my.topic-with_dash-es", 3)].log_end_offset == 2
    assert not (tmp_path / "stale-0.abc-delete").exists()
    assert mgr.delete("my.topic-with_dash-es", 3)
    assert mgr.get("my.topic-with_dash-es", 3) is None
    assert not any(p.name.startswith("my.topic") for p in tmp_path.iterdir())
    mgr.stop()


def test_parse_partition_dir():
    assert parse_partition_dir("a-b-c-12") == ("a-b-c", 12)
    assert parse_partition_dir("__consumer_offsets-49") == ("__consumer_offsets", 49)
    assert parse_partition_dir("topic") is None
    assert parse_partition_dir("topic-x") is None
    assert parse_partition_dir("-3") is None


# --------------------------------------------------------------------------- config
def test_config_defaults_and_kafka_names():
    c = LogConfig()
    k = c.to_kafka()
    assert k["segment.bytes"] == "1073741824"
    assert k["retention.ms"] == "604800000"
    assert k["cleanup.policy"] == "delete"
    assert k["min.cleanable.dirty.ratio"] == "0.5"
    assert k["max.message.bytes"] == "1048588"
    assert k["message.timestamp.type"] == "CreateTime"
    assert k["min.insync.replicas"] == "1"
    assert "kafkalite.fsync" not in k
    c2 = LogConfig.from_kafka(
        {"segment.bytes": "1048576", "retention.ms": "-1", "cleanup.policy": "delete,compact",
         "min.insync.replicas": "2", "compression.type": "ZSTD", "kafkalite.fsync": "always"},
        c,
    )
    assert (c2.segment_bytes, c2.retention_ms, c2.cleanup_policy, c2.fsync) == (1048576, -1, "compact,delete", "always")
    assert c2.compact and c2.delete
    k2 = c2.to_kafka()
    assert k2["min.insync.replicas"] == "2" and k2["compression.type"] == "zstd"
    assert LogConfig.from_kafka(k2, c) == c2 or LogConfig.from_kafka(k2, c).to_kafka() == k2
    assert c.segment_bytes == 1073741824  # base untouched
    c3 = LogConfig.from_kafka({"retention.ms": None, "min.insync.replicas": None}, c2)
    assert c3.retention_ms == c2.retention_ms and "min.insync.replicas" not in c3.extra


@pytest.mark.parametrize(
    "key,value",
    [
        ("no.such.config", "1"),
        ("segment.bytes", "abc"),
        ("segment.bytes", "3"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "delete,nope"),
        ("cleanup.policy", ""),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("message.timestamp.type", "Whenever"),
        ("min.insync.replicas", "0"),
        ("unclean.leader.election.enable", "yes"),
        ("compression.type", "brotli"),
        ("kafkalite.fsync", "sometimes"),
        ("segment.bytes", "99999999999"),
    ],
)
def test_config_rejects_bad_values(key, value):
    with pytest.raises(ValueError):
        LogConfig.from_kafka({key: value}, LogConfig())


def test_config_validates_fields():
    with pytest.raises(ValueError):
        LogConfig(cleanup_policy="bogus")
    with pytest.raises(ValueError):
        LogConfig(fsync="maybe")
    assert LogConfig(cleanup_policy="delete,compact").cleanup_policy == "compact,delete"


def test_flush_policies(tmp_path):
    clock = FakeClock()
    plog = open_log(tmp_path / "a-0", clock=clock, fsync="interval", fsync_interval_ms=100, segment_bytes=300)
    for _ in range(10):
        plog.append([mk(1)])
    seg = list(plog.iter_segments())[-1]
    assert seg.flushed_size < seg.size
    plog.flush_if_due(clock.ms + 50)
    assert seg.flushed_size < seg.size
    plog.flush_if_due(clock.ms + 150)
    assert seg.flushed_size == seg.size
    assert all(s.indexes_saved for s in list(plog.iter_segments())[:-1])
    plog2 = open_log(tmp_path / "b-0", fsync="always")
    plog2.append([mk(1)])
    seg2 = list(plog2.iter_segments())[-1]
    assert seg2.flushed_size == seg2.size
    plog.delete()
    assert not (tmp_path / "a-0").exists()


def test_clean_shutdown_marker(tmp_path):
    path = tmp_path / "t-0"
    plog = open_log(path, index_interval_bytes=200)
    for _ in range(50):
        plog.append([mk(2)])
    plog.close()
    assert (path / "clean-shutdown").exists()
    plog = open_log(path, index_interval_bytes=200)
    assert not (path / "clean-shutdown").exists()  # a crash from now on triggers full recovery
    assert plog.log_end_offset == 100
    assert [r.offset for r in read_all(plog)] == list(range(100))
    plog.close()
    # even with the marker, a damaged tail is detected and truncated
    log_file = seg_files(path, ".log")[-1]
    with open(log_file, "r+b") as f:
        f.truncate(log_file.stat().st_size - 5)
    plog = open_log(path, index_interval_bytes=200)
    assert plog.log_end_offset == 98
    assert plog.append([mk(1)]).base_offset == 98


# --------------------------------------------------------------------------- closing idle logs
def test_closing_a_never_written_log_syncs_nothing_and_reopens_empty(tmp_path, monkeypatch):
    """Thousands of new, idle partitions must close quickly: nothing to make durable, no marker."""
    import storage.log as log_mod
    import storage.log_durability as durability_mod
    import storage.segment as seg_mod

    mgr = LogManager(tmp_path, LogConfig(fsync="interval"))
    logs = [mgr.create("idle", p) for p in range(20)]
    fds = [next(iter(plog.iter_segments())).fh for plog in logs]
    syncs = []
    for mod in (log_mod, durability_mod):
        monkeypatch.setattr(mod, "_fsync_dir", lambda p: syncs.append(p))
    monkeypatch.setattr(seg_mod, "_fdatasync", lambda fd: syncs.append(fd))
    mgr.stop()
    assert syncs == []
    assert all(plog.closed for plog in logs) and all(fh.closed for fh in fds)
    assert not any((tmp_path / f"idle-{p}" / "clean-shutdown").exists() for p in range(20))
    monkeypatch.undo()
    plog = open_log(tmp_path / "idle-3")
    assert (plog.log_start_offset, plog.log_end_offset) == (0, 0)
    plog.append([mk(3)])
    plog.close()
    assert (tmp_path / "idle-3" / "clean-shutdown").exists()  # written logs still close cleanly
    plog = open_log(tmp_path / "idle-3")
    assert [r.offset for r in read_all(plog)] == [0, 1, 2]
    plog.close()


def test_an_emptied_log_past_offset_zero_still_closes_cleanly(tmp_path):
    path = tmp_path / "moved-0"
    plog = open_log(path)
    plog.append([mk(4)])
    plog.delete_records_before(4)  # now one empty segment based at 4: its offsets must survive
    plog.close()
    assert (path / "clean-shutdown").exists()
    plog = open_log(path)
    assert (plog.log_start_offset, plog.log_end_offset) == (4, 4)
    plog.close()


def test_maintenance_syncs_a_new_log_directory_only_once_it_holds_data(tmp_path, monkeypatch):
    import storage.log as log_mod
    import storage.log_durability as durability_mod

    synced = []
    for mod in (log_mod, durability_mod):
        monkeypatch.setattr(mod, "_fsync_dir", lambda p: synced.append(p))
    mgr = LogManager(tmp_path, LogConfig(fsync="interval"))
    plog = mgr.create("fresh", 0)
    mgr.run_maintenance_once()
    assert synced == []  # nothing kept yet: no fsync per new partition
    plog.append([mk(1)])
    mgr.run_maintenance_once()
    assert synced == [plog.path]  # the segment file's entry is made durable with the first data
    mgr.run_maintenance_once()
    assert synced == [plog.path]
    monkeypatch.undo()
    mgr.stop()


def test_the_first_retention_check_waits_for_the_initial_task_delay(tmp_path):
    """Kafka's LogManager runs its first retention check log.initial.task.delay.ms (30 s) after start: records
    stamped long ago (librdkafka's 0053 produces with timestamp 0) survive a broker's first half minute."""
    clock = FakeClock()
    mgr = LogManager(tmp_path, LogConfig(fsync="never", retention_ms=1000), clock=clock, initial_task_delay_ms=30_000,
                     retention_check_interval_ms=300_000)
    plog = mgr.create("old", 0)
    plog.append([mk([(b"k", b"v")], ts=0)])
    mgr.run_maintenance_once()  # the background tick, right after start
    assert plog.log_start_offset == 0 and plog.log_end_offset == 1
    clock.advance(29_900)
    mgr.run_maintenance_once()
    assert plog.log_start_offset == 0
    clock.advance(200)  # 30 s after start: the first check, and timestamp 0 is long past retention.ms
    mgr.run_maintenance_once()
    assert plog.log_start_offset == 1 == plog.log_end_offset
    mgr.stop()


@pytest.mark.parametrize("index_interval", [1, 700, 4096, 1 << 20])
def test_read_region_returns_what_read_returns(tmp_path, monkeypatch, index_interval):
    """``read_region`` finds the batches to send from their headers (starting where the offset
    index says) without reading them: the same bytes as ``read`` for any offset, size and bound."""
    import random

    import storage.log
    from storage.segment import FileRegion
    from storage.txn import batches_last_offset

    monkeypatch.setattr(storage.log, "FILE_REGION_MIN", 1)  # a region wherever there is one
    rng = random.Random(index_interval)
    plog = open_log(tmp_path / "t-0", segment_bytes=40_000, index_interval_bytes=index_interval)
    for _ in range(120):
        plog.append([mk([(None, b"x" * rng.randrange(1, 3000)) for _ in range(rng.randrange(1, 8))])])
    assert len(plog.segment_base_offsets()) > 3
    leo = plog.log_end_offset
    regions = 0
    for _ in range(600):
        offset = rng.randrange(leo)
        max_bytes = rng.choice([0, 1, 100, rng.randrange(20_000), rng.randrange(100_000)])
        min_one = rng.random() < 0.7
        upto = rng.choice([None, rng.randrange(leo + 1)])
        want = plog.read(offset, max_bytes, min_one=min_one, upto=upto)
        got = plog.read_region(offset, max_bytes, min_one=min_one, upto=upto)
        if type(got) is FileRegion:
            regions += 1
            assert got.last_offset == batches_last_offset(want)
            got = got.read()
        assert bytes(got) == bytes(want), (offset, max_bytes, min_one, upto)
    assert regions > 300


def test_a_pinned_region_keeps_its_file_open_past_close(tmp_path):
    """A FileRegion waiting to be sent pins its file (``FileHandle.use``): the log may close it
    meanwhile (a topic deleted, a segment removed), and the region still reads the bytes; the
    descriptor closes with the last region released, and only then."""
    from storage.segment import FileHandle, FileRegion

    path = tmp_path / "f"
    path.write_bytes(b"0123456789" * 10)
    fh = FileHandle(os.open(path, os.O_RDONLY))
    a, b = FileRegion(fh, 10, 20, 0), FileRegion(fh, 50, 5, 0)
    a.pin()
    b.pin()
    b.pin()  # once only
    assert fh.users == 2
    fh.close()
    path.unlink()
    assert fh.closed
    os.fstat(fh.fd)  # still open
    assert a.read() == b"0123456789" * 2 and a.read(3) == b"012" and b.read(100) == b"01234"
    a.release()
    a.release()  # once only
    os.fstat(fh.fd)
    b.release()
    assert fh.users == 0
    with pytest.raises(OSError):
        os.fstat(fh.fd)
    fh.close()  # closed already: nothing happens

    fh2 = FileHandle(os.open(tmp_path, os.O_RDONLY))
    fh2.close()  # no region: closed at once
    with pytest.raises(OSError):
        os.fstat(fh2.fd)
