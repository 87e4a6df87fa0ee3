"""DescribeProducers (61), v0: the producers a partition knows (idempotent and
transactional): id, epoch, last sequence and timestamp, and the first offset
of the producer's open transaction (-1 if none)."""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType

API_KEY = 61
NAME = "DescribeProducers"
VERSIONS = (0, 0)


def _partition(ctx, topic, index: int, denied: bool = False) -> dict:
    if denied:
        return {"partition_index": index, "error_code": ErrorCode.topic_authorization_failed, "error_message": None, "active_producers": []}
    part = ctx.cluster.partition(topic, index)
    if part is None:
        return {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition, "error_message": None, "active_producers": []}
    open_txns = dict(part.log.open_transactions())
    producers = []
    for pid, entry in sorted(part.producers.entries.items()):
        last = entry.batches[-1] if entry.batches else None
        producers.append({
            "producer_id": pid, "producer_epoch": entry.epoch, "last_sequence": last.last_seq if last else -1,
            "last_timestamp": last.timestamp if last else -1, "coordinator_epoch": -1, "current_txn_start_offset": open_txns.get(pid, -1),
        })
    return {"partition_index": index, "error_code": ErrorCode.none, "error_message": None, "active_producers": producers}


async def handle(ctx, req):
    topics = []
    for t in req.topics or ():
        denied = ctx.broker.authorizer is not None and not ctx.allowed(Operation.READ, ResourceType.TOPIC, t.name)
        topics.append({"name": t.name, "partitions": [_partition(ctx, t.name, p, denied) for p in t.partition_indexes or ()]})
    return {"throttle_time": 0, "topics": topics}
