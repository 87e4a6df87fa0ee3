"""Message bodies through kio, plus the three things kio leaves to us.

1. Unknown tagged fields. The protocol says readers skip tags they do not
   know, and newer clients send them, but kio's native reader raises a bare
   ``KeyError``. When that happens we walk the bytes once more with the
   schema in hand, drop the unknown tags and decode again. The walk is pure
   Python but only runs for the rare message that carries an unknown tag.
2. Trailing bytes after a body are ignored, as Kafka does.
3. Building a response for whichever version was asked for. kio has one
   dataclass per version; ``build`` fills one from plain dicts and lists, so a
   handler describes its answer once and every version takes the fields it
   has.
"""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.static.primitive import i32Timedelta, i64Timedelta

__all__ = [
    "DecodeError",
    "build",
    "decode",
    "encode",
    "request_class",
    "response_class",
]

_UTC = datetime.UTC
_I8 = struct.Struct(">b")
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


def decode(cls: type, buf: bytes, offset: int = 0) -> tuple[Any, int]:
    """Decode ``cls`` at ``offset``; returns (entity, end offset).

    Trailing bytes are left alone. Unknown tagged fields are skipped.
    """
    reader = entity_reader(cls)
    try:
        entity, size = reader(buf, offset)
    except KeyError:
        cleaned, _ = strip_unknown_tags(cls, buf, offset)
        try:
            entity, _ = reader(cleaned, 0)
        except Exception as exc:  # noqa: BLE001 - kio raises several kinds
            raise DecodeError(f"cannot decode {cls.__name__}: {exc}") from exc
        # ``size`` must describe the original bytes
        _, end = _walk_entity(cls, memoryview(buf), offset, None)
        return entity, end
    except Exception as exc:  # noqa: BLE001
        raise DecodeError(f"cannot decode {cls.__name__}: {exc}") from exc
    return entity, offset + size


def strip_unknown_tags(cls: type, buf: bytes, offset: int = 0) -> tuple[bytes, int]:
    """Copy one ``cls`` entity from ``buf``, dropping tagged fields the schema lacks."""
    out = bytearray()
    try:
        _, end = _walk_entity(cls, memoryview(buf), offset, out)
    except (IndexError, struct.error) as exc:
        raise DecodeError(f"truncated {cls.__name__}") from exc
    return bytes(out), end


def _read_uvarint(mv: memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if shift > 28:
            raise DecodeError("unsigned varint is too long")
        b = mv[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _write_uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


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


def _primitive_end(kafka_type: str, flexible: bool, legacy_string: bool, mv: memoryview, pos: int) -> int:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        end = pos + size
    elif kafka_type in ("string", "bytes", "records"):
        if flexible and not legacy_string:
            n, pos = _read_uvarint(mv, pos)
            end = pos + max(n - 1, 0)
        elif kafka_type == "string":
            (n,) = _I16.unpack_from(mv, pos)
            end = pos + 2 + max(n, 0)
        else:
            (n,) = _I32.unpack_from(mv, pos)
            end = pos + 4 + max(n, 0)
    else:
        raise DecodeError(f"unknown kafka type {kafka_type!r}")
    if end > len(mv):
        raise DecodeError("truncated field")
    return end


@cache
def _plan(cls: type) -> tuple[list[tuple], frozenset[int]]:
    plan = []
    tags = set()
    is_header = cls.__name__ == "RequestHeader"
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is not None:
            tags.add(tag)
            continue
        kind = classify_field(f)
        plan.append(
            (
                kind,
                f.metadata.get("kafka_type"),
                is_header and f.name == "client_id",
                is_optional(f),
            )
        )
    return plan, frozenset(tags)


def _walk_entity(cls: type, mv: memoryview, pos: int, out: bytearray | None) -> tuple[None, int]:
    flexible = cls.__flexible__
    plan, known_tags = _plan(cls)
    for kind, kafka_type, legacy_string, optional in plan:
        if kind.is_array:
            start = pos
            if flexible:
                n, pos = _read_uvarint(mv, pos)
                count = n - 1
            else:
                (count,) = _I32.unpack_from(mv, pos)
                pos += 4
            if out is not None:
                out += mv[start:pos]
            for _ in range(max(count, 0)):
                pos = _walk_value(kind, kafka_type, flexible, False, False, mv, pos, out)
        else:
            pos = _walk_value(kind, kafka_type, flexible, legacy_string, optional, mv, pos, out)
    if flexible:
        count, pos = _read_uvarint(mv, pos)
        kept = bytearray()
        kept_count = 0
        for _ in range(count):
            start = pos
            tag, pos = _read_uvarint(mv, pos)
            size, pos = _read_uvarint(mv, pos)
            end = pos + size
            if end > len(mv):
                raise DecodeError("truncated tagged field")
            if tag in known_tags:
                kept += mv[start:end]
                kept_count += 1
            pos = end
        if out is not None:
            _write_uvarint(out, kept_count)
            out += kept
    return None, pos


def _walk_value(kind, kafka_type, flexible, legacy_string, optional, mv, pos, out) -> int:
    if isinstance(kind, (EntityField, EntityTupleField)):
        if optional and isinstance(kind, EntityField):
            (marker,) = _I8.unpack_from(mv, pos)
            if out is not None:
                out += mv[pos : pos + 1]
            pos += 1
            if marker < 0:
                return pos
        _, pos = _walk_entity(kind.type_, mv, pos, out)
        return pos
    end = _primitive_end(kafka_type, flexible, legacy_string, mv, pos)
    if out is not None:
        out += mv[pos:end]
    return end


# --------------------------------------------------------------------------
# encoding and building


def encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def _convert_primitive(kafka_type: str, optional: bool, value: Any) -> Any:
    if kafka_type == "error_code":
        return value if isinstance(value, ErrorCode) else ErrorCode(value)
    if kafka_type == "timedelta_i32":
        return value if isinstance(value, datetime.timedelta) else i32Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kafka_type == "timedelta_i64":
        return value if isinstance(value, datetime.timedelta) else i64Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kafka_type == "datetime_i64":
        if value is None or isinstance(value, datetime.datetime):
            return value
        if value < 0:
            return None if optional else datetime.datetime.fromtimestamp(0, _UTC)
        return datetime.datetime.fromtimestamp(value / 1000, _UTC)
    return value


def _zero(kafka_type: str | None, kind, optional: bool):
    if kind.is_array:
        return ()
    if isinstance(kind, EntityField):
        return None if optional else build(kind.type_, {})
    if optional:
        return None
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("string",):
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type in ("timedelta_i32", "timedelta_i64", "datetime_i64"):
        return _convert_primitive(kafka_type, optional, 0)
    if kafka_type == "float64":
        return 0.0
    return 0


@cache
def _build_plan(cls: type) -> tuple[tuple, ...]:
    plan = []
    for f in fields(cls):
        kind = classify_field(f)
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        tagged = get_field_tag(f) is not None
        plan.append((f.name, kind, f.metadata.get("kafka_type"), is_optional(f) and not tagged, has_default))
    return tuple(plan)


def build(cls: type, data: dict[str, Any] | Any) -> Any:
    """Build a kio entity of ``cls`` from a dict, recursively.

    Keys the version lacks are ignored; fields the dict lacks take the schema's
    default, or a zero value (0, "", empty array, nested zero entity).
    """
    if is_dataclass(data) and not isinstance(data, type):
        if type(data) is cls:
            return data
        data = {f.name: getattr(data, f.name) for f in fields(data)}
    kwargs = {}
    for name, kind, kafka_type, optional, has_default in _build_plan(cls):
        if name in data:
            value = data[name]
            if isinstance(kind, EntityTupleField):
                value = None if value is None else tuple(build(kind.type_, v) for v in value)
            elif isinstance(kind, EntityField):
                value = None if value is None else build(kind.type_, value)
            elif isinstance(kind, PrimitiveTupleField):
                value = None if value is None else tuple(_convert_primitive(kafka_type, False, v) for v in value)
            else:
                value = _convert_primitive(kafka_type, optional, value)
            kwargs[name] = value
        elif not has_default:
            kwargs[name] = _zero(kafka_type, kind, optional)
    return cls(**kwargs)


def to_dict(entity: Any) -> dict[str, Any]:
    """The inverse of ``build``: a kio entity as plain dicts and lists."""
    result = {}
    for f in fields(entity):
        value = getattr(entity, f.name)
        if is_dataclass(value):
            value = to_dict(value)
        elif isinstance(value, tuple):
            value = [to_dict(v) if is_dataclass(v) else v for v in value]
        result[f.name] = value
    return result
