"""Fetch answers are written as a list of buffers, the records as read from
the segment and never copied (``protocol/fast.py``, ``KafkaConnection._run``).
The buffers outlive the request: they wait in the transport until the client
reads them. These tests hold that path to what a copy gave for free, on the
stdlib event loop and on uvloop (whose ``writelines`` hands the buffers to one
writev): answers not read while their topic is deleted (segment files
unlinked, descriptors closed) still arrive whole, and a fetch asking for
2^31-1 bytes gets whole batches of one segment. Large reads are sent from the
segment file with sendfile (``FileRegion``, ``KafkaConnection._pump``): the
same bytes, the same bound on a client that does not read, and nothing left
behind by one that leaves.

Nothing here asserts a duration: waits are on conditions, with deadlines.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time

import pytest
import uvloop

from broker.server import _PIECE, _WRITE
from broker.handlers.fetch import ANSWER_MEMORY
from broker.security.testkit import secured
from broker.testing import Broker
from storage.log import FILE_REGION_MIN
from storage.segment import FileRegion
from protocol.codec import decode, response_class
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch, iter_records, split_batches

from tests.wait import async_wait_until

from .test_backpressure import Client, fetch_body, request_bytes, server_side

KiB = 1024
VALUE = b"z" * 1000
PER_BATCH = 50


def run(loop_kind: str, coro_fn):
    factory = uvloop.new_event_loop if loop_kind == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro_fn())


async def produce(client: Client, topic: str, batches: int, partition: int = 0) -> None:
    now = int(time.time() * 1000)
    for b in range(batches):
        recs = [Record(offset=i, timestamp=now + i, key=b"%d-%d" % (b, i), value=VALUE, headers=[]) for i in range(PER_BATCH)]
        body = {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": build_batch(recs)}]}]}
        resp = await client.request(0, 9, body)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none


def check_records(records: bytes, first_offset: int) -> int:
    """Every batch whole, its CRC right, its offsets in sequence from ``first_offset``; returns the count."""
    n = 0
    for hdr, batch in split_batches(records):  # CRCs checked
        assert hdr.base_offset == first_offset + n
        for rec in iter_records(batch):
            assert rec.offset == first_offset + n and rec.value == VALUE
            n += 1
    return n


def fetch_frames(topic: str, offsets: list[int], max_bytes: int) -> bytes:
    """Fetch requests (v12) for ``topic`` at each of ``offsets``, correlation ids 1, 2, ..., back to back."""
    frames = []
    for i, off in enumerate(offsets):
        body = fetch_body(topic, max_bytes)
        body["topics"][0]["partitions"][0]["fetch_offset"] = off
        frames.append(request_bytes(1, 12, body, corr=i + 1))
    return b"".join(frames)


def decode_fetch(frame: bytes, version: int):
    cls = response_class(1, version)
    header, pos = decode(cls.__header_schema__, frame, 0)
    body, _ = decode(cls, frame, pos)
    return header.correlation_id, body


async def answers_around_a_deletion(client, offsets: list[int], check) -> int:
    """Read the answers to ``fetch_frames(..., offsets, ...)`` sent before their topic was deleted:
    each either answered before the deletion (``check(offset, records)`` must hold) or after it
    (UNKNOWN_TOPIC_OR_PARTITION). Returns how many were answered before it."""
    whole = 0
    for i, off in enumerate(offsets):
        corr, resp = decode_fetch(await client.read_frame(), 12)
        assert corr == i + 1
        (part,) = resp.responses[0].partitions
        if part.error_code == ErrorCode.none:
            assert check(off, part.records)
            whole += 1
        else:
            assert part.error_code == ErrorCode.unknown_topic_or_partition
    return whole


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_unread_answers_arrive_whole_after_their_topic_is_deleted(loop_kind):
    async def main():
        async with Broker(settings={"socket.request.max.bytes": 1024 * KiB}) as broker:
            await broker.create_topic("gone", config={"segment.bytes": str(200 * KiB)})
            good = await Client.open(broker.port)
            await produce(good, "gone", 20)  # about 1 MB in several segments
            plog = broker.cluster.topics["gone"].partitions[0].log
            assert len(plog.segment_base_offsets()) > 2

            bad = await Client.open(broker.port, rcvbuf=4096)
            n = 40  # each answer 256 KiB of records, from varying offsets
            offsets = [(i * 37) % 900 for i in range(n)]
            bad.writer.write(fetch_frames("gone", offsets, 256 * KiB))
            conn = await server_side(broker, bad)
            await async_wait_until(lambda: conn.paused & _WRITE, what="the broker to stop on the unread answers")
            # the bound of test_backpressure holds with answers made of views: one answer plus the high-water mark
            assert conn.transport.get_write_buffer_size() + conn.held <= 2 * 1024 * KiB

            await broker.delete_topic("gone")  # segments unlinked, their descriptors closed
            assert plog.closed

            got = await answers_around_a_deletion(bad, offsets, lambda off, records: check_records(records, off - off % PER_BATCH) > 0)
            assert got > 0, "no answer was held while the topic was deleted"
            await good.api_versions()
            await bad.api_versions()
            bad.close()
            good.close()
            broker.check_handler_errors()

    run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_fetch_of_int_max_bytes_answers_whole_batches_of_one_segment(loop_kind):
    async def main():
        async with Broker() as broker:
            await broker.create_topic("big", 2, config={"segment.bytes": str(300 * KiB)})
            client = await Client.open(broker.port)
            await produce(client, "big", 20, partition=0)
            await produce(client, "big", 1, partition=1)
            plog = broker.cluster.topics["big"].partitions[0].log
            bases = plog.segment_base_offsets()
            assert len(bases) > 2
            for version in (4, 11, 12):
                body = fetch_body("big", 2**31 - 1)
                body["topics"][0]["partitions"][0]["partition_max_bytes"] = 2**31 - 1
                body["topics"][0]["partitions"].append({**body["topics"][0]["partitions"][0], "partition": 1})
                resp = await client.request(1, version, body)
                p0, p1 = resp.responses[0].partitions
                assert p0.error_code == p1.error_code == ErrorCode.none
                assert check_records(p0.records, 0) == bases[1]  # the whole first segment, no more
                assert check_records(p1.records, 0) == PER_BATCH
            client.close()
            broker.check_handler_errors()

    run(loop_kind, main)


def _regions(conn) -> list:
    return [p for p in conn.sending or () if type(p) is FileRegion]


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_answers_sent_from_files_wait_for_the_client_and_hold_the_bytes_read_would(loop_kind):
    async def main():
        async with Broker(settings={"socket.request.max.bytes": 1024 * KiB}) as broker:
            await broker.create_topic("files", config={"segment.bytes": str(2048 * KiB)})
            good = await Client.open(broker.port)
            await produce(good, "files", 60)  # about 3 MB, in two segments
            plog = broker.cluster.topics["files"].partitions[0].log
            offsets = [0, 37, 1010, 2990, 1500, 2000, 480]
            expected = {off: bytes(plog.read(off, 1024 * KiB)) for off in offsets}  # what a read gives

            slow = await Client.open(broker.port, rcvbuf=4096)
            slow.writer.write(fetch_frames("files", offsets, 1024 * KiB))
            conn = await server_side(broker, slow)
            await async_wait_until(lambda: conn.sending is not None and conn.paused & _WRITE, what="an answer to wait for the socket")
            waiting = _regions(conn)
            assert waiting and all(r.pinned and r.fh.users for r in waiting)  # their files held open while they wait
            assert broker.server.waiting_fds == 1  # and the socket's duplicate, watched
            # the records wait in the file, not in memory: the bound of test_backpressure holds
            in_memory = sum(len(p) for p in conn.sending if type(p) is not FileRegion)
            assert conn.transport.get_write_buffer_size() + in_memory + conn.held <= 2 * 1024 * KiB

            for i, off in enumerate(offsets):
                frame = await slow.read_frame()
                corr, resp = decode_fetch(frame, 12)
                assert corr == i + 1
                (part,) = resp.responses[0].partitions
                assert part.error_code == ErrorCode.none
                assert part.records == expected[off]
                assert check_records(part.records, off - off % PER_BATCH) > 0
            await async_wait_until(lambda: conn.sending is None and not conn.paused, what="the connection to read again")
            assert not any(r.pinned for r in waiting) and conn.sfd == -1 and broker.server.waiting_fds == 0
            await slow.api_versions()
            slow.close()
            await async_wait_until(lambda: conn not in broker.server.connections, what="the broker to drop the client")
            assert conn.sfd == -1
            good.close()
            broker.check_handler_errors()

    run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_an_answer_sent_from_a_file_arrives_whole_after_its_topic_is_deleted(loop_kind):
    async def main():
        async with Broker() as broker:
            await broker.create_topic("gone", config={"segment.bytes": str(600 * KiB)})
            good = await Client.open(broker.port)
            await produce(good, "gone", 30)  # about 1.5 MB in three segments
            plog = broker.cluster.topics["gone"].partitions[0].log
            expected = bytes(plog.read(0, 1024 * KiB))

            slow = await Client.open(broker.port, rcvbuf=4096)
            offsets = [0] * 8
            slow.writer.write(fetch_frames("gone", offsets, 1024 * KiB))
            conn = await server_side(broker, slow)
            await async_wait_until(lambda: conn.sending is not None and conn.paused & _WRITE, what="an answer to wait for the socket")
            assert _regions(conn)  # part of its records still to send from the file
            await broker.delete_topic("gone")  # segments unlinked, the log's descriptors closed
            assert plog.closed

            assert await answers_around_a_deletion(slow, offsets, lambda off, records: records == expected) > 0
            await slow.api_versions()
            slow.close()
            good.close()
            broker.check_handler_errors()

    run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_a_client_that_leaves_while_an_answer_waits_in_a_file_leaves_nothing_behind(loop_kind):
    async def main():
        async with Broker() as broker:
            await broker.create_topic("left")
            good = await Client.open(broker.port)
            await produce(good, "left", 40)
            bad = await Client.open(broker.port, rcvbuf=4096)
            bad.writer.write(request_bytes(1, 12, fetch_body("left", 1024 * KiB), corr=1) * 20)
            conn = await server_side(broker, bad)
            await async_wait_until(lambda: conn.sending is not None and conn.paused & _WRITE, what="the answer to wait for the socket")
            waiting = _regions(conn)
            assert waiting and conn.sfd >= 0
            # the client resets its connection; the broker, not reading, must notice (the sweep asks the kernel)
            bad.writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            bad.writer.transport.abort()
            await async_wait_until(lambda: conn not in broker.server.connections, what="the broker to drop the client that left")
            assert conn.sending is None and conn.sfd == -1 and broker.server.waiting_fds == 0
            assert not any(r.pinned for r in waiting)
            assert broker.server.request_bytes == 0
            await good.api_versions()
            good.close()
            broker.check_handler_errors()

    run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_past_the_broker_budget_of_waiting_descriptors_answers_go_through_the_transport(loop_kind):
    """Clients that do not read cannot take the process's descriptors: once answers waiting
    for their sockets hold ``waiting_fds_max`` of them, a further connection sends its regions
    a piece at a time through its transport (as TLS connections do), with the same bytes, and
    holds no descriptor and no more than the transport's high-water mark and one piece."""

    async def main():
        async with Broker() as broker:
            await broker.create_topic("budget")
            good = await Client.open(broker.port)
            await produce(good, "budget", 60)  # about 3 MB
            plog = broker.cluster.topics["budget"].partitions[0].log
            expected = bytes(plog.read(0, 4096 * KiB))
            broker.server.waiting_fds_max = 0
            slow = await Client.open(broker.port, rcvbuf=4096)
            conn = await server_side(broker, slow)
            # a small send buffer, so that the kernel cannot take the answer (it grows to megabytes on loopback)
            conn.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * KiB)
            n = 3
            slow.writer.write(b"".join(request_bytes(1, 12, fetch_body("budget", 4096 * KiB), corr=i + 1) for i in range(n)))
            await async_wait_until(lambda: conn.paused & _WRITE, what="the answers to wait for the client")
            assert conn.files is False and conn.sfd == -1 and broker.server.waiting_fds == 0
            assert _regions(conn)  # the rest of the answer waits in its file
            assert conn.transport.get_write_buffer_size() <= broker.server.write_high + _PIECE
            for i in range(n):
                corr, resp = decode_fetch(await slow.read_frame(), 12)
                (part,) = resp.responses[0].partitions
                assert corr == i + 1 and part.error_code == ErrorCode.none and part.records == expected
            await async_wait_until(lambda: conn.sending is None and not conn.paused, what="the connection to read again")
            assert broker.server.waiting_fds == 0
            slow.close()
            good.close()
            broker.check_handler_errors()

    run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_a_tls_client_that_does_not_read_holds_its_answers_in_the_files_even_past_a_deletion(loop_kind):
    """On TLS the transport encrypts, so regions go through it a piece at a time: a client that
    asks for megabytes and does not read holds the transport's high-water mark and a piece, not
    its answers (before, every answer was read into memory whole: ten such clients of a 100 MB
    partition held 2 GB). The regions' files stay readable after their topic is deleted (the
    descriptors close with the last region), and the client gets the bytes a read gives."""

    async def main():
        sec = secured("SSL")
        tls = ssl.create_default_context(cafile=str(sec.certs.ca))
        async with Broker(settings=sec.settings) as broker:
            await broker.create_topic("tls", config={"segment.bytes": str(1024 * KiB)})
            good = await Client.open(broker.port, tls=tls)
            await produce(good, "tls", 60)  # about 3 MB in three segments
            plog = broker.cluster.topics["tls"].partitions[0].log
            offsets = [0, 1010, 37, 2000, 480]
            expected = {off: bytes(plog.read(off, 2048 * KiB)) for off in offsets}
            assert all(len(e) > FILE_REGION_MIN for e in expected.values())

            slow = await Client.open(broker.port, rcvbuf=4096, tls=tls)
            slow.writer.write(fetch_frames("tls", offsets, 2048 * KiB))
            conn = await server_side(broker, slow)
            await async_wait_until(lambda: conn.sending is not None and conn.paused & _WRITE, what="an answer to wait for the client")
            waiting = _regions(conn)
            assert conn.files is False and conn.sfd == -1 and broker.server.waiting_fds == 0
            assert waiting and all(r.pinned and r.fh.users for r in waiting)
            assert conn.transport.get_write_buffer_size() <= broker.server.write_high + _PIECE

            await broker.delete_topic("tls")  # segments unlinked, the log's files closed
            assert plog.closed and all(r.fh.closed for r in waiting)

            assert await answers_around_a_deletion(slow, offsets, lambda off, records: records == expected[off]) > 0
            await async_wait_until(lambda: conn.sending is None and not conn.paused, what="the connection to read again")
            assert all(not r.pinned and r.fh.users == 0 for r in waiting)
            await slow.api_versions()
            slow.close()
            good.close()
            broker.check_handler_errors()

    run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_an_answer_of_many_small_partitions_holds_little_in_memory(loop_kind):
    """Partition reads below FILE_REGION_MIN are read into memory, but only until the answer
    holds ANSWER_MEMORY bytes of them; the rest are regions, whatever their size, so a fetch
    of many partitions by a client that does not read cannot pin its whole answer in memory."""

    async def main():
        async with Broker() as broker:
            partitions = 24
            await broker.create_topic("many", partitions)
            good = await Client.open(broker.port)
            for p in range(partitions):
                await produce(good, "many", 2, partition=p)  # about 100 KB each
            logs = [broker.cluster.topics["many"].partitions[p].log for p in range(partitions)]
            expected = [bytes(plog.read(0, 1024 * KiB)) for plog in logs]
            assert all(0 < len(e) < FILE_REGION_MIN for e in expected)

            body = fetch_body("many", 64 * 1024 * KiB)
            first = body["topics"][0]["partitions"][0]
            body["topics"][0]["partitions"] = [{**first, "partition": p, "partition_max_bytes": 1024 * KiB} for p in range(partitions)]
            slow = await Client.open(broker.port, rcvbuf=4096)
            slow.writer.write(b"".join(request_bytes(1, 12, body, corr=i + 1) for i in range(3)))
            conn = await server_side(broker, slow)
            await async_wait_until(lambda: conn.sending is not None and conn.paused & _WRITE, what="an answer to wait for the client")
            waiting = _regions(conn)
            in_files = sum(len(r) for r in waiting)
            # all but about ANSWER_MEMORY of the answer waits in the files
            assert in_files >= sum(map(len, expected)) - ANSWER_MEMORY - 2 * max(map(len, expected))

            for i in range(3):
                corr, resp = decode_fetch(await slow.read_frame(), 12)
                assert corr == i + 1
                got = {p.partition_index: p for p in resp.responses[0].partitions}
                assert sorted(got) == list(range(partitions))
                for p, part in got.items():
                    assert part.error_code == ErrorCode.none and part.records == expected[p]
            slow.close()
            good.close()
            broker.check_handler_errors()

    run(loop_kind, main)


def test_fetch_max_bytes_caps_what_a_client_asks_for():
    """The broker's fetch.max.bytes bounds an answer whatever max_bytes the client sends (as
    Kafka's: min of the two), in whole batches."""

    async def main():
        async with Broker(settings={"fetch.max.bytes": 300 * KiB}) as broker:
            await broker.create_topic("capped")
            client = await Client.open(broker.port)
            await produce(client, "capped", 30)  # about 1.5 MB
            body = fetch_body("capped", 2**31 - 1)
            body["topics"][0]["partitions"][0]["partition_max_bytes"] = 2**31 - 1
            resp = await client.request(1, 12, body)
            (part,) = resp.responses[0].partitions
            assert part.error_code == ErrorCode.none
            assert 0 < len(part.records) <= 300 * KiB
            assert check_records(part.records, 0) > 0
            client.close()
            broker.check_handler_errors()

    run("uvloop", main)


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_closing_a_connection_whose_answer_waits_in_files_does_not_read_them_into_memory(loop_kind):
    """The broker stopping (or a connection closed for a bad request) while a client is not
    taking an answer: more than a piece of it left in the files is dropped with the connection,
    not read into memory for a transport that may never drain (a hundred such clients of 55 MiB
    answers would be gigabytes at shutdown). A smaller rest is written before the close."""

    async def main():
        async with Broker() as broker:
            await broker.create_topic("closing")
            good = await Client.open(broker.port)
            await produce(good, "closing", 60)  # about 3 MB
            slow = await Client.open(broker.port, rcvbuf=4096)
            conn = await server_side(broker, slow)
            conn.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * KiB)
            slow.writer.write(request_bytes(1, 12, fetch_body("closing", 4096 * KiB), corr=1))
            await async_wait_until(lambda: conn.sending is not None and conn.paused & _WRITE, what="the answer to wait for the client")
            waiting = _regions(conn)
            assert sum(r.size for r in waiting) > _PIECE
            conn.close()
            assert conn.closing and conn.sending is None and conn.sfd == -1 and broker.server.waiting_fds == 0
            assert not any(r.pinned for r in waiting)
            with pytest.raises(asyncio.IncompleteReadError):  # the answer is cut short by the close
                await slow.read_frame()
            await async_wait_until(lambda: conn not in broker.server.connections, what="the broker to drop the connection")
            await good.api_versions()
            slow.close()
            good.close()
            broker.check_handler_errors()

    run(loop_kind, main)
