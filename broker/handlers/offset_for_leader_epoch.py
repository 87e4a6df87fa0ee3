"""OffsetForLeaderEpoch (23), v2-4.

There is only ever leader epoch 0 here, so the end offset of epoch 0 (or of
any earlier epoch asked for) is the log end offset; a later epoch is unknown.
"""

from protocol.errors import ErrorCode

from ..cluster import LEADER_EPOCH

from ..security.authorizer import Operation, ResourceType

API_KEY = 23
NAME = "OffsetForLeaderEpoch"
VERSIONS = (2, 4)


async def handle(ctx, req):
    cluster = ctx.cluster
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
            elif p.current_leader_epoch > LEADER_EPOCH:
                parts.append({**entry, "error_code": ErrorCode.unknown_leader_epoch})
            elif p.leader_epoch > LEADER_EPOCH:
                parts.append({**entry, "error_code": ErrorCode.none})
            else:
                end = topic.partitions[p.partition].log.log_end_offset
                parts.append({"partition": p.partition, "error_code": ErrorCode.none, "leader_epoch": LEADER_EPOCH, "end_offset": end})
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
