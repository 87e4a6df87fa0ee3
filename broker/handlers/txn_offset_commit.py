"""TxnOffsetCommit (28), v0-5: offsets committed inside the producer's transaction.

The group's ``__consumer_offsets`` partition must be in the transaction
(AddOffsetsToTxn before; KIP-890's verification, as Kafka's group coordinator
asks the transaction coordinator): otherwise every partition gets
INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4). From v5 (transactions V2)
the client sends no AddOffsetsToTxn: the commit adds the partition itself. Then the group coordinator
validates the member as Kafka does for transactional commits and writes the
offsets in a transactional batch; they count once the transaction's COMMIT
marker is written (broker/coordinator/offsets.py).
"""

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..coordinator.service import OFFSETS_TOPIC
from ..security.authorizer import Operation, ResourceType
from ._groups import commit_answer, commit_partitions, coordinator, group_denied, topic_reader
from ._txn import call, transactions

API_KEY = 28
NAME = "TxnOffsetCommit"
VERSIONS = (0, 5)


async def handle(ctx, req):
    if ctx.broker.authorizer is not None:
        code = None
        if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            code = ErrorCode.transactional_id_authorization_failed
        elif group_denied(ctx, req.group_id):
            code = ErrorCode.group_authorization_failed
        if code is not None:
            return {"throttle_time": 0, "topics": commit_answer(req.topics, {(t.name, p.partition_index): code for t in req.topics or () for p in t.partitions or ()})}
    errors, wanted = commit_partitions(ctx.cluster, req.topics, topic_reader(ctx))
    groups = coordinator(ctx)
    if not req.group_id:
        errors.update({(c.topic, c.partition): ErrorCode.invalid_group_id for c in wanted})
    elif wanted:
        offsets_partition = (OFFSETS_TOPIC, groups.partition_for(req.group_id))
        verified, error = call(transactions(ctx).verify, req.transactional_id, req.producer_id, req.producer_epoch, [offsets_partition],
                               add=ctx.version >= 5)
        code = error if error is not None else verified.get(offsets_partition, ErrorCode.none)
        if code is ErrorCode.transaction_abortable and ctx.version < 4:
            code = ErrorCode.invalid_txn_state
        if code is not ErrorCode.none:
            errors.update({(c.topic, c.partition): code for c in wanted})
        else:
            try:
                answer = await groups.txn_offset_commit(
                    req.group_id, getattr(req, "member_id", ""), getattr(req, "generation_id", -1), getattr(req, "group_instance_id", None),
                    ctx.version, req.producer_id, req.producer_epoch, wanted,
                )
            except CoordinatorError as exc:
                errors.update({(c.topic, c.partition): exc.code for c in wanted})
            else:
                errors.update({(t, p): code for t, p, code in answer})
    return {"throttle_time": 0, "topics": commit_answer(req.topics, errors)}
