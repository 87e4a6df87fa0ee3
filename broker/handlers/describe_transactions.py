"""DescribeTransactions (65), v0: each transactional id's state, timeout, start time,
producer id and epoch, and partitions. An id the coordinator does not know:
TRANSACTIONAL_ID_NOT_FOUND; before any transaction (no ``__transaction_state``):
COORDINATOR_NOT_AVAILABLE."""

from ._txn import transactions

from protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType

API_KEY = 65
NAME = "DescribeTransactions"
VERSIONS = (0, 0)


async def handle(ctx, req):
    coordinator = transactions(ctx)
    states = []
    authz = ctx.broker.authorizer
    for d in coordinator.describe(list(req.transactional_ids or ())):
        if authz is not None:  # as Kafka: DESCRIBE on the id, and only the partitions of topics one may DESCRIBE
            if not ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, d.transactional_id):
                states.append({"error_code": ErrorCode.transactional_id_authorization_failed, "transactional_id": d.transactional_id, "transaction_state": "",
                               "transaction_timeout": 0, "transaction_start_time": -1, "producer_id": -1, "producer_epoch": -1, "topics": []})
                continue
            d_topics = [(t, ps) for t, ps in d.topics if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t)]
        else:
            d_topics = d.topics
        states.append({
            "error_code": d.error, "transactional_id": d.transactional_id, "transaction_state": d.state,
            "transaction_timeout": d.timeout_ms, "transaction_start_time": d.start_ms, "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch, "topics": [{"topic": t, "partitions": list(ps)} for t, ps in d_topics],
        })
    return {"throttle_time": 0, "transaction_states": states}

