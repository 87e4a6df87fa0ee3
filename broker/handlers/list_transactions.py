"""ListTransactions (66), v0-2: the transactions of every ``__transaction_state``
partition, filtered by state names (unknown ones are returned), producer ids,
v1's minimum duration and v2's transactional id pattern (KIP-1152; an invalid
one: INVALID_REGULAR_EXPRESSION). None before any transaction."""

from protocol.errors import ErrorCode

from ._groups import ms
from ._txn import transactions

from ..security.authorizer import Operation, ResourceType

API_KEY = 66
NAME = "ListTransactions"
VERSIONS = (0, 2)


async def handle(ctx, req):
    states = list(req.state_filters or ())
    listings = transactions(ctx).list_transactions(
        states, list(req.producer_id_filters or ()), ms(getattr(req, "duration_filter", -1)), getattr(req, "transactional_id_pattern", None) or None,
    )
    error = next((x.error for x in listings if x.error is not ErrorCode.none), ErrorCode.none)
    unknown = listings[0].unknown_state_filters if listings else ()
    found = [] if error is not ErrorCode.none else [
        {"transactional_id": tid, "producer_id": pid, "transaction_state": state} for x in listings for tid, pid, state in x.transactions
    ]
    if ctx.broker.authorizer is not None:  # only the ids one may DESCRIBE
        found = [f for f in found if ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, f["transactional_id"], audit=False)]
    return {"throttle_time": 0, "error_code": error, "unknown_state_filters": list(unknown), "transaction_states": found}
