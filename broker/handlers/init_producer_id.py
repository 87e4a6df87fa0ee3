"""InitProducerId (22), v0-5.

Idempotent producers get a fresh producer id with epoch 0; ids are never
reused across restarts (they are reserved in blocks in ``meta.json``). A
producer re-initialising with its id and epoch (KIP-360, v3+) gets the epoch
bumped. A transactional id goes to the transaction coordinator
(broker/txn/service.py): its producer id and epoch, the older epoch fenced,
an open transaction aborted first (CONCURRENT_TRANSACTIONS meanwhile: the
client retries). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4.
"""

from protocol.errors import ErrorCode

from ..txn.model import fenced_error_for
from ..security.authorizer import Operation, ResourceType
from ._groups import ms
from ._txn import call, transactions

API_KEY = 22
NAME = "InitProducerId"
VERSIONS = (0, 5)
_MAX_EPOCH = 32767


async def handle(ctx, req):
    pid = getattr(req, "producer_id", -1)
    epoch = getattr(req, "producer_epoch", -1)
    authz = ctx.broker.authorizer
    if authz is not None:
        # a transactional producer needs WRITE on its id; an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic
        if req.transactional_id is not None:
            if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
                return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed, "producer_id": -1, "producer_epoch": -1}
        elif not ctx.allowed_on_cluster(Operation.IDEMPOTENT_WRITE) and not authz.authorize_by_resource_type(ctx.principal, ctx.host, Operation.WRITE, ResourceType.TOPIC):
            return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "producer_id": -1, "producer_epoch": -1}
    if req.transactional_id is not None:
        answer, error = call(transactions(ctx).init_producer_id, req.transactional_id, ms(req.transaction_timeout), pid, epoch)
        if error is not None:
            return {"throttle_time": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}
        return {"throttle_time": 0, "error_code": fenced_error_for(API_KEY, ctx.version, answer.error),
                "producer_id": answer.producer_id, "producer_epoch": answer.producer_epoch}
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
        return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": pid, "producer_epoch": epoch + 1}
    pid = ctx.cluster.allocate_producer_id()
    return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": pid, "producer_epoch": 0}
