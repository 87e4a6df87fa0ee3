"""ElectLeaders (43), v0-2, answered as Kafka 4.x's controller does with one broker.

Every partition's leader is this broker, its preferred (only) replica, so nothing
is ever elected: a named partition that exists is ELECTION_NOT_NEEDED (preferred
and unclean elections alike, as it has a leader), a missing topic or partition is
UNKNOWN_TOPIC_OR_PARTITION ("No such topic as ..." / "No such partition as ...").
Null partitions (all of them) lists every topic with no partition result, as
Kafka leaves out the ones that need no election. ALTER on the cluster is needed:
else every named partition, and the top-level error (v1+), is
CLUSTER_AUTHORIZATION_FAILED. An unknown election type is INVALID_REQUEST.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation

API_KEY = 43
NAME = "ElectLeaders"
VERSIONS = (0, 2)
PREFERRED, UNCLEAN = 0, 1
_NOT_NEEDED = "Leader election not needed for topic partition."


def _all_failed(req, code: ErrorCode, message: str) -> dict:
    results = [
        {"topic": tp.topic, "partition_result": [{"partition_id": p, "error_code": code, "error_message": message} for p in tp.partitions or ()]}
        for tp in req.topic_partitions or ()
    ]
    return {"throttle_time": 0, "error_code": code, "replica_election_results": results}


def _elect(cluster, topic: str, partition: int) -> dict:
    t = cluster.topics.get(topic)
    if t is None:
        return {"partition_id": partition, "error_code": ErrorCode.unknown_topic_or_partition, "error_message": f"No such topic as {topic}"}
    if not 0 <= partition < len(t.partitions):
        return {"partition_id": partition, "error_code": ErrorCode.unknown_topic_or_partition, "error_message": f"No such partition as {topic}-{partition}"}
    return {"partition_id": partition, "error_code": ErrorCode.election_not_needed, "error_message": _NOT_NEEDED}


async def handle(ctx, req):
    version = ctx.version
    election_type = getattr(req, "election_type", PREFERRED) if version >= 1 else PREFERRED
    if not ctx.allowed_on_cluster(Operation.ALTER):
        return _all_failed(req, ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    if election_type not in (PREFERRED, UNCLEAN):
        return _all_failed(req, ErrorCode.invalid_request, f"Unknown election type {election_type}")
    cluster = ctx.cluster
    if req.topic_partitions is None:
        names = [t.name for t in cluster.topics.values() if not t.internal or t.kafka_internal]
        return {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": [{"topic": n, "partition_result": []} for n in names]}
    results = [
        {"topic": tp.topic, "partition_result": [_elect(cluster, tp.topic, p) for p in tp.partitions or ()]}
        for tp in req.topic_partitions
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": results}
