"""DeleteRecords (21), v0-2: move partitions' log start offsets forward.

As Kafka 4.x's KafkaApis, ReplicaManager and Partition, per partition: DELETE on the
topic (TOPIC_AUTHORIZATION_FAILED), then the partition must exist
(UNKNOWN_TOPIC_OR_PARTITION), Kafka's internal topics are refused
(INVALID_TOPIC_EXCEPTION), so is a topic whose cleanup.policy lacks "delete"
(POLICY_VIOLATION); offset -1 means the high watermark, and an offset below 0 or
past the high watermark is OFFSET_OUT_OF_RANGE. An offset at or below the
current start changes nothing. The answer's low watermark is the log start offset
(-1 on an error).

The new start is written to the partition's ``log-start-offset`` file (fsynced
unless fsync is "never") before the answer, and whole segments below it are
removed (``PartitionLog.delete_records_before``: under the log's lock, like
appends; a compaction or retention pass that meanwhile chose the removed
segments gives up). Fetch answers OFFSET_OUT_OF_RANGE below the new start and
ListOffsets EARLIEST answers it.
"""

from protocol.errors import ErrorCode
from storage.errors import LogClosedError, OffsetOutOfRangeError

from ..security.authorizer import Operation, ResourceType

API_KEY = 21
NAME = "DeleteRecords"
VERSIONS = (0, 2)
HIGH_WATERMARK = -1


def _delete(ctx, topic, name: str, index: int, offset: int) -> tuple[ErrorCode, int]:
    if topic.kafka_internal:
        return ErrorCode.invalid_topic_exception, -1
    part = topic.partitions[index]
    plog = part.log
    if not plog.config.delete:
        return ErrorCode.policy_violation, -1
    if offset == HIGH_WATERMARK:
        offset = plog.log_end_offset
    if offset < 0:
        return ErrorCode.offset_out_of_range, -1
    try:
        start = plog.delete_records_before(offset)
    except OffsetOutOfRangeError:
        return ErrorCode.offset_out_of_range, -1
    except LogClosedError:  # the topic was deleted under the request
        return ErrorCode.unknown_topic_or_partition, -1
    except OSError:
        ctx.log.exception("could not persist a log start offset", topic=name, partition=index)
        return ErrorCode.kafka_storage_error, -1
    part.notify()  # parked fetches learn of the new start at once
    return ErrorCode.none, start


async def handle(ctx, req):
    cluster = ctx.cluster
    authz = ctx.broker.authorizer
    topics = []
    for t in req.topics or ():
        name = t.name
        allowed = authz is None or ctx.allowed(Operation.DELETE, ResourceType.TOPIC, name)
        topic = cluster.topics.get(name) if name is not None else None
        results = []
        for p in t.partitions or ():
            index = p.partition_index
            if not allowed:
                code, low = ErrorCode.topic_authorization_failed, -1
            elif topic is None or cluster.topics.get(name) is not topic or not 0 <= index < len(topic.partitions):
                code, low = ErrorCode.unknown_topic_or_partition, -1
            else:
                code, low = _delete(ctx, topic, name, index, p.offset)
            results.append({"partition_index": index, "low_watermark": low, "error_code": code})
        topics.append({"name": name, "partitions": results})
    return {"throttle_time": 0, "topics": topics}
