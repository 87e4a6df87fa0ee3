"""What the modules of broker/net/ share: the connection's pause reasons, the sizes and
limits of reading and answering, the logger, and a few small helpers. No state."""

from __future__ import annotations

import select
import socket
import time

from storage.segment import FileRegion

from ..logs import get_logger

log = get_logger("server")

# stop reading from a client that has this many requests waiting
_MAX_QUEUED = 64
# the transport's write buffer limits (each at most socket.request.max.bytes)
_WRITE_HIGH = 1024 * 1024
_WRITE_LOW = 256 * 1024
# why a connection is not read from: KafkaConnection.paused is a mask of these
_QUEUE = 1  # requests waiting: _MAX_QUEUED of them, or socket.request.max.bytes
_WRITE = 2  # answers not read by the client: above the write high-water mark
_POOL = 4  # queued.max.request.bytes reached, broker-wide
# at least this much room for small requests past request_bytes_cap (Broker.request_bytes_hard)
_SMALL_RESERVE = 1024 * 1024
_STOP = 8  # the broker is stopping
# memory handed back to the OS once this much in large buffers was freed and the churn stopped
_TRIM_BYTES = 8 * 1024 * 1024
_LARGE = 256 * 1024  # a request or answer this large counts towards it
# a FileRegion sent through the transport (TLS, or no descriptor to wait with) is read this much at a time
_PIECE = 256 * 1024
# answers smaller than this are held while the connection has more requests queued, and sent
# together (at most _COALESCE_COUNT of them, or when the connection's task next waits)
_COALESCE = 16 * 1024
_COALESCE_COUNT = 32
# requests of one connection started and not yet answered (see KafkaConnection._run)
_MAX_INFLIGHT = 32
_CONN_FREED = 2048  # and every closed connection this much
# a connection's task ends once it has had no request for this long (the sweep ends it)
_LINGER = 1.0

_now = time.monotonic
_BACKLOG = 100  # asyncio's and uvloop's default for create_server
# TLS connections: SO_RCVLOWAT while a large request arrives (KafkaConnection._tune_lowat)
_SO_RCVLOWAT = getattr(socket, "SO_RCVLOWAT", 0)
_TLS_RECORD = 16384 + 256  # the most ciphertext of one TLS record the transport can hold undelivered
_LOWAT_MIN = 64 * 1024
_LOWAT_MAX = 256 * 1024
_POLLRDHUP = getattr(select, "POLLRDHUP", 0)  # Linux
_HUNG_UP = _POLLRDHUP | select.POLLHUP | select.POLLERR



def _release(parts) -> None:
    for part in parts:
        if type(part) is FileRegion:
            part.release()


def _answer_size(out) -> int:
    """Bytes in an answer: ``bytes`` or a list of buffers."""
    if type(out) is bytes:
        return len(out)
    n = 0
    for b in out:
        n += len(b)
    return n


class _ConnectionLog:
    """A handler's ``ctx.log``: the connection's logger, bound only when something is logged."""

    __slots__ = ("conn",)

    def __init__(self, conn) -> None:
        self.conn = conn

    def __getattr__(self, name):
        return getattr(self.conn.log, name)
