"""ShareAcknowledge (79), v1-2 (KIP-932): acknowledgements of acquired records, outside a fetch.

The checks of ``_share.check_request``, then the share session: epoch 0 is
INVALID_SHARE_SESSION_EPOCH, -1 closes the session after the
acknowledgements (releasing what the member still holds), any other epoch must
be the session's (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, at the
top level, as Kafka 4.4). Each partition answers its acknowledgement's error
(INVALID_REQUEST for malformed batches, INVALID_RECORD_STATE for records the
member does not hold). v2's ``is_renew_ack`` allows RENEW (4).
"""

from __future__ import annotations

from protocol.errors import ErrorCode

from ..share.sessions import SessionError
from ._share import RequestRefused, acknowledge, check_request, leader

API_KEY = 79
NAME = "ShareAcknowledge"
VERSIONS = (1, 2)
E = ErrorCode


def _answer(code: ErrorCode, message: str | None = None, responses=(), lock_ms: int = 0) -> dict:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "acquisition_lock_timeout": lock_ms,
            "responses": list(responses), "node_endpoints": []}


async def handle(ctx, req):
    try:
        check_request(ctx, req)
    except RequestRefused as exc:
        return _answer(exc.code)
    manager = ctx.broker.share_partitions
    renew = ctx.version >= 2 and bool(getattr(req, "is_renew_ack", False))
    try:
        session, closing = manager.sessions.acknowledge_context(req.group_id, req.member_id, req.share_session_epoch)
    except SessionError as exc:
        return _answer(exc.code)
    responses = []
    for t in req.topics or ():
        parts = []
        for p in t.partitions or ():
            code, message = acknowledge(ctx, req.group_id, req.member_id, t.topic_id, p.partition_index, p.acknowledgement_batches, renew)
            parts.append({"partition_index": p.partition_index, "error_code": code, "error_message": message, "current_leader": leader(ctx)})
        responses.append({"topic_id": t.topic_id, "partitions": parts})
    if closing:
        manager.release_session(session)
    return _answer(E.none, responses=responses, lock_ms=manager.lock_duration_ms(req.group_id))
