"""Tests for protocol.records / protocol.compression (RecordBatch v2)."""

from __future__ import annotations

import os
import struct
import types

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import compression as comp
from protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    Record,
    build_batch,
    build_empty_batch,
    build_end_txn_marker,
    build_key_value_batch,
    iter_records,
    parse_control_key,
    parse_end_txn_marker_value,
    patch_base_offset,
    read_header,
    scan_valid_prefix,
    set_log_append_time,
    split_batches,
    validate_produce_batch,
    verify_crc,
)

CODECS = [0, 1, 2, 3, 4]
CODEC_IDS = ["none", "gzip", "snappy", "lz4", "zstd"]


def sample_records(base=0, n=5):
    recs = [
        Record(base + 0, 1_700_000_000_000, b"key-0", b"value-0" * 20, [("h1", b"v1"), ("h2", None)]),
        Record(base + 1, 1_700_000_000_005, None, b"value-1" * 20),
        Record(base + 2, 1_699_999_999_000, b"key-2", None, [("\u00e9t\u00e9", b"")]),
        Record(base + 3, 1_700_000_000_100, b"", b""),
        Record(base + 4, 1_700_000_000_050, b"\x00\xff" * 300, b"x" * 5000),
    ]
    return recs[:n]


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_round_trip_all_codecs(codec):
    recs = sample_records(base=100)
    raw = build_batch(recs, base_offset=100, compression=codec, producer_id=7, producer_epoch=3,
                      base_sequence=42, partition_leader_epoch=9)
    [(hdr, view)] = split_batches(raw)
    assert len(view) == hdr.size == len(raw)
    assert hdr.magic == 2
    assert hdr.compression == codec
    assert hdr.base_offset == 100
    assert hdr.last_offset == 104
    assert hdr.next_offset == 105
    assert hdr.records_count == 5
    assert hdr.base_timestamp == recs[0].timestamp  # first record, as Kafka does
    assert hdr.max_timestamp == max(r.timestamp for r in recs)
    assert (hdr.producer_id, hdr.producer_epoch, hdr.base_sequence) == (7, 3, 42)
    assert hdr.last_sequence == 46
    assert hdr.partition_leader_epoch == 9
    assert hdr.timestamp_type == 0 and not hdr.is_transactional and not hdr.is_control
    assert list(iter_records(view)) == recs
    assert list(iter_records(raw)) == recs
    assert verify_crc(raw) and verify_crc(view)


def test_offset_gaps_and_flags():
    recs = [Record(10, 5, b"a", b"1"), Record(13, 7, b"b", b"2"), Record(20, 6, None, None)]
    raw = build_batch(recs, base_offset=8, is_transactional=True, producer_id=1, producer_epoch=0,
                      base_sequence=0)
    hdr = read_header(raw)
    assert hdr.last_offset_delta == 12 and hdr.last_offset == 20
    assert hdr.records_count == 3
    assert hdr.is_transactional
    assert list(iter_records(raw)) == recs


def test_build_batch_rejects_empty_and_bad_offsets():
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([Record(1, 0, None, None), Record(1, 0, None, None)])
    with pytest.raises(ValueError):
        build_batch([Record(1, 0, None, None)], base_offset=2)
    with pytest.raises(ValueError):
        build_batch([Record(0, 0, None, None)], compression=9)


def test_log_append_time_build_and_iter():
    recs = [Record(0, 100, b"a", b"1"), Record(1, 300, b"b", b"2"), Record(2, 200, b"c", b"3")]
    raw = build_batch(recs, timestamp_type=1)
    hdr = read_header(raw)
    assert hdr.timestamp_type == 1
    assert [r.timestamp for r in iter_records(raw)] == [300, 300, 300]


def test_set_log_append_time_in_place():
    raw = bytearray(build_batch(sample_records(), compression=1))
    buf = bytearray(b"\x00" * 17) + raw  # non-zero position
    set_log_append_time(buf, 17, 1_800_000_000_000)
    batch = memoryview(buf)[17:]
    assert verify_crc(batch)
    [(hdr, view)] = split_batches(batch)
    assert hdr.timestamp_type == 1
    assert hdr.max_timestamp == 1_800_000_000_000
    assert hdr.base_timestamp == sample_records()[0].timestamp
    assert hdr.compression == 1
    assert {r.timestamp for r in iter_records(view)} == {1_800_000_000_000}


def test_delete_horizon():
    recs = [Record(0, 1000, b"a", b"1"), Record(1, 1010, b"b", None)]
    raw = build_batch(recs, delete_horizon_ms=5000)
    hdr = read_header(raw)
    assert hdr.has_delete_horizon and hdr.delete_horizon_ms == 5000 and hdr.base_timestamp == 5000
    assert hdr.max_timestamp == 1010
    assert list(iter_records(raw)) == recs  # deltas relative to the horizon (negative), still exact
    assert read_header(build_batch(recs)).delete_horizon_ms is None


def test_empty_batch_and_control_markers():
    raw = build_empty_batch(base_offset=50, last_offset_delta=4, base_timestamp=10, max_timestamp=20,
                            producer_id=3, producer_epoch=1, base_sequence=0, is_transactional=True)
    [(hdr, _)] = split_batches(raw)
    assert hdr.records_count == 0 and hdr.last_offset == 54 and hdr.size == HEADER_SIZE
    assert list(iter_records(raw)) == []

    m = build_end_txn_marker(commit=True, producer_id=3, producer_epoch=1, coordinator_epoch=6,
                             timestamp=1234, base_offset=77)
    [(hdr, view)] = split_batches(m)
    assert hdr.is_control and hdr.is_transactional and hdr.base_offset == 77
    assert validate_produce_batch(hdr) is not None  # clients may not write control batches
    [rec] = iter_records(view)
    assert rec.offset == 77 and rec.timestamp == 1234
    assert parse_control_key(rec.key) == (0, 1)
    assert parse_end_txn_marker_value(rec.value) == (0, 6)
    abort = build_end_txn_marker(commit=False, producer_id=3, producer_epoch=1, coordinator_epoch=6,
                                 timestamp=1)
    assert parse_control_key(next(iter_records(abort)).key) == (0, 0)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    pairs=st.lists(st.tuples(st.binary(max_size=300), st.none() | st.binary(max_size=300)), min_size=1, max_size=150),
    timestamp=st.integers(min_value=0, max_value=2**41),
    producer=st.sampled_from([(-1, -1), (7, 3)]),
)
def test_key_value_batch_is_build_batch(pairs, timestamp, producer):
    """The coordinators' builder writes build_batch's bytes, and the header split_batches reads back."""
    pid, epoch = producer
    header, data = build_key_value_batch(pairs, timestamp, producer_id=pid, producer_epoch=epoch)
    records = [Record(offset=i, timestamp=timestamp, key=k, value=v) for i, (k, v) in enumerate(pairs)]
    assert data == build_batch(records, producer_id=pid, producer_epoch=epoch, is_transactional=pid >= 0)
    [(read, view)] = split_batches(data)  # CRC checked
    assert read == header and bytes(view) == data


def test_key_value_batch_rejects_empty():
    with pytest.raises(ValueError):
        build_key_value_batch([], 0)


def test_validate_produce_batch():
    hdr = read_header(build_batch(sample_records()))
    assert validate_produce_batch(hdr) is None
    gap = read_header(build_batch([Record(0, 0, None, b"a"), Record(2, 0, None, b"b")]))
    assert "inconsistent" in validate_produce_batch(gap)


def test_last_sequence_wraps_like_kafka():
    def hdr(base_seq, delta):
        return BatchHeader(0, 49, -1, 2, 0, 0, delta, 0, 0, 1, 0, base_seq, delta + 1)

    assert hdr(-1, 5).last_sequence == -1
    assert hdr(10, 5).last_sequence == 15
    assert hdr(2**31 - 1, 0).last_sequence == 2**31 - 1
    assert hdr(2**31 - 1, 1).last_sequence == 0
    assert hdr(2**31 - 3, 5).last_sequence == 2
    h = hdr(0, 0)
    assert h.size == 61


# --------------------------------------------------------------------------- CRC / framing


def test_crc_flip_detected():
    raw = bytearray(build_batch(sample_records()))
    raw[HEADER_SIZE + 10] ^= 0x01
    assert not verify_crc(raw)
    with pytest.raises(CorruptRecordError, match="CRC"):
        split_batches(raw)
    # verify_crc=False skips the check
    assert len(split_batches(raw, verify_crc=False)) == 1


def test_crc_flip_in_header_attributes_detected():
    raw = bytearray(build_batch(sample_records()))
    raw[22] ^= 0x10  # transactional bit (inside CRC region)
    with pytest.raises(CorruptRecordError):
        split_batches(raw)


def test_patch_base_offset_keeps_crc():
    b1 = build_batch(sample_records(n=3))
    b2 = build_batch(sample_records(n=2), compression=3)
    buf = bytearray(b1 + b2)
    batches = split_batches(buf)
    next_offset = 1000
    for hdr, view in batches:
        patch_base_offset(view, 0, next_offset, partition_leader_epoch=5)
        next_offset += hdr.last_offset_delta + 1
    # also via bytearray + position
    patch_base_offset(buf, len(b1), 2000)
    out = split_batches(bytes(buf))
    assert [h.base_offset for h, _ in out] == [1000, 2000]
    assert [h.partition_leader_epoch for h, _ in out] == [5, 5]
    assert [r.offset for r in iter_records(out[0][1])] == [1000, 1001, 1002]
    assert [r.offset for r in iter_records(out[1][1])] == [2000, 2001]


def test_split_multiple_and_views_alias_buffer():
    parts = [build_batch(sample_records(base=i * 10, n=3), base_offset=i * 10, compression=i % 5)
             for i in range(6)]
    buf = b"".join(parts)
    out = split_batches(buf)
    assert [bytes(v) for _, v in out] == parts
    assert [h.base_offset for h, _ in out] == [0, 10, 20, 30, 40, 50]
    assert split_batches(b"") == []


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda b: b[:-1], "truncated"),
        (lambda b: b + b"\x00" * 10, "truncated"),
        (lambda b: b[:40], "truncated"),
        (lambda b: b[:8] + struct.pack(">i", 48) + b[12:], "smaller than the minimum"),
        (lambda b: b[:8] + struct.pack(">i", len(b)) + b[12:], "truncated"),
        (lambda b: b[:16] + b"\x01" + b[17:], "magic"),
        (lambda b: b[:57] + struct.pack(">i", -1) + b[61:], "recordsCount"),
    ],
)
def test_split_batches_strict_errors(mutate, match):
    raw = build_batch(sample_records())
    with pytest.raises(CorruptRecordError, match=match):
        split_batches(mutate(raw), verify_crc=False)


def test_read_header_short():
    with pytest.raises(CorruptRecordError):
        read_header(b"\x00" * 60)
    raw = build_batch(sample_records())
    with pytest.raises(CorruptRecordError):
        read_header(raw, len(raw) - 10)


def test_scan_valid_prefix_truncated_and_garbage():
    parts = [build_batch(sample_records(n=k), compression=k % 5) for k in (2, 3, 4)]
    full = b"".join(parts)
    good = len(parts[0]) + len(parts[1])

    found, valid = scan_valid_prefix(full)
    assert [p for p, _ in found] == [0, len(parts[0]), good] and valid == len(full)

    for cut in (good + 1, good + 30, good + 61, len(full) - 1):
        found, valid = scan_valid_prefix(full[:cut])
        assert [p for p, _ in found] == [0, len(parts[0])]
        assert valid == good
        assert found[1][1].records_count == 3

    garbage = full[:good] + os.urandom(5000)
    found, valid = scan_valid_prefix(garbage)
    assert len(found) == 2 and valid == good

    zeros = full[:good] + b"\x00" * 4096  # preallocated/zero-filled tail
    found, valid = scan_valid_prefix(zeros)
    assert len(found) == 2 and valid == good

    corrupt = bytearray(full)
    corrupt[len(parts[0]) + 100] ^= 0xFF  # CRC failure in the 2nd batch
    found, valid = scan_valid_prefix(corrupt)
    assert len(found) == 1 and valid == len(parts[0])
    found, valid = scan_valid_prefix(corrupt, verify_crc=False)
    assert len(found) == 3

    assert scan_valid_prefix(b"") == ([], 0)


def test_iter_records_detects_bad_record_data():
    recs = [Record(0, 0, b"k", b"v")]
    raw = bytearray(build_batch(recs))
    # claim 2 records though there is only one
    struct.pack_into(">i", raw, 57, 2)
    with pytest.raises(CorruptRecordError):
        list(iter_records(raw))
    # claim 0 records -> trailing bytes
    struct.pack_into(">i", raw, 57, 0)
    with pytest.raises(CorruptRecordError):
        list(iter_records(raw))


def test_iter_records_bad_compressed_payload():
    raw = bytearray(build_batch(sample_records(), compression=4))
    raw[HEADER_SIZE:HEADER_SIZE + 8] = b"garbage!"
    with pytest.raises(CorruptRecordError):
        list(iter_records(raw))


# --------------------------------------------------------------------------- cross-check with kafka-python

from kafka.record import default_records as kp_records  # noqa: E402
import kafka.codec as kp_codec  # noqa: E402


@pytest.fixture
def kafka_python_all_codecs(monkeypatch):
    """kafka-python here only has gzip natively.  Give it the missing codec
    primitives (from cramjam) so its *own* batch/xerial framing is exercised:
    snappy gets only the raw block codec (kafka-python does the xerial framing),
    lz4 / zstd get cramjam's frame functions (not protocol.compression's)."""
    snappy_shim = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)),
    )
    monkeypatch.setattr(kp_codec, "snappy", snappy_shim)
    monkeypatch.setattr(kp_codec, "lz4", object())
    monkeypatch.setattr(kp_codec, "zstd", object())
    monkeypatch.setattr(kp_records, "lz4_encode", lambda b: bytes(cramjam.lz4.compress(b)))
    monkeypatch.setattr(kp_records, "lz4_decode", lambda b: bytes(cramjam.lz4.decompress(b)))
    monkeypatch.setattr(kp_records, "zstd_encode", lambda b: bytes(cramjam.zstd.compress(b)))
    monkeypatch.setattr(kp_records, "zstd_decode", lambda b: bytes(cramjam.zstd.decompress(b)))


def _kp_build(recs, codec, **kw):
    builder = kp_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=kw.get("is_transactional", False),
        producer_id=kw.get("producer_id", -1), producer_epoch=kw.get("producer_epoch", -1),
        base_sequence=kw.get("base_sequence", -1), batch_size=10 * 1024 * 1024)
    for r in recs:
        assert builder.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value,
                              headers=r.headers) is not None
    return bytes(builder.build())


def test_kafka_python_gzip_available_natively():
    assert kp_codec.has_gzip()


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_reads_kafka_python_batches(codec, kafka_python_all_codecs):
    recs = sample_records()  # offsets 0..4 (producer-style)
    raw = _kp_build(recs, codec, producer_id=11, producer_epoch=2, base_sequence=100,
                    is_transactional=True)
    [(hdr, view)] = split_batches(raw)
    assert hdr.compression == codec  # data is compressible, so kafka-python kept the codec
    assert hdr.records_count == 5 and hdr.last_offset_delta == 4
    assert (hdr.producer_id, hdr.producer_epoch, hdr.base_sequence) == (11, 2, 100)
    assert hdr.is_transactional
    assert hdr.max_timestamp == max(r.timestamp for r in recs)
    assert list(iter_records(view)) == recs
    # broker-side offset assignment keeps it valid
    buf = bytearray(raw)
    patch_base_offset(buf, 0, 5000, 3)
    assert [r.offset for r in iter_records(buf)] == [5000, 5001, 5002, 5003, 5004]
    kp = kp_records.DefaultRecordBatch(bytes(buf))
    assert kp.validate_crc() and kp.base_offset == 5000 and kp.leader_epoch == 3


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_python_reads_our_batches(codec, kafka_python_all_codecs):
    recs = sample_records(base=300)
    raw = build_batch(recs, base_offset=300, compression=codec, producer_id=4, producer_epoch=1,
                      base_sequence=2**31 - 2, partition_leader_epoch=8)
    kp = kp_records.DefaultRecordBatch(raw)
    assert kp.validate_crc()
    assert kp.base_offset == 300 and kp.last_offset == 304 and kp.leader_epoch == 8
    assert kp.compression_type == codec and kp.records_count == 5
    assert kp.producer_id == 4 and kp.base_sequence == 2**31 - 2
    assert kp.last_sequence == read_header(raw).last_sequence == 2
    assert kp.first_timestamp == recs[0].timestamp and kp.max_timestamp == max(r.timestamp for r in recs)
    got = [Record(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kp]
    assert got == recs


def test_kafka_python_reads_our_log_append_time(kafka_python_all_codecs):
    buf = bytearray(build_batch(sample_records(), compression=2))
    set_log_append_time(buf, 0, 42)
    kp = kp_records.DefaultRecordBatch(bytes(buf))
    assert kp.validate_crc() and kp.timestamp_type == 1
    assert {r.timestamp for r in kp} == {42}


def test_big_multiblock_payloads_cross_read(kafka_python_all_codecs):
    # > 64 KB / > 32 KB so lz4 and xerial snappy use several blocks
    recs = [Record(i, 1000 + i, str(i).encode(), os.urandom(200) + b"z" * 3000, []) for i in range(60)]
    for codec in CODECS:
        raw = build_batch(recs, compression=codec)
        assert list(iter_records(raw)) == recs
        assert [r.value for r in kp_records.DefaultRecordBatch(raw)] == [r.value for r in recs]
        assert list(iter_records(_kp_build(recs, codec))) == recs


# --------------------------------------------------------------------------- compression


def test_snappy_raw_block_and_xerial():
    data = b"hello snappy " * 10_000 + os.urandom(1000)
    raw_block = bytes(cramjam.snappy.compress_raw(data))  # librdkafka style
    assert comp.decompress(2, raw_block) == data
    # hand-built xerial framing (what the Java client writes), several blocks
    blocks = [data[i:i + 32768] for i in range(0, len(data), 32768)]
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(c)) + c for c in (bytes(cramjam.snappy.compress_raw(b)) for b in blocks))
    assert comp.decompress(2, xerial) == data
    # little-endian version ints (redpanda quirk) still accepted
    assert comp.decompress(2, b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + xerial[16:]) == data
    # our compressor writes xerial framing
    ours = comp.compress(2, data)
    assert ours.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert comp.decompress(2, ours) == data
    # snappy framing-format stream too
    assert comp.decompress(2, bytes(cramjam.snappy.compress(data))) == data


def test_snappy_xerial_read_by_kafka_python(kafka_python_all_codecs):
    data = os.urandom(100) + b"abc" * 50_000
    assert kp_codec.snappy_decode(comp.compress(2, data)) == data
    assert comp.decompress(2, kp_codec.snappy_encode(data)) == data


def test_lz4_frame_format():
    data = b"lz4 frame " * 20_000 + os.urandom(70_000)
    ours = comp.compress(3, data)
    assert ours[:4] == b"\x04\x22\x4d\x18"
    assert ours[4] & 0x20  # block independence (Kafka's Java reader needs it)
    assert ours[4:7] == b"\x60\x40\x82"  # FLG, BD(64KB), header checksum
    assert bytes(cramjam.lz4.decompress(ours)) == data  # readable by a standard frame decoder
    assert comp.decompress(3, ours) == data
    assert comp.decompress(3, bytes(cramjam.lz4.compress(data))) == data  # linked-block frames too
    assert comp.decompress(3, comp.compress(3, b"")) == b""


def test_gzip_zstd_standard():
    data = b"payload " * 1000
    assert bytes(cramjam.gzip.decompress(comp.compress(1, data))) == data
    assert comp.compress(1, data)[:2] == b"\x1f\x8b"
    assert bytes(cramjam.zstd.decompress(comp.compress(4, data))) == data
    assert comp.compress(4, data)[:4] == b"\x28\xb5\x2f\xfd"
    c = cramjam.zstd.Compressor()  # streaming frame without content size
    c.compress(data)
    assert comp.decompress(4, bytes(c.finish())) == data


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=CODEC_IDS[1:])
def test_decompress_garbage_raises_corrupt(codec):
    with pytest.raises(CorruptRecordError):
        comp.decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x10\x00abc"
                        if codec == 2 else b"this is not compressed data at all")


def test_unknown_codec():
    with pytest.raises(ValueError):
        comp.compress(5, b"x")
    with pytest.raises(ValueError):
        comp.decompress(7, b"x")
    assert not issubclass(ValueError, CorruptRecordError)
    assert issubclass(CorruptRecordError, ValueError)


# --------------------------------------------------------------------------- property test

_headers = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3)
_rec_spec = st.tuples(
    st.integers(min_value=1, max_value=1000),  # offset gap
    st.integers(min_value=-(2**40), max_value=2**42),  # timestamp
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    _headers,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(_rec_spec, min_size=1, max_size=12),
    base_offset=st.integers(min_value=0, max_value=2**62),
    first_gap=st.integers(min_value=0, max_value=5),
    codec=st.sampled_from(CODECS),
    horizon=st.one_of(st.none(), st.integers(min_value=0, max_value=2**42)),
)
def test_property_round_trip(specs, base_offset, first_gap, codec, horizon):
    recs = []
    off = base_offset + first_gap
    for i, (gap, ts, key, value, headers) in enumerate(specs):
        if i:
            off += gap
        recs.append(Record(off, ts, key, value, headers))
    raw = build_batch(recs, base_offset=base_offset, compression=codec, delete_horizon_ms=horizon)
    [(hdr, view)] = split_batches(raw)
    assert hdr.records_count == len(recs)
    assert hdr.last_offset == recs[-1].offset
    assert hdr.max_timestamp == max(r.timestamp for r in recs)
    assert list(iter_records(view)) == recs
    found, valid = scan_valid_prefix(raw + raw[:30])
    assert len(found) == 1 and valid == len(raw)
