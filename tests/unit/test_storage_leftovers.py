"""What a full disk leaves behind: rolled segments not indexed. (Partition directories of no topic, or of
another topic id, are set aside at start and at creation: tests/unit/test_metadata_files.py.)"""

from __future__ import annotations

from protocol.records import Record, build_batch, split_batches
from storage.config import LogConfig


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
