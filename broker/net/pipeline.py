"""Pipelined requests: a part of ``KafkaConnection`` (a mixin). Requests of
``handlers.PIPELINED`` (commits, heartbeats) start while earlier ones still wait for their
append and are answered in order (``inflight``); small answers of a burst are coalesced
(``held_out``) and written in one call."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

from protocol.connection import Request

from ..handlers import HANDLERS
from ..pending import Pending
from .common import _LARGE

if TYPE_CHECKING:
    from .connection import KafkaConnection


class Pipeline:
    """Pipelined requests and coalesced answers (a mixin of KafkaConnection)."""

    __slots__ = ()

    # -- pipelined requests ------------------------------------------------
    # A request of an API in PIPELINED is started at once, even while earlier requests of
    # the connection wait for their records to be durable: its handler's synchronous
    # ``begin`` does its work and returns the answer, or a Pending (broker/pending.py) of it.
    # One answered at once is answered as any other; one that waits becomes a _Slot in
    # ``inflight``, finished by its future's done-callback, and answered when it and every
    # slot before it are done (in request order, in one write). Any other request waits until ``inflight`` is empty,
    # so it sees what a connection that handles one request at a time would show it.

    def _start(self, event: Request):
        """Start a pipelined request (its handler's ``begin``): its framed answer (or None) if
        it is answered at once and nothing is in flight, else ``_STARTED`` (its slot answers it)."""
        self.ctx.request = event
        try:
            answer = HANDLERS[event.api_key].begin(self.ctx, event.body)
            pending = type(answer) is Pending
            out = None if pending or answer is None else self._encode(event, answer)
        except Exception as exc:  # noqa: BLE001 - a handler bug must not take the broker down
            self._handler_failed(event, exc)
            return _STARTED  # the connection is closing: nothing more is answered
        inflight = self.inflight
        if not pending and not inflight:
            return out  # the common path does the rest
        if inflight is None:
            inflight = self.inflight = deque()
        slot = _Slot(self, event, answer if pending else None)
        inflight.append(slot)
        if pending:
            answer.future.add_done_callback(slot.finished)
        else:
            slot.out = out
            slot.done = True
        return _STARTED

    def _finished(self, slot: _Slot) -> None:
        """A slot's answer is ready: encode it; if the slot is at the head of ``inflight``, answer it
        (and the finished ones behind it)."""
        try:
            body = slot.pending.result()
            slot.out = None if body is None or self.closing else self._encode(slot.event, body)
        except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - a handler bug must not take the broker down
            if not self.closing:
                self._handler_failed(slot.event, exc)
            return
        slot.pending = None
        slot.done = True
        if not self.answer_due:
            inflight = self.inflight
            if inflight and inflight[0] is slot:
                # answered after the callbacks already queued: the slots after it whose appends
                # completed in the same round of flushes go in the same write
                self.answer_due = True
                self.broker.loop.call_soon(self._answer_inflight)

    def _answer_inflight(self) -> None:
        """Write the answers of the finished slots at the head of ``inflight``, in one call."""
        self.answer_due = False
        inflight = self.inflight
        if self.closing or not inflight:
            return
        if self.held_out is not None:
            self._send_held()  # answers of earlier requests first
        broker = self.broker
        out: list = []
        while inflight and inflight[0].done:
            slot = inflight.popleft()
            n = slot.event.size + 4
            self.held -= n
            broker.request_bytes -= n
            if n >= _LARGE or broker.pool_full:
                self._released(n)
            answer = slot.out
            if answer is not None:
                if type(answer) is bytes:
                    out.append(answer)
                else:
                    out += answer
        if out:
            self._write(out)
        if not inflight:
            waiter = self.settle_waiter
            if waiter is not None:
                self.settle_waiter = None
                waiter.set_result(None)

    async def _settle(self) -> None:
        """Wait until every pipelined request of the connection has been answered (or it closed)."""
        while self.inflight and not self.closing:
            waiter = self.settle_waiter = self.broker.loop.create_future()
            await waiter

    def _send_held(self) -> None:
        """Write the held answers, in order, in one call (one send(2) where the socket takes it)."""
        held_out = self.held_out
        if held_out is None:
            return
        self.held_out = None
        if not self.closing:
            self._write(held_out)

    def _write(self, out: list) -> None:
        """Write answers in one call, behind an answer still being sent from files."""
        if self.sending is not None:
            self.sending.extend(out)
        elif len(out) > 1:
            self.transport.writelines(out)
        else:
            self.transport.write(out[0])



class _Slot:
    """A pipelined request being handled: what its answer waits on, and its answer once done."""

    __slots__ = ("conn", "event", "pending", "out", "done")

    def __init__(self, conn: KafkaConnection, event: Request, pending: Pending | None) -> None:
        self.conn = conn
        self.event = event
        self.pending = pending
        self.out = None
        self.done = False

    def finished(self, _fut=None) -> None:
        self.conn._finished(self)


_STARTED = object()  # KafkaConnection._start: the request's slot will answer it
