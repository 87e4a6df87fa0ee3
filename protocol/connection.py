"""The server side of one Kafka connection, sans-IO (in the manner of h11).

Bytes go in through ``receive_data`` and come out as events: ``Request`` for a
request this broker can decode, ``UnsupportedVersion`` for a known API at a
version outside the supported range. Responses go in through
``encode_response`` and come out as framed bytes. Anything that makes the
byte stream unusable raises ``ProtocolError``: the caller closes that
connection, and only that one.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import UnknownEntity
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2

from .codec import DecodeError, decode, encode, request_class, response_class
from .framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameError, encode_frame

_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


CONTROLLED_SHUTDOWN = 7


def request_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    """Kafka's rule: v2 for flexible versions, v0 only for ControlledShutdown v0, else v1."""
    if flexible:
        return 2
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 1


class ProtocolError(Exception):
    """The stream is unusable; close the connection. ``events``: what ``receive_data`` decoded
    before the bad frame, in order: a broker that reads one request at a time (Kafka's) answers
    those before it gets to the bad one, then closes."""

    events: list = []  # noqa: RUF012 - set per raise by receive_data; the class value is never changed


@dataclass(slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    size: int


@dataclass(slots=True)
class UnsupportedVersion:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _legacy_client_id(frame: bytes) -> str | None:
    try:
        (n,) = _I16.unpack_from(frame, 8)
        if n < 0:
            return None
        return frame[10 : 10 + n].decode("utf-8", "replace")
    except struct.error:
        return None


class ServerConnection:
    """Protocol state of one client connection."""

    def __init__(
        self,
        supported: Mapping[int, tuple[int, int]],
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.supported = supported
        self._frames = FrameDecoder(max_frame_bytes)
        # bytes received for frames not complete yet, as of the last receive (an attribute: the
        # broker reads it around every receive_data to count what a connection holds)
        self.buffered = 0

    @property
    def in_frame(self) -> bool:
        """Whether part of a frame (or of its size prefix) has been received."""
        return self._frames.in_frame

    @property
    def in_large_frame(self) -> bool:
        """Whether part of a frame of ``LARGE_FRAME`` bytes or more has been received, the rest
        still to come (what a broker short of request memory holds back)."""
        return self._frames.in_large_frame

    @property
    def frame_left(self) -> int:
        """Bytes of the frame being received still to come; 0 while a size prefix is read."""
        return self._frames.frame_left

    def receive_data(self, data: bytes) -> list[Request | UnsupportedVersion]:
        """The requests completed by ``data``; raises ``ProtocolError`` at the first frame that
        cannot be framed or decoded, with the events before it (``ProtocolError.events``)."""
        decoder = self._frames
        try:
            frames = decoder.feed(data)
        except FrameError as exc:
            failed = ProtocolError(str(exc))
            failed.__cause__ = exc
            frames = exc.frames
        else:
            failed = None
        self.buffered = decoder.buffered
        events = []
        for frame in frames:
            try:
                events.append(self.parse_frame(frame))
            except ProtocolError as exc:
                exc.events = events
                raise
        if failed is not None:
            failed.events = events
            raise failed
        return events

    def receive_frames(self, data: bytes) -> list[bytes]:
        """The frames completed by ``data``, not parsed: for a connection whose first frames are
        parsed by someone else (kafkalite's SASL authenticator). Raises ``FrameError``."""
        decoder = self._frames
        try:
            return decoder.feed(data)
        finally:
            self.buffered = decoder.buffered

    def take_pending(self) -> bytes:
        """The bytes received and not yet handed out as a frame, as they came (size prefix
        included), and a connection emptied of them: what a connection that changes decoders
        between two frames (after SASL authentication) carries over to the next one."""
        self.buffered = 0
        return self._frames.take_pending()

    def receive_framed(self, frames: list[bytes], data: bytes) -> list[Request | UnsupportedVersion]:
        """The requests of ``frames``, framed already (by the connection's decoder before this
        one: the frames that followed SASL authentication in the same read), then those completed
        by ``data``; raises ``ProtocolError`` as ``receive_data`` does, with the events before."""
        events = []
        try:
            for frame in frames:
                events.append(self.parse_frame(frame))
            if data:
                events += self.receive_data(data)
        except ProtocolError as exc:
            exc.events = events + exc.events  # parse_frame's carry none; receive_data's, those of data
            raise
        return events

    def parse_frame(self, frame: bytes) -> Request | UnsupportedVersion:
        if len(frame) < 8:
            raise ProtocolError(f"request header truncated ({len(frame)} bytes)")
        api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
        span = self.supported.get(api_key)
        if span is None:
            raise ProtocolError(f"unknown or unsupported API key {api_key}")
        if not span[0] <= version <= span[1]:
            return UnsupportedVersion(api_key, version, correlation_id, _legacy_client_id(frame))
        try:
            cls = request_class(api_key, version)
        except UnknownEntity as exc:
            raise ProtocolError(f"no schema for API {api_key} v{version}") from exc
        header_version = request_header_version(api_key, version, cls.__flexible__)
        try:
            if header_version == 0:  # api key, version and correlation id only
                client_id, pos = None, _HEAD.size
            else:
                header, pos = decode(RequestHeaderV2 if header_version == 2 else RequestHeaderV1, frame, 0)
                client_id = header.client_id
            body, _ = decode(cls, frame, pos)  # trailing bytes are ignored, as Kafka does
        except DecodeError as exc:
            raise ProtocolError(f"malformed API {api_key} v{version} request: {exc}") from exc
        return Request(api_key, version, correlation_id, client_id, body, len(frame))

    @staticmethod
    def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
        """Frame a response; ``body`` is an entity of the response class for ``version``."""
        cls = response_class(api_key, version)
        header = cls.__header_schema__(correlation_id=correlation_id)
        return encode_frame(encode(header), encode(body))
