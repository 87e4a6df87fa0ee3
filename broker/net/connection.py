"""One client connection: ``KafkaConnection``, an ``asyncio.Protocol``.

It owns reading (the sans-IO ``ServerConnection`` decoder), the request queue
and the counting of the bytes it holds for requests, flow control (``paused``:
a mask of ``_QUEUE``, ``_WRITE``, ``_POOL``, ``_STOP``; backpressure from the
transport's write buffer), closing, and the request task (``_run``), which
handles the queued requests in order. Its other parts are mixins in their own
modules: ``Pipeline`` (pipelined requests, coalesced answers), ``Dispatch``
(handlers, encoding), ``SendFiles`` (the sendfile pump), ``SaslGate`` (SASL
authentication, TLS low-water tuning).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

from protocol.connection import ProtocolError, Request, ServerConnection
from storage.segment import FileRegion

from ..coordinator.arrivals import LIVENESS_APIS
from ..handlers import PIPELINED, RequestContext
from ..listeners import Listener
from ..security import ANONYMOUS
from .common import (
    _COALESCE,
    _COALESCE_COUNT,
    _CONN_FREED,
    _LARGE,
    _MAX_INFLIGHT,
    _MAX_QUEUED,
    _PIECE,
    _POOL,
    _QUEUE,
    _SO_RCVLOWAT,
    _STOP,
    _WRITE,
    _ConnectionLog,
    _now,
    log,
)
from .dispatch import Dispatch
from .pipeline import _STARTED, Pipeline
from .sasl_gate import SaslGate
from .sendfile import SendFiles

if TYPE_CHECKING:
    from ..server import Broker


class KafkaConnection(Pipeline, Dispatch, SendFiles, SaslGate, asyncio.Protocol):
    __slots__ = (
        "broker", "listener", "transport", "proto", "queue", "task", "waiter", "linger", "ctx", "paused", "closing", "draining",
        "held", "seen", "ip", "software", "client_id", "_peer", "_log", "held_out", "inflight", "answer_due", "settle_waiter",
        "principal", "auth", "sasl", "expires", "lowat", "files", "sending", "sfd", "tpaused", "doomed",
    )  # fmt: skip

    def __init__(self, broker: Broker, listener: Listener | None = None) -> None:
        self.broker = broker
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        # made when first needed: the decoder on the first byte, the context on
        # the first request, the queue and the task while the connection is busy
        self.proto: ServerConnection | None = None
        self.queue: deque | None = None
        self.task: asyncio.Task | None = None
        self.waiter: asyncio.Future | None = None  # what the task waits on between requests
        self.linger = False  # whether the task waits for more requests: not after the first burst
        self.ctx: RequestContext | None = None
        self.paused = 0  # why reading is paused: a mask of _QUEUE, _WRITE, _POOL, _STOP
        self.closing = False
        self.draining = False
        self.held = 0  # bytes held for requests: the frame being received, queued and in-flight requests
        self.seen = 0.0  # when the last request was answered (or the connection made): for the idle sweep
        self.ip: str | None = None  # counted in broker.per_ip under this address
        self.software: str | None = None  # KIP-511: the client's software name/version, once it said
        self.client_id: str | None = None  # as its last request named it (fault injection matches on it)
        self._peer: str | None = None
        self._log = None  # bound on first use: most connections never log
        # small answers held while more requests of this connection wait, sent in one write
        self.held_out: list | None = None
        # pipelined requests started and not yet answered, in request order (_Slot), and
        # what the task waits on until they are all answered
        self.inflight: deque | None = None
        self.answer_due = False  # _answer_inflight is queued on the loop
        self.settle_waiter: asyncio.Future | None = None
        # security: who the client is (User:ANONYMOUS, User:<name> after SASL, User:<certificate
        # subject> for SSL client certificates); on a SASL listener the Authenticator until the
        # client has authenticated, then its Session, and when that session expires (monotonic)
        self.principal = ANONYMOUS
        self.auth = None
        self.sasl = None
        self.expires: float | None = None
        self.lowat: int | None = None  # TLS: the socket's SO_RCVLOWAT (see _tune_lowat)
        # answers holding FileRegions (see broker/net/sendfile.py): whether this connection
        # sends them with sendfile (None until a Fetch asks; False: through the transport, a
        # piece at a time), what is left of the one being sent, the socket's descriptor
        # duplicated for sendfile's writability watch, and whether the transport's own buffer
        # is over its high-water mark
        self.files: bool | None = None
        self.sending: deque | None = None
        self.sfd = -1  # while watching: a duplicate of the socket's descriptor
        self.tpaused = False
        # why the connection closes once the requests before a frame it could not use are
        # answered (see data_received); None while the stream is good
        self.doomed: str | None = None

    @property
    def peer(self) -> str:
        peer = self._peer
        if peer is None:
            try:
                addr = self.transport.get_extra_info("peername")
            except Exception:  # noqa: BLE001 - closed already
                addr = None
            peer = self._peer = f"{addr[0]}:{addr[1]}" if addr else "?"
        return peer

    @property
    def log(self):
        bound = self._log
        if bound is None:
            software = self.software
            bound = self._log = log.bind(peer=self.peer, client_software=software) if software else log.bind(peer=self.peer)
        return bound

    @log.setter
    def log(self, value) -> None:
        self._log = value

    def identify(self, software: str) -> None:
        """The client named its software (ApiVersions v3+): later log lines carry it."""
        self.software = software
        self._log = None

    @property
    def reading(self) -> bool:
        return not self.paused

    @property
    def in_large_frame(self) -> bool:
        """Part of a frame of ``LARGE_FRAME`` bytes or more is here, the rest still to come."""
        proto = self.proto
        return proto is not None and proto.in_large_frame

    def _hold(self) -> None:
        if self.paused and not self.closing:
            self.transport.pause_reading()

    # -- asyncio.Protocol -------------------------------------------------
    def connection_made(self, transport, admitted: bool = False) -> None:
        """``admitted``: counted in already, at accept (a TLS connection, after its handshake)."""
        self.transport = transport
        self.seen = _now()
        broker = self.broker
        if not admitted and not broker.admit(self, transport):
            self.closing = True
            transport.close()
            return
        transport.set_write_buffer_limits(broker.write_high, broker.write_low)
        broker.connections.add(self)
        if broker.metrics is not None:
            broker.metrics.connection_opened(self)
        if broker.pool_capped:
            self._pause(_POOL)
            # uvloop starts reading once connection_made has returned, whatever it was told here
            broker.loop.call_soon(self._hold)
        listener = self.listener
        security = listener.security if listener is not None else None
        if security is not None:  # a listener with TLS or SASL (modules imported only then)
            if security.ssl_context is not None and _SO_RCVLOWAT:
                self.lowat = 1
            if security.client_auth != "none":
                from ..security.tls import peer_principal

                self.principal = peer_principal(transport) or ANONYMOUS
            if security.sasl:
                from ..security.authenticator import Authenticator

                self.auth = Authenticator(self, security, broker.scram)

    def data_received(self, data: bytes, framed: list[bytes] | None = None) -> None:
        """Bytes from the client: frame and decode them, queue the requests, start the task.
        ``framed``: frames that came before ``data``, framed already (by the SASL gate)."""
        if self.closing or self.doomed is not None:
            return
        if self.auth is not None:  # a SASL client that has not authenticated yet
            self._authenticate(data)
            return
        broker = self.broker
        proto = self.proto
        if proto is None:
            proto = self.proto = ServerConnection(broker.supported, broker.config.max_frame_bytes)
        before = proto.buffered
        try:
            events = proto.receive_data(data) if framed is None else proto.receive_framed(framed, data)
        except ProtocolError as exc:
            events = exc.events
            if not events:
                self.log.warning("closing connection: protocol error", reason=str(exc))
                self.close()
                return
            # the requests before the bad frame are answered first, then the connection closes
            # (_run), as Kafka's broker, reading one request at a time, answers them before it
            # reads the bad one; nothing more is read from it
            self.doomed = str(exc)
            self._pause(_STOP)
            added = -before  # the decoder's buffer is dropped with the stream
        else:
            added = proto.buffered - before
        queue = self.queue
        if events:
            if self.expires is not None and self._session_over(events):
                return
            arrivals = broker.arrivals
            for event in events:
                if type(event) is Request:
                    added += event.size + 4
                    if event.api_key in LIVENESS_APIS:
                        arrivals.arrived(event)  # evidence of life before the handler runs
            if queue is None:  # kept only while the connection is busy
                queue = self.queue = deque(events)
            else:
                queue.extend(events)
            waiter = self.waiter
            if waiter is not None:
                self.waiter = None
                waiter.set_result(None)
            elif self.task is None and not self.paused & _WRITE:
                self.task = broker.loop.create_task(self._run())
        held = self.held = self.held + added
        broker.request_bytes += added
        if queue and (len(queue) >= _MAX_QUEUED or held >= broker.conn_queue_bytes):
            self._pause(_QUEUE)
        if broker.request_bytes >= broker.request_bytes_limit:
            broker._pool_over(self, bool(events))
        if self.lowat is not None:
            self._tune_lowat(proto)

    def pause_writing(self) -> None:
        self.tpaused = True
        self._pause(_WRITE)

    def resume_writing(self) -> None:
        self.tpaused = False
        if self.sending is not None:  # the rest of the answer first; _pump resumes once it is out
            if self.sfd < 0:
                self._pump()
            return
        self.seen = _now()
        self._resume(_WRITE)
        if (self.queue or self.doomed is not None) and self.task is None and not self.closing:
            self.task = self.broker.loop.create_task(self._run())

    def connection_lost(self, exc) -> None:
        self.closing = True
        self._drop_sending()
        broker = self.broker
        if self in broker.connections:
            broker.connections.discard(self)
            if broker.metrics is not None:
                broker.metrics.connection_closed(self)
            if self.ip is not None:
                broker._forget_ip(self.ip)
        if broker._share is not None:
            broker.share_partitions.connection_closed(self)  # its share sessions end with it (Kafka 4.4)
        task = self.task
        self.waiter = None
        if task is not None:
            self.task = None
            if not task.done():
                task.cancel()
        # everything this connection held for requests goes back to the pool,
        # and nothing it allocated waits for the cycle collector
        held = self.held
        self.held = 0
        broker.request_bytes -= held
        broker.trim_due += held + _CONN_FREED
        self.proto = None
        queue = self.queue
        if queue:
            for event in queue:
                if type(event) is Request and event.api_key in LIVENESS_APIS:
                    broker.arrivals.dropped(event)  # never handled, but sent by a live client
        self.queue = None
        self.ctx = None
        self.held_out = None
        self.inflight = None  # the started handlers finish on their own; their answers are dropped
        self.settle_waiter = None
        if broker.pool_exempt is self:
            broker.pool_exempt = None
            if broker.pool_full:
                broker._pick_exempt()
        broker._exempt_skip.discard(self)
        if broker.pool_full:
            broker.pool_released()


    # -- processing -------------------------------------------------------
    def _pause(self, why: int) -> None:
        if not self.paused and not self.closing:
            self.transport.pause_reading()
        self.paused |= why

    def _resume(self, why: int) -> None:
        if self.paused & why:
            self.paused &= ~why
            if not self.paused and not self.closing:
                self.transport.resume_reading()

    def wake(self) -> None:
        """End the task if it is waiting for requests (the sweep, the broker stopping)."""
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            waiter.set_result(None)

    def stop_reading(self) -> None:
        if self.transport is not None:
            self._pause(_STOP)

    def close(self) -> None:
        """Close once what was answered has been written: answers held for coalescing first (the
        requests before one that closes the connection are answered, as by Kafka, which handles
        one request at a time)."""
        if self.held_out is not None and not self.closing:
            self._send_held()
        sending = self.sending
        if sending is not None and not self.closing:
            if sum(part.size for part in sending if type(part) is FileRegion) > _PIECE:
                # a client that is not taking its answer (the broker stopping, say): its records
                # stay in the files, not read into memory for a transport that may never drain
                self.abort()
                return
            self._write_rest()  # the transport sends what it holds before it closes
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Close now, dropping unsent answers (the idle sweep: the client may not be reading)."""
        self.closing = True
        self._drop_sending()
        if self.transport is not None:
            self.transport.abort()


    def _released(self, n: int) -> None:
        """A request of ``n`` bytes was handled (the uncommon cases: large, or the pool full)."""
        broker = self.broker
        if broker.pool_full:
            broker.pool_released()
        if n >= _LARGE:
            broker.trim_due += n

    async def _run(self) -> None:
        """Handle the queued requests in order.

        Between requests the task waits on a bare future (``waiter``) that
        ``data_received`` completes; once the connection has been quiet for
        ``_LINGER`` seconds the sweep completes it instead and the task ends,
        so an idle connection has no task. The first task of a connection
        does not wait: many connections make a request or two and idle. A
        task also ends while the client is not reading its answers
        (``resume_writing`` starts another).

        The common path (a request handled, its answer written) is inline; the
        uncommon branches are the methods after this one.
        """
        queue = self.queue
        broker = self.broker
        if self.ctx is None:
            self.ctx = RequestContext(broker, self, _ConnectionLog(self))
        unstarted = None  # a group member's request taken from the queue, its handler not run yet
        try:
            while True:
                while queue:
                    if (self.paused or self.closing) and self._stalled(queue):  # one test on the common path
                        return
                    event = queue.popleft()
                    if type(event) is Request and event.api_key in LIVENESS_APIS:
                        unstarted = event  # still evidence of life while it waits below (arrivals.py)
                    if type(event) is Request and event.api_key in PIPELINED and not broker.hooked:
                        inflight = self.inflight
                        if inflight and len(inflight) >= _MAX_INFLIGHT:
                            await self._settle()
                            if self.closing:
                                return
                        if unstarted is not None:
                            broker.arrivals.started(unstarted)
                            unstarted = None
                        out = self._start(event)
                        if out is _STARTED:
                            continue
                    else:
                        if self.inflight:
                            await self._settle()  # any other request waits until the pipelined ones are answered
                            if self.closing:
                                return
                        if unstarted is not None:
                            broker.arrivals.started(unstarted)
                            unstarted = None
                        out = await self._dispatch(event)
                    if self.closing:  # connection_lost has given back what it held
                        return
                    if type(event) is Request:
                        # the context keeps the last request for its header (faults match on its
                        # client id): not its body, which for a Produce holds the records
                        event.body = None
                        n = event.size + 4
                        self.held -= n
                        broker.request_bytes -= n
                        if n >= _LARGE or broker.pool_full:
                            self._released(n)
                    if out is not None:
                        if type(out) is not bytes:  # a list of buffers (a Fetch answer's records are not copied into it)
                            self._answer_buffers(out)
                        elif queue and len(out) < _COALESCE:  # more requests wait (a pipelining client)
                            self._hold_answer(out)
                        elif self.held_out is None and len(out) < _LARGE:
                            self.transport.write(out)  # may call pause_writing
                        else:
                            self._answer_bytes(out)
                self.seen = _now()  # idle from here on (the sweep's clock)
                if self.doomed is not None:  # the requests before a bad frame are answered: close
                    await self._close_doomed()
                    return
                if self.paused & _QUEUE:
                    self._resume(_QUEUE)
                if self.draining or self.closing:
                    return
                if not self.linger:  # a connection's first requests (ApiVersions, say) may be its last
                    self.linger = True
                    return
                waiter = self.waiter = broker.loop.create_future()
                await waiter
                if not queue:  # woken by the sweep (or the broker stopping)
                    return
        except Exception as exc:  # noqa: BLE001 - a bug outside the handlers (answering an unsupported version, say)
            self._task_failed(exc)
        except asyncio.CancelledError:
            self._task_cancelled()
        finally:
            if unstarted is not None:  # the connection closed while it waited behind pipelined requests
                broker.arrivals.dropped(unstarted)
            if self.task is asyncio.current_task():
                self._task_ended(queue)

    # -- the request task's uncommon steps ---------------------------------
    def _stalled(self, queue: deque) -> bool:
        """The connection is paused or closing: True if the task ends here (the client is not
        reading its answers, or the connection closes); else read again once the queue is short."""
        if self.paused & _WRITE or self.closing:
            self.seen = _now()
            return True
        if self.paused & _QUEUE and len(queue) < _MAX_QUEUED // 2 and self.held < self.broker.conn_queue_bytes:
            self._resume(_QUEUE)
        return False

    def _hold_answer(self, out: bytes) -> None:
        """A small answer while more requests wait: held so that the answers of one burst leave
        in one write (see _send_held)."""
        held_out = self.held_out
        if held_out is None:
            self.held_out = [out]
            self.broker.loop.call_soon(self._send_held)  # if a handler waits before the burst ends
        else:
            held_out.append(out)
            if len(held_out) >= _COALESCE_COUNT:
                self._send_held()

    def _answer_bytes(self, out: bytes) -> None:
        """Write an answer that is large (its memory counts towards trimming) or that follows
        answers held for coalescing (they go first, in the same write)."""
        if len(out) >= _LARGE:
            self.broker.trim_due += len(out)
        if self.held_out is not None:
            self.held_out.append(out)
            self._send_held()
        else:
            self.transport.write(out)  # may call pause_writing

    def _answer_buffers(self, out: list) -> None:
        """Write an answer that is a list of buffers, some of them FileRegions maybe (sent from
        their files, see sendfile.py), after any held answers."""
        n = 0
        files = False
        for b in out:
            if type(b) is FileRegion:  # sent from the file: no memory to trim
                files = True
            else:
                n += len(b)
        if n >= _LARGE:
            self.broker.trim_due += n
        if self.held_out is not None:
            self._send_held()
        if files:
            self._send_files(out)  # may pause (_WRITE)
        else:
            self.transport.writelines(out)  # may call pause_writing

    async def _close_doomed(self) -> None:
        """The requests before a frame that could not be used are answered: close, once the
        client has taken the answers (else ``resume_writing`` starts a task that comes back here)."""
        if self.inflight:
            await self._settle()
        self._send_held()
        if self.paused & _WRITE:
            return
        self.log.warning("closing connection: protocol error", reason=self.doomed)
        self.close()

    def _task_failed(self, exc: Exception) -> None:
        """The task raised outside the handlers: a broker bug; only this connection closes."""
        event = self.ctx.request if self.ctx is not None else None
        self.log.error("connection task failed", exc_info=exc)
        if event is not None:
            self._handler_failed(event, exc)
        else:
            self.close()

    def _task_cancelled(self) -> None:
        """The task was cancelled. Not by connection_lost or the loop: a handler awaited a future
        someone else cancelled, a broker bug, and the client would wait forever for its answers."""
        if not self.closing and not asyncio.current_task().cancelling():
            self.log.error("connection task ended by a cancellation it was not sent", exc_info=True)
            event = self.ctx.request if self.ctx is not None else None
            if event is not None:
                self._handler_failed(event, RuntimeError("the handler awaited a future that was cancelled"))
            else:
                self.close()

    def _task_ended(self, queue: deque) -> None:
        """The connection's task has ended: with nothing queued, it keeps no context nor decoder."""
        self.task = None
        self.waiter = None
        if not queue:
            self.queue = None
            ctx = self.ctx
            if ctx is not None and not self.closing:  # quiet: the context is made again on the next request
                request = ctx.request
                if request is not None:
                    self.client_id = request.client_id
                self.ctx = None
            proto = self.proto
            if proto is not None and not proto.in_frame:
                self.proto = None  # quiet: the decoder is made again on the next byte
