"""The SASL mechanisms' server side, alone: RFC test vectors, Kafka's token rules, and hostile input."""

from __future__ import annotations

import base64
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.security import scram
from broker.security.mechanisms import AuthFailed, OAuthBearerServer, PlainServer, ScramServer, plain_password_hash
from broker.testing import unsecured_jwt


def _rfc7677_store():
    cred = scram.from_password("SCRAM-SHA-256", "pencil", 4096, salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    return scram.ScramStore(None, {"user": {"SCRAM-SHA-256": cred}})


def test_scram_sha_256_rfc7677_example():
    server = ScramServer("SCRAM-SHA-256", _rfc7677_store())
    server.server_nonce = lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"
    with pytest.raises(AuthFailed) as e:
        server.evaluate(b"more")
    assert not e.value.answer


def test_scram_wrong_proof_and_channel_binding():
    for final in (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVX=",
        b"c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    ):
        server = ScramServer("SCRAM-SHA-256", _rfc7677_store())
        server.server_nonce = lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
        server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
        with pytest.raises(AuthFailed) as e:
            server.evaluate(final)
        assert e.value.message is None and e.value.answer  # Kafka's generic answer
        assert not server.complete


def test_scram_user_names_are_unescaped_and_iterations_checked():
    weak = scram.from_password("SCRAM-SHA-512", "pw", 1000)
    store = scram.ScramStore(None, {"a,b=c": {"SCRAM-SHA-512": scram.from_password("SCRAM-SHA-512", "pw")}, "weak": {"SCRAM-SHA-512": weak}})
    assert ScramServer("SCRAM-SHA-512", store).evaluate(b"n,,n=a=2Cb=3Dc,r=x").startswith(b"r=x")
    with pytest.raises(AuthFailed):
        ScramServer("SCRAM-SHA-512", store).evaluate(b"n,,n=weak,r=x")
    with pytest.raises(AuthFailed) as e:
        ScramServer("SCRAM-SHA-512", store).evaluate(b"n,a=other,n=a=2Cb=3Dc,r=x")
    assert "authorization id" in e.value.message


def test_plain():
    key = b"k" * 32
    server = PlainServer({"alice": plain_password_hash(key, "pw")}, key)
    assert server.evaluate(b"\0alice\0pw") == b"" and server.authorization_id == "alice"
    for token in (b"\0alice\0nope", b"\0bob\0pw"):
        with pytest.raises(AuthFailed) as e:
            PlainServer({"alice": plain_password_hash(key, "pw")}, key).evaluate(token)
        assert e.value.message == "Authentication failed: Invalid username or password"


@pytest.mark.parametrize(
    ("make", "ok"),
    [
        (lambda: unsecured_jwt("u"), True),
        (lambda: unsecured_jwt("u", issued_at=time.time() - 100, lifetime_s=50), False),  # expired
        (lambda: unsecured_jwt("u", issued_at=time.time() + 100), False),  # issued in the future
        (lambda: unsecured_jwt("u", lifetime_s=-1), False),  # expires before it was issued
        (lambda: unsecured_jwt("u", claims={"exp": True}), False),  # not a number
        (lambda: unsecured_jwt("u", claims={"sub": ""}), False),
        (lambda: unsecured_jwt("u", claims={"sub": 5}), False),
        (lambda: unsecured_jwt("u") + "c2ln", False),  # a signature
        (lambda: unsecured_jwt("u").replace("eyJhbGciOiJub25lIn0", "eyJhbGciOiJIUzI1NiJ9"), False),  # alg HS256
        (lambda: "a..b", False),
        (lambda: "e30.e30", False),
    ],
    ids=["valid", "expired", "future", "exp-before-iat", "exp-not-number", "blank-sub", "sub-not-string", "signed", "alg-hs256", "double-dot", "two-parts"],
)
def test_oauthbearer_tokens(make, ok):
    jwt = make()  # made now: a token made at collection time would age while other tests run
    server = OAuthBearerServer({})
    out = server.evaluate(f"n,,\x01auth=Bearer {jwt}\x01\x01".encode())
    assert server.complete is ok
    if ok:
        assert out == b"" and server.authorization_id == "u" and server.expires_ms > time.time() * 1000
    else:
        assert out == b'{"status":"invalid_token"}'
        with pytest.raises(AuthFailed) as e:
            server.evaluate(b"\x01")
        assert e.value.message == '{"status":"invalid_token"}'


def test_oauthbearer_scope_and_claim_options():
    server = OAuthBearerServer({"unsecuredValidatorRequiredScope": "read write", "unsecuredValidatorPrincipalClaimName": "client"})
    out = server.evaluate(f"n,,\x01auth=Bearer {unsecured_jwt('x', claims={'client': 'svc', 'scope': ['read']})}\x01\x01".encode())
    assert out == b'{"status":"insufficient_scope", "scope":"[read, write]"}'
    server = OAuthBearerServer({"unsecuredValidatorRequiredScope": "read write", "unsecuredValidatorPrincipalClaimName": "client"})
    assert server.evaluate(f"n,,\x01auth=Bearer {unsecured_jwt('x', claims={'client': 'svc', 'scope': ['read', 'write']})}\x01\x01".encode()) == b""
    assert server.authorization_id == "svc"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=3), st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]))
def test_hostile_tokens_only_ever_fail_cleanly(tokens, mechanism):
    key = b"k" * 32
    store = scram.ScramStore(None, {"u": {m: scram.from_password(m, "pw", 4096, salt=b"s" * 16) for m in scram.HASHES}})
    server = {
        "PLAIN": lambda: PlainServer({"u": plain_password_hash(key, "pw")}, key),
        "OAUTHBEARER": lambda: OAuthBearerServer({}),
    }.get(mechanism, lambda: ScramServer(mechanism, store))()
    for token in tokens:
        try:
            out = server.evaluate(token)
        except AuthFailed:
            return
        assert isinstance(out, bytes)
