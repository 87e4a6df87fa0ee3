"""ListOffsets (2), v1-10.

Timestamps: -1 latest (the high watermark), -2 earliest, -3 the record with
the largest timestamp (v7+), -4 earliest local (v8+, same as earliest here:
no tiered storage), -5 earliest pending upload (v9+: none, so -1). Any other
value finds the first offset whose timestamp is at or after it. A partition
whose topic is deleted under the request: UNKNOWN_TOPIC_OR_PARTITION.

With isolation_level READ_COMMITTED (1, v2+), as Kafka's Partition and
ReplicaManager: latest is the last stable offset, and an offset found by
timestamp (or -3) at or past it is not answered (offset and timestamp -1).
"""

from protocol.errors import ErrorCode
from storage.errors import LogClosedError

from ..cluster import LEADER_EPOCH

from ..security.authorizer import Operation, ResourceType

API_KEY = 2
NAME = "ListOffsets"
VERSIONS = (1, 10)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5
READ_COMMITTED = 1


def lookup(part, ts: int, isolation_level: int = 0) -> tuple[int, int]:
    """(offset, timestamp) for one partition."""
    plog = part.log
    committed = isolation_level == READ_COMMITTED
    if ts == LATEST:
        return (plog.last_stable_offset if committed else plog.log_end_offset), -1
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if ts == EARLIEST_PENDING_UPLOAD:
        return -1, -1
    if ts == MAX_TIMESTAMP:
        found = plog.max_timestamp()
        offset, timestamp = (found[1], found[0]) if found else (-1, -1)
    else:
        found = plog.offset_for_timestamp(ts)
        offset, timestamp = (found[0], found[1]) if found else (-1, -1)
    if committed and offset >= plog.last_stable_offset:
        return -1, -1
    return offset, timestamp


async def handle(ctx, req):
    cluster = ctx.cluster
    isolation = getattr(req, "isolation_level", 0)
    topics = []
    for lt in req.topics or ():
        topic = cluster.topics.get(lt.name)
        parts = []
        denied = ctx.broker.authorizer is not None and not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, lt.name)
        for lp in lt.partitions or ():
            base = {"partition_index": lp.partition_index, "timestamp": -1, "offset": -1, "leader_epoch": -1}
            if denied:
                parts.append({**base, "error_code": ErrorCode.topic_authorization_failed})
                continue
            if topic is None or not 0 <= lp.partition_index < len(topic.partitions):
                parts.append({**base, "error_code": ErrorCode.unknown_topic_or_partition})
                continue
            epoch = getattr(lp, "current_leader_epoch", -1)
            if epoch > LEADER_EPOCH:
                parts.append({**base, "error_code": ErrorCode.unknown_leader_epoch})
                continue
            try:
                offset, ts = lookup(topic.partitions[lp.partition_index], lp.timestamp, isolation)
            except LogClosedError:
                parts.append({**base, "error_code": ErrorCode.unknown_topic_or_partition})
                continue
            parts.append(
                {
                    "partition_index": lp.partition_index,
                    "error_code": ErrorCode.none,
                    "timestamp": ts,
                    "offset": offset,
                    "leader_epoch": LEADER_EPOCH if offset >= 0 else -1,
                }
            )
        topics.append({"name": lt.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
