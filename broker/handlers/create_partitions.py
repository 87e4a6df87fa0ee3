"""CreatePartitions (37), v0-3: grow a topic's partition count.

- Kafka's controller writes one record per new partition and at most 10,000
  per request (QuorumController.MAX_RECORDS_PER_USER_OP), counted across the
  topics in request order: a topic whose new partitions would pass that is
  refused with POLICY_VIOLATION "Unable to perform excessively large batch
  operation." and so is every later one that adds any. (Kafka 4.1 answers that
  topic UNKNOWN_SERVER_ERROR and yet keeps the partitions that fitted, up to
  the limit; here nothing of a refused topic is created.)
- New partition logs are opened off the loop, all or nothing.
- A manual assignment may name any node of a cluster (as CreateTopics'), each
  at most once per partition: INVALID_REPLICA_ASSIGNMENT otherwise.
"""

from protocol.errors import ErrorCode

from ..cluster import MAX_RECORDS_PER_REQUEST, TopicError
from ._assignments import assignable_nodes, bad_assignment

from ..security.authorizer import Operation, ResourceType

API_KEY = 37
NAME = "CreatePartitions"
VERSIONS = (0, 3)
_TOO_LARGE = "Unable to perform excessively large batch operation."


async def handle(ctx, req):
    cluster = ctx.cluster
    async with cluster.admin_lock:
        results = []
        budget = MAX_RECORDS_PER_REQUEST
        for t in req.topics or ():
            topic = cluster.topics.get(t.name)
            if ctx.broker.authorizer is not None and not ctx.allowed(Operation.ALTER, ResourceType.TOPIC, t.name):
                results.append({"name": t.name, "error_code": ErrorCode.topic_authorization_failed, "error_message": None})
                continue
            if topic is None:
                results.append({"name": t.name, "error_code": ErrorCode.unknown_topic_or_partition, "error_message": f"The topic '{t.name}' does not exist."})
                continue
            refused = t.assignments and bad_assignment(t.assignments, assignable_nodes(ctx))
            if refused:
                results.append({"name": t.name, "error_code": ErrorCode.invalid_replica_assignment, "error_message": refused})
                continue
            try:
                added = cluster.check_add_partitions(topic, t.count)
                if added > budget:
                    budget = 0
                    raise TopicError(ErrorCode.policy_violation, _TOO_LARGE)
                budget -= added
                await cluster.add_partitions_async(topic, t.count, validate_only=req.validate_only)
            except TopicError as exc:
                results.append({"name": t.name, "error_code": exc.code, "error_message": exc.message})
                continue
            results.append({"name": t.name, "error_code": ErrorCode.none, "error_message": None})
    return {"throttle_time": 0, "results": results}
