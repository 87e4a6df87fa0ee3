"""A reference point for ``bench.groups``: the cheapest possible Heartbeat server.

    python -m bench.group_floor   # prints "READY <port>", serves until killed

One uvloop ``asyncio.Protocol`` that answers every request frame with a
canned HeartbeatResponse v4 (NONE), one ``transport.write`` per answer as the
broker does, without decoding the request. Its CPU per request is the floor
set by the event loop and the socket system calls on this machine; whatever
the broker spends above it goes to its own per-request work.
"""

from __future__ import annotations

import asyncio
import struct
import sys

from protocol.codec import build, encode, response_class
from protocol.framing import FrameDecoder

_CORR = struct.Struct(">i")


def main() -> int:
    import uvloop

    body = encode(build(response_class(12, 4), {"throttle_time": 0, "error_code": 0}))
    head = struct.pack(">i", 4 + 1 + len(body))
    tail = b"\x00" + body  # empty tagged fields of response header v1, then the body

    class Canned(asyncio.Protocol):
        def connection_made(self, transport) -> None:
            self.transport = transport
            self.frames = FrameDecoder()

        def data_received(self, data: bytes) -> None:
            for frame in self.frames.feed(data):
                self.transport.write(head + frame[4:8] + tail)

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Canned, "127.0.0.1", 0, backlog=1024)
        sys.stdout.write(f"READY {server.sockets[0].getsockname()[1]}\n")
        sys.stdout.flush()
        await asyncio.Event().wait()

    uvloop.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
