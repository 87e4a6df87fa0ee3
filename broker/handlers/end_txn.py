"""EndTxn (26), v0-5: commit or abort the producer's transaction. The answer leaves
once PREPARE_COMMIT or PREPARE_ABORT is written; the markers and the COMPLETE_*
record follow (broker/txn/service.py). v5 (transaction version 2) bumps the
epoch and answers the producer id and epoch to use next."""

from ..txn.model import client_version_for_end_txn, fenced_error_for
from protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType
from ._txn import call, transactions

API_KEY = 26
NAME = "EndTxn"
VERSIONS = (0, 5)


async def handle(ctx, req):
    if ctx.broker.authorizer is not None and not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed, "producer_id": -1, "producer_epoch": -1}
    answer, error = call(transactions(ctx).end_txn, req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed),
                         client_version_for_end_txn(ctx.version))
    if error is not None:
        return {"throttle_time": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": fenced_error_for(API_KEY, ctx.version, answer.error),
            "producer_id": answer.producer_id, "producer_epoch": answer.producer_epoch}
