"""Scenarios where kafkalite is known to answer differently from Apache Kafka 4.1.

Each entry stays here, with its reason, until kafkalite is fixed: the test is an
``xfail(strict=True)``, so once the answers agree the run fails until the entry
is removed. A differing scenario is never deleted from the suite.
"""

KNOWN_DIFFERENCES: dict[str, str] = {
    # -- classic groups
    "classic.join_unsupported_version_closes": (
        "deliberate: JoinGroup v10 (unsupported): Kafka closes the connection; kafkalite answers UNSUPPORTED_VERSION, "
        "as the project's standards require (bad input gets a clear error)"),
    # -- data plane and front door
    "data.api_versions_ranges": (
        "ApiVersions: Kafka 4.1 advertises Produce 0-13; kafkalite Produce 3-13 (v0-2 carry the pre-0.11 message "
        "formats, which kafkalite does not store)"),
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
