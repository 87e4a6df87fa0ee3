"""Framing, request headers and kio codec behaviour (no sockets)."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2

from protocol.codec import DecodeError, build, decode, encode, request_class, response_class, to_dict
from protocol.connection import ProtocolError, Request, ServerConnection, UnsupportedVersion
from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder, FrameTooLarge, InvalidFrameSize, encode_frame

SUPPORTED = {18: (0, 4), 3: (0, 13), 0: (3, 13)}


def frame_request(header, body) -> bytes:
    return encode_frame(encode(header), encode(body))


# ---------------------------------------------------------------- framing


def test_frames_split_across_reads_and_coalesced():
    payloads = [b"a" * 10, b"", b"xyz" * 1000]
    stream = b"".join(encode_frame(p) for p in payloads)
    dec = FrameDecoder()
    out = []
    for i in range(0, len(stream), 7):
        out += dec.feed(stream[i : i + 7])
    assert out == payloads
    assert dec.buffered == 0
    assert FrameDecoder().feed(stream) == payloads


def test_oversize_frame_refused_before_buffering():
    dec = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameTooLarge):
        dec.feed(struct.pack(">i", 1025))
    assert FrameDecoder(1024).feed(encode_frame(b"x" * 1024)) == [b"x" * 1024]


def test_negative_size_refused():
    with pytest.raises(InvalidFrameSize):
        FrameDecoder().feed(struct.pack(">i", -5) + b"junk")


# ---------------------------------------------------------------- headers and bodies


def test_flexible_request_uses_header_v2_and_decodes():
    conn = ServerConnection(SUPPORTED)
    header = RequestHeaderV2(request_api_key=18, request_api_version=3, correlation_id=42, client_id="cid")
    body = ApiVersionsRequest(client_software_name="test", client_software_version="1.0")
    [event] = conn.receive_data(frame_request(header, body))
    assert isinstance(event, Request)
    assert (event.api_key, event.api_version, event.correlation_id, event.client_id) == (18, 3, 42, "cid")
    assert event.body.client_software_name == "test"


def test_unknown_tagged_fields_are_skipped_in_header_and_body():
    header = encode(RequestHeaderV2(request_api_key=3, request_api_version=12, correlation_id=9, client_id="c"))
    body = encode(MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="t1"),), allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    # replace the empty tag sections with sections holding an unknown tag 7 (and tag 0 in the header)
    tagged_header = header[:-1] + bytes([2, 0, 1, 0xAA, 7, 2, 0xBB, 0xCC])
    # body: [topics: count, uuid, name "t1", tags] [auto] [ops] [tags]; add an
    # unknown tag to the nested topic entry (byte 20) and to the top level
    assert body[20] == 0 and body.endswith(b"\x01\x00\x00")
    tagged_body = body[:20] + bytes([1, 5, 1, 0xEE]) + body[21:-1] + bytes([1, 99, 3, 1, 2, 3])
    event = ServerConnection(SUPPORTED).parse_frame(tagged_header + tagged_body)
    assert event.correlation_id == 9
    assert [t.name for t in event.body.topics] == ["t1"]
    assert event.body.allow_auto_topic_creation is True


def test_trailing_bytes_after_body_are_ignored():
    header = RequestHeaderV2(request_api_key=3, request_api_version=12, correlation_id=1, client_id="rdkafka")
    body = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    [event] = ServerConnection(SUPPORTED).receive_data(encode_frame(encode(header), encode(body), b"\x00\x00\x00"))
    assert event.body.topics is None


def test_request_header_versions():
    from protocol.connection import request_header_version

    assert request_header_version(7, 0, False) == 0  # ControlledShutdown v0
    assert request_header_version(7, 1, False) == 1
    assert request_header_version(3, 8, False) == 1
    assert request_header_version(3, 9, True) == 2


def test_header_v1_client_id_null():
    header = RequestHeaderV1(request_api_key=3, request_api_version=1, correlation_id=3, client_id=None)
    body = build(request_class(3, 1), {"topics": None})
    [event] = ServerConnection(SUPPORTED).receive_data(frame_request(header, body))
    assert event.client_id is None and event.body.topics is None


def test_unsupported_version_is_an_event_not_an_error():
    header = RequestHeaderV1(request_api_key=0, request_api_version=2, correlation_id=5, client_id="old")
    frame = encode(header) + b"\x00" * 10
    event = ServerConnection(SUPPORTED).parse_frame(frame)
    assert isinstance(event, UnsupportedVersion)
    assert (event.api_version, event.correlation_id, event.client_id) == (2, 5, "old")


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x03",  # truncated header
        struct.pack(">hhi", 999, 0, 1),  # unknown api key
        struct.pack(">hhi", 3, 12, 1) + b"\xff\xff\xff",  # garbage body
    ],
)
def test_malformed_frames_raise_protocol_error(frame):
    with pytest.raises(ProtocolError):
        ServerConnection(SUPPORTED).parse_frame(frame)


def test_response_header_follows_flexibility():
    # ApiVersions responses always use header v0: correlation id then body
    body = build(response_class(18, 3), {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]})
    out = ServerConnection.encode_response(18, 3, 77, body)
    size, corr = struct.unpack_from(">ii", out)
    assert size == len(out) - 4 and corr == 77
    assert struct.unpack_from(">h", out, 8)[0] == 0  # error_code right after the correlation id
    # a flexible Metadata response has header v1: correlation id + empty tag section
    out = ServerConnection.encode_response(3, 12, 78, build(response_class(3, 12), {}))
    assert struct.unpack_from(">i", out, 4)[0] == 78 and out[8] == 0


def test_build_fills_defaults_and_ignores_unknown_keys():
    body = build(response_class(0, 3), {"responses": [{"name": "t", "topic_id": "ignored in v3", "partition_responses": [{"index": 1, "error_code": 2, "base_offset": 5}]}]})
    part = body.responses[0].partition_responses[0]
    assert part.error_code is ErrorCode.corrupt_message and part.base_offset == 5
    assert to_dict(body)["responses"][0]["name"] == "t"


# ---------------------------------------------------------------- hypothesis round trips

_topic_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(version=st.integers(0, 13), names=st.one_of(st.none(), st.lists(_topic_names, max_size=5)), auto=st.booleans(), corr=st.integers(-(2**31), 2**31 - 1))
def test_metadata_request_round_trip(version, names, auto, corr):
    cls = request_class(3, version)
    if names is None and version == 0:
        names = []
    body = build(cls, {"topics": None if names is None else [{"name": n} for n in names], "allow_auto_topic_creation": auto})
    header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
    header = header_cls(request_api_key=3, request_api_version=version, correlation_id=corr, client_id="x")
    [event] = ServerConnection(SUPPORTED).receive_data(frame_request(header, body))
    assert event.body == body and event.correlation_id == corr


@settings(max_examples=100, deadline=None)
@given(version=st.integers(3, 13), acks=st.sampled_from([-1, 0, 1]), payload=st.binary(max_size=200))
def test_produce_request_round_trip(version, acks, payload):
    cls = request_class(0, version)
    body = build(cls, {"acks": acks, "timeout": 1000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": payload}]}]})
    decoded, end = decode(cls, encode(body))
    assert decoded == body and end == len(encode(body))


def test_decode_error_is_clean():
    with pytest.raises(DecodeError):
        decode(request_class(3, 12), b"\x05")


# ---------------------------------------------------------------- what the broker reads of a connection


def test_the_connection_counts_what_it_holds_and_hands_over_frames_framed_once():
    """``buffered``, ``in_frame``, ``in_large_frame`` and ``frame_left`` as the broker reads them;
    ``receive_frames`` then ``take_pending`` and ``receive_framed``: the SASL gate's hand-over."""
    header = RequestHeaderV2(request_api_key=18, request_api_version=3, correlation_id=7, client_id="c")
    first = frame_request(header, ApiVersionsRequest(client_software_name="a", client_software_version="1"))
    large = encode_frame(b"\x00" * (70 * 1024))
    gate = ServerConnection(SUPPORTED, max_frame_bytes=1024)
    raw = gate.receive_frames(first + first + first[:6])
    assert raw == [first[4:], first[4:]]
    assert (gate.buffered, gate.in_frame, gate.in_large_frame, gate.frame_left) == (2, True, False, len(first) - 4 - 2)
    pending = gate.take_pending()
    assert pending == first[:6] and gate.buffered == 0 and not gate.in_frame
    conn = ServerConnection(SUPPORTED)
    events = conn.receive_framed(raw[1:], pending + first[6:] + large[:5000])
    assert [e.correlation_id for e in events] == [7, 7]
    assert conn.in_large_frame and conn.buffered == 5000 - 4 and conn.frame_left == 70 * 1024 - (5000 - 4)
    with pytest.raises(ProtocolError) as failed:
        ServerConnection(SUPPORTED).receive_framed([first[4:], b"\x00\x63" + first[6:]], b"")
    assert [e.correlation_id for e in failed.value.events] == [7]
    with pytest.raises(ProtocolError) as failed:
        ServerConnection(SUPPORTED).receive_framed([first[4:]], first + encode_frame(b"\x00\x63" + first[6:]))
    assert [e.correlation_id for e in failed.value.events] == [7, 7]
