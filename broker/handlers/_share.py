"""What ShareFetch (78) and ShareAcknowledge (79) share: request checks and acknowledgements.

Kafka 4.4's ``KafkaApis`` checks, in order, before any partition: a null
group id is INVALID_REQUEST (an empty one is served), READ
on the group (GROUP_AUTHORIZATION_FAILED), a member id that is null, empty or
longer than 36 characters is INVALID_REQUEST. These request-level errors carry
no message (Kafka's ``getErrorResponse``). Kafka 4.4 checks nothing more of the member at this point: the
broker serving ShareFetch need not be the group's coordinator, so a member id
the group does not know is served (its records are locked to that id).

Acknowledgement batches (``validateAcknowledgementBatches``), per partition,
INVALID_REQUEST when a batch's first offset is past its last, when a batch
starts before the previous one ended (unordered or overlapping), when it has
no types, more than one type but not one per offset, or a type outside 0-3
(0-4, RENEW, with ``is_renew_ack``).
"""

from __future__ import annotations

from protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType
from ..share.manager import NotInitialized
from ..share.partition import MSG_NOT_FOUND, RENEW, AckError
from ..share.state import ShareStateError

E = ErrorCode
MAX_MEMBER_ID = 36


class RequestRefused(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def check_request(ctx, req) -> None:
    if req.group_id is None:  # an empty one is served, as Kafka 4.4 serves it
        raise RequestRefused(E.invalid_request, "Invalid group id in the request.")
    if ctx.broker.authorizer is not None and not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id):
        raise RequestRefused(E.group_authorization_failed)
    if not req.member_id or len(req.member_id) > MAX_MEMBER_ID:
        raise RequestRefused(E.invalid_request, "Invalid member id in the request.")


def leader(ctx) -> dict:
    return {"leader_id": ctx.cluster.node_id, "leader_epoch": 0}


def resolve(ctx, topic_id, partition: int):
    """(Partition, None) or (None, error) for a topic id and partition index, READ checked."""
    topic = ctx.cluster.by_id.get(topic_id) if topic_id is not None else None
    if topic is None:
        return None, E.unknown_topic_id
    if ctx.broker.authorizer is not None and not ctx.allowed(Operation.READ, ResourceType.TOPIC, topic.name):
        return None, E.topic_authorization_failed
    if not 0 <= partition < len(topic.partitions):
        return None, E.unknown_topic_or_partition
    return topic.partitions[partition], None


def ack_batches(batches, renew: bool) -> list[tuple[int, int, list[int]]] | None:
    """The request's acknowledgement batches as ``(first, last, types)``, or None when malformed."""
    out = []
    next_offset = None
    top = RENEW if renew else 3
    for b in batches or ():
        types = list(b.acknowledge_types or ())
        if b.first_offset > b.last_offset or (next_offset is not None and b.first_offset < next_offset) or not types:
            return None
        if len(types) > 1 and len(types) != b.last_offset - b.first_offset + 1:
            return None
        if any(not 0 <= t <= top for t in types):
            return None
        out.append((b.first_offset, b.last_offset, types))
        next_offset = b.last_offset + 1
    return out


def acknowledge(ctx, group_id: str, member_id: str, topic_id, partition: int, batches, renew: bool) -> tuple[ErrorCode, str | None]:
    """Apply one partition's acknowledgements; returns its (error code, message)."""
    parsed = ack_batches(batches, renew)
    if parsed is None:
        return E.invalid_request, None
    part, error = resolve(ctx, topic_id, partition)
    if error is not None:
        return error, None
    manager = ctx.broker.share_partitions
    try:
        sp = manager.get(group_id, topic_id, partition, part)
        sp.acknowledge(member_id, parsed)
    except NotInitialized:
        return E.invalid_record_state, MSG_NOT_FOUND
    except AckError as exc:
        return exc.code, exc.message
    except ShareStateError as exc:
        return exc.code, exc.message
    return E.none, None
