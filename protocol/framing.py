"""Size-prefixed framing (no I/O).

Every Kafka request and response is an int32 size followed by that many bytes.
``FrameDecoder`` is fed raw bytes and hands back whole frames; it refuses a
frame whose announced size is negative or larger than the configured maximum
before buffering it.
"""

from __future__ import annotations

import struct

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed."""


class FrameTooLarge(FrameError):
    pass


class InvalidFrameSize(FrameError):
    pass


class FrameDecoder:
    __slots__ = ("max_frame_bytes", "_buf", "_need")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need = -1  # size of the frame being read, -1 while reading the prefix

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return every frame now complete (payload without prefix)."""
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while True:
            if self._need < 0:
                if end - pos < 4:
                    break
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < 0:
                    raise InvalidFrameSize(f"negative frame size {size}")
                if size > self.max_frame_bytes:
                    raise FrameTooLarge(
                        f"frame of {size} bytes exceeds the maximum of {self.max_frame_bytes}"
                    )
                self._need = size
                pos += 4
            if end - pos < self._need:
                break
            with memoryview(buf) as view:  # one copy out of the buffer, not two
                frames.append(bytes(view[pos : pos + self._need]))
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames


def encode_frame(*parts: bytes) -> bytes:
    size = sum(len(p) for p in parts)
    return b"".join((_SIZE.pack(size), *parts))
