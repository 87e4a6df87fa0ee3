"""CreateTopics (19), v2-7.

- Names follow Kafka's rules (INVALID_TOPIC_EXCEPTION); an existing name
  answers TOPIC_ALREADY_EXISTS.
- ``num_partitions`` -1 takes ``--num-partitions``; ``replication_factor``
  -1 or 1 is fine, anything larger is INVALID_REPLICATION_FACTOR (one broker).
- Manual assignments may only name this broker, or the nodes of a cluster (INVALID_REPLICA_ASSIGNMENT).
- Topic configs are checked against the log engine's (INVALID_CONFIG).
- ``validate_only`` checks everything and creates nothing.
- v5+ return the partition count, replication factor and configs.
- Kafka's controller limits one request (QuorumController.MAX_RECORDS_PER_USER_OP,
  10,000): more than 10,000 partitions asked for across all topics refuses every
  topic with POLICY_VIOLATION "Excessively large number of partitions per
  request." before any other check; then, counting one record per valid topic,
  per partition and per config, more than 10,000 refuses every topic with
  POLICY_VIOLATION "Unable to perform excessively large batch operation."
  (both checked against Kafka 4.1, validate_only included).
- Partition logs are opened off the loop, a topic at a time, all or nothing.
"""

from protocol.errors import ErrorCode

from ..cluster import MAX_RECORDS_PER_REQUEST, TopicError
from ..security.authorizer import Operation, ResourceType
from ._assignments import assignable_nodes, bad_assignment
from ._config_entries import topic_config_entries

API_KEY = 19
NAME = "CreateTopics"
VERSIONS = (2, 7)


def _fail(name: str, code: ErrorCode, message: str) -> dict:
    return {"name": name, "error_code": code, "error_message": message, "num_partitions": -1, "replication_factor": -1, "configs": None}


def _asked_partitions(ct, default: int) -> int:
    """What Kafka's validateTotalNumberOfPartitions counts for one topic."""
    if ct.assignments:
        return len(ct.assignments)
    if ct.num_partitions == -1:
        return default
    return max(ct.num_partitions, 0)


def _refuse_all(topics, message: str) -> dict:
    return {"throttle_time": 0, "topics": [_fail(ct.name, ErrorCode.policy_violation, message) for ct in topics]}


async def handle(ctx, req):
    cluster = ctx.cluster
    topics = req.topics or ()
    if sum(_asked_partitions(ct, ctx.config.num_partitions) for ct in topics) > MAX_RECORDS_PER_REQUEST:
        return _refuse_all(topics, "Excessively large number of partitions per request.")
    async with cluster.admin_lock:
        return await _create(ctx, req, topics)


async def _create(ctx, req, topics):
    cluster = ctx.cluster
    view = ctx.broker.view
    nodes = assignable_nodes(ctx)
    live = len(view.live_ids()) if view is not None else 1
    replicas = len(nodes)
    results = []
    plans = []  # (index in results, name, partitions, configs) of the topics that passed every check
    seen = set()
    for ct in topics:
        name = ct.name
        if name in seen:
            results.append(_fail(name, ErrorCode.invalid_request, f"Create topics request from client contains a duplicate topic: {name}"))
            continue
        seen.add(name)
        if ctx.broker.authorizer is not None and not (
            ctx.allowed_on_cluster(Operation.CREATE) or ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name)
        ):
            results.append(_fail(name, ErrorCode.topic_authorization_failed, "Authorization failed."))
            continue
        partitions = ct.num_partitions
        factor = ct.replication_factor
        if ct.assignments:
            if partitions != -1 or factor != -1:
                results.append(_fail(name, ErrorCode.invalid_request, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."))
                continue
            refused = bad_assignment(ct.assignments, nodes)
            if refused:
                results.append(_fail(name, ErrorCode.invalid_replica_assignment, refused))
                continue
            partitions = len(ct.assignments)
            factor = max(len(a.broker_ids) for a in ct.assignments)
        if partitions == -1:
            partitions = ctx.config.num_partitions
        if factor == -1:
            factor = 1
        if factor <= 0:
            results.append(_fail(name, ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."))
            continue
        if factor > live:
            results.append(_fail(name, ErrorCode.invalid_replication_factor, f"Unable to replicate the partition {factor} time(s): The target replication factor of {factor} cannot be reached because only {live} broker(s) are registered."))
            continue
        configs = {c.name: c.value for c in ct.configs or ()}
        try:
            cluster.check_new_topic(name, partitions, configs)
        except TopicError as exc:
            results.append(_fail(name, exc.code, exc.message))
            continue
        plans.append((len(results), name, partitions, configs))
        results.append(None)
    # the records Kafka's controller would write: a topic record, one per partition, one per config
    if sum(1 + partitions + len(configs) for _, _, partitions, configs in plans) > MAX_RECORDS_PER_REQUEST:
        return _refuse_all(topics, "Unable to perform excessively large batch operation.")
    for i, name, partitions, configs in plans:
        try:
            topic = await cluster.create_topic_async(name, partitions, configs, validate_only=req.validate_only)
        except TopicError as exc:
            results[i] = _fail(name, exc.code, exc.message)
            continue
        if ctx.broker.authorizer is not None and not ctx.allowed(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
            # created, but its configuration is not told (Kafka's ReplicationControlManager)
            results[i] = {"name": name, "topic_id": topic.topic_id, "error_code": ErrorCode.none, "error_message": None,
                          "num_partitions": partitions, "replication_factor": replicas, "configs": [], "topic_config_error_code": ErrorCode.topic_authorization_failed}
            continue
        results[i] = {
            "name": name,
            "topic_id": topic.topic_id,
            "error_code": ErrorCode.none,
            "error_message": None,
            "num_partitions": partitions,
            "replication_factor": replicas,
            "configs": [
                {k: e[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
                for e in topic_config_entries(ctx, topic.overrides, topic.config)
            ],
        }
    return {"throttle_time": 0, "topics": results}
