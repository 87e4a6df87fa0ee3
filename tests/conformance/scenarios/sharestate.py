"""The share coordinator's RPCs (83-87), FindCoordinator SHARE keys, and share sessions without a heartbeat."""

from __future__ import annotations

import base64
import uuid

from ..driver import Driver
from ..registry import scenario

INIT, READ, WRITE, DELETE, SUMMARY, FETCH, ACK = 83, 84, 85, 86, 87, 78, 79


def _key(d: Driver, group: str, topic_label: str, partition: int) -> str:
    raw = base64.urlsafe_b64encode(d.topic_id(topic_label).bytes).rstrip(b"=").decode()
    return f"{group}:{raw}:{partition}"


def _parts(resp) -> list:
    return [{"partition": p.partition, "error": p.error_code, "message": p.error_message,
             **{k: getattr(p, k) for k in ("state_epoch", "start_offset", "leader_epoch", "delivery_complete_count") if hasattr(p, k)},
             **({"batches": [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]}
                if hasattr(p, "state_batches") else {})}
            for r in resp.results for p in r.partitions]


def _one(d: Driver, api: int, version: int, group: str, tid, partition: dict) -> list:
    return _parts(d.req(api, version, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [partition]}]}))


def _write(d, g, tid, batches, *, partition=0, state_epoch=0, leader_epoch=0, start_offset=-1):
    return _one(d, WRITE, 1, g, tid, {"partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
                                      "start_offset": start_offset, "delivery_complete_count": -1,
                                      "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
                                                        for f, la, s, c in batches]})


def _coordinator(d: Driver, keys: list[str], group: str, tid) -> None:
    """Wait until the share coordinator is found and its partition takes requests (Kafka loads it after FindCoordinator)."""
    def found():
        r = d.req(10, 6, {"key_type": 2, "coordinator_keys": keys})
        return r if all(c.error_code == 0 for c in r.coordinators) else None

    def active():
        r = d.req(SUMMARY, 1, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
        return all(p.error_code not in (14, 15, 16) for x in r.results for p in x.partitions)

    d.until(found, what="share coordinator")
    d.until(active, what="share coordinator loaded")


@scenario("sharestate")
def find_coordinator_share_keys(d: Driver):
    """FindCoordinator key type SHARE: well-formed share-partition keys and malformed ones, v6 and v5."""
    d.create_topic("t", 1)
    good = _key(d, d.group(), "t", 0)
    r = d.req(10, 6, {"key_type": 2, "coordinator_keys": ["no-colons", "g:notauuid:0", good.rsplit(":", 1)[0] + ":x"]})
    d.obs("malformed", out=[(c.error_code, c.node_id) for c in r.coordinators])
    d.obs("v5", out=[c.error_code for c in d.req(10, 5, {"key_type": 2, "coordinator_keys": [good]}).coordinators])


@scenario("sharestate")
def state_life_cycle(d: Driver):
    """Initialize, write (updates merging batches), read, summary, epochs fencing, delete."""
    d.create_topic("t", 2)
    tid, g = d.topic_id("t"), d.group()
    _coordinator(d, [_key(d, g, "t", 0)], g, tid)
    d.obs("write-uninit", out=_write(d, g, tid, []))
    d.obs("read-uninit", out=_one(d, READ, 0, g, tid, {"partition": 0, "leader_epoch": 0}))
    d.obs("summary-uninit", out=_one(d, SUMMARY, 1, g, tid, {"partition": 0, "leader_epoch": 0}))
    d.obs("init", out=_one(d, INIT, 0, g, tid, {"partition": 0, "state_epoch": 0, "start_offset": 5}))
    d.obs("write", out=_write(d, g, tid, [(5, 9, 0, 1), (7, 8, 2, 1)], start_offset=5))
    d.obs("read", out=_one(d, READ, 0, g, tid, {"partition": 0, "leader_epoch": 0}))
    d.obs("write2", out=_write(d, g, tid, [(9, 9, 4, 5)], start_offset=8))
    d.obs("read2", out=_one(d, READ, 0, g, tid, {"partition": 0, "leader_epoch": 0}))
    d.obs("summary", out=_one(d, SUMMARY, 1, g, tid, {"partition": 0, "leader_epoch": 0}))
    d.obs("summary-v0", out=_one(d, SUMMARY, 0, g, tid, {"partition": 0, "leader_epoch": 0}))
    d.obs("read-newer-leader", out=_one(d, READ, 0, g, tid, {"partition": 0, "leader_epoch": 3}))
    d.obs("write-old-leader", out=_write(d, g, tid, [], leader_epoch=2))
    d.obs("init-epoch1", out=_one(d, INIT, 0, g, tid, {"partition": 0, "state_epoch": 1, "start_offset": 20}))
    d.obs("write-old-state", out=_write(d, g, tid, [], state_epoch=0, leader_epoch=3))
    d.obs("init-old-state", out=_one(d, INIT, 0, g, tid, {"partition": 0, "state_epoch": 0, "start_offset": 1}))
    d.obs("read3", out=_one(d, READ, 0, g, tid, {"partition": 0, "leader_epoch": 3}))
    d.obs("delete", out=_one(d, DELETE, 0, g, tid, {"partition": 0}))
    d.obs("summary-deleted", out=_one(d, SUMMARY, 1, g, tid, {"partition": 0, "leader_epoch": 0}))
    d.obs("delete-again", out=_one(d, DELETE, 0, g, tid, {"partition": 0}))


@scenario("sharestate")
def bad_input(d: Driver):
    """Negative and unknown partitions, an unknown topic id, negative epochs, an empty group id, no topics."""
    d.create_topic("t", 1)
    tid, g = d.topic_id("t"), d.group()
    _coordinator(d, [_key(d, g, "t", 0)], g, tid)
    d.obs("neg-partition", out=_one(d, INIT, 0, g, tid, {"partition": -1, "state_epoch": 0, "start_offset": 0}))
    d.obs("unknown-partition", out=_one(d, INIT, 0, g, tid, {"partition": 1, "state_epoch": 0, "start_offset": 0}))
    d.obs("unknown-topic", out=_one(d, INIT, 0, g, uuid.UUID(int=12345), {"partition": 0, "state_epoch": 0, "start_offset": 0}))
    d.obs("neg-state-epoch", out=_one(d, INIT, 0, g, tid, {"partition": 0, "state_epoch": -3, "start_offset": 0}))
    d.obs("init", out=_one(d, INIT, 0, g, tid, {"partition": 0, "state_epoch": 0, "start_offset": 0}))
    d.obs("neg-leader-epoch", out=_write(d, g, tid, [], leader_epoch=-1))
    d.obs("read-neg-leader-epoch", out=_one(d, READ, 0, g, tid, {"partition": 0, "leader_epoch": -1}))
    d.obs("delete-neg", out=_one(d, DELETE, 0, g, tid, {"partition": -2}))
    d.obs("empty-group", out=_parts(d.req(INIT, 0, {"group_id": "", "topics": [{"topic_id": tid, "partitions": [{"partition": 0}]}]})))
    d.obs("no-topics", out=_parts(d.req(READ, 0, {"group_id": g, "topics": []})))
    d.obs("no-partitions", out=_parts(d.req(DELETE, 0, {"group_id": g, "topics": [{"topic_id": tid, "partitions": []}]})))


def _fetch(d: Driver, g: str, member: str, epoch: int, tid, acks=(), version: int = 1):
    parts = [{"partition_index": 0, "acknowledgement_batches": [
        {"first_offset": f, "last_offset": la, "acknowledge_types": list(t)} for f, la, t in acks]}] if tid is not None else []
    r = d.req(FETCH, version, {"group_id": g, "member_id": member, "share_session_epoch": epoch, "max_wait": 0, "min_bytes": 1,
                               "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
                               "topics": [{"topic_id": tid, "partitions": parts}] if tid is not None else [], "forgotten_topics_data": []})
    return {"error": r.error_code, "message": r.error_message}


@scenario("sharestate")
def share_session_errors(d: Driver):
    """ShareFetch and ShareAcknowledge session and request errors (no share group membership involved)."""
    d.create_topic("t", 1)
    tid, g = d.topic_id("t"), d.group()
    d.obs("no-session", out=_fetch(d, g, "member-1", 4, tid))
    d.obs("final-no-session", out=_fetch(d, g, "member-1", -1, None))
    d.obs("initial-with-acks", out=_fetch(d, g, "member-1", 0, tid, acks=[(0, 0, [1])]))
    d.obs("empty-member", out=_fetch(d, g, "", 0, tid))
    d.obs("long-member", out=_fetch(d, g, "x" * 37, 0, tid))
    d.obs("empty-group", out=_fetch(d, "", "member-1", 0, tid))
    ack = d.req(ACK, 1, {"group_id": g, "member_id": "member-1", "share_session_epoch": 0, "topics": []})
    d.obs("ack-epoch0", out=(ack.error_code, ack.error_message))
    ack = d.req(ACK, 1, {"group_id": g, "member_id": "member-1", "share_session_epoch": 3, "topics": []})
    d.obs("ack-no-session", out=(ack.error_code, ack.error_message))


@scenario("sharestate")
def share_fetch_initialized(d: Driver):
    """ShareFetch from a member the group never heard of (no ShareGroupHeartbeat), on a share partition whose
    state was initialized as the group coordinator initializes it (start offset -1, share.auto.offset.reset
    earliest): acquisition, acknowledgement types, redelivery counts, the state summary, DescribeShareGroupOffsets.
    (Before that initialization Kafka 4.4 answers such a fetch with nothing or with UNKNOWN_SERVER_ERROR,
    depending on timing: not compared.)"""
    import time as _time

    from protocol.records import Record, build_batch

    from ..steps import produce

    t = d.create_topic("t", 1)
    tid, g = d.topic_id("t"), d.group()
    _coordinator(d, [_key(d, g, "t", 0)], g, tid)
    now = int(_time.time() * 1000)
    for i in range(5):
        produce(d, t, 0, build_batch([Record(offset=0, timestamp=now, key=None, value=b"v%d" % i)]))
    r = d.req(44, 1, {"resources": [{"resource_type": 32, "resource_name": g, "configs": [
        {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
    d.obs("config", out=[x.error_code for x in r.responses])
    d.obs("init", out=_one(d, INIT, 0, g, tid, {"partition": 0, "state_epoch": 0, "start_offset": -1}))
    body = {"group_id": g, "member_id": "member-1", "share_session_epoch": 0, "max_wait": 2000, "min_bytes": 1, "max_bytes": 1 << 20,
            "max_records": 10, "batch_size": 10, "forgotten_topics_data": []}

    def fetched(epoch: int, acks=()):
        parts = [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": la, "acknowledge_types": list(ty)} for f, la, ty in acks]}]
        r = d.req(FETCH, 1, {**body, "share_session_epoch": epoch, "topics": [{"topic_id": tid, "partitions": parts}]})
        return {"error": r.error_code, "lock": r.acquisition_lock_timeout, "parts": [
            (p.partition_index, p.error_code, p.acknowledge_error_code, [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records])
            for x in r.responses for p in x.partitions]}

    d.obs("fetch", out=fetched(0))
    d.obs("ack-and-fetch", out=fetched(1, acks=[(0, 1, [1]), (2, 2, [2]), (3, 4, [1, 3])]))
    d.obs("summary", out=_parts(d.req(SUMMARY, 1, {"group_id": g, "topics": [{"topic_id": tid, "partitions": [
        {"partition": 0, "leader_epoch": 0}]}]})))
    r = d.req(90, 1, {"groups": [{"group_id": g, "topics": [{"topic_name": t, "partitions": [0]}]}]})
    d.obs("describe-offsets", out=[(x.error_code, [[(p.partition_index, p.start_offset, p.lag, p.error_code) for p in tt.partitions]
                                                   for tt in x.topics]) for x in r.groups])
    a = d.req(ACK, 1, {"group_id": g, "member_id": "member-1", "share_session_epoch": 2, "topics": [{"topic_id": tid, "partitions": [
        {"partition_index": 0, "acknowledgement_batches": [{"first_offset": 2, "last_offset": 2, "acknowledge_types": [1]},
                                                           {"first_offset": 7, "last_offset": 7, "acknowledge_types": [1]}]}]}]})
    d.obs("ack-outside", error=a.error_code, parts=[(p.partition_index, p.error_code, p.error_message) for x in a.responses for p in x.partitions])
