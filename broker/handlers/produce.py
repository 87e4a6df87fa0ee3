"""Produce (0), v3-13.

Record batches stay opaque: split into batches, each header and CRC-32C
checked, sequence numbers checked for idempotent producers, then appended
with offsets assigned by the log. Only batches bound for a compacted topic
have their records looked at, and only for their keys.

- acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS otherwise); with one broker
  the leader is the whole ISR, so -1 and 1 behave alike. acks=0 sends no
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
- v13 names topics by id; an unknown or zero id is UNKNOWN_TOPIC_ID.
- A partition whose topic is deleted under the request: UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid

from protocol.errors import ErrorCode
from protocol.records import CorruptRecordError, keyless_records, split_batches, validate_produce_batch
from storage.errors import LogClosedError

from ..cluster import LEADER_EPOCH

API_KEY = 0
NAME = "Produce"
VERSIONS = (3, 13)
_ZERO_ID = uuid.UUID(int=0)


_MAGIC_OFFSET = 16  # baseOffset(8) batchLength(4) partitionLeaderEpoch(4), then magic


def _error(index: int, code: ErrorCode, message: str | None = None, log_start_offset: int = -1) -> dict:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time": -1, "log_start_offset": log_start_offset, "error_message": message}


def _keyless_error(topic, index: int, batches, log_start_offset: int) -> dict | None:
    """INVALID_RECORD for the first batch holding records without a key, as Kafka's LogValidator."""
    for _, batch in batches:
        missing = keyless_records(batch)
        if missing:
            message = f"Compacted topic cannot accept message without key in topic partition {topic.name}-{index}"
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in missing[:3])
            return {
                **_error(
                    index,
                    ErrorCode.invalid_record,
                    f"One or more records have been rejected due to {len(missing)} record errors in total, "
                    f"and only showing the first three errors at most: [{shown}]",
                    log_start_offset,
                ),
                "record_errors": [{"batch_index": i, "batch_index_error_message": message} for i in missing],
            }
    return None


def produce_partition(ctx, topic, index: int, records) -> dict:
    if topic is None or not 0 <= index < len(topic.partitions):
        return _error(index, ErrorCode.unknown_topic_or_partition)
    part = topic.partitions[index]

    def fail(code, message=None):  # once the partition is known, errors carry its log start offset
        return _error(index, code, message, part.log.log_start_offset)

    if topic.internal:
        return fail(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic.name}")
    if not records:
        return _error(index, ErrorCode.invalid_record, "no record batch in the request")
    if len(records) > _MAGIC_OFFSET and records[_MAGIC_OFFSET] != 2:
        return _error(index, ErrorCode.invalid_record, f"Produce requests with version 3 and above only accept record batches with magic 2, not {records[_MAGIC_OFFSET]}")
    try:
        batches = split_batches(records)
    except CorruptRecordError as exc:
        ctx.log.info("corrupt batch refused", topic=topic.name, partition=index, reason=str(exc))
        return _error(index, ErrorCode.corrupt_message, str(exc))  # Kafka: no log start offset here
    config = topic.config
    for header, _ in batches:
        problem = validate_produce_batch(header)
        if problem:
            return fail(ErrorCode.invalid_record, problem)
        if header.size > config.max_message_bytes:
            return fail(ErrorCode.message_too_large, f"batch of {header.size} bytes exceeds max.message.bytes={config.max_message_bytes}")
    if config.compact:
        try:
            refused = _keyless_error(topic, index, batches, part.log.log_start_offset)
        except CorruptRecordError as exc:
            ctx.log.info("corrupt batch refused", topic=topic.name, partition=index, reason=str(exc))
            return _error(index, ErrorCode.corrupt_message, str(exc))
        if refused is not None:
            return refused
    producers = part.producers
    for header, _ in batches:
        if header.producer_id >= 0 and header.base_sequence >= 0:
            code, dup = producers.check(header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence)
            if code is not ErrorCode.none:
                return fail(code)
            if dup is not None:
                if len(batches) != 1:
                    return fail(ErrorCode.duplicate_sequence_number)
                return {
                    "index": index,
                    "error_code": ErrorCode.none,
                    "base_offset": dup.first_offset,
                    "log_append_time": -1,
                    "log_start_offset": part.log.log_start_offset,
                }
    try:
        result = part.log.append(batches, leader_epoch=LEADER_EPOCH)
    except LogClosedError:  # the topic was deleted under this request
        return _error(index, ErrorCode.unknown_topic_or_partition)
    except OSError as exc:
        ctx.log.error("append failed", topic=topic.name, partition=index, error=str(exc))
        return fail(ErrorCode.kafka_storage_error, str(exc))
    offset = result.base_offset
    for header, _ in batches:
        last = offset + header.last_offset_delta
        if header.producer_id >= 0 and header.base_sequence >= 0:
            producers.update(
                header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence,
                offset, last, header.max_timestamp,
            )
        offset = last + 1
    part.notify()
    return {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": result.base_offset,
        "log_append_time": result.log_append_time_ms,
        "log_start_offset": part.log.log_start_offset,
    }


async def handle(ctx, req):
    cluster = ctx.cluster
    acks = req.acks
    by_id = ctx.version >= 13
    responses = []
    for td in req.topic_data or ():
        if by_id:
            topic_id = td.topic_id  # kio reads the zero id as None
            topic = cluster.by_id.get(topic_id) if topic_id is not None else None
            missing = ErrorCode.unknown_topic_id
            name = topic.name if topic else ""
        else:
            topic_id = None
            name = td.name
            topic = cluster.topics.get(name)
            missing = ErrorCode.unknown_topic_or_partition
        parts = []
        for pd in td.partition_data or ():
            if acks not in (-1, 0, 1):
                parts.append(_error(pd.index, ErrorCode.invalid_required_acks))
            elif topic is None:
                parts.append(_error(pd.index, missing))
            else:
                parts.append(produce_partition(ctx, topic, pd.index, pd.records))
        responses.append({"name": name, "topic_id": topic_id or _ZERO_ID, "partition_responses": parts})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time": 0}
