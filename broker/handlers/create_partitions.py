"""CreatePartitions (37), v0-3: grow a topic's partition count."""

from protocol.errors import ErrorCode

from ..cluster import TopicError

API_KEY = 37
NAME = "CreatePartitions"
VERSIONS = (0, 3)


async def handle(ctx, req):
    cluster = ctx.cluster
    results = []
    for t in req.topics or ():
        topic = cluster.topics.get(t.name)
        if topic is None:
            results.append({"name": t.name, "error_code": ErrorCode.unknown_topic_or_partition, "error_message": f"The topic '{t.name}' does not exist."})
            continue
        if t.assignments and any(b != cluster.node_id for a in t.assignments for b in a.broker_ids or ()):
            results.append({"name": t.name, "error_code": ErrorCode.invalid_replica_assignment, "error_message": f"Replica assignment may only name broker {cluster.node_id}"})
            continue
        try:
            cluster.add_partitions(topic, t.count, validate_only=req.validate_only)
        except TopicError as exc:
            results.append({"name": t.name, "error_code": exc.code, "error_message": exc.message})
            continue
        results.append({"name": t.name, "error_code": ErrorCode.none, "error_message": None})
    return {"throttle_time": 0, "results": results}
