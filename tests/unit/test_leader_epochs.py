"""A partition's leader epochs (storage/leader_epochs.py) and how the log keeps them."""

from __future__ import annotations

import pytest

from protocol.records import Record, build_batch, split_batches
from storage.config import LogConfig
from storage.leader_epochs import FILE, LeaderEpochs, latest_leader_epoch
from storage.log import PartitionLog


def _epochs(directory, entries=()):
    directory.mkdir(parents=True, exist_ok=True)
    e = LeaderEpochs(directory, fsync=False)
    for epoch, start in entries:
        e.assign(epoch, start)
    return e


def test_end_offsets_follow_kafkas_rules(tmp_path):
    e = _epochs(tmp_path, [(2, 10), (5, 30)])
    leo = 42
    assert e.end_offset_for(5, 5, leo) == (5, 42)  # the current epoch ends at the log end
    assert e.end_offset_for(2, 5, leo) == (2, 30)  # an earlier one where the next began
    assert e.end_offset_for(3, 5, leo) == (2, 30)  # one that never wrote: the last before it, ending there
    assert e.end_offset_for(1, 5, leo) == (1, 10)  # older than any kept (epoch 0 and 1 are not written down)
    assert e.end_offset_for(0, 5, leo) == (0, 10)
    assert e.end_offset_for(6, 5, leo) == (-1, -1)  # later than the leader's
    assert e.end_offset_for(-1, 5, leo) == (-1, -1)


def test_the_current_epoch_counts_before_it_has_written(tmp_path):
    e = _epochs(tmp_path, [(2, 10)])
    assert e.end_offset_for(7, 7, 15) == (7, 15)
    assert e.end_offset_for(2, 7, 15) == (2, 15)  # epoch 2 ended where epoch 7 begins: the log end
    assert _epochs(tmp_path / "none").end_offset_for(0, 0, 9) == (0, 9)  # a single node: epoch 0 for ever


def test_epoch_at_an_offset(tmp_path):
    e = _epochs(tmp_path, [(2, 10), (5, 30)])
    assert [e.epoch_at(o, 6, 40) for o in (0, 9, 10, 29, 30, 39, 40)] == [0, 0, 2, 2, 5, 5, 6]


def test_only_newer_epochs_are_assigned_and_the_file_survives_a_reopen(tmp_path):
    d = tmp_path / "t-0"
    e = _epochs(d, [(3, 5)])
    e.assign(3, 9)
    e.assign(2, 9)
    e.assign(0, 0)
    assert e.entries == [(3, 5)]
    e.assign(4, 9)
    assert (d / FILE).read_text() == "0\n2\n3 5\n4 9\n"  # Kafka's checkpoint format
    assert LeaderEpochs(d, fsync=False).entries == [(3, 5), (4, 9)]
    assert latest_leader_epoch(tmp_path) == 4


def test_truncation_drops_the_epochs_that_began_at_or_after_the_new_end(tmp_path):
    e = _epochs(tmp_path, [(1, 0), (2, 10), (3, 20)])
    e.truncate_from_end(20)
    assert e.entries == [(1, 0), (2, 10)]
    assert LeaderEpochs(tmp_path, fsync=False).entries == [(1, 0), (2, 10)]


@pytest.mark.parametrize("text", [
    "", "1\n1\n3 5\n", "0\n2\n3 5\n", "0\n1\n3\n", "0\n1\nx 5\n", "0\n2\n3 5\n2 9\n", "0\n2\n3 5\n4 1\n",
    "0\n1\n-1 5\n", "0\n999999999\n", "\xff\xfe", "0\n1\n3 5 6\n",
])
def test_a_damaged_checkpoint_is_ignored(tmp_path, text):
    d = tmp_path / "t-0"
    d.mkdir()
    (d / FILE).write_bytes(text.encode("latin-1"))
    e = LeaderEpochs(d, fsync=False)
    assert e.entries == []
    assert e.end_offset_for(0, 4, 12) == (0, 12)
    assert latest_leader_epoch(tmp_path) == 0


def _batches(n=3):
    return split_batches(build_batch([Record(i, 1_000 + i, None, b"v%d" % i) for i in range(n)]))


def test_the_log_assigns_an_epoch_at_its_first_append_and_keeps_it_through_truncation(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    plog.append(_batches(), leader_epoch=0)
    assert not (tmp_path / "t-0" / FILE).exists()  # a single node writes no checkpoint
    plog.append(_batches(), leader_epoch=4)
    plog.append(_batches(), leader_epoch=4)
    plog.append(_batches(), leader_epoch=6)
    assert plog.epochs.entries == [(4, 3), (6, 9)]
    assert plog.epochs.end_offset_for(4, 6, plog.log_end_offset) == (4, 9)
    plog.truncate_to(9)
    assert plog.epochs.entries == [(4, 3)]
    plog.close()
    again = PartitionLog.open(tmp_path / "t-0", LogConfig())
    assert again.epochs.entries == [(4, 3)] and again.log_end_offset == 9
    again.close()


def test_a_moved_log_start_trims_the_epochs_as_kafkas_truncate_from_start(tmp_path):
    e = _epochs(tmp_path, [(2, 10), (5, 30), (7, 50)])
    e.truncate_from_start(5)  # below every epoch's start: nothing goes
    assert e.entries == [(2, 10), (5, 30), (7, 50)]
    e.truncate_from_start(10)  # exactly where epoch 2 began: it stays as it was
    assert e.entries == [(2, 10), (5, 30), (7, 50)]
    e.truncate_from_start(35)  # inside epoch 5: epoch 2 goes, epoch 5 begins at the new start
    assert e.entries == [(5, 35), (7, 50)]
    assert e.end_offset_for(2, 7, 60) == (2, 35)  # older than any kept: it ended where the log now starts
    assert e.end_offset_for(5, 7, 60) == (5, 50)
    assert LeaderEpochs(tmp_path, fsync=False).entries == [(5, 35), (7, 50)]  # written down
    e.truncate_from_start(60)  # at the log end: the current epoch is kept, from there
    assert e.entries == [(7, 60)]


def test_delete_records_and_retention_trim_the_log_epochs(tmp_path):
    config = LogConfig(segment_bytes=200, retention_ms=1_000)
    clock = lambda: 2_000.0  # noqa: E731 - seconds; the records' timestamps are about 1 s: all past retention
    plog = PartitionLog.open(tmp_path / "t-0", config, clock=clock)
    for epoch in (3, 3, 5, 5, 8, 8):
        plog.append(_batches(), leader_epoch=epoch)  # small segments: a roll every batch or two
    assert plog.epochs.entries == [(3, 0), (5, 6), (8, 12)]
    plog.delete_records_before(7)
    assert plog.epochs.entries == [(5, 7), (8, 12)]
    assert plog.enforce_retention() > 0
    start = plog.log_start_offset
    assert start > 7 and plog.epochs.entries[0][1] == start and plog.epochs.entries[-1][0] == 8
    assert plog.epochs.end_offset_for(3, 8, plog.log_end_offset) == (3, start)
    plog.close()
    again = PartitionLog.open(tmp_path / "t-0", config, clock=clock)
    # as in Kafka, a reopen drops an epoch that begins at the log end (here every segment was past
    # retention, so the log is empty from its end on); its next append writes it down again
    assert again.epochs.entries == [e for e in plog.epochs.entries if e[1] < again.log_end_offset] and again.log_start_offset == start
    again.close()
