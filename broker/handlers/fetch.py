"""Fetch (1), v4-18.

- Long poll: if fewer than ``min_bytes`` are ready, the request waits up to
  ``max_wait_ms`` and is woken the moment a Produce appends to any partition
  it asked for, or the partition's topic is deleted. A fetch with no partition
  to wait on (none asked for, or all in error) is answered at once, as
  Kafka's does.
- ``max_bytes``, capped by the broker's ``fetch.max.bytes`` as Kafka caps it,
  bounds the whole answer and ``partition_max_bytes`` each partition, in whole
  batches; only the first batch of the first partition with data may exceed
  them (KIP-74), so the client can always progress.
- A partition whose topic was deleted under a parked fetch is answered
  UNKNOWN_TOPIC_OR_PARTITION, as Kafka does.
- Fetch sessions (KIP-227) are declined the way the KIP allows: a request for
  a new session gets session id 0, so the client keeps sending full fetches;
  an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.
- Isolation (v4+): every answer carries the partition's last stable offset
  (``PartitionLog.last_stable_offset``: the first offset of its earliest open
  transaction, or the high watermark). READ_COMMITTED (1) gets only whole
  batches below it (a fetch at or past it gets none, and no error), and the
  aborted transactions overlapping the offsets returned, as (producer id,
  first offset): an empty array when there are none, as Kafka's. The long
  poll counts only what it may return, so a READ_COMMITTED fetch waits until
  a transaction ends (a marker's append wakes it). READ_UNCOMMITTED (0) gets
  everything up to the high watermark and null aborted transactions.
- v13+ name topics by id; an unknown or zero id is UNKNOWN_TOPIC_ID per
  partition.
- Records are not copied: a partition's read of at least ``FILE_REGION_MIN``
  bytes is a ``FileRegion`` of the segment file, sent from the file as the
  client takes it (``sendfile`` on plain TCP, a piece at a time through a TLS
  transport: ``KafkaConnection._pump``); a smaller one is what
  ``PartitionLog.read`` returns (the ``pread`` bytes, or a view of them cut at
  the last whole batch), as it is, until ``ANSWER_MEMORY`` bytes of the answer
  are in memory, and a region of any size after that. So an answer never holds
  more than about ``ANSWER_MEMORY`` of records in memory, whatever the client
  asked for. ``protocol/fast.py``'s encoder hands either to the connection as
  one of the answer's buffers (see docs/architecture.md).
"""

from __future__ import annotations

import struct
import time
import uuid

from protocol.errors import ErrorCode
from storage.errors import LogClosedError, OffsetOutOfRangeError
from storage.log import FILE_REGION_MIN
from storage.segment import FileRegion
from storage.txn import batches_last_offset

from ..security.authorizer import Operation, ResourceType

API_KEY = 1
NAME = "Fetch"
VERSIONS = (4, 18)
_ZERO_ID = uuid.UUID(int=0)
READ_COMMITTED = 1


def _ms(value) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _log():
    from broker.logs import get_logger

    return get_logger("fetch")


def _partition_error(index: int, code: ErrorCode, part=None) -> dict:
    """An errored partition carries -1 offsets, as Kafka's FetchResponse.partitionResponse does."""
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


def _resolve(ctx, req):
    """[(topic key dict, [(partition request, Partition | None, error)])]."""
    cluster = ctx.cluster
    by_id = ctx.version >= 13
    authz = ctx.broker.authorizer
    leader_epoch = cluster.leadership.epoch
    plan = []
    for ft in req.topics or ():
        topic, name, missing = cluster.lookup(by_id, ft.topic_id if by_id else ft.topic)
        if by_id:
            key = {"topic_id": ft.topic_id or _ZERO_ID, "topic": name}
        else:
            key = {"topic": name, "topic_id": topic.topic_id if topic else _ZERO_ID}
        parts = []
        denied = authz is not None and (topic is not None or not by_id) and not ctx.allowed(Operation.READ, ResourceType.TOPIC, key["topic"])
        for fp in ft.partitions or ():
            if denied:
                parts.append((fp, None, ErrorCode.topic_authorization_failed))
            elif topic is None:
                parts.append((fp, None, missing))
            elif not 0 <= fp.partition < len(topic.partitions):
                parts.append((fp, None, ErrorCode.unknown_topic_or_partition))
            else:
                epoch = getattr(fp, "current_leader_epoch", -1)
                if epoch > leader_epoch:
                    parts.append((fp, topic.partitions[fp.partition], ErrorCode.unknown_leader_epoch))
                elif 0 <= epoch < leader_epoch:
                    parts.append((fp, topic.partitions[fp.partition], ErrorCode.fenced_leader_epoch))
                else:
                    parts.append((fp, topic.partitions[fp.partition], None))
        plan.append((key, parts))
    return plan


def _aborted(plog, offset: int, data) -> list[dict]:
    """The aborted transactions overlapping [offset, last offset in ``data``], as the answer lists them."""
    if not data or not plog.has_aborted_after(offset):
        return []
    upper = (data.last_offset if type(data) is FileRegion else batches_last_offset(data)) + 1
    return [{"producer_id": pid, "first_offset": first} for pid, first in plog.aborted_transactions(offset, upper)]


def _read(plan, max_bytes: int, committed: bool = False, files: bool = False):
    """Read every partition of the plan, as Kafka's ReplicaManager.readFromLog does.

    Each partition gets at most ``min(partition_max_bytes, what is left of
    max_bytes)`` in whole batches; until a partition has returned data the read
    may overshoot that with one whole batch (KIP-74), after that never. With
    ``committed`` (READ_COMMITTED) reads stop at each partition's last stable offset.
    With ``files``, large reads are ``FileRegion``s (``PartitionLog.read_region``).
    """
    budget = max(max_bytes, 0)
    total = 0
    held = 0  # bytes of the answer read into memory
    errors = False
    responses = []
    for key, parts in plan:
        out = []
        for fp, part, error in parts:
            if error is not None:
                out.append(_partition_error(fp.partition, error, part))
                errors = True
                continue
            plog = part.log
            try:
                limit = max(min(fp.partition_max_bytes, budget), 0)
                lso = plog.last_stable_offset
                upto = lso if committed else None
                full = held >= ANSWER_MEMORY  # the answer holds enough in memory: everything else from the files
                if files and (full or limit >= FILE_REGION_MIN):  # large reads from the file, small ones in memory
                    data = plog.read_region(fp.fetch_offset, limit, min_one=total == 0, upto=upto, least=1 if full else None)
                else:
                    data = plog.read(fp.fetch_offset, limit, min_one=total == 0, upto=upto)
                aborted = _aborted(plog, fp.fetch_offset, data) if committed else None
                hw = plog.log_end_offset
                log_start = plog.log_start_offset
            except OffsetOutOfRangeError:
                out.append(_partition_error(fp.partition, ErrorCode.offset_out_of_range, part))
                errors = True
                continue
            except LogClosedError:  # the topic was deleted under this request
                out.append(_partition_error(fp.partition, ErrorCode.unknown_topic_or_partition, part))
                errors = True
                continue
            except (ValueError, struct.error) as exc:  # a batch damaged on disk (a segment trusted after a clean shutdown)
                _log().warning("fetch found a damaged batch", topic=part.topic, partition=fp.partition, offset=fp.fetch_offset, error=str(exc))
                out.append(_partition_error(fp.partition, ErrorCode.corrupt_message, part))  # Kafka: CorruptRecordException
                errors = True
                continue
            if data:  # bytes, a memoryview of the pread buffer or a FileRegion: handed to the encoder as is
                n = len(data)
                budget -= n
                total += n
                if type(data) is not FileRegion:
                    held += n
            out.append(
                {
                    "partition_index": fp.partition,
                    "error_code": ErrorCode.none,
                    "high_watermark": hw,
                    "last_stable_offset": lso,
                    "log_start_offset": log_start,
                    "aborted_transactions": aborted,
                    "preferred_read_replica": -1,
                    "records": data,
                }
            )
        responses.append({**key, "partitions": out})
    return responses, total, errors


# an answer reads this much of its partitions into memory at most (beyond one partition's
# first batch); the rest comes as FileRegions, sent from the files as the client takes them
ANSWER_MEMORY = 1024 * 1024


async def handle(ctx, req):
    session_epoch = getattr(req, "session_epoch", -1)
    if session_epoch > 0:
        # we never hand out sessions, so an incremental fetch cannot name one
        return {"error_code": ErrorCode.fetch_session_id_not_found, "session_id": 0, "responses": [], "throttle_time": 0}
    plan = _resolve(ctx, req)
    deadline = time.monotonic() + _ms(req.max_wait) / 1000
    waiting_on = [part for _, parts in plan for _, part, err in parts if part is not None and err is None]
    committed = req.isolation_level == READ_COMMITTED
    while True:
        # asked after every wait: the answer is written as soon as the last read is done
        responses, total, errors = _read(plan, min(req.max_bytes, ctx.config.fetch_max_bytes), committed, ctx.conn.sends_files())
        # nothing to wait on answers at once, as Kafka's (its purgatory only holds fetches with partitions)
        if total >= req.min_bytes or errors or not waiting_on or ctx.conn.draining:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await ctx.cluster.wait_for_data(waiting_on, remaining)
    # sessions are declined: always answer with session id 0
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses}
