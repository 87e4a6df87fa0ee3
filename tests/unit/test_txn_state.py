"""Transactional state of a partition (storage/txn.py and its wiring in storage/log.py,
storage/recovery.py): the state machine and the last stable offset, the aborted
transactions a READ_COMMITTED fetch is told about, the ``.txnindex`` and snapshot
files, and that the state rebuilt after a restart (clean, crashed, torn, hostile
files) is the one the appends built, checked against a plain model of Kafka's rules.
"""

from __future__ import annotations

import os
import random
import struct
import time
from pathlib import Path

import pytest

from protocol.records import (
    Record,
    build_batch,
    build_empty_batch,
    build_end_txn_marker,
    read_header,
    split_batches,
)
from storage import LogConfig, PartitionLog
from storage.txn import (
    ABORT,
    COMMIT,
    ENTRY_SIZE,
    AbortedTxn,
    TxnState,
    batches_last_offset,
    control_kind,
    decode_entries,
    decode_snapshot,
    encode_entries,
    encode_snapshot,
    replay,
)

KAFKA_ENTRY = struct.Struct(">hqqqq")


# --------------------------------------------------------------------------- helpers
def data_batch(pid: int = -1, n: int = 2, *, txn: bool = False, seq: int = 0, ts: int = 1000) -> tuple:
    recs = [Record(i, ts, b"k%d" % i, b"v%d" % i, []) for i in range(n)]
    raw = build_batch(recs, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                      base_sequence=seq if pid >= 0 else -1, is_transactional=txn)
    return read_header(raw), raw


def marker(pid: int, commit: bool) -> tuple:
    raw = build_end_txn_marker(commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=1000)
    return read_header(raw), raw


def open_log(path: Path, clock=None, **cfg) -> PartitionLog:
    cfg.setdefault("fsync", "never")
    return PartitionLog.open(path, LogConfig(**cfg), clock=clock or time.time)


class Model:
    """Kafka's rules, written as plainly as possible (the oracle)."""

    def __init__(self) -> None:
        self.open: dict[int, int] = {}
        self.aborted: list[AbortedTxn] = []

    def apply(self, kind: str, pid: int, base: int) -> None:
        if kind == "txn":
            self.open.setdefault(pid, base)
        elif kind in ("commit", "abort") and pid in self.open:
            first = self.open.pop(pid)
            if kind == "abort":
                lso = min(self.open.values()) if self.open else base + 1
                self.aborted.append(AbortedTxn(pid, first, base, lso))

    def lso(self, log_start: int, leo: int) -> int:
        return max(min(self.open.values()), log_start) if self.open else leo

    def overlapping(self, start: int, upper: int) -> list[tuple[int, int]]:
        return [(a.producer_id, a.first_offset) for a in self.aborted if a.last_offset >= start and a.first_offset < upper]


def run_history(plog: PartitionLog, seed: int, steps: int = 120) -> tuple[Model, list[tuple[str, int, int, int]]]:
    """Random appends (plain, idempotent, transactional batches of 4 producers, markers), one to
    three batches an append; returns the model and the events as (kind, pid, base, last)."""
    rng = random.Random(seed)
    model = Model()
    events = []
    seqs: dict[int, int] = {}
    for _ in range(steps):
        batch = []
        kinds = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            r = rng.random()
            pid = rng.randint(1, 4)
            if r < 0.2:
                batch.append(data_batch(-1, rng.randint(1, 3)))
                kinds.append(("plain", -1))
            elif r < 0.6:
                seq = seqs.get(pid, 0)
                h, raw = data_batch(pid, rng.randint(1, 3), txn=True, seq=seq)
                seqs[pid] = seq + h.records_count
                batch.append((h, raw))
                kinds.append(("txn", pid))
            else:
                commit = rng.random() < 0.5
                batch.append(marker(pid, commit))
                kinds.append(("commit" if commit else "abort", pid))
        result = plog.append(batch)
        off = result.base_offset
        for (h, _), (kind, pid) in zip(batch, kinds, strict=True):
            model.apply(kind, pid, off)
            events.append((kind, pid, off, off + h.last_offset_delta))
            off += h.last_offset_delta + 1
    return model, events


def check_state(plog: PartitionLog, model: Model, *, samples: int = 200, seed: int = 0) -> None:
    leo = plog.log_end_offset
    start = plog.log_start_offset
    assert plog.open_transactions() == sorted(model.open.items(), key=lambda x: x[1])
    assert plog.last_stable_offset == model.lso(start, leo)
    assert plog._txn.aborted == model.aborted
    rng = random.Random(seed)
    pairs = [(0, leo + 1), (start, leo)] + [tuple(sorted(rng.sample(range(leo + 2), 2))) for _ in range(samples)]
    for a, b in pairs:
        assert plog.aborted_transactions(a, b) == model.overlapping(a, b), (a, b)


def txn_files(path: Path) -> dict[str, bytes]:
    """The partition's .txnindex files (named by a segment's base offset) and their contents."""
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name.endswith(".txnindex") and p.name[:20].isdigit()}


def expected_index_files(plog: PartitionLog, model: Model) -> dict[str, bytes]:
    bases = plog.segment_base_offsets()
    out: dict[str, bytes] = {}
    for i, b in enumerate(bases):
        hi = bases[i + 1] if i + 1 < len(bases) else None
        entries = [a for a in model.aborted if a.last_offset >= b and (hi is None or a.last_offset < hi)]
        if entries:
            out[f"{b:020d}.txnindex"] = b"".join(KAFKA_ENTRY.pack(0, *a) for a in entries)
    return out


# --------------------------------------------------------------------------- the state machine
def test_transactions_open_close_and_the_lso():
    st = TxnState()
    assert st.first_unstable_offset is None
    st.on_data(7, 10)
    st.on_data(8, 12)
    st.on_data(7, 14)  # already open: the first offset stays
    assert st.open_txns() == [(7, 10), (8, 12)] and st.first_unstable_offset == 10
    assert st.on_marker(9, 16, ABORT) is None  # no transaction of 9: nothing
    assert st.on_marker(7, 17, COMMIT) is None  # a commit records nothing
    assert st.first_unstable_offset == 12
    # the abort's LSO: the earliest transaction still open ...
    st.on_data(7, 18)
    assert st.on_marker(7, 20, ABORT) == AbortedTxn(7, 18, 20, 12)
    # ... or the marker + 1 when none is
    assert st.on_marker(8, 21, ABORT) == AbortedTxn(8, 12, 21, 22)
    assert st.first_unstable_offset is None and st.open_txns() == []
    assert st.on_marker(8, 22, ABORT) is None  # a second marker: nothing open any more
    assert [a.last_offset for a in st.aborted] == [20, 21]


def test_collect_lists_overlapping_aborted_transactions_and_stops_early():
    st = TxnState()
    st.on_data(1, 0)
    st.on_data(2, 5)
    st.on_marker(2, 8, ABORT)  # [5, 8], LSO 0 (1 still open)
    st.on_marker(1, 9, ABORT)  # [0, 9], LSO 10
    st.on_data(3, 20)
    st.on_marker(3, 25, ABORT)  # [20, 25], LSO 26
    assert st.collect(0, 100) == [(2, 5), (1, 0), (3, 20)]
    assert st.collect(9, 10) == [(1, 0)]  # the marker offset itself overlaps
    assert st.collect(10, 20) == []  # a gap between transactions
    assert st.collect(6, 7) == [(2, 5), (1, 0)]
    assert st.collect(26, 30) == []
    assert st.collect(0, 5) == [(1, 0)]  # exclusive upper bound: [5, 8] starts at 5
    assert st.has_aborted_from(25) and not st.has_aborted_from(26)
    st.drop_aborted_below(9)
    assert [a.producer_id for a in st.aborted] == [1, 3]


@pytest.mark.parametrize("seed", range(20))
def test_collect_matches_the_model_on_random_histories(seed):
    rng = random.Random(seed)
    st, model = TxnState(), Model()
    off = 0
    for _ in range(300):
        pid = rng.randint(1, 6)
        kind = rng.choice(("txn", "txn", "plain", "commit", "abort"))
        if kind == "txn":
            st.on_data(pid, off)
        elif kind != "plain":
            st.on_marker(pid, off, ABORT if kind == "abort" else COMMIT)
        model.apply(kind, pid, off)
        off += rng.randint(1, 3)
    assert st.aborted == model.aborted and st.consistent()
    for _ in range(500):
        a, b = sorted(rng.sample(range(off + 2), 2))
        assert st.collect(a, b) == model.overlapping(a, b), (a, b)


# --------------------------------------------------------------------------- file formats
def test_txnindex_entries_are_kafkas_34_byte_format():
    entries = [AbortedTxn(5, 10, 12, 13), AbortedTxn(6, 3, 20, 21)]
    raw = encode_entries(entries)
    assert ENTRY_SIZE == 34 and len(raw) == 68
    assert raw[:34] == struct.pack(">hqqqq", 0, 5, 10, 12, 13)
    assert decode_entries(raw) == entries
    assert decode_entries(b"") == []


@pytest.mark.parametrize(
    "raw",
    [
        encode_entries([AbortedTxn(5, 10, 12, 13)])[:-1],  # torn
        encode_entries([AbortedTxn(5, 10, 12, 13)]) + b"\x00" * 10,  # trailing junk
        struct.pack(">hqqqq", 1, 5, 10, 12, 13),  # unknown version
        struct.pack(">hqqqq", 0, -5, 10, 12, 13),  # negative producer id
        struct.pack(">hqqqq", 0, 5, 12, 10, 11),  # first past last
        struct.pack(">hqqqq", 0, 5, 10, 12, 99),  # LSO past the marker + 1
        encode_entries([AbortedTxn(5, 10, 12, 13)]) + encode_entries([AbortedTxn(6, 1, 11, 13)]),  # out of order
        encode_entries([AbortedTxn(5, 10, 12, 13)]) + encode_entries([AbortedTxn(6, 14, 15, 12)]),  # LSO going back
        os.urandom(34 * 3),
    ],
)
def test_txnindex_that_is_not_one_is_refused(raw):
    assert decode_entries(raw) is None


def test_snapshot_round_trip_and_refusals():
    raw = encode_snapshot(100, [(7, 10), (8, 50)])
    assert decode_snapshot(raw, 100) == [(7, 10), (8, 50)]
    assert decode_snapshot(encode_snapshot(5, []), 5) == []
    assert decode_snapshot(raw, 99) is None  # not the offset its name says
    flipped = bytearray(raw)
    flipped[-1] ^= 1
    assert decode_snapshot(bytes(flipped), 100) is None  # CRC
    assert decode_snapshot(raw[:-3], 100) is None
    assert decode_snapshot(b"", 100) is None
    assert decode_snapshot(encode_snapshot(10, [(7, 10)]), 10) is None  # open at or past the snapshot
    assert decode_snapshot(encode_snapshot(20, [(7, 10), (7, 11)]), 20) is None  # a producer twice


def test_control_kind_of_markers_and_of_everything_else():
    assert control_kind(marker(5, True)[1]) == COMMIT
    assert control_kind(marker(5, False)[1]) == ABORT
    assert control_kind(marker(5, False)[1][:61 + 40]) == ABORT  # a prefix is enough
    empty = build_empty_batch(base_offset=0, last_offset_delta=0, base_timestamp=0, max_timestamp=0,
                              producer_id=5, producer_epoch=0, is_transactional=True, is_control=True)
    assert control_kind(empty) is None  # compaction emptied it
    other = build_batch([Record(0, 0, struct.pack(">hh", 0, 3), b"", [])], producer_id=5, producer_epoch=0,
                        is_transactional=True, is_control=True)
    assert control_kind(other) is None  # not a transaction marker
    gz = build_batch([Record(0, 0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 0), [])], compression=1,
                     producer_id=5, producer_epoch=0, is_transactional=True, is_control=True)
    assert control_kind(gz) == COMMIT
    assert control_kind(os.urandom(200)) is None
    assert control_kind(b"\x00" * 10) is None


def test_batches_last_offset():
    a = build_batch([Record(10 + i, 0, None, b"x", []) for i in range(3)], base_offset=10)
    b = build_batch([Record(13 + i, 0, None, b"x", []) for i in range(2)], base_offset=13)
    assert batches_last_offset(a + b) == 14
    assert batches_last_offset(memoryview(a + b)[: len(a)]) == 12
    assert batches_last_offset(b"") == -1


# --------------------------------------------------------------------------- the log
def test_a_partition_without_transactions_has_no_transaction_files(tmp_path):
    path = tmp_path / "p-0"
    plog = open_log(path, segment_bytes=300)
    for _ in range(20):
        plog.append([data_batch()])
    assert plog.last_stable_offset == plog.log_end_offset
    assert plog.aborted_transactions(0, 100) == [] and not plog.has_aborted_after(0)
    plog.close()
    plog = open_log(path, segment_bytes=300)
    plog.append([data_batch()])
    plog.close()
    assert not [n for n in os.listdir(path) if "txn" in n]


def test_lso_read_upto_and_aborted_transactions(tmp_path):
    plog = open_log(tmp_path / "p-0")
    plog.append([data_batch(n=3)])  # 0-2
    plog.append([data_batch(1, txn=True)])  # 3-4, opens 1
    plog.append([data_batch(n=2)])  # 5-6
    assert plog.last_stable_offset == 3
    got = split_batches(plog.read(0, 1 << 20, upto=plog.last_stable_offset))
    assert [h.base_offset for h, _ in got] == [0]
    assert plog.read(3, 1 << 20, upto=3) == b"" and plog.read(5, 1 << 20, upto=3) == b""
    assert len(split_batches(plog.read(0, 1 << 20))) == 3  # read uncommitted: everything
    assert plog.read(0, 1 << 20, upto=plog.log_end_offset) == plog.read(0, 1 << 20)
    plog.append([marker(1, False)])  # 7
    assert plog.last_stable_offset == plog.log_end_offset == 8
    assert plog.aborted_transactions(0, 8) == [(1, 3)]
    assert plog.aborted_transactions(5, 7) == [(1, 3)]  # overlaps [3, 7]
    assert plog.aborted_transactions(8, 9) == [] and plog.aborted_transactions(0, 3) == []
    # a batch straddling the bound is left out whole
    plog.append([data_batch(2, n=3, txn=True)])  # 8-10
    assert plog.read(8, 1 << 20, upto=9) == b""


def test_txnindex_written_at_the_abort_in_kafkas_format(tmp_path):
    path = tmp_path / "p-0"
    plog = open_log(path, fsync="always")
    plog.append([data_batch(4, txn=True), data_batch(5, txn=True)])  # 0-1, 2-3
    plog.append([marker(4, False)])  # 4: LSO 2 (5 still open)
    assert txn_files(path) == {"00000000000000000000.txnindex": struct.pack(">hqqqq", 0, 4, 0, 4, 2)}
    plog.append([marker(5, True)])  # a commit writes nothing
    assert len(txn_files(path)["00000000000000000000.txnindex"]) == 34
    assert (path / "00000000000000000000.txnsnapshot").exists()  # the first transactional batch's


@pytest.mark.parametrize("seed", range(6))
def test_state_after_restart_crash_and_full_replay_is_the_one_appends_built(tmp_path, seed):
    path = tmp_path / "p-0"
    plog = open_log(path, segment_bytes=500, index_interval_bytes=100)
    model, _ = run_history(plog, seed)
    assert len(plog.segment_base_offsets()) > 3
    check_state(plog, model, seed=seed)
    plog.flush()  # the rolled segments' snapshots are written
    # a fresh replay of the whole log agrees
    st = TxnState()
    replay(st, plog.iter_segments(), plog.log_start_offset)
    assert st.aborted == model.aborted and st.open == model.open
    # a crash (no close): the newest snapshot plus a replay of what follows it
    crashed = open_log(path, segment_bytes=500, index_interval_bytes=100)
    check_state(crashed, model, seed=seed)
    assert txn_files(path) == expected_index_files(crashed, model)
    crashed.close()
    # a clean restart: no replay at all
    plog = open_log(path, segment_bytes=500, index_interval_bytes=100)
    check_state(plog, model, seed=seed)
    # snapshots that do not parse: the whole log is replayed
    plog.close()
    for p in path.iterdir():
        if p.name.endswith(".txnsnapshot"):
            p.write_bytes(os.urandom(40))
    plog = open_log(path, segment_bytes=500, index_interval_bytes=100)
    check_state(plog, model, seed=seed)
    assert txn_files(path) == expected_index_files(plog, model)
    # and more appends after all that carry on from the same state
    more, _ = run_history(plog, seed + 100, steps=30)
    plog.close()
    plog = open_log(path, segment_bytes=500, index_interval_bytes=100)
    assert plog.last_stable_offset <= plog.log_end_offset
    st = TxnState()
    replay(st, plog.iter_segments(), plog.log_start_offset)
    assert plog._txn.aborted == st.aborted and plog._txn.open == st.open


def _aborting_log(path: Path, **cfg):
    """Three aborted transactions (one per segment with segment_bytes=400), one left open."""
    cfg.setdefault("segment_bytes", 400)
    plog = open_log(path, **cfg)
    model = Model()
    for pid in (1, 2, 3, 4):
        r = plog.append([data_batch(pid, txn=True)])
        model.apply("txn", pid, r.base_offset)
        plog.append([data_batch(n=3)])
        if pid != 4:
            r = plog.append([marker(pid, False)])
            model.apply("abort", pid, r.base_offset)
    return plog, model


@pytest.mark.parametrize("damage", ["torn", "junk", "garbage", "version", "outside", "huge", "bad-name"])
def test_damaged_txnindex_is_rebuilt(tmp_path, damage):
    path = tmp_path / "p-0"
    plog, model = _aborting_log(path)
    plog.close()
    files = sorted(p for p in path.iterdir() if p.name.endswith(".txnindex"))
    assert len(files) >= 2
    victim = files[0]
    raw = victim.read_bytes()
    if damage == "torn":
        victim.write_bytes(raw[:-5])
    elif damage == "junk":
        victim.write_bytes(raw + b"\xff" * 34)
    elif damage == "garbage":
        victim.write_bytes(os.urandom(len(raw)))
    elif damage == "version":
        victim.write_bytes(b"\x00\x07" + raw[2:])
    elif damage == "outside":  # an entry whose marker is below the file's segment
        files[1].write_bytes(struct.pack(">hqqqq", 0, 9, 0, 0, 1) + files[1].read_bytes())
    elif damage == "huge":
        with open(victim, "ab") as f:
            f.truncate(64 << 20)
    elif damage == "bad-name":
        (path / "junk.txnindex").write_bytes(b"x")
        (path / "00000000000000000000.txnsnapshot").write_bytes(b"nonsense")
    plog = open_log(path, segment_bytes=400)
    check_state(plog, model)
    assert txn_files(path) == expected_index_files(plog, model)
    if damage == "bad-name":
        assert (path / "junk.txnindex").read_bytes() == b"x"  # not ours: left alone


def test_torn_tail_reopens_the_aborted_transaction_and_drops_its_entry(tmp_path):
    path = tmp_path / "p-0"
    plog = open_log(path)  # one segment
    r = plog.append([data_batch(1, txn=True)])
    plog.append([data_batch(n=2)])
    m = plog.append([marker(1, False)])
    assert plog.aborted_transactions(0, 100) == [(1, r.base_offset)]
    assert plog.last_stable_offset == plog.log_end_offset
    plog.flush()
    log_file = path / "00000000000000000000.log"
    # the marker torn in the crash, its index entry written
    with open(log_file, "r+b") as f:
        f.truncate(log_file.stat().st_size - 5)
    plog = open_log(path)
    assert plog.log_end_offset == m.base_offset
    assert plog.aborted_transactions(0, 100) == []
    assert plog.open_transactions() == [(1, r.base_offset)]
    assert plog.last_stable_offset == r.base_offset
    assert txn_files(path) == {}  # the entry is gone with its marker


def test_marker_written_but_not_its_index_entry(tmp_path):
    path = tmp_path / "p-0"
    plog, model = _aborting_log(path)
    plog.flush()
    for p in path.iterdir():
        if p.name.endswith(".txnindex"):
            p.unlink()  # the entries the crash lost are past the newest snapshot ...
            break
    # ... or not: then only a replay from an earlier snapshot finds them; take them all away
    for p in path.iterdir():
        if p.name.endswith(".txnsnapshot") and p.name != "00000000000000000000.txnsnapshot":
            p.unlink()
    crashed = open_log(path, segment_bytes=400)
    check_state(crashed, model)
    assert txn_files(path) == expected_index_files(crashed, model)


def test_truncation_reopens_transactions_and_drops_their_aborts(tmp_path):
    path = tmp_path / "p-0"
    plog = open_log(path, segment_bytes=500)
    model, events = run_history(plog, 7, steps=80)
    for cut in sorted({e[2] for e in events[::7]}, reverse=True):
        new_leo = plog.truncate_to(cut)
        expect = Model()
        for kind, pid, base, last in events:
            if last < new_leo:
                expect.apply(kind, pid, base)
        check_state(plog, expect, samples=50)
        assert txn_files(path) == expected_index_files(plog, expect)
        crashed = open_log(path, segment_bytes=500)
        check_state(crashed, expect, samples=20)
        crashed.close()
        plog.close()
        plog = open_log(path, segment_bytes=500)
        check_state(plog, expect, samples=20)
        events = [e for e in events if e[3] < new_leo]
    assert plog.truncate_to(0) == 0
    assert plog.open_transactions() == [] and plog.aborted_transactions(0, 10) == []
    plog.append([data_batch(3, txn=True)])
    assert plog.last_stable_offset == 0


def test_truncation_then_more_appends_after_a_stale_snapshot(tmp_path):
    path = tmp_path / "p-0"
    plog = open_log(path, segment_bytes=300)
    plog.append([data_batch(n=2)])  # 0-1
    plog.append([data_batch(1, txn=True)])  # 2-3 (snapshot at 2: nothing open)
    for _ in range(5):
        plog.append([data_batch(n=2)])
    plog.flush()
    plog.truncate_to(2)
    plog.append([data_batch(2, txn=True)])  # 2-3 again, another producer
    for _ in range(5):
        plog.append([data_batch(n=2)])
    plog.append([marker(2, False)])
    plog.flush()
    crashed = open_log(path, segment_bytes=300)
    assert crashed.open_transactions() == [] and crashed.aborted_transactions(0, 100) == [(2, 2)]


def test_retention_and_delete_records_keep_the_state_consistent(tmp_path):
    path = tmp_path / "p-0"
    cfg = dict(segment_bytes=400, retention_bytes=1, retention_ms=-1)
    plog = open_log(path, **cfg)
    model = Model()
    first = plog.append([data_batch(9, txn=True)]).base_offset  # stays open
    model.apply("txn", 9, first)
    for pid in (1, 2, 3):
        model.apply("txn", pid, plog.append([data_batch(pid, txn=True)]).base_offset)
        plog.append([data_batch(n=3)])
        model.apply("abort", pid, plog.append([marker(pid, False)]).base_offset)
    plog.append([data_batch(n=3)])
    plog.flush()
    assert plog.last_stable_offset == first
    check_state(plog, model)
    deleted = plog.enforce_retention()
    assert deleted > 0 and plog.log_start_offset > first
    # the open transaction began in a deleted segment: the LSO is the log start offset
    assert plog.open_transactions() == [(9, first)]
    assert plog.last_stable_offset == plog.log_start_offset
    start, end = plog.log_start_offset, plog.log_end_offset
    assert plog.aborted_transactions(start, end + 1) == model.overlapping(start, end + 1)
    bases = set(plog.segment_base_offsets())
    assert all(int(n[:20]) in bases for n in txn_files(path))  # the deleted segments' indexes went with them
    assert [n for n in os.listdir(path) if n.endswith(".txnsnapshot")]  # the newest stays
    r = plog.append([data_batch(5, txn=True)])
    plog.append([marker(5, False)])  # the entries of deleted segments are dropped at a marker
    assert all(a.last_offset >= min(bases) for a in plog._txn.aborted)
    plog.append([marker(9, True)])  # closes the old one: the LSO is the log end again
    assert plog.last_stable_offset == plog.log_end_offset
    plog.close()
    plog = open_log(path, **cfg)
    assert plog.last_stable_offset == plog.log_end_offset
    assert (5, r.base_offset) in plog.aborted_transactions(plog.log_start_offset, plog.log_end_offset)
    # DeleteRecords past everything, a transaction open below it
    r = plog.append([data_batch(6, txn=True)])
    plog.append([data_batch(n=2)])
    plog.delete_records_before(plog.log_end_offset)
    assert plog.last_stable_offset == plog.log_start_offset == plog.log_end_offset
    assert plog.open_transactions() == [(6, r.base_offset)]
    m = plog.append([marker(6, False)]).base_offset
    assert plog.aborted_transactions(m, m + 1) == [(6, r.base_offset)]
    plog.close()
    plog = open_log(path, **cfg)
    assert plog.aborted_transactions(m, m + 1) == [(6, r.base_offset)]
    assert plog.last_stable_offset == plog.log_end_offset


def test_compaction_keeps_the_transaction_indexes(tmp_path):
    path = tmp_path / "c-0"
    cfg = dict(segment_bytes=400, cleanup_policy="compact", min_cleanable_dirty_ratio=0.01)
    plog, model = _aborting_log(path, **cfg)
    for _ in range(20):
        plog.append([data_batch(n=1)])
    assert len(txn_files(path)) >= 2
    plog.update_config(LogConfig(fsync="never", cleanup_policy="compact", min_cleanable_dirty_ratio=0.01))
    stats = plog.compact()  # one group: the segments are merged into the first one
    assert stats is not None and stats.segments_out == 1 < stats.segments_in
    check_state(plog, model)
    bases = set(plog.segment_base_offsets())
    assert all(int(n.split(".")[0]) in bases for n in txn_files(path))  # merged, none left behind
    assert txn_files(path) == expected_index_files(plog, model)
    snaps = sorted(int(n[:20]) for n in os.listdir(path) if n.endswith(".txnsnapshot"))
    assert set(snaps[:-1]) <= bases  # those of the replaced segments are gone
    crashed = open_log(path, **cfg)
    check_state(crashed, model)
    crashed.close()
    plog.close()
    plog = open_log(path, **cfg)
    check_state(plog, model)


def test_compaction_interrupted_after_deleting_the_old_segments(tmp_path):
    path = tmp_path / "c-0"
    cfg = dict(segment_bytes=400, cleanup_policy="compact", min_cleanable_dirty_ratio=0.01)
    plog, model = _aborting_log(path, **cfg)
    for _ in range(20):
        plog.append([data_batch(n=1)])

    class Crash(BaseException):
        pass

    def hook(stage):
        if stage == "deleted":
            raise Crash()

    plog._crash_hook = hook
    plog.update_config(LogConfig(fsync="never", cleanup_policy="compact", min_cleanable_dirty_ratio=0.01))
    with pytest.raises(Crash):
        plog.compact()
    logs = {n[:20] for n in os.listdir(path) if n.endswith(".log")}
    assert [n for n in txn_files(path) if n[:20] not in logs]  # indexes of the replaced segments
    crashed = open_log(path, **cfg)  # the swap is completed, the orphaned indexes merged
    check_state(crashed, model)
    assert txn_files(path) == expected_index_files(crashed, model)


def test_fsync_always_syncs_the_index_at_the_append(tmp_path, monkeypatch):
    import storage.segment as seg_mod

    path = tmp_path / "p-0"
    plog = open_log(path, fsync="always")
    plog.append([data_batch(1, txn=True)])
    synced = []
    real = seg_mod._fdatasync
    monkeypatch.setattr(seg_mod, "_fdatasync", lambda fd: (synced.append(fd), real(fd)))
    plog.append([marker(1, False)])
    seg = next(iter(plog.iter_segments()))
    assert seg.txn_fh is not None and seg.txn_fh.fd in synced and seg.txn_flushed == seg.txn_size == 34


def test_opening_replays_only_what_follows_the_newest_snapshot(tmp_path, monkeypatch):
    import storage.recovery as rec

    path = tmp_path / "p-0"
    plog = open_log(path, segment_bytes=500)
    model, _ = run_history(plog, 3, steps=60)
    plog.flush()  # the snapshot of the last roll is written
    active_base = plog.segment_base_offsets()[-1]
    starts = []
    real = rec.replay
    monkeypatch.setattr(rec, "replay", lambda st, segs, start, *a: (starts.append(start), real(st, segs, start, *a)))
    crashed = open_log(path, segment_bytes=500)
    assert starts == [active_base]  # a crash: the active segment only
    check_state(crashed, model)
    crashed.close()
    starts.clear()
    plog = open_log(path, segment_bytes=500)
    assert starts == [plog.log_end_offset]  # a clean shutdown: nothing
    check_state(plog, model)


def test_a_partition_without_transaction_files_reads_nothing_for_them(tmp_path, monkeypatch):
    import storage.recovery as rec

    path = tmp_path / "p-0"
    plog = open_log(path)
    plog.append([data_batch(n=3)])
    plog.close()

    def boom(*a, **kw):
        raise AssertionError("recover_txn ran")

    monkeypatch.setattr(rec, "recover_txn", boom)
    plog = open_log(path)  # crash-free and clean alike
    assert plog.last_stable_offset == 3 and not plog._txn.tracked
