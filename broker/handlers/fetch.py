"""Fetch (1), v4-18.

- Long poll: if fewer than ``min_bytes`` are ready, the request waits up to
  ``max_wait_ms`` and is woken the moment a Produce appends to any partition
  it asked for.
- ``max_bytes`` and ``partition_max_bytes`` bound the answer, but the first
  partition with data always gets at least one whole batch (KIP-74).
- Fetch sessions (KIP-227) are declined the way the KIP allows: a request for
  a new session gets session id 0, so the client keeps sending full fetches;
  an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.
- No transactions, so the last stable offset is the high watermark and there
  are never aborted transactions.
- v13+ name topics by id.
"""

from __future__ import annotations

import time
import uuid

from protocol.errors import ErrorCode
from storage.errors import OffsetOutOfRangeError

from ..cluster import LEADER_EPOCH

API_KEY = 1
NAME = "Fetch"
VERSIONS = (4, 18)
_ZERO_ID = uuid.UUID(int=0)


def _ms(value) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


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
    plan = []
    for ft in req.topics:
        topic_id = getattr(ft, "topic_id", None)
        if topic_id is not None and ctx.version >= 13:
            topic = cluster.by_id.get(topic_id)
            missing = ErrorCode.unknown_topic_id
            key = {"topic_id": topic_id, "topic": topic.name if topic else ""}
        else:
            topic = cluster.topics.get(ft.topic)
            missing = ErrorCode.unknown_topic_or_partition
            key = {"topic": ft.topic, "topic_id": topic.topic_id if topic else _ZERO_ID}
        parts = []
        for fp in ft.partitions:
            if topic is None:
                parts.append((fp, None, missing))
            elif not 0 <= fp.partition < len(topic.partitions):
                parts.append((fp, None, ErrorCode.unknown_topic_or_partition))
            else:
                epoch = getattr(fp, "current_leader_epoch", -1)
                if epoch > LEADER_EPOCH:
                    parts.append((fp, topic.partitions[fp.partition], ErrorCode.unknown_leader_epoch))
                elif 0 <= epoch < LEADER_EPOCH:
                    parts.append((fp, topic.partitions[fp.partition], ErrorCode.fenced_leader_epoch))
                else:
                    parts.append((fp, topic.partitions[fp.partition], None))
        plan.append((key, parts))
    return plan


def _read(plan, max_bytes: int):
    budget = max_bytes
    total = 0
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
            data = b""
            if budget > 0 or total == 0:
                limit = min(fp.partition_max_bytes, budget) if total else fp.partition_max_bytes
                try:
                    # only the first partition with data may overshoot the limits (KIP-74)
                    data = plog.read(fp.fetch_offset, max(limit, 1), min_one=total == 0)
                except OffsetOutOfRangeError:
                    out.append(_partition_error(fp.partition, ErrorCode.offset_out_of_range, part))
                    errors = True
                    continue
                data = bytes(data)
                budget -= len(data)
                total += len(data)
            hw = plog.log_end_offset
            out.append(
                {
                    "partition_index": fp.partition,
                    "error_code": ErrorCode.none,
                    "high_watermark": hw,
                    "last_stable_offset": hw,
                    "log_start_offset": plog.log_start_offset,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": data,
                }
            )
        responses.append({**key, "partitions": out})
    return responses, total, errors


async def handle(ctx, req):
    session_id = getattr(req, "session_id", 0)
    session_epoch = getattr(req, "session_epoch", -1)
    if session_epoch > 0:
        # we never hand out sessions, so an incremental fetch cannot name one
        return {"error_code": ErrorCode.fetch_session_id_not_found, "session_id": 0, "responses": [], "throttle_time": 0}
    plan = _resolve(ctx, req)
    max_wait = _ms(req.max_wait) / 1000
    deadline = time.monotonic() + max_wait
    waiting_on = [part for _, parts in plan for _, part, err in parts if part is not None and err is None]
    while True:
        responses, total, errors = _read(plan, req.max_bytes)
        if total >= req.min_bytes or errors or ctx.conn.draining:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await ctx.cluster.wait_for_data(waiting_on, remaining)
    del session_id  # sessions are declined: always answer with id 0
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses}
