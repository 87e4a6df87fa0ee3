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


names = st.one_of(st.none(), st.text(max_size=20))


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(0, 9),
    correlation_id=corr,
    throttle_ms=throttle,
    code=codes,
    generation=st.integers(-1, 2**31 - 1),
    ptype=names,
    pname=names,
    leader=st.text(max_size=20),
    skip=st.booleans(),
    member_id=st.text(max_size=40),
    members=st.lists(st.fixed_dictionaries({"member_id": st.text(max_size=20), "group_instance_id": names, "metadata": st.binary(max_size=40)}), max_size=4),
)
def test_join_group_matches_kio(version, correlation_id, throttle_ms, code, generation, ptype, pname, leader, skip, member_id, members):
    if version < 7:
        pname = pname or ""  # what the JoinGroup handler sends below v7
    if version < 5:
        members = [{**m, "group_instance_id": None} for m in members]
    body = {
        "throttle_time": throttle_ms,
        "error_code": code,
        "generation_id": generation,
        "protocol_type": ptype,
        "protocol_name": pname,
        "leader": leader,
        "skip_assignment": skip,
        "member_id": member_id,
        "members": members,
    }
    assert ENCODERS[(11, version)](version, correlation_id, body) == kio_bytes(11, version, correlation_id, body)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(0, 5), correlation_id=corr, throttle_ms=throttle, code=codes, ptype=names, pname=names, assignment=st.binary(max_size=60))
def test_sync_group_matches_kio(version, correlation_id, throttle_ms, code, ptype, pname, assignment):
    body = {"throttle_time": throttle_ms, "error_code": code, "protocol_type": ptype, "protocol_name": pname, "assignment": assignment}
    assert ENCODERS[(14, version)](version, correlation_id, body) == kio_bytes(14, version, correlation_id, body)


uuids = st.uuids()


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(0, 1),
    correlation_id=corr,
    throttle_ms=throttle,
    code=codes,
    message=names,
    member_id=names,
    epoch=st.integers(-(2**31), 2**31 - 1),
    interval=st.integers(0, 2**31 - 1),
    assignment=st.one_of(
        st.none(),
        st.fixed_dictionaries({"topic_partitions": st.lists(
            st.fixed_dictionaries({"topic_id": uuids, "partitions": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6)}), max_size=4)}),
    ),
)
def test_consumer_group_heartbeat_matches_kio(version, correlation_id, throttle_ms, code, message, member_id, epoch, interval, assignment):
    body = {"throttle_time": throttle_ms, "error_code": code, "error_message": message, "member_id": member_id, "member_epoch": epoch,
            "heartbeat_interval": interval, "assignment": assignment}
    assert ENCODERS[(68, version)](version, correlation_id, body) == kio_bytes(68, version, correlation_id, body)
