"""The ``__transaction_state`` record codecs (protocol/txn_records.py).

The byte vectors are written out by hand from Kafka's schemas
(TransactionLogKey.json, TransactionLogValue.json): classic encoding at v0,
compact lengths and tagged fields at v1, tagged fields in ascending tag order
and only when not at their default.
"""

from __future__ import annotations

import random
import struct

import pytest

from protocol.records import CorruptRecordError
from protocol.txn_records import (
    TransactionLogKey,
    TransactionLogValue,
    TxnRecordError,
    TxnState,
    UnknownTxnKey,
    UnknownValueVersion,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    value_version_for,
)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


# ---------------------------------------------------------------- status codes and versions


def test_status_codes_are_kafkas():
    assert [(s.name, int(s)) for s in TxnState] == [
        ("EMPTY", 0), ("ONGOING", 1), ("PREPARE_COMMIT", 2), ("PREPARE_ABORT", 3),
        ("COMPLETE_COMMIT", 4), ("COMPLETE_ABORT", 5), ("DEAD", 6), ("PREPARE_EPOCH_FENCE", 7),
    ]
    assert TxnState.PREPARE_EPOCH_FENCE.state_name == "PrepareEpochFence"
    assert TxnState.from_name("CompleteAbort") is TxnState.COMPLETE_ABORT
    assert TxnState.from_name("COMPLETE_ABORT") is None


def test_value_version_follows_transaction_version():
    assert [value_version_for(tv) for tv in (0, 1, 2)] == [0, 1, 1]


# ---------------------------------------------------------------- keys


def test_key_bytes():
    assert encode_key(TransactionLogKey("txn")) == b"\x00\x00" + b"\x00\x03" + b"txn"
    assert decode_key(b"\x00\x00\x00\x03txn") == TransactionLogKey("txn")
    assert decode_key(b"\x00\x00\x00\x00") == TransactionLogKey("")


def test_key_non_ascii_and_unencodable():
    key = TransactionLogKey("tx-\u00e9\U0001f600")
    raw = encode_key(key)
    assert raw[2:4] == i16(len("tx-\u00e9\U0001f600".encode()))
    assert decode_key(raw) == key
    # a lone surrogate cannot be UTF-8: Java writes '?'
    assert encode_key(TransactionLogKey("a\ud800b")) == b"\x00\x00\x00\x03a?b"


def test_key_of_another_record_type_is_unknown():
    key = decode_key(b"\x00\x01\x00\x01x")
    assert key == UnknownTxnKey(1, b"\x00\x01\x00\x01x")


def test_key_errors():
    for raw in (b"", b"\x00", b"\x00\x00", b"\x00\x00\x00", b"\x00\x00\x00\x05abc", b"\x00\x00\xff\xff"):
        with pytest.raises(TxnRecordError):
            decode_key(raw)
    with pytest.raises(TxnRecordError):
        decode_key(None)
    with pytest.raises(ValueError):
        encode_key(TransactionLogKey("x" * 32768))


def test_key_trailing_bytes_are_ignored():
    assert decode_key(b"\x00\x00\x00\x01ajunk") == TransactionLogKey("a")


# ---------------------------------------------------------------- values: vectors

V0_EMPTY = (
    i16(0) + i64(5) + i16(1) + i32(60000) + b"\x00"
    + i32(-1)  # null partitions
    + i64(1000) + i64(-1)
)


def test_v0_empty_vector():
    value = TransactionLogValue(5, 1, 60000, TxnState.EMPTY, None, 1000, -1)
    assert encode_value(value, 0) == V0_EMPTY
    assert decode_value(V0_EMPTY) == value


V0_ONGOING = (
    i16(0) + i64(5) + i16(1) + i32(60000) + b"\x01"
    + i32(2)
    + i16(1) + b"t" + i32(2) + i32(0) + i32(2)
    + i16(2) + b"uv" + i32(0)
    + i64(1500) + i64(1200)
)


def test_v0_ongoing_vector():
    value = TransactionLogValue(5, 1, 60000, TxnState.ONGOING, [("t", [0, 2]), ("uv", [])], 1500, 1200)
    assert encode_value(value, 0) == V0_ONGOING
    assert decode_value(V0_ONGOING) == value


V1_ONGOING = (
    i16(1) + i64(5) + i16(1) + i32(60000) + b"\x01"
    + b"\x02"  # one topic (n + 1)
    + b"\x02t" + b"\x03" + i32(0) + i32(2) + b"\x00"  # topic, 2 ids (n + 1), the struct's empty tags
    + i64(1500) + i64(1200)
    + b"\x02"  # two tagged fields
    + b"\x00\x08" + i64(4)  # tag 0 PreviousProducerId
    + b"\x02\x02" + i16(2)  # tag 2 ClientTransactionVersion
)


def test_v1_vector_with_tags():
    value = TransactionLogValue(5, 1, 60000, TxnState.ONGOING, [("t", [0, 2])], 1500, 1200, prev_producer_id=4, client_txn_version=2)
    assert encode_value(value, 1) == V1_ONGOING
    assert decode_value(V1_ONGOING) == value


V1_EMPTY_NO_TAGS = i16(1) + i64(5) + i16(0) + i32(100) + b"\x00" + b"\x00" + i64(7) + i64(-1) + b"\x00"


def test_v1_null_partitions_and_defaults_are_not_written():
    value = TransactionLogValue(5, 0, 100, TxnState.EMPTY, None, 7, -1)
    assert encode_value(value, 1) == V1_EMPTY_NO_TAGS
    decoded = decode_value(V1_EMPTY_NO_TAGS)
    assert decoded == value
    assert (decoded.prev_producer_id, decoded.next_producer_id, decoded.client_txn_version, decoded.next_producer_epoch) == (-1, -1, 0, -1)


V1_ALL_TAGS = (
    i16(1) + i64(9) + i16(32767) + i32(10) + b"\x03"
    + b"\x01"  # an empty (not null) partition list
    + i64(20) + i64(11)
    + b"\x05"
    + b"\x00\x08" + i64(8)
    + b"\x01\x08" + i64(10)
    + b"\x02\x02" + i16(2)
    + b"\x03\x02" + i16(0)
    + b"\x07\x03abc"  # a tag this codec does not know
)


def test_v1_every_tag_in_order_and_unknown_tags_kept():
    value = TransactionLogValue(9, 32767, 10, TxnState.PREPARE_ABORT, [], 20, 11, prev_producer_id=8, next_producer_id=10,
                                client_txn_version=2, next_producer_epoch=0, unknown_tags=((7, b"abc"),))
    assert encode_value(value, 1) == V1_ALL_TAGS
    assert decode_value(V1_ALL_TAGS) == value


def test_tags_are_written_in_ascending_order_whatever_their_order_in_the_bytes():
    shuffled = V1_ALL_TAGS[: V1_ALL_TAGS.index(b"\x05\x00\x08") + 1]
    shuffled += b"\x07\x03abc" + b"\x03\x02" + i16(0) + b"\x02\x02" + i16(2) + b"\x01\x08" + i64(10) + b"\x00\x08" + i64(8)
    assert encode_value(decode_value(shuffled), 1) == V1_ALL_TAGS


def test_a_known_tag_at_its_default_reads_as_default_and_is_dropped():
    raw = V1_EMPTY_NO_TAGS[:-1] + b"\x01" + b"\x00\x08" + i64(-1)
    value = decode_value(raw)
    assert value.prev_producer_id == -1
    assert encode_value(value, 1) == V1_EMPTY_NO_TAGS


def test_v0_drops_producer_id_tags_and_refuses_a_client_version():
    value = TransactionLogValue(5, 1, 60000, TxnState.EMPTY, None, 1000, -1, prev_producer_id=3, next_producer_id=4,
                                next_producer_epoch=2)
    assert encode_value(value, 0) == V0_EMPTY
    with pytest.raises(ValueError):
        encode_value(TransactionLogValue(5, 1, 60000, TxnState.EMPTY, None, 1000, -1, client_txn_version=2), 0)
    with pytest.raises(ValueError):
        encode_value(TransactionLogValue(5, 1, 60000, TxnState.EMPTY, None, 1000, -1, unknown_tags=((9, b""),)), 0)


def test_in_memory_fields_are_not_encoded_nor_compared():
    a = TransactionLogValue(5, 1, 60000, TxnState.ONGOING, [("t", [0, 2])], 1500, 1200, prev_producer_id=4, client_txn_version=2,
                            last_producer_epoch=0, partition_order=(("t", 2), ("t", 0)))
    assert encode_value(a, 1) == V1_ONGOING
    decoded = decode_value(V1_ONGOING)
    assert decoded == a
    assert decoded.last_producer_epoch == -1 and decoded.partition_order is None


def test_tombstone():
    assert encode_value(None) is None
    assert decode_value(None) is None


def test_encode_rejects_out_of_range_fields():
    base = dict(producer_id=1, producer_epoch=0, timeout_ms=1, status=TxnState.EMPTY, partitions=None, last_update_ms=0, start_ms=-1)
    for change in ({"producer_epoch": 32768}, {"timeout_ms": 2**31}, {"producer_id": 2**63}, {"partitions": [("t", [2**31])]},
                   {"partitions": [("x" * 40000, [1])]}):
        with pytest.raises(ValueError):
            encode_value(TransactionLogValue(**{**base, **change}), 1)
    with pytest.raises(ValueError):
        encode_value(TransactionLogValue(**base), 2)
    with pytest.raises(ValueError):
        encode_value(TransactionLogValue(**base, unknown_tags=((0, b"12345678"),)), 1)


# ---------------------------------------------------------------- round trips, every version and status


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("status", list(TxnState))
def test_round_trip(version, status):
    parts = None if status == TxnState.EMPTY else [("orders", [3, 1, 2]), ("\u00fcber", [0]), ("e", [])]
    tags = dict(prev_producer_id=41, next_producer_id=43, client_txn_version=2, next_producer_epoch=1) if version else {}
    value = TransactionLogValue(42, 7, 900000, status, parts, 1_700_000_000_123, 1_700_000_000_000, **tags)
    raw = encode_value(value, version)
    assert raw[:2] == i16(version)
    assert decode_value(raw) == value
    assert encode_value(decode_value(raw), version) == raw


def test_extremes_round_trip():
    value = TransactionLogValue(2**63 - 1, -1, 2**31 - 1, TxnState.COMPLETE_COMMIT, [("t", [-(2**31), 2**31 - 1])], -(2**63), 2**63 - 1,
                                prev_producer_id=-(2**63), next_producer_id=0, client_txn_version=-(2**15), next_producer_epoch=2**15 - 1)
    assert decode_value(encode_value(value, 1)) == value


def test_long_compact_lengths_use_multi_byte_varints():
    value = TransactionLogValue(1, 0, 1, TxnState.ONGOING, [("t" * 200, list(range(130)))], 0, 0)
    raw = encode_value(value, 1)
    topic_at = 2 + 8 + 2 + 4 + 1 + 1
    assert raw[topic_at : topic_at + 2] == bytes([201 & 0x7F | 0x80, 201 >> 7])  # uvarint(200 + 1)
    assert decode_value(raw) == value


# ---------------------------------------------------------------- hostile bytes


def test_unknown_value_versions():
    for version in (-1, 2, 300):
        with pytest.raises(UnknownValueVersion) as info:
            decode_value(i16(version) + V1_ONGOING[2:])
        assert info.value.version == version
        assert isinstance(info.value, TxnRecordError) and isinstance(info.value, CorruptRecordError)


def test_unknown_status_is_an_error():
    raw = bytearray(V1_ONGOING)
    raw[16] = 8
    with pytest.raises(TxnRecordError, match="status 8"):
        decode_value(bytes(raw))


@pytest.mark.parametrize("raw", [V0_EMPTY, V0_ONGOING, V1_ONGOING, V1_EMPTY_NO_TAGS, V1_ALL_TAGS])
def test_every_truncation_is_a_clear_error(raw):
    for n in range(len(raw)):
        with pytest.raises(TxnRecordError):
            decode_value(raw[:n])


def test_trailing_bytes_are_ignored():
    assert decode_value(V0_ONGOING + b"\x01\x02") == decode_value(V0_ONGOING)


@pytest.mark.parametrize(
    "raw, message",
    [
        (V0_ONGOING[:17] + i32(2**31 - 1) + V0_ONGOING[21:], "topics"),  # an array longer than the record
        (V0_ONGOING[:21] + i16(-1) + V0_ONGOING[23:], "null"),  # a null topic
        (V0_ONGOING[:24] + i32(-1) + V0_ONGOING[28:], "null"),  # null partition ids
        (V0_ONGOING[:24] + i32(1000) + V0_ONGOING[28:], "int32s"),  # more ids than bytes
        (V1_ONGOING[:18] + b"\x00" + V1_ONGOING[19:], "null"),  # compact null topic
        (V1_ONGOING[:17] + b"\xff\xff\xff\xff\x0f" + V1_ONGOING[18:], "topics"),  # 2**32 - 2 topics
        (V1_ONGOING[:17] + b"\xff\xff\xff\xff\xff" + V1_ONGOING[18:], "longer than 5 bytes"),
        (V1_ONGOING[:17] + b"\xff\xff\xff\xff\x7f" + V1_ONGOING[18:], "32 bits"),
        (V1_ONGOING[:-14] + b"\x00\x07" + i64(4)[:7] + V1_ONGOING[-4:], "7 bytes, not 8"),  # tag 0 of the wrong size
        (V1_ONGOING[:-15] + b"\x7f" + V1_ONGOING[-14:], "tagged fields"),  # more tags than bytes
        (V1_ONGOING[:-15] + b"\x01\x05\x7f", "needs 127 bytes"),  # a tag longer than the record
    ],
)
def test_malformed_lengths(raw, message):
    with pytest.raises(TxnRecordError, match=message):
        decode_value(raw)


def test_malformed_partition_struct_tags():
    raw = V1_ONGOING.replace(i32(2) + b"\x00" + i64(1500), i32(2) + b"\x01\x00\x7f" + i64(1500))
    assert raw != V1_ONGOING
    with pytest.raises(TxnRecordError, match="partition tag 0 needs 127 bytes"):
        decode_value(raw)


def _decode_or_corrupt(raw: bytes) -> None:
    try:
        decode_key(raw)
    except TxnRecordError:
        pass
    try:
        value = decode_value(raw)
    except TxnRecordError:
        return
    if value is not None:
        # what decodes re-encodes, and decodes again to the same value
        version = raw[1] if raw[0] == 0 else None
        if version in (0, 1) and not (version == 0 and value.client_txn_version):
            assert decode_value(encode_value(value, version)) == value


def test_fuzz_random_bytes():
    rng = random.Random(890)
    for _ in range(20000):
        n = rng.randrange(0, 64)
        raw = bytes(rng.getrandbits(8) for _ in range(n))
        if rng.random() < 0.5 and n >= 2:
            raw = bytes([0, rng.randrange(2)]) + raw[2:]  # mostly known versions, to get past the first check
        _decode_or_corrupt(raw)


def test_fuzz_mutations_and_truncations_of_valid_records():
    rng = random.Random(360)
    seeds = [V0_EMPTY, V0_ONGOING, V1_ONGOING, V1_EMPTY_NO_TAGS, V1_ALL_TAGS,
             encode_value(TransactionLogValue(1, 2, 3, TxnState.ONGOING, [("a" * 130, list(range(70))), ("b", [1])], 4, 5,
                                              prev_producer_id=6), 1)]
    decoded_ok = 0
    for _ in range(20000):
        raw = bytearray(rng.choice(seeds))
        for _ in range(rng.randrange(1, 4)):
            op = rng.randrange(4)
            if op == 0 and raw:
                raw[rng.randrange(len(raw))] = rng.getrandbits(8)
            elif op == 1:
                del raw[rng.randrange(len(raw) + 1):]
            elif op == 2:
                raw.insert(rng.randrange(len(raw) + 1), rng.getrandbits(8))
            elif raw:
                del raw[rng.randrange(len(raw))]
        try:
            decode_value(bytes(raw))
            decoded_ok += 1
        except TxnRecordError:
            pass
        _decode_or_corrupt(bytes(raw))
    assert decoded_ok > 100  # the mutations do not all break the record: the decoder is exercised past its header
