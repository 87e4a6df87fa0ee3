"""Size-prefixed framing (no I/O).

Every Kafka request and response is an int32 size followed by that many bytes.
``FrameDecoder`` is fed raw bytes and hands back whole frames; it refuses a
frame whose announced size is negative or larger than the configured maximum
before buffering it.

Memory follows the bytes actually received, never the size announced: a
client may announce 100 MiB and send ten. When nothing is pending, the
whole frames of a read are sliced straight out of it (one copy each) and only
its incomplete tail is kept; otherwise small frames are cut out of one
``bytearray``. A frame of ``LARGE_FRAME`` bytes or more that has not arrived
whole is gathered as the list of pieces received (small pieces are first
coalesced, so a client trickling single bytes costs bytes, not objects) and
joined once, into a ``bytes`` of exactly its size, when its last byte
arrives. Nothing large is kept once a frame has been handed out: the pieces
are dropped and the bytearray shrinks (CPython reallocates a bytearray that
falls below half its allocation).
"""

from __future__ import annotations

import struct

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
# frames at least this large are gathered piece by piece (see the module docstring)
LARGE_FRAME = 64 * 1024
_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed. ``frames``: the frames
    the same ``feed`` completed before the bad one, in order (the requests a broker that reads
    one request at a time, as Kafka's does, would have answered before it got to the bad one)."""

    frames: list = []  # noqa: RUF012 - set per raise by _refuse; the class value is never changed


class FrameTooLarge(FrameError):
    pass


class InvalidFrameSize(FrameError):
    pass


class FrameDecoder:
    # _buf: bytes not yet framed; while a large frame is gathered, the small
    # pieces of it not yet moved to _pieces. _need: size of the frame being
    # read, -1 while reading the prefix. _pieces: None, or the large frame's
    # pieces so far (_have bytes in all, _buf included). buffered: bytes held
    # for frames not yet complete (an attribute: callers read it per feed).
    __slots__ = ("max_frame_bytes", "_buf", "_need", "_pieces", "_have", "buffered")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need = -1
        self._pieces: list[bytes] | None = None
        self._have = 0
        self.buffered = 0

    @property
    def in_frame(self) -> bool:
        """Whether part of a frame (or of its size prefix) has been received."""
        return self._need >= 0 or len(self._buf) > 0

    @property
    def in_large_frame(self) -> bool:
        """Whether part of a frame of ``LARGE_FRAME`` bytes or more has been received (and
        the rest of it is still to come): what a broker short of request memory holds back."""
        return self._pieces is not None

    @property
    def frame_left(self) -> int:
        """Bytes of the frame being received still to come; 0 while a size prefix is read."""
        need = self._need
        return need - self.buffered if need >= 0 else 0

    def take_pending(self) -> bytes:
        """The bytes received and not yet handed out as a frame, as they came (size prefix
        included), and a decoder emptied of them: what a connection that changes decoders
        between two frames (kafkalite's SASL authentication) carries over to the next one."""
        head = _SIZE.pack(self._need) if self._need >= 0 else b""
        out = b"".join([head, *(self._pieces or ()), bytes(self._buf)])
        self._buf = bytearray()
        self._need = -1
        self._pieces = None
        self._have = self.buffered = 0
        return out

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return every frame now complete (payload without prefix)."""
        if self._pieces is not None:
            return self._gather(data)
        buf = self._buf
        if not buf and self._need < 0 and type(data) is bytes:
            return self._fresh(data)
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while True:
            need = self._need
            if need < 0:
                if end - pos < 4:
                    break
                (need,) = _SIZE.unpack_from(buf, pos)
                if need < 0 or need > self.max_frame_bytes:
                    raise _refuse(need, self.max_frame_bytes, frames)
                self._need = need
                pos += 4
            if end - pos < need:
                if need >= LARGE_FRAME:  # gather the rest piece by piece
                    with memoryview(buf) as view:
                        first = bytes(view[pos:end])
                    self._buf = bytearray()
                    self._pieces = [first] if first else []
                    self._have = self.buffered = len(first)
                    return frames
                break
            with memoryview(buf) as view:  # one copy out of the buffer, not two
                frames.append(bytes(view[pos : pos + need]))
            pos += need
            self._need = -1
        if pos:
            del buf[:pos]
        self.buffered = len(buf)
        return frames

    def _fresh(self, data: bytes) -> list[bytes]:
        """``feed`` when nothing is pending (the common case): frames are sliced out of
        ``data`` itself (one copy each), not copied into the bytearray and out again;
        only an incomplete tail is kept."""
        frames: list[bytes] = []
        pos = 0
        end = len(data)
        while end - pos >= 4:
            (need,) = _SIZE.unpack_from(data, pos)
            if need < 0 or need > self.max_frame_bytes:
                raise _refuse(need, self.max_frame_bytes, frames)
            pos += 4
            if end - pos < need:
                self._need = need
                if need >= LARGE_FRAME:  # gather the rest piece by piece
                    # kept as a view of the read unless that would hold more bytes than it counts
                    first = memoryview(data)[pos:] if 2 * pos <= end else data[pos:]
                    self._pieces = [first] if first else []
                    self._have = self.buffered = len(first)
                    return frames
                break
            frames.append(data[pos : pos + need])
            pos += need
        if pos < end:
            self._buf += memoryview(data)[pos:]
        self.buffered = len(self._buf)
        return frames

    def _gather(self, data: bytes) -> list[bytes]:
        missing = self._need - self._have
        if len(data) > missing:
            rest = data[missing:]
            data = data[:missing]
        else:
            rest = None
        pieces = self._pieces
        small = self._buf
        if len(data) >= LARGE_FRAME:
            if small:
                pieces.append(bytes(small))
                small.clear()
            pieces.append(data if type(data) is bytes else bytes(data))
        else:
            small += data
            if len(small) >= LARGE_FRAME:
                pieces.append(bytes(small))
                small.clear()
        self._have += len(data)
        if self._have < self._need:
            self.buffered = self._have
            return []
        if small:
            pieces.append(bytes(small))
        self._buf = bytearray()
        self._pieces = None
        self._have = self.buffered = 0
        self._need = -1
        frames = [pieces[0] if len(pieces) == 1 and type(pieces[0]) is bytes else b"".join(pieces)]
        pieces.clear()
        if rest:
            try:
                frames += self.feed(rest)
            except FrameError as exc:
                exc.frames = frames + exc.frames
                raise
        return frames


def _refuse(need: int, max_frame_bytes: int, frames: list) -> FrameError:
    """The error for a frame announcing ``need`` bytes, carrying the frames before it."""
    if need < 0:
        exc: FrameError = InvalidFrameSize(f"negative frame size {need}")
    else:
        exc = FrameTooLarge(f"frame of {need} bytes exceeds the maximum of {max_frame_bytes}")
    exc.frames = frames
    return exc


def encode_frame(*parts: bytes) -> bytes:
    size = sum(len(p) for p in parts)
    return b"".join((_SIZE.pack(size), *parts))
