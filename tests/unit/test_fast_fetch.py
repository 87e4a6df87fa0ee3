"""The hand-written Fetch response encoder produces exactly kio's bytes, for
every served version (4-18) and random bodies: errors, null and empty records,
records large enough to be handed over as separate buffers (bytes or
memoryviews), aborted transactions, many partitions, topic ids, and fields
left out (kio's defaults)."""

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codec import build, response_class
from protocol.connection import ServerConnection
from protocol.errors import ErrorCode
from protocol.fast import ENCODERS, FETCH_INLINE

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
    return b"".join(encoded)


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
