"""DescribeTransactions (65), v0: each transactional id's state, timeout, start time,
producer id and epoch, and partitions. An id the coordinator does not know:
TRANSACTIONAL_ID_NOT_FOUND; before any transaction (no ``__transaction_state``):
COORDINATOR_NOT_AVAILABLE."""

from ._txn import transactions

API_KEY = 65
NAME = "DescribeTransactions"
VERSIONS = (0, 0)


async def handle(ctx, req):
    coordinator = transactions(ctx)
    states = []
    for d in coordinator.describe(list(req.transactional_ids or ())):
        states.append({
            "error_code": d.error, "transactional_id": d.transactional_id, "transaction_state": d.state,
            "transaction_timeout": d.timeout_ms, "transaction_start_time": d.start_ms, "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch, "topics": [{"topic": t, "partitions": list(ps)} for t, ps in d.topics],
        })
    return {"throttle_time": 0, "transaction_states": states}

