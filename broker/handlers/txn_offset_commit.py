"""TxnOffsetCommit (28), v0-5: offsets committed inside the producer's transaction.

The group's ``__consumer_offsets`` partition must be in the transaction
(AddOffsetsToTxn before; KIP-890's verification, as Kafka's group coordinator
asks the transaction coordinator): otherwise every partition gets
INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4). Then the group coordinator
validates the member as Kafka does for transactional commits and writes the
offsets in a transactional batch; they count once the transaction's COMMIT
marker is written (broker/coordinator/offsets.py).
"""

from protocol.errors import ErrorCode

from ..coordinator.common import CoordinatorError
from ..coordinator.offsets import CommitPartition
from ..coordinator.service import OFFSETS_TOPIC
from ._groups import coordinator
from ._txn import call, transactions

API_KEY = 28
NAME = "TxnOffsetCommit"
VERSIONS = (0, 5)


async def handle(ctx, req):
    cluster = ctx.cluster
    errors: dict[tuple[str, int], ErrorCode] = {}
    wanted: list[CommitPartition] = []
    for t in req.topics or ():
        topic = cluster.topics.get(t.name)
        for p in t.partitions or ():
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                errors[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
            else:
                wanted.append(CommitPartition(t.name, p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                              p.committed_metadata))
    groups = coordinator(ctx)
    if not req.group_id:
        errors.update({(c.topic, c.partition): ErrorCode.invalid_group_id for c in wanted})
    elif wanted:
        offsets_partition = (OFFSETS_TOPIC, groups.partition_for(req.group_id))
        verified, error = call(transactions(ctx).verify, req.transactional_id, req.producer_id, req.producer_epoch, [offsets_partition])
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
    topics = []
    for t in req.topics or ():
        topics.append({"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": errors[(t.name, p.partition_index)]}
                                                      for p in t.partitions or ()]})
    return {"throttle_time": 0, "topics": topics}
