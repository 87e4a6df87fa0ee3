"""AddOffsetsToTxn (25), v0-4: the group's ``__consumer_offsets`` partition joins the
transaction, so that TxnOffsetCommit can write there. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2."""

from ..txn.model import fenced_error_for
from protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType
from ._txn import call, transactions

API_KEY = 25
NAME = "AddOffsetsToTxn"
VERSIONS = (0, 4)


async def handle(ctx, req):
    if ctx.broker.authorizer is not None:
        if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed}
        if not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id):
            return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    code, error = call(transactions(ctx).add_offsets, req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
    return {"throttle_time": 0, "error_code": error if error is not None else fenced_error_for(API_KEY, ctx.version, code)}
