"""Pipelined requests (broker/net/pipeline.py, ``KafkaConnection._start``): a client that
sends several OffsetCommit, Heartbeat or ConsumerGroupHeartbeat requests without
waiting has them all started at once, so that they ride in one append, and
answered in the order it sent them, each only once its records are durable.
Any other request waits until they are answered, so it sees their effect as on
a connection that is handled one request at a time.

The broker runs in the test's event loop; clients are asyncio streams over
loopback. Nothing here asserts a duration.
"""

from __future__ import annotations

import asyncio
import struct

from broker.pending import Pending
from broker.server import _MAX_INFLIGHT, KafkaConnection
from broker.testing import Broker
from protocol.errors import ErrorCode
from protocol.records import split_batches
from tests.integration.test_backpressure import Client, request_bytes, server_side
from tests.wait import async_wait_until

GROUP = "pipelined"


def commit(group: str, offset: int, partition: int = 0, topic: str = "t") -> dict:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": ""}]}],
    }


def fetch(group: str, topic: str = "t") -> dict:
    return {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": False}


def heartbeat(group: str) -> dict:
    return {"group_id": group, "generation_id": 1, "member_id": "nobody", "group_instance_id": None}


async def answers(client: Client, expected: list[tuple[int, int]]) -> list:
    """Read one answer per (api_key, version), in order; returns (correlation id, body) pairs."""
    return [await client.response(key, version) for key, version in expected]


def batches_of(broker: Broker, group: str) -> int:
    """Record batches in the group's __consumer_offsets partition."""
    part = broker.cluster.topics["__consumer_offsets"].partitions[broker.coordinator.partition_for(group)]
    log = part.log
    return sum(1 for _ in split_batches(log.read(log.log_start_offset, 1 << 24), verify_crc=False))


async def committed(client: Client, group: str) -> int:
    client.corr += 1
    client.writer.write(request_bytes(9, 9, fetch(group), client.corr))
    _, body = await client.response(9, 9)
    return body.groups[0].topics[0].partitions[0].committed_offset


async def test_pipelined_commits_ride_in_one_append_and_are_answered_in_order():
    async with Broker() as broker:
        await broker.create_topic("t")
        client = await Client.open(broker.port)
        before = batches_of(broker, GROUP)
        n = 50
        client.writer.write(b"".join(request_bytes(8, 9, commit(GROUP, offset), offset) for offset in range(1, n + 1)))
        got = await answers(client, [(8, 9)] * n)
        assert [corr for corr, _ in got] == list(range(1, n + 1))
        assert all(body.topics[0].partitions[0].error_code == ErrorCode.none for _, body in got)
        client.corr = n
        assert await committed(client, GROUP) == n  # applied in the order sent: the last one stands
        # one connection's burst rides in one append, not one append per request
        assert batches_of(broker, GROUP) - before <= 3, batches_of(broker, GROUP) - before
        client.close()


async def test_a_request_after_pipelined_commits_sees_them():
    async with Broker() as broker:
        await broker.create_topic("t")
        client = await Client.open(broker.port)
        for round_ in range(5):  # OffsetFetch answers committed (durable) offsets only: it must wait for the commits
            first = 10 * round_ + 1
            burst = [request_bytes(8, 9, commit(GROUP, first + i), first + i) for i in range(3)]
            burst.append(request_bytes(9, 9, fetch(GROUP), first + 3))
            client.writer.write(b"".join(burst))
            got = await answers(client, [(8, 9)] * 3 + [(9, 9)])
            assert [corr for corr, _ in got] == [first, first + 1, first + 2, first + 3]
            assert got[3][1].groups[0].topics[0].partitions[0].committed_offset == first + 2
        client.close()


async def test_answers_finished_at_once_wait_behind_earlier_ones():
    """A Heartbeat refused at once (unknown member) between commits that wait for their append."""
    async with Broker() as broker:
        await broker.create_topic("t")
        client = await Client.open(broker.port)
        burst, expected = [], []
        for i in range(1, 21):
            if i % 2:
                burst.append(request_bytes(8, 9, commit(GROUP, i), i))
                expected.append((8, 9))
            else:
                burst.append(request_bytes(12, 4, heartbeat(f"{GROUP}-hb-{i}"), i))
                expected.append((12, 4))
        client.writer.write(b"".join(burst))
        got = await answers(client, expected)
        assert [corr for corr, _ in got] == list(range(1, 21))
        for (key, _), (_, body) in zip(expected, got, strict=True):
            if key == 8:
                assert body.topics[0].partitions[0].error_code == ErrorCode.none
            else:
                assert body.error_code != ErrorCode.none
        client.close()


async def test_more_than_the_inflight_limit_are_all_answered_in_order():
    async with Broker() as broker:
        await broker.create_topic("t")
        client = await Client.open(broker.port)
        conn = None
        n = 4 * _MAX_INFLIGHT + 5
        groups = [f"{GROUP}-{i % 7}" for i in range(n)]  # several shards
        client.writer.write(b"".join(request_bytes(8, 9, commit(g, i + 1), i + 1) for i, g in enumerate(groups)))
        conn = await server_side(broker, client)
        got = []
        for _ in range(n):
            got.append(await client.response(8, 9))
            assert len(conn.inflight or ()) <= _MAX_INFLIGHT
        assert [corr for corr, _ in got] == list(range(1, n + 1))
        assert all(body.topics[0].partitions[0].error_code == ErrorCode.none for _, body in got)
        client.corr = n
        assert await committed(client, groups[-1]) == n
        client.close()


async def test_a_client_leaving_with_requests_in_flight_costs_nothing():
    # a 50 ms append linger holds the commits in flight until the client is gone (with the default, adaptive
    # linger they can all be answered before the test looks)
    async with Broker(settings={"group_coordinator_append_linger_ms": 50}) as broker:
        await broker.create_topic("t")
        for _ in range(10):
            leaver = await Client.open(broker.port)
            leaver.writer.write(b"".join(request_bytes(8, 9, commit(f"{GROUP}-leaver", i), i) for i in range(1, 41)))
            await leaver.writer.drain()
            conn = await server_side(broker, leaver)
            await async_wait_until(lambda conn=conn: conn.inflight or conn.closing, what="the commits to start")
            leaver.writer.transport.abort()  # gone before its answers
            await async_wait_until(lambda conn=conn: conn not in broker.server.connections, what="the broker to drop the client")
        await async_wait_until(lambda: broker.server.request_bytes == 0, what="the request bytes to come back")
        other = await Client.open(broker.port)
        other.writer.write(request_bytes(8, 9, commit(GROUP, 99), 1))
        (corr, body), = await answers(other, [(8, 9)])
        assert corr == 1 and body.topics[0].partitions[0].error_code == ErrorCode.none
        other.corr = 1
        assert await committed(other, GROUP) == 99
        other.close()


async def test_a_client_leaving_with_member_requests_queued_leaves_no_evidence_of_life_waiting():
    """A group member's requests count as waiting (broker/coordinator/arrivals.py) from their
    arrival until their handler starts, or until the connection closes with them, including
    the ones taken from the queue that wait behind a full pipeline: none is left counted."""
    async with Broker(settings={"group_coordinator_append_linger_ms": 50}) as broker:
        await broker.create_topic("t")
        arrivals = broker.server.arrivals
        for _ in range(5):
            leaver = await Client.open(broker.port)
            n = 2 * _MAX_INFLIGHT + 5  # more than the pipeline takes: some wait in _settle, the rest in the queue
            leaver.writer.write(b"".join(request_bytes(8, 9, {**commit(f"{GROUP}-member", i), "member_id": "m1"}, i) for i in range(1, n + 1)))
            await leaver.writer.drain()
            conn = await server_side(broker, leaver)
            await async_wait_until(lambda conn=conn: (conn.inflight and len(conn.inflight) >= _MAX_INFLIGHT) or conn.closing,
                                   what="the pipeline to fill")
            assert arrivals.waiting(f"{GROUP}-member", "m1")
            leaver.writer.transport.abort()
            await async_wait_until(lambda conn=conn: conn not in broker.server.connections, what="the broker to drop the client")
            await async_wait_until(lambda: len(arrivals) == 0, what="nothing left waiting")
            assert not arrivals.waiting(f"{GROUP}-member", "m1")


async def test_a_pipelined_handler_that_fails_closes_only_its_connection(monkeypatch):
    async with Broker(fail_on_handler_errors=False) as broker:
        await broker.create_topic("t")
        failures = []
        broker.server.on_handler_error = lambda name, request, exc: failures.append((name, str(exc)))
        coordinator = broker.coordinator
        real = coordinator.begin_offset_commit

        def fail(get):
            get()
            raise RuntimeError("a bug after the wait")

        def broken(group_id, *args, **kwargs):
            answer = real(group_id, *args, **kwargs)
            if group_id != "broken":
                return answer
            return answer.then(fail) if type(answer) is Pending else fail(lambda: answer)

        monkeypatch.setattr(coordinator, "begin_offset_commit", broken)
        bad = await Client.open(broker.port)
        good = await Client.open(broker.port)
        bad.writer.write(request_bytes(8, 9, commit(GROUP, 1), 1) + request_bytes(8, 9, commit("broken", 2), 2) + request_bytes(8, 9, commit(GROUP, 3), 3))
        assert await bad.closed_by_broker()
        assert failures == [("OffsetCommit", "a bug after the wait")]
        good.writer.write(request_bytes(8, 9, commit(GROUP, 5), 1))
        (corr, body), = await answers(good, [(8, 9)])
        assert corr == 1 and body.topics[0].partitions[0].error_code == ErrorCode.none
        good.close()


class _RecordingTransport:
    """Stands in for a connection's transport: keeps each write call's bytes, and completes
    ``done`` once ``expected`` answers have been written."""

    def __init__(self, expected: int) -> None:
        self.calls: list[bytes] = []
        self.expected = expected
        self.done = asyncio.get_running_loop().create_future()

    def _wrote(self, data: bytes) -> None:
        self.calls.append(data)
        frames, pos = 0, 0
        for call in self.calls:
            pos = 0
            while pos < len(call):
                pos += 4 + struct.unpack_from(">i", call, pos)[0]
                frames += 1
        if frames >= self.expected and not self.done.done():
            self.done.set_result(None)

    def write(self, data) -> None:
        self._wrote(bytes(data))

    def writelines(self, parts) -> None:
        self._wrote(b"".join(bytes(p) for p in parts))

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


async def test_commits_of_several_shards_are_answered_in_one_write():
    """A burst whose commits go to different shards of __consumer_offsets: each shard appends on
    its own, in the same turn of the loop, and the answers still leave in one write, in order."""
    async with Broker(settings={"offsets.topic.num.partitions": 8}) as broker:
        await broker.create_topic("t")
        coordinator = broker.coordinator
        groups, shards = [], set()
        for i in range(1000):  # one group on each shard
            shard = coordinator.partition_for(f"{GROUP}-{i}")
            if shard not in shards:
                shards.add(shard)
                groups.append(f"{GROUP}-{i}")
        assert len(groups) == 8
        transport = _RecordingTransport(len(groups))
        conn = KafkaConnection(broker.server)
        conn.connection_made(transport)
        before = [batches_of(broker, g) for g in groups]
        conn.data_received(b"".join(request_bytes(8, 9, commit(g, i + 1), i + 1) for i, g in enumerate(groups)))
        await transport.done
        assert [batches_of(broker, g) - b for g, b in zip(groups, before, strict=True)] == [1] * len(groups)  # one append per shard
        assert len(transport.calls) == 1, [len(c) for c in transport.calls]
        data, pos, corrs = transport.calls[0], 0, []
        while pos < len(data):
            corrs.append(struct.unpack_from(">i", data, pos + 4)[0])
            pos += 4 + struct.unpack_from(">i", data, pos)[0]
        assert corrs == list(range(1, len(groups) + 1))
        conn.connection_lost(None)
