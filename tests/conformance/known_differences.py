"""Scenarios where kafkalite is known to answer differently from the reference Apache Kafka.

Each entry stays here, with its reason, until kafkalite is fixed: the test is an
``xfail(strict=True)``, so once the answers agree the run fails until the entry
is removed. A differing scenario is never deleted from the suite.

The suite runs against Apache Kafka 4.4 (``make test``) and 4.1
(``make test-conformance-4.1``): ``COMMON`` holds the differences from both,
``BY_VERSION`` those from one release only (a behaviour Kafka changed between
them), and ``KNOWN_DIFFERENCES`` is the set for the release this process runs
against (``tests.reference_kafka.KAFKA_MINOR``).
"""

from tests.reference_kafka import KAFKA_MINOR

COMMON: dict[str, str] = {
    # -- classic groups
    "classic.join_unsupported_version_closes": (
        "deliberate: JoinGroup v10 (unsupported): Kafka closes the connection; kafkalite answers UNSUPPORTED_VERSION, "
        "as the project's standards require (bad input gets a clear error)"),
    # -- data plane and front door
    "data.removed_versions_close": (
        "deliberate: "
        "requests at versions the broker does not support (OffsetCommit v1, OffsetFetch v0, Produce v2, Fetch v3, "
        "ListOffsets v0, Heartbeat v5, SyncGroup v6, LeaveGroup v6, DescribeGroups v7, ListGroups v6, "
        "ConsumerGroupHeartbeat v2): Kafka closes the connection, kafkalite answers; Metadata v0 is answered by both"),
    "data.metadata_auto_create": (
        "deliberate (topics exist as soon as they are created): "
        "Metadata that auto-creates a topic: Kafka's first answer is UNKNOWN_TOPIC_OR_PARTITION (creation in "
        "flight), kafkalite's is NONE with the new topic"),
}

# Against 4.1, every KIP-848 scenario whose observations carry an epoch: kafkalite follows 4.4 there.
_EPOCHS_41 = (
    "4.4 behaviour (KAFKA-20268): a new consumer group starts at epoch 1 with an empty assignment, so the first "
    "member's epoch is 2 where Kafka 4.1 gives 1 (every later epoch and generation is one higher too), and the last "
    "member leaving moves the target assignment epoch")
_KIP848_EPOCH_SCENARIOS = (
    "classic_join_to_consumer_group", "describe_batch_and_states", "fenced_member_epoch",
    "join_unknown_topic_then_created", "join_v0_server_generated_id", "join_v1_client_id", "leave_group",
    "offline_upgrade_empty_classic_group", "partitions_added_to_topic", "previous_epoch_tolerated",
    "rack_and_instance_in_describe", "range_assignor_two_topics", "rebalance_timeout_fences_unrevoking_member",
    "reconcile_member_leaves", "reconcile_second_member", "reconcile_subscription_change",
    "reconcile_three_members_uniform", "rejoin_after_leave_same_id", "session_timeout_fences_member",
    "static_leave_for_good", "static_temporary_leave_and_return", "static_unreleased_instance",
    "steady_heartbeat_no_assignment", "unsupported_assignor", "member_leaves_describe_before_heartbeat",
    "commit_with_previous_epoch",
)

BY_VERSION: dict[str, dict[str, str]] = {
    "4.1": {
        "data.api_versions_ranges": (
            "ApiVersions: Kafka 4.1 advertises Produce 0-13, ListOffsets 1-10, OffsetCommit 2-9 and OffsetFetch 1-9; "
            "kafkalite Produce 3-13 (v0-2 carry the pre-0.11 message formats, which kafkalite does not store), and "
            "Kafka 4.4's ListOffsets 1-11, OffsetCommit 2-10 and OffsetFetch 1-10"),
        "data.list_offsets_v11": "4.4 behaviour: ListOffsets v11 (KIP-1023); Kafka 4.1 has no v11 and closes the connection",
        "commit.topic_ids_v10": (
            "4.4 behaviour: OffsetCommit and OffsetFetch v10 (topics by id); Kafka 4.1 does not advertise v10 (unstable "
            "there) and closes the connection"),
        **{f"kip848.{name}": _EPOCHS_41 for name in _KIP848_EPOCH_SCENARIOS},
        "kip848.fenced_member_rejoins_with_epoch_zero": (
            "4.4 behaviour (KAFKA-19233): a fenced member rejoining under its own id with epoch 0 is accepted; "
            "Kafka 4.1 answers FENCED_MEMBER_EPOCH until the member's session runs out"),
        "configs.group_configs": (
            "4.4 behaviour: a group config whose value comes from the broker's own setting (the suite sets "
            "group.consumer.heartbeat.interval.ms and group.consumer.session.timeout.ms) is described with source "
            "STATIC_BROKER_CONFIG; Kafka 4.1 says DEFAULT_CONFIG"),
        "configs.broker_cluster_default": (
            "4.4 behaviour: \"Cannot update these configs dynamically: [node.id]\" (Java's set text); Kafka 4.1 "
            "writes Set(node.id)"),
        "kip848.commit_with_previous_epoch": (
            _EPOCHS_41 + "; and KIP-1251 (Kafka 4.3+): kafkalite accepts an OffsetCommit one member epoch behind for the "
            "partitions the member has held since before the bump, where 4.1 answers STALE_MEMBER_EPOCH"),
    },
    "4.4": {
        "data.api_versions_ranges": (
            "ApiVersions: Kafka 4.4 advertises Produce 0-13, ApiVersions 0-5 and DeleteGroups 0-3; kafkalite "
            "Produce 3-13 (v0-2 carry the pre-0.11 message formats, which kafkalite does not store), ApiVersions 0-4 "
            "and DeleteGroups 0-2 (kio 0.6.5 has no schema for ApiVersions v5 or DeleteGroups v3)"),
        "data.api_versions_unsupported_version": (
            "the UNSUPPORTED_VERSION answer lists ApiVersions 0-5 in Kafka 4.4, 0-4 in kafkalite (kio 0.6.5 has no "
            "ApiVersions v5 schema, KIP-1242)"),
    },
}


def known_differences(minor: str = KAFKA_MINOR) -> dict[str, str]:
    """The known differences against Apache Kafka ``minor`` ("4.4", "4.1")."""
    return {**COMMON, **BY_VERSION.get(minor, {})}


KNOWN_DIFFERENCES: dict[str, str] = known_differences()
