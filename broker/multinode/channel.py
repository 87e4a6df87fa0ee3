"""The controller-node channel: one connected Unix socket per node, size-prefixed JSON frames.

Both ends are kafkalite's own processes, but a frame's size is still checked against
``MAX_FRAME`` before it is read, and a frame that is not a JSON object closes the channel
(``ChannelClosed``): a node that loses its channel exits, and a controller that loses a
node's channel counts it dead.
"""

from __future__ import annotations

import asyncio
import json
import struct

MAX_FRAME = 16 << 20  # an image of tens of thousands of topics fits
_SIZE = struct.Struct(">I")


class ChannelClosed(Exception):
    """The other end went away, or sent what is not a frame of this channel."""


def encode(message: dict) -> bytes:
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > MAX_FRAME:
        raise ValueError(f"channel frame of {len(data)} bytes over {MAX_FRAME}")
    return _SIZE.pack(len(data)) + data


def decode(data: bytes) -> dict:
    try:
        message = json.loads(data)
    except ValueError as exc:
        raise ChannelClosed(f"not JSON: {exc}") from exc
    if not isinstance(message, dict) or not isinstance(message.get("t"), str):
        raise ChannelClosed("not a channel message")
    return message


class Channel:
    """One end of a channel on asyncio streams."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, sock) -> Channel:
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_FRAME + _SIZE.size)
        return cls(reader, writer)

    def send(self, message: dict) -> None:
        """Queue ``message``; a closed channel drops it (its reader learns of the close)."""
        if not self.writer.is_closing():
            self.writer.write(encode(message))

    async def recv(self) -> dict:
        try:
            head = await self.reader.readexactly(_SIZE.size)
            (size,) = _SIZE.unpack(head)
            if size > MAX_FRAME:
                raise ChannelClosed(f"frame of {size} bytes over {MAX_FRAME}")
            return decode(await self.reader.readexactly(size))
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            raise ChannelClosed(str(exc) or type(exc).__name__) from exc

    def close(self) -> None:
        self.writer.close()
