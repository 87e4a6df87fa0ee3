"""``build`` refuses names that no version of a message has (issue 11, item 6).

Handlers answer every version of a request with one dict, so a key of another
version of the same message is dropped; any other key is a typo or a stale
name, and the field it meant would silently go out as its zero value.

The last tests run every handler, at every version it serves, on one
representative request and build what it answers. The group handlers' answers
mostly reach the wire through ``protocol.fast`` (never through ``build``), so
those dicts are built here too, and their fast bytes compared with kio's.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace

import pytest
from kio.schema.fetch.v4.response import FetchResponse as FetchV4
from kio.schema.fetch.v12.response import PartitionData as PartitionDataV12
from kio.schema.fetch.v16.response import FetchResponse as FetchV16
from kio.schema.heartbeat.v0.response import HeartbeatResponse as HeartbeatV0

from broker.handlers import HANDLERS, RequestContext, supported_versions
from broker.handlers._config_entries import config_entry
from broker.handlers._configs import DEFAULT_CONFIG
from protocol.codec import UnknownFieldError, build, drop_unknown, encode, request_class, response_class
from protocol.connection import Request, ServerConnection
from protocol.errors import ErrorCode
from protocol.fast import ENCODERS as FAST_ENCODERS
from protocol.records import Record, build_batch

# ------------------------------------------------------------------ the rule


def _fetch(partition: dict) -> dict:
    return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [{"partition_index": 0}, partition]}]}


def test_unknown_top_level_key_raises_naming_class_key_and_known_names():
    with pytest.raises(UnknownFieldError) as info:
        build(response_class(12, 4), {"throttle_time": 0, "eror_code": 0})
    exc = info.value
    assert exc.cls is response_class(12, 4) and exc.key == "eror_code" and exc.path == ""
    assert exc.known == {"throttle_time", "error_code"}
    text = str(exc)
    assert "HeartbeatResponse" in text and "'eror_code'" in text and "error_code, throttle_time" in text


def test_unknown_key_in_an_array_element_raises_with_its_path():
    with pytest.raises(UnknownFieldError) as info:
        build(response_class(1, 12), _fetch({"partition_index": 1, "high_water_mark": 5}))
    exc = info.value
    assert exc.cls.__name__ == "PartitionData" and exc.key == "high_water_mark"
    assert str(exc).startswith("FetchResponse.responses[0].partitions[1]: unknown key 'high_water_mark' for PartitionData")
    assert "high_watermark" in exc.known


def test_unknown_key_in_a_single_nested_entity_raises_with_its_path():
    partition = {"partition_index": 1, "diverging_epoch": {"epoch": 1, "endoffset": 3}}
    with pytest.raises(UnknownFieldError, match=r"^FetchResponse\.responses\[0\]\.partitions\[1\]\.diverging_epoch: unknown key 'endoffset' for EpochEndOffset"):
        build(response_class(1, 12), _fetch(partition))


def test_keys_of_other_versions_are_accepted_and_dropped():
    # topic_id (v13+), node_endpoints (v16+), current_leader (v12+) in a Fetch v4
    body = _fetch({"partition_index": 1, "high_watermark": 7, "current_leader": {"leader_id": 1, "leader_epoch": 0}})
    body["responses"][0]["topic_id"] = uuid.uuid4()
    body["node_endpoints"] = [{"node_id": 1, "host": "h", "port": 1, "rack": None}]
    v4 = build(response_class(1, 4), body)
    assert isinstance(v4, FetchV4) and v4.responses[0].partitions[1].high_watermark == 7
    assert not hasattr(v4.responses[0], "topic_id") and not hasattr(v4, "node_endpoints")
    v16 = build(response_class(1, 16), body)
    assert isinstance(v16, FetchV16) and v16.node_endpoints[0].host == "h"
    # a nested entity's own names are its, not its parent's: "key" is a Coordinator field, not FindCoordinatorResponse's
    with pytest.raises(UnknownFieldError, match="'key'"):
        build(response_class(10, 3), {"key": "g", "error_code": 0, "node_id": 1, "host": "h", "port": 1})


def test_a_dataclass_of_another_class_is_checked_too():
    # another version of the same message: same names, converted
    hb = build(response_class(12, 4), HeartbeatV0(error_code=ErrorCode.none))
    assert hb.error_code == ErrorCode.none
    # the same class is taken as is
    part = build(PartitionDataV12, {"partition_index": 3})
    assert build(PartitionDataV12, part) is part
    # a class whose names the target lacks
    with pytest.raises(UnknownFieldError, match="'partition_index'"):
        build(response_class(12, 4), part)
    # nested: an entity of another message inside an array
    with pytest.raises(UnknownFieldError, match=r"^MetadataResponse\.topics\[0\]: unknown key 'partition_index' for MetadataResponseTopic"):
        build(response_class(3, 12), {"topics": [part]})


def test_the_known_names_of_a_class_span_every_version_of_its_message():
    from protocol.build import _build_plan

    known, plan = _build_plan(response_class(1, 4))
    assert {name for name, *_ in plan} < known
    assert {"node_endpoints", "responses", "session_id"} <= known
    # a class outside kio.schema knows only its own fields
    from dataclasses import make_dataclass

    from protocol.build import _known_names

    assert _known_names(make_dataclass("Local", ["a", "b"])) == {"a", "b"}


def test_a_misspelt_key_in_a_real_handler_shape_raises():
    # DescribeConfigs' config entry, as the handler makes it (CreateTopics reuses it)
    entry = config_entry("retention.ms", "1000", DEFAULT_CONFIG)
    result = {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t", "configs": [entry]}
    for version in range(1, 5):
        build(response_class(32, version), {"throttle_time": 0, "results": [result]})
    bad = {**entry, "is_sensitve": entry["is_sensitive"]}
    del bad["is_sensitive"]
    with pytest.raises(UnknownFieldError, match=r"^DescribeConfigsResponse\.results\[0\]\.configs\[0\]: unknown key 'is_sensitve'"):
        build(response_class(32, 4), {"throttle_time": 0, "results": [{**result, "configs": [bad]}]})


def test_drop_unknown_keeps_what_build_takes():
    body = {"error_code": 1, "error_message": "m", "node_id": -1, "throttle_time": 0, "responses": [{"topic": "t", "port": -1, "partitions": [{"partition_index": 0, "offset": -1}]}]}
    cls = response_class(1, 12)
    kept = drop_unknown(cls, body)
    assert kept == {"error_code": 1, "throttle_time": 0, "responses": [{"topic": "t", "partitions": [{"partition_index": 0}]}]}
    build(cls, kept)
    with pytest.raises(UnknownFieldError):
        build(cls, body)
    # only the names given are dropped: a misspelt one still fails
    generic = {"error_code", "error_message", "node_id", "port", "offset"}
    typo = {**body, "responses": [{**body["responses"][0], "partitons": []}]}
    kept = drop_unknown(cls, typo, generic)
    assert kept["responses"][0]["partitons"] == [] and "error_message" not in kept
    with pytest.raises(UnknownFieldError, match=r"^FetchResponse\.responses\[0\]: unknown key 'partitons'"):
        build(cls, kept)


# ------------------------------------------------------------------ every handler's answers


def _requests(topic: str, topic_id: uuid.UUID, group: str, version: int, batch: bytes) -> dict[int, dict]:
    """One representative request per API, as a dict of all versions' names (built per version)."""
    partitions = {"partition_index": 0}
    return {
        0: {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}]},
        1: {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
        },
        2: {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": ts, "current_leader_epoch": -1} for ts in (-1, -2)]}], "timeout": 1000},
        3: {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": True},
        9: {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}], "groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": [{"name": topic, "partition_indexes": [0]}]}]},
        10: {"key": group, "key_type": 0, "coordinator_keys": [group]},
        15: {"groups": [group], "include_authorized_operations": True},
        16: {"states_filter": [], "types_filter": []},
        18: {"client_software_name": "strict", "client_software_version": "1"},
        19: {"topics": [{"name": f"{topic}-new-{version}", "num_partitions": 2, "replication_factor": 1, "configs": [{"name": "retention.ms", "value": "1000"}]}], "timeout": 5000},
        20: {"topic_names": [f"{topic}-new-{version}"], "topics": [{"name": f"{topic}-new-{version}", "topic_id": None}], "timeout": 5000},
        22: {"transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1},
        24: {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
             "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
             "transactions": [{"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "verify_only": True, "topics": [{"name": topic, "partitions": [0]}]}]},
        61: {"topics": [{"name": topic, "partition_indexes": [0, 9]}]},
        65: {"transactional_ids": ["tx", "unknown"]},
        66: {"state_filters": ["Ongoing", "Nonsense"], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None},
        17: {"mechanism": "PLAIN"},  # on a connection that is not SASL: ILLEGAL_SASL_STATE
        36: {"auth_bytes": b"\0u\0p"},
        51: {"deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": [{"name": "u", "mechanism": 2, "iterations": 4096, "salt": b"s" * 16, "salted_password": b"p" * 64}]},
        50: {"users": [{"name": "u"}, {"name": "nobody"}]},
        **_acl_requests(topic, version),
        25: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "group_id": group},
        26: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "committed": True},
        28: {"transactional_id": "tx", "group_id": group, "producer_id": 1, "producer_epoch": 0, "generation_id": -1, "member_id": "", "group_instance_id": None,
             "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
        23: {"replica_id": -1, "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        32: {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}, {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
                           {"resource_type": 32, "resource_name": group, "configuration_keys": None}], "include_synonyms": True, "include_documentation": True},
        21: {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}, {"partition_index": 9, "offset": 0}]}], "timeout": 1000},
        33: {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [{"name": "retention.ms", "value": "604800000"}]},
                           {"resource_type": 32, "resource_name": group, "configs": [{"name": "nope", "value": "1"}]}], "validate_only": version % 2 == 1},
        44: {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [{"name": "cleanup.policy", "value": "delete", "config_operation": 2}]},
                           {"resource_type": 4, "resource_name": "", "configs": [{"name": "log.retention.ms", "value": None, "config_operation": 1}]}], "validate_only": False},
        35: {"topics": None if version % 2 else [{"topic": topic, "partitions": [0, 9]}]},
        43: {"election_type": 0, "topic_partitions": [{"topic": topic, "partitions": [0, 9]}, {"topic": "nope", "partitions": [0]}], "timeout": 1000},
        45: {"timeout": 1000, "allow_replication_factor_change": False, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": [1]}, {"partition_index": 1, "replicas": None}]}, {"name": "nope", "partitions": [partitions]}]},
        46: {"timeout": 1000, "topics": [{"name": topic, "partition_indexes": [0]}]},
        37: {"topics": [{"name": f"{topic}-grow", "count": 2 + version, "assignments": None}], "timeout": 5000},
        42: {"groups_names": [group]},
        47: {"group_id": group, "topics": [{"name": topic, "partitions": [partitions]}]},
        60: {"include_cluster_authorized_operations": True, "endpoint_type": 1},
        68: {"group_id": f"consumer-{version}", "member_id": uuid.uuid4().hex if version >= 1 else "", "member_epoch": 0, "rebalance_timeout": 30_000, "subscribed_topic_names": [topic], "topic_partitions": []},
        69: {"group_ids": [f"consumer-{version}"], "include_authorized_operations": True},
        76: {"group_id": f"share-{version}", "member_id": uuid.uuid4().hex[:22], "member_epoch": 0, "rack_id": None, "subscribed_topic_names": [topic]},
        77: {"group_ids": [f"share-{version}", "nope"], "include_authorized_operations": True},
        78: {"group_id": "share", "member_id": f"m-{version}", "share_session_epoch": 0, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
             "max_records": 10, "batch_size": 10, "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
             "forgotten_topics_data": []},
        79: {"group_id": "share", "member_id": f"m-{version}", "share_session_epoch": 1, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition_index": 0, "acknowledgement_batches": [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]},
        83: {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "state_epoch": 0, "start_offset": 0}]}]},
        84: {"group_id": group.replace("84", "83"), "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 1}]}]},
        85: {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0,
                                                                                 "state_batches": [{"first_offset": 0, "last_offset": 0, "delivery_state": 2, "delivery_count": 1}]}]}]},
        86: {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0}]}]},
        87: {"group_id": group.replace("87", "83"), "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        90: {"groups": [{"group_id": "g-83-0", "topics": None}, {"group_id": "g-83-0", "topics": [{"topic_name": topic, "partitions": [0, 5]}]}]},
        91: {"group_id": "alter", "topics": [{"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        92: {"group_id": "alter", "topics": [{"topic_name": topic}]},
    }


def _acl_requests(topic: str, version: int) -> dict[int, dict]:
    # the second DeleteAcls filter: a resource type Kafka has no name for, UNKNOWN to the handler (INVALID_REQUEST);
    # 0 itself would close the connection, as Kafka's parser does
    acl = {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    return {
        30: {"creations": [{"resource_type": 2, "resource_name": f"{topic}-{version}", "resource_pattern_type": 4, **acl}, {"resource_type": 2, "resource_name": "", "resource_pattern_type": 3, **acl}]},
        29: {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
        31: {"filters": [{"resource_type_filter": 2, "resource_name_filter": f"{topic}-{version}", "pattern_type_filter": 4, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
                         {"resource_type_filter": 99, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]},
    }


class _Asker:
    def __init__(self, server) -> None:
        from broker.logs import get_logger

        self.server = server
        self.log = get_logger("strict-test")
        self.answers: list[tuple[int, int, dict]] = []

    async def ask(self, api_key: int, version: int, body: dict) -> dict | None:
        req = build(request_class(api_key, version), body)
        conn = SimpleNamespace(peer="127.0.0.1:1", draining=False, sends_files=lambda: False, listener=None, log=self.log, identify=lambda software: None)
        ctx = RequestContext(self.server, conn, self.log, request=Request(api_key, version, 1, "strict", req, 0))
        answer = await asyncio.wait_for(HANDLERS[api_key].handle(ctx, req), 20)
        if answer is not None:
            self.answers.append((api_key, version, answer))
        return answer


def _check(api_key: int, version: int, answer: dict) -> None:
    """The answer builds and encodes; where a fast encoder takes it, its bytes are kio's."""
    entity = build(response_class(api_key, version), answer)
    kio = ServerConnection.encode_response(api_key, version, 7, entity)
    encode(entity)
    fast = FAST_ENCODERS.get((api_key, version))
    if fast is not None:
        assert fast(version, 7, answer) == kio, (api_key, version)


async def _classic_flow(asker: _Asker, topic: str, topic_id: uuid.UUID, version: int) -> None:
    """JoinGroup at ``version``, then SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, LeaveGroup: success answers."""
    group = f"classic-{version}"
    join = {"group_id": group, "session_timeout": 10_000, "rebalance_timeout": 10_000, "member_id": "", "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"\0\1"}], "reason": None}
    answer = await asker.ask(11, version, join)
    if answer["error_code"] == ErrorCode.member_id_required:
        answer = await asker.ask(11, version, {**join, "member_id": answer["member_id"]})
    assert answer["error_code"] == ErrorCode.none, answer
    member, generation = answer["member_id"], answer["generation_id"]
    assert answer["members"], answer
    sync = {"group_id": group, "generation_id": generation, "member_id": member, "protocol_type": "consumer", "protocol_name": "range", "assignments": [{"member_id": member, "assignment": b"\0\1\2"}]}
    sv, hv, cv, lv = min(version, 5), min(version, 4), 2 + version % 9, min(version, 5)
    answer = await asker.ask(14, sv, sync)
    assert answer["error_code"] == ErrorCode.none, answer
    answer = await asker.ask(12, hv, {"group_id": group, "generation_id": generation, "member_id": member})
    assert answer["error_code"] == ErrorCode.none, answer
    commit = {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member, "retention_time": -1, "topics": [{"name": topic, "topic_id": topic_id, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    answer = await asker.ask(8, cv, commit)
    assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.none, answer
    await asker.ask(9, 1 + version % 10, {"group_id": group, "topics": None, "groups": [{"group_id": group, "topics": None}]})
    await asker.ask(15, min(version, 6), {"groups": [group]})
    await asker.ask(13, lv, {"group_id": group, "member_id": member, "members": [{"member_id": member, "group_instance_id": None, "reason": "done"}]})
    await asker.ask(47, 0, {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]})
    await asker.ask(42, version % 3, {"groups_names": [group]})


async def _every_handler() -> list[tuple[int, int, dict]]:
    from broker.testing import Broker

    async with Broker(settings={"group.initial.rebalance.delay.ms": 0}) as b:
        topic = "strict"
        await b.create_topic(topic, 1)
        await b.create_topic(f"{topic}-grow", 2)
        asker = _Asker(b.server)
        topic_id = b.cluster.topics[topic].topic_id
        batch = build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=b"k", value=b"v")])
        for version in range(10):
            await _classic_flow(asker, topic, topic_id, version)
        for api_key, (lo, hi) in sorted(supported_versions().items()):
            for version in range(lo, hi + 1):
                body = _requests(topic, topic_id, f"g-{api_key}-{version}", version, batch).get(api_key)
                if body is not None:
                    await asker.ask(api_key, version, body)
        # ApiVersions' answer to a version it does not serve
        event = SimpleNamespace(api_key=18, api_version=99, correlation_id=1, client_id="strict")
        conn = SimpleNamespace(peer="127.0.0.1:1", draining=False, sends_files=lambda: False, listener=None, log=asker.log, identify=lambda software: None)
        version, body = HANDLERS[18].unsupported(RequestContext(b.server, conn, asker.log), event)
        asker.answers.append((18, version, body))
    # the ACL APIs with an authorizer (above they answer SECURITY_DISABLED): created, listed, deleted
    acl_settings = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users": "User:ANONYMOUS"}
    answers = asker.answers
    async with Broker(settings=acl_settings) as b:
        asker = _Asker(b.server)
        asker.answers = answers
        for version in range(1, 4):
            for api_key in (30, 29, 31):
                answer = await asker.ask(api_key, version, _acl_requests("strict", version)[api_key])
                if api_key == 29:
                    assert [r["resource_name"] for r in answer["resources"]] == [f"strict-{version}"], answer
                if api_key == 31:
                    assert [len(r["matching_acls"]) for r in answer["filter_results"]] == [1, 0], answer
        return asker.answers


@pytest.fixture(scope="module")
def answers():
    return asyncio.run(_every_handler())


def test_every_handler_answers_every_version_with_known_names_only(answers):
    problems = []
    for api_key, version, answer in answers:
        try:
            _check(api_key, version, answer)
        except Exception as exc:  # noqa: BLE001 - every failure is reported with its case
            problems.append(f"{HANDLERS[api_key].NAME} v{version}: {type(exc).__name__}: {exc}")
    assert problems == []
    asked = {(k, v) for k, v, _ in answers}
    missing = [(k, v) for k, (lo, hi) in supported_versions().items() for v in range(lo, hi + 1) if (k, v) not in asked]
    assert missing == []


def test_fast_encoded_answers_are_checked_too(answers):
    """Every (api, version) with a fast encoder had a real success answer built above."""
    fast_asked = {(k, v) for k, v, _ in answers if (k, v) in FAST_ENCODERS}
    assert fast_asked == set(FAST_ENCODERS)
    for api_key, version, answer in answers:
        if (api_key, version) in FAST_ENCODERS:
            # a misspelt key the fast encoder would never notice, build does
            bad = {**answer, "throttle_tme": 0}
            with pytest.raises(UnknownFieldError):
                build(response_class(api_key, version), bad)
