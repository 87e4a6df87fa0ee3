"""protocol.records.keyless_records: which records a compacted topic refuses."""

from __future__ import annotations

import cramjam
import pytest

from protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from protocol.records import CorruptRecordError, Record, build_batch, keyless_records

KEYS = [b"a", None, b"", None, b"long-key" * 40]


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_indexes_of_records_without_key(codec):
    batch = build_batch([Record(offset=10 + i, timestamp=1000 + i * 70_000, key=k, value=b"v" * 300) for i, k in enumerate(KEYS)], base_offset=10, compression=codec)
    # an empty key is a key, as in Kafka (Record.hasKey: the key is not null)
    assert keyless_records(batch) == [1, 3]


def test_all_keyed_and_all_keyless():
    assert keyless_records(build_batch([Record(offset=i, timestamp=1, key=b"k", value=None) for i in range(5)])) == []
    assert keyless_records(build_batch([Record(offset=i, timestamp=1, key=None, value=b"v") for i in range(3)])) == [0, 1, 2]


def test_truncated_record_data_is_corrupt():
    batch = bytearray(build_batch([Record(offset=0, timestamp=1, key=None, value=b"v" * 100)]))
    # claim one more record than the batch holds
    batch[57:61] = (2).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        keyless_records(bytes(batch))


def test_unknown_codec_is_corrupt():
    batch = bytearray(build_batch([Record(offset=0, timestamp=1, key=b"k", value=b"v")]))
    batch[22] |= 0x07  # attributes, low byte: codec 7 does not exist
    with pytest.raises(CorruptRecordError):
        keyless_records(bytes(batch))


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_a_decompression_bomb_is_refused_without_inflating_it(codec):
    """A compacted topic's key check decompresses client data: a batch claiming more
    than MAX_CLIENT_DECOMPRESSED_BYTES is corrupt, and the check never holds more."""
    from protocol import compression

    payload = b"\0" * (compression.MAX_CLIENT_DECOMPRESSED_BYTES + 1)
    bomb = bytes(getattr(cramjam, codec).compress(payload))
    assert len(bomb) < len(payload) // 100
    codec_id = {"gzip": compression.GZIP, "lz4": compression.LZ4, "zstd": compression.ZSTD}[codec]
    with pytest.raises(CorruptRecordError, match="more than"):
        compression.decompress(codec_id, bomb, compression.MAX_CLIENT_DECOMPRESSED_BYTES)
    small = bytes(getattr(cramjam, codec).compress(b"x" * 300_000))  # grows past the first buffer
    assert compression.decompress(codec_id, small, compression.MAX_CLIENT_DECOMPRESSED_BYTES) == b"x" * 300_000
