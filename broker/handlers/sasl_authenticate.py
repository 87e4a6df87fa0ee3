"""SaslAuthenticate (36), v0-2.

As with SaslHandshake, the SaslAuthenticate requests of a client that has not
authenticated go to its connection's Authenticator, never here. Here they
carry a re-authentication (KIP-368) that SaslHandshake started: the same
mechanism's exchange, ending with the same principal, after which the
session lifetime starts again. A failure is answered with
SASL_AUTHENTICATION_FAILED and closes the connection. Otherwise (no
re-authentication in progress, or a PLAINTEXT or SSL listener) the answer
is Kafka's: ILLEGAL_SASL_STATE.
"""

from protocol.errors import ErrorCode

API_KEY = 36
NAME = "SaslAuthenticate"
VERSIONS = (0, 2)


async def handle(ctx, req):
    conn = ctx.conn
    session = getattr(conn, "sasl", None)
    if session is not None and session.reauthenticating:
        from ..security.authenticator import reauth_token

        body, close, reason = reauth_token(session, bytes(req.auth_bytes))
        if close:
            ctx.broker.auth_event(conn, session.mechanism, ("bad_credentials", reason or "re-authentication failed"), reauth=True)
            conn.answer_and_close(body)
            return None
        if session.server is None:  # done
            ctx.broker.auth_event(conn, session.mechanism, None, reauth=True)
            conn.expires = session.expires
        return body
    return {
        "error_code": ErrorCode.illegal_sasl_state,
        "error_message": "SaslAuthenticate request received after successful authentication",
        "auth_bytes": b"",
    }
