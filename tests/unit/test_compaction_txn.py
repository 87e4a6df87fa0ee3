"""Compaction of logs with transactions (storage/compaction.py), against Kafka 4.x's log cleaner's rules.

Each rule has a test built from real record batches: cleaning stops at the last stable
offset; aborted data goes (the aborted-transaction list says what was aborted); COMMIT and
ABORT markers stay while data of their transaction is left and go a delete horizon later
(KIP-534), as tombstones do; a producer's last data batch stays, emptied, with its last
sequence number; the ``.txnindex`` files and the aborted transactions a READ_COMMITTED fetch
is told about follow what is left; a crash at any step of a pass, or kill -9 anywhere in one,
leaves a log whose READ_COMMITTED view is the same. A property test checks that random
histories of plain records and committed, aborted and open transactions read the same under
READ_COMMITTED before and after any number of passes, a restart, and the end of the open
transactions. ``__consumer_offsets`` (transactional offset commits) and ``__transaction_state``
still load the same state after cleaning.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from broker.producers import ProducerStateTable
from protocol.records import (
    Record,
    build_batch,
    build_empty_batch,
    build_end_txn_marker,
    iter_records,
    read_header,
    split_batches,
)
from storage import LogConfig, PartitionLog
from storage.txn import ABORT, batches_last_offset, control_kind, encode_entries

RET = 10_000  # delete.retention.ms of the tests
T0 = 1_700_000_000_000
ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- writing logs
class Clock:
    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000.0


def open_log(path: Path, clock: Clock | None = None, **cfg) -> PartitionLog:
    cfg.setdefault("cleanup_policy", "compact")
    cfg.setdefault("fsync", "never")
    cfg.setdefault("segment_bytes", 1 << 20)
    cfg.setdefault("delete_retention_ms", RET)
    return PartitionLog.open(path, LogConfig(**cfg), clock=clock or Clock())


def _b(x):
    return None if x is None else (x if isinstance(x, bytes) else str(x).encode())


class Writer:
    """Appends plain, idempotent and transactional batches and markers, keeping sequence numbers."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.seq: dict[int, int] = {}

    def _batch(self, kvs, pid=-1, epoch=-1, txn=False, ts=1000):
        recs = [Record(i, ts, _b(k), _b(v), []) for i, (k, v) in enumerate(kvs)]
        seq = -1
        if pid >= 0:
            seq = self.seq.get(pid, 0)
            self.seq[pid] = seq + len(recs)
        raw = build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
        return self.plog.append([(read_header(raw), raw)])

    def plain(self, *kvs):
        return self._batch(kvs)

    def idem(self, pid, *kvs, epoch=0):
        return self._batch(kvs, pid, epoch)

    def txn(self, pid, *kvs, epoch=0):
        return self._batch(kvs, pid, epoch, txn=True)

    def marker(self, pid, commit: bool, epoch=0):
        raw = build_end_txn_marker(commit=commit, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, timestamp=1000)
        return self.plog.append([(read_header(raw), raw)]).base_offset

    def commit(self, pid, epoch=0):
        return self.marker(pid, True, epoch)

    def abort(self, pid, epoch=0):
        return self.marker(pid, False, epoch)

    def roll(self):
        self.plog.roll()


# --------------------------------------------------------------------------- reading logs
def all_batches(plog: PartitionLog) -> list:
    """Every batch of the log, as a READ_UNCOMMITTED fetch gets them (header, bytes)."""
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20)
        if not data:
            break
        batches = split_batches(data)
        out += [(h, bytes(b)) for h, b in batches if h.last_offset >= offset]
        offset = batches[-1][0].last_offset + 1
    return out


def record_offsets(plog) -> list[int]:
    return [r.offset for _, b in all_batches(plog) for r in iter_records(b)]


def batch_lasts(plog) -> list[int]:
    return [h.last_offset for h, _ in all_batches(plog)]


def keys_in_log(plog) -> list[bytes]:
    return [r.key for h, b in all_batches(plog) if not h.is_control for r in iter_records(b)]


def read_committed(plog: PartitionLog, max_bytes: int = 1 << 20) -> list[Record]:
    """What a READ_COMMITTED consumer gets: fetches up to the LSO, each with the aborted
    transactions the log lists for it, filtered as Kafka's consumer does (a producer's batches
    are aborted from an aborted transaction's first offset until its ABORT marker)."""
    out: list[Record] = []
    offset = plog.log_start_offset
    while True:
        lso = plog.last_stable_offset
        if offset >= lso:
            return out
        data = plog.read(offset, max_bytes, upto=lso)
        if not data:
            return out
        upper = batches_last_offset(data) + 1
        pending = sorted(plog.aborted_transactions(offset, upper), key=lambda a: a[1])
        aborted_pids: set[int] = set()
        batches = split_batches(data)
        for hdr, b in batches:
            if hdr.last_offset < offset:
                continue
            if hdr.producer_id >= 0:
                while pending and pending[0][1] <= hdr.last_offset:
                    aborted_pids.add(pending.pop(0)[0])
                if hdr.is_control:
                    if hdr.records_count and control_kind(b) == ABORT:
                        aborted_pids.discard(hdr.producer_id)
                    continue
                if hdr.is_transactional and hdr.producer_id in aborted_pids:
                    continue
            if hdr.is_control:
                continue
            out += [r for r in iter_records(b) if r.offset >= offset]
        offset = batches[-1][0].last_offset + 1


def view(records) -> dict:
    """The latest value of each key; a tombstone deletes."""
    latest: dict = {}
    for r in records:
        if r.key is not None:
            latest[r.key] = r.value
    return {k: v for k, v in latest.items() if v is not None}


def last_data_batches(plog) -> dict[int, tuple[int, int, int]]:
    """producer id -> (epoch, last offset, last sequence) of its last data batch."""
    out = {}
    for h, _ in all_batches(plog):
        if h.producer_id >= 0 and not h.is_control:
            out[h.producer_id] = (h.producer_epoch, h.last_offset, h.last_sequence)
    return out


def check_txn_files(plog: PartitionLog) -> None:
    """The aborted transactions are consistent with the log: each one's ABORT marker is there,
    and each segment's .txnindex holds exactly those whose marker it holds."""
    st = plog._txn
    assert st.consistent()
    markers = {h.base_offset: (h.producer_id, control_kind(b)) for h, b in all_batches(plog) if h.is_control and h.records_count}
    for e in st.aborted:
        if e.last_offset >= plog.log_start_offset:
            assert markers.get(e.last_offset) == (e.producer_id, ABORT), e
    bases = plog.segment_base_offsets()
    want = {}
    for i, b in enumerate(bases):
        hi = bases[i + 1] if i + 1 < len(bases) else None
        entries = st.entries_between(b, hi)
        if entries:
            want[f"{b:020d}.txnindex"] = encode_entries(entries)
    have = {p.name: p.read_bytes() for p in plog.path.iterdir() if p.name.endswith(".txnindex")}
    assert have == want


# =========================================================================== rule 1: the LSO bounds cleaning
def test_cleaning_stops_below_the_segment_holding_the_last_stable_offset(tmp_path):
    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.plain(("k1", "a"))  # 0
    w.plain(("k1", "b"))  # 1
    w.roll()
    first = w.txn(1, ("k2", "x")).base_offset  # 2: stays open
    w.plain(("k1", "c"))  # 3
    w.plain(("k1", "c2"))  # 4
    w.roll()
    w.plain(("k1", "d"))  # 5
    w.plain(("k3", "e"))  # 6
    w.roll()
    w.plain(("k4", "f"))  # 7 (active segment)
    assert plog.last_stable_offset == first == 2
    before = view(read_committed(plog))
    stats = plog.compact()
    assert stats.first_uncleanable == 2  # the segment holding the LSO and all after it are left alone
    assert record_offsets(plog) == [1, 2, 3, 4, 5, 6, 7]  # only k1=a went: k1 is mapped below offset 2
    assert view(read_committed(plog)) == before
    w.commit(1)  # 8
    w.roll()
    stats = plog.compact()
    assert stats.first_uncleanable == plog.segment_base_offsets()[-1] == 9
    assert record_offsets(plog) == [2, 5, 6, 7, 8]
    assert view(read_committed(plog)) == {b"k1": b"d", b"k2": b"x", b"k3": b"e", b"k4": b"f"}


def test_no_data_of_an_open_transaction_is_cleaned(tmp_path):
    """An open transaction's batches below the active segment are not touched, even superseded."""
    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.txn(1, ("k", "open-1"))  # 0
    w.plain(("k", "plain"))  # 1
    w.roll()
    w.plain(("k", "later"))  # 2
    w.roll()
    assert plog.compact() is None  # everything is at or past the LSO (0)
    assert record_offsets(plog) == [0, 1, 2]
    assert not plog.needs_compaction()
    w.abort(1)  # 3
    w.roll()
    plog.compact()
    assert record_offsets(plog) == [2, 3]  # the aborted record went; the ABORT stays (its data was there)
    assert view(read_committed(plog)) == {b"k": b"later"}


# =========================================================================== rule 2: aborted data
def _two_producers(w: Writer) -> None:
    """Offsets: 0-1 p1 (k1,k2), 2-3 p2 (k2,k3), 4-5 p1 (k3,k4), 6 COMMIT p1, 7 COMMIT p2,
    8-9 p1 (k2,k3), 10 ABORT p1, 11-12 p2 (k4,k5), 13-14 p1 (k5,k6), 15 COMMIT p1, 16 ABORT p2,
    17-18 p2 (k6,k7), 19 COMMIT p2."""
    w.txn(1, ("k1", "p1a"), ("k2", "p1a"))
    w.txn(2, ("k2", "p2a"), ("k3", "p2a"))
    w.txn(1, ("k3", "p1b"), ("k4", "p1b"))
    w.commit(1)
    w.commit(2)
    w.txn(1, ("k2", "p1-aborted"), ("k3", "p1-aborted"))
    w.abort(1)
    w.txn(2, ("k4", "p2-aborted"), ("k5", "p2-aborted"))
    w.txn(1, ("k5", "p1c"), ("k6", "p1c"))
    w.commit(1)
    w.abort(2)
    w.txn(2, ("k6", "p2c"), ("k7", "p2c"))
    w.commit(2)
    w.roll()


def test_aborted_data_goes_then_the_index_entries_then_the_markers(tmp_path):
    clock = Clock()
    plog = open_log(tmp_path / "p-0", clock)
    _two_producers(Writer(plog))
    assert plog.log_end_offset == 20
    aborted = [(1, 8), (2, 11)]
    assert plog.aborted_transactions(0, 20) == aborted
    expected = {b"k1": b"p1a", b"k2": b"p2a", b"k3": b"p1b", b"k4": b"p1b", b"k5": b"p1c", b"k6": b"p2c", b"k7": b"p2c"}
    assert view(read_committed(plog)) == expected

    # 1st pass: the aborted data and the superseded records go; every marker stays (its transaction
    # had data in the log), and so do the aborted transactions' entries
    stats = plog.compact(T0)
    assert stats.aborted_batches_dropped == 2 and stats.markers_dropped == 0
    assert record_offsets(plog) == [0, 2, 4, 5, 6, 7, 10, 13, 15, 16, 17, 18, 19]
    assert plog.aborted_transactions(0, 20) == aborted
    assert view(read_committed(plog)) == expected
    check_txn_files(plog)

    # 2nd pass: no data of the aborted transactions left: their entries go (from the .txnindex and
    # what fetches are told); their markers get a delete horizon but stay
    stats = plog.compact(T0 + 1)
    assert stats.aborted_txns_dropped == 2
    assert plog.aborted_transactions(0, 20) == []
    assert record_offsets(plog) == [0, 2, 4, 5, 6, 7, 10, 13, 15, 16, 17, 18, 19]
    horizons = {h.base_offset: h.delete_horizon_ms for h, _ in all_batches(plog) if h.is_control}
    assert horizons == {6: None, 7: None, 10: T0 + 1 + RET, 15: None, 16: T0 + 1 + RET, 19: None}
    assert view(read_committed(plog)) == expected
    check_txn_files(plog)

    # not before the horizon ...
    plog.compact(T0 + RET)
    assert record_offsets(plog) == [0, 2, 4, 5, 6, 7, 10, 13, 15, 16, 17, 18, 19]
    # ... but once it passed, the markers go (Kafka's LogCleanerTest ends with the same offsets)
    assert plog.needs_compaction(T0 + 1 + RET)  # the horizon is a reason to clean
    stats = plog.compact(T0 + 1 + RET)
    assert stats.markers_dropped == 2
    assert record_offsets(plog) == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]
    assert view(read_committed(plog)) == expected
    check_txn_files(plog)
    # the same after a restart
    plog.close()
    plog = open_log(tmp_path / "p-0", clock)
    assert plog.aborted_transactions(0, 20) == [] and plog.last_stable_offset == 20
    assert view(read_committed(plog)) == expected


def test_aborted_transaction_spanning_segments(tmp_path):
    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.plain(("k", "committed"))  # 0
    w.txn(1, ("k", "aborted-1"))  # 1
    w.roll()
    w.txn(2, ("j", "committed-j"))  # 2
    w.txn(1, ("k", "aborted-2"))  # 3
    w.roll()
    w.abort(1)  # 4
    w.commit(2)  # 5
    w.plain(("z", "1"))  # 6
    w.roll()
    plog.compact()
    assert view(read_committed(plog)) == {b"k": b"committed", b"j": b"committed-j", b"z": b"1"}
    # producer 1's last data batch (3) stays as an empty batch with its sequence; its records are gone
    lasts = {h.base_offset: (h.records_count, h.last_sequence) for h, _ in all_batches(plog) if h.producer_id == 1}
    assert lasts == {3: (0, 1), 4: (1, -1)}
    assert plog.aborted_transactions(0, 10) == [(1, 1)]  # the emptied batch is data of it: kept listed
    check_txn_files(plog)


def test_an_aborted_transaction_cleaned_earlier_does_not_stand_for_its_producers_next_one(tmp_path):
    """The interleaving of a failure of the background test below: a pass runs while producer 1's
    second aborted transaction has begun in the segment it cleans and goes on in the active one.
    The next pass maps only the dirty part, from offset 4; the first transaction's entry is still
    listed (its data was there for the first pass) but its marker is in the clean part. Walked as
    ongoing, it stood for the second transaction, whose aborted f=bad then counted as committed:
    it outdated f=good, and went itself as aborted data, so f was gone."""
    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.txn(1, ("x", "a0"))  # 0: aborted
    w.abort(1)  # 1
    w.plain(("f", "good"))  # 2
    w.txn(1, ("y", "a1"))  # 3: aborted (at 5)
    w.roll()
    w.txn(1, ("f", "bad"))  # 4
    w.abort(1)  # 5
    expected = {b"f": b"good"}
    assert view(read_committed(plog)) == expected
    stats = plog.compact(T0)  # cleans [0, 4): the first entry stays, its data was there
    assert stats.first_uncleanable == 4 and plog.aborted_transactions(0, 6) == [(1, 0), (1, 3)]
    assert view(read_committed(plog)) == expected
    w.roll()
    stats = plog.compact(T0)  # maps the dirty part [4, 6) only
    assert stats.first_uncleanable == 6
    assert view(read_committed(plog)) == expected
    assert (2, b"f", b"good") in [(r.offset, r.key, r.value) for h, b in all_batches(plog) if not h.is_control for r in iter_records(b)]
    check_txn_files(plog)
    for now in (T0 + 1, T0 + 2 * RET, T0 + 4 * RET):
        plog.compact(now)
        assert view(read_committed(plog)) == expected
        check_txn_files(plog)


def test_an_aborted_transaction_below_the_log_start_does_not_stand_for_its_producers_next_one(tmp_path):
    """Retention (cleanup.policy=compact,delete) deleted the segment holding producer 1's first
    aborted transaction; its entry leaves the list only at the next marker appended. Cleaning
    meanwhile must still find the second transaction's data aborted: not outdating f=good, and
    its ABORT marker not given a delete horizon while the transaction is listed."""
    import dataclasses

    plog = open_log(tmp_path / "p-0", cleanup_policy="compact,delete", retention_ms=-1)
    w = Writer(plog)
    w.txn(1, ("x", "a0"))  # 0: aborted
    w.abort(1)  # 1
    w.txn(1, ("y", "a1"))  # 2: aborted (at 5)
    w.roll()
    w.plain(("f", "good"))  # 3
    w.txn(1, ("f", "bad"))  # 4
    w.abort(1)  # 5
    w.roll()
    w.plain(("z", "z"))  # 6
    first = plog.iter_segments().__next__().size
    plog.update_config(dataclasses.replace(plog.config, retention_bytes=plog.size_bytes - first))
    assert plog.enforce_retention(T0) == 1 and plog.log_start_offset == 3
    assert [e.last_offset for e in plog._txn.aborted] == [1, 5]  # the first one is still listed
    expected = {b"f": b"good", b"z": b"z"}
    assert view(read_committed(plog)) == expected
    plog.compact(T0)
    assert view(read_committed(plog)) == expected
    assert [(h.base_offset, h.records_count) for h, _ in all_batches(plog) if h.producer_id == 1] == [(4, 0), (5, 1)]
    assert [h.delete_horizon_ms for h, _ in all_batches(plog) if h.base_offset == 5] == [None]
    for now in (T0 + 1, T0 + 2 * RET):
        plog.compact(now)
        assert view(read_committed(plog)) == expected


# =========================================================================== rule 3: markers and tombstones
def test_a_commit_marker_stays_while_its_transaction_has_data(tmp_path):
    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.txn(1, ("k1", "1"))  # 0
    w.txn(1, ("k2", "2"), ("k3", "3"))  # 1-2
    w.commit(1)  # 3
    w.txn(1, ("k2", "2b"))  # 4
    w.commit(1)  # 5
    w.roll()
    plog.compact(T0)
    assert keys_in_log(plog) == [b"k1", b"k3", b"k2"]
    assert record_offsets(plog) == [0, 2, 3, 4, 5]
    w.txn(1, ("k1", "1b"), ("k3", "3b"))  # 6-7
    w.commit(1)  # 8
    w.roll()
    # the batches of the transaction ending at 3 are read on this pass (and emptied): its marker stays
    plog.compact(T0)
    assert record_offsets(plog) == [3, 4, 5, 6, 7, 8]
    plog.compact(T0)  # now nothing of it is left: the marker gets its horizon
    assert record_offsets(plog) == [3, 4, 5, 6, 7, 8]
    assert [h.delete_horizon_ms for h, _ in all_batches(plog) if h.base_offset == 3] == [T0 + RET]
    plog.compact(T0 + RET - 1)
    assert record_offsets(plog) == [3, 4, 5, 6, 7, 8]
    plog.compact(T0 + RET)
    assert record_offsets(plog) == [4, 5, 6, 7, 8]
    assert view(read_committed(plog)) == {b"k1": b"1b", b"k2": b"2b", b"k3": b"3b"}


def test_a_marker_whose_data_is_in_another_segment_stays(tmp_path):
    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.txn(1, ("k", "v"))
    w.roll()
    w.commit(1)
    w.roll()
    for now in (T0, T0 + RET + 1, T0 + 2 * RET + 2):
        plog.compact(now)
    assert record_offsets(plog) == [0, 1]
    assert batch_lasts(plog) == [0, 1]


def test_tombstones_in_transactions_follow_the_same_horizon(tmp_path):
    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.plain(("gone", "v"))  # 0
    w.txn(1, ("gone", None), ("kept", "v"))  # 1-2: a committed tombstone
    w.commit(1)  # 3
    w.txn(2, ("kept", None))  # 4: an aborted tombstone
    w.abort(2)  # 5
    w.roll()
    plog.compact(T0)
    batches = all_batches(plog)
    tomb = [h for h, _ in batches if h.base_offset == 1]
    assert tomb[0].delete_horizon_ms == T0 + RET and tomb[0].last_offset_delta == 1
    assert [r.value for r in iter_records(dict((h.base_offset, b) for h, b in batches)[1])] == [None, b"v"]
    assert view(read_committed(plog)) == {b"kept": b"v"}
    plog.compact(T0 + RET)
    recs = [(r.offset, r.key, r.value) for h, b in all_batches(plog) if not h.is_control for r in iter_records(b)]
    assert recs == [(2, b"kept", b"v")]  # the tombstone went, the batch kept its offsets
    assert view(read_committed(plog)) == {b"kept": b"v"}


def test_an_empty_control_batch_goes_unless_it_holds_the_producer_epoch(tmp_path):
    """Control batches with no records (as Kafka's cleaner leaves them, e.g. replicated from it)."""
    from protocol.records import build_empty_batch

    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.txn(1, ("a", "1"))  # 0
    w.commit(1)  # 1
    for pid, epoch in ((1, 0), (7, 3)):  # 2: producer 1's, epoch 0; 3: producer 7's only batch
        raw = build_empty_batch(base_offset=0, last_offset_delta=0, base_timestamp=-1, max_timestamp=1000,
                                producer_id=pid, producer_epoch=epoch, is_transactional=True, is_control=True)
        plog.append([(read_header(raw), raw)])
    w.plain(("b", "2"))  # 4
    w.roll()
    plog.compact(T0)
    assert [(h.base_offset, h.records_count) for h, _ in all_batches(plog)] == [(0, 1), (1, 1), (3, 0), (4, 1)]


# =========================================================================== rule 4: producer state
def test_a_producers_last_data_batch_stays_with_its_sequence(tmp_path):
    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.plain(("k0", "0"))  # 0
    w.idem(1, ("k0", "1"))  # 1
    w.idem(2, ("k0", "2"))  # 2
    w.idem(3, ("k0", "3"))  # 3
    w.idem(2, ("k1", "1"))  # 4
    w.roll()
    table = ProducerStateTable()
    table.rebuild(plog)
    seqs = {pid: (e.epoch, e.last_seq) for pid, e in table.entries.items()}
    plog.compact()
    assert batch_lasts(plog) == [1, 3, 4]
    assert {pid: seq for pid, (_, _, seq) in last_data_batches(plog).items()} == {1: 0, 2: 1, 3: 0}
    assert keys_in_log(plog) == [b"k0", b"k1"] and record_offsets(plog) == [3, 4]
    table.rebuild(plog)  # what a restarted broker knows of the producers is unchanged
    assert {pid: (e.epoch, e.last_seq) for pid, e in table.entries.items()} == seqs


def test_the_last_batch_of_an_aborted_transaction_stays_empty_until_the_producer_writes_again(tmp_path):
    clock = Clock()
    plog = open_log(tmp_path / "p-0", clock)
    w = Writer(plog)
    w.txn(1, ("k1", "a"))  # 0
    w.txn(1, ("k2", "b"), ("k3", "c"))  # 1-2
    w.abort(1)  # 3
    w.roll()
    plog.compact(T0)
    assert batch_lasts(plog) == [2, 3] and record_offsets(plog) == [3]
    assert last_data_batches(plog) == {1: (0, 2, 2)}
    plog.compact(T0 + RET + 1)  # the ABORT stays: the emptied batch is data of its transaction
    plog.compact(T0 + 2 * RET + 2)
    assert batch_lasts(plog) == [2, 3] and plog.aborted_transactions(0, 4) == [(1, 0)]
    w.txn(1, ("k1", "x"), ("k5", "y"))  # 4-5
    w.commit(1)  # 6
    w.roll()
    plog.compact(T0)
    assert batch_lasts(plog) == [3, 5, 6]  # the empty batch went; the ABORT saw it: it stays this pass
    assert plog.aborted_transactions(0, 7) == [(1, 0)]
    plog.compact(T0)
    assert plog.aborted_transactions(0, 7) == []
    plog.compact(T0 + RET)
    assert batch_lasts(plog) == [5, 6]
    assert view(read_committed(plog)) == {b"k1": b"x", b"k5": b"y"}
    check_txn_files(plog)


def test_a_marker_of_an_epoch_without_data_holds_the_epoch(tmp_path):
    """A fencing ABORT at a bumped epoch is the producer's last word: kept for ever, emptied of its
    record as Kafka keeps it, while the earlier epoch's marker goes."""
    plog = open_log(tmp_path / "p-0")
    w = Writer(plog)
    w.txn(1, ("k", "old"))  # 0
    w.commit(1)  # 1
    w.plain(("k", "new"))  # 2
    w.abort(1, epoch=1)  # 3: closes nothing; the epoch is 1 now
    w.plain(("z", "z"))  # 4
    w.roll()
    table = ProducerStateTable()
    for now in (T0, T0, T0 + RET, T0 + 3 * RET):
        plog.compact(now)
    assert [(h.base_offset, h.producer_epoch, h.records_count) for h, _ in all_batches(plog) if h.producer_id == 1] == [(3, 1, 0)]
    table.rebuild(plog)
    assert table.entries[1].epoch == 1


# =========================================================================== rule 5: index files and fetches
def test_index_files_and_fetches_after_cleaning_and_restarts(tmp_path):
    path = tmp_path / "p-0"
    plog = open_log(path, segment_bytes=700)
    w = Writer(plog)
    rng = random.Random(5)
    for i in range(60):
        pid = rng.randint(1, 4)
        w.txn(pid, ("k%d" % rng.randint(0, 9), "v%d" % i))
        if rng.random() < 0.4:
            w.marker(pid, rng.random() < 0.5)
        w.plain(("k%d" % rng.randint(0, 9), "p%d" % i))
    for pid in range(1, 5):
        w.abort(pid)
    w.roll()
    expected = view(read_committed(plog))
    for now in (T0, T0, T0 + RET + 1):
        plog.compact(now)
        check_txn_files(plog)
        assert view(read_committed(plog)) == expected
        # small fetches: each is told the aborted transactions that overlap it
        assert view(read_committed(plog, max_bytes=1)) == expected
        crashed = open_log(path, segment_bytes=700)  # as after kill -9: no clean shutdown
        assert crashed._txn.aborted == plog._txn.aborted
        assert view(read_committed(crashed)) == expected
    plog.close()
    plog = open_log(path, segment_bytes=700)
    assert view(read_committed(plog)) == expected
    check_txn_files(plog)


def test_a_snapshot_listing_a_transaction_whose_marker_goes_is_removed(tmp_path):
    """A transaction snapshot below the cleaned offsets says producer 1 is open; its marker is
    removed later. Recovery falling back to that snapshot (the newest one damaged) would leave
    producer 1 open for ever: compaction removes it first."""
    path = tmp_path / "p-0"
    plog = open_log(path)
    w = Writer(plog)
    w.txn(1, ("k", "txn"))  # 0
    w.roll()  # snapshot at 1: producer 1 open since 0
    w.commit(1)  # 1
    w.plain(("k", "plain"))  # 2
    w.txn(1, ("q", "q"))  # 3: producer 1's last data from now on
    w.commit(1)  # 4
    w.roll()
    w.plain(("z", "z"))  # 5
    w.roll()
    plog.flush()
    snap = path / f"{1:020d}.txnsnapshot"
    assert snap.exists()
    for now in (T0, T0, T0 + RET):
        plog.compact(now)
    assert 1 not in [h.base_offset for h, _ in all_batches(plog)]  # the COMMIT went
    assert not snap.exists()
    leo = plog.log_end_offset
    newest = max(path.glob("*.txnsnapshot"))
    newest.write_bytes(b"garbage")
    crashed = open_log(path)
    assert crashed.open_transactions() == [] and crashed.last_stable_offset == leo
    assert view(read_committed(crashed)) == {b"k": b"plain", b"q": b"q", b"z": b"z"}


# =========================================================================== rule 6: crashes
class Crash(BaseException):
    pass


@pytest.mark.parametrize("stage", ["cleaned", "swap", "deleted"])
@pytest.mark.parametrize("crash_pass", [0, 1, 2])
def test_a_crash_at_any_step_of_any_pass_keeps_the_committed_view(tmp_path, stage, crash_pass):
    path = tmp_path / "p-0"
    plog = open_log(path, segment_bytes=400)
    _two_producers(Writer(plog))
    w = Writer(plog)
    w.seq = {1: 100, 2: 100}
    w.txn(3, ("k9", "open"))  # an open transaction past the cleaned part
    w.plain(("k1", "after"))
    w.roll()
    expected = view(read_committed(plog))
    lso = plog.last_stable_offset
    times = [T0, T0 + 1, T0 + 1 + RET]
    for i, now in enumerate(times):
        if i == crash_pass:
            plog._crash_hook = lambda s: (_ for _ in ()).throw(Crash(s)) if s == stage else None
            with pytest.raises(Crash):
                plog.compact(now)
            plog = open_log(path, segment_bytes=400)  # the crashed instance is dropped as it is
            names = os.listdir(path)
            assert not any(n.endswith((".cleaned", ".swap")) for n in names)
        else:
            plog.compact(now)
        assert view(read_committed(plog)) == expected
        assert plog.last_stable_offset == lso and plog.open_transactions() == [(3, lso)]
        check_txn_files(plog)
    for now in (times[-1] + 2 * RET, times[-1] + 4 * RET):  # a crash may have put a step off: catch up
        plog.compact(now)
    assert view(read_committed(plog)) == expected
    assert [h.base_offset for h, _ in all_batches(plog) if h.is_control and h.base_offset in (10, 16)] == []


KILL_CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from storage import LogConfig, PartitionLog
    cfg = LogConfig(cleanup_policy="compact", fsync="never", segment_bytes=int(sys.argv[3]), delete_retention_ms=int(sys.argv[4]))
    now = int(sys.argv[5])
    plog = PartitionLog.open(sys.argv[2], cfg, clock=lambda: now / 1000)
    print("ready", flush=True)
    while True:
        plog.compact(now)
        now += int(sys.argv[4]) // 2
""")


def test_kill_9_during_cleaning_loses_nothing_committed_and_shows_nothing_aborted(tmp_path):
    """Rounds of: random transactional history appended (some transactions left open for the next
    round), then a child process cleaning the log in a loop (time moving, so tombstones, aborted
    transactions' entries and markers go too), killed with SIGKILL at a random moment. Each time
    the log opens with the READ_COMMITTED view it had before, its aborted transactions' markers there."""
    path = tmp_path / "p-0"
    seg_bytes = 4000
    rng = random.Random(11)
    kills = 0
    for round_no in range(6):
        plog = open_log(path, segment_bytes=seg_bytes)
        w = Writer(plog)
        w.seq = dict.fromkeys(range(1, 13), 10_000 * round_no)
        open_pids = {pid for pid, _ in plog.open_transactions()}
        for i in range(500):
            pid = rng.randint(1, 12)
            r = rng.random()
            if r < 0.35:
                w.plain(("k%d" % rng.randint(0, 150), None if rng.random() < 0.1 else "p%d-%d" % (round_no, i)))
            elif r < 0.8:
                w.txn(pid, *[("k%d" % rng.randint(0, 150), "t%d-%d-%d" % (round_no, i, j)) for j in range(rng.randint(1, 3))])
                open_pids.add(pid)
            elif pid in open_pids:
                w.marker(pid, rng.random() < 0.6)
                open_pids.discard(pid)
        w.roll()
        expected = view(read_committed(plog))
        lso = plog.last_stable_offset
        plog.close()
        child = subprocess.Popen(
            [sys.executable, "-c", KILL_CHILD, str(ROOT), str(path), str(seg_bytes), str(RET), str(T0 + round_no * 3 * RET)],
            stdout=subprocess.PIPE,
        )
        try:
            assert child.stdout.readline().strip() == b"ready"
            time.sleep(rng.uniform(0.0, 0.12))
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(10)
            child.stdout.close()
        kills += child.returncode == -signal.SIGKILL
        plog = open_log(path, segment_bytes=seg_bytes)
        assert plog.last_stable_offset == lso
        assert view(read_committed(plog)) == expected
        check_txn_files(plog)
        plog.close()
    assert kills == 6


# =========================================================================== property: the committed view
_KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
_OP = st.one_of(
    st.tuples(st.just("plain"), _KEYS, st.booleans()),
    st.tuples(st.just("txn"), st.integers(1, 3), st.lists(st.tuples(_KEYS, st.booleans()), min_size=1, max_size=3)),
    st.tuples(st.just("idem"), st.integers(10, 11), _KEYS),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("roll")),
)
# a history, the end of the transactions it left open (commit or abort each), then a short
# history whose transactions stay open while the log is cleaned
_OPS = st.tuples(st.lists(_OP, min_size=1, max_size=60), st.lists(st.booleans(), min_size=3, max_size=3),
                 st.lists(_OP, max_size=8))


class Model:
    """Kafka's READ_COMMITTED view, from what was written: plain records at once, a transaction's
    records when it commits, up to the first offset of the earliest open transaction."""

    def __init__(self) -> None:
        self.visible: list[tuple[int, bytes, bytes | None]] = []
        self.open: dict[int, list] = {}

    def view(self) -> dict:
        lso = min((recs[0][0] for recs in self.open.values()), default=None)
        latest: dict = {}
        for off, k, v in sorted(self.visible):
            if lso is None or off < lso:
                latest[k] = v
        return {k: v for k, v in latest.items() if v is not None}


def _apply(w: Writer, model: Model, op, n: int) -> None:
    kind = op[0]
    if kind == "plain":
        v = None if op[2] else "p%d" % n
        off = w.plain((op[1], v)).base_offset
        model.visible.append((off, _b(op[1]), _b(v)))
    elif kind == "idem":
        off = w.idem(op[1], (op[2], "i%d" % n)).base_offset
        model.visible.append((off, _b(op[2]), _b("i%d" % n)))
    elif kind == "txn":
        kvs = [(k, None if tomb else "t%d-%d" % (n, j)) for j, (k, tomb) in enumerate(op[2])]
        base = w.txn(op[1], *kvs).base_offset
        model.open.setdefault(op[1], []).extend((base + j, _b(k), _b(v)) for j, (k, v) in enumerate(kvs))
    elif kind == "end":
        recs = model.open.pop(op[1], None)
        if recs is None:
            return  # a coordinator writes no marker for a producer without a transaction here
        w.marker(op[1], op[2])
        if op[2]:
            model.visible += recs
    else:
        w.roll()


def _random_step(w: Writer, model: Model, rng: random.Random, n: int) -> None:
    """One step of a random history: a plain record (a tenth of them tombstones), a transactional
    batch of producer 1-4, or the end (commit or abort) of one's transaction."""
    r, pid = rng.random(), rng.randint(1, 4)
    if r < 0.3:
        _apply(w, model, ("plain", rng.choice("abcdefgh"), rng.random() < 0.1), n)
    elif r < 0.7:
        _apply(w, model, ("txn", pid, [(rng.choice("abcdefgh"), False) for _ in range(rng.randint(1, 2))]), n)
    else:
        _apply(w, model, ("end", pid, rng.random() < 0.6), n)


@pytest.mark.parametrize("seed", range(40))
def test_cleaning_between_appends_never_changes_what_read_committed_consumers_see(tmp_path, seed):
    """Passes at random points of a random history (time moving on), not only at its end: after
    each step, and after the open transactions end and a last clean-up, READ_COMMITTED consumers
    read what the model says. (Passes between appends found a walk that began past an aborted
    transaction's marker taking it for its producer's next one.)"""
    plog = open_log(tmp_path / "p-0", segment_bytes=700)
    w = Writer(plog)
    model = Model()
    rng = random.Random(seed)
    now = T0
    for n in range(250):
        _random_step(w, model, rng, n)
        if rng.random() < 0.15:
            plog.compact(now)
            now += RET // 3
            check_txn_files(plog)
        assert view(read_committed(plog)) == model.view(), f"step {n}"
    for pid in sorted(model.open):
        _apply(w, model, ("end", pid, True), 0)
    w.roll()
    plog.compact(now + 1000 * RET)
    assert view(read_committed(plog)) == model.view()
    check_txn_files(plog)
    plog.close()
    assert view(read_committed(open_log(tmp_path / "p-0", segment_bytes=700))) == model.view()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, seg_bytes=st.sampled_from([250, 600, 1 << 20]), finish=st.lists(st.booleans(), min_size=3, max_size=3))
def test_cleaning_never_changes_what_read_committed_consumers_see(tmp_path_factory, ops, seg_bytes, finish):
    path = tmp_path_factory.mktemp("prop") / "p-0"
    plog = open_log(path, segment_bytes=seg_bytes)
    w = Writer(plog)
    model = Model()
    history, ends, tail = ops
    for n, op in enumerate(history):
        _apply(w, model, op, n)
    for pid, commit in zip(sorted(model.open), ends, strict=False):
        _apply(w, model, ("end", pid, commit), 0)
    w.roll()
    for n, op in enumerate(tail):
        _apply(w, model, op, 1000 + n)
    w.roll()
    expected = model.view()
    assert view(read_committed(plog)) == expected  # the reader itself agrees with the model
    lso = plog.last_stable_offset
    open_txns = plog.open_transactions()
    producers = last_data_batches(plog)
    dropped = {"aborted data": 0, "markers": 0, "aborted txns": 0, "tombstones": 0}
    for now in (T0, T0 + 1, T0 + 1 + RET, T0 + 2 * RET + 2):
        stats = plog.compact(now)
        if stats is not None:
            dropped["aborted data"] += stats.aborted_batches_dropped
            dropped["markers"] += stats.markers_dropped
            dropped["aborted txns"] += stats.aborted_txns_dropped
            dropped["tombstones"] += stats.tombstones_dropped
        assert view(read_committed(plog)) == expected
        assert (plog.last_stable_offset, plog.open_transactions()) == (lso, open_txns)
        assert last_data_batches(plog) == producers  # every producer's last sequence is still there
        check_txn_files(plog)
    for what, n in dropped.items():
        event(f"{what} removed: {'yes' if n else 'no'}")
    crashed = open_log(path, segment_bytes=seg_bytes)
    assert view(read_committed(crashed)) == expected
    assert crashed._txn.aborted == plog._txn.aborted and crashed.open_transactions() == open_txns
    # the open transactions end; what they wrote was never cleaned
    w = Writer(crashed)
    w.seq = {pid: 1000 for pid in range(1, 12)}
    for pid, commit in zip(sorted(model.open), finish, strict=False):
        _apply(w, model, ("end", pid, commit), 0)
    for pid in sorted(model.open):
        _apply(w, model, ("end", pid, False), 0)
    w.roll()
    expected = model.view()
    assert view(read_committed(crashed)) == expected
    for now in (T0 + 3 * RET, T0 + 5 * RET):
        crashed.compact(now)
        assert view(read_committed(crashed)) == expected
        check_txn_files(crashed)
    crashed.close()


def test_cleaning_in_the_background_while_transactions_are_written_and_read(tmp_path):
    """A thread cleans in a loop (time moving) while this one appends transactions, ends them and
    reads READ_COMMITTED: every read matches the model of what was written, and so does the end."""
    import threading

    path = tmp_path / "p-0"
    clock = Clock()
    plog = open_log(path, clock, segment_bytes=700)
    w = Writer(plog)
    model = Model()
    rng = random.Random(21)
    stop = threading.Event()
    errors: list[BaseException] = []
    passes = [0]

    def cleaner() -> None:
        now = T0
        try:
            while not stop.is_set():
                if plog.compact(now) is not None:
                    passes[0] += 1
                now += RET // 3
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=cleaner)
    t.start()
    try:
        for n in range(1500):
            _random_step(w, model, rng, n)
            if n % 50 == 0:
                assert view(read_committed(plog)) == model.view()
    finally:
        stop.set()
        t.join()
    assert not errors
    assert passes[0] > 0
    for pid in sorted(model.open):
        _apply(w, model, ("end", pid, True), 0)
    w.roll()
    plog.compact(T0 + 1000 * RET)
    assert view(read_committed(plog)) == model.view()
    check_txn_files(plog)
    plog.close()
    plog = open_log(path, clock, segment_bytes=700)
    assert view(read_committed(plog)) == model.view()


# =========================================================================== internal topics
def _offsets_log(path: Path):
    """A __consumer_offsets partition: plain and transactional offset commits (committed, aborted,
    one left open), plain commits outdating pending transactional ones, tombstones."""
    from protocol.group_records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value

    plog = open_log(path, segment_bytes=900)
    w = Writer(plog)
    rng = random.Random(3)

    def kv(n, txn=False):
        g, p = rng.randint(0, 3), rng.randint(0, 3)
        # TxnOffsetCommit writes no tombstones (the coordinator's replay applies one at once, as Kafka's)
        value = None if not txn and rng.random() < 0.08 else encode_value(OffsetCommitValue(offset=n, metadata="m", commit_timestamp=T0 + n))
        return encode_key(OffsetCommitKey(f"g{g}", "t", p)), value

    open_pids: set[int] = set()
    for n in range(400):
        pid = rng.randint(1, 5)
        r = rng.random()
        if r < 0.4:
            w.plain(kv(n))
        elif r < 0.75:
            w.txn(pid, *(kv(n * 10 + j, True) for j in range(rng.randint(1, 2))))
            open_pids.add(pid)
        elif pid in open_pids:
            w.marker(pid, rng.random() < 0.7)
            open_pids.discard(pid)
    for pid in sorted(open_pids):
        w.marker(pid, pid % 2 == 0)
    for p in range(3):  # deletes that stay the latest of their keys
        w.plain((encode_key(OffsetCommitKey("g0", "t", p)), None))
    w.roll()
    w.txn(9, kv(10_000, True))  # open at the end: its offsets are pending, never cleaned
    w.roll()
    return plog


def _offsets_state(shard):
    latest = {g: dict(d) for g, d in shard.offsets.latest.items()}
    pending = {pid: {g: dict(d) for g, d in groups.items()} for pid, groups in shard.offsets.pending.items()}
    return latest, pending, set(shard.groups)


def test_consumer_offsets_load_the_same_after_cleaning(tmp_path):
    import asyncio

    from .test_coordinator_load import runtime_load

    path = tmp_path / "__consumer_offsets-0"
    plog = _offsets_log(path)
    plog.close()
    loop = asyncio.new_event_loop()
    try:
        before = _offsets_state(runtime_load(loop, path).shard)
        assert before[0] and before[1]  # offsets, and pending ones of the open transaction
        plog = open_log(path, segment_bytes=900)
        size = plog.size_bytes
        stats = [plog.compact(now) for now in (T0, T0 + 1, T0 + 1 + RET, T0 + 2 * RET + 2)]
        assert sum(s.aborted_batches_dropped for s in stats) and sum(s.markers_dropped for s in stats)
        assert sum(s.tombstones_dropped for s in stats)
        assert plog.size_bytes < size / 2
        plog.close()
        assert _offsets_state(runtime_load(loop, path).shard) == before
        # a control batch emptied by cleaning (a fencing marker at a bumped epoch, kept for its
        # producer's epoch) is skipped by the loader: it ends no transaction
        plog = open_log(path, segment_bytes=900)
        raw = build_empty_batch(base_offset=0, last_offset_delta=0, base_timestamp=-1, max_timestamp=T0, producer_id=77, producer_epoch=3,
                                base_sequence=-1, is_transactional=True, is_control=True, timestamp_type=0, partition_leader_epoch=-1)
        plog.append([(read_header(raw), raw)])
        assert [h.records_count for h, _ in all_batches(plog) if h.producer_id == 77] == [0]
        plog.close()
        assert _offsets_state(runtime_load(loop, path).shard) == before
    finally:
        loop.close()


def test_transaction_state_loads_the_same_after_cleaning(tmp_path):
    """__transaction_state holds plain records (no producer id) and tombstones of expired ids."""
    from protocol.txn_records import TransactionLogKey, TransactionLogValue, encode_key, encode_value
    from protocol.txn_records import TxnState as TxnStatus

    path = tmp_path / "__transaction_state-0"
    plog = open_log(path, segment_bytes=600)
    w = Writer(plog)
    latest = {}
    for n in range(120):
        tid = "tid-%d" % (n % 7)
        if n % 17 == 16:
            w.plain((encode_key(TransactionLogKey(tid)), None))
            latest.pop(tid, None)
        else:
            value = TransactionLogValue(producer_id=n % 7, producer_epoch=n, timeout_ms=60_000, status=TxnStatus.EMPTY,
                                        partitions=None, last_update_ms=T0 + n, start_ms=-1)
            w.plain((encode_key(TransactionLogKey(tid)), encode_value(value)))
            latest[tid] = n
    w.roll()
    for now in (T0, T0 + RET):
        plog.compact(now)
    got = {}
    for h, b in all_batches(plog):
        assert not h.is_control
        for r in iter_records(b):
            got[r.key] = r.value
    from protocol.txn_records import decode_value

    assert {k: decode_value(v).producer_epoch for k, v in got.items() if v is not None} == {
        encode_key(TransactionLogKey(t)): n for t, n in latest.items()}
    assert len(keys_in_log(plog)) == len(latest)
