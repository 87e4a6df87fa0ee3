"""What the five share-state RPCs (83-87) have in common (Kafka 4.4's ``ShareCoordinatorService``).

Each asks the share coordinator about share-partition keys, one at a time:
the request's topics and partitions are walked, each partition answered by
``op(coordinator, group_id, topic_id, partition_data) -> dict`` (the
partition's answer fields beyond partition, error code and message) or a
``ShareStateError``. Kafka's rules before any key: CLUSTER_ACTION on the
cluster (CLUSTER_AUTHORIZATION_FAILED for every partition otherwise), and an
empty answer (no results) when the group id is empty or null, when there are
no topics, or when a topic has no partitions. Results are grouped by topic,
in the order the topics first appear.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from protocol.errors import ErrorCode

from ..security.authorizer import Operation
from ..share.state import ShareStateError

_ZERO_ID = uuid.UUID(int=0)
_MAX_KEYS = 100_000  # a request names at most this many partitions; the rest are refused, not walked


async def handle_state_rpc(ctx, req, op: Callable, error_fields: dict) -> dict:
    topics = req.topics or ()
    if not req.group_id or not topics or any(not t.partitions for t in topics):
        return {"results": []}
    authorized = ctx.allowed_on_cluster(Operation.CLUSTER_ACTION) if ctx.broker.authorizer is not None else True
    coordinator = ctx.broker.share_coordinator
    results: dict = {}
    seen = 0
    for t in topics:
        out = results.setdefault(t.topic_id, [])
        for p in t.partitions:
            seen += 1
            if not authorized:
                error, message, fields = ErrorCode.cluster_authorization_failed, None, error_fields
            elif seen > _MAX_KEYS:
                error, message, fields = ErrorCode.invalid_request, "too many partitions in one request", error_fields
            else:
                try:
                    # the codec reads the zero id as None: it names no topic, as any unknown id
                    fields = op(coordinator, req.group_id, t.topic_id or _ZERO_ID, p)
                    error, message = ErrorCode.none, None
                except ShareStateError as exc:
                    error, message, fields = exc.code, exc.message, error_fields
            out.append({"partition": p.partition, "error_code": error, "error_message": message, **fields})
    return {"results": [{"topic_id": tid, "partitions": parts} for tid, parts in results.items()]}

