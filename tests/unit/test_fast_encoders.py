"""The hand-written response encoders produce exactly kio's bytes."""

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codec import build, response_class
from protocol.connection import ServerConnection
from protocol.errors import ErrorCode
from protocol.fast import ENCODERS

codes = st.sampled_from(list(ErrorCode))
corr = st.integers(-(2**31), 2**31 - 1)
throttle = st.integers(0, 2**31 - 1)


def kio_bytes(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    return ServerConnection.encode_response(api_key, version, correlation_id, build(response_class(api_key, version), body))


@settings(max_examples=300, deadline=None)
@given(version=st.integers(0, 4), correlation_id=corr, code=codes, throttle_ms=throttle)
def test_heartbeat_matches_kio(version, correlation_id, code, throttle_ms):
    body = {"throttle_time": throttle_ms, "error_code": code}
    assert ENCODERS[(12, version)](version, correlation_id, body) == kio_bytes(12, version, correlation_id, body)


topics = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.text(min_size=0, max_size=30),
            "partitions": st.lists(st.fixed_dictionaries({"partition_index": st.integers(-(2**31), 2**31 - 1), "error_code": codes}), max_size=5),
        }
    ),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(2, 9), correlation_id=corr, throttle_ms=throttle, topics=topics)
def test_offset_commit_matches_kio(version, correlation_id, throttle_ms, topics):
    body = {"throttle_time": throttle_ms, "topics": topics}
    assert ENCODERS[(8, version)](version, correlation_id, body) == kio_bytes(8, version, correlation_id, body)
