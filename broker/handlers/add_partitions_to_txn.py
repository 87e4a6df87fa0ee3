"""AddPartitionsToTxn (24), v0-5.

v0-3 are a producer's: one transactional id and its partitions, each answered
with the same error (KafkaApis answers UNKNOWN_TOPIC_OR_PARTITION for
partitions the cluster lacks and OPERATION_NOT_ATTEMPTED for the others,
without asking the coordinator). v4+ are a broker's: several transactions at
once, each possibly ``verify_only`` (is the partition in the ongoing
transaction?). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
"""

from protocol.errors import ErrorCode

from ..txn.model import client_version_for_add_partitions, fenced_error_for
from ..security.authorizer import Operation, ResourceType
from ._txn import call, transactions, unknown_partitions

API_KEY = 24
NAME = "AddPartitionsToTxn"
VERSIONS = (0, 5)


def _one(ctx, tid, pid, epoch, topics, verify_only: bool) -> dict[tuple[str, int], ErrorCode]:
    wanted = [(t.name, list(t.partitions or ())) for t in topics or ()]
    if ctx.broker.authorizer is not None and ctx.version <= 3:  # v4+ is for brokers: CLUSTER_ACTION, in handle
        if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return {(name, p): ErrorCode.transactional_id_authorization_failed for name, parts in wanted for p in parts}
        denied = {name for name, _ in wanted if not ctx.allowed(Operation.WRITE, ResourceType.TOPIC, name)}
        if denied:
            unknown = unknown_partitions(ctx, [(n, ps) for n, ps in wanted if n not in denied])
            unknown.update({(name, p): ErrorCode.topic_authorization_failed for name, parts in wanted if name in denied for p in parts})
            return {(name, p): unknown.get((name, p), ErrorCode.operation_not_attempted) for name, parts in wanted for p in parts}
    unknown = unknown_partitions(ctx, wanted)
    if unknown:
        return {(name, p): unknown.get((name, p), ErrorCode.operation_not_attempted) for name, parts in wanted for p in parts}
    partitions = [(name, p) for name, parts in wanted for p in parts]
    answer, error = call(transactions(ctx).add_partitions, tid, pid, epoch, partitions, verify_only=verify_only,
                         client_txn_version=client_version_for_add_partitions(ctx.version))
    if error is not None:
        return {tp: error for tp in partitions}
    return {tp: fenced_error_for(API_KEY, ctx.version, code) for tp, code in answer.items()}


def _results(codes: dict[tuple[str, int], ErrorCode]) -> list[dict]:
    by_topic: dict[str, list] = {}
    for (name, p), code in codes.items():
        by_topic.setdefault(name, []).append({"partition_index": p, "partition_error_code": code})
    return [{"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]


async def handle(ctx, req):
    if ctx.version <= 3:
        codes = _one(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch,
                     req.v3_and_below_topics, False)
        return {"throttle_time": 0, "results_by_topic_v3_and_below": _results(codes)}
    if not ctx.allowed_on_cluster(Operation.CLUSTER_ACTION):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "results_by_transaction": []}
    results = []
    for txn in req.transactions or ():
        codes = _one(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, bool(txn.verify_only))
        results.append({"transactional_id": txn.transactional_id, "topic_results": _results(codes)})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_transaction": results}
