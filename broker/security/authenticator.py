"""SASL on one connection: authentication (``Authenticator``) and the session after it (``Session``).

``Authenticator`` is Kafka's SaslServerAuthenticator, sans-IO: the connection
hands it each frame until the client has authenticated, and writes what it
answers. What a client may send, in order:

1. ApiVersions, at most once (an unsupported version gets the v0 error
   answer and may be retried);
2. SaslHandshake, v0 or v1. A mechanism not enabled on the listener gets
   UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection
   closes;
3. v1: SaslAuthenticate requests carrying the mechanism's tokens, each
   answered with the server's token, the last one with the session lifetime
   (v1+); a failure answers SASL_AUTHENTICATION_FAILED with a message, then
   closes. v0: the tokens themselves, size-prefixed, with no Kafka header
   (the framing of clients before KIP-152, which Kafka 4.x still accepts);
   a failure closes at once.

Anything else closes the connection without an answer, as Kafka does: any
other API before the handshake (its body is not even decoded), a second
ApiVersions, a frame larger than ``sasl.server.max.receive.size``, a frame
that is no request; and after the handshake, a request other than
SaslAuthenticate is answered with ILLEGAL_SASL_STATE (Kafka's error answer
for that API) and closed.

``Session`` is what remains once authenticated: the mechanism, the
principal, and when the session expires (KIP-368): the lifetime is
``connections.max.reauth.ms`` for the listener and mechanism, or for
OAUTHBEARER the token's expiry if sooner; 0 means no expiry. The connection
closes at the first request past the expiry other than SaslHandshake; a
SaslHandshake (at most one a second) starts re-authentication, which the
SaslHandshake and SaslAuthenticate handlers carry out with the same
mechanism and must end with the same principal.
"""

from __future__ import annotations

import struct
import time

from protocol.codec import build, response_class
from protocol.connection import ProtocolError, ServerConnection, UnsupportedVersion
from protocol.errors import ErrorCode

from . import mechanisms

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
# states, as Kafka's SaslState
INITIAL, HANDSHAKE_OR_VERSIONS, HANDSHAKE, AUTHENTICATE, COMPLETE, FAILED = range(6)
_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")
MIN_REAUTH_INTERVAL_S = 1.0  # Kafka: at most one re-authentication a second


def generic_failure(mechanism: str, reauth: bool = False) -> str:
    """Kafka's answer to a failure whose own message could say too much (a SaslException)."""
    what = "re-authentication" if reauth else "authentication"
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"


def encode(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    cls = response_class(api_key, version)
    return ServerConnection.encode_response(api_key, version, correlation_id, build(cls, body))


def lifetime_ms(server: mechanisms.MechanismServer, max_reauth_ms: int) -> int | None:
    """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: None when the session never expires."""
    expires = server.expires_ms
    if expires is None and max_reauth_ms <= 0:
        return None
    left = None if expires is None else max(0, expires - int(time.time() * 1000))
    if left is None:
        return max_reauth_ms
    if max_reauth_ms <= 0:
        return left
    return min(left, max_reauth_ms)


class Session:
    """An authenticated SASL connection: who, how, until when; and a re-authentication in progress."""

    __slots__ = ("security", "mechanism", "principal", "expires", "lifetime", "reauth_started", "server", "bad_mechanism")

    def __init__(self, security, mechanism: str, principal: str, lifetime: int | None) -> None:
        self.security = security
        self.mechanism = mechanism
        self.principal = principal
        self.lifetime = lifetime
        self.expires = None if lifetime is None else time.monotonic() + lifetime / 1000
        self.reauth_started = 0.0
        self.server: mechanisms.MechanismServer | None = None  # while re-authenticating
        self.bad_mechanism: str | None = None

    @property
    def reauthenticating(self) -> bool:
        return self.server is not None or self.bad_mechanism is not None

    def expired(self) -> bool:
        return self.expires is not None and time.monotonic() > self.expires

    def can_reauthenticate(self) -> bool:
        """Kafka starts a re-authentication only for a session that expires, at most once a second."""
        if self.expires is None:
            return False
        now = time.monotonic()
        if self.reauth_started and now - self.reauth_started < MIN_REAUTH_INTERVAL_S:
            return False
        self.reauth_started = now
        return True


class Authenticator:
    """The SASL state of a connection until it has authenticated (see the module docstring)."""

    __slots__ = ("conn", "security", "store", "state", "mechanism", "server", "headers", "session", "max_receive", "failure")

    def __init__(self, conn, security, store) -> None:
        self.conn = conn
        self.security = security
        self.store = store
        self.state = INITIAL
        self.mechanism: str | None = None
        self.server: mechanisms.MechanismServer | None = None
        self.headers = True  # SaslHandshake v1+: tokens in SaslAuthenticate requests
        self.session: Session | None = None
        self.max_receive = security.max_receive
        self.failure: tuple[str, str] | None = None  # (reason kind, detail) of the failure that closed it

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    def _fail(self, kind: str, detail: str, answer: bytes | None = None) -> tuple[bytes | None, bool]:
        self.state = FAILED
        self.failure = (kind, detail)
        return answer, True

    def receive(self, frame: bytes) -> tuple[bytes | None, bool]:
        """One frame in; (the answer to write or None, whether to close the connection after it)."""
        state = self.state
        if state == AUTHENTICATE:
            return self._token(frame) if self.headers else self._raw_token(frame)
        if state not in (INITIAL, HANDSHAKE_OR_VERSIONS, HANDSHAKE):
            return self._fail("illegal_state", "a frame after the authentication ended")
        if len(frame) < 8:
            return self._fail("malformed", "a frame too short for a request header")
        (api_key,) = _KEY.unpack_from(frame, 0)
        if api_key not in self.conn.broker.supported:
            return self._fail("malformed", "the first frame is not a Kafka request (GSSAPI's raw tokens are not served)")
        if state == INITIAL:
            self.state = state = HANDSHAKE_OR_VERSIONS
        if api_key not in (API_VERSIONS, SASL_HANDSHAKE):
            return self._fail("illegal_state", f"API key {api_key} before authentication")
        try:
            event = self.conn.proto.parse_frame(frame)
        except ProtocolError as exc:
            return self._fail("malformed", str(exc))
        if api_key == API_VERSIONS:
            if state != HANDSHAKE_OR_VERSIONS:
                return self._fail("illegal_state", "a second ApiVersions before authentication")
            if type(event) is UnsupportedVersion:
                return self.conn.answer_unsupported(event), False  # the client may try another version
            answer = self.conn.answer_now(event)
            self.state = HANDSHAKE
            return answer, answer is None
        if type(event) is UnsupportedVersion:
            return self._fail("malformed", f"SaslHandshake v{event.api_version}")
        mechanism = event.body.mechanism
        enabled = self.security.handshake_mechanisms
        self.headers = event.api_version >= 1
        if mechanism not in self.security.mechanisms:
            self.mechanism = mechanism if len(mechanism) <= 64 else mechanism[:64] + "..."
            answer = encode(SASL_HANDSHAKE, event.api_version, event.correlation_id, {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": enabled})
            return self._fail("unsupported_mechanism", f"mechanism {self.mechanism!r} is not enabled", answer)
        self.mechanism = mechanism
        self.server = self.security.server(mechanism, self.store)
        self.state = AUTHENTICATE
        return encode(SASL_HANDSHAKE, event.api_version, event.correlation_id, {"error_code": ErrorCode.none, "mechanisms": enabled}), False

    def _token(self, frame: bytes) -> tuple[bytes | None, bool]:
        try:
            event = self.conn.proto.parse_frame(frame)
        except ProtocolError as exc:
            return self._fail("malformed", str(exc))
        if type(event) is UnsupportedVersion:
            return self._fail("malformed", f"API key {event.api_key} v{event.api_version} during authentication")
        if event.api_key != SASL_AUTHENTICATE:
            from ..faults import error_response  # the rare path: Kafka answers that request with ILLEGAL_SASL_STATE

            body = error_response(event, ErrorCode.illegal_sasl_state, f"Unexpected Kafka request of type {event.api_key} during SASL authentication.")
            answer = None
            if isinstance(body, dict):
                answer = encode(event.api_key, event.api_version, event.correlation_id, body)
            return self._fail("illegal_state", f"API key {event.api_key} during authentication", answer)
        version, corr = event.api_version, event.correlation_id
        try:
            challenge = self.server.evaluate(bytes(event.body.auth_bytes))
        except mechanisms.AuthFailed as exc:
            answer = None
            if exc.answer:
                message = exc.message or generic_failure(self.mechanism)
                answer = encode(SASL_AUTHENTICATE, version, corr, {"error_code": ErrorCode.sasl_authentication_failed, "error_message": message, "auth_bytes": b""})
            return self._fail("bad_credentials", exc.reason, answer)
        lifetime = 0
        if self.server.complete:
            life = lifetime_ms(self.server, self.security.reauth_ms.get(self.mechanism, 0))
            lifetime = life or 0
            self._complete(life)
        return encode(SASL_AUTHENTICATE, version, corr, {"error_code": ErrorCode.none, "error_message": "", "auth_bytes": challenge, "session_lifetime": lifetime}), False

    def _raw_token(self, frame: bytes) -> tuple[bytes | None, bool]:
        try:
            challenge = self.server.evaluate(frame)
        except mechanisms.AuthFailed as exc:
            return self._fail("bad_credentials", exc.reason)
        if self.server.complete:
            self._complete(lifetime_ms(self.server, self.security.reauth_ms.get(self.mechanism, 0)))
        return _SIZE.pack(len(challenge)) + challenge, False

    def _complete(self, lifetime: int | None) -> None:
        self.state = COMPLETE
        self.session = Session(self.security, self.mechanism, "User:" + self.server.authorization_id, lifetime)
        self.server = None


# -- re-authentication (KIP-368), through the SaslHandshake and SaslAuthenticate handlers -----------


def reauth_handshake(session: Session, store, mechanism: str, version: int) -> tuple[dict, bool]:
    """A SaslHandshake that starts a re-authentication: (answer, close after it)."""
    enabled = session.security.handshake_mechanisms
    if mechanism not in session.security.mechanisms:
        return {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": enabled}, True
    if version < 1:
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": enabled}, True
    if mechanism != session.mechanism:
        session.bad_mechanism = (
            f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of mechanism '{session.mechanism}'"
        )
    else:
        session.server = session.security.server(mechanism, store)
    return {"error_code": ErrorCode.none, "mechanisms": enabled}, False


def reauth_token(session: Session, token: bytes) -> tuple[dict | None, bool, str | None]:
    """A SaslAuthenticate during re-authentication: (answer or None, close after it, failure reason)."""
    if session.bad_mechanism is not None:
        reason, session.bad_mechanism = session.bad_mechanism, None
        return None, True, reason
    server = session.server
    try:
        challenge = server.evaluate(token)
    except mechanisms.AuthFailed as exc:
        session.server = None
        if not exc.answer:
            return None, True, exc.reason
        message = exc.message or generic_failure(session.mechanism, reauth=True)
        return {"error_code": ErrorCode.sasl_authentication_failed, "error_message": message, "auth_bytes": b""}, True, exc.reason
    lifetime = 0
    if server.complete:
        session.server = None
        principal = "User:" + server.authorization_id
        if principal != session.principal:
            old, new = session.principal.split(":", 1), principal.split(":", 1)
            message = f"Cannot change principals during re-authentication from {old[0]}.{old[1]}: {new[0]}.{new[1]}"
            return {"error_code": ErrorCode.sasl_authentication_failed, "error_message": message, "auth_bytes": b""}, True, message
        life = lifetime_ms(server, session.security.reauth_ms.get(session.mechanism, 0))
        session.lifetime = life
        session.expires = None if life is None else time.monotonic() + life / 1000
        lifetime = life or 0
    return {"error_code": ErrorCode.none, "error_message": "", "auth_bytes": challenge, "session_lifetime": lifetime}, False, None
