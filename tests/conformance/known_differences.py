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

BY_VERSION: dict[str, dict[str, str]] = {
    "4.1": {
        "data.api_versions_ranges": (
            "ApiVersions: Kafka 4.1 advertises Produce 0-13; kafkalite Produce 3-13 (v0-2 carry the pre-0.11 message "
            "formats, which kafkalite does not store)"),
    },
    "4.4": {
    },
}


def known_differences(minor: str = KAFKA_MINOR) -> dict[str, str]:
    """The known differences against Apache Kafka ``minor`` ("4.4", "4.1")."""
    return {**COMMON, **BY_VERSION.get(minor, {})}


KNOWN_DIFFERENCES: dict[str, str] = known_differences()
