"""Sending from files: a part of ``KafkaConnection`` (a mixin) that writes Fetch answers
holding ``FileRegion``s (storage/segment.py) with sendfile(2), or a piece at a time
through the transport (TLS, or the broker's budget of waiting descriptors spent).
It owns ``sending``, ``sfd``, ``files`` and ``tpaused`` of the connection."""

from __future__ import annotations

import os
from collections import deque

from protocol.connection import Request
from storage.segment import FileRegion

from .common import _PIECE, _WRITE, _release


class SendFiles:
    """The sendfile pump (a mixin of KafkaConnection)."""

    __slots__ = ()

    # -- sending from files -----------------------------------------------
    # A Fetch answer may hold FileRegions (storage/segment.py) among its buffers: batches of
    # a segment file, not read into memory. The connection hands the answer's parts to the
    # kernel in order, bytes through the transport and each region one of two ways:
    #
    # - with sendfile(2) from the page cache (plain TCP), once the transport has written all
    #   it holds. Where the socket is full it waits until the socket is writable (a watch on
    #   a duplicate of its descriptor: the event loop watches the transport's own), with
    #   reading paused and the task ended as for a full transport buffer (_WRITE);
    # - read a piece (_PIECE) at a time and written through the transport, while the
    #   transport is under its high-water mark; resume_writing carries on. TLS connections
    #   do this (the transport encrypts), and so does a plain one once the broker's budget
    #   of descriptors for waiting answers is spent.
    #
    # Either way a client that does not read holds its regions, the transport's high-water
    # mark and at most one piece, never its answer's bytes: the bounds above hold whatever
    # it asked for. Regions are pinned (FileRegion.pin) when the answer is handed over, so
    # their file stays readable if its log is closed meanwhile; pinning shares the file's
    # descriptor. The duplicates of waiting sockets are counted broker-wide
    # (Broker.waiting_fds): past a quarter of the process's limit a connection sends through
    # its transport instead, so clients that do not read cannot take the descriptors the logs
    # and new connections need. Only the connection's task writes an answer with regions, and
    # it writes nothing more until it is out; the paths that write outside the task
    # (_send_held, _answer_inflight) queue behind it.

    def sends_files(self) -> bool:
        """Whether a Fetch answer may hold FileRegions: faults not in use (their recorder keeps
        answers as they are)."""
        if self.files is None:
            self.files = self._can_sendfile()
        faults = self.broker.faults
        return not self.closing and (faults is None or not faults.active)

    def _can_sendfile(self) -> bool:
        transport = self.transport
        listener = self.listener
        if transport is None or transport.get_extra_info("sslcontext") is not None:
            return False
        if listener is not None and listener.security is not None and listener.security.ssl_context is not None:
            return False
        return transport.get_extra_info("socket") is not None

    def _send_files(self, out: list) -> None:
        """Write an answer that holds FileRegions."""
        for part in out:
            if type(part) is FileRegion:
                part.pin()
        self.sending = deque(out)
        self._pump()

    def _pump(self) -> None:
        """Hand what is left of ``sending`` to the kernel; wait for the socket or the transport
        where it is full. Never raises: it runs from the task and as the event loop's writer
        callback, which an exception would leave registered, called again and again."""
        try:
            self._pump_parts()
        except Exception as exc:  # noqa: BLE001 - a broker bug: close this connection only
            self._send_failed(exc)

    def _pump_parts(self) -> None:
        sending = self.sending
        if sending is None or self.closing:
            return
        transport = self.transport
        while sending:
            part = sending[0]
            if type(part) is not FileRegion:
                sending.popleft()
                transport.write(part)
                continue
            if not part.size:  # nothing (left) to send of it
                sending.popleft()
                part.release()
                continue
            if transport.is_closing():  # the write before failed (the client has gone): connection_lost follows
                self._drop_sending()
                return
            if not self.files:  # through the transport, a piece at a time
                if self.tpaused:
                    return  # resume_writing carries on
                n = min(part.size, _PIECE)
                try:
                    data = part.read(n)
                except OSError as exc:
                    self.log.warning("closing connection: a fetched segment could not be read", error=str(exc))
                    self._abort_soon()
                    return
                if len(data) < n:
                    self._cut_short(part)
                    return
                part.pos += n
                part.size -= n
                if not part.size:
                    sending.popleft()
                    part.release()
                transport.write(data)  # may call pause_writing
                continue
            if transport.get_write_buffer_size():
                break  # the bytes before the region first
            try:
                sent = os.sendfile(transport.get_extra_info("socket").fileno(), part.fd, part.pos, part.size)
            except BlockingIOError:
                break
            except OSError as exc:  # the client has gone (reset, broken pipe)
                self.log.debug("closing connection: sendfile failed", error=str(exc))
                self._abort_soon()
                return
            if not sent:
                self._cut_short(part)
                return
            part.pos += sent
            part.size -= sent
            if part.size:
                break
            sending.popleft()
            part.release()
        else:
            self._unwatch()
            if self.paused & _WRITE and not self.tpaused:
                self.resume_writing()
            return
        # the socket is full: wait until it can take more
        if self.sfd < 0 and not self._watch():
            self.files = False  # the broker's descriptors for waiting answers are spent: through the transport
            self._pump()
            return
        self._pause(_WRITE)

    def _cut_short(self, part: FileRegion) -> None:
        """The file ends before the region does: it was truncated under the answer. The frame
        cannot be finished, so the connection closes (what was sent of it is cut short)."""
        self.log.warning("closing connection: a fetched segment file was cut short while sent", region=repr(part))
        self._abort_soon()

    def _abort_soon(self) -> None:
        """``abort`` from ``_pump``, which may run inside the transport's ``resume_writing``: the
        stdlib loop's transport must not be closed there (its write callback, finding it closing
        and its buffer empty, would end the connection a second time: an exception in the event
        loop). Nothing more is written meanwhile."""
        self.closing = True
        self._drop_sending()
        self.broker.loop.call_soon(self.abort)

    def _send_failed(self, exc: Exception) -> None:
        """Sending an answer raised: a broker bug. Logged and reported as a handler's failure
        (tests fail on it), and only this connection is closed."""
        # only a Fetch answer is sent this way; its request may be gone (the task ended)
        event = Request(1, -1, -1, self.client_id, None, 0)
        self.log.error("handler failed", api="Fetch", stage="sending the answer", exc_info=exc)
        hook = self.broker.on_handler_error
        if hook is not None:
            hook("Fetch", event, exc)
        self._abort_soon()

    def _watch(self) -> bool:
        """Watch a duplicate of the socket's descriptor, within the broker's budget of
        descriptors held by waiting answers; False where it is spent (or the process is out
        of descriptors)."""
        broker = self.broker
        if broker.waiting_fds >= broker.waiting_fds_max:
            return False
        try:
            self.sfd = os.dup(self.transport.get_extra_info("socket").fileno())
        except OSError:
            return False
        broker.waiting_fds += 1
        broker.loop.add_writer(self.sfd, self._pump)
        return True

    def _write_rest(self) -> None:
        """Give the transport what is left of ``sending``, regions read into memory (closing)."""
        sending = self.sending
        self._unwatch()
        try:
            for part in sending:
                if type(part) is FileRegion:
                    data = part.read()
                    if len(data) < part.size:  # the file was cut short: the frame cannot be finished
                        self.log.warning("closing connection: a fetched segment file was cut short while sent", region=repr(part))
                        self.abort()
                        return
                    part = data
                self.transport.write(part)
        except OSError as exc:
            self.log.warning("closing connection: a fetched segment could not be read", error=str(exc))
            self.abort()
        finally:
            _release(sending)

    def _drop_sending(self) -> None:
        """Stop sending from files: what is left of ``sending`` is dropped."""
        sending = self.sending
        if sending is not None:
            self._unwatch()
            _release(sending)

    def _unwatch(self) -> None:
        self.sending = None
        if self.sfd >= 0:
            broker = self.broker
            broker.loop.remove_writer(self.sfd)
            os.close(self.sfd)
            self.sfd = -1
            broker.waiting_fds -= 1
