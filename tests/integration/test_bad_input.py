"""Bad input over raw sockets: a clear error or a closed connection, never harm.

Each case keeps a healthy connection open beside the bad one and checks that it
still gets answers afterwards, and that no log was touched.
"""

from __future__ import annotations

import struct

import pytest
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

from protocol.codec import build, encode, request_class
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from tests.raw import RawClient


@pytest.fixture
def healthy(shared_broker):
    c = RawClient(shared_broker.bootstrap)
    assert c.request(18, 3, {"client_software_name": "healthy", "client_software_version": "1"}).error_code == ErrorCode.none
    yield c
    # the bystander connection is undisturbed
    assert c.request(18, 3, {}).error_code == ErrorCode.none
    c.close()


def test_malformed_body_closes_only_that_connection(shared_broker, healthy):
    bad = RawClient(shared_broker.bootstrap)
    bad.send_frame(struct.pack(">hhi", 3, 12, 1) + b"\xff\xff\xff\xff")
    assert bad.is_closed()


def test_negative_size_prefix_closes_connection(shared_broker, healthy):
    bad = RawClient(shared_broker.bootstrap)
    bad.sock.sendall(struct.pack(">i", -1) + b"abcd")
    assert bad.is_closed()


def test_truncated_header_closes_connection(shared_broker, healthy):
    bad = RawClient(shared_broker.bootstrap)
    bad.send_frame(b"\x00\x12\x00")
    assert bad.is_closed()


def test_unknown_api_key_closes_connection(shared_broker, healthy):
    bad = RawClient(shared_broker.bootstrap)
    bad.send_frame(struct.pack(">hhi", 9999, 0, 7) + b"\x00\x00")
    assert bad.is_closed()


BAD_FRAMES = {
    "unknown-api": lambda: _framed(struct.pack(">hhi", 9999, 0, 9) + b"\x00\x00"),
    "malformed-body": lambda: _framed(struct.pack(">hhi", 3, 12, 9) + b"\xff\xff\xff\xff"),
    "negative-size": lambda: struct.pack(">i", -1) + b"abcd",
}


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("bad", list(BAD_FRAMES))
def test_requests_pipelined_before_a_bad_frame_are_answered_then_the_connection_closes(shared_broker, healthy, bad):
    """Kafka reads one request at a time, so it answers every request sent before an unusable
    frame and closes when it reaches that frame; kafkalite gets them all in one read, and does
    the same (a commit and a heartbeat pipelined among them included), never answering what
    came after (tests/conformance: pipelined_requests_before_a_bad_frame)."""
    c = RawClient(shared_broker.bootstrap)
    frames = []
    for corr, (key, version, body) in enumerate([(18, 3, {"client_software_name": "raw", "client_software_version": "1"}),
                                                 (3, 12, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}),
                                                 (12, 4, {"group_id": "nobody", "generation_id": 1, "member_id": "m", "group_instance_id": None})], start=1):
        cls = request_class(key, version)
        frames.append(_framed(encode(HeaderV2(request_api_key=key, request_api_version=version, correlation_id=corr, client_id="raw")) + encode(build(cls, body))))
    after = frames[0]  # never answered
    c.sock.sendall(b"".join(frames) + BAD_FRAMES[bad]() + after)
    got = []
    while (frame := c.read_frame()) is not None:
        got.append(struct.unpack_from(">i", frame)[0])
    assert got == [1, 2, 3]


def test_oversize_frame_is_refused_before_it_is_read(shared_broker, healthy):
    bad = RawClient(shared_broker.bootstrap)
    bad.sock.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 1024)
    assert bad.is_closed()


def test_unsupported_api_versions_version_answers_v0_with_the_list(shared_broker, healthy):
    c = RawClient(shared_broker.bootstrap)
    c.corr = 41
    c.send_frame(encode(HeaderV2(request_api_key=18, request_api_version=99, correlation_id=42, client_id="future")) + b"\x00\x00")
    c.corr = 42
    body = c.read_response(18, 0)
    assert body.error_code == ErrorCode.unsupported_version
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}[0] == (3, 13)


def test_unsupported_fetch_version_gets_unsupported_version(shared_broker, healthy):
    c = RawClient(shared_broker.bootstrap)
    c.corr = 5
    c.send_frame(encode(HeaderV2(request_api_key=1, request_api_version=99, correlation_id=5, client_id="future")) + b"\x00" * 30)
    body = c.read_response(1, 17)
    assert body.error_code == ErrorCode.unsupported_version
    # the connection stays usable
    assert c.request(18, 3, {}).error_code == ErrorCode.none


def _produce(c: RawClient, topic: str, records: bytes, acks: int = -1):
    return c.request(0, 9, {"acks": acks, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})


def test_bad_crc_is_refused_with_corrupt_message_and_nothing_is_stored(shared_broker, healthy):
    c = RawClient(shared_broker.bootstrap)
    topic = "bad-crc"
    assert c.request(19, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout": 5000}).topics[0].error_code == ErrorCode.none
    batch = bytearray(build_batch([Record(offset=0, timestamp=1, key=b"k", value=b"v" * 50, headers=[])]))
    batch[-5] ^= 0xFF  # inside the records, covered by the CRC
    resp = _produce(c, topic, bytes(batch))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.corrupt_message
    # a torn batch (wrong length) is refused the same way
    good = build_batch([Record(offset=0, timestamp=1, key=b"k", value=b"v", headers=[])])
    assert _produce(c, topic, good[:-3]).responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
    # nothing reached the log; a good batch then lands at offset 0
    lo = c.request(2, 7, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    assert lo.topics[0].partitions[0].offset == 0
    assert _produce(c, topic, good).responses[0].partition_responses[0].base_offset == 0


def test_invalid_acks_and_unknown_topic(shared_broker, healthy):
    c = RawClient(shared_broker.bootstrap)
    good = build_batch([Record(offset=0, timestamp=1, key=b"k", value=b"v", headers=[])])
    assert _produce(c, "no-such-topic", good).responses[0].partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition
    c.request(19, 7, {"topics": [{"name": "acks-topic", "num_partitions": 1, "replication_factor": 1}], "timeout": 5000})
    assert _produce(c, "acks-topic", good, acks=2).responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks


def test_create_topics_errors(shared_broker, healthy):
    c = RawClient(shared_broker.bootstrap)
    resp = c.request(
        19,
        7,
        {
            "topics": [
                {"name": "bad/name", "num_partitions": 1, "replication_factor": 1},
                {"name": "rf3", "num_partitions": 1, "replication_factor": 3},
                {"name": "badcfg", "num_partitions": 1, "replication_factor": 1, "configs": [{"name": "retention.ms", "value": "soon"}]},
                {"name": "okcfg", "num_partitions": 2, "replication_factor": -1, "configs": [{"name": "cleanup.policy", "value": "compact"}]},
            ],
            "timeout": 5000,
        },
    )
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {
        "bad/name": ErrorCode.invalid_topic_exception,
        "rf3": ErrorCode.invalid_replication_factor,
        "badcfg": ErrorCode.invalid_config,
        "okcfg": ErrorCode.none,
    }
    again = c.request(19, 7, {"topics": [{"name": "okcfg", "num_partitions": 1, "replication_factor": 1}], "timeout": 5000})
    assert again.topics[0].error_code == ErrorCode.topic_already_exists
    described = c.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": "okcfg", "configuration_keys": None}]})
    configs = {e.name: (e.value, e.config_source) for e in described.results[0].configs}
    assert configs["cleanup.policy"] == ("compact", 1)
    assert configs["retention.ms"][1] == 5
