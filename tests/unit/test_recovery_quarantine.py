"""Recovery truncates at the first invalid batch, moves the bytes it drops aside and says so.

Damage at several places (the first batch's header, a CRC in the middle of a
segment, a torn tail, an older segment followed by good ones, overlapping
segments, an internal topic after a clean shutdown): the records before the
damage are kept, the ``.corrupt-`` file holds exactly the bytes dropped, and
the WARNING names the partition, the offsets and the byte ranges.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from protocol.records import Record, build_batch, iter_records, read_header, split_batches
from storage import LogConfig, LogManager, PartitionLog
from storage.quarantine import CORRUPT_MARK, find_batches, readable_batches

BATCHES = 12
PER_BATCH = 3


def _batch(i: int) -> tuple:
    data = build_batch([Record(j, 1000 + i, b"k%d" % i, b"v%d-%d" % (i, j), []) for j in range(PER_BATCH)])
    return read_header(data), data


def _open(path: Path, **cfg) -> PartitionLog:
    cfg.setdefault("fsync", "never")
    return PartitionLog.open(path, LogConfig(**cfg), clock=time.time)


def _fill(path: Path, n: int = BATCHES, **cfg) -> PartitionLog:
    plog = _open(path, **cfg)
    for i in range(n):
        plog.append([_batch(i)])
    return plog


def _offsets(plog: PartitionLog) -> list[int]:
    out, offset = [], plog.log_start_offset
    while offset < plog.log_end_offset:
        batches = split_batches(plog.read(offset, 1 << 20))  # verifies the CRCs
        out += [r.offset for _, b in batches for r in iter_records(b)]
        offset = batches[-1][0].last_offset + 1
    return out


def _logs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.name.endswith(".log"))


def _aside(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if CORRUPT_MARK in p.name)


def _warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "storage.log" and r.levelno == logging.WARNING and hasattr(r, "first_offset_dropped")]


def _positions(data: bytes) -> list[int]:
    return [p for p, _ in find_batches(data)]


def _flip(p: Path, at: int, data: bytes = b"\xde\xad\xbe\xef") -> None:
    with open(p, "r+b") as f:
        f.seek(at)
        f.write(data)


@pytest.fixture
def caplog_storage(caplog):
    caplog.set_level(logging.WARNING, logger="storage.log")
    return caplog


def test_damaged_first_header_drops_the_segment_and_names_every_offset(tmp_path, caplog_storage):
    path = tmp_path / "t-0"
    _fill(path)  # no close: an unclean shutdown
    seg = _logs(path)[0]
    original = seg.read_bytes()
    _flip(seg, 8)  # the first batch's length
    damaged = seg.read_bytes()
    plog = _open(path)
    assert plog.log_end_offset == 0 and _offsets(plog) == []
    [aside] = _aside(path)
    assert aside.name.startswith("00000000000000000000.log.corrupt-")
    assert aside.read_bytes() == damaged and len(damaged) == len(original)
    assert seg.stat().st_size == 0
    [w] = _warnings(caplog_storage)
    assert w.partition == "t-0"
    assert w.first_offset_dropped == 0
    assert w.last_offset_dropped == BATCHES * PER_BATCH - 1  # the batches after the first still parse
    assert w.byte_ranges == [{"file": seg.name, "start": 0, "end": len(original)}]
    assert w.bytes_dropped == len(original)
    assert w.moved_to == [str(aside)]
    assert w.readable_batches_dropped == BATCHES - 1
    # the log goes on from where it was cut
    assert plog.append([_batch(99)]).base_offset == 0


def test_damaged_first_header_found_after_a_clean_shutdown(tmp_path, caplog_storage):
    """A clean shutdown trusts the index files, but the first batch's header is read anyway."""
    path = tmp_path / "t-0"
    plog = _fill(path, 200, index_interval_bytes=256)
    plog.close()
    seg = _logs(path)[0]
    size = seg.stat().st_size
    _flip(seg, 8, b"\x00\x00\x00\x01")  # a length below a header's
    plog = _open(path, index_interval_bytes=256)
    assert plog.log_end_offset == 0
    [w] = _warnings(caplog_storage)
    assert (w.first_offset_dropped, w.last_offset_dropped, w.bytes_dropped) == (0, 200 * PER_BATCH - 1, size)


def test_bad_crc_in_the_middle_keeps_the_batches_before_it(tmp_path, caplog_storage):
    path = tmp_path / "t-0"
    _fill(path)
    seg = _logs(path)[0]
    original = seg.read_bytes()
    positions = _positions(original)
    bad = 5
    _flip(seg, positions[bad] + 40, b"\xff")  # inside the CRC-covered part of batch 5
    damaged = seg.read_bytes()
    plog = _open(path)
    assert _offsets(plog) == list(range(bad * PER_BATCH))
    assert plog.log_end_offset == bad * PER_BATCH
    [aside] = _aside(path)
    assert aside.read_bytes() == damaged[positions[bad]:]
    assert seg.read_bytes() == original[:positions[bad]]
    [w] = _warnings(caplog_storage)
    assert w.first_offset_dropped == bad * PER_BATCH
    assert w.last_offset_dropped == BATCHES * PER_BATCH - 1
    assert w.byte_ranges == [{"file": seg.name, "start": positions[bad], "end": len(original)}]
    assert w.readable_batches_dropped == BATCHES - bad - 1 and w.readable_records_dropped == (BATCHES - bad - 1) * PER_BATCH
    # readable_batches finds the same batches in the file, for a coordinator to decode
    found = readable_batches(aside)
    assert [h.base_offset for h, _ in found] == [i * PER_BATCH for i in range(bad + 1, BATCHES)]
    assert all(len(b) == h.size for h, b in found)


def test_torn_tail_is_moved_aside(tmp_path, caplog_storage):
    path = tmp_path / "t-0"
    _fill(path)
    seg = _logs(path)[0]
    original = seg.read_bytes()
    last = _positions(original)[-1]
    with open(seg, "r+b") as f:
        f.truncate(last + 30)  # the last batch was half written
    plog = _open(path)
    assert _offsets(plog) == list(range((BATCHES - 1) * PER_BATCH))
    [aside] = _aside(path)
    assert aside.read_bytes() == original[last:last + 30]
    [w] = _warnings(caplog_storage)
    assert w.first_offset_dropped == (BATCHES - 1) * PER_BATCH
    assert w.last_offset_dropped is None  # nothing of the torn batch parses
    assert w.byte_ranges == [{"file": seg.name, "start": last, "end": last + 30}]


def test_corrupt_older_segment_drops_it_from_the_damage_on_and_every_later_one(tmp_path, caplog_storage):
    path = tmp_path / "t-0"
    plog = _fill(path, 40, segment_bytes=600)
    bases = plog.segment_base_offsets()
    assert len(bases) >= 4
    # no close: the rolled segments' index files were never written, so recovery reads them whole
    logs = _logs(path)
    contents = {p.name: p.read_bytes() for p in logs}
    positions = _positions(contents[logs[1].name])
    _flip(logs[1], positions[1] + 40, b"\xff")  # the second batch of the second segment
    damaged = logs[1].read_bytes()
    plog = _open(path, segment_bytes=600)
    cut = bases[1] + PER_BATCH
    assert plog.log_end_offset == cut
    assert _offsets(plog) == list(range(cut))
    assert [p.name for p in _logs(path)] == [logs[0].name, logs[1].name]
    aside = _aside(path)
    by_segment = {p.name.split(CORRUPT_MARK)[0]: p for p in aside}
    assert sorted(by_segment) == [p.name for p in logs[1:]]
    assert by_segment[logs[1].name].read_bytes() == damaged[positions[1]:]
    for p in logs[2:]:
        assert by_segment[p.name].read_bytes() == contents[p.name]  # moved whole
        assert not (path / p.name.replace(".log", ".index")).exists()
    [w] = _warnings(caplog_storage)
    assert w.first_offset_dropped == cut
    assert w.last_offset_dropped == 40 * PER_BATCH - 1
    assert w.byte_ranges[0] == {"file": logs[1].name, "start": positions[1], "end": len(damaged)}
    assert [r["file"] for r in w.byte_ranges[1:]] == [p.name for p in logs[2:]]
    assert w.bytes_dropped == len(damaged) - positions[1] + sum(len(contents[p.name]) for p in logs[2:])
    # appends go on from the cut, into the cut segment
    assert plog.append([_batch(0)]).base_offset == cut


def test_overlapping_segment_is_moved_aside_with_the_later_ones(tmp_path, caplog_storage):
    path = tmp_path / "t-0"
    plog = _fill(path, 20, segment_bytes=600)
    plog.close()
    logs = _logs(path)
    assert len(logs) >= 3
    # a copy of the second segment named as if it started one offset earlier: it overlaps the first
    bases = plog.segment_base_offsets()
    fake = path / f"{bases[1] - 1:020d}.log"
    fake.write_bytes(logs[1].read_bytes())
    plog = _open(path, segment_bytes=600)
    assert plog.log_end_offset == bases[1]
    [w] = _warnings(caplog_storage)
    assert w.reason == "segment overlaps its predecessor"
    assert w.first_offset_dropped == bases[1]
    assert [r["file"] for r in w.byte_ranges] == [fake.name] + [p.name for p in logs[1:]]
    assert len(_aside(path)) == len(logs)


def test_internal_topic_is_checked_whole_after_a_clean_shutdown(tmp_path, caplog_storage):
    """A user topic trusts a cleanly closed segment (as Kafka); the coordinator topics are replayed
    whole at start-up, so every batch's CRC is checked at every open."""
    for name, checked in (("__consumer_offsets-7", True), ("__transaction_state-0", True), ("__share_group_state-3", True),
                          ("__kafkalite_group_events-0", False), ("user-0", False)):
        path = tmp_path / name
        plog = _fill(path, index_interval_bytes=256)
        plog.close()
        seg = _logs(path)[0]
        positions = _positions(seg.read_bytes())
        _flip(seg, positions[4] + 40, b"\xff")
        caplog_storage.clear()
        plog = _open(path, index_interval_bytes=256)
        if checked:
            assert plog.log_end_offset == 4 * PER_BATCH
            [w] = _warnings(caplog_storage)
            assert w.partition == name and w.first_offset_dropped == 4 * PER_BATCH
        else:
            assert plog.log_end_offset == BATCHES * PER_BATCH and not _warnings(caplog_storage)


def test_moved_aside_files_are_not_segments(tmp_path):
    """Reopening, rolling, retention and compaction leave them alone; deleting the partition deletes them."""
    path = tmp_path / "t-0"
    _fill(path)
    _flip(_logs(path)[0], 8)
    plog = _open(path, segment_bytes=600, retention_bytes=700)
    [aside] = _aside(path)
    kept = aside.read_bytes()
    for i in range(30):
        plog.append([_batch(i)])
    assert plog.enforce_retention() > 0  # whole segments were deleted ...
    assert plog.size_bytes < 30 * len(_batch(0)[1])
    plog.close()
    plog = _open(path, segment_bytes=600)  # ... and a reopen finds no damage: the file is not a segment
    assert _aside(path) == [aside] and aside.read_bytes() == kept
    plog.close()
    mgr = LogManager(tmp_path, LogConfig(fsync="never"))
    mgr.open_all()
    assert mgr.delete("t", 0)
    assert not path.exists() and not any(tmp_path.iterdir())


def test_bytes_that_cannot_be_saved_are_not_dropped(tmp_path, monkeypatch):
    """If the copy cannot be written the log is not truncated: opening fails instead."""
    path = tmp_path / "t-0"
    _fill(path)
    seg = _logs(path)[0]
    _flip(seg, 8)
    damaged = seg.read_bytes()

    def no_space(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("storage.recovery.save_range", no_space)
    with pytest.raises(OSError):
        _open(path)
    assert seg.read_bytes() == damaged and not _aside(path)
    assert os.listdir(path)


def test_dump_lists_the_damaged_batch_then_the_readable_ones(tmp_path):
    """``python -m storage.dump`` on a moved-aside file: the damaged batch first (CRC BAD), then
    every batch that still parses, with its records."""
    import io

    from storage.dump import dump

    path = tmp_path / "t-0"
    _fill(path, 4)
    seg = _logs(path)[0]
    positions = _positions(seg.read_bytes())
    _flip(seg, positions[2] + 40, b"\xff")
    _open(path)
    [aside] = _aside(path)
    out = io.StringIO()
    assert dump(aside, records=True, search=True, out=out) == 2
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("position=0 base_offset=6 ") and "crc=BAD" in lines[0]
    assert lines[1].startswith(f"position={positions[3] - positions[2]} base_offset=9 ") and "crc=ok" in lines[1]
    assert [x.split()[0] for x in lines[2:5]] == ["offset=9", "offset=10", "offset=11"]
    assert "value=b'v3-0'" in lines[2]
