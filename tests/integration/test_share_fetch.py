"""ShareFetch (78) and ShareAcknowledge (79) over the wire, with raw requests (tests/raw.py).

A broker child process with a 1 s record lock (group.share.record.lock.duration.ms),
so redelivery after a lock timeout is awaited (a fetch that long-polls until it
comes), never slept for.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.raw import RawClient

FETCH, ACK = 78, 79
ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share-fetch"), "--set", "group.share.record.lock.duration.ms=1000",
                      "--set", "group.share.delivery.count.limit=3", "--set", "group.share.max.share.sessions=50").start()
    yield b
    b.stop()


def _topic(b, name: str, n: int) -> uuid.UUID:
    raw = RawClient(b.bootstrap)
    raw.request(19, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
                        "timeout": 10000})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(name, b"v%d" % i)
        p.flush(10)  # one batch per record
    meta = raw.request(3, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
    raw.close()
    return meta.topics[0].topic_id


def _set_reset_earliest(b, group: str, tid: uuid.UUID | None = None) -> None:
    """``share.auto.offset.reset=earliest`` for the group, and its share state initialized (start offset -1),
    as the group coordinator initializes it when it first assigns the partition."""
    raw = RawClient(b.bootstrap)
    if tid is not None:
        init = raw.request(83, 0, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [{"partition": 0, "state_epoch": 0,
                                                                                                    "start_offset": -1}]}]})
        assert init.results[0].partitions[0].error_code == ErrorCode.none
    resp = raw.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
    raw.close()
    assert resp.responses[0].error_code == ErrorCode.none, resp


def fetch(raw, group, member, epoch, tid, *, acks=None, max_wait=0, max_records=500, forget=(), version=1):
    parts = [{"partition_index": 0, "acknowledgement_batches": [
        {"first_offset": f, "last_offset": la, "acknowledge_types": list(t)} for f, la, t in (acks or [])]}] if tid else []
    return raw.request(FETCH, version, {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": max_wait,
                                        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": 500,
                                        "topics": [{"topic_id": tid, "partitions": parts}] if tid else [],
                                        "forgotten_topics_data": [{"topic_id": t, "partitions": [0]} for t in forget]})


def ack(raw, group, member, epoch, tid, batches, version=1):
    return raw.request(ACK, version, {"group_id": group, "member_id": member, "share_session_epoch": epoch, "topics": [
        {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": la, "acknowledge_types": list(t)} for f, la, t in batches]}]}]})


def acquired(resp):
    return [(a.first_offset, a.last_offset, a.delivery_count) for t in resp.responses for p in t.partitions for a in p.acquired_records]


def test_fetch_acknowledge_and_redeliver(broker):
    tid = _topic(broker, "sf1", 5)
    _set_reset_earliest(broker, "g1", tid)
    raw = RawClient(broker.bootstrap)
    r = fetch(raw, "g1", "m1", 0, tid)
    assert r.error_code == ErrorCode.none and r.acquisition_lock_timeout.total_seconds() == 1
    assert acquired(r) == [(0, 4, 1)]
    [part] = r.responses[0].partitions
    assert part.records is not None and len(part.records) > 0
    # a second member sees nothing: everything is acquired
    raw2 = RawClient(broker.bootstrap)
    assert acquired(fetch(raw2, "g1", "m2", 0, tid)) == []
    # accept 0-1, release 2, reject 3, keep 4 (a ShareAcknowledge: a ShareFetch would acquire 2 again for m1)
    a = ack(raw, "g1", "m1", 1, tid, [(0, 1, [ACCEPT]), (2, 3, [RELEASE, REJECT])])
    assert a.responses[0].partitions[0].error_code == ErrorCode.none
    got = acquired(fetch(raw2, "g1", "m2", 1, tid, max_wait=5000))
    assert got[0] == (2, 2, 2)  # redelivered after the RELEASE, delivery count 2
    # offset 4's lock (1 s) runs out: redelivered with count 2 to whoever fetches
    epoch = 2
    while (4, 4, 2) not in got:
        got = acquired(fetch(raw2, "g1", "m2", epoch, tid, max_wait=10000))
        epoch += 1
        assert epoch < 10
    # m1's late acknowledgement of 4 is refused
    a = ack(raw, "g1", "m1", 2, tid, [(4, 4, [ACCEPT])])
    assert a.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
    assert ack(raw2, "g1", "m2", epoch, tid, [(2, 2, [ACCEPT]), (4, 4, [ACCEPT])]).responses[0].partitions[0].error_code == ErrorCode.none
    # closing the sessions
    assert fetch(raw2, "g1", "m2", -1, None).error_code == ErrorCode.none
    assert fetch(raw2, "g1", "m2", -1, None).error_code == ErrorCode.share_session_not_found


def test_uninitialized_share_partition_delivers_nothing(broker):
    """Until the group coordinator initializes a share partition's state, Kafka 4.4 delivers nothing from it
    and refuses acknowledgements (tests/conformance/scenarios/sharestate.py compares this with Kafka)."""
    tid = _topic(broker, "sf0", 2)
    raw = RawClient(broker.bootstrap)
    r = fetch(raw, "g0", "m", 0, tid, max_wait=100)
    assert r.error_code == ErrorCode.none and r.responses == ()
    a = ack(raw, "g0", "m", 1, tid, [(0, 0, [ACCEPT])])
    assert a.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
    _set_reset_earliest(broker, "g0", tid)
    assert acquired(fetch(raw, "g0", "m", 2, tid, max_wait=5000)) == [(0, 1, 1)]


def test_poison_record_archived_after_delivery_limit(broker):
    tid = _topic(broker, "sf2", 1)
    _set_reset_earliest(broker, "g2", tid)
    raw = RawClient(broker.bootstrap)
    epoch = 0
    for delivery in (1, 2, 3):
        r = fetch(raw, "g2", "m", epoch, tid, max_wait=5000)
        assert acquired(r) == [(0, 0, delivery)]
        epoch += 1
        assert ack(raw, "g2", "m", epoch, tid, [(0, 0, [RELEASE])]).responses[0].partitions[0].error_code == ErrorCode.none
        epoch += 1
    # the third release reached the limit (3): archived, never delivered again
    assert acquired(fetch(raw, "g2", "m", epoch, tid, max_wait=200)) == []


def test_session_rules(broker):
    tid = _topic(broker, "sf3", 2)
    raw = RawClient(broker.bootstrap)
    assert fetch(raw, "g3", "m", 5, tid).error_code == ErrorCode.share_session_not_found
    assert fetch(raw, "g3", "m", 0, tid, acks=[(0, 0, [ACCEPT])]).error_code == ErrorCode.invalid_request
    assert fetch(raw, "g3", "m", 0, tid).error_code == ErrorCode.none
    assert fetch(raw, "g3", "m", 2, tid).error_code == ErrorCode.invalid_share_session_epoch
    assert fetch(raw, "g3", "m", 1, tid).error_code == ErrorCode.none
    assert ack(raw, "g3", "m", 0, tid, []).error_code == ErrorCode.invalid_share_session_epoch
    assert fetch(raw, "g3", "", 0, tid).error_code == ErrorCode.invalid_request
    assert fetch(raw, "g3", "x" * 37, 0, tid).error_code == ErrorCode.invalid_request
    assert fetch(raw, "", "m", 0, tid).error_code == ErrorCode.none  # an empty group id is served, as by Kafka 4.4
    # an unknown topic id is a partition error
    r = fetch(raw, "g3", "m", 2, uuid.uuid4())
    assert [p.error_code for t in r.responses for p in t.partitions] == [ErrorCode.unknown_topic_id]


def test_bad_acknowledgements(broker):
    tid = _topic(broker, "sf4", 6)
    _set_reset_earliest(broker, "g4", tid)
    raw = RawClient(broker.bootstrap)
    assert acquired(fetch(raw, "g4", "m", 0, tid)) == [(0, 5, 1)]
    epoch = 1
    for batches in ([(3, 1, [ACCEPT])],  # reversed
                    [(0, 3, [ACCEPT]), (2, 4, [ACCEPT])],  # overlapping
                    [(0, 2, [ACCEPT, ACCEPT])],  # types of the wrong length
                    [(0, 0, [])],  # no types
                    [(0, 0, [9])],  # unknown type
                    [(0, 0, [4])]):  # RENEW without is_renew_ack
        a = ack(raw, "g4", "m", epoch, tid, batches)
        epoch += 1
        assert a.responses[0].partitions[0].error_code == ErrorCode.invalid_request, batches
    # outside what was acquired: past it INVALID_REQUEST, before it INVALID_RECORD_STATE (Kafka 4.4)
    for batches, code in (([(0, 2**62, [ACCEPT])], ErrorCode.invalid_request), ([(100, 200, [ACCEPT])], ErrorCode.invalid_request),
                          ([(-(2**62), 0, [ACCEPT])], ErrorCode.invalid_record_state)):
        a = ack(raw, "g4", "m", epoch, tid, batches)
        epoch += 1
        assert a.responses[0].partitions[0].error_code == code, batches
    # nothing changed: all six still acquired by m, acknowledged now in one go
    assert ack(raw, "g4", "m", epoch, tid, [(0, 5, [ACCEPT])]).responses[0].partitions[0].error_code == ErrorCode.none


def test_many_sessions_are_bounded(broker):
    tid = _topic(broker, "sf5", 1)
    _set_reset_earliest(broker, "g5", tid)
    raw = RawClient(broker.bootstrap)
    codes = [fetch(raw, "g5", f"m{i}", 0, tid).error_code for i in range(80)]
    # at most 50 sessions (group.share.max.share.sessions); the rest are refused, and the broker stays up
    assert codes.count(ErrorCode.share_session_limit_reached) >= 30
    raw.close()  # the connection's sessions end with it
    raw = RawClient(broker.bootstrap)
    ok = None
    for _ in range(50):  # the broker handles the hang-up asynchronously: retry until it did
        ok = fetch(raw, "g5", "again", 0, tid).error_code
        if ok == ErrorCode.none:
            break
    assert ok == ErrorCode.none


def test_share_group_offsets_admin(broker):
    tid = _topic(broker, "sf6", 10)
    _set_reset_earliest(broker, "g6", tid)
    raw = RawClient(broker.bootstrap)
    assert acquired(fetch(raw, "g6", "m", 0, tid, max_records=4)) == [(0, 3, 1)]
    assert ack(raw, "g6", "m", 1, tid, [(0, 3, [ACCEPT])]).responses[0].partitions[0].error_code == ErrorCode.none
    d = raw.request(90, 1, {"groups": [{"group_id": "g6", "topics": None}]})
    [g] = d.groups
    [t] = g.topics
    [p] = t.partitions
    # the persisted start offset lags one write behind, as Kafka 4.4 writes it; the lag counts what is complete
    assert (t.topic_name, t.topic_id, p.start_offset, p.lag) == ("sf6", tid, 0, 6)
    d = raw.request(90, 0, {"groups": [{"group_id": "g6", "topics": [{"topic_name": "nope", "partitions": [0]}]}]})
    assert d.groups[0].topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    alter = {"group_id": "g6", "topics": [{"topic_name": "sf6", "partitions": [{"partition_index": 0, "start_offset": 8}]}]}
    assert raw.request(91, 0, alter).error_code == ErrorCode.non_empty_group  # m's session is open
    assert fetch(raw, "g6", "m", -1, None).error_code == ErrorCode.none
    a = raw.request(91, 0, alter)
    assert a.error_code == ErrorCode.none and a.responses[0].partitions[0].error_code == ErrorCode.none
    assert acquired(fetch(raw, "g6", "m", 0, tid)) == [(8, 9, 1)]
    assert fetch(raw, "g6", "m", -1, None).error_code == ErrorCode.none
    _topic(broker, "sf6-none", 1)  # a topic the group holds no offsets of
    r = raw.request(92, 0, {"group_id": "g6", "topics": [{"topic_name": "sf6"}, {"topic_name": "sf6-none"}]})
    assert [x.error_code for x in r.responses] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    assert r.responses[1].error_message == "There is no offset information to delete."
    d = raw.request(90, 1, {"groups": [{"group_id": "g6", "topics": [{"topic_name": "sf6", "partitions": [0]}]}]})
    assert d.groups[0].topics[0].partitions[0].start_offset == -1
    assert raw.request(92, 0, {"group_id": "nobody", "topics": []}).error_code == ErrorCode.group_id_not_found


def test_acknowledged_records_survive_kill_9(tmp_path):
    """What a ShareAcknowledge answered is in __share_group_state before the answer: after SIGKILL and a
    restart, acknowledged records are not delivered again, archived ones neither, and the released one and
    the one still locked at the kill come back, with the delivery count the state last recorded."""
    b = BrokerProcess(tmp_path, "--set", "group.share.delivery.count.limit=3").start()
    try:
        tid = _topic(b, "k9s", 6)
        _set_reset_earliest(b, "gk", tid)
        raw = RawClient(b.bootstrap)
        assert acquired(fetch(raw, "gk", "m", 0, tid)) == [(0, 5, 1)]
        a = ack(raw, "gk", "m", 1, tid, [(0, 4, [ACCEPT, RELEASE, ACCEPT, REJECT, ACCEPT])])
        assert a.responses[0].partitions[0].error_code == ErrorCode.none
        b.kill()
        b.start()
        raw = RawClient(b.bootstrap)
        got = []
        for epoch in range(20):  # the share coordinator loads in the background after the start
            got = acquired(fetch(raw, "gk", "m2", 0 if epoch == 0 else epoch, tid, max_wait=500))
            if got:
                break
        # offset 1 was released (delivery count 1 recorded), offset 5 was still acquired at the kill (never
        # recorded as delivered): both come back; 0, 2, 3 (archived) and 4 do not
        assert got == [(1, 1, 2), (5, 5, 1)]
    finally:
        b.stop()


def test_read_committed_skips_aborted_and_open_transactions(broker):
    """share.isolation.level=read_committed: aborted records are never acquired, and nothing past the
    last stable offset (an open transaction) is; read_uncommitted gets them all."""
    from confluent_kafka import Producer as TxnProducer

    tid = _topic(broker, "sf7", 0)
    for group, level in (("g7c", "read_committed"), ("g7u", "read_uncommitted")):
        _set_reset_earliest(broker, group, tid)
        raw = RawClient(broker.bootstrap)
        r = raw.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.isolation.level", "config_operation": 0, "value": level}]}], "validate_only": False})
        assert r.responses[0].error_code == ErrorCode.none
    p = TxnProducer({"bootstrap.servers": broker.bootstrap, "transactional.id": "sf7-txn"})
    p.init_transactions(30)
    for value, commit in ((b"c1", True), (b"a1", False), (b"c2", True)):
        p.begin_transaction()
        p.produce("sf7", value)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    p.begin_transaction()
    p.produce("sf7", b"open")
    p.flush(10)
    # offsets: c1 0, marker 1, a1 2, marker 3, c2 4, marker 5, open 6
    raw = RawClient(broker.bootstrap)
    assert acquired(fetch(raw, "g7c", "m", 0, tid, max_wait=2000)) == [(0, 0, 1), (4, 4, 1)]
    assert acquired(fetch(raw, "g7u", "m", 0, tid, max_wait=2000)) == [(0, 0, 1), (2, 2, 1), (4, 4, 1), (6, 6, 1)]
    p.commit_transaction(30)
    assert acquired(fetch(raw, "g7c", "m", 1, tid, max_wait=5000)) == [(6, 6, 1)]


def test_auto_offset_reset_latest_and_by_duration(broker):
    """share.auto.offset.reset: latest (the default) starts at the log end; by_duration:PT1H at the first
    record less than an hour old (here: every record)."""
    tid = _topic(broker, "sf8", 3)
    raw = RawClient(broker.bootstrap)
    for group in ("g8l", "g8d"):
        init = raw.request(83, 0, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
            {"partition": 0, "state_epoch": 0, "start_offset": -1}]}]})
        assert init.results[0].partitions[0].error_code == ErrorCode.none
    r = raw.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": "g8d", "configs": [
        {"name": "share.auto.offset.reset", "config_operation": 0, "value": "by_duration:PT1H"}]}], "validate_only": False})
    assert r.responses[0].error_code == ErrorCode.none
    assert acquired(fetch(raw, "g8d", "m", 0, tid, max_wait=2000)) == [(0, 2, 1)]
    assert acquired(fetch(raw, "g8l", "m", 0, tid, max_wait=100)) == []
    _produce_one(broker, "sf8", b"new")
    assert acquired(fetch(raw, "g8l", "m", 1, tid, max_wait=5000)) == [(3, 3, 1)]


def _produce_one(b, topic: str, value: bytes) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    p.produce(topic, value)
    assert p.flush(10) == 0


def test_sessions_hold_only_existing_partitions(broker):
    """A session keeps only partitions that exist (bounded by the cluster's size): 5,000 made-up ones are
    answered with their error once and not kept; the answer does not wait for max_wait on an error."""
    tid = _topic(broker, "sf9", 1)
    raw = RawClient(broker.bootstrap)
    topics = [{"topic_id": tid, "partitions": [{"partition_index": p, "acknowledgement_batches": []} for p in range(5000)]},
              {"topic_id": uuid.uuid4(), "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
    body = {"group_id": "g9", "member_id": "m", "share_session_epoch": 0, "max_wait": 30000, "min_bytes": 1, "max_bytes": 1 << 20,
            "max_records": 10, "batch_size": 10, "topics": topics, "forgotten_topics_data": []}
    r = raw.request(FETCH, 1, body)
    errors = sorted((p.error_code, p.partition_index) for t in r.responses for p in t.partitions)
    assert len(errors) == 5000 and errors[0] == (ErrorCode.unknown_topic_or_partition, 1) and errors[-1][0] == ErrorCode.unknown_topic_id
    r = fetch(raw, "g9", "m", 1, None, max_wait=100)  # the session holds partition 0 only: nothing to say
    assert r.error_code == ErrorCode.none and r.responses == ()


def test_hostile_frames(broker):
    """ShareFetch and ShareAcknowledge frames whose counts lie (huge, negative as varints): refused by the
    codec before any handler runs (the broker process fails the module if a handler raised), and the
    broker keeps serving."""
    import struct

    from protocol.codec import encode
    from kio.schema.request_header.v2.header import RequestHeader

    def uvarint(v: int) -> bytes:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)

    def cstr(s: str) -> bytes:
        return uvarint(len(s) + 1) + s.encode()

    for api, head in ((FETCH, cstr("g") + cstr("m") + struct.pack(">iiiiii", 0, 0, 1, 1024, 10, 10)),
                      (ACK, cstr("g") + cstr("m") + struct.pack(">i", 1))):
        for count in (0xFFFFFFF, 2**31 + 5, 3):  # far more topics than bytes, a negative int32, 2 missing topics
            raw = RawClient(broker.bootstrap)
            header = encode(RequestHeader(request_api_key=api, request_api_version=1, correlation_id=1, client_id="hostile"))
            raw.send_frame(header + head + uvarint(count) + b"\x00" * 4)
            raw.sock.settimeout(10)
            frame = raw.read_frame()  # an answer (an error) or a closed connection, never a hang
            assert frame is None or len(frame) > 4
            raw.close()
    raw = RawClient(broker.bootstrap)
    assert fetch(raw, "gh", "m", 0, None).error_code == ErrorCode.none
