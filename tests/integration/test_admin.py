"""Topic administration and cluster metadata through real admin clients."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic


@pytest.fixture
def admin(shared_broker):
    return AdminClient({"bootstrap.servers": shared_broker.bootstrap})


def test_internal_topics_are_hidden_unless_named(admin):
    admin.create_topics([NewTopic("__hidden-internal", 1, 1), NewTopic("visible", 1, 1)])["visible"].result(15)
    listed = admin.list_topics(timeout=10).topics
    assert "visible" in listed and "__hidden-internal" not in listed
    named = admin.list_topics(topic="__hidden-internal", timeout=10).topics
    assert "__hidden-internal" in named and named["__hidden-internal"].error is None


def test_metadata_auto_creates_with_default_partitions(admin, shared_broker):
    md = admin.list_topics(topic="auto-created-by-metadata", timeout=10)
    topic = md.topics["auto-created-by-metadata"]
    assert topic.error is None and list(topic.partitions) == [0]
    assert [(b.id, b.host, b.port) for b in md.brokers.values()] == [(1, "127.0.0.1", shared_broker.port)]


def test_create_partitions_and_delete_topic(admin):
    admin.create_topics([NewTopic("grow-me", 2, 1)])["grow-me"].result(15)
    admin.create_partitions([NewPartitions("grow-me", 5)])["grow-me"].result(15)
    assert len(admin.list_topics(topic="grow-me", timeout=10).topics["grow-me"].partitions) == 5
    with pytest.raises(KafkaException) as err:
        admin.create_partitions([NewPartitions("grow-me", 3)])["grow-me"].result(15)
    assert err.value.args[0].name() == "INVALID_PARTITIONS"
    admin.delete_topics(["grow-me"])["grow-me"].result(15)
    assert "grow-me" not in admin.list_topics(timeout=10).topics
    with pytest.raises(KafkaException) as err:
        admin.delete_topics(["grow-me"])["grow-me"].result(15)
    assert err.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"


def test_describe_topic_and_broker_configs(admin):
    admin.create_topics([NewTopic("configured", 1, 1, config={"retention.ms": "12345", "cleanup.policy": "compact"})])["configured"].result(15)
    [fut] = admin.describe_configs([ConfigResource("topic", "configured")]).values()
    entries = fut.result(15)
    assert entries["retention.ms"].value == "12345" and not entries["retention.ms"].is_default
    assert entries["cleanup.policy"].value == "compact"
    assert entries["segment.bytes"].value == "1073741824" and entries["segment.bytes"].is_default
    [fut] = admin.describe_configs([ConfigResource("broker", "1")]).values()
    broker_entries = fut.result(15)
    assert broker_entries["num.partitions"].value == "1"


def test_describe_cluster(admin):
    desc = admin.describe_cluster(request_timeout=10).result(15)
    assert desc.cluster_id and desc.controller.id == 1
    assert [n.id for n in desc.nodes] == [1]


def test_kafka_python_admin_lists_and_deletes(shared_broker):
    from kafka.admin import KafkaAdminClient, NewTopic as KPNewTopic

    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        admin.create_topics([KPNewTopic("kp-admin", 2, 1)])
        assert "kp-admin" in admin.list_topics()
        described = admin.describe_topics(["kp-admin"])
        assert len(described[0]["partitions"]) == 2
        admin.delete_topics(["kp-admin"])
        assert "kp-admin" not in admin.list_topics()
    finally:
        admin.close()
