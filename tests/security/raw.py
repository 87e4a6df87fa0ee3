"""A raw Kafka connection for the SASL/TLS tests: requests by hand, tokens by hand, over TCP or TLS.

Nothing here trusts the broker to answer: every read is bounded (``WAIT_S``)
and a closed connection is an outcome (``Closed``), so a test can assert
"closed without an answer" the same way against kafkalite and Kafka.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import select
import socket
import ssl
import struct

from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

from protocol.codec import build, decode, encode, request_class, response_class

WAIT_S = 20.0


class Closed(Exception):
    """The broker closed the connection instead of answering."""


class Raw:
    def __init__(self, address: str, *, tls: ssl.SSLContext | None = None, client_id: str = "raw-sasl") -> None:
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.client_id = client_id
        self.corr = 0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- sending ----------------------------------------------------------------
    def frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def send(self, api_key: int, version: int, body) -> int:
        cls = request_class(api_key, version)
        header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
        self.corr += 1
        header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=self.corr, client_id=self.client_id)
        self.frame(encode(header) + encode(build(cls, body)))
        return self.corr

    # -- receiving --------------------------------------------------------------
    def _read_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            if not (self.sock.pending() if isinstance(self.sock, ssl.SSLSocket) else 0):
                r, _, _ = select.select([self.sock], [], [], WAIT_S)
                if not r:
                    raise TimeoutError(f"nothing from the broker within {WAIT_S}s")
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionError, ssl.SSLError, OSError):
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def recv_frame(self) -> bytes:
        size = self._read_exact(4)
        if size is None:
            raise Closed("closed")
        body = self._read_exact(struct.unpack(">i", size)[0])
        if body is None:
            raise Closed("closed in the middle of a frame")
        return body

    def recv(self, api_key: int, version: int, corr: int):
        frame = self.recv_frame()
        cls = response_class(api_key, version)
        header, pos = decode(cls.__header_schema__, frame, 0)
        assert header.correlation_id == corr, (header.correlation_id, corr)
        body, _ = decode(cls, frame, pos)
        return body

    def request(self, api_key: int, version: int, body):
        return self.recv(api_key, version, self.send(api_key, version, body))

    def closed(self) -> bool:
        """True once the broker has closed the connection (waits up to WAIT_S for the close; data is an error)."""
        try:
            frame = self.recv_frame()
        except Closed:
            return True
        raise AssertionError(f"expected the connection to close, got a frame of {len(frame)} bytes")

    # -- SASL helpers -----------------------------------------------------------
    def handshake(self, mechanism: str, version: int = 1):
        return self.request(17, version, {"mechanism": mechanism})

    def authenticate(self, token: bytes, version: int = 2):
        return self.request(36, version, {"auth_bytes": token})


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


class ScramClient:
    """The client side of SCRAM-SHA-256/512 (RFC 5802), to craft good and bad messages."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str = "fyko+d2lbbFgONRv9qkxdawL") -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user, self.password, self.nonce = user, password, nonce
        self.bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={nonce}"

    def first(self) -> bytes:
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes, *, password: str | None = None) -> bytes:
        attrs = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
        salt, iterations, nonce = base64.b64decode(attrs["s"]), int(attrs["i"]), attrs["r"]
        salted = hashlib.pbkdf2_hmac(self.hash, (password or self.password).encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored = hashlib.new(self.hash, client_key).digest()
        without = f"c=biws,r={nonce}"
        auth = f"{self.bare},{server_first.decode()},{without}".encode()
        sig = hmac.new(stored, auth, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
        self.server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.auth = auth
        return f"{without},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        expected = hmac.new(self.server_key, self.auth, self.hash).digest()
        return server_final == b"v=" + base64.b64encode(expected)


def oauth_token(jwt: str) -> bytes:
    return f"n,,\x01auth=Bearer {jwt}\x01\x01".encode()
