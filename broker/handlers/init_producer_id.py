"""InitProducerId (22), v0-5.

Idempotent producers get a fresh producer id with epoch 0; ids are never
reused across restarts (they are reserved in blocks in ``meta.json``). A
producer re-initialising with its id and epoch (KIP-360, v3+) gets the epoch
bumped. Transactions are not served yet: a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, so the client fails fast and says why.
"""

from protocol.errors import ErrorCode

API_KEY = 22
NAME = "InitProducerId"
VERSIONS = (0, 5)
_MAX_EPOCH = 32767


async def handle(ctx, req):
    if req.transactional_id is not None:
        ctx.log.warning("transactions are not supported", transactional_id=req.transactional_id)
        return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed, "producer_id": -1, "producer_epoch": -1}
    pid = getattr(req, "producer_id", -1)
    epoch = getattr(req, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
        return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": pid, "producer_epoch": epoch + 1}
    pid = ctx.cluster.allocate_producer_id()
    return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": pid, "producer_epoch": 0}
