"""The server side of the SASL mechanisms, sans-IO: ``evaluate(token) -> challenge``.

Each behaves as Kafka's own server for it (PlainSaslServer, ScramSaslServer,
OAuthBearerSaslServer with the unsecured JWS validator), including what the
client is told when it fails: ``AuthFailed(message)`` carries Kafka's message
where Kafka passes its own (PLAIN's "Invalid username or password"), or None
where Kafka answers with its generic "invalid credentials" sentence (every
SCRAM failure, a malformed OAUTHBEARER message). ``reason`` is for the
broker's log only; no message or reason ever holds a password, a proof or a
token.

The messages are parsed with RE2 (linear time, whatever the client sends);
their size is bounded by ``sasl.server.max.receive.size`` before they get here.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import math
import secrets
import time

import re2

from . import scram


class AuthFailed(Exception):
    """Authentication failed. ``message``: what the client is told (None: Kafka's generic
    sentence); ``reason``: what the broker logs."""

    def __init__(self, message: str | None, reason: str | None = None, *, answer: bool = True) -> None:
        super().__init__(reason or message or "authentication failed")
        self.message = message
        self.reason = reason or message or "authentication failed"
        self.answer = answer  # False: the connection is closed without a response (as Kafka does)


class MechanismServer:
    name = ""
    complete = False
    authorization_id: str | None = None
    expires_ms: int | None = None  # when the credential expires (OAUTHBEARER), epoch ms

    def evaluate(self, token: bytes) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError


# -- PLAIN (RFC 4616) ------------------------------------------------------------------------


class PlainServer(MechanismServer):
    name = "PLAIN"

    def __init__(self, users: dict[str, bytes], key: bytes) -> None:
        self.users = users  # user -> HMAC(key, password): no password is kept
        self.key = key

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthFailed(None, "PLAIN: a token after authentication completed", answer=False)
        tokens = token.decode("utf-8", "replace").split("\0", 3)
        if len(tokens) != 3:
            raise AuthFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise AuthFailed("Authentication failed: username not specified")
        if not password:
            raise AuthFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        given = hmac.new(self.key, password.encode("utf-8"), "sha256").digest()
        if expected is None or not hmac.compare_digest(expected, given):
            raise AuthFailed("Authentication failed: Invalid username or password", f"PLAIN: bad password or unknown user {username!r}")
        if authzid and authzid != username:
            raise AuthFailed("Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


def plain_password_hash(key: bytes, password: str) -> bytes:
    return hmac.new(key, password.encode("utf-8"), "sha256").digest()


# -- SCRAM (RFC 5802, 7677) --------------------------------------------------------------------

# Kafka's ScramMessages grammar; the character classes spelled out (RE2 has no '&&')
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re2.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re2.compile(rf"(?P<without>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_B64})")


def _sasl_name(text: str) -> str:
    return text.replace("=2C", ",").replace("=3D", "=")


class ScramServer(MechanismServer):
    server_nonce = staticmethod(lambda: secrets.token_urlsafe(24))  # printable, no ','

    def __init__(self, mechanism: str, store: scram.ScramStore) -> None:
        self.name = mechanism
        self.store = store
        self.state = 0  # 0: client-first expected, 1: client-final expected, 2: complete, 3: failed
        self.credential: scram.ScramCredential | None = None
        self.auth_prefix = b""

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self.state == 0:
                return self._first(token)
            if self.state == 1:
                return self._final(token)
        except AuthFailed:
            self.state = 3
            self.credential = None
            raise
        raise AuthFailed(None, f"{self.name}: a token in state {self.state}", answer=False)

    def _first(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise AuthFailed(None, f"{self.name}: malformed client-first message")
        ext = m.group("ext")
        if ext and any(kv.split("=", 1)[0] == "tokenauth" and kv.split("=", 1)[1].lower() == "true" for kv in ext[1:].split(",")):
            raise AuthFailed(None, f"{self.name}: delegation tokens are not served")
        username = _sasl_name(m.group("saslname"))
        cred = self.store.get(username, self.name)
        if cred is None:
            raise AuthFailed(None, f"{self.name}: unknown user {username!r}")
        authzid = m.group("authzid")
        if authzid and _sasl_name(authzid) != username:
            raise AuthFailed("Authentication failed: Client requested an authorization id that is different from username")
        if cred.iterations < scram.MIN_ITERATIONS:
            raise AuthFailed(None, f"{self.name}: the credential of {username!r} has fewer than {scram.MIN_ITERATIONS} iterations")
        self.nonce = m.group("nonce") + self.server_nonce()
        self.username = username
        self.credential = cred
        self.gs2_header = text[: len(text) - len(m.group("bare"))]  # bare runs to the end
        server_first = f"r={self.nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self.auth_prefix = f"{m.group('bare')},{server_first},".encode()
        self.state = 1
        return server_first.encode()

    def _final(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise AuthFailed(None, f"{self.name}: malformed client-final message")
        if m.group("nonce") != self.nonce:
            raise AuthFailed(None, f"{self.name}: the client-final nonce is not the server's")
        if base64.b64decode(m.group("channel")) != self.gs2_header.encode():
            raise AuthFailed(None, f"{self.name}: channel binding does not match the gs2 header")
        cred = self.credential
        auth_message = self.auth_prefix + m.group("without").encode()
        proof = base64.b64decode(m.group("proof"))
        signature = scram.hmac_(self.name, cred.stored_key, auth_message)
        if len(proof) < len(signature):  # Kafka fails outside its SASL error handling here: closed, no answer
            raise AuthFailed(None, f"{self.name}: the client proof is too short", answer=False)
        if len(proof) > len(signature):
            raise AuthFailed(None, f"{self.name}: the client proof is too long")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(scram.h(self.name, client_key), cred.stored_key):
            raise AuthFailed(None, f"{self.name}: wrong password for {self.username!r}")
        server_signature = scram.hmac_(self.name, cred.server_key, auth_message)
        self.credential = None
        self.state = 2
        self.complete = True
        self.authorization_id = self.username
        return b"v=" + base64.b64encode(server_signature)


# -- OAUTHBEARER (RFC 7628) with unsecured JWS tokens ------------------------------------------

_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_OAUTH_FIRST = re2.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01")
_AUTH = re2.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


class _Invalid(Exception):
    """The token fails validation (the client gets an error JSON, then a failure)."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


def _b64_json(part: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(part.replace("+", "-").replace("/", "_") + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        raise _Invalid("malformed Base64 URL encoded value or JSON") from None
    if not isinstance(value, dict):
        raise _Invalid("malformed JSON")
    return value


def _number(claims: dict, name: str) -> float | None:
    v = claims.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _Invalid(f"the {name!r} claim is not a number")
    return float(v)


class OAuthBearerServer(MechanismServer):
    name = "OAUTHBEARER"

    def __init__(self, options: dict[str, str], clock=time.time) -> None:
        self.principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub"
        self.scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope"
        self.required_scope = (options.get("unsecuredValidatorRequiredScope") or "").split()
        self.skew_ms = int((options.get("unsecuredValidatorAllowableClockSkewMs") or "0").strip() or 0)
        self.clock = clock
        self.error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthFailed(None, "OAUTHBEARER: a token after authentication completed", answer=False)
        if token == b"\x01" and self.error is not None:
            raise AuthFailed(self.error, f"OAUTHBEARER: invalid token ({self.error})")
        self.error = None
        m = _OAUTH_FIRST.fullmatch(token.decode("utf-8", "replace"))
        if m is None:
            raise AuthFailed(None, "OAUTHBEARER: malformed client first message")
        pairs = {}
        for kv in m.group("kvpairs").split("\x01"):
            if kv:
                k, _, v = kv.partition("=")
                pairs[k] = v
        auth = pairs.pop("auth", None)
        if auth is None:
            raise AuthFailed(None, "OAUTHBEARER: 'auth' not specified")
        am = _AUTH.fullmatch(auth)
        if am is None or am.group("scheme").lower() != "bearer":
            raise AuthFailed(None, "OAUTHBEARER: invalid 'auth' value")
        try:
            principal, expires_ms = self._validate(am.group("token"))
        except _Invalid as exc:
            if exc.scope is not None:
                self.error = '{"status":"insufficient_scope", "scope":"%s"}' % exc.scope
            else:
                self.error = '{"status":"invalid_token"}'
            self.reason = str(exc)
            return self.error.encode()
        authzid = m.group("authzid")
        if authzid and authzid != principal:
            raise AuthFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from the token's principal name ({principal})"
            )
        self.authorization_id = principal
        self.expires_ms = expires_ms
        self.complete = True
        return b""

    def _validate(self, token: str) -> tuple[str, int]:
        """Kafka's OAuthBearerUnsecuredJws and OAuthBearerUnsecuredValidatorCallbackHandler checks."""
        if ".." in token:
            raise _Invalid("malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise _Invalid("unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
        header, claims = _b64_json(parts[0]), _b64_json(parts[1])
        if header.get("alg") != "none":
            raise _Invalid("unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise _Invalid("unsecured JWS must not contain a digital signature")
        exp = _number(claims, "exp")
        if exp is None:
            raise _Invalid("no expiration time in JWT")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise _Invalid(f"no principal name in JWT claim: {self.principal_claim}")
        iat = _number(claims, "iat")
        now_ms = self.clock() * 1000
        if iat is not None and 1000 * iat > now_ms + self.skew_ms:
            raise _Invalid("the Issued At value is after now plus the allowable clock skew")
        if now_ms - self.skew_ms >= 1000 * exp:
            raise _Invalid("the token has expired")
        if iat is not None and exp <= iat:
            raise _Invalid("the Expiration Time is not after the Issued At time")
        if self.required_scope:
            raw = claims.get(self.scope_claim)
            if isinstance(raw, str):
                scope = {raw.strip()} if raw.strip() else set()
            elif isinstance(raw, list):
                scope = {str(s).strip() for s in raw if str(s).strip()}
            else:
                scope = set()
            for s in self.required_scope:
                if s not in scope:
                    raise _Invalid("the token lacks a required scope", scope="[" + ", ".join(self.required_scope) + "]")
        return principal, round(exp * 1000)
