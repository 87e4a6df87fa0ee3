"""OffsetForLeaderEpoch (23), v2-4.

The end offset of the epoch asked for, from the partition's leader epochs
(storage/leader_epochs.py): the next epoch's start offset, or the log end offset
for the current epoch. A single node stays at epoch 0; a cluster node leads at
the epoch of the election that made it active (broker/multinode/). A client's
``current_leader_epoch`` above the leader's is UNKNOWN_LEADER_EPOCH, below it
FENCED_LEADER_EPOCH (-1: not checked), as in Kafka.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType

API_KEY = 23
NAME = "OffsetForLeaderEpoch"
VERSIONS = (2, 4)


async def handle(ctx, req):
    cluster = ctx.cluster
    current = cluster.leadership.epoch
    topics = []
    check = ctx.broker.authorizer is not None and not ctx.allowed_on_cluster(Operation.CLUSTER_ACTION)
    for t in req.topics or ():
        topic = cluster.topics.get(t.topic)
        parts = []
        denied = check and not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.topic)
        for p in t.partitions or ():
            entry = {"partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            if denied:
                parts.append({**entry, "error_code": ErrorCode.topic_authorization_failed})
            elif topic is None or not 0 <= p.partition < len(topic.partitions):
                parts.append({**entry, "error_code": ErrorCode.unknown_topic_or_partition})
            elif p.current_leader_epoch > current:
                parts.append({**entry, "error_code": ErrorCode.unknown_leader_epoch})
            elif 0 <= p.current_leader_epoch < current:
                parts.append({**entry, "error_code": ErrorCode.fenced_leader_epoch})
            else:
                plog = topic.partitions[p.partition].log
                epoch, end = plog.epochs.end_offset_for(p.leader_epoch, current, plog.log_end_offset)
                parts.append({"partition": p.partition, "error_code": ErrorCode.none, "leader_epoch": epoch, "end_offset": end})
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
