"""Shared building blocks of the ``__consumer_offsets`` codecs.

Record-type numbers, :class:`RecordFormatError`, the struct formats, the
bounds-checked :class:`_Reader` / :class:`_Writer` (classic and flexible
encodings, varints, tagged fields), the bounded decode caches and
``_key_str`` (a key string's bytes, at most 32767). The records themselves are
described in :mod:`._schema`'s terms by :mod:`.classic`, :mod:`.consumer` and
:mod:`.share`.
"""

from __future__ import annotations

import struct
import uuid

from ..varint import put_uvarint, uvarint_rest


class RecordFormatError(ValueError):
    """Malformed record bytes, or a value version its record type does not define."""


# --------------------------------------------------------------------------
# record types

LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
# KIP-932 share groups (Kafka 4.4's CoordinatorRecordType; 9 was the 4.0 ShareGroupPartitionMetadata, since removed)
SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15


# --------------------------------------------------------------------------
# primitives

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16I16 = struct.Struct(">hh")
_I64I16 = struct.Struct(">qh")  # offset, metadata length (v0-v2)
_I64I32I16 = struct.Struct(">qih")  # offset, leader epoch, metadata length (v3)
_I64I32 = struct.Struct(">qi")  # offset, leader epoch (v4)
_I64I64 = struct.Struct(">qq")
_UUID = struct.Struct(">16s")

_ZERO_UUID_BYTES = bytes(16)
_UTF8 = "utf-8"
_LENIENT = "replace"
_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError)


def _utf8(s: str) -> bytes:
    return s.encode(_UTF8, _LENIENT)


def _fail(msg: str):
    raise RecordFormatError(msg)


class _Reader:
    """Cursor over a record; bounds are checked by struct or at the end."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def i8(self) -> int:
        (v,) = _I8.unpack_from(self.data, self.pos)
        self.pos += 1
        return v

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return v

    def i64(self) -> int:
        (v,) = _I64.unpack_from(self.data, self.pos)
        self.pos += 8
        return v

    def uuid(self) -> uuid.UUID:
        (b,) = _UUID.unpack_from(self.data, self.pos)
        self.pos += 16
        return _cached_uuid(b)

    def uvarint(self) -> int:
        data = self.data
        p = self.pos
        b = data[p]
        p += 1
        if b < 0x80:
            self.pos = p
            return b
        result, self.pos = uvarint_rest(data, p, b & 0x7F, 28, RecordFormatError, "unsigned varint longer than 5 bytes")
        return result

    def _take(self, n: int) -> bytes:
        p = self.pos
        end = p + n
        if end > len(self.data):
            _fail("record truncated")
        self.pos = end
        return self.data[p:end]

    # -- classic (non-flexible) encodings
    def string(self) -> str:
        n = self.i16()
        if n < 0:
            _fail("non-nullable string is null")
        return self._take(n).decode(_UTF8, _LENIENT)

    def nstring(self) -> str | None:
        n = self.i16()
        if n < 0:
            if n == -1:
                return None
            _fail(f"invalid string length {n}")
        return self._take(n).decode(_UTF8, _LENIENT)

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            _fail("non-nullable bytes field is null")
        return self._take(n)

    def array_len(self) -> int:
        n = self.i32()
        if n < 0:
            _fail("non-nullable array is null")
        if n > len(self.data) - self.pos:
            _fail("array length exceeds record")
        return n

    # -- flexible (compact) encodings
    def cstring(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            _fail("non-nullable string is null")
        return self._take(n).decode(_UTF8, _LENIENT)

    def cnstring(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._take(n).decode(_UTF8, _LENIENT)

    def cbytes(self) -> bytes:
        n = self.uvarint() - 1
        if n < 0:
            _fail("non-nullable bytes field is null")
        return self._take(n)

    def carray_len(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            _fail("non-nullable array is null")
        if n > len(self.data) - self.pos:
            _fail("array length exceeds record")
        return n

    def cstring_array(self) -> list[str]:
        return [self.cstring() for _ in range(self.carray_len())]

    def cint32_array(self) -> list[int]:
        n = self.carray_len()
        p = self.pos
        if p + 4 * n > len(self.data):
            _fail("record truncated")
        self.pos = p + 4 * n
        return list(struct.unpack_from(">%di" % n, self.data, p))

    def tags(self) -> dict[int, bytes] | None:
        """Read a tagged-field section; returns {tag: raw bytes} or None if empty."""
        count = self.uvarint()
        if not count:
            return None
        out = {}
        for _ in range(count):
            tag = self.uvarint()
            size = self.uvarint()
            out[tag] = self._take(size)
        return out


class _Writer:
    __slots__ = ("buf",)

    def __init__(self, version: int | None = None) -> None:
        # With a version, the buffer starts with it (a record value); without,
        # it is a bare struct (the body of a tagged field).
        self.buf = bytearray() if version is None else bytearray(_I16.pack(version))

    def i8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def uvarint(self, v: int) -> None:
        _put_uvarint(self.buf, v)

    def string(self, s: str) -> None:
        b = _utf8(s)
        if len(b) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self.buf += _I16.pack(len(b))
        self.buf += b

    def nstring(self, s: str | None) -> None:
        if s is None:
            self.buf += _I16.pack(-1)
        else:
            self.string(s)

    def bytes_(self, b: bytes) -> None:
        self.buf += _I32.pack(len(b))
        self.buf += b

    def array_len(self, n: int) -> None:
        self.buf += _I32.pack(n)

    def cstring(self, s: str) -> None:
        b = _utf8(s)
        _put_uvarint(self.buf, len(b) + 1)
        self.buf += b

    def cnstring(self, s: str | None) -> None:
        if s is None:
            self.buf.append(0)
        else:
            self.cstring(s)

    def cbytes(self, b: bytes) -> None:
        _put_uvarint(self.buf, len(b) + 1)
        self.buf += b

    def carray_len(self, n: int) -> None:
        _put_uvarint(self.buf, n + 1)

    def cstring_array(self, items: list[str]) -> None:
        self.carray_len(len(items))
        for s in items:
            self.cstring(s)

    def cint32_array(self, items: list[int]) -> None:
        self.carray_len(len(items))
        self.buf += struct.pack(">%di" % len(items), *items)

    def tags(self, fields: list[tuple[int, bytes]] | None = None) -> None:
        """Write a tagged-field section from (tag, raw bytes) in ascending tag order."""
        if not fields:
            self.buf.append(0)
            return
        _put_uvarint(self.buf, len(fields))
        for tag, raw in fields:
            _put_uvarint(self.buf, tag)
            _put_uvarint(self.buf, len(raw))
            self.buf += raw

    def done(self) -> bytes:
        return bytes(self.buf)


def _put_uvarint(buf: bytearray, v: int) -> None:
    if v < 0:
        raise ValueError("negative varint")
    put_uvarint(buf, v)


def _uvarint_bytes(v: int) -> bytes:
    b = bytearray()
    _put_uvarint(b, v)
    return bytes(b)


# --------------------------------------------------------------------------
# decode caches

# Replay decodes many offset-commit keys, mostly repeats of a few groups and
# topics (and, in an uncompacted tail, of whole keys). Bounded caches from raw
# bytes to decoded objects skip the repeated work; they are cleared when full.
_CACHE_MAX = 1 << 16
_str_cache: dict[bytes, str] = {}
_uuid_cache: dict[bytes, uuid.UUID] = {}


def _cached_str(raw: bytes) -> str:
    s = _str_cache.get(raw)
    if s is None:
        s = raw.decode(_UTF8, _LENIENT)
        if len(_str_cache) >= _CACHE_MAX:
            _str_cache.clear()
        _str_cache[raw] = s
    return s


def _cached_uuid(raw: bytes) -> uuid.UUID:
    u = _uuid_cache.get(raw)
    if u is None:
        u = uuid.UUID(bytes=raw)
        if len(_uuid_cache) >= _CACHE_MAX:
            _uuid_cache.clear()
        _uuid_cache[raw] = u
    return u


# --------------------------------------------------------------------------
# the offset-commit key's strings (the other keys go through ._schema)


def _key_str(s: str) -> bytes:
    b = _utf8(s)
    if len(b) > 0x7FFF:
        raise ValueError("key string longer than 32767 bytes")
    return b
