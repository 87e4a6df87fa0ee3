"""Codecs for the records of the ``__transaction_state`` topic (no I/O).

Kafka's schemas (``transaction-coordinator/src/main/resources/common/message/``):

* **key** ``TransactionLogKey``: int16 coordinator record type (always 0, which
  is also the key's version), then ``TransactionalId`` as a classic string
  (int16 length, UTF-8 bytes). Not flexible.
* **value** ``TransactionLogValue``: int16 version, then the struct at that
  version; a null value is a tombstone (an expired transactional id).

  ====================================  ======  ==========================================
  field                                 v0      v1 (flexible)
  ====================================  ======  ==========================================
  ProducerId                            int64   int64
  ProducerEpoch                         int16   int16
  TransactionTimeoutMs                  int32   int32
  TransactionStatus                     int8    int8
  TransactionPartitions (nullable)      int32   uvarint(n+1), 0 = null
    Topic                               int16   uvarint(len+1) string
    PartitionIds                        int32   uvarint(n+1) array of int32
    (struct's tagged fields)            --      uvarint count (+ fields)
  TransactionLastUpdateTimestampMs      int64   int64
  TransactionStartTimestampMs           int64   int64
  tagged fields                         --      0 PreviousProducerId int64 (default -1)
                                                1 NextProducerId int64 (default -1)
                                                2 ClientTransactionVersion int16 (default 0)
                                                3 NextProducerEpoch int16 (default -1)
  ====================================  ======  ==========================================

  A tagged field is written only when it differs from its default, in
  ascending tag order (Kafka's generated code). Kafka writes v1 once the
  ``transaction.version`` feature is 1 or more, v0 before. Tag 3 is KIP-939's
  (two-phase commit, Kafka 4.2+); kafkalite never sets it but reads it.

Status codes (``TransactionState.id()``): EMPTY 0, ONGOING 1, PREPARE_COMMIT 2,
PREPARE_ABORT 3, COMPLETE_COMMIT 4, COMPLETE_ABORT 5, DEAD 6,
PREPARE_EPOCH_FENCE 7. Kafka never writes 6 or 7 (they are in-memory states);
they decode, any other status is an error (Kafka's load fails on it too).

Decoding is strict about structure: every length is checked against the bytes
left, a known tagged field must have its type's size, and anything malformed
raises :class:`TxnRecordError` (a :class:`~protocol.records.CorruptRecordError`),
never ``IndexError`` or ``struct.error``. Bytes after the end of the struct
are ignored, as Kafka's deserializer ignores them. A key of another record
type decodes to :class:`UnknownTxnKey` (Kafka skips those when loading); a
value version other than 0 and 1 raises :class:`UnknownValueVersion`.
Strings decode leniently (invalid UTF-8 becomes U+FFFD) and encode with ``?``
for what UTF-8 cannot hold, as Java's ``String`` conversions do.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from .compression import CorruptRecordError
from .group_records._codec import _I16, _I32, _I64
from .varint import put_uvarint

__all__ = [
    "KEY_VERSION",
    "VALUE_VERSIONS",
    "TransactionLogKey",
    "TransactionLogValue",
    "TxnRecordError",
    "TxnState",
    "UnknownTxnKey",
    "UnknownValueVersion",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "value_version_for",
]

KEY_VERSION = 0  # CoordinatorRecordType.TRANSACTION_LOG
VALUE_VERSIONS = (0, 1)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

# the value's tagged fields
_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID, _TAG_CLIENT_TRANSACTION_VERSION, _TAG_NEXT_PRODUCER_EPOCH = range(4)

_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, status
_TAIL = struct.Struct(">qq")  # last update, start
_STRING_MAX = 0x7FFF


class TxnRecordError(CorruptRecordError):
    """Malformed ``__transaction_state`` record bytes."""


class UnknownValueVersion(TxnRecordError):
    """A value version this codec does not know (Kafka's ``UnknownValueVersion``)."""

    def __init__(self, version: int) -> None:
        super().__init__(f"unknown TransactionLogValue version {version}")
        self.version = version


class TxnState(IntEnum):
    """``TransactionState``: the id is the record's status byte."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit")."""
        return _STATE_NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_STATE_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _STATE_NAMES.items()}


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    transactional_id: str


@dataclass(frozen=True, slots=True)
class UnknownTxnKey:
    """A key whose record type is not 0 (``data`` is the whole key)."""

    version: int
    data: bytes = field(repr=False)


@dataclass(slots=True)
class TransactionLogValue:
    """One ``TransactionLogValue``.

    ``partitions`` is ``[(topic, [partition, ...]), ...]`` in the order the
    bytes hold them, or ``None`` for the null array Kafka writes for EMPTY.
    ``unknown_tags`` holds tagged fields this codec does not know, as
    ``(tag, raw bytes)``, sorted by tag; they are written back in tag order.

    ``last_producer_epoch`` and ``partition_order`` are not part of the
    record and take no part in equality. Kafka keeps the last epoch in
    memory only (a loaded transaction has none, -1), and the partitions in a
    hash set whose iteration order the record does not keep. A live write
    carries both here so that replaying the value gives the state Kafka has
    in memory; decoding gives -1 and ``None`` (the order is then the one
    Kafka's loading builds).
    """

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: TxnState
    partitions: list[tuple[str, list[int]]] | None
    last_update_ms: int
    start_ms: int
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_txn_version: int = 0
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    unknown_tags: tuple[tuple[int, bytes], ...] = ()
    last_producer_epoch: int = field(default=NO_PRODUCER_EPOCH, compare=False)
    partition_order: tuple[tuple[str, int], ...] | None = field(default=None, compare=False, repr=False)


def value_version_for(transaction_version: int) -> int:
    """The value version Kafka writes at a ``transaction.version`` feature level
    (``TransactionVersion.transactionLogValueVersion``)."""
    return 1 if transaction_version >= 1 else 0


# --------------------------------------------------------------------------
# encoding


def _utf8(s: str) -> bytes:
    b = s.encode("utf-8", "replace")
    if len(b) > _STRING_MAX:
        raise ValueError(f"string of {len(b)} bytes is longer than 32767")
    return b


def _uvarint(v: int) -> bytes:
    if v < 0 or v > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {v}")
    out = bytearray()
    put_uvarint(out, v)
    return bytes(out)


def encode_key(key: TransactionLogKey) -> bytes:
    b = _utf8(key.transactional_id)
    return _I16.pack(KEY_VERSION) + _I16.pack(len(b)) + b


def _check_int(name: str, v: int, bits: int) -> None:
    lo = -(1 << (bits - 1))
    if not lo <= v < -lo:
        raise ValueError(f"{name} {v} does not fit an int{bits}")


def encode_value(value: TransactionLogValue | None, version: int = 1) -> bytes | None:
    """Serialize ``value`` at ``version`` (0 or 1); ``None`` (a tombstone) stays ``None``.

    At v0, which has no tagged fields, the previous and next producer ids and
    the next epoch are left out, as Kafka's ``TransactionLog.valueToBytes``
    only sets them from v1; a client transaction version other than 0, or
    unknown tagged fields, cannot be written at v0 and raise ``ValueError``
    (Kafka's serializer throws ``UnsupportedVersionException``).
    """
    if value is None:
        return None
    if version not in VALUE_VERSIONS:
        raise ValueError(f"TransactionLogValue has no version {version}")
    _check_int("producer id", value.producer_id, 64)
    _check_int("producer epoch", value.producer_epoch, 16)
    _check_int("transaction timeout", value.timeout_ms, 32)
    _check_int("status", int(value.status), 8)
    _check_int("last update timestamp", value.last_update_ms, 64)
    _check_int("start timestamp", value.start_ms, 64)
    out = bytearray(_I16.pack(version))
    out += _HEAD.pack(value.producer_id, value.producer_epoch, value.timeout_ms, int(value.status))
    flexible = version >= 1
    parts = value.partitions
    if parts is None:
        out += b"\x00" if flexible else _I32.pack(-1)
    else:
        out += _uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for topic, ids in parts:
            t = _utf8(topic)
            if flexible:
                out += _uvarint(len(t) + 1) + t + _uvarint(len(ids) + 1)
            else:
                out += _I16.pack(len(t)) + t + _I32.pack(len(ids))
            for p in ids:
                _check_int("partition", p, 32)
            out += struct.pack(">%di" % len(ids), *ids)
            if flexible:
                out.append(0)  # the partition struct's (empty) tagged fields
    out += _TAIL.pack(value.last_update_ms, value.start_ms)
    if not flexible:
        if value.client_txn_version != 0:
            raise ValueError("a client transaction version other than 0 cannot be written at version 0")
        if value.unknown_tags:
            raise ValueError("tagged fields cannot be written at version 0")
        return bytes(out)
    tags: list[tuple[int, bytes]] = []
    if value.prev_producer_id != NO_PRODUCER_ID:
        _check_int("previous producer id", value.prev_producer_id, 64)
        tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.prev_producer_id)))
    if value.next_producer_id != NO_PRODUCER_ID:
        _check_int("next producer id", value.next_producer_id, 64)
        tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
    if value.client_txn_version != 0:
        _check_int("client transaction version", value.client_txn_version, 16)
        tags.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_txn_version)))
    if value.next_producer_epoch != NO_PRODUCER_EPOCH:
        _check_int("next producer epoch", value.next_producer_epoch, 16)
        tags.append((_TAG_NEXT_PRODUCER_EPOCH, _I16.pack(value.next_producer_epoch)))
    for tag, raw in value.unknown_tags:
        if tag in _KNOWN_TAGS:
            raise ValueError(f"unknown_tags holds the known tag {tag}")
        tags.append((tag, bytes(raw)))
    tags.sort(key=lambda t: t[0])  # stable: unknown tags repeated keep their order
    out += _uvarint(len(tags))
    for tag, raw in tags:
        out += _uvarint(tag) + _uvarint(len(raw)) + raw
    return bytes(out)


# --------------------------------------------------------------------------
# decoding


class _Reader:
    """A cursor that checks every read against the bytes left."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, pos: int, what: str) -> None:
        self.data = data
        self.pos = pos
        self.what = what

    def fail(self, msg: str):
        raise TxnRecordError(f"malformed {self.what} at byte {self.pos}: {msg}")

    def left(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int, field_name: str) -> bytes:
        if n < 0 or n > self.left():
            self.fail(f"{field_name} needs {n} bytes, {self.left()} left")
        p = self.pos
        self.pos = p + n
        return self.data[p : p + n]

    def unpack(self, st: struct.Struct, field_name: str) -> tuple:
        if st.size > self.left():
            self.fail(f"{field_name} needs {st.size} bytes, {self.left()} left")
        out = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return out

    def uvarint(self, field_name: str) -> int:
        result = 0
        for shift in range(0, 35, 7):
            if self.pos >= len(self.data):
                self.fail(f"{field_name}: varint truncated")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if result > 0xFFFFFFFF:
                    self.fail(f"{field_name}: varint {result} does not fit 32 bits")
                return result
        self.fail(f"{field_name}: varint longer than 5 bytes")

    def classic_string(self, field_name: str) -> str:
        (n,) = self.unpack(_I16, field_name)
        if n < 0:
            self.fail(f"non-nullable {field_name} is null")
        return self.take(n, field_name).decode("utf-8", "replace")

    def compact_string(self, field_name: str) -> str:
        n = self.uvarint(field_name) - 1
        if n < 0:
            self.fail(f"non-nullable {field_name} is null")
        if n > _STRING_MAX:
            self.fail(f"{field_name} has invalid length {n}")
        return self.take(n, field_name).decode("utf-8", "replace")

    def int32s(self, n: int, field_name: str) -> list[int]:
        if n > self.left() // 4:
            self.fail(f"{field_name}: {n} int32s, {self.left()} bytes left")
        return list(struct.unpack(">%di" % n, self.take(4 * n, field_name)))

    def tagged_fields(self, where: str) -> list[tuple[int, bytes]]:
        count = self.uvarint(f"{where} tagged field count")
        if count > self.left():  # every field takes at least two bytes
            self.fail(f"{count} tagged fields in {self.left()} bytes")
        out = []
        for _ in range(count):
            tag = self.uvarint(f"{where} tag")
            size = self.uvarint(f"{where} tag {tag} size")
            out.append((tag, self.take(size, f"{where} tag {tag}")))
        return out


def decode_key(data: bytes) -> TransactionLogKey | UnknownTxnKey:
    """Parse a record key; a record type other than 0 gives :class:`UnknownTxnKey`."""
    if data is None:
        raise TxnRecordError("__transaction_state record without a key")
    data = bytes(data)
    r = _Reader(data, 0, "TransactionLogKey")
    (version,) = r.unpack(_I16, "key version")
    if version != KEY_VERSION:
        return UnknownTxnKey(version, data)
    return TransactionLogKey(r.classic_string("transactional id"))


_KNOWN_TAGS = {
    _TAG_PREVIOUS_PRODUCER_ID: ("previous producer id", _I64),
    _TAG_NEXT_PRODUCER_ID: ("next producer id", _I64),
    _TAG_CLIENT_TRANSACTION_VERSION: ("client transaction version", _I16),
    _TAG_NEXT_PRODUCER_EPOCH: ("next producer epoch", _I16),
}


def decode_value(data: bytes | None) -> TransactionLogValue | None:
    """Parse a record value; ``None`` (a tombstone) gives ``None``."""
    if data is None:
        return None
    data = bytes(data)
    r = _Reader(data, 0, "TransactionLogValue")
    (version,) = r.unpack(_I16, "value version")
    if version not in VALUE_VERSIONS:
        raise UnknownValueVersion(version)
    r.what = f"TransactionLogValue v{version}"
    flexible = version >= 1
    producer_id, epoch, timeout, status = r.unpack(_HEAD, "producer id, epoch, timeout and status")
    try:
        state = TxnState(status)
    except ValueError:
        r.fail(f"unknown transaction status {status}")
    if flexible:
        n = r.uvarint("partition count") - 1
    else:
        (n,) = r.unpack(_I32, "partition count")
    partitions: list[tuple[str, list[int]]] | None
    if n < 0:
        partitions = None
    else:
        # each topic entry takes at least 2 (flexible: 3) bytes
        if n > r.left() // 2:
            r.fail(f"{n} topics in {r.left()} bytes")
        partitions = []
        for _ in range(n):
            if flexible:
                topic = r.compact_string("topic")
                count = r.uvarint("partition id count") - 1
            else:
                topic = r.classic_string("topic")
                (count,) = r.unpack(_I32, "partition id count")
            if count < 0:
                r.fail("non-nullable partition ids are null")
            ids = r.int32s(count, "partition ids")
            if flexible:
                r.tagged_fields("partition")  # no known tags in this struct
            partitions.append((topic, ids))
    last_update, start = r.unpack(_TAIL, "timestamps")
    value = TransactionLogValue(producer_id, epoch, timeout, state, partitions, last_update, start)
    if flexible:
        unknown = []
        for tag, raw in r.tagged_fields("value"):
            known = _KNOWN_TAGS.get(tag)
            if known is None:
                unknown.append((tag, raw))
                continue
            name, st = known
            if len(raw) != st.size:
                r.fail(f"tagged field {tag} ({name}) has {len(raw)} bytes, not {st.size}")
            (v,) = st.unpack(raw)
            if tag == _TAG_PREVIOUS_PRODUCER_ID:
                value.prev_producer_id = v
            elif tag == _TAG_NEXT_PRODUCER_ID:
                value.next_producer_id = v
            elif tag == _TAG_CLIENT_TRANSACTION_VERSION:
                value.client_txn_version = v
            else:
                value.next_producer_epoch = v
        value.unknown_tags = tuple(sorted(unknown, key=lambda t: t[0]))  # the order they are written back in
    return value
