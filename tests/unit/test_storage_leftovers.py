"""What a crash or a full disk leaves behind: partition directories of no topic, rolled segments not indexed."""

from __future__ import annotations

from protocol.records import Record, build_batch, split_batches
from storage.config import LogConfig
from storage.manager import LogManager


def _with_records(mgr: LogManager, topic: str, partition: int, n: int) -> None:
    plog = mgr.create(topic, partition)
    plog.append(split_batches(build_batch([Record(offset=i, timestamp=0, key=b"k", value=b"v", headers=[]) for i in range(n)])))
    plog.close()


def test_a_new_partition_does_not_take_over_a_left_directory(tmp_path):
    old = LogManager(tmp_path, LogConfig())
    _with_records(old, "t", 0, 5)  # a deleted topic's directory the crash left
    mgr = LogManager(tmp_path, LogConfig())
    assert mgr.create("t", 0).log_end_offset == 5  # what create alone would serve
    mgr.stop()
    mgr = LogManager(tmp_path, LogConfig())
    plog = mgr.create_new("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset) == (0, 0)
    assert mgr.create_new("t", 0) is plog  # an open log is the new partition's own: kept
    mgr.stop()


def test_leftovers_removes_deleting_directories_and_names_unknown_ones(tmp_path):
    mgr = LogManager(tmp_path, LogConfig())
    _with_records(mgr, "kept", 0, 1)
    _with_records(mgr, "gone", 0, 1)
    _with_records(mgr, "kept", 1, 1)
    (tmp_path / "x-0.0123abcd-delete").mkdir()
    (tmp_path / "meta.json").write_text("{}")
    unknown = LogManager(tmp_path, LogConfig()).leftovers(lambda t, p: t == "kept" and p == 0)
    assert unknown == ["gone-0", "kept-1"]
    assert not (tmp_path / "x-0.0123abcd-delete").exists()
    assert (tmp_path / "gone-0").is_dir()  # named, not removed


def test_rolled_segments_stay_pending_when_their_index_cannot_be_written(tmp_path, monkeypatch):
    """A full disk while a rolled segment's index files are written: it (and those rolled after it)
    are fsynced and indexed by the next flush instead of never."""
    import pytest

    from storage.log import PartitionLog
    from storage.segment import Segment

    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    for _ in range(3):
        plog.append(split_batches(build_batch([Record(offset=0, timestamp=0, key=b"k", value=b"v" * 100, headers=[])])))
        plog.roll()
    real = Segment.save_indexes
    monkeypatch.setattr(Segment, "save_indexes", lambda self, *, fsync: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError):
        plog.flush()
    monkeypatch.setattr(Segment, "save_indexes", real)
    plog.flush()
    rolled = list(plog.iter_segments())[:-1]
    assert len(rolled) == 3 and all(s.indexes_saved and s.index_path.exists() for s in rolled)
    plog.close()
