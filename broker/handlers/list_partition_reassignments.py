"""ListPartitionReassignments (46), v0, as Kafka 4.x's controller answers it.

Kafka lists the partitions whose reassignment is in progress (all of them for
null topics, else those of the named partitions). Here a reassignment is complete
when it is answered (alter_partition_reassignments.py: every replica is one log on
one disk), so the list is always empty. DESCRIBE on the cluster is needed, else the
top-level error is CLUSTER_AUTHORIZATION_FAILED, with the named partitions echoed.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation

API_KEY = 46
NAME = "ListPartitionReassignments"
VERSIONS = (0, 0)
_DENIED = "Cluster authorization failed."


async def handle(ctx, req):
    if not ctx.allowed_on_cluster(Operation.DESCRIBE):
        echoed = [{"name": t.name, "partitions": [{"partition_index": p} for p in t.partition_indexes or ()]} for t in req.topics or ()]
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "error_message": _DENIED, "topics": echoed}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "topics": []}
