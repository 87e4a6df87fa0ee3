"""The KIP-848 consumer-group records (types 3-8 and 16), described once each.

Each record's key and value are declared as in Kafka's schemas
(``group-coordinator/src/main/resources/common/message/ConsumerGroup*.json``);
the dataclasses and the codec come from the description (:mod:`._schema`).
The values are all flexible and defined at version 0 only. ``RECORDS`` lists
them for the dispatch in :mod:`protocol.group_records`.
"""

from __future__ import annotations

from ._codec import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    _fail,
)
from ._schema import BYTES, INT8, INT32, INT64, NSTRING, STRING, UUID, Array, F, Record, Struct, key_of

_M = __name__


def _epochs_match(tp, decoding: bool) -> None:
    epochs = tp.assignment_epochs
    if epochs and len(epochs) != len(tp.partitions):
        if decoding:
            _fail(f"{len(epochs)} assignment epochs for {len(tp.partitions)} partitions")
        raise ValueError("assignment_epochs must list one epoch per partition")
    if decoding and not epochs:
        tp.assignment_epochs = None


# --------------------------------------------------------------------------
# nested structs

PARTITION_METADATA = Struct("PartitionMetadata", [F("partition", INT32), F("racks", Array(STRING), [])], module=_M)
TOPIC_METADATA = Struct("TopicMetadata", [
    F("topic_id", UUID),
    F("topic_name", STRING),
    F("num_partitions", INT32),
    F("partition_metadata", Array(PARTITION_METADATA), []),
], module=_M)
CLASSIC_PROTOCOL = Struct("ClassicProtocol", [F("name", STRING), F("metadata", BYTES)], module=_M)
CLASSIC_MEMBER_METADATA = Struct("ClassicMemberMetadata", [
    F("session_timeout_ms", INT32),
    F("supported_protocols", Array(CLASSIC_PROTOCOL), []),
], module=_M)
TOPIC_PARTITIONS = Struct("TopicPartitions", [
    F("topic_id", UUID),
    F("partitions", Array(INT32), []),
    F("assignment_epochs", Array(INT32), None, tag=0,
      note="KIP-1251 (Kafka 4.3+), current assignments only: the epoch each partition was assigned at, "
           "parallel to partitions; left out when empty (records written before 4.3)"),
], module=_M, check=_epochs_match)

PartitionMetadata = PARTITION_METADATA.cls
TopicMetadata = TOPIC_METADATA.cls
ClassicProtocol = CLASSIC_PROTOCOL.cls
ClassicMemberMetadata = CLASSIC_MEMBER_METADATA.cls
TopicPartitions = TOPIC_PARTITIONS.cls


def member_assignment(name: str, pending: bool) -> Struct:
    """A current member assignment value: MemberEpoch, PreviousMemberEpoch, State, AssignedPartitions
    and (consumer groups) PartitionsPendingRevocation; the share-group record has no pending list."""
    fields = [
        F("member_epoch", INT32),
        F("previous_member_epoch", INT32),
        F("state", INT8),
        F("assigned_partitions", Array(TOPIC_PARTITIONS), []),
    ]
    if pending:
        fields.append(F("partitions_pending_revocation", Array(TOPIC_PARTITIONS), []))
    return Struct(name, fields, module=_M)


def target_member(name: str) -> Struct:
    """A target assignment member value: TopicPartitions (the same in consumer and share groups)."""
    return Struct(name, [F("topic_partitions", Array(TOPIC_PARTITIONS), [])], module=_M)


def target_metadata(name: str) -> Struct:
    """A target assignment metadata value: AssignmentEpoch, tag 0 AssignmentTimestamp."""
    return Struct(name, [
        F("assignment_epoch", INT32),
        F("assignment_timestamp", INT64, 0, tag=0,
          note="Kafka 4.3+ (share) / 4.4+ (consumer): when the target was computed (ms); left out when 0"),
    ], module=_M)


# --------------------------------------------------------------------------
# the records

RECORDS = [
    Record(CONSUMER_GROUP_METADATA, key_of("ConsumerGroupMetadataKey", "group_id", module=_M), Struct(
        "ConsumerGroupMetadataValue", [
            F("epoch", INT32),
            F("metadata_hash", INT64, 0, tag=0, note="KIP-1101 (Kafka 4.1); 0 = not set"),
        ], module=_M)),
    Record(CONSUMER_GROUP_PARTITION_METADATA, key_of("ConsumerGroupPartitionMetadataKey", "group_id", module=_M), Struct(
        "ConsumerGroupPartitionMetadataValue", [F("topics", Array(TOPIC_METADATA), [])], module=_M)),
    Record(CONSUMER_GROUP_MEMBER_METADATA, key_of("ConsumerGroupMemberMetadataKey", "group_id", "member_id", module=_M), Struct(
        "ConsumerGroupMemberMetadataValue", [
            F("instance_id", NSTRING, None),
            F("rack_id", NSTRING, None),
            F("client_id", STRING, ""),
            F("client_host", STRING, ""),
            F("subscribed_topic_names", Array(STRING), []),
            F("subscribed_topic_regex", NSTRING, None),
            F("rebalance_timeout_ms", INT32, -1),
            F("server_assignor", NSTRING, None),
            F("classic_member_metadata", CLASSIC_MEMBER_METADATA, None, tag=0,
              note="None when the member uses the consumer protocol"),
        ], module=_M)),
    Record(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
           key_of("ConsumerGroupTargetAssignmentMetadataKey", "group_id", module=_M),
           target_metadata("ConsumerGroupTargetAssignmentMetadataValue")),
    Record(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
           key_of("ConsumerGroupTargetAssignmentMemberKey", "group_id", "member_id", module=_M),
           target_member("ConsumerGroupTargetAssignmentMemberValue")),
    Record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
           key_of("ConsumerGroupCurrentMemberAssignmentKey", "group_id", "member_id", module=_M),
           member_assignment("ConsumerGroupCurrentMemberAssignmentValue", pending=True)),
    Record(CONSUMER_GROUP_REGULAR_EXPRESSION, key_of("ConsumerGroupRegularExpressionKey", "group_id", "regular_expression", module=_M), Struct(
        "ConsumerGroupRegularExpressionValue", [
            F("topics", Array(STRING)),
            F("version", INT64),
            F("timestamp", INT64),
        ], module=_M)),
]

(
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
) = (rec.key.cls for rec in RECORDS)
(
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupRegularExpressionValue,
) = (rec.value.cls for rec in RECORDS)
