"""The SASL gate and TLS reading: a part of ``KafkaConnection`` (a mixin).

- On a SASL listener a connection starts with an ``Authenticator``
  (broker/security/authenticator.py): until the client has authenticated, each
  frame goes to it (``_authenticate``), not to the request queue, and nothing
  else is answered. A session with an expiry (KIP-368) closes the connection on
  any request but a re-authentication once it has expired (``_session_over``).
- On a TLS listener, while a large request arrives, the socket's SO_RCVLOWAT is
  raised so that the transport wakes up for most of the rest of it at once
  (``_tune_lowat``).
"""

from __future__ import annotations

import socket

from protocol.connection import Request, ServerConnection
from protocol.framing import FrameError

from .common import _LOWAT_MAX, _LOWAT_MIN, _SO_RCVLOWAT, _TLS_RECORD, _now


class SaslGate:
    """SASL authentication before requests, and TLS low-water tuning (a mixin of KafkaConnection)."""

    __slots__ = ()

    def _tune_lowat(self, proto: ServerConnection) -> None:
        """TLS connections in the middle of a large request: wake up for no less than most of its
        rest. A TLS client writes records of 16 KiB at most (librdkafka much smaller ones), and the
        transport decrypts and hands over what arrived at each wake-up, which for large requests
        cost twice the CPU of the decryption itself (bench/tls_cost.py). With SO_RCVLOWAT the
        kernel reports the socket readable only once that many bytes wait (or at EOF): the rest of
        the frame, less one TLS record (the transport may hold up to one partial record of it
        already), at most _LOWAT_MAX. Back to 1 between frames, so a small request is never held."""
        left = proto.frame_left
        want = min(left - _TLS_RECORD, _LOWAT_MAX) if left > _LOWAT_MIN + _TLS_RECORD else 1
        if want != self.lowat:
            sock = self.transport.get_extra_info("socket")
            try:
                sock.setsockopt(socket.SOL_SOCKET, _SO_RCVLOWAT, want)
            except (OSError, AttributeError):
                self.lowat = None
                return
            self.lowat = want

    # -- SASL -------------------------------------------------------------
    def _authenticate(self, data: bytes) -> None:
        """Before a SASL client has authenticated: its frames (at most ``sasl.server.max.receive.size``
        each) go one by one to the Authenticator, which answers here and now; none reaches the
        request queue. Frames that follow the one that completed it are requests as any others."""
        auth = self.auth
        proto = self.proto
        if proto is None:
            proto = self.proto = ServerConnection(self.broker.supported, min(auth.max_receive, self.broker.config.max_frame_bytes))
        try:
            frames = proto.receive_frames(data)
        except FrameError as exc:
            auth.failure = ("oversized" if "exceeds" in str(exc) else "malformed", str(exc))
            self._auth_closed(auth)
            return
        for i, frame in enumerate(frames):
            try:
                out, close = auth.receive(frame)
            except Exception as exc:  # noqa: BLE001 - a bug in the authenticator: close only this connection
                self.log.error("authenticator failed", exc_info=exc)
                hook = self.broker.on_handler_error
                if hook is not None:
                    hook("SaslAuthenticator", Request(-1, 0, 0, None, None, len(frame)), exc)
                self.close()
                return
            if out is not None and not self.closing:
                self.transport.write(out)
            if close:
                self._auth_closed(auth)
                return
            self.seen = _now()
            if auth.complete:
                session = auth.session
                self.auth = None
                self.sasl = session
                self.principal = session.principal
                self.expires = session.expires
                self.broker.auth_event(self, session.mechanism, None)
                # the frames after this one are requests as any others, framed already: handed on
                # with the rest of the read, not framed again
                rest = frames[i + 1 :]
                pending = proto.take_pending()
                self.proto = None  # the next one takes frames up to socket.request.max.bytes
                if rest or pending:
                    self.data_received(pending, rest)
                return

    def _auth_closed(self, auth) -> None:
        self.broker.auth_event(self, auth.mechanism, auth.failure or ("illegal_state", "closed"))
        self.close()

    def _session_over(self, events) -> bool:
        """A SASL session with an expiry (KIP-368): past it, any request but SaslHandshake (which may
        start a re-authentication) closes the connection; during a re-authentication, any but
        SaslAuthenticate. True if it closed."""
        session = self.sasl
        if session.reauthenticating:
            allowed, why = 36, "a request other than SaslAuthenticate during re-authentication"
        elif session.expired():
            allowed, why = 17, "the SASL session expired (connections.max.reauth.ms) without re-authentication"
        else:
            return False
        for event in events:
            if event.api_key != allowed:
                self.broker.auth_event(self, session.mechanism, ("expired_session" if allowed == 17 else "illegal_state", why), reauth=True)
                self.close()
                return True
        return False
