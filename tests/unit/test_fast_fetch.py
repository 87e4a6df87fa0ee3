"""The hand-written Fetch response encoder produces exactly kio's bytes, for
every served version (4-18) and random bodies: errors, null and empty records,
records large enough to be handed over as separate buffers (bytes or
memoryviews), regions of a file of any size (``protocol.regions.Region``,
handed over whatever their size, and read by kio's path), aborted
transactions, many partitions, topic ids, and fields left out (kio's
defaults)."""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codec import build, decode, response_class
from protocol.connection import ServerConnection
from protocol.errors import ErrorCode
from protocol.fast import ENCODERS, FETCH_INLINE
from protocol.regions import Region


class Held(Region):
    """A region whose "file" is a bytes object (storage.segment.FileRegion reads a segment file)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def read(self, n: int | None = None) -> bytes:
        return self.data if n is None else self.data[:n]


codes = st.sampled_from(list(ErrorCode))
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))

small = st.binary(max_size=200)
# at least FETCH_INLINE bytes, made from a short random pattern (cheap for hypothesis to draw)
large = st.builds(
    lambda pattern, extra: (pattern * (FETCH_INLINE // len(pattern) + 1))[: FETCH_INLINE + extra],
    st.binary(min_size=1, max_size=64),
    st.integers(0, 3000),
)
records = st.one_of(
    st.none(),
    st.just(b""),
    small,
    large,
    # a view into a bigger buffer, as Segment.read_batches returns when the last batch did not fit
    st.builds(lambda b, cut: memoryview(b)[: len(b) - cut], large, st.integers(0, 100)),
    # regions of a file: empty, small (what a Fetch whose answer holds ANSWER_MEMORY gets) and large
    st.builds(Held, st.one_of(st.just(b""), small, large)),
)
aborted = st.one_of(st.none(), st.lists(st.fixed_dictionaries({"producer_id": i64, "first_offset": i64}), max_size=3))
partition = st.fixed_dictionaries(
    {"partition_index": i32, "error_code": codes, "high_watermark": i64},
    optional={
        "last_stable_offset": i64,
        "log_start_offset": i64,
        "aborted_transactions": aborted,
        "preferred_read_replica": i32,
        "records": records,
    },
)
topic = st.fixed_dictionaries(
    {"partitions": st.lists(partition, max_size=6)},
    optional={"topic": st.text(max_size=30), "topic_id": uuids},  # a fault's error answer may leave them out
)


def kio_bytes(version: int, correlation_id: int, body: dict) -> bytes:
    cls = response_class(1, version)
    return ServerConnection.encode_response(1, version, correlation_id, build(cls, body))


def plain(body: dict) -> dict:
    """The same body with records as bytes (kio's build wants bytes)."""
    out = dict(body)
    out["responses"] = [
        {**t, "partitions": [{**p, "records": bytes(p["records"])} if isinstance(p.get("records"), memoryview) else p for p in t["partitions"]]}
        for t in body.get("responses", [])
    ]
    return out


def joined(encoded) -> bytes:
    if isinstance(encoded, bytes):
        return encoded
    assert isinstance(encoded, list) and len(encoded) >= 3
    return b"".join(b.read() if isinstance(b, Region) else b for b in encoded)  # what the connection sends


@settings(max_examples=500, deadline=None)
@given(
    version=st.integers(4, 18),
    correlation_id=i32,
    throttle_ms=st.integers(0, 2**31 - 1),
    code=codes,
    session_id=i32,
    responses=st.lists(topic, max_size=5),
)
def test_fetch_matches_kio(version, correlation_id, throttle_ms, code, session_id, responses):
    body = {"throttle_time": throttle_ms, "error_code": code, "session_id": session_id, "responses": responses}
    assert joined(ENCODERS[(1, version)](version, correlation_id, body)) == kio_bytes(version, correlation_id, plain(body))


@settings(max_examples=100, deadline=None)
@given(version=st.integers(4, 18), correlation_id=i32, n=st.integers(0, 300), data=large)
def test_fetch_many_partitions(version, correlation_id, n, data):
    """Hundreds of partitions, every other one with records handed over as a view."""
    view = memoryview(data)
    parts = [
        {"partition_index": i, "error_code": ErrorCode.none, "high_watermark": i * 1000, "last_stable_offset": i * 1000,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
         "records": view if i % 2 else b""}
        for i in range(n)
    ]
    body = {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
            "responses": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": parts}]}
    encoded = ENCODERS[(1, version)](version, correlation_id, body)
    assert joined(encoded) == kio_bytes(version, correlation_id, plain(body))
    if n > 1:  # the records are not copied: the very view is one of the buffers
        assert any(b is view for b in encoded)


@settings(max_examples=100, deadline=None)
@given(version=st.integers(4, 18), correlation_id=i32, code=codes)
def test_fetch_error_only(version, correlation_id, code):
    """The handler's early answer (FETCH_SESSION_ID_NOT_FOUND) and a fault's: no topics, fields left out."""
    for body in ({"error_code": code, "session_id": 0, "responses": [], "throttle_time": 0}, {"error_code": code}):
        assert ENCODERS[(1, version)](version, correlation_id, body) == kio_bytes(version, correlation_id, body)


def _regions(body: dict) -> list:
    return [p["records"] for t in body["responses"] for p in t["partitions"] if isinstance(p.get("records"), Region)]


@settings(max_examples=300, deadline=None)
@given(version=st.integers(4, 18), correlation_id=i32, responses=st.lists(topic, min_size=1, max_size=4))
def test_regions_are_handed_over_whatever_their_size(version, correlation_id, responses):
    """A region is never copied into the fields (it is not bytes: the connection sends it from
    its file): every region of more than 0 bytes is one of the buffers, as it is."""
    body = {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses}
    encoded = ENCODERS[(1, version)](version, correlation_id, body)
    buffers = [encoded] if isinstance(encoded, bytes) else encoded
    for region in _regions(body):
        assert any(b is region for b in buffers) == (len(region) > 0)
    # and the frame, regions read in place, is kio's (whose path reads them: codec.build)
    assert b"".join(b.read() if isinstance(b, Region) else b for b in buffers) == kio_bytes(version, correlation_id, plain(body))


@pytest.mark.parametrize("version", [4, 11, 12, 13, 18])
@pytest.mark.parametrize("records", [[1, 2], "text", object()], ids=["list", "str", "object"])
def test_records_of_another_type_raise(version, records):
    """Not bytes-like and not a region: a handler bug, refused, never written as something else."""
    part = {"partition_index": 0, "error_code": ErrorCode.none, "high_watermark": 0, "records": records}
    body = {"responses": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": [part]}]}
    with pytest.raises(TypeError):
        ENCODERS[(1, version)](version, 1, body)


def _through_kio(api_key: int, version: int, body: dict):
    """``body`` encoded by kio's path (as ``KafkaConnection._encode`` does without a fast encoder), decoded."""
    cls = response_class(api_key, version)
    frame = ServerConnection.encode_response(api_key, version, 7, build(cls, body))[4:]
    _, pos = decode(cls.__header_schema__, frame, 0)
    return decode(cls, frame, pos)[0]


SHAPES = [b"", b"x" * 10, b"y" * (FETCH_INLINE + 10), memoryview(b"abc" * 3000)[5:7000], memoryview(b"abc")[:0],
          Held(b""), Held(b"r" * 400), Held(b"s" * (FETCH_INLINE * 3))]


@pytest.mark.parametrize("version", range(4, 19))
def test_kio_path_takes_every_fetch_records_shape(version):
    """The generic path (codec.build + kio: fault injection's answers, versions without a fast
    encoder) encodes every records shape a Fetch handler builds, regions read into the frame."""
    parts = [{"partition_index": i, "error_code": ErrorCode.none, "high_watermark": 1, "records": r} for i, r in enumerate(SHAPES)]
    resp = _through_kio(1, version, {"responses": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": parts}]})
    got = [bytes(p.records or b"") for p in resp.responses[0].partitions]
    assert got == [r.read() if isinstance(r, Region) else bytes(r) for r in SHAPES]


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_answers_take_every_records_shape(version):
    """ShareFetch's records (broker/handlers/share_fetch.py: a view of the read, cut to the acquired
    batches) go through kio's path: every shape, regions too, arrives as its bytes."""
    parts = [{"partition_index": i, "error_code": ErrorCode.none, "records": r, "acquired_records": []} for i, r in enumerate(SHAPES)]
    body = {"error_code": ErrorCode.none, "responses": [{"topic_id": uuid.uuid4(), "partitions": parts}], "node_endpoints": []}
    got = [bytes(p.records or b"") for p in _through_kio(78, version, body).responses[0].partitions]
    assert got == [r.read() if isinstance(r, Region) else bytes(r) for r in SHAPES]
