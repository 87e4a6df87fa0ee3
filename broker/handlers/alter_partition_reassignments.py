"""AlterPartitionReassignments (45), v0-1, answered as Kafka 4.x's controller does.

Kafka checks each named partition in turn: an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION; null replicas (cancel) with no reassignment in
progress is NO_REASSIGNMENT_IN_PROGRESS; a target that is empty, names a broker
that is not registered or names one twice is INVALID_REPLICA_ASSIGNMENT; with
v1's ``allow_replication_factor_change`` false (KIP-860), a target of another
size than the current replicas is INVALID_REPLICATION_FACTOR. ALTER on the
cluster is needed, else every partition and the top-level error are
CLUSTER_AUTHORIZATION_FAILED.

What a valid target does here. Every replica of a partition is the same log on
one disk, so a reassignment has nothing to copy and is complete when it is
answered (ListPartitionReassignments never lists one in progress). On one broker
the only valid target is the broker itself: nothing changes. On a cluster
(broker/multinode/) every node holds every partition and one node leads them all,
so a target must name every node (in any order; Metadata keeps listing them in
id order): any other set is INVALID_REPLICA_ASSIGNMENT, saying so. docs/multinode.md.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation
from ._assignments import assignable_nodes

API_KEY = 45
NAME = "AlterPartitionReassignments"
VERSIONS = (0, 1)
_DENIED = "Cluster authorization failed."


def _check(cluster, nodes: list[int], topic: str, partition: int, target, allow_rf_change: bool) -> tuple[ErrorCode, str | None]:
    t = cluster.topics.get(topic)
    if t is None:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}."
    if not 0 <= partition < len(t.partitions):
        return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}:{partition}."
    if target is None:  # cancel: nothing is ever in progress
        return ErrorCode.no_reassignment_in_progress, None  # Kafka leaves the error's own message out
    if not target:
        return ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
    previous = None
    for broker in sorted(target):
        if broker not in nodes:
            return ErrorCode.invalid_replica_assignment, f"The manual partition assignment includes broker {broker}, but no such broker is registered."
        if broker == previous:
            return ErrorCode.invalid_replica_assignment, f"The manual partition assignment includes the broker {broker} more than once."
        previous = broker
    if not allow_rf_change and len(target) != len(nodes):
        return ErrorCode.invalid_replication_factor, f"The replication factor is changed from {len(nodes)} to {len(target)}"
    if len(target) != len(nodes):  # a cluster node: every node holds every partition
        listed = ", ".join(map(str, nodes))
        return ErrorCode.invalid_replica_assignment, (
            f"Every node of this kafkalite cluster holds every partition (one node leads them all): a replica list must name every node ({listed}).")
    return ErrorCode.none, None


async def handle(ctx, req):
    topics = req.topics or ()
    allow = req.allow_replication_factor_change if ctx.version >= 1 else True  # v0 has no such field
    base = {"throttle_time": 0, "allow_replication_factor_change": allow}
    if not ctx.allowed_on_cluster(Operation.ALTER):
        results = [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": ErrorCode.cluster_authorization_failed,
                                                     "error_message": _DENIED} for p in t.partitions or ()]} for t in topics]
        return {**base, "error_code": ErrorCode.cluster_authorization_failed, "error_message": _DENIED, "responses": results}
    nodes = sorted(assignable_nodes(ctx))
    results = []
    for t in topics:
        partitions = []
        for p in t.partitions or ():
            code, message = _check(ctx.cluster, nodes, t.name, p.partition_index, p.replicas, allow)
            partitions.append({"partition_index": p.partition_index, "error_code": code, "error_message": message})
        results.append({"name": t.name, "partitions": partitions})
    return {**base, "error_code": ErrorCode.none, "error_message": None, "responses": results}
