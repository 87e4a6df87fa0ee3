"""The KIP-932 share-group records (types 10-15), as Kafka 4.4 writes them.

Keys are non-flexible (version 0); values are flexible, defined at version 0
only, each described once (:mod:`._schema`); ``RECORDS`` lists them for the
dispatch in :mod:`protocol.group_records`.

====  =========================================  ==========================================
type  key                                        value fields
====  =========================================  ==========================================
10    ShareGroupMemberMetadataKey (group,member)  RackId?, ClientId, ClientHost, SubscribedTopicNames
11    ShareGroupMetadataKey (group)               Epoch, MetadataHash
12    ShareGroupTargetAssignmentMetadataKey       AssignmentEpoch, tag 0: AssignmentTimestamp
13    ShareGroupTargetAssignmentMemberKey         TopicPartitions [TopicId, Partitions]
14    ShareGroupCurrentMemberAssignmentKey        MemberEpoch, PreviousMemberEpoch, State, AssignedPartitions
15    ShareGroupStatePartitionMetadataKey (group) InitializingTopics, InitializedTopics, DeletingTopics
====  =========================================  ==========================================
"""

from __future__ import annotations

from ._codec import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_STATE_PARTITION_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
)
from ._schema import INT32, INT64, NSTRING, STRING, UUID, Array, F, Record, Struct, key_of
from .consumer import TopicPartitions, member_assignment, target_member, target_metadata

_M = __name__

# a share record's [TopicId, Partitions] entry: the consumer groups' struct (its tagged assignment
# epochs are never set in a share record)
ShareTopicPartitions = TopicPartitions

TOPIC_PARTITIONS_INFO = Struct("TopicPartitionsInfo", [F("topic_id", UUID), F("topic_name", STRING), F("partitions", Array(INT32), [])],
                               module=_M)
TOPIC_INFO = Struct("TopicInfo", [F("topic_id", UUID), F("topic_name", STRING)], module=_M)
TopicPartitionsInfo = TOPIC_PARTITIONS_INFO.cls
TopicInfo = TOPIC_INFO.cls

RECORDS = [
    Record(SHARE_GROUP_MEMBER_METADATA, key_of("ShareGroupMemberMetadataKey", "group_id", "member_id", module=_M), Struct(
        "ShareGroupMemberMetadataValue", [
            F("rack_id", NSTRING, None),
            F("client_id", STRING, ""),
            F("client_host", STRING, ""),
            F("subscribed_topic_names", Array(STRING), []),
        ], module=_M)),
    Record(SHARE_GROUP_METADATA, key_of("ShareGroupMetadataKey", "group_id", module=_M), Struct(
        "ShareGroupMetadataValue", [F("epoch", INT32), F("metadata_hash", INT64, 0)], module=_M)),
    Record(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, key_of("ShareGroupTargetAssignmentMetadataKey", "group_id", module=_M),
           target_metadata("ShareGroupTargetAssignmentMetadataValue")),
    Record(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, key_of("ShareGroupTargetAssignmentMemberKey", "group_id", "member_id", module=_M),
           target_member("ShareGroupTargetAssignmentMemberValue")),
    Record(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, key_of("ShareGroupCurrentMemberAssignmentKey", "group_id", "member_id", module=_M),
           member_assignment("ShareGroupCurrentMemberAssignmentValue", pending=False)),
    Record(SHARE_GROUP_STATE_PARTITION_METADATA, key_of("ShareGroupStatePartitionMetadataKey", "group_id", module=_M), Struct(
        "ShareGroupStatePartitionMetadataValue", [
            F("initializing_topics", Array(TOPIC_PARTITIONS_INFO), []),
            F("initialized_topics", Array(TOPIC_PARTITIONS_INFO), []),
            F("deleting_topics", Array(TOPIC_INFO), []),
        ], module=_M)),
]

(
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupStatePartitionMetadataKey,
) = (rec.key.cls for rec in RECORDS)
(
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupStatePartitionMetadataValue,
) = (rec.value.cls for rec in RECORDS)
