"""DeleteRecords (``PartitionLog.delete_records_before``) on the appending thread while
retention and compaction run on another, as the broker runs them: the log stays whole.

After every step the log must read back, from its start offset to its end, as contiguous
batches; a reopen (recovery) must find the same start offset and the same records.
"""

from __future__ import annotations

import threading

from protocol.records import iter_records, split_batches
from storage import OffsetOutOfRangeError
from tests.unit.test_storage import kv, open_log


def _records(plog) -> list[tuple[int, bytes]]:
    """(offset, key) of every record from the log start on, reading batch by batch; read again
    from the new start when retention moves it meanwhile (a fetch's OFFSET_OUT_OF_RANGE)."""
    while True:
        start = plog.log_start_offset
        try:
            return _records_from(plog, start)
        except OffsetOutOfRangeError:
            if plog.log_start_offset == start:
                raise


def _records_from(plog, offset: int) -> list[tuple[int, bytes]]:
    out = []
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20)
        batches = split_batches(bytes(data))
        assert batches, f"nothing read at {offset} of {plog}"
        for header, raw in batches:
            for rec in iter_records(raw):
                if rec.offset >= plog.log_start_offset:
                    out.append((rec.offset, rec.key))
            offset = header.base_offset + header.last_offset_delta + 1
    return out


def test_delete_records_with_retention_and_compaction_running(tmp_path):
    plog = open_log(tmp_path / "t-0", segment_bytes=300, cleanup_policy="compact,delete", min_cleanable_dirty_ratio=0.01,
                    retention_bytes=20_000)
    stop = threading.Event()
    errors: list[BaseException] = []

    def maintain():
        try:
            while not stop.is_set():
                plog.enforce_retention()
                if plog.needs_compaction():
                    plog.compact()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    worker = threading.Thread(target=maintain, daemon=True)
    worker.start()
    try:
        starts = []
        for i in range(600):
            plog.append([kv(f"k{i % 40}", f"v{i}")])
            if i % 25 == 24:
                target = min(plog.log_end_offset, plog.log_start_offset + 7)
                starts.append(plog.delete_records_before(target))
                recs = _records(plog)
                assert all(o >= starts[-1] for o, _ in recs)  # nothing below what DeleteRecords answered
                assert [o for o, _ in recs] == sorted({o for o, _ in recs})
    finally:
        stop.set()
        worker.join(30)
    assert not errors, errors
    assert starts == sorted(starts) and starts[-1] > 0
    start, end, recs = plog.log_start_offset, plog.log_end_offset, _records(plog)
    plog.close()
    reopened = open_log(tmp_path / "t-0", segment_bytes=300, cleanup_policy="compact,delete")
    assert (reopened.log_start_offset, reopened.log_end_offset) == (start, end)
    assert _records(reopened) == recs
    reopened.close()
