"""ShareFetch (78), v1-2 (KIP-932): records of share partitions, acquired for the member.

After the checks of ``_share.check_request`` and the share session
(broker/share/sessions.py: errors as Kafka 4.4, at the top level), the
piggy-backed acknowledgements are applied (``acknowledge_error_code`` per
partition); then, unless the request closes the session (epoch -1), each
partition of the session is read from its share partition's next fetch offset
and the records read are acquired (``acquired_records``: ranges with their
delivery counts). Record batches stay opaque: the log's bytes are sliced at
batch boundaries (only batch headers are read), from the first batch holding
an acquired offset through the last; transaction markers are never acquired,
and with the group config ``share.isolation.level=read_committed`` the read
stops at the last stable offset and the batches of aborted transactions are
not acquired either (the window moves past them). ``max_records`` bounds the records
acquired in all, ``max_bytes`` (capped by the broker's ``fetch.max.bytes``, as
Kafka caps it) the bytes read (at most ``PARTITION_READ_MAX`` per partition and
fetch). With nothing acquired the
request waits up to ``max_wait_ms`` for an append or a release on one of its
partitions. An answer names only the partitions with records, errors or
acknowledgement results (Kafka 4.4, the first answer of a session included);
a partition whose share state the group coordinator has not initialized yet
delivers nothing, without an error.
"""

from __future__ import annotations

import struct
import time

from protocol.errors import ErrorCode

from ..share.manager import NotInitialized, state_error
from ..share.sessions import FINAL_EPOCH, SessionError
from ..share.state import ShareStateError
from ._share import RequestRefused, acknowledge, check_request, leader, resolve

API_KEY = 78
NAME = "ShareFetch"
VERSIONS = (1, 2)
E = ErrorCode
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length
_LAST_DELTA = struct.Struct(">i")  # at byte 23
_ATTRIBUTES = struct.Struct(">h")  # at byte 21
_PRODUCER = struct.Struct(">q")  # at byte 43
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
_HEAD_BYTES = 61
# one partition's read per fetch, at most (the request's max_bytes may say 2 GiB): what is read beyond the
# records acquired is dropped, so a read is kept to what a fetch of records can use
PARTITION_READ_MAX = 8 * 1024 * 1024


def _ms(value) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value or 0)


def _spans(data) -> list[tuple[int, int, int, int, int, int]]:
    """``(base, last, start, end, attributes, producer id)`` of each whole batch in ``data`` (headers only)."""
    out = []
    pos, n = 0, len(data)
    while n - pos >= _HEAD_BYTES:
        base, length = _BATCH_HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if length < 49 or end > n:
            break
        last = base + _LAST_DELTA.unpack_from(data, pos + 23)[0]
        out.append((base, last, pos, end, _ATTRIBUTES.unpack_from(data, pos + 21)[0], _PRODUCER.unpack_from(data, pos + 43)[0]))
        pos = end
    return out


def _not_handed_out(plog, offset: int, spans, committed: bool) -> frozenset:
    """Base offsets of the batches no consumer gets: control batches (transaction markers) and, read
    committed, the batches of aborted transactions (found as a read-committed consumer finds them)."""
    skip = {base for base, _, _, _, attrs, _ in spans if attrs & _CONTROL}
    if committed and plog.has_aborted_after(offset):
        pending = sorted(plog.aborted_transactions(offset, spans[-1][1] + 1), key=lambda a: a[1])
        aborting: set[int] = set()
        i = 0
        for base, _, _, _, attrs, pid in spans:
            while i < len(pending) and pending[i][1] <= base:
                aborting.add(pending[i][0])
                i += 1
            if attrs & _CONTROL:
                aborting.discard(pid)
            elif attrs & _TRANSACTIONAL and pid in aborting:
                skip.add(base)
    return frozenset(skip)


def manager_isolation(ctx, group_id: str) -> str:
    """The group config ``share.isolation.level`` (read_uncommitted by default, as in Kafka)."""
    return str(ctx.broker.share_partitions._group_value(group_id, "share.isolation.level", "read_uncommitted")).lower()


def _error_response(ctx, code: ErrorCode) -> dict:
    """A request-level error: Kafka's ``getErrorResponse`` gives the code without a message."""
    return {"throttle_time": 0, "error_code": code, "error_message": None, "acquisition_lock_timeout": 0, "responses": [],
            "node_endpoints": []}


def _fetch_partition(ctx, req, sp, part, member_id: str, budget: dict) -> tuple[object, list]:
    """Read and acquire one partition: (records bytes or None, acquired ranges)."""
    if budget["records"] <= 0 or budget["bytes"] <= 0 or not sp.can_acquire():
        return None, []
    plog = part.log
    sp.move_start(plog.log_start_offset)
    offset = sp.next_fetch_offset()
    if offset >= plog.log_end_offset:
        return None, []
    committed = manager_isolation(ctx, req.group_id) == "read_committed"
    upto = plog.last_stable_offset if committed else None
    if upto is not None and offset >= upto:
        return None, []
    data = plog.read(offset, min(budget["bytes"], PARTITION_READ_MAX), min_one=True, upto=upto)
    spans = _spans(data) if data else []
    if not spans:
        return None, []
    skip = _not_handed_out(plog, offset, spans, committed)
    acquired = sp.acquire(member_id, [(base, last) for base, last, _, _, _, _ in spans], budget["records"], skip)
    if not acquired:
        return None, []
    first, last = acquired[0][0], acquired[-1][1]
    lo = next(s for b, la, s, _, _, _ in spans if la >= first)
    hi = next(e for b, la, _, e, _, _ in reversed(spans) if b <= last)
    budget["records"] -= sum(la - f + 1 for f, la, _ in acquired)
    budget["bytes"] -= hi - lo
    return memoryview(data)[lo:hi], acquired  # a view of the read: the encoder copies it once, into the frame


def _fetch_all(ctx, req, session, member_id: str, acks: dict, unknown: list) -> tuple[list, int]:
    """The answer's topics, and how many records were acquired or partitions failed (0: nothing to say yet)."""
    manager = ctx.broker.share_partitions
    budget = {"records": req.max_records if req.max_records > 0 else 2**31 - 1,
              "bytes": min(req.max_bytes, ctx.config.fetch_max_bytes) if req.max_bytes > 0 else 0}  # capped as Kafka caps it
    topics: dict = {}
    got = 0
    for topic_id, index in list(session.partitions) + unknown:
        ack_error, ack_message = acks.get((topic_id, index), (E.none, None))
        part, error = resolve(ctx, topic_id, index)
        records, acquired, message = None, [], None
        if error is None:
            try:
                sp = manager.get(req.group_id, topic_id, index, part)
                records, acquired = _fetch_partition(ctx, req, sp, part, member_id, budget)
            except NotInitialized:
                pass  # no state yet: nothing to deliver, and no error (Kafka 4.4)
            except ShareStateError as exc:
                error, message = state_error(exc), exc.message
        if not (acquired or error is not None or (topic_id, index) in acks):
            continue
        got += len(acquired) + (error is not None)  # an error is news too: the answer goes at once
        topics.setdefault(topic_id, []).append({
            "partition_index": index, "error_code": error or E.none, "error_message": message,
            "acknowledge_error_code": ack_error, "acknowledge_error_message": ack_message, "current_leader": leader(ctx),
            "records": records if records is not None else b"", "acquired_records": [{"first_offset": f, "last_offset": la, "delivery_count": c} for f, la, c in acquired],
        })
    return [{"topic_id": tid, "partitions": parts} for tid, parts in topics.items()], got


async def handle(ctx, req):
    try:
        check_request(ctx, req)
    except RequestRefused as exc:
        return _error_response(ctx, exc.code)
    renew = ctx.version >= 2 and bool(getattr(req, "is_renew_ack", False))
    if renew and (req.max_bytes or req.min_bytes or req.max_records or _ms(req.max_wait)):
        return _error_response(ctx, E.invalid_request)
    manager = ctx.broker.share_partitions
    epoch = req.share_session_epoch
    asked = [(t.topic_id, p.partition_index) for t in req.topics or () for p in t.partitions or ()]
    # a session holds only partitions that exist (so sessions stay within the cluster's size); the others
    # are answered with their error in this answer only
    add = [tp for tp in asked if resolve(ctx, *tp)[1] in (None, E.topic_authorization_failed)]
    known = set(add)
    unknown = [tp for tp in dict.fromkeys(asked) if tp not in known]
    forget = [(t.topic_id, p) for t in req.forgotten_topics_data or () for p in t.partitions or ()]
    has_acks = any(p.acknowledgement_batches for t in req.topics or () for p in t.partitions or ())
    try:
        session, ended = manager.sessions.fetch_context(req.group_id, req.member_id, epoch, add, forget, has_acks, ctx.conn)
    except SessionError as exc:
        return _error_response(ctx, exc.code)
    acks = {}
    for t in req.topics or ():
        for p in t.partitions or ():
            if p.acknowledgement_batches:
                acks[(t.topic_id, p.partition_index)] = acknowledge(ctx, req.group_id, req.member_id, t.topic_id, p.partition_index,
                                                                    p.acknowledgement_batches, renew)
    if ended is not None:
        manager.release_session(ended)
    lock_ms = manager.lock_duration_ms(req.group_id)
    if session is None or renew:  # the final fetch (epoch -1) or a renewal: acknowledgements only
        responses = {}
        for (tid, index), (code, message) in acks.items():
            responses.setdefault(tid, []).append({"partition_index": index, "error_code": E.none, "acknowledge_error_code": code,
                                                  "acknowledge_error_message": message, "current_leader": leader(ctx),
                                                  "records": b"", "acquired_records": []})
        return {"throttle_time": 0, "error_code": E.none, "acquisition_lock_timeout": lock_ms,
                "responses": [{"topic_id": t, "partitions": ps} for t, ps in responses.items()], "node_endpoints": []}
    deadline = time.monotonic() + max(_ms(req.max_wait), 0) / 1000
    while True:
        responses, got = _fetch_all(ctx, req, session, req.member_id, acks, unknown)
        remaining = deadline - time.monotonic()
        if got or remaining <= 0 or ctx.conn.draining or session.epoch == FINAL_EPOCH:
            break
        waiting_on = [p for tid, i in session.partitions if (p := resolve(ctx, tid, i)[0]) is not None]
        if not waiting_on:
            break
        await ctx.cluster.wait_for_data(waiting_on, remaining)
        if manager.sessions.sessions.get((req.group_id, req.member_id)) is not session:
            break  # the session ended while the request waited
    return {"throttle_time": 0, "error_code": E.none, "acquisition_lock_timeout": lock_ms, "responses": responses,
            "node_endpoints": []}
