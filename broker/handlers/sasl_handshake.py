"""SaslHandshake (17), v0-1.

Before a SASL client has authenticated, its SaslHandshake never gets here:
the connection's Authenticator answers it (broker/security/authenticator.py).
Here it arrives on an authenticated SASL connection, where it starts a
re-authentication (KIP-368) if the session expires and none started in the
last second, or on any other connection, where Kafka's request handler
answers ILLEGAL_SASL_STATE with no mechanisms; so does this one. A
re-authentication that cannot go on (a mechanism not enabled, a v0
handshake) is answered and the connection closed; a session already past its
expiry that cannot re-authenticate is closed, as Kafka closes it.
"""

from protocol.errors import ErrorCode

API_KEY = 17
NAME = "SaslHandshake"
VERSIONS = (0, 1)


async def handle(ctx, req):
    conn = ctx.conn
    session = getattr(conn, "sasl", None)
    if session is not None and not session.reauthenticating and session.can_reauthenticate():
        from ..security.authenticator import reauth_handshake

        body, close = reauth_handshake(session, ctx.broker.scram, req.mechanism, ctx.version)
        if close:
            ctx.broker.auth_event(conn, req.mechanism[:64], ("unsupported_mechanism", "re-authentication handshake refused"), reauth=True)
            conn.answer_and_close(body)
            return None
        return body
    if session is not None and session.expired():
        ctx.broker.auth_event(conn, session.mechanism, ("expired_session", "expired, and may not re-authenticate yet"), reauth=True)
        conn.answer_and_close(None)
        return None
    return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
