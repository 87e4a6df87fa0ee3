"""The admin APIs clients' own suites use: AlterConfigs, IncrementalAlterConfigs, DescribeConfigs
on groups, DeleteRecords, DescribeLogDirs and ElectLeaders, through real admin clients.

Every test runs against kafkalite and the reference Kafka (``group_broker``), so what it
asserts is what Kafka does.
"""

from __future__ import annotations

import time
import uuid
import warnings

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

SET, DELETE, APPEND, SUBTRACT = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(group_broker):
    return AdminClient({"bootstrap.servers": group_broker.bootstrap})


def _topic(admin, partitions: int = 1, configs: dict | None = None) -> str:
    name = _name("cfg")
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(30)
    return name


def _describe(admin, kind: str, name: str, until=None) -> dict:
    """The resource's entries; with ``until``, asked again until it holds for them (Kafka's brokers
    learn of a change from the controller a moment after AlterConfigs is answered)."""
    deadline = time.monotonic() + 30
    while True:
        [fut] = admin.describe_configs([ConfigResource(kind, name)]).values()
        entries = fut.result(30)
        if until is None or until(entries) or time.monotonic() > deadline:
            return entries


def _incremental(admin, kind: str, name: str, ops: list[tuple[str, str | None, AlterConfigOpType]], *, validate_only: bool = False):
    res = ConfigResource(kind, name, incremental_configs=[ConfigEntry(n, v, incremental_operation=op) for n, v, op in ops])
    [fut] = admin.incremental_alter_configs([res], validate_only=validate_only).values()
    return fut.result(30)


def _legacy(admin, kind: str, name: str, values: dict[str, str]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        [fut] = admin.alter_configs([ConfigResource(kind, name, set_config=values)]).values()
    return fut.result(30)


def _error(fn, *args, **kw) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        fn(*args, **kw)
    return info.value.args[0]


# ------------------------------------------------------------------ topics


def test_alter_configs_replaces_a_topics_values(admin):
    topic = _topic(admin, configs={"retention.ms": "100000"})
    _legacy(admin, "topic", topic, {"max.message.bytes": "2000", "segment.ms": "3600000"})
    entries = _describe(admin, "topic", topic, lambda e: e["max.message.bytes"].value == "2000")
    assert entries["max.message.bytes"].value == "2000" and entries["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["segment.ms"].value == "3600000"
    # the legacy API sets the whole set: retention.ms, not named, is back to the default
    assert entries["retention.ms"].value == "604800000" and entries["retention.ms"].is_default


def test_incremental_alter_configs_operations(admin):
    topic = _topic(admin)
    _incremental(admin, "topic", topic, [("retention.ms", "100000", SET), ("cleanup.policy", "compact", APPEND)])
    entries = _describe(admin, "topic", topic, lambda e: e["retention.ms"].value == "100000")
    assert entries["retention.ms"].value == "100000"
    assert set(entries["cleanup.policy"].value.split(",")) == {"compact", "delete"}
    _incremental(admin, "topic", topic, [("cleanup.policy", "delete", SUBTRACT), ("retention.ms", None, DELETE)])
    entries = _describe(admin, "topic", topic, lambda e: e["cleanup.policy"].value == "compact")
    assert entries["cleanup.policy"].value == "compact"
    assert entries["retention.ms"].value == "604800000" and entries["retention.ms"].is_default
    # APPEND to a setting that is not a list
    err = _error(_incremental, admin, "topic", topic, [("retention.ms", "5", APPEND)])
    assert err.code() == KafkaError.INVALID_CONFIG


def test_alter_configs_refusals(admin):
    topic = _topic(admin)
    err = _error(_incremental, admin, "topic", topic, [("no.such.config", "1", SET)])
    assert err.code() == KafkaError.INVALID_CONFIG and "no.such.config" in err.str()
    err = _error(_incremental, admin, "topic", topic, [("retention.ms", "soon", SET)])
    assert err.code() == KafkaError.INVALID_CONFIG
    err = _error(_incremental, admin, "topic", _name("missing"), [("retention.ms", "1000", SET)])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    err = _error(_legacy, admin, "topic", _name("missing"), {"retention.ms": "1000"})
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_validate_only_changes_nothing(admin):
    topic = _topic(admin)
    _incremental(admin, "topic", topic, [("retention.ms", "100000", SET)], validate_only=True)
    assert _describe(admin, "topic", topic)["retention.ms"].is_default
    err = _error(_incremental, admin, "topic", topic, [("retention.ms", "x", SET)], validate_only=True)
    assert err.code() == KafkaError.INVALID_CONFIG


def test_max_message_bytes_is_honoured_at_once(admin, group_broker):
    topic = _topic(admin)
    p = Producer({"bootstrap.servers": group_broker.bootstrap, "linger.ms": 0})
    results = []
    p.produce(topic, b"x" * 5000, callback=lambda err, msg: results.append(err))
    p.flush(30)
    assert results == [None]
    _incremental(admin, "topic", topic, [("max.message.bytes", "1000", SET)])
    _describe(admin, "topic", topic, lambda e: e["max.message.bytes"].value == "1000")
    p.produce(topic, b"x" * 5000, callback=lambda err, msg: results.append(err))
    p.flush(30)
    assert results[1] is not None and results[1].code() == KafkaError.MSG_SIZE_TOO_LARGE


# ------------------------------------------------------------------ groups


def test_group_configs(admin):
    group = _name("g")
    entries = _describe(admin, "group", group)
    assert entries["consumer.session.timeout.ms"].value == "45000"
    assert entries["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    _incremental(admin, "group", group, [("consumer.session.timeout.ms", "50000", SET), ("consumer.heartbeat.interval.ms", "6000", SET)])
    entries = _describe(admin, "group", group, lambda e: e["consumer.session.timeout.ms"].value == "50000")
    assert entries["consumer.session.timeout.ms"].value == "50000"
    assert entries["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert entries["consumer.heartbeat.interval.ms"].value == "6000"
    # below the broker's group.consumer.min.session.timeout.ms, an unknown name, a non-number
    for ops in ([("consumer.session.timeout.ms", "1000", SET)], [("consumer.no.such", "1", SET)], [("consumer.heartbeat.interval.ms", "often", SET)]):
        assert _error(_incremental, admin, "group", group, ops).code() == KafkaError.INVALID_CONFIG
    _incremental(admin, "group", group, [("consumer.session.timeout.ms", None, DELETE)])
    assert _describe(admin, "group", group, lambda e: e["consumer.session.timeout.ms"].value == "45000")["consumer.session.timeout.ms"].value == "45000"


# ------------------------------------------------------------------ brokers


def test_broker_describe_lists_security_settings(admin, group_broker):
    entries = _describe(admin, "broker", "1")
    for name in ("listeners", "advertised.listeners", "listener.security.protocol.map", "sasl.enabled.mechanisms",
                 "ssl.keystore.type", "ssl.client.auth", "authorizer.class.name", "log.retention.ms", "num.partitions"):
        assert name in entries, name
    assert entries["ssl.key.password"].is_sensitive and entries["ssl.key.password"].value is None
    assert entries["num.partitions"].value == "1"


def test_broker_dynamic_log_default(admin):
    topic = _topic(admin)
    try:
        _incremental(admin, "broker", "1", [("log.retention.ms", "7200000", SET)])
        entries = _describe(admin, "broker", "1", lambda e: e["log.retention.ms"].value == "7200000")
        assert entries["log.retention.ms"].value == "7200000"
        assert entries["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        entry = _describe(admin, "topic", topic, lambda e: e["retention.ms"].value == "7200000")["retention.ms"]
        assert entry.value == "7200000" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    finally:
        _incremental(admin, "broker", "1", [("log.retention.ms", None, DELETE)])
    assert _describe(admin, "topic", topic, lambda e: e["retention.ms"].value == "604800000")["retention.ms"].value == "604800000"


# ------------------------------------------------------------------ DeleteRecords


def test_delete_records(admin, group_broker):
    topic = _topic(admin, 2)
    p = Producer({"bootstrap.servers": group_broker.bootstrap})
    for i in range(10):
        p.produce(topic, b"v%d" % i, key=b"k", partition=0)
    p.flush(30)
    [fut] = admin.delete_records([TopicPartition(topic, 0, 4)]).values()
    assert fut.result(30).low_watermark == 4
    # a smaller offset changes nothing
    [fut] = admin.delete_records([TopicPartition(topic, 0, 2)]).values()
    assert fut.result(30).low_watermark == 4
    # past the high watermark
    [fut] = admin.delete_records([TopicPartition(topic, 0, 11)]).values()
    with pytest.raises(KafkaException) as info:
        fut.result(30)
    assert info.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    c = Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": _name("g"), "enable.auto.commit": False})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        assert (low, high) == (4, 10)
        # reading from below the start: OFFSET_OUT_OF_RANGE, then auto.offset.reset (earliest) takes it to 4
        c2 = Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": _name("g"), "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c2.assign([TopicPartition(topic, 0, 1)])
        msg = None
        for _ in range(60):
            msg = c2.poll(1)
            if msg is not None and msg.error() is None:
                break
        c2.close()
        assert msg is not None and msg.error() is None and msg.offset() == 4
    finally:
        c.close()
    # -1: up to the high watermark
    [fut] = admin.delete_records([TopicPartition(topic, 0, -1)]).values()
    assert fut.result(30).low_watermark == 10


def test_delete_records_refused_on_a_compacted_topic(admin, group_broker):
    topic = _topic(admin, configs={"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": group_broker.bootstrap})
    p.produce(topic, b"v", key=b"k", partition=0)
    p.flush(30)
    [fut] = admin.delete_records([TopicPartition(topic, 0, 1)]).values()
    with pytest.raises(KafkaException) as info:
        fut.result(30)
    assert info.value.args[0].code() == KafkaError.POLICY_VIOLATION


# ------------------------------------------------------------------ DescribeLogDirs, ElectLeaders


def test_describe_log_dirs_with_kafka_python(admin, group_broker):
    from kafka.admin import KafkaAdminClient

    topic = _topic(admin, 2)
    p = Producer({"bootstrap.servers": group_broker.bootstrap})
    for _ in range(5):
        p.produce(topic, b"x" * 100, partition=1)
    p.flush(30)
    kp = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap)
    try:
        response = kp.describe_log_dirs()
    finally:
        kp.close()
    [broker] = response
    [log_dir] = broker["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"].startswith("/")
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    sizes = {p["partition_index"]: p["partition_size"] for t in log_dir["topics"] if t["name"] == topic for p in t["partitions"]}
    assert sizes[0] == 0 and sizes[1] > 500


def test_elect_leaders_not_needed(admin):
    from confluent_kafka import ElectionType

    topic = _topic(admin, 2)
    fut = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0), TopicPartition(topic, 9)])
    results = fut.result(30)
    by_partition = {tp.partition: err for tp, err in results.items()}
    assert by_partition[0] is not None and by_partition[0].code() == KafkaError.ELECTION_NOT_NEEDED
    assert by_partition[9] is not None and by_partition[9].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
