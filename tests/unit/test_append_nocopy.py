"""The append path writes the request's batch bytes without copying them: the
patched 16-byte heads and the rest of each batch go out in one pwritev. These
tests hold it to the bytes: offsets and leader epoch patched, CRCs intact, the
request's buffer untouched, short writes resumed, more batches than IOV_MAX."""

from __future__ import annotations

import os
import time

import pytest

from protocol.records import Record, build_batch, iter_records, split_batches, verify_crc
from storage import segment as segment_mod
from storage.config import LogConfig
from storage.log import PartitionLog


def blob(nbatches: int, per: int = 3) -> bytes:
    return b"".join(
        build_batch([Record(offset=j, timestamp=1000 + b, key=b"k%d" % j, value=b"v%d-%d" % (b, j)) for j in range(per)])
        for b in range(nbatches)
    )


def check_log(plog: PartitionLog, nbatches: int, per: int, epoch: int | None) -> None:
    data = bytes(plog.read(0, 1 << 30))
    got = split_batches(data)  # every CRC checked
    assert len(got) == nbatches
    for i, (hdr, batch) in enumerate(got):
        assert hdr.base_offset == i * per
        assert verify_crc(batch)
        if epoch is not None:
            assert hdr.partition_leader_epoch == epoch
        assert [r.value for r in iter_records(batch)] == [b"v%d-%d" % (i, j) for j in range(per)]


@pytest.mark.parametrize("nbatches", [1, 2, 700, 1500])
def test_append_patches_heads_not_the_request(tmp_path, nbatches):
    raw = bytearray(blob(nbatches))  # writable: patching it in place would go unnoticed otherwise
    before = bytes(raw)
    plog = PartitionLog.open(tmp_path / "p", LogConfig(), clock=time.time)
    try:
        plog.append(split_batches(raw), leader_epoch=7)
        assert raw == before  # the request's bytes were not patched in place
        check_log(plog, nbatches, 3, 7)
    finally:
        plog.close()


def test_short_writes_are_resumed(tmp_path, monkeypatch):
    real = os.pwritev
    calls = []

    def stingy(fd, buffers, offset):  # at most 5 bytes a call, cutting buffers anywhere
        out = b"".join(bytes(b) for b in buffers)[:5]
        calls.append(len(buffers))
        return os.pwrite(fd, out, offset)

    monkeypatch.setattr(segment_mod.os, "pwritev", stingy)
    plog = PartitionLog.open(tmp_path / "p", LogConfig(), clock=time.time)
    try:
        raw = blob(4)
        plog.append(split_batches(raw))
        assert len(calls) > 10
        monkeypatch.setattr(segment_mod.os, "pwritev", real)
        check_log(plog, 4, 3, None)
    finally:
        plog.close()


def test_log_append_time_batches_are_copied_and_stamped(tmp_path):
    raw = bytearray(blob(3))
    before = bytes(raw)
    plog = PartitionLog.open(tmp_path / "p", LogConfig(message_timestamp_type="LogAppendTime"), clock=time.time)
    try:
        plog.append(split_batches(raw), log_append_time_ms=123456)
        assert raw == before
        data = bytes(plog.read(0, 1 << 30))
        for hdr, batch in split_batches(data):
            assert hdr.max_timestamp == 123456 and verify_crc(batch)
    finally:
        plog.close()


def test_pwritev_all_more_buffers_than_iov_max(tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    fh = segment_mod.FileHandle(fd)
    try:
        bufs = [bytes([i % 251]) * (i % 5) for i in range(3 * segment_mod._IOV_MAX + 7)]
        fh.pwritev_all(bufs, 3)
        assert os.pread(fd, 1 << 20, 3) == b"".join(bufs)
    finally:
        fh.close()


def test_a_read_is_unaffected_by_truncation_retention_and_deletion_after_it(tmp_path):
    """What ``read`` returns (the pread bytes, or a view of them) goes to the socket later, uncopied:
    the segment truncated, deleted by retention or the whole log deleted meanwhile must not touch it."""
    cfg = LogConfig(segment_bytes=1000, retention_bytes=0)
    plog = PartitionLog.open(tmp_path / "p", cfg, clock=time.time)
    for _ in range(12):
        plog.append(split_batches(blob(1, per=20)))
    assert len(plog.segment_base_offsets()) > 2
    size = len(blob(1, per=20))
    views = [plog.read(0, size * 3 // 2), plog.read(0, 1 << 20), plog.read(40, 10, min_one=True)]
    assert any(type(v) is memoryview for v in views)
    before = [bytes(v) for v in views]
    plog.truncate_to(30)
    assert plog.enforce_retention() > 0
    plog.delete()
    assert [bytes(v) for v in views] == before
    for v in views:
        for _hdr, batch in split_batches(bytes(v)):
            assert verify_crc(batch)
