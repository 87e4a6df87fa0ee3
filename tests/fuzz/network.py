"""Network-level fuzzer: mutated Kafka frames against a live kafkalite broker.

    python -m tests.fuzz.network --frames 20000 --connections 16 --seconds 60 --json out.json
    python -m tests.fuzz.network --replay tests/fuzz/corpus/network-1.streams

A broker runs as a child process (``tests.broker_process.BrokerProcess``).
Frames are well-formed seed requests for every advertised API key and version
(ours, plus ``tests/fuzz/protocol.py``'s seeds when that module imports),
mostly mutated: truncated, bit-flipped, a length prefix at some nesting level
(the frame, the header's client id, an array, a string, a record batch inside
``records``) made huge or negative, the API version or key changed, garbage,
or one of ``tests/fuzz/protocol.py``'s mutations. A connection gets a
*stream* of 1 to 12 such frames (how many of them are mutated varies by
stream), written in one go (pipelined), one write per frame, or in many
small TCP writes.

Streams go out over up to ``--connections`` concurrent connections. After
every ``--batch`` frames (a batch), new streams wait while:

* the broker process must be alive;
* a fresh client must get an ApiVersions and a Metadata answer;
* the bystander, one connection open for the whole run, must get a Produce
  answer and then read its record back with Fetch;
* on the same connection, a Fetch of ``tests/fuzz/shapes.py``'s topic (whose
  partitions are laid out so that answers hold records in memory, regions of
  the segment files of every size, or both, past the broker's 1 MiB of an
  answer in memory), one shape and Fetch version after another, must return
  exactly the records produced there (a failure counts as a bystander
  failure). The same requests, for every Fetch version, are seeds too.

And no fuzz connection may be hung. What a connection is owed comes from
parsing its stream here with the broker's own
``protocol.connection.ServerConnection`` (the *oracle*). A complete frame
that parses is owed an answer (except Produce with acks=0); a complete frame
that does not parse (or a size prefix that is negative or over the maximum)
is owed a close of the connection, and may take the answers of earlier
frames of the same connection with it; an incomplete frame at the end is
owed nothing: the broker may wait for the bytes it was promised. The broker
answers a connection's requests in order, so a connection is **hung** when
an owed answer (or the owed close) has not come 10 s after the later of the
last write and the previous answer, plus what the request itself may wait
(Fetch's max_wait; 30 s for JoinGroup and SyncGroup, which wait for the
group's members, who expire within the broker's
``--group-max-session-timeout-ms 10000``). A Fetch asking to wait longer
than 5 s marks the connection *parked*: the answers before it are checked,
the rest are not.

The oracle refuses to hand a frame to kio's native reader unless a
pure-Python walk of the same schema shows that every length in it fits in
the frame: kio aborts the process on a length it cannot allocate, and the
fuzzer must not die of the very bug it is looking for.

Findings:

* **crash**: the broker process exited. The streams sent since the last good
  check are saved as ``network-<n>.streams`` under the corpus directory and
  replayed on fresh brokers to find the shortest prefix, the stream, then
  the single frame that still kills it (``network-<n>.json`` describes it;
  ``--minimize`` crashes are shrunk, for at most 120 s each).
* **wedged**: alive but not answering the health check; treated like a crash
  (killed, restarted, batch saved).
* **hang** (the hung streams are saved too), **bystander failure**,
  **fresh-client failure**: as above.
* **handler failure**: a ``handler failed`` line on the broker's stderr; the
  API, version, traceback and the frame that caused it (found through the
  connection's port, which the broker logs as ``peer``).
* informational: connections closed while the oracle expected answers
  (``unexpected_closes``), answers that do not match the request order
  (``answer_mismatches``), parked connections; and every other error the
  broker prints (``broker_errors``: asyncio's "Task exception was never
  retrieved" and the like), which count as failures.

A cluster (``Fuzzer(target_node=N)``, ``--target-node N``): the broker child
is ``serve --nodes 3`` and the fuzz connections, the fresh client and the
bystander go to node N. Node 1 is the active node (it serves the data); a
standby node answers most requests with NOT_LEADER_OR_FOLLOWER,
NOT_COORDINATOR or NOT_CONTROLLER. With a standby target the bystander's
Produce and Fetch, and the Fetch of shapes.py's topic, go over a second
long-lived connection, to node 1, and the bystander on the target must get a
Produce answered NOT_LEADER_OR_FOLLOWER with node 1 as the leader and a
Metadata answer naming node 1 the leader of its topic and listing every node.
The death of any node (its pid, from its NODE line) is a crash. A hang's
diagnostics snapshot (SIGUSR1 to the controller) comes from every node.

Corpus files: ``KLFZ1\\n``, then per stream ``>I`` frame count and per frame
``>I`` length and the frame bytes (its own size prefix included).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from broker.handlers import supported_versions
from protocol.codec import build, decode, encode, request_class, response_class, strip_unknown_tags
from protocol.connection import ProtocolError, Request, ServerConnection, UnsupportedVersion, request_header_version
from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from protocol.records import Record, build_batch
from tests.broker_process import BrokerProcess
from tests.fuzz import shapes

HOST = "127.0.0.1"
HANG_BOUND = 10.0  # seconds a well-formed request may go unanswered before its connection counts as hung
GROUP_WAIT = 30.0  # extra for JoinGroup / SyncGroup (members expire within --group-max-session-timeout-ms)
PARK_LIMIT_MS = 5_000  # a Fetch asking to wait longer than this parks the connection
CHECK_TIMEOUT = 10.0  # health-check requests
BROKER_ARGS = ("--log-format", "json", "--log-level", "error", "--group-max-session-timeout-ms", "10000")
CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
MAGIC = b"KLFZ1\n"
CORPUS_SUFFIX = ".streams"  # not .bin: tests/fuzz/protocol.py owns the *.bin files of the same directory
DETAIL_LIMIT = 25  # failures kept in full in the JSON
MINIMIZE_SECONDS = 120  # time given to shrinking one crash to a single stream and frame
LAUNCH_ATTEMPTS, LAUNCH_BACKOFF = 5, 3.0  # a broker that fails to start is retried this often, this far apart

SUPPORTED = supported_versions()
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_SIZE = struct.Struct(">i")
PRODUCE, FETCH, METADATA, JOIN_GROUP, SYNC_GROUP, API_VERSIONS, CREATE_TOPICS = 0, 1, 3, 11, 14, 18, 19
CLUSTER_NODES, ACTIVE_NODE, NOT_LEADER_OR_FOLLOWER = 3, 1, 6  # a cluster run: serve --nodes 3; node 1 serves the data


# ============================================================== seeds

TOPICS = ("fz-a", "fz-b", "fz-c")
STRING_VALUES = {
    "protocol_type": ("consumer",),
    "protocol_name": ("range", "roundrobin"),
    "member_id": ("",),
    "client_software_name": ("fuzz",),
    "client_software_version": ("1.0",),
    "configuration_keys": ("retention.ms", "cleanup.policy"),
    "value": ("1000", "compact"),
    "states_filter": ("Stable", "Empty"),
    "types_filter": ("classic", "consumer"),
    "server_assignor": ("uniform", "range"),
    "reason": ("fuzz",),
    "committed_metadata": ("",),
}
INT_VALUES = {
    "acks": (-1, -1, 1, 0),
    "partition": (0, 1),
    "partition_index": (0, 1),
    "index": (0, 1),
    "partitions": (0, 1),
    "partition_indexes": (0, 1),
    "timeout": (5000,),
    "session_timeout": (6000, 10000),
    "rebalance_timeout": (5000,),
    "max_wait": (0, 50, 200),
    "min_bytes": (1,),
    "max_bytes": (1 << 20,),
    "partition_max_bytes": (1 << 20,),
    "fetch_offset": (0, 1),
    "timestamp": (-1, -2, 0),
    "generation_id": (-1, 0, 1),
    "member_epoch": (0, -1),
    "generation_id_or_member_epoch": (-1, 0),
    "session_epoch": (-1, 0),
    "replica_id": (-1,),
    "producer_id": (-1,),
    "producer_epoch": (-1,),
    "transaction_timeout": (60_000,),
    "num_partitions": (1, 2, 3),
    "replication_factor": (1, -1),
    "count": (2, 3, 4),
    "current_leader_epoch": (-1, 0),
    "leader_epoch": (-1, 0),
    "committed_offset": (0, 5),
    "committed_leader_epoch": (-1,),
    "retention_time": (-1,),
    "resource_type": (2,),
    "key_type": (0,),
    "isolation_level": (0, 1),
    "endpoint_type": (1,),
    "broker_ids": (1,),
    "log_start_offset": (-1,),
    "last_fetched_epoch": (-1,),
    "replica_epoch": (-1,),
}
TOPIC_FIELDS = {"name", "topic", "topic_names", "resource_name", "subscribed_topic_names"}
GROUP_FIELDS = {"group_id", "groups", "group_ids", "groups_names", "coordinator_keys", "key"}


def _sample_value(name: str, kafka_type: str, optional: bool, rng: random.Random, groups: list[str]):
    if optional and rng.random() < 0.25:
        return None
    if kafka_type == "string":
        if name in TOPIC_FIELDS:
            return rng.choice(TOPICS)
        if name in GROUP_FIELDS:
            return rng.choice(groups)
        if name in STRING_VALUES:
            return rng.choice(STRING_VALUES[name])
        return None if optional else "fz"
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "uuid":
        return uuid.UUID(int=0) if rng.random() < 0.7 else uuid.UUID(int=rng.getrandbits(128))
    if kafka_type == "bytes":
        return b"" if rng.random() < 0.5 else bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 12)))
    if kafka_type == "records":
        n = rng.randint(1, 3)
        now = int(time.time() * 1000)
        return build_batch([Record(i, now, b"k%d" % i, b"v" * rng.randint(0, 40)) for i in range(n)])
    if kafka_type == "float64":
        return 0.5
    if name in INT_VALUES:
        return rng.choice(INT_VALUES[name])
    return rng.choice((0, 1, -1))


def _sample_entity(cls: type, rng: random.Random, groups: list[str], depth: int = 0) -> dict:
    out = {}
    for f in fields(cls):
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        tagged = get_field_tag(f) is not None
        if tagged and rng.random() < 0.5:
            continue
        if isinstance(kind, EntityTupleField):
            out[f.name] = [_sample_entity(kind.type_, rng, groups, depth + 1) for _ in range(rng.randint(1, 2))]
        elif isinstance(kind, EntityField):
            if is_optional(f) and rng.random() < 0.3:
                out[f.name] = None
            else:
                out[f.name] = _sample_entity(kind.type_, rng, groups, depth + 1)
        elif isinstance(kind, PrimitiveTupleField):
            out[f.name] = [_sample_value(f.name, kafka_type, False, rng, groups) for _ in range(rng.randint(1, 2))]
        else:
            out[f.name] = _sample_value(f.name, kafka_type, is_optional(f) and not tagged, rng, groups)
    return out


@dataclass(slots=True)
class Seed:
    api_key: int
    version: int
    payload: bytes  # header and body, no size prefix
    sites: list[tuple[int, str, int]]  # (offset, kind, depth) of every length in the payload


def encode_request(api_key: int, version: int, correlation_id: int, body: dict, client_id: str | None = "fuzz") -> bytes:
    cls = request_class(api_key, version)
    header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
    header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id)
    return encode(header) + encode(build(cls, body))


def make_seeds(rng: random.Random, per_version: int = 3) -> list[Seed]:
    """``per_version`` plausible requests for every supported API version, with their length sites."""
    groups = [f"fzg-{i}" for i in range(400)]
    seeds = []
    for api_key, (lo, hi) in sorted(SUPPORTED.items()):
        for version in range(lo, hi + 1):
            cls = request_class(api_key, version)
            for _ in range(per_version):
                body = _sample_entity(cls, rng, groups)
                try:
                    payload = encode_request(api_key, version, rng.randint(1, 1 << 20), body)
                except Exception as exc:  # noqa: BLE001 - a sampler gap must not stop the run
                    raise RuntimeError(f"cannot build a seed for API {api_key} v{version}: {exc}") from exc
                seeds.append(Seed(api_key, version, payload, length_sites(api_key, version, payload)))
    return seeds


# ============================================================== length sites


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise ValueError("varint too long")


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _entity_sites(cls: type, buf: bytes, pos: int, depth: int, sites: list, header: bool = False) -> int:
    flexible = cls.__flexible__
    for f in fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        if kind.is_array:
            if flexible:
                sites.append((pos, "uvarint", depth))
                n, pos = _uvarint(buf, pos)
                count = n - 1
            else:
                sites.append((pos, "i32", depth))
                (count,) = _I32.unpack_from(buf, pos)
                pos += 4
            for _ in range(max(count, 0)):
                pos = _value_sites(kind, kafka_type, flexible, False, False, buf, pos, depth + 1, sites)
        else:
            legacy = header and f.name == "client_id"
            pos = _value_sites(kind, kafka_type, flexible, legacy, is_optional(f), buf, pos, depth, sites)
    if flexible:
        sites.append((pos, "uvarint", depth))
        count, pos = _uvarint(buf, pos)
        for _ in range(count):
            _, pos = _uvarint(buf, pos)
            sites.append((pos, "uvarint", depth + 1))
            size, pos = _uvarint(buf, pos)
            pos += size
    return pos


_FIXED = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4, "uint64": 8,
          "float64": 8, "uuid": 16, "timedelta_i32": 4, "timedelta_i64": 8, "datetime_i64": 8, "error_code": 2}


def _value_sites(kind, kafka_type, flexible, legacy, optional, buf, pos, depth, sites) -> int:
    if isinstance(kind, (EntityField, EntityTupleField)):
        if optional and isinstance(kind, EntityField):
            marker = buf[pos]
            pos += 1
            if marker >= 0x80:
                return pos
        return _entity_sites(kind.type_, buf, pos, depth + 1, sites)
    if kafka_type in _FIXED:
        return pos + _FIXED[kafka_type]
    if flexible and not legacy:
        sites.append((pos, "uvarint", depth))
        n, pos = _uvarint(buf, pos)
        size = max(n - 1, 0)
    elif kafka_type == "string":
        sites.append((pos, "i16", depth))
        (size,) = _I16.unpack_from(buf, pos)
        pos += 2
        size = max(size, 0)
    else:
        sites.append((pos, "i32", depth))
        (size,) = _I32.unpack_from(buf, pos)
        pos += 4
        size = max(size, 0)
    if kafka_type == "records" and size >= 61:
        # the record batch's own lengths: batchLength and the record count
        sites.append((pos + 8, "i32", depth + 1))
        sites.append((pos + 57, "i32", depth + 1))
    return pos + size


def length_sites(api_key: int, version: int, payload: bytes) -> list[tuple[int, str, int]]:
    cls = request_class(api_key, version)
    header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
    sites: list[tuple[int, str, int]] = []
    pos = _entity_sites(header_cls, payload, 0, 0, sites, header=True)
    _entity_sites(cls, payload, pos, 1, sites)
    return sites


# ============================================================== mutations

BOUNDARY_16 = (0, -1, -2, 0x7FFF, -0x8000, 1, 0x7FFE)
BOUNDARY_32 = (0, -1, -2, 0x7FFFFFFF, -0x80000000, 0x10000000, 0x7FFFFFFE, 1 << 24)
BOUNDARY_UV = (0, 1, 0x7F, 0x80, 1 << 20, 1 << 28, 0x7FFFFFFF, 0xFFFFFFFF)


def mutate_length(seed: Seed, rng: random.Random) -> bytes:
    """Make one length prefix (at any nesting level) lie: huge, negative, off by some."""
    if not seed.sites:
        return flip_bits(seed.payload, rng)
    pos, kind, _depth = rng.choice(seed.sites)
    buf = seed.payload
    if kind == "i16":
        (cur,) = _I16.unpack_from(buf, pos)
        value = rng.choice((*BOUNDARY_16, cur + 1, cur + 100, cur - 1))
        value = max(-0x8000, min(0x7FFF, value))
        return buf[:pos] + _I16.pack(value) + buf[pos + 2 :]
    if kind == "i32":
        (cur,) = _I32.unpack_from(buf, pos)
        value = rng.choice((*BOUNDARY_32, cur + 1, cur * 1000 + 7, cur - 1))
        value = max(-0x80000000, min(0x7FFFFFFF, value))
        return buf[:pos] + _I32.pack(value) + buf[pos + 4 :]
    cur, end = _uvarint(buf, pos)
    choice = rng.random()
    if choice < 0.1:
        new = b"\xff" * rng.randint(5, 9) + b"\x01"  # a varint longer than any int32
    else:
        new = _uvarint_bytes(rng.choice((*BOUNDARY_UV, cur + 1, cur + 1000, max(cur - 1, 0))))
    return buf[:pos] + new + buf[end:]


def flip_bits(buf: bytes, rng: random.Random) -> bytes:
    if not buf:
        return buf
    out = bytearray(buf)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def truncate(buf: bytes, rng: random.Random) -> bytes:
    return buf[: rng.randrange(len(buf))] if buf else buf


def overwrite_int(buf: bytes, rng: random.Random) -> bytes:
    width = rng.choice((1, 2, 4, 8))
    if len(buf) < width:
        return flip_bits(buf, rng)
    pos = rng.randrange(len(buf) - width + 1)
    if width == 1:
        new = bytes([rng.choice((0, 0x7F, 0x80, 0xFF))])
    elif width == 2:
        new = _I16.pack(rng.choice(BOUNDARY_16))
    elif width == 4:
        new = _I32.pack(rng.choice(BOUNDARY_32))
    else:
        new = struct.pack(">q", rng.choice((0, -1, 2**63 - 1, -(2**63), 1 << 40)))
    return buf[:pos] + new + buf[pos + width :]


def splice_garbage(buf: bytes, rng: random.Random) -> bytes:
    pos = rng.randint(0, len(buf))
    junk = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 32)))
    if rng.random() < 0.5:
        return buf[:pos] + junk + buf[pos:]
    return buf[:pos] + junk + buf[pos + len(junk) :]


def delete_range(buf: bytes, rng: random.Random) -> bytes:
    if len(buf) < 2:
        return buf
    a = rng.randrange(len(buf))
    b = min(len(buf), a + rng.randint(1, 16))
    return buf[:a] + buf[b:]


def wrong_version(buf: bytes, rng: random.Random) -> bytes:
    api_key, _version = struct.unpack_from(">hh", buf) if len(buf) >= 4 else (0, 0)
    lo, hi = SUPPORTED.get(api_key, (0, 0))
    version = rng.choice((hi + 1, hi + rng.randint(2, 50), lo - 1, -1, 0x7FFF, rng.randint(lo, hi)))
    return buf[:2] + _I16.pack(max(-0x8000, min(0x7FFF, version))) + buf[4:]


def wrong_api_key(buf: bytes, rng: random.Random) -> bytes:
    unknown = [k for k in range(0, 80) if k not in SUPPORTED]
    key = rng.choice((rng.choice(unknown), -1, 0x7FFF, 1000, rng.choice(sorted(SUPPORTED))))
    return _I16.pack(key) + buf[2:]


def garbage(_buf: bytes, rng: random.Random) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))


PAYLOAD_MUTATORS = (flip_bits, truncate, overwrite_int, splice_garbage, delete_range, wrong_version, wrong_api_key, garbage)


class Generator:
    """Streams of frames: seeds, mostly mutated, each with a size prefix (sometimes a lying one)."""

    def __init__(self, rng: random.Random, seeds: list[Seed] | None = None, extra_mutators: tuple = ()) -> None:
        self.rng = rng
        self.seeds = seeds if seeds is not None else make_seeds(rng)
        self.mutators = PAYLOAD_MUTATORS + tuple(extra_mutators)
        self.correlation = 0

    def frame(self, mutate: float = 0.6) -> bytes:
        """One frame: a seed, mutated with probability ``mutate`` (a lying length, or 1-3 other mutations)."""
        rng = self.rng
        seed = rng.choice(self.seeds)
        self.correlation += 1
        payload = seed.payload[:4] + _I32.pack(self.correlation & 0x7FFFFFFF) + seed.payload[8:]
        roll = rng.random()
        if roll >= mutate:
            pass  # a well-formed request
        elif roll < mutate * 0.35:
            payload = mutate_length(Seed(seed.api_key, seed.version, payload, seed.sites), rng)
        else:
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                payload = rng.choice(self.mutators)(payload, rng)
        size = len(payload)
        roll = rng.random()
        if roll < 0.015:
            size = rng.choice((-1, -0x80000000, 0x7FFFFFFF, DEFAULT_MAX_FRAME_BYTES + 1))
        elif roll < 0.03:
            size = max(0, size + rng.choice((-3, -1, 1, 7, 1 << 16)))
        return _SIZE.pack(size) + payload

    def stream(self) -> list[bytes]:
        """1 to 12 frames; how many of them are mutated varies from stream to stream."""
        mutate = self.rng.choice((0.05, 0.2, 0.5, 0.9))
        return [self.frame(mutate) for _ in range(self.rng.choice((1, 1, 2, 3, 4, 6, 8, 12)))]


# ============================================================== the oracle


def _walk_fits(frame: bytes) -> bool:
    """True unless kio's native reader could be handed a length that does not fit in ``frame``."""
    if len(frame) < 8:
        return True
    api_key, version = struct.unpack_from(">hh", frame)
    span = SUPPORTED.get(api_key)
    if span is None or not span[0] <= version <= span[1]:
        return True
    try:
        cls = request_class(api_key, version)
        header_version = request_header_version(api_key, version, cls.__flexible__)
        pos = 8
        if header_version:
            _, pos = strip_unknown_tags(HeaderV2 if header_version == 2 else HeaderV1, frame, 0)
        strip_unknown_tags(cls, frame, pos)
    except Exception:  # noqa: BLE001 - any failure of the walk means "do not decode natively"
        return False
    return True


@dataclass
class Plan:
    """What the broker owes one connection for one stream."""

    answers: list[int] = field(default_factory=list)  # correlation ids, in order
    close: bool = False  # a complete frame is malformed: the connection must be closed
    extra_wait: float = 0.0  # what the requests themselves may wait (Fetch max_wait, group joins)
    parked: bool = False  # a long poll: answers after it are not checked
    apis: list[tuple[int, int]] = field(default_factory=list)  # (api, version) of each owed answer
    unsafe: list[int] = field(default_factory=list)  # frames the native reader could not be trusted with
    error: str | None = None
    parsed: int = 0  # complete frames up to and including the first malformed one
    owed_frames: list[bytes] = field(default_factory=list)  # the request frame of each owed answer
    allowances: list[float] = field(default_factory=list)  # what each owed request may wait, beyond the bound


def plan_stream(frames: list[bytes], max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Plan:
    data = b"".join(frames)
    conn = ServerConnection(SUPPORTED, max_frame_bytes)
    plan = Plan()
    pos = 0
    index = 0
    while len(data) - pos >= 4:
        (size,) = _SIZE.unpack_from(data, pos)
        if size < 0 or size > max_frame_bytes:
            plan.close, plan.error = True, f"frame size {size}"
            plan.parsed += 1
            break
        if len(data) - pos - 4 < size:
            break  # incomplete: the broker waits for the rest
        frame = data[pos + 4 : pos + 4 + size]
        pos += 4 + size
        index += 1
        plan.parsed += 1
        if not _walk_fits(frame):
            plan.unsafe.append(index - 1)
            plan.close, plan.error = True, "a length does not fit in the frame"
            break
        try:
            event = conn.parse_frame(frame)
        except ProtocolError as exc:
            plan.close, plan.error = True, str(exc)
            break
        if plan.parked:
            continue  # only a later malformed frame still matters (it closes the connection)
        if isinstance(event, UnsupportedVersion):
            plan.answers.append(event.correlation_id)
            plan.apis.append((event.api_key, event.api_version))
            plan.owed_frames.append(data[pos - 4 - size : pos])
            plan.allowances.append(0.0)
            continue
        assert isinstance(event, Request)
        if event.api_key == PRODUCE and event.body.acks == 0:
            continue
        allowance = 0.0
        if event.api_key == FETCH:
            wait_ms = max(int(event.body.max_wait.total_seconds() * 1000), 0)
            if wait_ms > PARK_LIMIT_MS:
                plan.parked = True
                continue
            allowance = wait_ms / 1000
        elif event.api_key in (JOIN_GROUP, SYNC_GROUP):
            allowance = GROUP_WAIT
        plan.extra_wait += allowance
        plan.answers.append(event.correlation_id)
        plan.apis.append((event.api_key, event.api_version))
        plan.owed_frames.append(data[pos - 4 - size : pos])
        plan.allowances.append(allowance)
    return plan


# ============================================================== one fuzz connection


@dataclass
class Outcome:
    kind: str  # answered | closed | hang | unexpected_close | mismatch | connect_failed | parked
    received: int = 0
    port: int | None = None
    detail: str = ""
    got: list = field(default_factory=list)  # correlation ids of the answers


def first_unanswered(plan: Plan, got: list[int]) -> int | None:
    """Index of the first owed answer whose correlation id never came back."""
    answered = set(got)
    return next((i for i, corr in enumerate(plan.answers) if corr not in answered), None)


async def _read_frames(reader: asyncio.StreamReader, got: list[int], changed: asyncio.Event) -> None:
    try:
        while True:
            size = _SIZE.unpack(await reader.readexactly(4))[0]
            payload = await reader.readexactly(size)
            got.append(_I32.unpack_from(payload, 0)[0] if size >= 4 else -1)
            changed.set()
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        pass
    finally:
        changed.set()


async def run_stream(
    port: int, frames: list[bytes], plan: Plan, rng: random.Random, *, bound: float = HANG_BOUND, info: dict | None = None,
    on_hang: Callable[[int | None], None] | None = None,
) -> Outcome:
    """Send one stream on a new connection and judge what comes back (see the module docstring).

    The broker handles a connection's requests in order, so each owed answer
    gets ``bound`` (plus what its request may wait) from the later of the last
    write and the previous answer. ``info``, when given, gets the local
    ``port`` and the live list of answers (``got``) as soon as they exist.
    """
    loop = asyncio.get_running_loop()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), CHECK_TIMEOUT)
    except (TimeoutError, OSError) as exc:
        return Outcome("connect_failed", detail=repr(exc))
    sock = writer.get_extra_info("socket")
    local_port = sock.getsockname()[1] if sock is not None else None
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    got: list[int] = []
    if info is not None:
        info["port"], info["got"] = local_port, got
    changed = asyncio.Event()
    read_task = loop.create_task(_read_frames(reader, got, changed))
    data = b"".join(frames)
    mode = rng.random()
    if mode < 0.5:
        chunks = [data]  # every frame pipelined in one write
    elif mode < 0.75:
        chunks = list(frames)  # one write per frame
    else:
        step_max = max(2, len(data) // 48)  # many small writes, at most ~100 of them
        chunks, i = [], 0
        while i < len(data):
            n = rng.randint(1, min(step_max, 7 if len(data) < 400 else step_max))
            chunks.append(data[i : i + n])
            i += n
    try:
        try:
            async with asyncio.timeout(bound + plan.extra_wait):
                for chunk in chunks:
                    writer.write(chunk)
                    await writer.drain()
                    if read_task.done():
                        break
        except (ConnectionError, OSError):
            pass  # the broker closed while we wrote; judged below
        except TimeoutError:
            return Outcome("hang", len(got), local_port, "writes blocked for the whole bound")
        progress_at = loop.time()
        seen = len(got)
        while True:
            closed = read_task.done()
            if closed:
                break
            if not plan.close and len(got) >= len(plan.answers):
                break
            if len(got) != seen:
                seen, progress_at = len(got), loop.time()
            allowance = plan.allowances[len(got)] if len(got) < len(plan.allowances) else 0.0
            remaining = progress_at + bound + allowance - loop.time()
            if remaining <= 0:
                owed = f"{len(plan.answers)} answers" + (" and a close" if plan.close else "")
                if on_hang is not None:
                    on_hang(local_port)  # while the connection is still open: the broker's state shows it
                return Outcome("hang", len(got), local_port, f"owed {owed}, got {len(got)} answers and no close", list(got))
            changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await changed.wait()
        # after a parked long poll, answers may come (a Fetch with nothing to wait on is answered at once)
        if (got[: len(plan.answers)] if plan.parked else got) != plan.answers[: len(got)]:
            return Outcome("mismatch", len(got), local_port, f"answers {got[:12]} for requests {plan.answers[:12]}", list(got))
        if closed and not plan.close and len(got) < len(plan.answers):
            return Outcome("unexpected_close", len(got), local_port, f"closed after {len(got)} of {len(plan.answers)} answers", list(got))
        if plan.parked:
            return Outcome("parked", len(got), local_port)
        return Outcome("closed" if closed else "answered", len(got), local_port)
    finally:
        read_task.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


# ============================================================== a small async client


class AsyncClient:
    def __init__(self, reader, writer) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    @classmethod
    async def connect(cls, port: int) -> AsyncClient:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), CHECK_TIMEOUT)
        return cls(reader, writer)

    async def request(self, api_key: int, version: int, body: dict):
        self.correlation += 1
        payload = encode_request(api_key, version, self.correlation, body, client_id="fuzz-check")
        async with asyncio.timeout(CHECK_TIMEOUT):
            self.writer.write(_SIZE.pack(len(payload)) + payload)
            await self.writer.drain()
            size = _SIZE.unpack(await self.reader.readexactly(4))[0]
            frame = await self.reader.readexactly(size)
        cls = response_class(api_key, version)
        header, pos = decode(cls.__header_schema__, frame, 0)
        if header.correlation_id != self.correlation:
            raise AssertionError(f"correlation id {header.correlation_id}, expected {self.correlation}")
        return decode(cls, frame, pos)[0]

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


async def answers_api_versions(port: int) -> bool:
    """True when a new connection gets an ApiVersions answer within the check timeout."""
    client = None
    try:
        client = await AsyncClient.connect(port)
        resp = await client.request(API_VERSIONS, 3, {"client_software_name": "fuzz-check", "client_software_version": "1"})
        return int(resp.error_code) == 0
    except Exception:  # noqa: BLE001 - any failure means no
        return False
    finally:
        if client is not None:
            await client.close()


# ============================================================== corpus files


def write_corpus(path: Path, streams: list[list[bytes]], info: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    out = bytearray(MAGIC)
    for frames in streams:
        out += struct.pack(">I", len(frames))
        for f in frames:
            out += struct.pack(">I", len(f)) + f
    path.write_bytes(bytes(out))
    path.with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n")


def read_corpus(path: Path) -> list[list[bytes]]:
    """The streams of a corpus file; any other file (tests/fuzz/protocol.py's) is one stream of its raw bytes."""
    data = Path(path).read_bytes()
    if not data.startswith(MAGIC):
        return [[data]]
    pos = len(MAGIC)
    streams = []
    while pos < len(data):
        (n,) = struct.unpack_from(">I", data, pos)
        pos += 4
        frames = []
        for _ in range(n):
            (length,) = struct.unpack_from(">I", data, pos)
            pos += 4
            frames.append(data[pos : pos + length])
            pos += length
        streams.append(frames)
    return streams


def next_corpus_path(directory: Path, stem: str = "network") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    n = 1
    while (directory / f"{stem}-{n}{CORPUS_SUFFIX}").exists():
        n += 1
    return directory / f"{stem}-{n}{CORPUS_SUFFIX}"


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of a live process, from /proc (0.0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields_ = stat[stat.rindex(")") + 2 :].split()
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


def _tally(items) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _api_name(api_key: int) -> str:
    from broker.handlers import HANDLERS

    mod = HANDLERS.get(api_key)
    return mod.NAME if mod is not None else f"API {api_key}"


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return f.read().strip()


def describe_frame(frame: bytes) -> dict:
    api_key, version = struct.unpack_from(">hh", frame, 4) if len(frame) >= 8 else (None, None)
    return {"api_key": api_key, "version": version, "hex": frame.hex()}


# ============================================================== the run


@dataclass
class Report:
    frames_sent: int = 0
    frames_parsed: int = 0  # frames the broker had to parse: up to the first one that closes the connection
    connections: int = 0
    batches: int = 0
    crashes: list = field(default_factory=list)
    hangs: list = field(default_factory=list)
    bystander_failures: list = field(default_factory=list)
    fresh_client_failures: list = field(default_factory=list)
    handler_failures: list = field(default_factory=list)
    broker_errors: list = field(default_factory=list)
    unexpected_closes: list = field(default_factory=list)
    answer_mismatches: list = field(default_factory=list)
    connect_failures: int = 0
    parked: int = 0
    shape_checks: int = 0  # Fetch answers of tests/fuzz/shapes.py's topic checked record by record
    outcomes: dict = field(default_factory=dict)
    corpus_files: list = field(default_factory=list)

    def summary(self, seconds: float, extra: dict) -> dict:
        def capped(items):
            return items[:DETAIL_LIMIT]

        return {
            "frames_sent": self.frames_sent,
            "frames_parsed": self.frames_parsed,
            "connections": self.connections,
            "batches": self.batches,
            "crashes": len(self.crashes),
            "hangs": len(self.hangs),
            "bystander_failures": len(self.bystander_failures),
            "fresh_client_failures": len(self.fresh_client_failures),
            "handler_failures": len(self.handler_failures),
            "broker_errors": len(self.broker_errors),
            "unexpected_closes": len(self.unexpected_closes),
            "answer_mismatches": len(self.answer_mismatches),
            "connect_failures": self.connect_failures,
            "parked": self.parked,
            "shape_checks": self.shape_checks,
            "seconds": round(seconds, 2),
            "frames_per_s": round(self.frames_sent / seconds, 1) if seconds > 0 else 0.0,
            "outcomes": self.outcomes,
            "hangs_by_first_unanswered": _tally(
                f"{_api_name(h['first_unanswered']['api_key'])} v{h['first_unanswered']['version']}" if h.get("first_unanswered") else "a close"
                for h in self.hangs
            ),
            "handler_failures_by_kind": _tally(
                f"{h.get('api')}: {((h.get('traceback') or '').strip().splitlines() or [''])[-1][:160]}" for h in self.handler_failures
            ),
            "broker_errors_by_kind": _tally(str(e.get("error") or e.get("event"))[:160] for e in self.broker_errors),
            # every hang: when (seconds into the run) and the first request left unanswered
            "hang_timeline": [
                [h.get("at_s"), f"{_api_name(h['first_unanswered']['api_key'])} v{h['first_unanswered']['version']}"
                 if h.get("first_unanswered") else "a close"]
                for h in self.hangs
            ],
            "handler_failure_timeline": [[h.get("seen_at_s"), h.get("api"), h.get("version")] for h in self.handler_failures],
            **extra,
            "corpus_files": self.corpus_files,
            "crash_details": capped(self.crashes),
            "hang_details": capped(self.hangs),
            "bystander_failure_details": capped(self.bystander_failures),
            "fresh_client_failure_details": capped(self.fresh_client_failures),
            "handler_failure_details": capped(self.handler_failures),
            "broker_error_details": capped(self.broker_errors),
            "unexpected_close_details": capped(self.unexpected_closes),
            "answer_mismatch_details": capped(self.answer_mismatches),
        }


class Fuzzer:
    def __init__(
        self,
        *,
        frames: int,
        connections: int,
        seconds: float,
        batch: int = 2000,
        seed: int | None = None,
        corpus_dir: Path = CORPUS_DIR,
        minimize: int = 3,
        broker_args: tuple[str, ...] = BROKER_ARGS,
        log=None,
        target_node: int | None = None,
    ) -> None:
        """``target_node``: fuzz node ``target_node`` of a ``serve --nodes 3`` cluster (None: a single broker)."""
        self.frames_limit = frames
        self.concurrency = max(1, connections)
        self.seconds = seconds
        self.batch_frames = batch
        self.seed = seed if seed is not None else random.randrange(1 << 30)
        self.rng = random.Random(self.seed)
        self.corpus_dir = Path(corpus_dir)
        self.minimize_left = minimize
        self.target_node = target_node
        self.standby = target_node is not None and target_node != ACTIVE_NODE  # the target does not serve the data
        if target_node is not None:
            broker_args = (*broker_args, "--nodes", str(CLUSTER_NODES))
        self.broker_args = broker_args
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.report = Report()
        self.data_root = Path(tempfile.mkdtemp(prefix="kafkalite-netfuzz-"))
        self.broker: BrokerProcess | None = None
        self.stderr_seen = 0
        self.bystander: AsyncClient | None = None
        self.leader: AsyncClient | None = None  # a standby target's second long-lived connection, to the active node
        self.bystander_topic = f"bystander-{uuid.uuid4().hex[:8]}"
        self.bystander_offset = -1
        self.shapes_id: uuid.UUID | None = None  # tests/fuzz/shapes.py's topic, once made
        self.shapes_batches: list | None = None  # what it holds
        self.generator: Generator | None = None
        self.seeds_source = "tests/fuzz/network.py"
        self.signatures: set = set()  # handler failures already saved to the corpus
        self.broker_cpu = 0.0  # CPU seconds of the fuzzed brokers (not of the replays)
        self.ports: dict[int, dict] = {}  # local port -> connection, since the last good check
        self.t0 = time.monotonic()
        self.diagnosed = 0  # hangs for which the broker was asked for a diagnostics snapshot

    # -- broker ---------------------------------------------------------
    async def _launch(self, data_dir: Path | None = None, port: int | None = None) -> BrokerProcess:
        """Start a broker; ``b.exited`` (an asyncio.Event) is set when its process is gone, whatever the reason."""
        b = BrokerProcess(data_dir or (self.data_root / "data"), *self.broker_args)
        if hasattr(b, "fail_on_handler_errors"):
            b.fail_on_handler_errors = False  # handler failures are findings here, reported below
        if port:
            b.port = port
        for attempt in range(LAUNCH_ATTEMPTS):
            try:
                await asyncio.to_thread(b.start)
                break
            except RuntimeError as exc:
                # e.g. the port not yet free, or a source file caught mid-edit in a shared tree
                if attempt == LAUNCH_ATTEMPTS - 1:
                    raise
                self.log(f"broker did not start (attempt {attempt + 1}): {str(exc)[-300:]}")
                await asyncio.sleep(LAUNCH_BACKOFF)
        loop = asyncio.get_running_loop()
        exited = asyncio.Event()
        proc = b.proc

        def watch() -> None:
            proc.wait()
            with contextlib.suppress(RuntimeError):  # the loop may be gone already
                loop.call_soon_threadsafe(exited.set)

        threading.Thread(target=watch, daemon=True).start()
        b.exited = exited
        b.nodes_gone = []  # a cluster: the ids of its nodes whose process has exited

        def watch_node(node_id: int, pid: int) -> None:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                fd = None  # gone already
            if fd is not None:
                try:
                    select.select([fd], [], [])  # readable once the process has exited
                finally:
                    os.close(fd)
            b.nodes_gone.append(node_id)
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(exited.set)

        for node_id, pid in getattr(b, "node_pids", {}).items():
            threading.Thread(target=watch_node, args=(node_id, pid), daemon=True).start()
        return b

    def port_of(self, b: BrokerProcess) -> int:
        """The port the fuzz connections, the fresh client and the bystander use: the target node's."""
        return b.port if self.target_node is None else b.node_ports[self.target_node]

    @staticmethod
    def _cpu_of(b: BrokerProcess) -> float:
        return _proc_cpu_s(b.proc.pid) + sum(_proc_cpu_s(pid) for pid in getattr(b, "node_pids", {}).values())

    def _data_client(self) -> AsyncClient | None:
        """The connection that makes and checks the data: the bystander, or on a standby target the one to node 1."""
        return self.leader if self.standby else self.bystander

    async def _ensure_bystander(self) -> None:
        if self.bystander is not None:
            return
        self.bystander = await AsyncClient.connect(self.port_of(self.broker))
        if self.standby:
            self.leader = await AsyncClient.connect(self.broker.port)  # READY's address: node 1's
        resp = await self._data_client().request(CREATE_TOPICS, 7, {
            "topics": [{"name": self.bystander_topic, "num_partitions": 1, "replication_factor": 1}],
            "timeout": 10_000,
        })
        code = int(resp.topics[0].error_code)
        if code not in (0, 36):  # none, topic already exists
            raise RuntimeError(f"cannot create the bystander topic: error {code}")

    async def _ensure_shapes(self) -> None:
        """Make tests/fuzz/shapes.py's topic and fill it, once (a restarted broker keeps it)."""
        if self.shapes_id is not None:
            return
        await self._ensure_bystander()
        client = self._data_client()
        resp = await client.request(CREATE_TOPICS, 7, {
            "topics": [{"name": shapes.TOPIC, "num_partitions": len(shapes.LAYOUT), "replication_factor": 1}],
            "timeout": 10_000,
        })
        code = int(resp.topics[0].error_code)
        if code not in (0, 36):
            raise RuntimeError(f"cannot create {shapes.TOPIC}: error {code}")
        produced = shapes.batches()
        if code == 0:
            for p, batch, _ in produced:
                answer = await client.request(PRODUCE, 9, {
                    "acks": -1, "timeout": 10_000,
                    "topic_data": [{"name": shapes.TOPIC, "partition_data": [{"index": p, "records": batch}]}],
                })
                code = int(answer.responses[0].partition_responses[0].error_code)
                if code != 0:
                    raise RuntimeError(f"cannot fill {shapes.TOPIC}: produce error {code}")
            topic_id = resp.topics[0].topic_id
        else:  # made by an earlier run on this data directory: its records are not known here
            meta = await client.request(METADATA, 12, {"topics": [{"name": shapes.TOPIC}], "allow_auto_topic_creation": False})
            topic_id, produced = meta.topics[0].topic_id, None
        self.shapes_id, self.shapes_batches = topic_id, produced

    def shape_seeds(self) -> list[Seed]:
        """Fetches of tests/fuzz/shapes.py's answers: two shapes for every Fetch version."""
        lo, hi = SUPPORTED[FETCH]
        names = shapes.NAMES
        out = []
        for version in range(lo, hi + 1):
            for name in (names[version % len(names)], names[(version + 1) % len(names)]):
                payload = encode_request(FETCH, version, 1, shapes.fetch_body(self.shapes_id, name))
                out.append(Seed(FETCH, version, payload, length_sites(FETCH, version, payload)))
        return out

    async def shapes_round_trip(self) -> str | None:
        """One of tests/fuzz/shapes.py's answers, checked record by record; None when all is well."""
        if self.shapes_batches is None:
            return None
        lo, hi = SUPPORTED[FETCH]
        n = self.report.batches
        version, name = lo + n % (hi - lo + 1), shapes.NAMES[n % len(shapes.NAMES)]
        try:
            if self._data_client() is None:
                return "no bystander connection"
            resp = await self._data_client().request(FETCH, version, shapes.fetch_body(self.shapes_id, name))
            problem = shapes.check_answer(resp, name, self.shapes_batches)
        except Exception as exc:  # noqa: BLE001 - every failure is a finding
            await self._drop_bystander()
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            self.report.shape_checks += 1
            return None
        return f"Fetch v{version} of {shapes.TOPIC} ({name}): {problem}"

    async def _drop_bystander(self) -> None:
        if self.bystander is not None:
            await self.bystander.close()
            self.bystander = None
        if self.leader is not None:
            await self.leader.close()
            self.leader = None

    # -- checks ---------------------------------------------------------
    async def bystander_round_trip(self, tag: str) -> str | None:
        """Produce one record and fetch it back on the long-lived connection; None when all is well."""
        value = f"bystander-{tag}-{uuid.uuid4().hex}".encode()
        client = self._data_client()
        try:
            if client is None:
                return "no bystander connection"
            batch = build_batch([Record(0, int(time.time() * 1000), b"b", value)])
            resp = await client.request(PRODUCE, 9, {
                "acks": -1, "timeout": 10_000,
                "topic_data": [{"name": self.bystander_topic, "partition_data": [{"index": 0, "records": batch}]}],
            })
            part = resp.responses[0].partition_responses[0]
            if int(part.error_code) != 0:
                return f"produce error {int(part.error_code)}"
            offset = part.base_offset
            resp = await client.request(FETCH, 12, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": self.bystander_topic, "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                     "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1},
                ]}],
            })
            fpart = resp.responses[0].partitions[0]
            if int(fpart.error_code) != 0:
                return f"fetch error {int(fpart.error_code)}"
            if value not in bytes(fpart.records or b""):
                return f"fetch at offset {offset} did not return the record just produced"
            return None
        except Exception as exc:  # noqa: BLE001 - every failure is a finding
            await self._drop_bystander()
            return f"{type(exc).__name__}: {exc}"

    async def standby_round_trip(self) -> str | None:
        """On a standby target: the bystander's Produce is refused, naming the active node; its
        Metadata names that node the leader and lists every node. None when all is well."""
        try:
            if self.bystander is None:
                return "no bystander connection"
            batch = build_batch([Record(0, int(time.time() * 1000), b"b", b"to-a-standby")])
            resp = await self.bystander.request(PRODUCE, 10, {
                "acks": -1, "timeout": 10_000,
                "topic_data": [{"name": self.bystander_topic, "partition_data": [{"index": 0, "records": batch}]}],
            })
            part = resp.responses[0].partition_responses[0]
            if int(part.error_code) != NOT_LEADER_OR_FOLLOWER:
                return f"standby produce: error {int(part.error_code)}, expected NOT_LEADER_OR_FOLLOWER"
            if part.current_leader.leader_id != ACTIVE_NODE:
                return f"standby produce: current_leader {part.current_leader.leader_id}, expected {ACTIVE_NODE}"
            resp = await self.bystander.request(METADATA, 12, {"topics": [{"name": self.bystander_topic}], "allow_auto_topic_creation": False})
            topic = resp.topics[0]
            if int(topic.error_code) != 0 or not topic.partitions or topic.partitions[0].leader_id != ACTIVE_NODE:
                leader = topic.partitions[0].leader_id if topic.partitions else None
                return f"standby metadata: topic error {int(topic.error_code)}, leader {leader}"
            if sorted(b.node_id for b in resp.brokers) != list(range(1, CLUSTER_NODES + 1)):
                return f"standby metadata: brokers {sorted(b.node_id for b in resp.brokers)}"
            return None
        except Exception as exc:  # noqa: BLE001 - every failure is a finding
            await self._drop_bystander()
            return f"{type(exc).__name__}: {exc}"

    async def fresh_client(self) -> str | None:
        client = None
        try:
            client = await AsyncClient.connect(self.port_of(self.broker))
            resp = await client.request(API_VERSIONS, 3, {"client_software_name": "fuzz-check", "client_software_version": "1"})
            if int(resp.error_code) != 0:
                return f"ApiVersions error {int(resp.error_code)}"
            resp = await client.request(METADATA, 12, {"topics": [{"name": self.bystander_topic}], "allow_auto_topic_creation": False})
            if not resp.brokers or int(resp.topics[0].error_code) != 0:
                return f"Metadata: brokers {len(resp.brokers)}, topic error {int(resp.topics[0].error_code)}"
            return None
        except Exception as exc:  # noqa: BLE001
            return f"{type(exc).__name__}: {exc}"
        finally:
            if client is not None:
                await client.close()

    def _scan_stderr(self, ports: dict[int, dict]) -> None:
        """Findings on the broker's stderr since the last scan; ``ports`` maps local ports to connections."""
        lines = self.broker.stderr_lines
        new, self.stderr_seen = lines[self.stderr_seen :], len(lines)
        raw = []
        for line in new:
            try:
                entry = json.loads(line)
            except ValueError:
                raw.append(line)
                continue
            if not isinstance(entry, dict):
                raw.append(line)
                continue
            if entry.get("event") == "handler failed":
                finding = {"api": entry.get("api"), "version": entry.get("version"), "traceback": entry.get("exception", ""),
                           "logged_at": entry.get("timestamp"), "seen_at_s": round(time.monotonic() - self.t0, 1)}
                peer = str(entry.get("peer", ""))
                port = int(peer.rsplit(":", 1)[1]) if ":" in peer and peer.rsplit(":", 1)[1].isdigit() else None
                if port in ports:
                    conn = ports[port]
                    finding["stream"] = [describe_frame(f) for f in conn["frames"]]
                    missing = first_unanswered(conn["plan"], conn.get("got", []))
                    if missing is not None:
                        finding["frame"] = describe_frame(conn["plan"].owed_frames[missing])
                last = finding["traceback"].strip().splitlines()[-1:] or [""]
                signature = (finding["api"], last[0])
                if signature not in self.signatures and port in ports:
                    # the first of its kind is kept for replay
                    self.signatures.add(signature)
                    path = next_corpus_path(self.corpus_dir)
                    write_corpus(path, [ports[port]["frames"]], {"kind": "handler failure", **finding})
                    finding["corpus"] = str(path)
                    self.report.corpus_files.append(str(path))
                    self.log(f"handler failure: {finding['api']} v{finding['version']}: {last[0]}; saved {path}")
                self.report.handler_failures.append(finding)
            elif entry.get("level") in ("error", "critical"):
                self.report.broker_errors.append(entry)
        if raw:
            # asyncio's "Task exception was never retrieved" and the like: one entry per block
            text = "".join(raw)
            for block in text.split("Task exception was never retrieved"):
                if block.strip():
                    last = block.strip().splitlines()[-1]
                    self.report.broker_errors.append({"raw": block[-4000:], "error": last})

    # -- crash handling ---------------------------------------------------
    async def _replay_crashes(self, streams: list[list[bytes]]) -> bool:
        """Replay ``streams`` one connection at a time on a fresh broker; True if it dies."""
        data_dir = Path(tempfile.mkdtemp(prefix="replay-", dir=self.data_root))
        b = await self._launch(data_dir)
        try:
            rng = random.Random(0)
            sem = asyncio.Semaphore(self.concurrency)

            async def one(frames):
                async with sem:
                    if not b.exited.is_set():
                        await run_stream(self.port_of(b), frames, plan_stream(frames), rng, bound=2.0)

            await asyncio.gather(*(one(f) for f in streams))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await b.exited.wait()
            return b.exited.is_set() or not await answers_api_versions(self.port_of(b))  # wedged counts too
        finally:
            await asyncio.to_thread(b.kill)
            shutil.rmtree(data_dir, ignore_errors=True)

    async def _minimize(self, streams: list[list[bytes]]) -> dict:
        if not await self._replay_crashes(streams):
            return {"reproduced": False}
        lo, hi = 1, len(streams)  # the shortest prefix that still kills it
        while lo < hi:
            mid = (lo + hi) // 2
            if await self._replay_crashes(streams[:mid]):
                hi = mid
            else:
                lo = mid + 1
        culprit = streams[lo - 1]
        result = {"reproduced": True, "prefix_streams": lo}
        if await self._replay_crashes([culprit]):
            result["stream"] = [describe_frame(f) for f in culprit]
            for f in culprit:
                if await self._replay_crashes([[f]]):
                    result["frame"] = describe_frame(f)
                    break
        return result

    async def _on_crash(self, kind: str, streams: list[list[bytes]]) -> None:
        b = self.broker
        tail = "".join(b.stderr_lines[-60:]) if b else ""
        rc = b.proc.poll() if b and b.proc else None
        path = next_corpus_path(self.corpus_dir)
        info = {"kind": kind, "returncode": rc, "batch": self.report.batches, "streams": len(streams), "stderr_tail": tail[-6000:]}
        if self.target_node is not None:
            info["target_node"], info["nodes_gone"] = self.target_node, sorted(getattr(b, "nodes_gone", ()))
        write_corpus(path, streams, info)
        self.report.corpus_files.append(str(path))
        self.log(f"{kind} (rc={rc}) after {len(streams)} streams; saved {path}")
        if b is not None:
            self._scan_stderr({})
        await self._drop_bystander()
        if b is not None:
            self.broker_cpu += self._cpu_of(b) if b.proc else 0.0
            await asyncio.to_thread(b.kill)
        if self.minimize_left > 0:
            self.minimize_left -= 1
            try:
                async with asyncio.timeout(MINIMIZE_SECONDS):
                    info["minimized"] = await self._minimize(streams)
            except TimeoutError:
                info["minimized"] = {"error": f"not shrunk within {MINIMIZE_SECONDS} s"}
            except Exception as exc:  # noqa: BLE001 - the run goes on without the shrunk case
                info["minimized"] = {"error": f"{type(exc).__name__}: {exc}"[-2000:]}
            if info["minimized"].get("frame"):
                small = path.with_name(path.stem + "-min" + CORPUS_SUFFIX)
                write_corpus(small, [[bytes.fromhex(info["minimized"]["frame"]["hex"])]], {**info, "streams": 1})
                self.report.corpus_files.append(str(small))
            path.with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n")
        self.report.crashes.append({**info, "corpus": str(path)})
        port = b.port if b and self.target_node is None else None  # a cluster: new ports (--port P puts node i on P + i - 1)
        self.broker = await self._launch(None, port)
        self.stderr_seen = 0
        await self._ensure_bystander()
        await self._ensure_shapes()

    # -- the rolling run ------------------------------------------------------
    def _diagnose_hang(self, local_port: int | None) -> None:
        """Ask the broker for a diagnostics snapshot (SIGUSR1) while the hung connection is open: the first few only."""
        if self.diagnosed >= 3 or self.broker.exited.is_set():
            return  # (a cluster's controller passes SIGUSR1 on to every node)
        self.diagnosed += 1
        self.log(f"hung connection from local port {local_port}: asking the broker for diagnostics (SIGUSR1)")
        with contextlib.suppress(OSError):
            os.kill(self.broker.proc.pid, signal.SIGUSR1)

    async def _one(self, frames: list[bytes], plan: Plan, rng: random.Random, conn: dict) -> None:
        broker = self.broker
        outcome = await run_stream(self.port_of(broker), frames, plan, rng, info=conn, on_hang=self._diagnose_hang)
        conn["done"] = True
        if "port" in conn:
            self.ports[conn["port"]] = conn  # for the stderr scan: the broker logs the peer's port
        if outcome.kind in ("hang", "unexpected_close", "mismatch", "connect_failed") and not broker.exited.is_set():
            # a connection cut by a dying broker sees EOF a moment before the process is reaped
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await broker.exited.wait()
        if broker.exited.is_set() or broker is not self.broker:
            return  # explained by the crash
        self.report.outcomes[outcome.kind] = self.report.outcomes.get(outcome.kind, 0) + 1
        detail = {"outcome": outcome.detail, "received": outcome.received, "owed": plan.apis[:12],
                  "plan_error": plan.error, "batch": self.report.batches + 1, "at_s": round(time.monotonic() - self.t0, 1),
                  "stream": [describe_frame(f) for f in frames]}
        missing = first_unanswered(plan, outcome.got)
        if missing is not None:
            detail["first_unanswered"] = describe_frame(plan.owed_frames[missing])
            detail["answered"] = outcome.got[:12]
        if outcome.kind == "hang":
            self.report.hangs.append(detail)
            self.log(f"hung connection: {outcome.detail}")
        elif outcome.kind == "unexpected_close":
            self.report.unexpected_closes.append(detail)
        elif outcome.kind == "mismatch":
            self.report.answer_mismatches.append(detail)
        elif outcome.kind == "connect_failed":
            self.report.connect_failures += 1
        elif outcome.kind == "parked":
            self.report.parked += 1

    async def _checkpoint(self, window: list[list[bytes]], ports: dict) -> bool:
        """The health checks after a batch; False when the broker crashed or is wedged (then restarted)."""
        self.report.batches += 1
        if self.broker.exited.is_set():
            await self._on_crash("crash", window)
            return False
        problem = await self.bystander_round_trip(str(self.report.batches))
        if problem is None:
            problem = await self.shapes_round_trip()
        if problem is None and self.standby:
            problem = await self.standby_round_trip()
        fresh = await self.fresh_client()
        if self.broker.exited.is_set():
            await self._on_crash("crash", window)
            return False
        self._scan_stderr(ports)
        if fresh is not None and problem is not None:
            # neither a new client nor the bystander gets answers: wedged
            await self._on_crash("wedged", window)
            return False
        if fresh is not None:
            self.report.fresh_client_failures.append({"batch": self.report.batches, "error": fresh})
            self.log(f"fresh client failure: {fresh}")
        if problem is not None:
            self.report.bystander_failures.append({"batch": self.report.batches, "error": problem})
            self.log(f"bystander failure: {problem}")
            await self._drop_bystander()
            with contextlib.suppress(Exception):
                await self._ensure_bystander()
        return True

    def _save_hangs(self, start: int) -> None:
        new_hangs = self.report.hangs[start:]
        if new_hangs:
            path = next_corpus_path(self.corpus_dir)
            hung = [[bytes.fromhex(f["hex"]) for f in h["stream"]] for h in new_hangs]
            write_corpus(path, hung, {"kind": "hang", "hangs": new_hangs})
            self.report.corpus_files.append(str(path))
            self.log(f"{len(new_hangs)} hung connection(s); saved {path}")

    async def run(self) -> dict:
        """Streams over ``concurrency`` connections at a time; the health checks after every ``batch_frames``.

        New streams wait while the checks run; streams in flight carry on. A
        crash (the process exits, or the checks find it wedged) saves the
        streams started since the last good check, shrinks them, and restarts
        the broker on the same port.
        """
        t0 = self.t0 = time.monotonic()
        load_start = _loadavg()
        cpu0 = time.process_time()
        self.generator = Generator(self.rng, *self._seed_source())
        self.broker = await self._launch()
        rng = random.Random(self.rng.random())
        sem = asyncio.Semaphore(self.concurrency)
        inflight: dict[asyncio.Task, dict] = {}
        window: list[list[bytes]] = []  # streams started since the last good check
        ports = self.ports
        hangs_saved = 0
        try:
            await self._ensure_bystander()
            await self._ensure_shapes()
            self.generator.seeds.extend(self.shape_seeds())
            deadline = t0 + self.seconds
            next_check = self.batch_frames
            started_frames = 0
            while started_frames < self.frames_limit and time.monotonic() < deadline:
                await sem.acquire()
                if self.broker.exited.is_set():
                    sem.release()
                    await self._settle(inflight)
                    await self._checkpoint(window, ports)
                    window = []
                    ports.clear()
                    continue
                frames = self.generator.stream()
                plan = plan_stream(frames)
                conn = {"frames": frames, "plan": plan}
                task = asyncio.ensure_future(self._one(frames, plan, rng, conn))
                inflight[task] = conn
                task.add_done_callback(lambda t: (sem.release(), inflight.pop(t, None)))
                window.append(frames)
                started_frames += len(frames)
                self.report.frames_sent += len(frames)
                self.report.frames_parsed += plan.parsed
                self.report.connections += 1
                if started_frames >= next_check:
                    next_check += self.batch_frames
                    for c in inflight.values():
                        if "port" in c:
                            ports[c["port"]] = c
                    if await self._checkpoint(window, ports):
                        window = [c["frames"] for c in inflight.values()]
                        for p in [p for p, c in ports.items() if c.get("done")]:
                            del ports[p]
                    else:
                        window = []
                        ports.clear()
                    self._save_hangs(hangs_saved)
                    hangs_saved = len(self.report.hangs)
                    self._progress()
            await self._settle(inflight)
            for c in list(inflight.values()):
                if "port" in c:
                    ports[c["port"]] = c
            await self._checkpoint(window, ports)
            self._save_hangs(hangs_saved)
            self._progress()
        finally:
            for task in list(inflight):
                task.cancel()
            await self._drop_bystander()
            if self.broker is not None and self.broker.proc is not None:
                self._scan_stderr(ports)
                self.broker_cpu += self._cpu_of(self.broker)
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self.broker.stop)
                reader = getattr(self.broker, "_stderr_reader", None)
                if reader is not None:
                    await asyncio.to_thread(reader.join, 10)
                self._scan_stderr({})  # what the broker printed while stopping (asyncio's unretrieved task errors)
            for snap in self.data_root.glob("**/diagnostics-*.txt"):  # kept: the data directory is not
                with contextlib.suppress(OSError):
                    shutil.copy(snap, Path(tempfile.gettempdir()) / snap.name)
                    self.log(f"broker diagnostics kept in {Path(tempfile.gettempdir()) / snap.name}")
            shutil.rmtree(self.data_root, ignore_errors=True)
        seconds = time.monotonic() - t0
        return self.report.summary(seconds, {
            "seed": self.seed, "concurrency": self.concurrency, "batch_frames": self.batch_frames,
            "hang_bound_s": HANG_BOUND, "seeds": len(self.generator.seeds), "seeds_source": self.seeds_source,
            "broker_args": list(self.broker_args), "target_node": self.target_node,
            "stopped_by": "frames" if self.report.frames_sent >= self.frames_limit else "seconds",
            "loadavg_start": load_start, "loadavg_end": _loadavg(),
            "broker_cpu_s": round(self.broker_cpu, 1), "fuzzer_cpu_s": round(time.process_time() - cpu0, 1),
        })

    async def _settle(self, inflight: dict) -> None:
        """Let the streams in flight finish: each ends by itself within its own hang bound."""
        if inflight:
            await asyncio.wait(list(inflight))

    def _progress(self) -> None:
        r = self.report
        self.log(f"batch {r.batches}: {r.frames_sent} frames, {r.connections} connections, "
                 f"{len(r.crashes)} crashes, {len(r.hangs)} hangs, {len(r.handler_failures)} handler failures, "
                 f"{len(r.bystander_failures)} bystander failures, {len(r.broker_errors)} stderr errors")

    def _seed_source(self) -> tuple:
        """Our seeds, plus the protocol fuzzer's (tests/fuzz/protocol.py) and its mutation as one more mutator."""
        seeds = make_seeds(self.rng)
        try:
            from tests.fuzz import protocol as pf

            theirs = []
            for sd in pf.seeds():
                try:
                    sites = length_sites(sd.api_key, sd.version, sd.frame)
                except Exception:  # noqa: BLE001 - a seed we cannot walk still gets the other mutations
                    sites = []
                theirs.append(Seed(sd.api_key, sd.version, sd.frame, sites))

            def protocol_op(buf: bytes, rng: random.Random) -> bytes:
                return pf.apply_op(buf, rng.choice(pf.OPS), rng.getrandbits(30), rng.getrandbits(16), rng.getrandbits(16), 0)

        except Exception as exc:  # noqa: BLE001 - missing, or broken mid-edit: our own seeds suffice
            self.seeds_source = f"tests/fuzz/network.py (tests/fuzz/protocol.py not usable: {type(exc).__name__}: {exc})"
            return seeds, ()
        self.seeds_source = "tests/fuzz/network.py + tests/fuzz/protocol.py (seeds(), apply_op())"
        return seeds + theirs, (protocol_op,)


# ============================================================== replay


async def replay(paths: list[Path], *, broker_args: tuple[str, ...] = BROKER_ARGS) -> dict:
    """Send every stream of every corpus file, one connection at a time, to one broker per file."""
    results = {"files": [], "crashes": 0, "hangs": 0, "handler_failures": 0, "broker_errors": 0, "fresh_client_failures": 0}
    for path in paths:
        streams = read_corpus(path)
        fz = Fuzzer(frames=0, connections=1, seconds=0, corpus_dir=Path(tempfile.mkdtemp(prefix="replay-corpus-")), broker_args=broker_args)
        fz.broker = await fz._launch()
        await fz._ensure_bystander()
        await fz._ensure_shapes()  # a saved Fetch of its answers finds them (by name; v13+ name another id)
        entry = {"file": str(path), "streams": len(streams), "crashed": False, "hangs": 0, "handler_failures": 0}
        try:
            rng = random.Random(0)
            ports = {}
            for frames in streams:
                plan = plan_stream(frames)
                conn = {"frames": frames, "plan": plan}
                outcome = await run_stream(fz.broker.port, frames, plan, rng, info=conn)
                if "port" in conn:
                    ports[conn["port"]] = conn
                if outcome.kind == "hang":
                    entry["hangs"] += 1
                if fz.broker.exited.is_set():
                    break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await fz.broker.exited.wait()
            entry["crashed"] = fz.broker.exited.is_set()
            if not entry["crashed"]:
                entry["fresh_client"] = await fz.fresh_client()
                await fz._drop_bystander()
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(fz.broker.stop)  # a clean stop prints asyncio's lost task errors
                reader = getattr(fz.broker, "_stderr_reader", None)
                if reader is not None:
                    await asyncio.to_thread(reader.join, 10)
                fz._scan_stderr(ports)
                entry["handler_failures"] = len(fz.report.handler_failures)
                entry["handler_failure_details"] = [
                    {k: v for k, v in h.items() if k != "corpus"} for h in fz.report.handler_failures[:5]
                ]
                entry["broker_errors"] = [e.get("error") or e.get("event") for e in fz.report.broker_errors][:10]
            else:
                entry["stderr_tail"] = "".join(fz.broker.stderr_lines[-20:])[-3000:]
        finally:
            await fz._drop_bystander()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(fz.broker.kill)
            shutil.rmtree(fz.data_root, ignore_errors=True)
            shutil.rmtree(fz.corpus_dir, ignore_errors=True)
        results["files"].append(entry)
        results["crashes"] += entry["crashed"]
        results["hangs"] += entry["hangs"]
        results["handler_failures"] += entry["handler_failures"]
        results["fresh_client_failures"] += bool(entry.get("fresh_client"))
        results["broker_errors"] += len(entry.get("broker_errors", ()))
    return results


def corpus_files(directory: Path = CORPUS_DIR) -> list[Path]:
    return sorted(p for p in Path(directory).glob(f"network-*{CORPUS_SUFFIX}"))


# ============================================================== CLI


def run_async(coro):
    """uvloop when installed (the broker's own dependency): the client side must not be the bottleneck."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.network", description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=20_000, help="stop after this many frames")
    ap.add_argument("--connections", type=int, default=16, help="concurrent fuzz connections")
    ap.add_argument("--seconds", type=float, default=60.0, help="stop after this long")
    ap.add_argument("--batch", type=int, default=2000, help="frames per batch (health checks after each)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None, help="write the report here")
    ap.add_argument("--corpus-dir", type=Path, default=CORPUS_DIR)
    ap.add_argument("--minimize", type=int, default=3, help="crashes to shrink to one frame (each takes a few broker restarts)")
    ap.add_argument("--target-node", type=int, default=None, help=f"fuzz this node of a serve --nodes {CLUSTER_NODES} cluster")
    ap.add_argument("--replay", type=Path, nargs="+", default=None, help="replay corpus files instead of fuzzing")
    args = ap.parse_args(argv)
    if args.replay:
        result = run_async(replay(args.replay))
        ok = not any(result[k] for k in ("crashes", "hangs", "handler_failures", "broker_errors", "fresh_client_failures"))
    else:
        fz = Fuzzer(frames=args.frames, connections=args.connections, seconds=args.seconds, batch=args.batch,
                    seed=args.seed, corpus_dir=args.corpus_dir, minimize=args.minimize, target_node=args.target_node)
        result = run_async(fz.run())
        ok = not any(result[k] for k in ("crashes", "hangs", "bystander_failures", "handler_failures", "broker_errors"))
    text = json.dumps(result, indent=2, default=str)
    if args.json:
        args.json.write_text(text + "\n")
    summary = {k: v for k, v in result.items() if not isinstance(v, (list, dict)) or k == "outcomes"}
    print(json.dumps(summary, indent=2, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
