"""AlterConfigs, IncrementalAlterConfigs, DescribeConfigs (groups), DeleteRecords, DescribeLogDirs
and ElectLeaders in in-process brokers: validation, persistence across restarts, the coordinator
using a group's overrides, and the ACL checks Kafka makes.

Requests are built by kio and every answer is built and encoded at its version (``ask``).
"""

from __future__ import annotations

import asyncio
import errno
import time

import pytest

from broker.coordinator.common import GroupConfig
from broker.dynamic_config import ConfigError, check_group_configs
from broker.security.authorizer import CLASS_NAME, Operation as Op, ResourceType as RT
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from tests.unit.test_acl_handlers import allow, ask

TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def run(coro):
    return asyncio.run(coro)


def _incremental(rtype: int, name: str, ops: list[tuple[str, str | None, int]], validate_only: bool = False) -> dict:
    configs = [{"name": n, "value": v, "config_operation": op} for n, v, op in ops]
    return {"resources": [{"resource_type": rtype, "resource_name": name, "configs": configs}], "validate_only": validate_only}


def _legacy(rtype: int, name: str, values: dict[str, str | None]) -> dict:
    return {"resources": [{"resource_type": rtype, "resource_name": name, "configs": [{"name": n, "value": v} for n, v in values.items()]}],
            "validate_only": False}


def _describe(rtype: int, name: str) -> dict:
    return {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": None}], "include_synonyms": True}


def _codes(answer: dict) -> list:
    return [(r["error_code"], r["error_message"]) for r in answer["responses"]]


def _values(answer: dict) -> dict:
    [result] = answer["results"]
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


def _batch(n: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(offset=i, timestamp=now, key=b"k", value=b"v") for i in range(n)])


# ------------------------------------------------------------------ group config validation


def test_group_config_validation_follows_kafka():
    cfg = GroupConfig()
    check_group_configs({"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}, cfg)
    check_group_configs({"share.auto.offset.reset": "earliest", "streams.num.standby.replicas": "2"}, cfg)
    cases = {
        "Unknown group config name: nope": {"nope": "1"},
        "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms": {"consumer.session.timeout.ms": "44999"},
        "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms": {"consumer.session.timeout.ms": "60001"},
        "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms": {"consumer.heartbeat.interval.ms": "15001"},
        "Invalid value 0 for configuration consumer.heartbeat.interval.ms: Value must be at least 1": {"consumer.heartbeat.interval.ms": "0"},
        "Invalid value x for configuration share.session.timeout.ms: Not a number of type INT": {"share.session.timeout.ms": "x"},
        "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas": {"streams.num.standby.replicas": "3"},
    }
    for message, props in cases.items():
        with pytest.raises(ConfigError) as info:
            check_group_configs(props, cfg)
        assert (info.value.code, info.value.message) == (ErrorCode.invalid_config, message)


def test_group_overrides_are_read_per_group():
    overrides: dict = {}
    cfg = GroupConfig(group_consumer_session_timeout_ms=45_000, group_consumer_heartbeat_interval_ms=5_000, group_overrides=overrides)
    assert cfg.consumer_session_timeout_ms("g") == 45_000
    overrides["g"] = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "7000"}
    assert (cfg.consumer_session_timeout_ms("g"), cfg.consumer_heartbeat_interval_ms("g")) == (50_000, 7_000)
    assert cfg.consumer_heartbeat_interval_ms("other") == 5_000


# ------------------------------------------------------------------ alter: checks and edits


def test_alter_checks_in_kafkas_order():
    async def go():
        from broker.testing import Broker

        async with Broker() as b:
            await b.create_topic("t", 1)
            s = b.server
            out = {}
            out["dup-resource"] = _codes(await ask(s, 44, 1, {"resources": _incremental(TOPIC, "t", [("retention.ms", "1", SET)])["resources"] * 2, "validate_only": False}))
            out["dup-key"] = _codes(await ask(s, 44, 1, _incremental(TOPIC, "t", [("retention.ms", "1", SET), ("retention.ms", "2", SET)])))
            out["null"] = _codes(await ask(s, 33, 2, _legacy(TOPIC, "t", {"retention.ms": None})))
            out["bad-op"] = _codes(await ask(s, 44, 1, _incremental(TOPIC, "t", [("retention.ms", "1", 9)])))
            out["append-long"] = _codes(await ask(s, 44, 1, _incremental(TOPIC, "t", [("retention.ms", "1", APPEND)])))
            out["missing"] = _codes(await ask(s, 44, 1, _incremental(TOPIC, "nope", [("retention.ms", "1", SET)])))
            out["default-topic"] = _codes(await ask(s, 44, 1, _incremental(TOPIC, "", [("retention.ms", "1", SET)])))
            out["other-broker"] = _codes(await ask(s, 44, 1, _incremental(BROKER, "7", [("log.retention.ms", "1", SET)])))
            out["static-broker"] = _codes(await ask(s, 44, 1, _incremental(BROKER, "", [("num.partitions", "3", SET)])))
            out["logger"] = _codes(await ask(s, 33, 2, _legacy(8, "1", {"root": "DEBUG"})))
            out["unknown-type"] = _codes(await ask(s, 44, 1, _incremental(99, "x", [("a", "1", SET)])))
            return out

    out = run(go())
    assert out["dup-resource"] == [(ErrorCode.invalid_request, "Each resource must appear at most once.")] * 2
    assert out["dup-key"] == [(ErrorCode.invalid_request, "Error due to duplicate config keys")]
    assert out["null"] == [(ErrorCode.invalid_request, "Null value not supported for : retention.ms")]
    assert out["bad-op"][0][0] == ErrorCode.invalid_request
    assert out["append-long"] == [(ErrorCode.invalid_config, "Can't APPEND to key retention.ms because its type is not LIST.")]
    assert out["missing"] == [(ErrorCode.unknown_topic_or_partition, "The topic 'nope' does not exist.")]
    assert out["default-topic"] == [(ErrorCode.invalid_request, "Default topic resources are not allowed.")]
    assert out["other-broker"] == [(ErrorCode.invalid_request, "Unexpected broker id, expected 1, but received 7")]
    assert out["static-broker"] == [(ErrorCode.invalid_request, "Cannot update these configs dynamically: [num.partitions]")]
    assert out["logger"] == [(ErrorCode.invalid_request, "Unknown resource type 8")]
    assert out["unknown-type"] == [(ErrorCode.invalid_request, "Unknown resource type 99")]


def test_configs_that_could_not_be_stored_are_not_in_effect():
    """meta.json cannot be written (a full disk): the answer is KAFKA_STORAGE_ERROR and the values are as
    before, on the topic's log too (tests/integration/test_disk_full.py on a real full file system)."""

    async def go():
        from broker.testing import Broker

        async with Broker() as b:
            await b.create_topic("t", 1)
            s = b.server
            await ask(s, 44, 1, _incremental(TOPIC, "t", [("retention.ms", "600000", SET)]))
            saved = s.cluster._save

            def full(*args, **kwargs):
                raise OSError(errno.ENOSPC, "No space left on device")

            s.cluster._save = full
            both = {"resources": [
                _incremental(TOPIC, "t", [("retention.ms", "100000", SET), ("segment.ms", "70000", SET)])["resources"][0],
                _incremental(GROUP, "g", [("consumer.session.timeout.ms", "50000", SET)])["resources"][0],
                _incremental(BROKER, "", [("log.retention.ms", "123456", SET)])["resources"][0]], "validate_only": False}
            refused = [r["error_code"] for r in (await ask(s, 44, 1, both))["responses"]]
            after = {"topic": _values(await ask(s, 32, 4, _describe(TOPIC, "t"))), "group": dict(s.cluster.group_configs),
                     "broker": dict(s.cluster.broker_configs), "log_retention": s.cluster.topics["t"].partitions[0].log.config.retention_ms}
            s.cluster._save = saved
            again = [r["error_code"] for r in (await ask(s, 44, 1, both))["responses"]]
            return refused, after, again, _values(await ask(s, 32, 4, _describe(TOPIC, "t")))

    refused, after, again, stored = run(go())
    assert refused == [ErrorCode.kafka_storage_error] * 3
    assert after["topic"]["retention.ms"][0] == "600000" and after["topic"]["segment.ms"][0] != "70000"
    assert after["log_retention"] == 600000 and after["group"] == {} and after["broker"] == {}
    assert again == [ErrorCode.none] * 3 and stored["retention.ms"][0] == "100000" and stored["segment.ms"][0] == "70000"


def test_configs_survive_a_restart_and_apply_to_the_logs(tmp_path):
    async def go():
        from broker.testing import Broker

        async with Broker(data_dir=tmp_path) as b:
            await b.create_topic("t", 2)
            s = b.server
            assert _codes(await ask(s, 44, 1, _incremental(TOPIC, "t", [("cleanup.policy", "compact", APPEND), ("max.message.bytes", "5000", SET)]))) == [(0, None)]
            assert _codes(await ask(s, 44, 1, _incremental(GROUP, "g", [("consumer.heartbeat.interval.ms", "7000", SET)]))) == [(0, None)]
            assert _codes(await ask(s, 44, 1, _incremental(BROKER, "", [("log.segment.bytes", "2000000", SET), ("custom.plugin.setting", "x", SET)]))) == [(0, None)]
            # validate_only: checked, not kept
            assert _codes(await ask(s, 44, 1, _incremental(TOPIC, "t", [("retention.ms", "1000", SET)], validate_only=True))) == [(0, None)]
            plog = s.cluster.topics["t"].partitions[1].log
            live = (plog.config.cleanup_policy, plog.config.max_message_bytes, plog.config.segment_bytes)
        async with Broker(data_dir=tmp_path) as b:
            s = b.server
            topic = _values(await ask(s, 32, 4, _describe(TOPIC, "t")))
            group = _values(await ask(s, 32, 4, _describe(GROUP, "g")))
            broker = _values(await ask(s, 32, 4, _describe(BROKER, "1")))
            plog = s.cluster.topics["t"].partitions[0].log
            reloaded = (plog.config.cleanup_policy, plog.config.max_message_bytes, plog.config.segment_bytes)
            # the coordinator hands out the group's interval
            hb = await ask(s, 68, 0, {"group_id": "g", "member_id": "m-1-xxxxxxxxxxxxxxxxxx", "member_epoch": 0, "rebalance_timeout": 30_000,
                                      "subscribed_topic_names": ["t"], "topic_partitions": []})
            return live, reloaded, topic, group, broker, hb

    live, reloaded, topic, group, broker, hb = run(go())
    assert live == reloaded == ("compact,delete", 5000, 2_000_000)
    assert topic["cleanup.policy"] == ("delete,compact", 1) and topic["max.message.bytes"] == ("5000", 1)
    assert topic["segment.bytes"] == ("2000000", 3) and topic["retention.ms"][1] == 5
    assert group["consumer.heartbeat.interval.ms"] == ("7000", 8) and group["consumer.session.timeout.ms"] == ("45000", 5)
    assert broker["log.segment.bytes"] == ("2000000", 3) and broker["custom.plugin.setting"] == ("x", 3)
    assert hb["error_code"] == ErrorCode.none and int(hb["heartbeat_interval"]) == 7000


def test_legacy_alter_replaces_and_max_message_bytes_applies_at_once():
    async def go():
        from broker.testing import Broker

        async with Broker() as b:
            await b.create_topic("t", 1)
            s = b.server
            await ask(s, 33, 2, _legacy(TOPIC, "t", {"retention.ms": "1000", "max.message.bytes": "100"}))
            produced = await ask(s, 0, 9, {"acks": -1, "timeout": 5000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": _batch(5)}]}]})
            await ask(s, 33, 2, _legacy(TOPIC, "t", {"segment.ms": "100000"}))
            return produced, s.cluster.topics["t"].overrides

    produced, overrides = run(go())
    assert produced["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.message_too_large
    assert overrides == {"segment.ms": "100000"}


# ------------------------------------------------------------------ DeleteRecords


def test_delete_records_persists_and_bounds(tmp_path):
    async def go():
        from broker.testing import Broker

        async with Broker(data_dir=tmp_path) as b:
            await b.create_topic("t", 1)
            s = b.server
            await ask(s, 0, 9, {"acks": -1, "timeout": 5000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": _batch(10)}]}]})

            def body(offset, topic="t", partition=0):
                return {"topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}], "timeout": 1000}

            out = {}
            for key, req in {"to-4": body(4), "back": body(2), "past-hw": body(11), "minus-2": body(-2), "no-partition": body(0, partition=3),
                             "no-topic": body(0, topic="nope"), "internal": body(0, topic="__consumer_offsets")}.items():
                r = (await ask(s, 21, 2, req))["topics"][0]["partitions"][0]
                out[key] = (r["error_code"], r["low_watermark"])
        async with Broker(data_dir=tmp_path) as b:
            plog = b.server.cluster.topics["t"].partitions[0].log
            out["restart"] = plog.log_start_offset
            r = (await ask(b.server, 21, 2, body(-1)))["topics"][0]["partitions"][0]
            out["hw"] = (r["error_code"], r["low_watermark"])
        return out

    out = run(go())
    assert out["to-4"] == (0, 4) and out["back"] == (0, 4) and out["restart"] == 4 and out["hw"] == (0, 10)
    assert out["past-hw"] == out["minus-2"] == (ErrorCode.offset_out_of_range, -1)
    assert out["no-partition"] == out["no-topic"] == (ErrorCode.unknown_topic_or_partition, -1)
    assert out["internal"] == (ErrorCode.invalid_topic_exception, -1)


# ------------------------------------------------------------------ ACLs


def test_acl_checks():
    async def go():
        from broker.testing import Broker

        b = Broker(settings={"authorizer.class.name": CLASS_NAME, "super.users": "User:admin"})
        await b.start()
        try:
            await b.create_topic("mine", 1)
            await b.create_topic("theirs", 1)
            await b.server.acls.create([allow("mine", Op.ALTER_CONFIGS), allow("mine", Op.DELETE), allow("mine", Op.DESCRIBE_CONFIGS),
                                        allow("g", Op.DESCRIBE_CONFIGS, RT.GROUP)])
            s = b.server
            out = {}
            out["alter"] = [r["error_code"] for r in (await ask(s, 44, 1, {"resources": [
                _incremental(TOPIC, n, [("retention.ms", "100000", SET)])["resources"][0] for n in ("mine", "theirs")] + [
                _incremental(GROUP, "g", [("consumer.session.timeout.ms", "50000", SET)])["resources"][0],
                _incremental(BROKER, "", [("log.retention.ms", "100000", SET)])["resources"][0]], "validate_only": False}))["responses"]]
            out["delete"] = [p["error_code"] for t in (await ask(s, 21, 2, {"topics": [
                {"name": n, "partitions": [{"partition_index": 0, "offset": 0}]} for n in ("mine", "theirs")], "timeout": 1000}))["topics"] for p in t["partitions"]]
            out["describe"] = {(r["resource_name"], r["error_code"]) for r in (await ask(s, 32, 4, {"resources": [
                {"resource_type": GROUP, "resource_name": g, "configuration_keys": None} for g in ("g", "h")]}))["results"]}
            out["log_dirs"] = (await ask(s, 35, 4, {"topics": None}))["error_code"]
            out["elect"] = (await ask(s, 43, 2, {"election_type": 0, "topic_partitions": [{"topic": "mine", "partitions": [0]}], "timeout": 1000}))
            out["admin_log_dirs"] = (await ask(s, 35, 4, {"topics": None}, principal="User:admin"))["results"][0]["topics"]
            return out
        finally:
            await b.close()

    out = run(go())
    assert out["alter"] == [ErrorCode.none, ErrorCode.topic_authorization_failed, ErrorCode.group_authorization_failed, ErrorCode.cluster_authorization_failed]
    assert out["delete"] == [ErrorCode.none, ErrorCode.topic_authorization_failed]
    assert out["describe"] == {("g", ErrorCode.none), ("h", ErrorCode.group_authorization_failed)}
    assert out["log_dirs"] == ErrorCode.cluster_authorization_failed
    assert out["elect"]["error_code"] == ErrorCode.cluster_authorization_failed
    assert out["elect"]["replica_election_results"][0]["partition_result"][0]["error_code"] == ErrorCode.cluster_authorization_failed
    assert {t["name"] for t in out["admin_log_dirs"]} >= {"mine", "theirs"}


def test_elect_leaders_and_log_dirs_without_acls():
    async def go():
        from broker.testing import Broker

        async with Broker() as b:
            await b.create_topic("t", 2)
            s = b.server
            named = await ask(s, 43, 2, {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [1, 5]}, {"topic": "nope", "partitions": [0]}], "timeout": 1000})
            every = await ask(s, 43, 2, {"election_type": 1, "topic_partitions": None, "timeout": 1000})
            bad = await ask(s, 43, 2, {"election_type": 7, "topic_partitions": [{"topic": "t", "partitions": [0]}], "timeout": 1000})
            dirs = await ask(s, 35, 4, {"topics": [{"topic": "t", "partitions": [1, 9]}, {"topic": "nope", "partitions": [0]}]})
            return named, every, bad, dirs

    named, every, bad, dirs = run(go())
    assert [(t["topic"], [(p["partition_id"], p["error_code"], p["error_message"]) for p in t["partition_result"]]) for t in named["replica_election_results"]] == [
        ("t", [(1, ErrorCode.election_not_needed, "Leader election not needed for topic partition."),
               (5, ErrorCode.unknown_topic_or_partition, "No such partition as t-5")]),
        ("nope", [(0, ErrorCode.unknown_topic_or_partition, "No such topic as nope")]),
    ]
    # every topic, Kafka's internal ones too (not kafkalite's own __kafkalite_*), none needing an election
    assert sorted((t["topic"], t["partition_result"]) for t in every["replica_election_results"]) == [("__consumer_offsets", []), ("t", [])]
    assert bad["error_code"] == ErrorCode.invalid_request
    [result] = dirs["results"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in result["topics"]] == [("t", [1])]


def test_authorized_operations_are_filled_without_an_authorizer():
    async def go():
        from broker.testing import Broker

        async with Broker(settings={"group.initial.rebalance.delay.ms": 0}) as b:
            await b.create_topic("t", 1)
            s = b.server
            md = await ask(s, 3, 12, {"topics": [{"name": "t", "topic_id": None}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": True})
            join = {"group_id": "cg", "session_timeout": 10_000, "rebalance_timeout": 10_000, "member_id": "", "group_instance_id": None,
                    "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}], "reason": None}
            first = await ask(s, 11, 9, join)
            await ask(s, 11, 9, {**join, "member_id": first["member_id"]})
            dg = await ask(s, 15, 5, {"groups": ["cg"], "include_authorized_operations": True})
            return md["topics"][0]["topic_authorized_operations"], dg["groups"][0]["authorized_operations"]

    topic_ops, group_ops = run(go())
    assert topic_ops == sum(1 << op for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
    assert group_ops == sum(1 << op for op in (Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))



def test_altered_cleanup_policy_and_retention_drive_maintenance():
    """cleanup.policy switched to compact makes the next maintenance pass compact the log; retention.ms
    set low makes it delete old segments (Kafka's log.retention.check.interval.ms aside)."""
    async def go():
        from broker.testing import Broker

        async with Broker() as b:
            s = b.server
            await b.create_topic("t", 1, {"segment.bytes": "200"})
            body = {"acks": -1, "timeout": 5000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": _batch(3)}]}]}
            for _ in range(6):
                await ask(s, 0, 9, body)
            plog = s.cluster.topics["t"].partitions[0].log
            before = plog.size_bytes
            ops = [("cleanup.policy", "compact", SET), ("min.cleanable.dirty.ratio", "0.01", SET)]
            assert _codes(await ask(s, 44, 1, _incremental(TOPIC, "t", ops))) == [(0, None)]
            s.cluster.logs.run_maintenance_once()
            compacted = plog.size_bytes
            ops = [("cleanup.policy", "delete", SET), ("retention.ms", "1", SET)]
            assert _codes(await ask(s, 44, 1, _incremental(TOPIC, "t", ops))) == [(0, None)]
            s.cluster.logs.run_maintenance_once(now_ms=int(time.time() * 1000) + 60_000)
            return before, compacted, plog.log_start_offset, plog.log_end_offset

    before, compacted, start, end = run(go())
    assert compacted < before  # the same key over and over: compaction keeps the last ones
    assert start == end == 18  # retention deleted every segment, the active one too (rolled)
