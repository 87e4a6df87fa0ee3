"""The data plane and the front door: Produce, Fetch, ListOffsets, Metadata, CreateTopics, ApiVersions, unsupported versions."""

from __future__ import annotations

import datetime
import struct
import uuid

from ..driver import Closed, Conn, Driver, legacy_message_set, record_batch
from ..registry import scenario
from ..steps import (
    API_VERSIONS,
    CREATE_TOPICS,
    FETCH,
    METADATA,
    list_offsets,
    list_offsets_summary,
    produce,
    produce_summary,
)

TRACKED_APIS = (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 21, 33, 35, 42, 43, 44, 45, 46, 47, 68, 69)


def count_records(records: bytes | None) -> list[int]:
    """[base offset, record count] of each batch in a fetched record set."""
    out, pos, buf = [], 0, bytes(records or b"")
    while pos + 61 <= len(buf):
        base, length = struct.unpack_from(">qi", buf, pos)
        count = struct.unpack_from(">i", buf, pos + 57)[0]
        out.append([base, count])
        pos += 12 + length
    return out


def fetch_v12(d: Driver, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, max_bytes: int = 1 << 20) -> dict:
    r = d.req(FETCH, 12, {
        "replica_id": -1, "max_wait": datetime.timedelta(milliseconds=max_wait_ms), "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes,
                                                    "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return _fetch_summary(d, r)


def _fetch_summary(d: Driver, r) -> dict:
    parts = []
    for t in r.responses:
        for p in t.partitions:
            parts.append({"topic": d.strip(t.topic) if isinstance(t.topic, str) else None, "partition": p.partition_index,
                          "error": d.norm(p.error_code), "hwm": p.high_watermark, "lso": p.last_stable_offset,
                          "log_start": p.log_start_offset, "batches": count_records(p.records)})
    return {"error": d.norm(r.error_code), "partitions": parts}


def _produce_some(d: Driver, t: str, batches: list[int], partition: int = 0, **kw) -> list:
    out = []
    for n in batches:
        out.append(produce_summary(d, produce(d, t, partition, record_batch([b"v%d" % i for i in range(n)], **kw))))
    return out


# -- ApiVersions and unsupported versions ------------------------------------------------------


@scenario("data")
def api_versions_ranges(d: Driver):
    """ApiVersions v3: the advertised version ranges of the APIs kafkalite implements."""
    r = d.req(API_VERSIONS, 3, {"client_software_name": "conformance", "client_software_version": "1"})
    keys = {k.api_key: [k.min_version, k.max_version] for k in r.api_keys}
    d.obs("ranges", error=r.error_code, apis={str(k): keys.get(k) for k in TRACKED_APIS})


@scenario("data")
def api_versions_unsupported_version(d: Driver):
    """ApiVersions at an unknown version: UNSUPPORTED_VERSION in a v0 answer that still lists ApiVersions' range."""
    c = d.conn()
    c.send_raw(API_VERSIONS, 127, b"\x00\x00\x00", flexible_header=True)
    frame = c.recv_frame()
    if frame is None:
        d.obs("answer", closed=True)
        return
    from protocol.codec import decode, response_class

    body, _ = decode(response_class(18, 0), frame, 4)
    own = [[k.min_version, k.max_version] for k in body.api_keys if k.api_key == 18]
    d.obs("answer", closed=False, error=body.error_code, api_versions_range=own)


@scenario("data")
def api_versions_v0(d: Driver):
    """ApiVersions v0 answers NONE."""
    r = d.req(API_VERSIONS, 0, {})
    d.obs("v0", error=r.error_code, has_produce=any(k.api_key == 0 for k in r.api_keys))


@scenario("data")
def unknown_api_key_closes(d: Driver):
    """A request with an API key the broker does not know: the connection is closed."""
    c = d.conn()
    c.send_raw(999, 0, b"")
    d.obs("answer", closed=c.recv_frame() is None)


@scenario("data")
def pipelined_requests_before_a_bad_frame(d: Driver):
    """Requests sent back to back, then a frame the broker cannot use (an unknown API key, a body
    that does not decode, a negative size), then one more: which are answered before the close."""
    from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

    from protocol.codec import build, encode, request_class

    def framed(payload: bytes) -> bytes:
        return struct.pack(">i", len(payload)) + payload

    bad_frames = {
        "unknown-api": framed(struct.pack(">hhih", 999, 0, 9, 0)),
        "malformed-body": framed(struct.pack(">hhih", METADATA, 12, 9, 0) + b"\x00\xff\xff\xff\xff"),
        "negative-size": struct.pack(">i", -1) + b"abcd",
    }
    good = []
    for corr, (key, version, body) in enumerate([
            (API_VERSIONS, 3, {"client_software_name": "conformance", "client_software_version": "1"}),
            (METADATA, 12, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})], start=1):
        header = HeaderV2(request_api_key=key, request_api_version=version, correlation_id=corr, client_id="conformance")
        good.append(framed(encode(header) + encode(build(request_class(key, version), body))))
    for label, bad in bad_frames.items():
        c = d.fresh(label)
        c.sock.sendall(b"".join(good) + bad + good[0])
        answered = []
        while c.ready(20) and (frame := c._read_frame()) is not None:
            answered.append(struct.unpack_from(">i", frame)[0])
        d.obs(label, answered=answered)


@scenario("data")
def removed_versions_close(d: Driver):
    """Versions removed in Kafka 4.0 (KIP-896) or never defined: the connection is closed, per API."""
    cases = [("offset-commit-v1", 8, 1), ("offset-fetch-v0", 9, 0), ("produce-v2", 0, 2), ("fetch-v3", 1, 3),
             ("list-offsets-v0", 2, 0), ("metadata-v0", 3, 0), ("heartbeat-v5", 12, 5), ("sync-group-v6", 14, 6),
             ("leave-group-v6", 13, 6), ("describe-groups-v7", 15, 7), ("list-groups-v6", 16, 6), ("consumer-group-heartbeat-v2", 68, 2)]
    for label, key, version in cases:
        c = d.fresh(label)
        c.send_raw(key, version, b"\x00" * 16)
        frame = c.recv_frame()
        d.obs(label, closed=frame is None)


# -- Metadata and CreateTopics ------------------------------------------------------------------


@scenario("data")
def metadata_unknown_topic(d: Driver):
    """Metadata for an unknown topic without auto-creation: UNKNOWN_TOPIC_OR_PARTITION, not created."""
    name = d.topic("none")
    for _ in range(2):
        r = d.req(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
        d.obs("metadata", error=r.topics[0].error_code, partitions=len(r.topics[0].partitions), name=r.topics[0].name)


@scenario("data")
def metadata_auto_create(d: Driver):
    """Metadata with auto-creation creates the topic (1 partition); the first answer may still lack a leader."""
    name = d.topic("auto")
    first = d.req(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": True})
    d.obs("first", error=first.topics[0].error_code)
    t = d.until(lambda: (lambda x: x if x.error_code == 0 and x.partitions else None)(
        d.req(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": True}).topics[0]), what="auto-created topic")
    d.obs("later", error=t.error_code, partitions=len(t.partitions), leader_epoch=t.partitions[0].leader_epoch)


@scenario("data")
def metadata_invalid_topic_name(d: Driver):
    """Metadata for an invalid topic name: INVALID_TOPIC_EXCEPTION (with and without auto-creation)."""
    for allow in (False, True):
        r = d.req(METADATA, 12, {"topics": [{"name": "bad name!"}], "allow_auto_topic_creation": allow})
        d.obs(f"allow-{allow}", error=r.topics[0].error_code)


@scenario("data")
def metadata_topic_id(d: Driver):
    """Metadata v12 reports a non-zero topic id and a leader for each partition."""
    t = d.create_topic("t", 3)
    r = d.req(METADATA, 12, {"topics": [{"name": t}], "allow_auto_topic_creation": False}).topics[0]
    d.obs("metadata", error=r.error_code, topic_id=r.topic_id, partitions=sorted(p.partition_index for p in r.partitions),
          internal=r.is_internal, replicas=sorted(len(p.replica_nodes) for p in r.partitions))


@scenario("data")
def create_topics_errors(d: Driver):
    """CreateTopics: an existing topic, zero partitions, too many replicas, a bad name, validate-only."""
    t = d.create_topic("t", 1)
    body = {"topics": [
        {"name": t, "num_partitions": 1, "replication_factor": 1},
        {"name": d.topic("zero"), "num_partitions": 0, "replication_factor": 1},
        {"name": d.topic("rf3"), "num_partitions": 1, "replication_factor": 3},
        {"name": "bad name!", "num_partitions": 1, "replication_factor": 1},
        {"name": d.topic("defaults"), "num_partitions": -1, "replication_factor": -1},
    ], "timeout": datetime.timedelta(seconds=30), "validate_only": False}
    r = d.req(CREATE_TOPICS, 7, body)
    d.obs("create", results=sorted([d.strip(x.name), d.norm(x.error_code), x.num_partitions if x.error_code == 0 else None] for x in r.topics))
    v = d.req(CREATE_TOPICS, 7, {"topics": [{"name": d.topic("vo"), "num_partitions": 2, "replication_factor": 1}],
                                  "timeout": datetime.timedelta(seconds=30), "validate_only": True})
    d.obs("validate-only", error=v.topics[0].error_code, partitions=v.topics[0].num_partitions)
    m = d.req(METADATA, 12, {"topics": [{"name": d.topic("vo")}], "allow_auto_topic_creation": False})
    d.obs("not-created", error=m.topics[0].error_code)


# -- Produce ------------------------------------------------------------------------------------


@scenario("data")
def produce_offsets(d: Driver):
    """Produced batches get consecutive base offsets (v3, v8, v9); log start stays 0."""
    t = d.create_topic("t", 1)
    for v in (3, 8, 9):
        d.obs(f"v{v}", out=produce_summary(d, produce(d, t, 0, record_batch([b"a", b"b", b"c"]), version=v)))


@scenario("data")
def produce_unknown_topic(d: Driver):
    """Produce to a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION, and it is not created."""
    name = d.topic("none")
    d.obs("produce", out=produce_summary(d, produce(d, name, 0, record_batch([b"x"]))))
    r = d.req(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    d.obs("metadata", error=r.topics[0].error_code)


@scenario("data")
def produce_unknown_partition(d: Driver):
    """Produce to a partition the topic does not have: UNKNOWN_TOPIC_OR_PARTITION."""
    t = d.create_topic("t", 1)
    d.obs("produce", out=produce_summary(d, produce(d, t, 3, record_batch([b"x"]))))


@scenario("data")
def produce_invalid_acks(d: Driver):
    """Produce with acks=2: INVALID_REQUIRED_ACKS."""
    t = d.create_topic("t", 1)
    d.obs("produce", out=produce_summary(d, produce(d, t, 0, record_batch([b"x"]), acks=2)))


@scenario("data")
def produce_acks_zero(d: Driver):
    """Produce with acks=0 gets no answer; the records are appended (the next request is answered normally)."""
    t = d.create_topic("t", 1)
    produce(d, t, 0, record_batch([b"a", b"b"]), acks=0)
    d.obs("acks1", out=produce_summary(d, produce(d, t, 0, record_batch([b"c"]), acks=1)))


@scenario("data")
def produce_corrupt_crc(d: Driver):
    """A batch whose CRC does not match: CORRUPT_MESSAGE; nothing is appended."""
    t = d.create_topic("t", 1)
    d.obs("produce", out=produce_summary(d, produce(d, t, 0, record_batch([b"x"], corrupt_crc=True))))
    d.obs("latest", out=list_offsets_summary(d, list_offsets(d, t, {0: -1})))


@scenario("data")
def produce_legacy_message_format(d: Driver):
    """A magic-1 message set: rejected by Kafka 4 (message format v0/v1 removed)."""
    t = d.create_topic("t", 1)
    d.obs("produce", out=produce_summary(d, produce(d, t, 0, legacy_message_set([b"x"]))))
    d.obs("latest", out=list_offsets_summary(d, list_offsets(d, t, {0: -1})))


@scenario("data")
def produce_empty_records(d: Driver):
    """Produce with an empty record set (null records are not tried: Kafka 4.1 never answers them)."""
    t = d.create_topic("t", 1)
    d.obs("empty", out=produce_summary(d, produce(d, t, 0, b"")))


@scenario("data")
def produce_idempotent_sequence(d: Driver):
    """Idempotent batches: a duplicate is acknowledged with the first offset, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER."""
    t = d.create_topic("t", 1)
    body = {"transactional_id": None, "transaction_timeout": datetime.timedelta(seconds=60), "producer_id": -1, "producer_epoch": -1}
    # Kafka may answer COORDINATOR_LOAD_IN_PROGRESS while its transaction coordinator starts: retry that out
    r = d.until(lambda: (lambda x: x if x.error_code != 14 else None)(d.req(22, 4, body)), what="InitProducerId")
    d.obs("init", error=r.error_code, epoch=r.producer_epoch)
    pid, epoch = r.producer_id, r.producer_epoch
    d.obs("seq0", out=produce_summary(d, produce(d, t, 0, record_batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0))))
    d.obs("dup", out=produce_summary(d, produce(d, t, 0, record_batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0))))
    d.obs("gap", out=produce_summary(d, produce(d, t, 0, record_batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=5))))
    d.obs("next", out=produce_summary(d, produce(d, t, 0, record_batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=2))))


# -- Fetch --------------------------------------------------------------------------------------


@scenario("data")
def fetch_from_start(d: Driver):
    """Fetch v12 from offset 0 returns the produced batches; high watermark, LSO and log start."""
    t = d.create_topic("t", 1)
    _produce_some(d, t, [2, 3])
    d.obs("fetch", **fetch_v12(d, t, 0, 0))
    d.obs("fetch-mid", **fetch_v12(d, t, 0, 2))


@scenario("data")
def fetch_out_of_range(d: Driver):
    """Fetch beyond the log end: OFFSET_OUT_OF_RANGE; at the log end: nothing, no error."""
    t = d.create_topic("t", 1)
    _produce_some(d, t, [2])
    d.obs("beyond", **fetch_v12(d, t, 0, 10))
    d.obs("at-end", **fetch_v12(d, t, 0, 2, max_wait_ms=100))
    d.obs("negative", **fetch_v12(d, t, 0, -5))


@scenario("data")
def fetch_unknown_topic(d: Driver):
    """Fetch v12 of an unknown topic / partition, and Fetch v13 of an unknown topic id."""
    t = d.create_topic("t", 1)
    d.obs("unknown-name", **fetch_v12(d, d.topic("none"), 0, 0))
    d.obs("unknown-partition", **fetch_v12(d, t, 4, 0))
    r = d.req(FETCH, 13, {
        "replica_id": -1, "max_wait": datetime.timedelta(0), "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                                              "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    d.obs("unknown-id", error=r.error_code, partitions=[[p.partition_index, d.norm(p.error_code)] for x in r.responses for p in x.partitions])


@scenario("data")
def fetch_small_max_bytes(d: Driver):
    """A partition_max_bytes smaller than the first batch still returns that whole batch."""
    t = d.create_topic("t", 1)
    _produce_some(d, t, [5, 5])
    d.obs("fetch", **fetch_v12(d, t, 0, 0, max_bytes=10))


# -- ListOffsets ----------------------------------------------------------------------------------


@scenario("data")
def list_offsets_empty_topic(d: Driver):
    """Earliest, latest and max-timestamp of an empty partition (v1, v7, v8)."""
    t = d.create_topic("t", 1)
    d.obs("v1", out=list_offsets_summary(d, list_offsets(d, t, {0: -2}, version=1)))
    d.obs("v7", out=list_offsets_summary(d, list_offsets(d, t, {0: -1}, version=7)))
    d.obs("v7-max", out=list_offsets_summary(d, list_offsets(d, t, {0: -3}, version=7), with_timestamp=True))


@scenario("data")
def list_offsets_after_produce(d: Driver):
    """Earliest / latest after producing; lookups by timestamp before, between and after the batches."""
    t = d.create_topic("t", 1)
    _produce_some(d, t, [2], base_ts=1_000_000)
    _produce_some(d, t, [3], base_ts=2_000_000)
    d.obs("earliest", out=list_offsets_summary(d, list_offsets(d, t, {0: -2})))
    d.obs("latest", out=list_offsets_summary(d, list_offsets(d, t, {0: -1})))
    for ts in (0, 1_500_000, 2_000_000, 9_000_000_000_000):
        d.obs(f"ts-{ts}", out=list_offsets_summary(d, list_offsets(d, t, {0: ts}), with_timestamp=True))
    d.obs("max-ts", out=list_offsets_summary(d, list_offsets(d, t, {0: -3}), with_timestamp=True))


@scenario("data")
def list_offsets_unknown(d: Driver):
    """ListOffsets for an unknown topic and an unknown partition: UNKNOWN_TOPIC_OR_PARTITION."""
    t = d.create_topic("t", 1)
    d.obs("topic", out=list_offsets_summary(d, list_offsets(d, d.topic("none"), {0: -1})))
    d.obs("partition", out=list_offsets_summary(d, list_offsets(d, t, {5: -1})))


@scenario("data")
def list_offsets_leader_epoch(d: Driver):
    """ListOffsets with a current leader epoch ahead of the broker's: UNKNOWN_LEADER_EPOCH."""
    t = d.create_topic("t", 1)
    d.obs("ahead", out=list_offsets_summary(d, list_offsets(d, t, {0: -1}, leader_epoch=1000)))
    d.obs("none", out=list_offsets_summary(d, list_offsets(d, t, {0: -1}, leader_epoch=-1)))


@scenario("data")
def list_offsets_read_committed(d: Driver):
    """ListOffsets latest with isolation READ_COMMITTED equals the LSO (no transactions: the high watermark)."""
    t = d.create_topic("t", 1)
    _produce_some(d, t, [4])
    d.obs("committed", out=list_offsets_summary(d, list_offsets(d, t, {0: -1}, isolation=1)))


@scenario("data")
def list_offsets_special_timestamps(d: Driver):
    """The special timestamps (-3 max, -4 earliest local, -5 latest tiered, -6 earliest pending upload, -7 none)
    at each version: one the version does not know yet is UNSUPPORTED_VERSION for its partition."""
    t = d.create_topic("t", 1)
    for version in (1, 4, 6, 7, 8, 9, 10):
        for ts in (-3, -4, -5, -6, -7):
            d.obs(f"v{version}{ts}", out=list_offsets_summary(d, list_offsets(d, t, {0: ts}, version=version)))


@scenario("data")
def list_offsets_v11(d: Driver):
    """ListOffsets v11 (Kafka 4.2+, KIP-1023: -6 earliest pending upload) with each special timestamp;
    a broker without v11 closes the connection."""
    t = d.create_topic("t", 1)
    _produce_some(d, t, [2])
    for ts in (-1, -2, -3, -4, -5, -6, -7):
        try:
            d.obs(f"ts{ts}", out=list_offsets_summary(d, list_offsets(d, t, {0: ts}, version=11)))
        except Closed:
            d.obs(f"ts{ts}", closed=True)
            return


def _unused() -> None:
    _ = Conn
