"""Connection-level limits: answers a client does not read, request memory
broker-wide (queued.max.request.bytes), idle connections
(connections.max.idle.ms) and connection counts (max.connections,
max.connections.per.ip).

The broker runs in the test's event loop, so a test can look at its
connection objects between client steps; clients are asyncio streams over
loopback. Nothing here asserts a duration: tests wait for conditions, each
with a deadline.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import socket
import struct
import termios
import time

import pytest
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

from broker.config import ConfigError, load_config
from broker.server import _POOL, _WRITE
from broker.testing import Broker, BrokerThread
from protocol.codec import build, decode, encode, request_class, response_class
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from tests.wait import async_wait_until

MiB = 1024 * 1024
KiB = 1024


# ---------------------------------------------------------------- a small async client


def request_bytes(api_key: int, version: int, body: dict, corr: int = 1, pad: int = 0) -> bytes:
    """A framed request; ``pad`` trailing bytes make it larger (Kafka ignores trailing bytes)."""
    cls = request_class(api_key, version)
    header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
    header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=corr, client_id="bp")
    payload = encode(header) + encode(build(cls, body)) + b"\0" * pad
    return struct.pack(">i", len(payload)) + payload


def api_versions(corr: int = 1, pad: int = 0) -> bytes:
    return request_bytes(18, 3, {"client_software_name": "bp", "client_software_version": "1"}, corr, pad)


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.corr = 0

    @classmethod
    async def open(cls, port: int, *, rcvbuf: int | None = None, tls=None) -> Client:
        """``tls``: an ``ssl.SSLContext`` for a TLS listener."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect, so the window stays small
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        if tls is None:
            reader, writer = await asyncio.open_connection(sock=sock)
        else:
            reader, writer = await asyncio.open_connection(sock=sock, ssl=tls, server_hostname="localhost")
        return cls(reader, writer)

    @property
    def name(self) -> str:
        host, port = self.writer.get_extra_info("sockname")[:2]
        return f"{host}:{port}"

    async def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 30))
        return await asyncio.wait_for(self.reader.readexactly(size), 30)

    async def response(self, api_key: int, version: int):
        frame = await self.read_frame()
        cls = response_class(api_key, version)
        header, pos = decode(cls.__header_schema__, frame, 0)
        body, _ = decode(cls, frame, pos)
        return header.correlation_id, body

    async def request(self, api_key: int, version: int, body: dict):
        self.corr += 1
        self.writer.write(request_bytes(api_key, version, body, self.corr))
        corr, resp = await self.response(api_key, version)
        assert corr == self.corr
        return resp

    async def api_versions(self) -> None:
        self.corr += 1
        self.writer.write(api_versions(self.corr))
        corr, body = await self.response(18, 3)
        assert corr == self.corr
        assert body.error_code == ErrorCode.none

    async def closed_by_broker(self) -> bool:
        """True once the broker has closed the connection (EOF or reset); waits up to 30 s."""
        try:
            data = await asyncio.wait_for(self.reader.read(1 << 20), 30)
        except (ConnectionResetError, BrokenPipeError):
            return True
        while data:  # answers still on their way: read on to the end
            try:
                data = await asyncio.wait_for(self.reader.read(1 << 20), 30)
            except (ConnectionResetError, BrokenPipeError):
                return True
        return True

    def close(self) -> None:
        self.writer.close()


async def server_side(broker: Broker, client: Client):
    """The broker's connection object for ``client``."""
    found = []

    def look() -> bool:
        found[:] = [c for c in broker.server.connections if c.peer == client.name]
        return bool(found)

    await async_wait_until(look, what=f"the broker to accept {client.name}")
    return found[0]


def unread(conn) -> int:
    """Bytes the kernel holds for the broker on ``conn`` that the broker has not read."""
    buf = array.array("i", [0])
    fcntl.ioctl(conn.transport.get_extra_info("socket").fileno(), termios.FIONREAD, buf)
    return buf[0]


def fetch_body(topic: str, max_bytes: int, max_wait: int = 0) -> dict:
    return {
        "max_wait": max_wait,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
    }


async def fill_topic(client: Client, topic: str, batches: int) -> None:
    value = b"v" * 1000
    now = int(time.time() * 1000)  # recent: retention (7 days) must not delete them
    for b in range(batches):
        recs = [Record(offset=i, timestamp=now + i, key=None, value=value, headers=[]) for i in range(200)]
        body = {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch(recs)}]}]}
        resp = await client.request(0, 9, body)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none, b


# ---------------------------------------------------------------- answers not read


async def test_a_client_that_reads_nothing_holds_bounded_memory_and_others_are_served():
    limit = MiB  # socket.request.max.bytes
    async with Broker(settings={"socket.request.max.bytes": limit}) as broker:
        await broker.create_topic("bulk")
        good = await Client.open(broker.port)
        await fill_topic(good, "bulk", 8)  # about 1.6 MB: each Fetch below answers 256 KiB

        bad = await Client.open(broker.port, rcvbuf=4096)
        fetch = request_bytes(1, 12, fetch_body("bulk", 256 * KiB))
        bad.writer.write(fetch * 2000)  # 2000 Fetches, 500 MB of answers: never read
        conn = await server_side(broker, bad)
        await async_wait_until(lambda: conn.paused & _WRITE, what="the broker to stop on the unread answers")
        await async_wait_until(lambda: unread(conn) > 0, what="more requests to reach the broker's socket")

        for _ in range(30):  # the other client is served throughout, and the bound holds throughout
            await good.api_versions()
            unsent = conn.transport.get_write_buffer_size()
            assert unsent + conn.held <= 2 * limit, (unsent, conn.held)
            assert conn.paused and unread(conn) > 0, "the broker reads from a client whose answers pile up"
            assert conn.proto.buffered + sum(e.size + 4 for e in conn.queue or ()) <= conn.held
        queued = len(conn.queue or ())
        assert queued < 2000, "every request was read"

        bad.close()  # a connection not being read from still notices its client leaving
        await async_wait_until(lambda: conn not in broker.server.connections, what="the broker to drop the client that left")
        assert broker.server.request_bytes == 0
        await good.api_versions()
        good.close()


# ---------------------------------------------------------------- idle connections


async def test_idle_and_trickling_connections_are_closed_but_a_long_poll_is_not():
    async with Broker(settings={"connections.max.idle.ms": 200}) as broker:
        await broker.create_topic("quiet")
        silent = await Client.open(broker.port)
        await silent.api_versions()
        assert await silent.closed_by_broker()
        silent.close()

        trickler = await Client.open(broker.port)
        conn = await server_side(broker, trickler)
        closed = asyncio.ensure_future(trickler.closed_by_broker())
        trickler.writer.write(struct.pack(">i", 100))  # a frame that never completes
        sent = 0
        while not closed.done() and sent < 3000:
            trickler.writer.write(b"x")  # one byte at a time: the client under test is slow
            sent += 1
            await asyncio.sleep(0.01)
        assert closed.done() and await closed, "a connection trickling bytes is never closed"
        assert conn not in broker.server.connections
        trickler.close()

        # a request being handled keeps its connection, however long it takes
        poller = await Client.open(broker.port)
        poller.corr += 1
        poller.writer.write(request_bytes(1, 12, fetch_body("quiet", 1024, max_wait=1500), poller.corr))
        corr, body = await poller.response(1, 12)
        assert corr == poller.corr and body.error_code == ErrorCode.none
        assert await poller.closed_by_broker()  # and is idle, so closed, once answered
        poller.close()


# ---------------------------------------------------------------- connection counts


async def test_max_connections_counts_every_listener_and_closes_the_one_over():
    settings = {"listeners": ["A://127.0.0.1:0", "B://127.0.0.1:0"], "max.connections": 2}
    async with Broker(settings=settings) as broker:
        port_a = int(broker.listeners["A"].rsplit(":", 1)[1])
        port_b = int(broker.listeners["B"].rsplit(":", 1)[1])
        a = await Client.open(port_a)
        b = await Client.open(port_b)
        await a.api_versions()
        await b.api_versions()
        over = await Client.open(port_a)
        assert await over.closed_by_broker()
        await a.api_versions()  # the others are untouched
        await b.api_versions()
        a.close()
        await async_wait_until(lambda: len(broker.server.connections) == 1, what="the closed connection to be counted out")
        again = await Client.open(port_a)
        await again.api_versions()
        for c in (b, over, again):
            c.close()


async def test_max_connections_per_ip_and_its_overrides():
    async with Broker(settings={"max.connections.per.ip": 1}) as broker:
        first = await Client.open(broker.port)
        await first.api_versions()
        second = await Client.open(broker.port)
        assert await second.closed_by_broker()
        second.close()
        await first.api_versions()
        first.close()
        await async_wait_until(lambda: not broker.server.connections and not broker.server.per_ip, what="the address to be counted out")
        third = await Client.open(broker.port)
        await third.api_versions()
        third.close()

    overrides = {"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "127.0.0.1:3, [::1]:1"}
    async with Broker(settings=overrides) as broker:
        clients = [await Client.open(broker.port) for _ in range(3)]
        for c in clients:
            await c.api_versions()
        extra = await Client.open(broker.port)
        assert await extra.closed_by_broker()
        for c in (*clients, extra):
            c.close()


@pytest.mark.parametrize("value", ["127.0.0.1", "127.0.0.1:x", "localhost:3", "127.0.0.1:-1"])
def test_per_ip_overrides_must_be_addresses_with_counts(value):
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        load_config(environ={}, overrides={"max.connections.per.ip.overrides": value})


# ---------------------------------------------------------------- request memory, broker-wide


async def test_queued_max_request_bytes_holds_back_large_frames_and_still_reads_small_requests():
    limit = 256 * KiB
    settings = {"queued.max.request.bytes": limit, "socket.request.max.bytes": MiB}
    async with Broker(settings=settings) as broker:
        server = broker.server
        big = api_versions(corr=7, pad=600 * KiB)
        sender = await Client.open(broker.port)
        sender.writer.write(big[: 400 * KiB])
        await async_wait_until(lambda: server.pool_full, what="the limit to be reached")

        # a second large frame is not read past the limit: one read of it at most
        other = await Client.open(broker.port)
        other_conn = await server_side(broker, other)
        other_big = api_versions(corr=8, pad=900 * KiB)
        other.writer.write(other_big[: 800 * KiB])
        await async_wait_until(lambda: other_conn.held > 0 and unread(other_conn) > 0, what="the large frame to reach the broker")
        assert other_conn.paused & _POOL and other_conn.held <= 256 * KiB, other_conn.held

        # a small request on another connection is read and answered while the pool is full
        small = await Client.open(broker.port)
        await small.api_versions()
        await small.request(3, 9, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        assert server.pool_full and other_conn.paused & _POOL

        sender.writer.write(big[400 * KiB :])  # the frame in progress may finish
        corr, body = await sender.response(18, 3)
        assert (corr, body.error_code) == (7, ErrorCode.none)
        other.writer.write(other_big[800 * KiB :])  # and then the held-back one gets its turn
        corr, body = await other.response(18, 3)
        assert (corr, body.error_code) == (8, ErrorCode.none)
        await async_wait_until(lambda: not server.pool_full and not other_conn.paused, what="reading to resume")
        await async_wait_until(lambda: server.request_bytes == 0, what="every request byte to be given back")
        for c in (sender, other, small):
            c.close()


async def test_frames_in_progress_past_the_limit_all_complete_and_memory_stays_capped():
    limit = 256 * KiB
    settings = {"queued.max.request.bytes": limit, "socket.request.max.bytes": MiB}
    async with Broker(settings=settings) as broker:
        server = broker.server
        most = 0

        async def watch() -> None:
            nonlocal most
            while True:
                most = max(most, server.request_bytes)
                await asyncio.sleep(0.002)

        watcher = asyncio.ensure_future(watch())
        clients = [await Client.open(broker.port) for _ in range(4)]
        frames = [api_versions(corr=i + 1, pad=700 * KiB) for i in range(4)]
        for c, f in zip(clients, frames, strict=True):  # four frames started, none finished
            c.writer.write(f[: 500 * KiB])
        await async_wait_until(lambda: server.pool_full, what="the limit to be reached")
        for c, f in zip(clients, frames, strict=True):
            c.writer.write(f[500 * KiB :])
        for i, c in enumerate(clients):  # no deadlock: every one of them is answered
            corr, body = await c.response(18, 3)
            assert (corr, body.error_code) == (i + 1, ErrorCode.none)
        watcher.cancel()
        # past the limit only one connection reads, and only until one more frame's worth
        assert most <= server.request_bytes_cap + 256 * KiB, most
        assert not server.pool_full
        for c in clients:
            c.close()


@contextlib.asynccontextmanager
async def broker_on(loop: str, settings: dict):
    """A broker on the test's loop (asyncio), or on a thread of its own (uvloop, as ``serve`` runs),
    with ``probe(fn)``: ``fn()`` evaluated on the broker's loop."""
    if loop == "asyncio":
        async with Broker(settings=settings) as broker:

            async def probe(fn):
                return fn()

            yield broker, probe
        return
    thread = BrokerThread(settings=settings)
    await asyncio.to_thread(thread.start)
    try:

        async def probe(fn):
            async def call():
                return fn()

            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call(), thread.loop))

        yield thread.broker, probe
    finally:
        await asyncio.to_thread(thread.close)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_past_the_hard_cap_nothing_is_read_until_request_memory_is_given_back(loop):
    limit = 256 * KiB
    settings = {"queued.max.request.bytes": limit, "socket.request.max.bytes": MiB}
    async with broker_on(loop, settings) as (broker, probe):
        await probe(lambda: broker.server.cluster.create_topic("quiet", 1, {}))
        server = broker.server
        # small requests held broker-wide: each holder's long poll keeps the requests behind it
        # queued, up to socket.request.max.bytes of them per connection
        holders = [await Client.open(broker.port) for _ in range(3)]
        for h in holders:
            h.writer.write(request_bytes(1, 12, fetch_body("quiet", 1024, max_wait=30_000), corr=1))
            h.writer.write(b"".join(api_versions(corr=i + 2, pad=60 * KiB) for i in range(20)))
        await async_wait_until(lambda: probe(lambda: server.pool_capped), what="the hard cap")
        assert await probe(lambda: server.request_bytes) <= server.request_bytes_hard + 3 * 256 * KiB

        # now nothing is read, not even a new connection's small request (uvloop reads a new
        # connection once connection_made has returned, whatever it was told there)
        late = await Client.open(broker.port)
        conn = await probe(lambda: next((c for c in server.connections if c.peer == late.name), None))
        assert conn is not None
        late.writer.write(api_versions(corr=99))
        await async_wait_until(lambda: probe(lambda: unread(conn) > 0), what="the request to reach the broker's socket")
        assert await probe(lambda: (conn.paused & _POOL, conn.held)) == (_POOL, 0), "a request is read past the hard cap"

        for h in holders:  # they leave: their requests are given back and reading resumes
            h.writer.transport.abort()
        corr, body = await late.response(18, 3)
        assert (corr, body.error_code) == (99, ErrorCode.none)
        await async_wait_until(lambda: probe(lambda: not server.pool_full and not server.pool_capped), what="the pool to clear")
        late.close()


async def test_clients_that_leave_while_not_read_from_give_their_bytes_back():
    limit = 256 * KiB
    settings = {"queued.max.request.bytes": limit, "socket.request.max.bytes": MiB}
    async with Broker(settings=settings) as broker:
        server = broker.server
        idle = await Client.open(broker.port)
        await idle.api_versions()
        liars = [await Client.open(broker.port) for _ in range(4)]
        for c in liars:  # each announces 1 MiB and sends 600 KiB of it
            c.writer.write(struct.pack(">i", MiB - 4) + b"\0" * (600 * KiB))
        # the limit and the one frame past it are taken: nobody is read from now
        await async_wait_until(lambda: server.request_bytes >= server.request_bytes_cap and server.pool_exempt is None, what="the cap")
        assert server.request_bytes <= server.request_bytes_cap + 256 * KiB
        conns = [await server_side(broker, c) for c in liars]
        assert all(c.paused & _POOL for c in conns)
        await idle.api_versions()  # small requests are still read
        for c in liars:  # they reset their connections; the broker reads nothing, so it must ask the kernel
            c.writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.writer.transport.abort()
        idle.close()
        await async_wait_until(lambda: not server.connections, what="the broker to drop the clients that left")
        assert server.request_bytes == 0 and not server.pool_full
        after = await Client.open(broker.port)
        await after.api_versions()
        after.close()
