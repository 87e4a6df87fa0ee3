"""Forwarding admin requests to the active node, as Kafka brokers forward them to the controller
(KIP-590's Envelope): a client may send CreateTopics, ACL or config changes to any node.

A standby node re-encodes the request's body and sends it, with the client's principal, address
and listener, over its channel; the controller relays it to the active node, which runs the
ordinary handler under that principal (the ACLs apply as if the client had asked it directly) and
answers once every live node has applied the change (the same wait as for its own clients,
``broker/net/dispatch.py``). The answer goes back the same way, and the standby node answers its
client with it. The standby node has applied the change by then: the active node waited for it.

When there is no active node, or it goes away before answering, or the request is too large for
the channel, the client is answered NOT_CONTROLLER and retries, as it would against Kafka. The
channel is kafkalite's own (a socket pair between its processes), so the active node trusts the
principal it is told, as Kafka's controller trusts the Envelope of a broker.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from dataclasses import dataclass, field

from protocol.codec import DecodeError, build, decode, encode, request_class, response_class, to_dict
from protocol.connection import Request
from protocol.errors import ErrorCode

from ..logs import get_logger
from .channel import MAX_FRAME

log = get_logger("forwarding")

# what a standby node forwards: every API that changes or reads the cluster's metadata from the
# controller (CreateTopics, DeleteTopics, the ACLs, AlterConfigs, CreatePartitions, ElectLeaders,
# IncrementalAlterConfigs, the partition reassignments, the SCRAM credentials)
FORWARDED = frozenset({19, 20, 29, 30, 31, 33, 37, 43, 44, 45, 46, 50, 51})
ANSWER_TIMEOUT_S = 60.0  # beyond any client's request timeout: an answer never given is the active node's loss
FORWARD_ROOM = (MAX_FRAME - 4096) * 3 // 4  # the body's bytes that fit in a channel frame as base64


@dataclass
class Forwarder:
    """A node's side of forwarding: the requests it forwarded, by id, and where they went."""

    channel_send: object  # Channel.send of this node
    next_id: itertools.count = field(default_factory=lambda: itertools.count(1))
    pending: dict[int, tuple[int, asyncio.Future]] = field(default_factory=dict)  # id -> (active node, answer)

    async def forward(self, ctx, event: Request, active: int):
        """The answer of the active node ``active`` to ``event``, or NOT_CONTROLLER everywhere."""
        from ..faults import error_response
        from ..listeners import listener_name

        body = encode(event.body)
        if len(body) > FORWARD_ROOM:
            log.info("request too large to forward", api=event.api_key, bytes=len(body))
            return error_response(event, ErrorCode.not_controller)
        fid = next(self.next_id)
        answer = asyncio.get_running_loop().create_future()
        self.pending[fid] = (active, answer)
        self.channel_send({
            "t": "fwd", "id": fid, "key": event.api_key, "ver": event.api_version, "client_id": event.client_id,
            "principal": ctx.principal, "peer": ctx.conn.peer, "listener": listener_name(ctx),
            "body": base64.b64encode(body).decode(),
        })
        try:
            raw = await asyncio.wait_for(answer, ANSWER_TIMEOUT_S)
        except TimeoutError:
            raw = None
        finally:
            self.pending.pop(fid, None)
        if raw is None:
            return error_response(event, ErrorCode.not_controller)
        entity, _ = decode(response_class(event.api_key, event.api_version), raw)
        return to_dict(entity)

    def answered(self, message: dict) -> None:
        """An answer from the active node (``body`` the encoded response, absent if none came)."""
        entry = self.pending.get(message.get("id"))
        if entry is None or entry[1].done():
            return
        body = message.get("body")
        entry[1].set_result(base64.b64decode(body) if isinstance(body, str) else None)

    def active_changed(self, active: int) -> None:
        """The active node changed: what was forwarded to another one will not be answered."""
        for node, answer in self.pending.values():
            if node != active and not answer.done():
                answer.set_result(None)


@dataclass
class ForwardedConn:
    """The connection a forwarded request is handled on: the client's principal, address and
    listener, as its own node saw them."""

    principal: str
    peer: str
    listener: object | None

    def close(self) -> None:  # a handler closing an invalid request's connection: nothing to close here
        pass


@dataclass(frozen=True)
class _Listener:
    name: str


async def handle_forwarded(broker, message: dict) -> bytes | None:
    """Run a forwarded request on this (the active) node; its encoded response body, or None."""
    from ..handlers import HANDLERS, RequestContext
    from ..net.dispatch import handle

    key, version = message.get("key"), message.get("ver")
    handler = HANDLERS.get(key) if key in FORWARDED else None
    if handler is None or not isinstance(version, int) or not handler.VERSIONS[0] <= version <= handler.VERSIONS[1]:
        return None
    try:
        body, _ = decode(request_class(key, version), base64.b64decode(message["body"]))
    except (DecodeError, ValueError, KeyError, TypeError):
        return None
    listener = message.get("listener")
    conn = ForwardedConn(str(message.get("principal") or "User:ANONYMOUS"), str(message.get("peer") or "0.0.0.0:0"),
                         _Listener(listener) if isinstance(listener, str) else None)
    ctx = RequestContext(broker, conn, log.bind(forwarded_from=message.get("from"), client_id=message.get("client_id")))
    event = Request(key, version, 0, message.get("client_id"), body, 0)
    ctx.request = event
    try:
        answer = await handle(broker, ctx, event)
    except OSError as exc:  # the disk under a write: KAFKA_STORAGE_ERROR, as the client's own connection answers it
        from ..faults import error_response

        log.error("storage error", api=handler.NAME, error=str(exc), errno=exc.errno)
        answer = error_response(event, ErrorCode.kafka_storage_error, str(exc))
    if answer is None:
        return None
    return encode(build(response_class(key, version), answer))
