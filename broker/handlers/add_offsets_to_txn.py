"""AddOffsetsToTxn (25), v0-4: the group's ``__consumer_offsets`` partition joins the
transaction, so that TxnOffsetCommit can write there. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2."""

from ..txn.shard import fenced_error_for
from ._txn import call, transactions

API_KEY = 25
NAME = "AddOffsetsToTxn"
VERSIONS = (0, 4)


async def handle(ctx, req):
    code, error = call(transactions(ctx).add_offsets, req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
    return {"throttle_time": 0, "error_code": error if error is not None else fenced_error_for(API_KEY, ctx.version, code)}
