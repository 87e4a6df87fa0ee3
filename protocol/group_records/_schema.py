"""Declarative record descriptions and the one codec they drive.

Kafka generates its coordinator records' classes and serializers from JSON
schemas (``group-coordinator/src/main/resources/common/message/*.json``). Here
each record is described once, as :class:`Struct` / :class:`F` objects that
say what those schemas say (field name, type, first version, tag, default),
and :func:`write_struct` / :func:`read_struct` encode and decode any of them.
The dataclasses of keys, values and their nested structs are made from the
same descriptions (:meth:`Struct.cls`).

Encoding rules, as Kafka's generated code:

* a field whose ``since`` is above the version is left out (and decodes to
  its default);
* in a flexible version strings, bytes and arrays are compact, every struct
  ends with its tagged fields, and a tagged field is written only when it
  differs from its default (an empty list counts as the default);
* a tagged nullable struct is a presence byte (0 = null) and the struct.

Decoding goes through :class:`~._codec._Reader`, which checks every length
and count against the bytes left; a tagged field of a fixed size must have
that size. Errors are :class:`~._codec.RecordFormatError` (or ``struct.error``
/ ``IndexError`` from a truncated integer, which the callers turn into one).
"""

from __future__ import annotations

import dataclasses
from typing import Any
from collections.abc import Callable

from ._codec import _fail, _Reader, _Writer, RecordFormatError

INT8, INT16, INT32, INT64, UUID = "int8", "int16", "int32", "int64", "uuid"
STRING, NSTRING, BYTES = "string", "nullable string", "bytes"

_FIXED_SIZE = {INT8: 1, INT16: 2, INT32: 4, INT64: 8, UUID: 16}


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


_REQUIRED = _Required()


@dataclasses.dataclass(frozen=True)
class Array:
    """``[]of``: an array of a primitive type name or of a :class:`Struct`."""

    of: Any


@dataclasses.dataclass(frozen=True)
class F:
    """A field: its Python name, type, default (none: required), first version, tag."""

    name: str
    type: Any
    default: Any = _REQUIRED
    since: int = 0
    tag: int | None = None
    note: str = ""  # what Kafka's schema says of it, for the reader


class Struct:
    """A struct's fields in wire order, and the dataclass made from them.

    ``check(obj, decoding)`` validates what the fields alone cannot say (it may
    normalize a decoded object); ``frozen`` makes a hashable class (keys).
    """

    def __init__(self, name: str, fields: list[F], *, frozen: bool = False, module: str | None = None,
                 check: Callable[[Any, bool], None] | None = None) -> None:
        self.name = name
        self.fields = tuple(f for f in fields if f.tag is None)
        self.tagged = tuple(sorted((f for f in fields if f.tag is not None), key=lambda f: f.tag))
        self.check = check
        self.compiled: dict[tuple[int, bool], tuple] = {}  # (version, flexible) -> (read, write), see _struct_codec
        spec = []
        # a default a required field follows is only the value of an absent (older version's) field
        last_required = max((i for i, f in enumerate(fields) if f.default is _REQUIRED), default=-1)
        for i, f in enumerate(fields):
            if i <= last_required:
                spec.append((f.name, Any))
            elif isinstance(f.default, list):
                spec.append((f.name, Any, dataclasses.field(default_factory=list)))
            else:
                spec.append((f.name, Any, dataclasses.field(default=f.default)))
        self.cls = dataclasses.make_dataclass(name, spec, frozen=frozen, slots=True)
        if module is not None:
            self.cls.__module__ = module  # for repr and pickling (make_dataclass takes no module before 3.12)


# --------------------------------------------------------------------------
# the codec: each struct's fields compiled once per (version, flexible) into
# a list of reader / writer functions

_PRIMITIVES = {  # type -> (reader, writer) as unbound methods, classic then flexible
    INT8: ((_Reader.i8, _Writer.i8),) * 2,
    INT16: ((_Reader.i16, _Writer.i16),) * 2,
    INT32: ((_Reader.i32, _Writer.i32),) * 2,
    INT64: ((_Reader.i64, _Writer.i64),) * 2,
    UUID: ((_Reader.uuid, _Writer.uuid),) * 2,
    STRING: ((_Reader.string, _Writer.string), (_Reader.cstring, _Writer.cstring)),
    NSTRING: ((_Reader.nstring, _Writer.nstring), (_Reader.cnstring, _Writer.cnstring)),
    BYTES: ((_Reader.bytes_, _Writer.bytes_), (_Reader.cbytes, _Writer.cbytes)),
}
_COMPACT_ARRAYS = {INT32: (_Reader.cint32_array, _Writer.cint32_array), STRING: (_Reader.cstring_array, _Writer.cstring_array)}


def _codec(t, version: int, flexible: bool):
    """(read(r), write(w, value)) of a value of type ``t``."""
    if isinstance(t, Struct):
        return _struct_codec(t, version, flexible)
    if not isinstance(t, Array):
        return _PRIMITIVES[t][flexible]
    if flexible and t.of in _COMPACT_ARRAYS:
        return _COMPACT_ARRAYS[t.of]
    read_item, write_item = _codec(t.of, version, flexible)
    read_len, write_len = (_Reader.carray_len, _Writer.carray_len) if flexible else (_Reader.array_len, _Writer.array_len)

    def read(r):
        return [read_item(r) for _ in range(read_len(r))]

    def write(w, items):
        write_len(w, len(items))
        for item in items:
            write_item(w, item)

    return read, write


def _absent(f: F):
    """The reader of a field the version lacks: its default (a new list for a list)."""
    if isinstance(f.default, list):
        return lambda r: []
    return lambda r, default=f.default: default


def _is_default(f: F, v) -> bool:
    return v is None or v == f.default or (isinstance(v, list) and not v)


def _struct_codec(s: Struct, version: int, flexible: bool):
    cached = s.compiled.get((version, flexible))
    if cached is not None:
        return cached
    readers = [_codec(f.type, version, flexible)[0] if f.since <= version else _absent(f) for f in s.fields]
    writers = [(f.name, _codec(f.type, version, flexible)[1]) for f in s.fields if f.since <= version]
    tagged = {f.tag: (f, *_codec(f.type, version, True)) for f in s.tagged if flexible and f.since <= version}
    defaults = [_absent(f) for f in s.tagged]
    cls, check = s.cls, s.check

    def read_plain(r):  # the usual struct: no tagged fields known, no check
        values = [read_field(r) for read_field in readers]
        if flexible:
            r.tags()
        return cls(*values)

    def read(r):
        values = [read_field(r) for read_field in readers]
        if flexible:
            found = r.tags()
            if s.tagged:
                values += [_read_tagged(tagged, f, found, r) if found and f.tag in found else default(r)
                           for f, default in zip(s.tagged, defaults, strict=True)]
        elif s.tagged:
            values += [default(r) for default in defaults]
        obj = cls(*values)
        if check is not None:
            check(obj, True)
        return obj

    def write_plain(w, obj):
        for name, write_field in writers:
            write_field(w, getattr(obj, name))
        if flexible:
            w.buf.append(0)  # no tagged fields

    def write(w, obj):
        if check is not None:
            check(obj, False)
        for name, write_field in writers:
            write_field(w, getattr(obj, name))
        if flexible:
            tags = []
            for tag, (f, _, write_tagged) in tagged.items():
                v = getattr(obj, f.name)
                if not _is_default(f, v):
                    sub = _Writer()
                    if isinstance(f.type, Struct):
                        sub.i8(1)  # a nullable struct's presence byte
                    write_tagged(sub, v)
                    tags.append((tag, sub.done()))
            w.tags(tags)

    if not s.tagged and check is None:
        read, write = read_plain, write_plain
    s.compiled[(version, flexible)] = read, write
    return read, write


def _read_tagged(tagged: dict, f: F, found: dict, r: _Reader):
    if f.tag not in tagged:  # a tag of a later version
        return _absent(f)(r)
    raw = found[f.tag]
    size = _FIXED_SIZE.get(f.type)
    if size is not None and len(raw) != size:
        _fail(f"tagged field {f.name} is not {size} bytes")
    sub = _Reader(raw, 0)
    if isinstance(f.type, Struct) and sub.uvarint() == 0:  # a nullable struct's presence byte
        return None
    v = tagged[f.tag][1](sub)
    if sub.pos > len(raw):
        _fail("record truncated")
    return v


def write_struct(w: _Writer, s: Struct, obj, version: int, flexible: bool) -> None:
    _struct_codec(s, version, flexible)[1](w, obj)


def read_struct(r: _Reader, s: Struct, version: int, flexible: bool):
    return _struct_codec(s, version, flexible)[0](r)


# --------------------------------------------------------------------------
# records


class Record:
    """One record type: its key (after the int16 record type, never flexible) and its value.

    ``versions`` are the value versions defined, ``flexible`` the first flexible
    one, ``write_version`` the one :meth:`encode_value` writes by default.
    """

    def __init__(self, record_type: int, key: Struct, value: Struct, *, versions: tuple[int, int] = (0, 0),
                 flexible: int = 0, write_version: int | None = None) -> None:
        self.record_type = record_type
        self.key = key
        self.value = value
        self.versions = versions
        self.flexible = flexible
        self.write_version = versions[1] if write_version is None else write_version

    def encode_key(self, key) -> bytes:
        w = _Writer(self.record_type)
        write_struct(w, self.key, key, 0, False)
        return w.done()

    def decode_key(self, r: _Reader):
        return read_struct(r, self.key, 0, False)

    def encode_value(self, value, version: int | None = None) -> bytes:
        if version is None:
            version = self.write_version
        lo, hi = self.versions
        if not lo <= version <= hi:
            raise ValueError(f"{self.value.name} has no version {version}")
        w = _Writer(version)
        write_struct(w, self.value, value, version, version >= self.flexible)
        return w.done()

    def decode_value(self, data: bytes, version: int, pos: int = 2):
        lo, hi = self.versions
        if not lo <= version <= hi:
            raise RecordFormatError(f"unknown {self.value.name} version {version}")
        r = _Reader(data, pos)
        value = read_struct(r, self.value, version, version >= self.flexible)
        if r.pos > len(data):
            _fail("record truncated")
        return value


def key_of(name: str, *field_names: str, module: str | None = None) -> Struct:
    """A key struct of non-nullable strings (group id, then member id or another name)."""
    return Struct(name, [F(n, STRING) for n in field_names], frozen=True, module=module)
