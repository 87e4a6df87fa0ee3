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
# encoding


def _is_default(f: F, v) -> bool:
    return v is None or v == f.default or (isinstance(v, list) and not v)


def _write(w: _Writer, t, v, flexible: bool, version: int) -> None:
    if t == INT32:
        w.i32(v)
    elif t == INT64:
        w.i64(v)
    elif t == INT16:
        w.i16(v)
    elif t == INT8:
        w.i8(v)
    elif t == UUID:
        w.uuid(v)
    elif t == STRING:
        w.cstring(v) if flexible else w.string(v)
    elif t == NSTRING:
        w.cnstring(v) if flexible else w.nstring(v)
    elif t == BYTES:
        w.cbytes(v) if flexible else w.bytes_(v)
    elif isinstance(t, Array):
        if flexible and t.of == INT32:
            w.cint32_array(v)
            return
        w.carray_len(len(v)) if flexible else w.array_len(len(v))
        for item in v:
            _write(w, t.of, item, flexible, version)
    else:
        write_struct(w, t, v, version, flexible)


def write_struct(w: _Writer, s: Struct, obj, version: int, flexible: bool) -> None:
    if s.check is not None:
        s.check(obj, False)
    for f in s.fields:
        if f.since <= version:
            _write(w, f.type, getattr(obj, f.name), flexible, version)
    if not flexible:
        return
    tags = []
    for f in s.tagged:
        v = getattr(obj, f.name)
        if f.since <= version and not _is_default(f, v):
            sub = _Writer()
            if isinstance(f.type, Struct):
                sub.i8(1)  # a nullable struct's presence byte
            _write(sub, f.type, v, flexible, version)
            tags.append((f.tag, sub.done()))
    w.tags(tags)


# --------------------------------------------------------------------------
# decoding


def _read(r: _Reader, t, flexible: bool, version: int):
    if t == INT32:
        return r.i32()
    if t == INT64:
        return r.i64()
    if t == INT16:
        return r.i16()
    if t == INT8:
        return r.i8()
    if t == UUID:
        return r.uuid()
    if t == STRING:
        return r.cstring() if flexible else r.string()
    if t == NSTRING:
        return r.cnstring() if flexible else r.nstring()
    if t == BYTES:
        return r.cbytes() if flexible else r.bytes_()
    if isinstance(t, Array):
        if flexible and t.of == INT32:
            return r.cint32_array()
        n = r.carray_len() if flexible else r.array_len()
        return [_read(r, t.of, flexible, version) for _ in range(n)]
    return read_struct(r, t, version, flexible)


def _default(f: F):
    return [] if isinstance(f.default, list) else f.default


def _read_tagged(f: F, raw: bytes, version: int):
    size = _FIXED_SIZE.get(f.type)
    if size is not None and len(raw) != size:
        _fail(f"tagged field {f.name} is not {size} bytes")
    r = _Reader(raw, 0)
    if isinstance(f.type, Struct) and r.uvarint() == 0:  # a nullable struct's presence byte
        return None
    v = _read(r, f.type, True, version)
    if r.pos > len(raw):
        _fail("record truncated")
    return v


def read_struct(r: _Reader, s: Struct, version: int, flexible: bool):
    values = [_read(r, f.type, flexible, version) if f.since <= version else _default(f) for f in s.fields]
    if s.tagged:
        tagged = {f.tag: f for f in s.tagged}
        found = dict.fromkeys(tagged)
        for tag, raw in ((r.tags() or {}).items() if flexible else ()):
            f = tagged.get(tag)
            if f is not None and f.since <= version:
                found[tag] = _read_tagged(f, raw, version)
        values += [_default(f) if found[f.tag] is None else found[f.tag] for f in s.tagged]
    elif flexible:
        r.tags()
    obj = s.cls(*values)
    if s.check is not None:
        s.check(obj, True)
    return obj


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
