"""A minimal raw Kafka client for wire-level tests: kio bodies over a plain socket."""

from __future__ import annotations

import socket
import struct

from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

from protocol.codec import build, decode, encode, request_class, response_class


class RawClient:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.corr = 0

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def request(self, api_key: int, version: int, body: dict, *, response_version: int | None = None):
        self.corr += 1
        cls = request_class(api_key, version)
        header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
        header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=self.corr, client_id="raw")
        self.send_frame(encode(header) + encode(build(cls, body)))
        return self.read_response(api_key, response_version if response_version is not None else version)

    def read_response(self, api_key: int, version: int):
        frame = self.read_frame()
        assert frame is not None, "connection closed"
        resp_cls = response_class(api_key, version)
        header, pos = decode(resp_cls.__header_schema__, frame, 0)
        assert header.correlation_id == self.corr
        body, _ = decode(resp_cls, frame, pos)
        return body

    def read_frame(self) -> bytes | None:
        size = self._read_exact(4)
        if size is None:
            return None
        return self._read_exact(struct.unpack(">i", size)[0])

    def _read_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def is_closed(self) -> bool:
        return self.read_frame() is None

    def close(self) -> None:
        self.sock.close()
