"""The embedded consumer protocol (subscription and assignment bytes).

Classic groups treat member metadata and assignments as opaque bytes, but when
``protocol_type == "consumer"`` they follow ConsumerProtocolSubscription and
ConsumerProtocolAssignment: an int16 version then the struct. Parsing them
lets the coordinator know the subscribed topics (offset expiry, OffsetDelete)
and report which partitions a rebalance moved. A newer version than kio knows
is read with the newest layout, as Kafka does; garbage gives ``None``.
"""

from __future__ import annotations

import struct
from functools import cache

from kio.index import load_entity_schema

from protocol.codec import decode

_I16 = struct.Struct(">h")
_MAX_VERSION = 3


@cache
def _schema(kind: str, version: int):
    from kio.index import EntityType

    return load_entity_schema(f"consumer_protocol_{kind}", version, EntityType.data)


def _parse(kind: str, data: bytes | None):
    if not data or len(data) < 2:
        return None
    (version,) = _I16.unpack_from(data, 0)
    if version < 0:
        return None
    try:
        entity, _ = decode(_schema(kind, min(version, _MAX_VERSION)), data, 2)
    except Exception:  # noqa: BLE001 - any malformed bytes
        return None
    return entity


def subscribed_topics(metadata: bytes | None) -> frozenset[str] | None:
    sub = _parse("subscription", metadata)
    return None if sub is None else frozenset(sub.topics)


def assigned_partitions(assignment: bytes | None) -> set[tuple[str, int]] | None:
    if assignment is not None and len(assignment) == 0:
        return set()
    asg = _parse("assignment", assignment)
    if asg is None:
        return None
    return {(tp.topic, p) for tp in asg.assigned_partitions for p in tp.partitions}


def parse_subscription(metadata: bytes | None):
    """(version, ConsumerProtocolSubscription) or None."""
    sub = _parse("subscription", metadata)
    if sub is None:
        return None
    return _I16.unpack_from(metadata, 0)[0], sub


def parse_assignment(assignment: bytes | None):
    return _parse("assignment", assignment)


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """ConsumerProtocolAssignment bytes (no user data) at ``version`` (capped at kio's newest)."""
    from protocol.codec import build, encode

    v = max(0, min(version, _MAX_VERSION))
    cls = _schema("assignment", v)
    body = build(cls, {"assigned_partitions": [{"topic": t, "partitions": sorted(p)} for t, p in sorted(partitions.items()) if p], "user_data": None})
    return _I16.pack(v) + encode(body)
