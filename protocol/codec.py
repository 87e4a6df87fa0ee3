"""Message bodies through kio, plus the four things kio leaves to us.

1. Hostile lengths. kio's native reader trusts every count and length it
   reads, and one that lies can abort the process. ``decode`` first walks the
   bytes with the schema in hand and refuses any count or length that does
   not fit in the bytes left (see the comment above ``decode``).
2. Unknown tagged fields. The protocol says readers skip tags they do not
   know, and newer clients send them, but kio's native reader raises a bare
   ``KeyError``. The same walk notes them and kio gets a copy without them.
3. Trailing bytes after a body are ignored, as Kafka does.
4. Building a response for whichever version was asked for. kio has one
   dataclass per version; ``build`` fills one from plain dicts and lists, so a
   handler describes its answer once and every version takes the fields it
   has. A key that no version has is refused, so a typo cannot drop a field.
   A ``records`` field may hold a region of a file (``protocol/regions.py``):
   it is read here, since kio writes bytes.
"""

from __future__ import annotations

import io
import struct
from dataclasses import fields
from functools import cache
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from .build import UnknownFieldError, build, drop_unknown, to_dict
from .varint import put_uvarint, uvarint_rest

__all__ = [
    "DecodeError",
    "UnknownFieldError",
    "build",
    "check",
    "decode",
    "drop_unknown",
    "encode",
    "request_class",
    "to_dict",
    "response_class",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class DecodeError(ValueError):
    """A message body could not be decoded against its schema."""


@cache
def request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@cache
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


# --------------------------------------------------------------------------
# decoding
#
# kio's native reader trusts every length it reads: an array count of 2**31
# anywhere in a body makes it reserve room for 2**31 items, and the failed
# allocation aborts the whole process (SIGABRT, not an exception). Proven
# against kio==0.6.5, whose reader does ``Vec::with_capacity(count)``. So no
# byte reaches kio before a bounded walk over the same schema has checked, at
# every nesting level, that each count and length fits in the bytes left:
#
# - an array of N items needs N * (smallest encoding of one item) bytes, at
#   least N, as Kafka requires; strings, bytes and records need their length;
# - a tagged-field section of N fields needs 2N bytes; a tagged field's size
#   must fit, and a known tagged field must fill exactly its size (kio reads
#   it by its schema and ignores the size, so the two must agree);
# - varints longer than 5 bytes or above 2**32 - 1, negative lengths other
#   than -1, -1 (null) where the schema has no null, and nullable-struct
#   markers other than -1 and 0..127 are refused.
#
# The walk is pure Python, so it is generated once per class as straight-line
# code (fixed-size runs folded into one addition, nested structs inlined,
# arrays of fixed-size items skipped in one step). The same walk notes the
# tagged-field sections that hold tags the schema lacks (kio raises
# ``KeyError`` on those, while the protocol says readers skip them); ``decode``
# then hands kio a copy without them. kio still checks the values the walk
# does not (UTF-8, booleans, error codes, timestamps); whatever it raises,
# a Rust panic included, becomes ``DecodeError``.
#
# A class with no array anywhere (Heartbeat, ApiVersions, every request
# header...) goes to kio unwalked, unless kio meets an unknown tag: in kio
# 0.6.5 only arrays allocate from a count read off the wire, strings and
# bytes are sliced out of the buffer after a bounds check, and each round of
# its tagged-field loop consumes bytes. The fuzzer (tests/fuzz/protocol.py)
# holds kio to that, and checks on every frame that decodes that the walk
# and kio end the header and the body at the same byte.


def decode(cls: type, buf: bytes, offset: int = 0) -> tuple[Any, int]:
    """Decode ``cls`` at ``offset``; returns (entity, end offset).

    Trailing bytes are left alone. Unknown tagged fields are skipped. Any
    malformed input raises ``DecodeError``, never anything else.
    """
    walk, reader = _codecs(cls)
    if walk is None:  # no arrays anywhere in cls: kio allocates nothing from a count
        try:
            entity, size = reader(buf, offset)
        except KeyError:  # an unknown tagged field: the walk strips it
            walk = _walker(cls)
        except Exception as exc:  # noqa: BLE001 - kio raises several kinds
            raise DecodeError(f"cannot decode {cls.__name__}: {exc}") from exc
        except BaseException as exc:
            raise _panic(cls, exc) from exc
        else:
            return entity, offset + size
    edits: list = []
    try:
        end = walk(buf, offset, len(buf), edits)
    except (IndexError, struct.error):
        raise DecodeError(f"truncated {cls.__name__}") from None
    if edits:
        buf, offset = _apply(buf, offset, end, edits), 0
    try:
        entity, _ = reader(buf, offset)
    except Exception as exc:  # noqa: BLE001 - kio raises several kinds
        raise DecodeError(f"cannot decode {cls.__name__}: {exc}") from exc
    except BaseException as exc:
        raise _panic(cls, exc) from exc
    return entity, end


def _panic(cls: type, exc: BaseException) -> BaseException:
    """A Rust panic reaches Python as pyo3's PanicException, a BaseException."""
    if type(exc).__name__ != "PanicException":
        return exc
    return DecodeError(f"cannot decode {cls.__name__}: kio panicked: {exc}")


def check(cls: type, buf: bytes, offset: int = 0) -> int:
    """Walk one ``cls`` entity at ``offset`` without decoding it; returns its end offset.

    Raises ``DecodeError`` if any count or length does not fit in ``buf``.
    """
    try:
        return _walker(cls)(buf, offset, len(buf), [])
    except (IndexError, struct.error):
        raise DecodeError(f"truncated {cls.__name__}") from None


def strip_unknown_tags(cls: type, buf: bytes, offset: int = 0) -> tuple[bytes, int]:
    """Copy one ``cls`` entity from ``buf``, dropping tagged fields the schema lacks."""
    edits: list = []
    try:
        end = _walker(cls)(buf, offset, len(buf), edits)
    except (IndexError, struct.error):
        raise DecodeError(f"truncated {cls.__name__}") from None
    return _apply(buf, offset, end, edits), end


@cache
def _codecs(cls: type) -> tuple[Any, Any]:
    """(the walk, or None where kio needs none; kio's reader)."""
    return (_walker(cls) if _has_array(cls) else None), entity_reader(cls)


def _has_array(cls: type) -> bool:
    plain, tagged = _struct_info(cls)
    for _, shape in (*plain, *tagged.values()):
        if shape[0] == "array" or (shape[0] == "struct" and _has_array(shape[1])):
            return True
    return False


def _read_uvarint(b, pos: int) -> tuple[int, int]:
    x = b[pos]
    if x < 0x80:
        return x, pos + 1
    value, pos = uvarint_rest(b, pos + 1, x & 0x7F, 28, DecodeError, "unsigned varint is longer than 5 bytes")
    if value > 0xFFFFFFFF:
        raise DecodeError("unsigned varint does not fit in 32 bits")
    return value, pos


def _read_uvarint_last(b, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` (of 2 bytes or more) and the position of its last byte."""
    value = b[pos] & 0x7F
    for shift in (7, 14, 21):
        pos += 1
        x = b[pos]
        value |= (x & 0x7F) << shift
        if x < 0x80:
            return value, pos
    pos += 1
    x = b[pos]
    if x > 0x0F:
        raise DecodeError("unsigned varint is longer than 5 bytes or above 2**32 - 1")
    return value | x << 28, pos


_write_uvarint = put_uvarint


def _apply(b, start: int, end: int, edits: list) -> bytes:
    """``b[start:end]`` with each (from, to, replacement) of ``edits`` applied."""
    out = bytearray()
    cur = start
    for lo, hi, replacement in edits:
        out += b[cur:lo]
        out += replacement
        cur = hi
    out += b[cur:end]
    return bytes(out)


def _tags(b, pos: int, limit: int, known: dict, edits: list) -> int:
    """A tagged-field section with at least one field (the empty one is inlined)."""
    start = pos
    count, pos = _read_uvarint(b, pos)
    if count * 2 > limit - pos:
        raise _too_many("tagged fields", count, limit - pos)
    kept = []
    rewrite = False
    for _ in range(count):
        tag, pos = _read_uvarint(b, pos)
        size, pos = _read_uvarint(b, pos)
        if size > limit - pos:
            raise _too_long(f"tagged field {tag}", size, limit - pos)
        end = pos + size
        walk = known.get(tag)
        if walk is None:
            rewrite = True
        else:
            inner: list = []
            if walk(b, pos, end, inner) != end:
                raise DecodeError(f"tagged field {tag} does not fill its {size} bytes")
            rewrite = rewrite or bool(inner)
            kept.append((tag, pos, end, inner))
        pos = end
    if rewrite:
        out = bytearray()
        _write_uvarint(out, len(kept))
        for tag, lo, hi, inner in kept:
            content = _apply(b, lo, hi, inner)
            _write_uvarint(out, tag)
            _write_uvarint(out, len(content))
            out += content
        edits.append((start, pos, bytes(out)))
    return pos


def _too_long(what: str, n: int, left: int) -> DecodeError:
    return DecodeError(f"{what}: length {n} exceeds the {max(left, 0)} bytes left")


def _too_many(what: str, n: int, left: int) -> DecodeError:
    return DecodeError(f"{what}: {n} items cannot fit in the {max(left, 0)} bytes left")


def _bad_length(what: str, n: int, left: int) -> DecodeError:
    if n == -1:
        return DecodeError(f"{what}: null, which the schema does not allow")
    if n < -1:
        return DecodeError(f"{what}: invalid length {n}")
    return _too_long(what, n, left)


def _bad_count(what: str, n: int, left: int) -> DecodeError:
    if n == -1:
        return DecodeError(f"{what}: null array, which the schema does not allow")
    if n < -1:
        return DecodeError(f"{what}: invalid array length {n}")
    return _too_many(what, n, left)


def _bad_marker(what: str, marker: int) -> DecodeError:
    return DecodeError(f"{what}: invalid nullable struct marker {marker}")


def _truncated(what: str) -> DecodeError:
    return DecodeError(f"truncated {what}")


# A value's shape on the wire, as the walk sees it:
#   ("fixed", size)
#   ("compact", nullable)              compact string, bytes or records
#   ("legacy", nullable, width)        int16 (string) or int32 (bytes) length
#   ("struct", cls, nullable)          nullable: an int8 marker first
#   ("array", item, nullable, compact)
# These follow kio 0.6.5's reader: array items are never nullable, tagged
# primitives are read as non-nullable, tagged structs are nullable when their
# type is, and a request header's client_id is a nullable int16 string.

_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


def _nullable_type(tp: Any) -> bool:
    return get_origin(tp) in (UnionType, Union) and NoneType in get_args(tp)


def _primitive_shape(kafka_type: str, flexible: bool, nullable: bool) -> tuple:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return ("fixed", size)
    if kafka_type not in ("string", "bytes", "records"):
        raise DecodeError(f"unknown kafka type {kafka_type!r}")
    if flexible:
        return ("compact", nullable)
    return ("legacy", nullable, 2 if kafka_type == "string" else 4)


def _field_shape(cls: type, f: Any, tagged: bool) -> tuple:
    flexible = cls.__flexible__
    if cls.__name__ == "RequestHeader" and f.name == "client_id":
        return ("legacy", True, 2)
    kind = classify_field(f)
    if kind.is_array:
        if isinstance(kind, EntityTupleField):
            item = ("struct", kind.type_, False)
        else:
            item = _primitive_shape(f.metadata["kafka_type"], flexible, False)
        return ("array", item, _nullable_type(f.type), flexible)
    if isinstance(kind, EntityField):
        return ("struct", kind.type_, is_optional(f))
    return _primitive_shape(f.metadata["kafka_type"], flexible, is_optional(f) and not tagged)


@cache
def _struct_info(cls: type) -> tuple[tuple, dict[int, tuple]]:
    """(untagged fields as (name, shape), {tag: (name, shape)})."""
    plain = []
    tagged = {}
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is None:
            plain.append((f.name, _field_shape(cls, f, False)))
        else:
            tagged[int(tag)] = (f.name, _field_shape(cls, f, True))
    return tuple(plain), tagged


def _min_size(shape: tuple) -> int:
    """The fewest bytes any encoding of ``shape`` takes."""
    kind = shape[0]
    if kind == "fixed":
        return shape[1]
    if kind == "compact":
        return 1
    if kind == "legacy":
        return shape[2]
    if kind == "array":
        return 1 if shape[3] else 4
    cls, nullable = shape[1], shape[2]
    if nullable:
        return 1
    plain, _ = _struct_info(cls)
    return sum(_min_size(s) for _, s in plain) + (1 if cls.__flexible__ else 0)


def _fixed_size(shape: tuple) -> int | None:
    """The size of ``shape`` if every encoding of it has the same size."""
    if shape[0] == "fixed":
        return shape[1]
    if shape[0] != "struct" or shape[2] or shape[1].__flexible__:
        return None
    total = 0
    for _, s in _struct_info(shape[1])[0]:
        size = _fixed_size(s)
        if size is None:
            return None
        total += size
    return total


class _Emitter:
    """Writes the source of one walk function.

    The generated code keeps the cursor in ``pos`` plus a constant ``k`` known
    only here: fixed-size fields add to ``k`` instead of costing a statement,
    reads happen at ``pos + k``, and ``k`` is folded into ``pos`` only where
    control flow forks (loops, null checks) and at the end.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {}
        self.k = 0

    def const(self, value: Any) -> str:
        name = f"_k{len(self.names)}"
        self.names[name] = value
        return name

    @property
    def at(self) -> str:
        """The expression for the current position."""
        return f"pos + {self.k}" if self.k else "pos"

    def left(self) -> str:
        """The expression for the bytes left before ``limit``."""
        return f"limit - pos - {self.k}" if self.k else "limit - pos"

    def line(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def flush(self, indent: int) -> None:
        if self.k:
            self.line(indent, f"pos += {self.k}")
            self.k = 0

    def block(self, indent: int, head: str, body) -> None:
        """``head:`` then ``body(indent + 1)``; the cursor is folded on entry and exit."""
        self.flush(indent)
        self.line(indent, head + ":")
        mark = len(self.lines)
        body(indent + 1)
        self.flush(indent + 1)
        if len(self.lines) == mark:
            self.line(indent + 1, "pass")

    def uvarint(self, indent: int) -> None:
        """``n`` = the unsigned varint at the cursor; the cursor then sits on its last byte."""
        self.line(indent, f"n = b[{self.at}]")
        back = f"; pos -= {self.k}" if self.k else ""
        self.line(indent, f"if n > 127: n, pos = _read_uvarint_last(b, {self.at}){back}")

    # -- values

    def value(self, indent: int, shape: tuple, what: str) -> None:
        kind = shape[0]
        if kind == "fixed":
            self.k += shape[1]
            return
        w = self.const(what)
        if kind == "compact":
            self.uvarint(indent)
            # the content ends at (last varint byte) + n, null (0) takes the one byte
            if shape[1]:
                self.line(indent, f"if n > {self.left()}: raise _too_long({w}, n - 1, {self.left()} - 1)")
                self.line(indent, "pos += n or 1")
            else:
                self.line(indent, f"if not 0 < n <= {self.left()}: raise _bad_length({w}, n - 1, {self.left()} - 1)")
                self.line(indent, "pos += n")
        elif kind == "legacy":
            width = shape[2]
            self.line(indent, f"n = {'_i16' if width == 2 else '_i32'}(b, {self.at})[0]")
            self.k += width
            if shape[1]:
                self.line(indent, f"if not -1 <= n <= {self.left()}: raise _bad_length({w}, n, {self.left()})")
                self.line(indent, "if n > 0: pos += n")
            else:
                self.line(indent, f"if not 0 <= n <= {self.left()}: raise _bad_length({w}, n, {self.left()})")
                self.line(indent, "pos += n")
        elif kind == "struct":
            cls, nullable = shape[1], shape[2]
            if nullable:
                self.line(indent, f"n = b[{self.at}]")
                self.k += 1
                self.block(indent, "if n < 128", lambda i: self.struct(i, cls))
                self.line(indent, f"elif n != 255: raise _bad_marker({w}, n - 256)")
            else:
                self.struct(indent, cls)
        else:
            self.array(indent, shape, what, w)

    def array(self, indent: int, shape: tuple, what: str, w: str) -> None:
        item, nullable, compact = shape[1], shape[2], shape[3]
        size = max(_min_size(item), 1)
        fixed = _fixed_size(item)
        if compact:
            self.uvarint(indent)
            self.k += 1
            count = "n - 1"
            if nullable:
                self.line(indent, f"if n and ({count}) * {size} > {self.left()}: raise _too_many({w}, n - 1, {self.left()})")
            else:
                self.line(indent, f"if not n or ({count}) * {size} > {self.left()}: raise _bad_count({w}, n - 1, {self.left()})")
        else:
            self.line(indent, f"n = _i32(b, {self.at})[0]")
            self.k += 4
            count = "n"
            if nullable:
                self.line(indent, f"if n < -1 or n * {size} > {self.left()}: raise _bad_count({w}, n, {self.left()})")
            else:
                self.line(indent, f"if not 0 <= n * {size} <= {self.left()}: raise _bad_count({w}, n, {self.left()})")
        if fixed is not None:
            if fixed:
                # null (-1 or 0) adds nothing: max() of the count with 0
                self.line(indent, f"pos += ({count}) * {fixed}" if not nullable else f"if n > 0: pos += ({count}) * {fixed}")
            return
        loop = lambda i: self.block(i, f"for _ in range({count})", lambda j: self.value(j, item, what + "[]"))  # noqa: E731
        if nullable:
            self.block(indent, "if n > 0", loop)
        else:
            loop(indent)

    def struct(self, indent: int, cls: type) -> None:
        plain, tagged = _struct_info(cls)
        for name, shape in plain:
            self.value(indent, shape, f"{cls.__name__}.{name}")
        if cls.__flexible__:
            known = self.const({tag: _tagged_walker(cls, tag) for tag in tagged})
            # the usual empty section is one zero byte; _tags returns the end
            self.line(indent, f"if b[{self.at}]: pos = _tags(b, {self.at}, limit, {known}, edits) - {self.k + 1}")
            self.k += 1


_WALK_GLOBALS = {
    "_i16": _I16.unpack_from,
    "_i32": _I32.unpack_from,
    "_read_uvarint_last": _read_uvarint_last,
    "_tags": _tags,
    "_too_long": _too_long,
    "_too_many": _too_many,
    "_bad_count": _bad_count,
    "_bad_length": _bad_length,
    "_bad_marker": _bad_marker,
    "_truncated": _truncated,
}


def _compile(name: str, what: str, body) -> Any:
    """A function ``walk(b, pos, limit, edits) -> end`` whose body ``body`` writes."""
    em = _Emitter()
    em.line(0, "def walk(b, pos, limit, edits):")
    body(em)
    em.flush(1)
    em.line(1, f"if pos > limit: raise _truncated({em.const(what)})")
    em.line(1, "return pos")
    source = "\n".join(em.lines)
    namespace = {**_WALK_GLOBALS, **em.names}
    exec(compile(source, f"<walk {name}>", "exec"), namespace)  # noqa: S102 - our own generated source
    walk = namespace["walk"]
    walk.__qualname__ = f"walk_{name}"
    walk.source = source
    return walk


@cache
def _walker(cls: type) -> Any:
    """The bounded walk over one ``cls`` entity (see the comment above ``decode``)."""
    return _compile(cls.__qualname__, cls.__name__, lambda em: em.struct(1, cls))


@cache
def _tagged_walker(cls: type, tag: int) -> Any:
    name, shape = _struct_info(cls)[1][tag]
    what = f"{cls.__name__}.{name}"
    return _compile(f"{cls.__qualname__}.{name}", what, lambda em: em.value(1, shape, what))


# --------------------------------------------------------------------------
# encoding and building


def encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()
