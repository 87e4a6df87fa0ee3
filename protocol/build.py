"""Building kio entities from plain dicts, and back (``build``, ``drop_unknown``, ``to_dict``).

Handlers answer every version of an API with one dict; ``build`` makes the entity of the
version asked for, drops the keys of the message's other versions, and refuses a key of no
version of it (``UnknownFieldError``), which would otherwise go out as a zero value.
"""

from __future__ import annotations

import datetime
import importlib
import pkgutil
import re
import uuid
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.static.primitive import i32Timedelta, i64Timedelta

from .kio_names import NAMES as KIO_NAMES
from .regions import Region

_UTC = datetime.UTC


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
    if kafka_type == "records" and isinstance(value, Region):
        # records left in a file (protocol/regions.py): kio writes bytes, so they are read here
        return value.read()
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


class UnknownFieldError(ValueError):
    """``build`` was given a key that no version of the message has.

    Keys of other versions of the same message are dropped silently (a handler
    answers every version with one dict); anything else is a typo or a stale
    name, and the field it meant would silently go out as its zero value.
    """

    def __init__(self, cls: type, key: Any, known: frozenset[str], data: Any) -> None:
        super().__init__()
        self.cls = cls
        self.key = key
        self.known = known
        self.root = cls.__name__  # the outermost entity being built
        self.path = ""  # from ``root`` down to the entity that has the bad key
        self._data = data  # what the innermost build call annotated so far was given

    def _nest(self, parent: type, name: str, value: Any, data: Any) -> None:
        """Prefix ``.name`` or ``.name[i]``: the failing item is ``self._data``."""
        segment = f".{name}"
        if not is_dataclass(value) and not isinstance(value, dict):
            for i, item in enumerate(value):
                if item is self._data:
                    segment += f"[{i}]"
                    break
        self.path = segment + self.path
        self.root = parent.__name__
        self._data = data

    def __str__(self) -> str:
        kind = self.cls.__module__.removeprefix("kio.schema.")
        return (
            f"{self.root}{self.path}: unknown key {self.key!r} for {self.cls.__name__} ({kind}), "
            f"a field of no version of it; known names: {', '.join(sorted(self.known))}"
        )


_KIO_MODULE = re.compile(r"(kio\.schema\.\w+)\.v\d+\.(\w+)")


def _known_names(cls: type) -> frozenset[str]:
    """The field names of ``cls`` in any version of its message.

    kio generates ``kio.schema.<message>.v<N>.<request|response|data|header>``
    with one class per entity per version, and a nested entity keeps its name
    across versions, so the same name in the sibling modules is the same entity.
    ``protocol/kio_names.py`` holds those names for the pinned kio; an entity it
    lacks (another kio) has them found by importing the sibling modules. A class
    from anywhere else knows only its own fields.
    """
    names = {f.name for f in fields(cls)}
    m = _KIO_MODULE.fullmatch(cls.__module__)
    if m is None:
        return frozenset(names)
    package, kind = m[1], m[2]
    listed = KIO_NAMES.get(f"{package.removeprefix('kio.schema.')}.{kind}.{cls.__name__}")
    if listed is not None and names.issubset(listed):
        return frozenset(listed)
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if not re.fullmatch(r"v\d+", info.name):
            continue
        try:
            module = importlib.import_module(f"{package}.{info.name}.{kind}")
        except ModuleNotFoundError:
            continue
        other = vars(module).get(cls.__name__)
        if isinstance(other, type) and is_dataclass(other) and other.__module__ == module.__name__:
            names.update(f.name for f in fields(other))
    return frozenset(names)


@cache
def _plan(cls: type) -> tuple[frozenset[str], tuple[tuple, ...]]:
    """(the field names of ``cls`` itself, one (name, kind, ...) per field of it)."""
    plan = []
    for f in fields(cls):
        kind = classify_field(f)
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        tagged = get_field_tag(f) is not None
        plan.append((f.name, kind, f.metadata.get("kafka_type"), is_optional(f) and not tagged, has_default))
    return frozenset(p[0] for p in plan), tuple(plan)


# The names of every version of a message: looked up only when a dict has a key that is
# no field of the class being built. From the generated table, not by importing the message's
# other versions: that cost a broker 60-80 imports of kio dataclasses in its first seconds.
_known = cache(_known_names)


def _build_plan(cls: type) -> tuple[frozenset[str], tuple[tuple, ...]]:
    """(the names ``build`` accepts for ``cls``, one (name, kind, ...) per field of it)."""
    return _known(cls), _plan(cls)[1]


def build(cls: type, data: dict[str, Any] | Any) -> Any:
    """Build a kio entity of ``cls`` from a dict, recursively.

    Keys of other versions of the message are dropped; a key that is a field
    of no version of it raises ``UnknownFieldError``, which names the path to
    it. Fields the dict lacks take the schema's default, or a zero value (0,
    "", empty array, nested zero entity). A dataclass of another class is read
    as the dict of its fields.
    """
    src = data
    if type(data) is not dict and is_dataclass(data) and not isinstance(data, type):
        if type(data) is cls:
            return data
        data = {f.name: getattr(data, f.name) for f in fields(data)}
    own, plan = _plan(cls)
    if not own.issuperset(data):
        known = _known(cls)
        if not known.issuperset(data):
            key = next(k for k in data if k not in known)
            raise UnknownFieldError(cls, key, known, src)
    kwargs = {}
    try:
        for name, kind, kafka_type, optional, has_default in plan:
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
    except UnknownFieldError as exc:
        exc._nest(cls, name, data[name], src)
        raise
    return cls(**kwargs)


def drop_unknown(cls: type, data: dict[str, Any], only: frozenset[str] | set[str] | None = None) -> dict[str, Any]:
    """A copy of ``data`` without the keys ``build`` would refuse, at every level.

    With ``only``, just those names are dropped where unknown (the rest still
    meet ``build``'s check). For a caller that fills generic fields everywhere
    on purpose (the fault injector's error answers), never for a handler's answer.
    """
    own, plan = _plan(cls)
    known = own if own.issuperset(data) else _known(cls)
    out = {k: v for k, v in data.items() if k in known or (only is not None and k not in only)}
    for name, kind, _, _, _ in plan:
        value = out.get(name)
        if isinstance(value, dict) and isinstance(kind, EntityField):
            out[name] = drop_unknown(kind.type_, value, only)
        elif value is not None and isinstance(kind, EntityTupleField):
            out[name] = [drop_unknown(kind.type_, v, only) if isinstance(v, dict) else v for v in value]
    return out


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
