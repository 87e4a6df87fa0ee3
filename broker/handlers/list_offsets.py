"""ListOffsets (2), v1-11.

Timestamps: -1 latest (the high watermark), -2 earliest, -3 the record with
the largest timestamp (v7+), -4 earliest local (v8+, same as earliest here:
no tiered storage), -5 latest tiered (v9+, KIP-1005: nothing is tiered, so -1),
-6 earliest pending upload (v11+, KIP-1023: nothing waits for upload, so -1).
Any other value finds the first offset whose timestamp is at or after it. As
Kafka (4.1 and 4.4 alike), a special timestamp below the version that brought
it, or a negative one that is none of these, is UNSUPPORTED_VERSION for its
partition. A partition whose topic is deleted under the request:
UNKNOWN_TOPIC_OR_PARTITION.

With isolation_level READ_COMMITTED (1, v2+), as Kafka's Partition and
ReplicaManager: latest is the last stable offset, and an offset found by
timestamp (or -3) at or past it is not answered (offset and timestamp -1).
"""

from protocol.errors import ErrorCode
from storage.errors import LogClosedError


from ..security.authorizer import Operation, ResourceType

API_KEY = 2
NAME = "ListOffsets"
VERSIONS = (1, 11)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
READ_COMMITTED = 1
# the first request version that may carry each special timestamp
SINCE_VERSION = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}


def supported(ts: int, version: int) -> bool:
    """False for a special timestamp the request's version does not know (and any unknown negative one)."""
    return ts >= 0 or version >= SINCE_VERSION.get(ts, 1 << 15)


def lookup(part, ts: int, isolation_level: int = 0) -> tuple[int, int]:
    """(offset, timestamp) for one partition."""
    plog = part.log
    committed = isolation_level == READ_COMMITTED
    if ts == LATEST:
        return (plog.last_stable_offset if committed else plog.log_end_offset), -1
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
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
    leader_epoch = cluster.leadership.epoch
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
            if not supported(lp.timestamp, ctx.version):
                parts.append({**base, "error_code": ErrorCode.unsupported_version})
                continue
            epoch = getattr(lp, "current_leader_epoch", -1)
            if epoch > leader_epoch:
                parts.append({**base, "error_code": ErrorCode.unknown_leader_epoch})
                continue
            if 0 <= epoch < leader_epoch:
                parts.append({**base, "error_code": ErrorCode.fenced_leader_epoch})
                continue
            try:
                part = topic.partitions[lp.partition_index]
                offset, ts = lookup(part, lp.timestamp, isolation)
            except LogClosedError:
                parts.append({**base, "error_code": ErrorCode.unknown_topic_or_partition})
                continue
            parts.append(
                {
                    "partition_index": lp.partition_index,
                    "error_code": ErrorCode.none,
                    "timestamp": ts,
                    "offset": offset,
                    "leader_epoch": part.log.epochs.epoch_at(offset, leader_epoch, part.log.log_end_offset) if offset >= 0 else -1,
                }
            )
        topics.append({"name": lt.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
