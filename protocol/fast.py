"""Hand-written encoders for the hottest responses, byte-identical to kio's.

kio decodes in native code but builds and encodes responses in Python; for a
Heartbeat that is most of the broker's work. These encoders turn the handler's
dict straight into the framed response. ``tests/unit/test_fast_encoders.py``
proves, for every version and random contents, that they produce exactly the
bytes kio produces. Anything without a fast encoder goes through kio.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from .regions import Region

_I32 = struct.Struct(">i")
_HEAD0 = struct.Struct(">ii")  # size, correlation id
_I16 = struct.Struct(">h")
_I32_I16 = struct.Struct(">ih")
_PART = struct.Struct(">ih")


_SMALL = [bytes([n]) for n in range(0x80)]


def uvarint(n: int) -> bytes:
    """An unsigned varint (flexible versions' lengths and counts)."""
    if 0 <= n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_uvarint = uvarint


def _code(value) -> int:
    return value if isinstance(value, int) else int(value.value)


def _ms(value) -> int:
    return int(value) if not hasattr(value, "total_seconds") else round(value.total_seconds() * 1000)


def _frame(correlation_id: int, flexible_header: bool, body: bytes) -> bytes:
    head = b"\x00" if flexible_header else b""
    return _HEAD0.pack(4 + len(head) + len(body), correlation_id) + head + body


# ---------------------------------------------------------------- Heartbeat (12)


def heartbeat(version: int, correlation_id: int, body: dict) -> bytes:
    code = _code(body["error_code"])
    if version == 0:
        return _frame(correlation_id, False, _I16.pack(code))
    payload = _I32_I16.pack(_ms(body.get("throttle_time", 0)), code)
    if version >= 4:
        return _frame(correlation_id, True, payload + b"\x00")
    return _frame(correlation_id, False, payload)


# ---------------------------------------------------------------- OffsetCommit (8)


def offset_commit(version: int, correlation_id: int, body: dict) -> bytes:
    flexible = version >= 8
    out = bytearray()
    if version >= 3:
        out += _I32.pack(_ms(body.get("throttle_time", 0)))
    tags = b"\x00" if flexible else b""  # no tagged fields in a flexible version
    topics = body["topics"]
    out += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for t in topics:
        name = t["name"].encode()
        out += (_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))) + name
        parts = t["partitions"]
        out += _uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for p in parts:
            out += _PART.pack(p["partition_index"], _code(p["error_code"])) + tags
        out += tags  # the topic's
    out += tags  # the response's
    return _frame(correlation_id, flexible, bytes(out))


# ---------------------------------------------------------------- JoinGroup (11), SyncGroup (14)


def _str(out: bytearray, value: str | None, flexible: bool) -> None:
    if value is None:
        out += b"\x00" if flexible else b"\xff\xff"
        return
    raw = value.encode()
    out += (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _bytes(out: bytearray, value: bytes, flexible: bool) -> None:
    out += (_uvarint(len(value) + 1) if flexible else _I32.pack(len(value))) + value


def join_group(version: int, correlation_id: int, body: dict) -> bytes:
    flexible = version >= 6
    out = bytearray()
    if version >= 2:
        out += _I32.pack(_ms(body.get("throttle_time", 0)))
    out += _I16.pack(_code(body["error_code"])) + _I32.pack(body["generation_id"])
    if version >= 7:
        _str(out, body.get("protocol_type"), flexible)
    _str(out, body.get("protocol_name"), flexible)
    _str(out, body["leader"], flexible)
    if version >= 9:
        out.append(1 if body.get("skip_assignment") else 0)
    _str(out, body["member_id"], flexible)
    members = body.get("members") or ()
    out += _uvarint(len(members) + 1) if flexible else _I32.pack(len(members))
    for m in members:
        _str(out, m["member_id"], flexible)
        if version >= 5:
            _str(out, m.get("group_instance_id"), flexible)
        _bytes(out, m["metadata"], flexible)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    return _frame(correlation_id, flexible, bytes(out))


def sync_group(version: int, correlation_id: int, body: dict) -> bytes:
    flexible = version >= 4
    out = bytearray()
    if version >= 1:
        out += _I32.pack(_ms(body.get("throttle_time", 0)))
    out += _I16.pack(_code(body["error_code"]))
    if version >= 5:
        _str(out, body.get("protocol_type"), flexible)
        _str(out, body.get("protocol_name"), flexible)
    _bytes(out, body.get("assignment") or b"", flexible)
    if flexible:
        out.append(0)
    return _frame(correlation_id, flexible, bytes(out))


class Partial(dict):
    """An answer holding only some of its fields (an error answer made for any API, such as
    ``broker.faults.error_response``'s): never given to a fast encoder, which reads every field,
    but to the generic one, which fills in the defaults."""

    __slots__ = ()


ENCODERS: dict[tuple[int, int], Callable[[int, int, dict], bytes]] = {}
for _v in range(0, 10):
    ENCODERS[(11, _v)] = join_group
for _v in range(0, 6):
    ENCODERS[(14, _v)] = sync_group
for _v in range(0, 5):
    ENCODERS[(12, _v)] = heartbeat
for _v in range(2, 10):
    ENCODERS[(8, _v)] = offset_commit


# ---------------------------------------------------------------- ConsumerGroupHeartbeat (68)
_I32_I16_ = struct.Struct(">ih")
_I32_I32 = struct.Struct(">ii")


def consumer_group_heartbeat(version: int, correlation_id: int, body: dict) -> bytes:
    """v0-1, flexible throughout; ``assignment`` is a nullable struct (-1, or 1 and the struct)."""
    out = bytearray(_I32_I16_.pack(_ms(body.get("throttle_time", 0)), _code(body["error_code"])))
    _str(out, body.get("error_message"), True)
    _str(out, body.get("member_id"), True)
    out += _I32_I32.pack(body["member_epoch"], _ms(body["heartbeat_interval"]))
    assignment = body.get("assignment")
    if assignment is None:
        out += b"\xff"
    else:
        out.append(1)
        tps = assignment["topic_partitions"]
        out += _uvarint(len(tps) + 1)
        for tp in tps:
            parts = tp["partitions"]
            out += tp["topic_id"].bytes + _uvarint(len(parts) + 1)
            out += struct.pack(f">{len(parts)}i", *parts)
            out.append(0)
        out.append(0)
    out.append(0)
    return _frame(correlation_id, True, bytes(out))


for _v in range(0, 2):
    ENCODERS[(68, _v)] = consumer_group_heartbeat


# ---------------------------------------------------------------- Fetch (1)
_I64 = struct.Struct(">q")
_FETCH_TOP = struct.Struct(">ihi")  # throttle, error code, session id (v7+)
_FETCH_PART = struct.Struct(">ihqq")  # index, error code, high watermark, last stable offset
_FETCH_PART5 = struct.Struct(">ihqqq")  # ... and log start offset (v5+)
_ABORTED = struct.Struct(">qq")
_ZERO_UUID = b"\x00" * 16
# records shorter than this are copied into the frame; longer ones are handed
# to the transport as they are (one more buffer for its writev), and so is a
# Region of any size (protocol/regions.py: not in memory, nothing to copy)
FETCH_INLINE = 4096


def _hand_over(chunks: list | None, out: bytearray, records) -> list:
    """The answer's buffers so far, then ``records`` as a buffer of its own."""
    if chunks is None:
        return [out, records]
    chunks.append(out)
    chunks.append(records)
    return chunks


def fetch(version: int, correlation_id: int, body: dict):
    """Fetch v4-18 (flexible from v12), with kio's defaults for absent fields.

    Returns ``bytes``, or, when some partition's records are at least
    ``FETCH_INLINE`` bytes or a ``Region`` (protocol/regions.py) of any size but
    0, a list of buffers to write in order (with ``transport.writelines``, or
    ``KafkaConnection._send_files`` when it holds regions): the fields around
    the records in bytearrays and the records themselves as given (bytes,
    memoryviews into the segment's pread buffer, regions of its file), never
    copied. The frame's size prefix counts them all. Records of any other type
    (a handler bug) raise ``TypeError`` here when under ``FETCH_INLINE``, and
    fail when written otherwise: a handler failure either way, never bytes
    that are not the records.
    Tagged fields are written empty: the handler sets none (diverging epoch,
    current leader, snapshot id, node endpoints).
    """
    flexible = version >= 12
    out = bytearray(_HEAD0.pack(0, correlation_id))
    if flexible:
        out.append(0)
    throttle = _ms(body.get("throttle_time", 0))
    if version >= 7:
        out += _FETCH_TOP.pack(throttle, _code(body.get("error_code", 0)), body.get("session_id", 0))
    else:
        out += _I32.pack(throttle)
    topics = body.get("responses") or ()
    out += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    chunks = None
    by_id = version >= 13
    for t in topics:
        if by_id:
            topic_id = t.get("topic_id")
            out += topic_id.bytes if topic_id is not None else _ZERO_UUID
        else:
            _str(out, t.get("topic", ""), flexible)
        parts = t.get("partitions") or ()
        out += _uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for p in parts:
            get = p.get
            index = get("partition_index", 0)
            code = _code(get("error_code", 0))
            hw = get("high_watermark", 0)
            lso = get("last_stable_offset", -1)
            if version >= 5:
                out += _FETCH_PART5.pack(index, code, hw, lso, get("log_start_offset", -1))
            else:
                out += _FETCH_PART.pack(index, code, hw, lso)
            aborted = get("aborted_transactions", ())
            if aborted is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                out += _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for a in aborted:
                    out += _ABORTED.pack(a["producer_id"], a["first_offset"])
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _I32.pack(get("preferred_read_replica", -1))
            records = get("records")
            if records is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                n = len(records)
                out += _uvarint(n + 1) if flexible else _I32.pack(n)
                if n < FETCH_INLINE:
                    try:
                        out += records
                    except TypeError:  # not bytes-like: a Region (the only other kind), whatever its size a buffer of its own
                        if not isinstance(records, Region):
                            raise TypeError(f"Fetch records must be bytes-like or a Region, not {type(records).__name__}") from None
                        if n:  # a region of no bytes has nothing to send
                            chunks = _hand_over(chunks, out, records)
                            out = bytearray()
                else:
                    if chunks is None:
                        chunks = [out]
                    else:
                        chunks.append(out)
                    chunks.append(records)
                    out = bytearray()
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    if chunks is None:
        _I32.pack_into(out, 0, len(out) - 4)
        return bytes(out)
    chunks.append(out)
    size = 0
    for c in chunks:
        size += len(c)
    _I32.pack_into(chunks[0], 0, size - 4)
    return chunks


for _v in range(4, 19):
    ENCODERS[(1, _v)] = fetch
