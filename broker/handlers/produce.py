"""Produce (0), v3-13.

Record batches stay opaque: split into batches, each header and CRC-32C
checked, then handed to ``Partition.append`` as a client's, which validates
them, checks sequence numbers for idempotent producers and appends them with
offsets assigned by the log. Only batches bound for a compacted topic have
their records looked at, and only for their keys.

- acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS otherwise); with one broker
  the leader is the whole ISR, so -1 and 1 behave alike. In a cluster
  (broker/multinode/) the ISR is the live nodes, and acks=-1 with fewer of
  them than the topic's ``min.insync.replicas`` is NOT_ENOUGH_REPLICAS. acks=0 sends no
  response.
- Produce never creates topics, as in Kafka.
- A batch with a bad CRC, bad magic or torn length: CORRUPT_MESSAGE.
- A batch larger than the topic's ``max.message.bytes``: MESSAGE_TOO_LARGE.
- Idempotence: see ``broker/producers.py``; a duplicate gets its original
  base offset and is not appended twice.
- Topics with ``message.timestamp.type=LogAppendTime`` get the broker's
  time stamped into each batch.
- A compacted topic refuses records without a key: INVALID_RECORD with
  ``record_errors`` and ``error_message`` as Kafka's LogValidator fills them
  (v8+), and nothing of the partition's batches is appended.
- Transactions (KIP-890, as Kafka's partition leader does it): a
  transactional batch that would open the producer's transaction on a
  partition is appended only if the transaction coordinator says the
  partition was added to the producer's ongoing transaction (before v12,
  transactions V1) or adds it now (v12+, transactions V2); otherwise
  INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v11), or NOT_ENOUGH_REPLICAS
  (retriable) while the coordinator is busy completing it or loading. Batches
  of more than one producer in one request: INVALID_PRODUCER_ID_MAPPING.
- v13 names topics by id; an unknown or zero id is UNKNOWN_TOPIC_ID.
- A partition whose topic is deleted under the request: UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid

from protocol.errors import ErrorCode
from protocol.records import CorruptRecordError, split_batches
from storage.errors import LogClosedError

from ..partition import AppendError, AppendOrigin
from ..security.authorizer import Operation, ResourceType

API_KEY = 0
NAME = "Produce"
VERSIONS = (3, 13)
_ZERO_ID = uuid.UUID(int=0)
_CLIENT = AppendOrigin.CLIENT
_ADDS_PARTITIONS = 12  # transactions V2: from v12 a transactional batch adds its partition to the transaction


_MAGIC_OFFSET = 16  # baseOffset(8) batchLength(4) partitionLeaderEpoch(4), then magic


def _error(index: int, code: ErrorCode, message: str | None = None, log_start_offset: int = -1) -> dict:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time": -1, "log_start_offset": log_start_offset, "error_message": message}


# verification errors the client retries without a metadata refresh (Kafka's choice for older clients)
_RETRY_LATER = {ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                ErrorCode.not_coordinator}


def _verify_txn(ctx, transactional_id: str, part, batches, topic: str, index: int) -> ErrorCode | None:
    """The error for transactional batches the coordinator does not know of, or None to append them."""
    producers = {(h.producer_id, h.producer_epoch) for h, _ in batches if h.is_transactional and h.producer_id >= 0}
    if not producers:
        return None
    if len(producers) > 1:
        return ErrorCode.invalid_producer_id_mapping
    ((pid, epoch),) = producers
    if part.log.in_transaction(pid):
        entry = part.producers.entries.get(pid)
        if entry is not None and entry.epoch == epoch:
            return None  # verified when its transaction began here
        # another epoch: under transactions V2 the producer's next transaction may come before the
        # last one's marker is written here, and must not join it (the coordinator answers
        # CONCURRENT_TRANSACTIONS until it is); Kafka's hasOngoingTransaction checks the epoch too
    from ..coordinator.errors import CoordinatorError

    try:
        code = ctx.broker.transactions.verify(transactional_id, pid, epoch, [(topic, index)], add=ctx.version >= _ADDS_PARTITIONS).get(
            (topic, index), ErrorCode.none)
    except CoordinatorError as exc:
        code = exc.code
    if code is ErrorCode.none:
        return None
    if code in _RETRY_LATER:
        return ErrorCode.not_enough_replicas
    if code is ErrorCode.producer_fenced:  # as Kafka's verification answers a produce
        return ErrorCode.invalid_producer_epoch
    if code is ErrorCode.transaction_abortable and ctx.version < 11:
        return ErrorCode.invalid_txn_state
    return code


def produce_partition(ctx, topic, index: int, records, txn: str | None = None) -> dict:
    if topic is None or not 0 <= index < len(topic.partitions):
        return _error(index, ErrorCode.unknown_topic_or_partition)
    part = topic.partitions[index]

    def fail(code, message=None):  # once the partition is known, errors carry its log start offset
        return _error(index, code, message, part.log.log_start_offset)

    if topic.internal:
        return fail(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic.name}")
    if not records:
        return _error(index, ErrorCode.invalid_record, "no record batch in the request")
    try:
        batches = split_batches(records)  # checks every batch's framing, magic and CRC
    except CorruptRecordError as exc:
        if len(records) > _MAGIC_OFFSET and records[_MAGIC_OFFSET] != 2:  # the first batch's magic: Kafka's own answer
            return _error(index, ErrorCode.invalid_record, f"Produce requests with version 3 and above only accept record batches with magic 2, not {records[_MAGIC_OFFSET]}")
        ctx.log.info("corrupt batch refused", topic=topic.name, partition=index, reason=str(exc))
        return _error(index, ErrorCode.corrupt_message, str(exc))  # Kafka: no log start offset here
    if txn is not None:
        refused = _verify_txn(ctx, txn, part, batches, topic.name, index)
        if refused is not None:
            return fail(refused)
    try:
        appended = part.append(batches, _CLIENT)
    except AppendError as exc:
        if exc.code is ErrorCode.corrupt_message:
            ctx.log.info("corrupt batch refused", topic=topic.name, partition=index, reason=exc.message)
        refused = _error(index, exc.code, exc.message, exc.log_start_offset)
        if exc.record_errors is not None:
            refused["record_errors"] = exc.record_errors
        return refused
    except LogClosedError:  # the topic was deleted under this request
        return _error(index, ErrorCode.unknown_topic_or_partition)
    except OSError as exc:
        ctx.log.error("append failed", topic=topic.name, partition=index, error=str(exc))
        return fail(ErrorCode.kafka_storage_error, str(exc))
    return {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": appended.base_offset,
        "log_append_time": appended.log_append_time,
        "log_start_offset": appended.log_start_offset,
    }


def _transactional(req) -> bool:
    """Does any partition's first batch carry the transactional attribute? (Kafka's hasTransactionalRecords)"""
    for td in req.topic_data or ():
        for pd in td.partition_data or ():
            records = pd.records
            if records is not None and len(records) > 22 and records[22] & 0x10:
                return True
    return False


def _denied_all(req, by_id: bool, code: ErrorCode) -> dict:
    return {
        "throttle_time": 0,
        "responses": [
            {"name": "" if by_id else td.name, "topic_id": (td.topic_id or _ZERO_ID) if by_id else _ZERO_ID, "partition_responses": [_error(pd.index, code) for pd in td.partition_data or ()]}
            for td in req.topic_data or ()
        ],
    }


def _min_isr(topic) -> int:
    try:
        return int(topic.config.extra.get("min.insync.replicas", "1"))
    except ValueError:
        return 1


async def handle(ctx, req):
    cluster = ctx.cluster
    acks = req.acks
    by_id = ctx.version >= 13
    authz = ctx.broker.authorizer
    if authz is not None:
        # as Kafka: only transactional records need WRITE on the transactional id (and one must be named)
        txn = getattr(req, "transactional_id", None)
        if _transactional(req) and (txn is None or not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn)):
            return None if acks == 0 else _denied_all(req, by_id, ErrorCode.transactional_id_authorization_failed)
    view = ctx.broker.view
    # a cluster (broker/multinode/): acks=all needs min.insync.replicas live nodes, as Kafka's ISR check
    isr = len(view.live_ids()) if view is not None and acks == -1 else None
    responses = []
    for td in req.topic_data or ():
        topic_id = td.topic_id if by_id else None
        topic, name, missing = cluster.lookup(by_id, topic_id if by_id else td.name)
        parts = []
        denied = authz is not None and (topic is not None or not by_id) and not ctx.allowed(Operation.WRITE, ResourceType.TOPIC, name)
        for pd in td.partition_data or ():
            if acks not in (-1, 0, 1):
                parts.append(_error(pd.index, ErrorCode.invalid_required_acks))
            elif denied:
                parts.append(_error(pd.index, ErrorCode.topic_authorization_failed))
            elif topic is None:
                parts.append(_error(pd.index, missing))
            elif isr is not None and isr < _min_isr(topic):
                parts.append(_error(pd.index, ErrorCode.not_enough_replicas, f"The size of the current ISR {isr} is insufficient to satisfy "
                                    f"the min.isr requirement of {_min_isr(topic)} for partition {name}-{pd.index}"))
            else:
                parts.append(produce_partition(ctx, topic, pd.index, pd.records, getattr(req, "transactional_id", None)))
        responses.append({"name": name, "topic_id": topic_id or _ZERO_ID, "partition_responses": parts})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time": 0}
