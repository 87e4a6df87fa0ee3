"""ElectLeaders (43), v0-2, answered as Kafka 4.x's controller does.

On one broker every partition's leader is this broker, its preferred (only)
replica, so nothing is ever elected: a named partition that exists is
ELECTION_NOT_NEEDED (preferred and unclean elections alike, as it has a leader),
a missing topic or partition is UNKNOWN_TOPIC_OR_PARTITION ("No such topic as
..." / "No such partition as ..."). Null partitions (all of them) lists every
topic with no partition result, as Kafka leaves out the ones that need no election.

On a cluster node (``cluster.preferred_election``, broker/multinode/node.py; a
standby node forwards the request here) every partition's preferred replica is
the lowest node id. A PREFERRED election while another node leads moves
leadership to it (the controller's ``move-leader``) and answers each partition
NONE, every partition for null partitions; while that node is down,
PREFERRED_LEADER_NOT_AVAILABLE. The move is under way when the answer is sent:
Metadata shows the new leader a moment later. An UNCLEAN election is never
needed, as every partition has a leader while any node lives. ALTER on the cluster is needed:
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


_UNAVAILABLE = "The preferred leader was not available."
_OUTCOME = {
    "not_needed": (ErrorCode.election_not_needed, _NOT_NEEDED),
    "unavailable": (ErrorCode.preferred_leader_not_available, _UNAVAILABLE),
    "elect": (ErrorCode.none, None),
}


def _elect(cluster, topic: str, partition: int, outcome: str) -> dict:
    t = cluster.topics.get(topic)
    if t is None:
        return {"partition_id": partition, "error_code": ErrorCode.unknown_topic_or_partition, "error_message": f"No such topic as {topic}"}
    if not 0 <= partition < len(t.partitions):
        return {"partition_id": partition, "error_code": ErrorCode.unknown_topic_or_partition, "error_message": f"No such partition as {topic}-{partition}"}
    code, message = _OUTCOME[outcome]
    return {"partition_id": partition, "error_code": code, "error_message": message}


async def handle(ctx, req):
    version = ctx.version
    election_type = getattr(req, "election_type", PREFERRED) if version >= 1 else PREFERRED
    if not ctx.allowed_on_cluster(Operation.ALTER):
        return _all_failed(req, ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    if election_type not in (PREFERRED, UNCLEAN):
        return _all_failed(req, ErrorCode.invalid_request, f"Unknown election type {election_type}")
    cluster = ctx.cluster
    election = cluster.preferred_election if election_type == PREFERRED else None
    outcome = election(False) if election is not None else "not_needed"
    if req.topic_partitions is None:
        topics = [t for t in cluster.topics.values() if not t.internal or t.kafka_internal]
        results = [{"topic": t.name, "partition_result": [_elect(cluster, t.name, p, outcome) for p in range(len(t.partitions))] if outcome != "not_needed" else []}
                   for t in topics]
    else:
        results = [
            {"topic": tp.topic, "partition_result": [_elect(cluster, tp.topic, p, outcome) for p in tp.partitions or ()]}
            for tp in req.topic_partitions
        ]
    if outcome == "elect" and any(r["error_code"] == ErrorCode.none for t in results for r in t["partition_result"]):
        election(True)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": results}
