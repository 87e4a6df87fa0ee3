"""Frames whose lengths lie, one nesting level down or more: refused, never a crash.

kio's native reader (the guard was proven against kio==0.6.5) reserves room
for whatever array count it reads, so a count of 2**31 aborted the whole
broker with SIGABRT. ``protocol.codec`` now walks every frame with a bounded
reader first. Each case here is a frame that used to abort the process (or a
close relative), built next to a valid twin that differs only in the lie, so
that the lie is what gets the frame refused. ``test_no_case_aborts_a_process``
runs them all in a child process too, so that a regression fails this file
instead of killing pytest.
"""

from __future__ import annotations

import importlib.metadata
import struct
import subprocess
import sys
import uuid

import pytest

from protocol import consumer_protocol
from broker.handlers import supported_versions
from protocol import codec
from protocol.codec import DecodeError, decode, request_class
from protocol.connection import ProtocolError, Request, ServerConnection, UnsupportedVersion

KIO_VERSION = "0.6.5"  # the version whose reader these frames were proven against


def uv(n: int) -> bytes:
    """Unsigned varint."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(s: str | None) -> bytes:
    """Compact (nullable) string."""
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uv(len(raw) + 1) + raw


def cbytes(b: bytes) -> bytes:
    return uv(len(b) + 1) + b


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def head2(api_key: int, version: int, client_id: bytes = i16(4) + b"fuzz", tags: bytes = b"\x00") -> bytes:
    """Request header v2: key, version, correlation id, int16 client id, tag section."""
    return struct.pack(">hhi", api_key, version, 1002) + client_id + tags


def framed(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


TOPIC_ID = uuid.UUID("0c0ffee0-0000-4000-8000-000000000001").bytes
HUGE_VARINT = b"\xff\xff\xff\xfe\x7a"  # above 2**32: the varint of the first abort seen
VARINT_2_31 = uv(2**31 + 1)  # a compact count of 2**31
VARINT_MAX = uv(2**32 - 1)
SIX_BYTE_VARINT = b"\x80\x80\x80\x80\x80\x01"


# ---------------------------------------------------------------- the frames
# Each entry: (name, valid twin, hostile frame); both without the size prefix.


def describe_groups_v6(groups: bytes) -> bytes:
    return head2(15, 6) + groups + b"\x01" + b"\x00"


def join_group_v7(protocols: bytes) -> bytes:
    body = cstr("group") + i32(30000) + i32(60000) + cstr("") + cstr(None) + cstr("consumer") + protocols + b"\x00"
    return head2(11, 7) + body


def join_protocol(name: bytes, metadata: bytes) -> bytes:
    return name + metadata + b"\x00"


def heartbeat_v4(group: bytes = cstr("group"), member: bytes = cstr("m-1"), tags: bytes = b"\x00") -> bytes:
    return head2(12, 4) + group + i32(3) + member + cstr(None) + tags


def produce(version: int, topics: bytes) -> bytes:
    return head2(0, version) + cstr(None) + i16(-1) + i32(30000) + topics + b"\x00"


def produce_topic(version: int, partitions: bytes) -> bytes:
    key = TOPIC_ID if version >= 13 else cstr("orders")
    return key + partitions + b"\x00"


def produce_partition(records: bytes) -> bytes:
    return i32(0) + records + b"\x00"


def fetch_v16(topics: bytes, forgotten: bytes = uv(1), tags: bytes = b"\x00") -> bytes:
    body = i32(500) + i32(1) + i32(52428800) + b"\x00" + i32(0) + i32(-1) + topics + forgotten + cstr("") + tags
    return head2(1, 16) + body


def fetch_partition(p: int) -> bytes:
    return i32(p) + i32(-1) + i64(0) + i32(-1) + i64(-1) + i32(1048576) + b"\x00"


def describe_cluster(version: int, include: bytes = b"\x00", tags: bytes = b"\x00") -> bytes:
    body = include + (b"\x01" if version >= 1 else b"") + tags
    return head2(60, version) + body


def cg_heartbeat(version: int, subscribed: bytes = b"\x00", owned: bytes = b"\x00") -> bytes:
    body = cstr("group") + cstr("member") + i32(0) + cstr(None) + cstr(None) + i32(60000) + subscribed
    if version >= 1:
        body += cstr(None)  # subscribed_topic_regex
    body += cstr(None) + owned + b"\x00"
    return head2(68, version) + body


def owned_topic(partitions: bytes) -> bytes:
    return TOPIC_ID + partitions + b"\x00"


CASES = [
    # the frame from the report, byte for byte: DescribeGroups v6, groups count above 2**32
    ("describe_groups_v6_report", describe_groups_v6(uv(2) + cstr("zz-group")), bytes.fromhex("000f0006000003ea000466757a7a00fffffffe7a7a2d67726f75700100")),
    ("describe_groups_v6_count_2_31", describe_groups_v6(uv(2) + cstr("g")), describe_groups_v6(VARINT_2_31 + cstr("g"))),
    ("join_group_v7_protocols_2_31", join_group_v7(uv(2) + join_protocol(cstr("range"), cbytes(b"m"))), join_group_v7(VARINT_2_31 + join_protocol(cstr("range"), cbytes(b"m")))),
    ("join_group_v7_nested_metadata_length", join_group_v7(uv(2) + join_protocol(cstr("range"), cbytes(b"m"))), join_group_v7(uv(2) + join_protocol(cstr("range"), VARINT_MAX + b"m"))),
    ("join_group_v7_nested_name_length", join_group_v7(uv(2) + join_protocol(cstr("range"), cbytes(b"m"))), join_group_v7(uv(2) + join_protocol(HUGE_VARINT + b"range", cbytes(b"m")))),
    ("heartbeat_v4_group_length", heartbeat_v4(), heartbeat_v4(group=VARINT_MAX + b"group")),
    ("heartbeat_v4_six_byte_varint", heartbeat_v4(), heartbeat_v4(member=SIX_BYTE_VARINT + b"m-1")),
    ("heartbeat_v4_tag_count", heartbeat_v4(), heartbeat_v4(tags=VARINT_2_31)),
    ("heartbeat_v4_tag_size", heartbeat_v4(tags=uv(1) + uv(9) + uv(1) + b"x"), heartbeat_v4(tags=uv(1) + uv(9) + VARINT_MAX + b"x")),
    ("heartbeat_v4_invalid_utf8", heartbeat_v4(), heartbeat_v4(member=uv(3) + b"\xc3\x28")),
    ("heartbeat_v4_header_tag_count", heartbeat_v4(), head2(12, 4, tags=VARINT_MAX) + heartbeat_v4()[15:]),
    ("produce_v12_partitions_2_31", produce(12, uv(2) + produce_topic(12, uv(2) + produce_partition(cbytes(b"r")))), produce(12, uv(2) + produce_topic(12, VARINT_2_31 + produce_partition(cbytes(b"r"))))),
    ("produce_v12_records_length", produce(12, uv(2) + produce_topic(12, uv(2) + produce_partition(cbytes(b"r")))), produce(12, uv(2) + produce_topic(12, uv(2) + produce_partition(VARINT_MAX + b"r")))),
    ("produce_v13_partitions_2_31", produce(13, uv(2) + produce_topic(13, uv(2) + produce_partition(cbytes(b"r")))), produce(13, uv(2) + produce_topic(13, VARINT_2_31 + produce_partition(cbytes(b"r"))))),
    ("produce_v13_topics_huge", produce(13, uv(2) + produce_topic(13, uv(1))), produce(13, HUGE_VARINT + produce_topic(13, uv(1)))),
    ("fetch_v16_partitions_2_31", fetch_v16(uv(2) + TOPIC_ID + uv(2) + fetch_partition(0) + b"\x00"), fetch_v16(uv(2) + TOPIC_ID + VARINT_2_31 + fetch_partition(0) + b"\x00")),
    ("fetch_v16_forgotten_int32s", fetch_v16(uv(1), uv(2) + TOPIC_ID + uv(3) + i32(0) + i32(1) + b"\x00"), fetch_v16(uv(1), uv(2) + TOPIC_ID + VARINT_2_31 + i32(0) + i32(1) + b"\x00")),
    ("fetch_v16_tagged_cluster_id_length", fetch_v16(uv(1), tags=uv(1) + uv(0) + uv(3) + cstr("c1")), fetch_v16(uv(1), tags=uv(1) + uv(0) + uv(3) + VARINT_MAX[:1] + b"c1")),
    ("fetch_v16_tagged_size_lies", fetch_v16(uv(1), tags=uv(1) + uv(1) + uv(13) + i32(-1) + i64(-1) + b"\x00"), fetch_v16(uv(1), tags=uv(1) + uv(1) + uv(12) + i32(-1) + i64(-1) + b"\x00")),
    ("describe_cluster_v0_tag_count", describe_cluster(0), describe_cluster(0, tags=VARINT_MAX)),
    ("describe_cluster_v1_tag_size", describe_cluster(1, tags=uv(1) + uv(5) + uv(0)), describe_cluster(1, tags=uv(1) + uv(5) + VARINT_2_31)),
    ("describe_cluster_v1_bool_2", describe_cluster(1), describe_cluster(1, include=b"\x02")),
    ("consumer_group_heartbeat_v0_subscribed_2_31", cg_heartbeat(0, subscribed=uv(2) + cstr("t")), cg_heartbeat(0, subscribed=VARINT_2_31 + cstr("t"))),
    ("consumer_group_heartbeat_v1_owned_partitions", cg_heartbeat(1, owned=uv(2) + owned_topic(uv(2) + i32(0))), cg_heartbeat(1, owned=uv(2) + owned_topic(VARINT_MAX + i32(0)))),
    ("consumer_group_heartbeat_v1_owned_topics_huge", cg_heartbeat(1, owned=uv(2) + owned_topic(uv(1))), cg_heartbeat(1, owned=HUGE_VARINT + owned_topic(uv(1)))),
]


def lstr(s: str) -> bytes:
    return i16(len(s)) + s.encode()


def offset_commit_v2(partitions: bytes) -> bytes:
    """A non-flexible request: header v1, int16 strings, int32 counts."""
    header = struct.pack(">hhi", 8, 2, 1003) + lstr("fuzz")
    return header + lstr("group") + i32(1) + lstr("m") + i64(-1) + i32(1) + lstr("t") + partitions


CASES += [
    ("offset_commit_v2_partitions_2_31", offset_commit_v2(i32(1) + i32(0) + i64(5) + i16(-1)), offset_commit_v2(i32(2**31 - 1) + i32(0) + i64(5) + i16(-1))),
    ("offset_commit_v2_partitions_minus_2", offset_commit_v2(i32(1) + i32(0) + i64(5) + i16(-1)), offset_commit_v2(i32(-2) + i32(0) + i64(5) + i16(-1))),
    ("offset_commit_v2_metadata_minus_2", offset_commit_v2(i32(1) + i32(0) + i64(5) + i16(-1)), offset_commit_v2(i32(1) + i32(0) + i64(5) + i16(-2))),
    # a null where the schema has none; a negative length other than -1
    ("offset_commit_v9_null_topics", head2(8, 9) + cstr("g") + i32(1) + cstr("m") + cstr(None) + uv(1) + b"\x00", head2(8, 9) + cstr("g") + i32(1) + cstr("m") + cstr(None) + b"\x00" + b"\x00"),
    ("header_client_id_length_minus_2", struct.pack(">hhi", 3, 1, 5) + i16(-1) + i32(-1), struct.pack(">hhi", 3, 1, 5) + i16(-2) + i32(-1)),
]

IDS = [c[0] for c in CASES]


def _conn() -> ServerConnection:
    return ServerConnection(supported_versions())


def test_kio_is_the_version_the_guard_was_proven_against():
    # a new kio may read differently: run tests/fuzz and these cases again, then move this pin
    assert importlib.metadata.version("kio") == KIO_VERSION


@pytest.mark.parametrize(("name", "valid", "hostile"), CASES, ids=IDS)
def test_valid_twin_decodes(name, valid, hostile):
    [event] = _conn().receive_data(framed(valid))
    assert isinstance(event, Request), name


@pytest.mark.parametrize(("name", "valid", "hostile"), CASES, ids=IDS)
def test_hostile_frame_is_a_protocol_error(name, valid, hostile):
    with pytest.raises(ProtocolError):
        _conn().receive_data(framed(hostile))


def test_no_case_aborts_a_process():
    """Every hostile frame in a child process: it must exit 0 having refused each one."""
    script = """
import sys
from broker.handlers import supported_versions
from protocol.connection import ProtocolError, ServerConnection
refused = 0
frames = [bytes.fromhex(line) for line in sys.stdin.read().split()]
for frame in frames:
    try:
        ServerConnection(supported_versions()).receive_data(frame)
    except ProtocolError:
        refused += 1
print(refused, len(frames))
"""
    stdin = "\n".join(framed(hostile).hex() for _, _, hostile in CASES)
    proc = subprocess.run([sys.executable, "-c", script], input=stdin, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [str(len(CASES))] * 2


def test_heartbeat_v7_and_v9_are_unsupported_versions_not_decoded():
    for version in (7, 9):
        frame = struct.pack(">hhi", 12, version, 9) + i16(4) + b"fuzz" + b"\x00" + VARINT_MAX + HUGE_VARINT
        [event] = _conn().receive_data(framed(frame))
        assert isinstance(event, UnsupportedVersion)
        assert (event.api_version, event.correlation_id) == (version, 9)


# ---------------------------------------------------------------- the bound itself


def _forgotten(n: int, present: int) -> bytes:
    """Fetch v16 forgetting one topic whose partitions count says ``n`` with ``present`` int32s after it."""
    return fetch_v16(uv(1), uv(2) + TOPIC_ID + uv(n + 1) + b"\x00\x00\x00\x07" * present + b"\x00")


def test_an_array_that_fits_exactly_is_read_and_one_more_is_refused():
    # the forgotten topic ends with its tag section, then rack_id and the tag section: 3 bytes
    [event] = _conn().receive_data(framed(_forgotten(1000, 1000)))
    assert event.body.forgotten_topics_data[0].partitions == (7,) * 1000
    with pytest.raises(ProtocolError, match="cannot fit"):
        _conn().receive_data(framed(_forgotten(1002, 1000)))  # 8 bytes more than are there, 3 left
    with pytest.raises(ProtocolError):
        _conn().receive_data(framed(_forgotten(1001, 1000)))  # fits the bytes left, but then the frame is short


def test_a_million_items_announced_need_a_million_items_of_bytes():
    # one million partitions of a flexible struct take at least 33 bytes each
    frame = fetch_v16(uv(2) + TOPIC_ID + uv(10**6 + 1) + fetch_partition(0) * 10 + b"\x00")
    with pytest.raises(ProtocolError, match="1000000 items cannot fit"):
        _conn().receive_data(framed(frame))


def test_a_large_valid_array_is_read_whole():
    n = 200_000
    [event] = _conn().receive_data(framed(_forgotten(n, n)))
    assert len(event.body.forgotten_topics_data[0].partitions) == n


def test_consumer_protocol_metadata_with_a_lying_count_is_not_a_subscription():
    # JoinGroup carries the member's subscription as opaque bytes; the
    # coordinator decodes it later through the same codec
    valid = i16(1) + i32(1) + i16(1) + b"t" + i32(-1) + i32(0)
    assert consumer_protocol.subscribed_topics(valid) == frozenset({"t"})
    hostile = i16(1) + i32(2**31 - 1) + i16(1) + b"t" + i32(-1) + i32(0)
    assert consumer_protocol.subscribed_topics(hostile) is None
    nested = i16(1) + i32(1) + i16(1) + b"t" + i32(-1) + i32(2**31 - 1) + i16(1) + b"t"
    assert consumer_protocol.parse_subscription(nested) is None


def test_nullable_struct_markers_other_than_minus_1_and_0_to_127_are_refused():
    # no request this broker reads has a nullable struct; a response does
    cls = codec.response_class(68, 0)
    absent = codec.encode(codec.build(cls, {"member_id": "m", "assignment": None}))
    present = codec.encode(codec.build(cls, {"member_id": "m", "assignment": {"topic_partitions": []}}))
    assert absent[-2:] == b"\xff\x00"  # the marker, then the top-level tag section
    assert decode(cls, absent)[0].assignment is None
    assert decode(cls, present)[0].assignment.topic_partitions == ()
    with pytest.raises(DecodeError, match="marker -2"):
        decode(cls, absent[:-2] + b"\xfe\x00")


def test_every_kio_error_is_a_decode_error():
    cls = request_class(12, 4)
    good = heartbeat_v4()[15:]
    for bad in (
        good[:-1],  # truncated
        uv(3) + b"\xc3\x28" + good[2:],  # invalid UTF-8
        b"\x00" + good[1:],  # null group id
    ):
        with pytest.raises(DecodeError):
            decode(cls, bad)


def test_unknown_tags_inside_a_known_tagged_struct_are_stripped():
    # Fetch v16 tag 1 (ReplicaState) holding an unknown tag 9 in its own tag section
    replica_state = i32(3) + i64(4) + uv(1) + uv(9) + uv(2) + b"zz"
    frame = fetch_v16(uv(1), tags=uv(2) + uv(0) + uv(3) + cstr("c1") + uv(1) + uv(len(replica_state)) + replica_state)
    [event] = _conn().receive_data(framed(frame))
    assert event.body.cluster_id == "c1"
    assert (event.body.replica_state.replica_id, event.body.replica_state.replica_epoch) == (3, 4)
    end = codec.check(request_class(1, 16), frame, 15)
    assert end == len(frame)


def test_the_requests_before_a_bad_frame_come_with_the_error():
    """Good requests, then a frame that cannot be used (an unknown API key, a body that does not
    decode, a bad size prefix): ``ProtocolError.events`` holds the requests before it, in order,
    so the broker can answer them before it closes, as Kafka's does."""
    api_versions = struct.pack(">hhih", 18, 0, 1, 1) + b"x"
    metadata = struct.pack(">hhih", 3, 4, 2, 1) + b"x" + struct.pack(">i", -1) + b"\x00"
    good = codec_frame(api_versions) + codec_frame(metadata)
    for bad in (codec_frame(struct.pack(">hhih", 999, 0, 3, 1) + b"x"),  # unknown API key
                codec_frame(struct.pack(">hhih", 3, 4, 3, 1) + b"x" + struct.pack(">i", 5)),  # 5 topics announced, none sent
                struct.pack(">i", -7)):  # a negative size
        with pytest.raises(ProtocolError) as err:
            _conn().receive_data(good + bad + codec_frame(api_versions))
        assert [(e.api_key, e.correlation_id) for e in err.value.events] == [(18, 1), (3, 2)]
    with pytest.raises(ProtocolError) as err:  # the bad frame first: nothing before it
        _conn().receive_data(struct.pack(">i", -7) + good)
    assert err.value.events == []


def codec_frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload
