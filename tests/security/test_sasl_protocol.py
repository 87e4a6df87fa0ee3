"""SaslHandshake and SaslAuthenticate byte by byte, against kafkalite and Apache Kafka 4.1 alike.

Every test here runs against both brokers (``target``) and asserts the same
answers: error codes, messages, the enabled-mechanism list and its order,
session lifetimes, and which mistakes close the connection without an
answer. The clients are raw sockets (``raw.py``).
"""

from __future__ import annotations

import struct
import time

import pytest

from broker.security.settings import handshake_order
from broker.testing import unsecured_jwt
from protocol.errors import ErrorCode

from .conftest import MECHANISMS, PASSWORD, REAUTH_MS
from .raw import Closed, Raw, ScramClient, oauth_token, plain_token

GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


def test_handshake_lists_the_enabled_mechanisms_in_kafkas_order(target):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        r = c.handshake("PLAIN")
        assert r.error_code == ErrorCode.none
        assert list(r.mechanisms) == handshake_order(MECHANISMS)
        assert set(r.mechanisms) == set(MECHANISMS)


def test_unsupported_mechanism_is_answered_then_closed(target):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        versions = c.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[17] == (0, 1) and keys[36] == (0, 2) and keys[50] == (0, 0) and keys[51] == (0, 0)
        r = c.handshake("GSSAPI")
        assert r.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(r.mechanisms) == handshake_order(MECHANISMS)
        assert c.closed()


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}),
        (36, 2, {"auth_bytes": b"\0alice\0x"}),
        (19, 7, {"topics": [], "timeout": 1000, "validate_only": False}),
    ],
    ids=["Metadata", "SaslAuthenticate", "CreateTopics"],
)
def test_other_requests_before_the_handshake_close_without_answer(target, api_key, version, body):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.send(api_key, version, body)
        assert c.closed()


def test_a_second_api_versions_closes(target):
    with Raw(target.listeners["SASL_SSL"], tls=target.secured("SASL_SSL").ssl_context()) as c:
        assert c.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"}).error_code == ErrorCode.none
        c.send(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        assert c.closed()


def test_a_request_other_than_sasl_authenticate_after_the_handshake_is_refused(target):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        assert c.handshake("PLAIN").error_code == ErrorCode.none
        corr = c.send(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        r = c.recv(18, 3, corr)
        assert r.error_code == ErrorCode.illegal_sasl_state
        assert c.closed()


def test_garbage_instead_of_a_request_closes(target):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.frame(b"\x60\x82\x01\x00" + b"\x00" * 40)  # a GSSAPI token, as pre-0.10 clients sent first
        assert c.closed()


def test_oversized_token_closes_only_its_connection(target):
    limit = 524288  # sasl.server.max.receive.size, Kafka's default
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c, Raw(target.listeners["SASL_PLAINTEXT"]) as other:
        assert other.handshake("PLAIN").error_code == ErrorCode.none
        assert c.handshake("PLAIN").error_code == ErrorCode.none
        c.sock.sendall((limit + 1).to_bytes(4, "big") + b"\0" * 1024)  # the size alone is enough
        assert c.closed()
        r = other.authenticate(plain_token("alice", PASSWORD))
        assert r.error_code == ErrorCode.none


# -- credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize("user", ["alice", "mallory"])
def test_plain_bad_credentials(target, user):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake("PLAIN")
        r = c.authenticate(plain_token(user, "wrong-password"))
        assert r.error_code == ErrorCode.sasl_authentication_failed
        assert r.error_message == "Authentication failed: Invalid username or password"
        assert c.closed()


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"alice\0" + PASSWORD.encode(), "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"\0\0" + PASSWORD.encode(), "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"bob\0alice\0" + PASSWORD.encode(), "Authentication failed: Client requested an authorization id that is different from username"),
    ],
    ids=["two-tokens", "no-user", "no-password", "other-authzid"],
)
def test_plain_malformed(target, token, message):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake("PLAIN")
        r = c.authenticate(token)
        assert (r.error_code, r.error_message) == (ErrorCode.sasl_authentication_failed, message)
        assert c.closed()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_good_and_wrong_password(target, mechanism):
    with Raw(target.listeners["SASL_SSL"], tls=target.secured("SASL_SSL").ssl_context()) as c:
        client = ScramClient(mechanism, "alice", PASSWORD)
        c.handshake(mechanism)
        first = c.authenticate(client.first())
        assert first.error_code == ErrorCode.none and first.auth_bytes.startswith(b"r=" + client.nonce.encode())
        final = c.authenticate(client.final(first.auth_bytes))
        assert final.error_code == ErrorCode.none and client.verify(final.auth_bytes)
        assert c.request(3, 12, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}).brokers
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        client = ScramClient(mechanism, "alice", PASSWORD)
        c.handshake(mechanism)
        first = c.authenticate(client.first())
        r = c.authenticate(client.final(first.auth_bytes, password="wrong"))
        assert (r.error_code, r.error_message) == (ErrorCode.sasl_authentication_failed, GENERIC.format(mechanism))
        assert c.closed()


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("unknown-user", b"n,,n=mallory,r=abcdef"),
        ("malformed-first", b"y,,n=alice,r=abcdef"),
        ("first-not-utf8", b"n,,n=\xff\xfe,r=abc"),
        ("malformed-final", b"c=biws,r=nonce,p=***"),
        ("wrong-nonce", None),
        ("proof-too-short", None),
    ],
)
def test_scram_malformed_or_unknown(target, step, message):
    mechanism = "SCRAM-SHA-256"
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake(mechanism)
        client = ScramClient(mechanism, "alice", PASSWORD)
        if step.endswith("first") or step.startswith(("unknown", "first")):
            r = c.authenticate(message)
        else:
            first = c.authenticate(client.first())
            assert first.error_code == ErrorCode.none
            if step == "wrong-nonce":
                message = client.final(first.auth_bytes).replace(b",r=" + client.nonce.encode(), b",r=" + b"x" * len(client.nonce), 1)
            elif step == "proof-too-short":
                message = client.final(first.auth_bytes).split(b",p=")[0] + b",p=AAAA"
            if step == "proof-too-short":  # Kafka trips outside its SASL error handling: no answer
                c.send(36, 2, {"auth_bytes": message})
                assert c.closed()
                return
            r = c.authenticate(message)
        assert (r.error_code, r.error_message) == (ErrorCode.sasl_authentication_failed, GENERIC.format(mechanism))
        assert c.closed()


def test_oauthbearer_good_expired_and_malformed(target):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake("OAUTHBEARER")
        r = c.authenticate(oauth_token(unsecured_jwt("carol", lifetime_s=600)))
        assert r.error_code == ErrorCode.none and r.auth_bytes == b""
        # no connections.max.reauth.ms: the session lasts as long as the token
        assert 0 < r.session_lifetime.total_seconds() <= 600
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake("OAUTHBEARER")
        expired = unsecured_jwt("carol", lifetime_s=60, issued_at=time.time() - 120)
        r = c.authenticate(oauth_token(expired))
        assert r.error_code == ErrorCode.none and r.auth_bytes == b'{"status":"invalid_token"}'
        r = c.authenticate(b"\x01")
        assert (r.error_code, r.error_message) == (ErrorCode.sasl_authentication_failed, '{"status":"invalid_token"}')
        assert c.closed()
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake("OAUTHBEARER")
        r = c.authenticate(b"n,,auth=Bearer x")
        assert (r.error_code, r.error_message) == (ErrorCode.sasl_authentication_failed, GENERIC.format("OAUTHBEARER"))
        assert c.closed()


def test_v0_handshake_takes_raw_tokens(target):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        r = c.handshake("PLAIN", version=0)
        assert r.error_code == ErrorCode.none
        c.frame(plain_token("alice", PASSWORD))
        assert c.recv_frame() == b""  # PLAIN's empty challenge, size-prefixed, no header
        assert c.request(3, 12, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}).brokers
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake("SCRAM-SHA-512", version=0)
        client = ScramClient("SCRAM-SHA-512", "alice", PASSWORD)
        c.frame(client.first())
        server_first = c.recv_frame()
        c.frame(client.final(server_first, password="wrong"))
        assert c.closed()  # v0: no error answer


def test_sasl_requests_after_authentication_are_illegal(target):
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake("PLAIN")
        assert c.authenticate(plain_token("alice", PASSWORD)).error_code == ErrorCode.none
        r = c.authenticate(b"again")
        assert (r.error_code, r.error_message) == (ErrorCode.illegal_sasl_state, "SaslAuthenticate request received after successful authentication")
        r = c.handshake("PLAIN")
        assert (r.error_code, list(r.mechanisms)) == (ErrorCode.illegal_sasl_state, [])


def test_requests_in_the_same_write_as_the_authentication_are_answered_in_order(target):
    """Requests sent with the SaslAuthenticate that completes authentication, in one write, and a
    frame cut in two by the end of it, are requests as any others: answered, in order."""
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake("PLAIN")
        framed: list[bytes] = []
        c.frame = lambda payload: framed.append(struct.pack(">i", len(payload)) + payload)  # encode, do not send
        auth = c.send(36, 2, {"auth_bytes": plain_token("alice", PASSWORD)})
        versions = c.send(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        metadata = c.send(3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        del c.frame
        data = b"".join(framed)
        cut = len(data) - 7  # inside the Metadata request
        c.sock.sendall(data[:cut])
        assert c.recv(36, 2, auth).error_code == ErrorCode.none
        assert c.recv(18, 3, versions).error_code == ErrorCode.none
        c.sock.sendall(data[cut:])
        assert c.recv(3, 12, metadata).brokers


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL"])
def test_sasl_requests_on_other_listeners_are_illegal(target, listener):
    tls = target.secured(listener).ssl_context() if listener == "SSL" else None
    with Raw(target.listeners[listener], tls=tls) as c:
        r = c.handshake("PLAIN")
        assert (r.error_code, list(r.mechanisms)) == (ErrorCode.illegal_sasl_state, [])
        r = c.authenticate(plain_token("alice", PASSWORD), version=1)
        assert r.error_code == ErrorCode.illegal_sasl_state


# -- KIP-368: session lifetime and re-authentication ------------------------------------------------

METADATA = (3, 12, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})


def _login(c: Raw, user: str = "alice", password: str = PASSWORD):
    assert c.handshake("PLAIN").error_code == ErrorCode.none
    return c.authenticate(plain_token(user, password))


def test_session_lifetime_and_reauthentication(target):
    with Raw(target.listeners["REAUTH"]) as c:
        r = _login(c)
        assert r.error_code == ErrorCode.none
        assert r.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        assert c.request(*METADATA).brokers
        # re-authenticate: same mechanism, same principal; the lifetime starts again
        r = _login(c)
        assert (r.error_code, r.session_lifetime.total_seconds() * 1000) == (ErrorCode.none, REAUTH_MS)
        assert c.request(*METADATA).brokers
        # a second re-authentication within a second is a plain SaslHandshake: illegal
        r = c.handshake("PLAIN")
        assert (r.error_code, list(r.mechanisms)) == (ErrorCode.illegal_sasl_state, [])
        assert c.request(*METADATA).brokers


def test_session_expiry_closes_at_the_next_request(target):
    with Raw(target.listeners["REAUTH"]) as c:
        started = time.monotonic()
        r = _login(c)
        assert r.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        time.sleep(max(0.0, started + REAUTH_MS / 1000 + 0.5 - time.monotonic()))  # the lifetime must pass: that is the test
        c.send(*METADATA)
        assert c.closed()


def test_reauthentication_must_keep_the_principal_and_mechanism(target):
    with Raw(target.listeners["REAUTH"]) as c:
        assert _login(c).error_code == ErrorCode.none
        assert c.handshake("OAUTHBEARER").error_code == ErrorCode.none
        c.send(36, 2, {"auth_bytes": oauth_token(unsecured_jwt("alice"))})
        assert c.closed()  # another mechanism: closed without an answer
    with Raw(target.listeners["REAUTH"]) as c:
        assert c.handshake("OAUTHBEARER").error_code == ErrorCode.none
        assert c.authenticate(oauth_token(unsecured_jwt("alice"))).error_code == ErrorCode.none
        assert c.handshake("OAUTHBEARER").error_code == ErrorCode.none
        r = c.authenticate(oauth_token(unsecured_jwt("bob")))
        assert (r.error_code, r.error_message) == (ErrorCode.sasl_authentication_failed, "Cannot change principals during re-authentication from User.alice: User.bob")
        assert c.closed()


def test_closed_means_closed(target):
    """The raw client's ``closed()`` does see an open connection as open (the other tests lean on it)."""
    with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
        c.handshake("PLAIN")
        with pytest.raises(AssertionError):
            c.send(36, 2, {"auth_bytes": plain_token("alice", PASSWORD)})
            c.closed()
    with pytest.raises(Closed):
        with Raw(target.listeners["SASL_PLAINTEXT"]) as c:
            c.send(*METADATA)
            c.recv_frame()
