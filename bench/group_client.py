"""Asyncio client pieces for ``bench.groups``: many Kafka connections in one process.

Requests are encoded through kio (``protocol.codec``). Requests that are sent
over and over are encoded once into a ``Template``; per send only the
correlation id (always bytes 8..12 of the frame) and a few integer fields,
located by sentinel values, are patched. Responses to template requests are
checked cheaply: every successful answer to one template is byte-for-byte
the same after the correlation id, so the first one is decoded with kio,
checked for errors and remembered; later ones are compared with it and only
decoded again when they differ.

``Conn`` is one connection (an ``asyncio.Protocol``); responses come back in
request order, so a FIFO of callbacks is all the bookkeeping needed.
``Pump`` keeps a fixed number of requests in flight on one connection.
"""

from __future__ import annotations

import asyncio
import struct
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

from protocol.codec import build, decode, encode, request_class, response_class
from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder, encode_frame

CLIENT_ID = "bench-groups"
CORR_AT = 8  # int32 size, int16 api key, int16 version, then the correlation id
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def encode_request(api_key: int, version: int, body: dict, corr: int = 0) -> bytearray:
    """A whole frame (size prefix included) for one request, through kio."""
    cls = request_class(api_key, version)
    header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
    header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=corr, client_id=CLIENT_ID)
    return bytearray(encode_frame(encode(header), encode(build(cls, body))))


def decode_response(api_key: int, version: int, payload: bytes):
    """Decode a response frame (without its size prefix) into the kio body."""
    cls = response_class(api_key, version)
    _, pos = decode(cls.__header_schema__, payload, 0)
    body, _ = decode(cls, payload, pos)
    return body


def error_codes(entity: Any) -> list[ErrorCode]:
    """Every ``error_code`` field in a decoded response, nested ones included."""
    out: list[ErrorCode] = []
    stack = [entity]
    while stack:
        e = stack.pop()
        for f in fields(e):
            v = getattr(e, f.name)
            if f.name == "error_code":
                out.append(v)
            elif isinstance(v, tuple):
                stack.extend(x for x in v if is_dataclass(x))
            elif is_dataclass(v):
                stack.append(v)
    return out


class Template:
    """One request encoded once; ``frame(corr, *values)`` patches it for a send.

    ``marks`` are (struct format, sentinel) pairs: the caller put each sentinel
    into ``body`` at the field to be patched; it must occur exactly once in the
    encoded body.
    """

    __slots__ = ("api_key", "version", "raw", "marks", "ok_tail", "errors")

    def __init__(self, api_key: int, version: int, body: dict, marks: tuple[tuple[str, int], ...] = ()) -> None:
        self.api_key = api_key
        self.version = version
        self.raw = encode_request(api_key, version, body)
        self.marks: list[tuple[struct.Struct, int]] = []
        for fmt, sentinel in marks:
            st = struct.Struct(fmt)
            packed = st.pack(sentinel)
            pos = self.raw.find(packed, CORR_AT + 4)
            if pos < 0 or self.raw.find(packed, pos + 1) >= 0:
                raise ValueError(f"sentinel {sentinel:#x} must occur exactly once in the encoded request")
            self.marks.append((st, pos))
        self.ok_tail: bytes | None = None
        self.errors: Counter = Counter()

    def retarget(self, old: bytes, new: bytes) -> Template:
        """A copy with one byte string replaced by another of the same length (say a group id)."""
        if len(old) != len(new):
            raise ValueError("replacement must keep the length")
        pos = self.raw.find(old, CORR_AT + 4)
        if pos < 0 or self.raw.find(old, pos + 1) >= 0:
            raise ValueError(f"{old!r} must occur exactly once in the encoded request")
        t = object.__new__(Template)
        t.api_key, t.version, t.marks = self.api_key, self.version, self.marks
        t.raw = bytearray(self.raw)
        t.raw[pos : pos + len(old)] = new
        t.ok_tail, t.errors = None, Counter()
        return t

    def frame(self, corr: int, *values: int) -> bytearray:
        f = bytearray(self.raw)
        _I32.pack_into(f, CORR_AT, corr)
        for (st, pos), v in zip(self.marks, values, strict=True):
            st.pack_into(f, pos, v)
        return f

    def check(self, payload: bytes) -> ErrorCode | None:
        """None if the response is a success, else its first error code."""
        tail = payload[4:]
        if tail == self.ok_tail:
            return None
        body = decode_response(self.api_key, self.version, payload)
        bad = [c for c in error_codes(body) if c != ErrorCode.none]
        if bad:
            self.errors[bad[0]] += 1
            return bad[0]
        if self.ok_tail is None:
            self.ok_tail = bytes(tail)
        return None


class ConnectionClosed(ConnectionError):
    pass


class Conn(asyncio.Protocol):
    """One client connection; responses are matched to requests in order."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.waiters: deque[tuple[int, Callable[[bytes | None], None]]] = deque()
        self.corr = 0
        self.out: list[bytes] = []
        self.batching = False
        self.closed = False

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        waiters = self.waiters
        self.batching = True  # sends made from callbacks go out in one write
        try:
            for payload in self.decoder.feed(data):
                corr, cb = waiters.popleft()
                if _I32.unpack_from(payload, 0)[0] != corr:
                    raise RuntimeError(f"correlation id mismatch: expected {corr}, got {_I32.unpack_from(payload, 0)[0]}")
                cb(payload)
        finally:
            self.batching = False
            if self.out:
                self.transport.write(b"".join(self.out))
                self.out.clear()

    def connection_lost(self, exc) -> None:
        self.closed = True
        while self.waiters:
            _, cb = self.waiters.popleft()
            cb(None)

    # -- sending
    def next_corr(self) -> int:
        self.corr = (self.corr + 1) & 0x7FFFFFFF
        return self.corr

    def send(self, frame: bytes, corr: int, cb: Callable[[bytes | None], None]) -> None:
        if self.closed:
            cb(None)
            return
        self.waiters.append((corr, cb))
        if self.batching:
            self.out.append(frame)
        else:
            self.transport.write(frame)

    def _future_cb(self, api_key: int, version: int) -> tuple[asyncio.Future, Callable]:
        fut = asyncio.get_running_loop().create_future()

        def cb(payload: bytes | None) -> None:
            if fut.done():
                return
            if payload is None:
                fut.set_exception(ConnectionClosed("connection closed"))
            else:
                try:
                    fut.set_result(decode_response(api_key, version, payload))
                except Exception as exc:  # noqa: BLE001 - handed to the awaiting task
                    fut.set_exception(exc)

        return fut, cb

    def request(self, api_key: int, version: int, body: dict) -> asyncio.Future:
        """Encode ``body`` with kio and send it; the future gets the decoded response."""
        corr = self.next_corr()
        frame = encode_request(api_key, version, body, corr)
        fut, cb = self._future_cb(api_key, version)
        self.send(frame, corr, cb)
        return fut

    def request_template(self, tpl: Template, *values: int) -> asyncio.Future:
        corr = self.next_corr()
        fut, cb = self._future_cb(tpl.api_key, tpl.version)
        self.send(tpl.frame(corr, *values), corr, cb)
        return fut

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def connect(host: str, port: int, n: int, batch: int = 200) -> list[Conn]:
    loop = asyncio.get_running_loop()
    conns: list[Conn] = []
    while len(conns) < n:
        k = min(batch, n - len(conns))
        made = await asyncio.gather(*(loop.create_connection(Conn, host, port) for _ in range(k)))
        conns += [proto for _, proto in made]
    return conns


class PumpStats:
    __slots__ = ("count", "errors", "closed")

    def __init__(self) -> None:
        self.count = 0
        self.errors: Counter = Counter()
        self.closed = 0


class Pump:
    """Keeps ``depth`` requests in flight on one connection until ``stop()`` (or the source runs dry).

    ``source()`` returns (template, values) for the next request, or None when
    there is nothing more to send.
    """

    def __init__(self, conn: Conn, source: Callable[[], tuple[Template, tuple] | None], depth: int, stats: PumpStats) -> None:
        self.conn = conn
        self.source = source
        self.depth = depth
        self.stats = stats
        self.running = True
        self.inflight = 0
        self.done = asyncio.get_running_loop().create_future()

    def start(self) -> None:
        for _ in range(self.depth):
            if not self._send():
                break
        if self.inflight == 0 and not self.done.done():
            self.done.set_result(None)

    def stop(self) -> None:
        self.running = False
        if self.inflight == 0 and not self.done.done():
            self.done.set_result(None)

    def _send(self) -> bool:
        nxt = self.source() if self.running else None
        if nxt is None:
            self.running = False
            return False
        tpl, values = nxt
        conn = self.conn
        corr = conn.next_corr()
        self.inflight += 1
        conn.send(tpl.frame(corr, *values), corr, lambda payload, tpl=tpl: self._on_response(tpl, payload))
        return True

    def _on_response(self, tpl: Template, payload: bytes | None) -> None:
        self.inflight -= 1
        stats = self.stats
        if payload is None:
            stats.closed += 1
            self.running = False
        else:
            stats.count += 1
            err = tpl.check(payload)
            if err is not None:
                stats.errors[err] += 1
            if self.running:
                self._send()
        if self.inflight == 0 and not self.running and not self.done.done():
            self.done.set_result(None)
