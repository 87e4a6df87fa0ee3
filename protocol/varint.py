"""The base-128 varint loops every codec here shares (Kafka's ByteUtils).

Each codec keeps its own one-byte fast path and its own error (a protocol
``DecodeError``, a record batch's ``CorruptRecordError``, a coordinator
record's ``RecordFormatError``); these two functions are the loops after it.
"""

from __future__ import annotations


def uvarint_rest(data, pos: int, value: int, max_shift: int, error: type[Exception], message: str) -> tuple[int, int]:
    """Finish an unsigned varint whose first byte, read already, had the continuation bit (its low
    7 bits are ``value``) and whose next byte is at ``pos``: (value, position after it). A varint
    still going on after its byte at ``max_shift`` bits raises ``error(message)``; bytes running out
    raise IndexError."""
    shift = 7
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > max_shift:
            raise error(message)


def put_uvarint(buf: bytearray, value: int) -> None:
    """Append ``value`` (not negative) as an unsigned varint."""
    while value >= 0x80:
        buf.append((value & 0x7F) | 0x80)
        value >>= 7
    buf.append(value)
