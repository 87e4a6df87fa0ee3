"""READ_COMMITTED over the wire: Fetch and ListOffsets against the in-process broker.

Producers' transactional batches arrive by Produce; the COMMIT/ABORT markers are
appended the way the transaction coordinator will append them
(``Partition.append(..., AppendOrigin.COORDINATOR)``). Checked against Kafka's
behaviour: a READ_COMMITTED fetch gets whole batches below the last stable offset,
the LSO in ``last_stable_offset`` (READ_UNCOMMITTED too), and the aborted
transactions overlapping what it got (an empty array when none; null for
READ_UNCOMMITTED); ListOffsets LATEST is the LSO under READ_COMMITTED. The state
survives a clean restart, a crash (no clean shutdown, a torn tail) and transaction
index files that are garbage.

Nothing here sleeps or asserts a duration: waits are on conditions, with deadlines.
"""

from __future__ import annotations

import os
import time

import pytest

from broker.partition import AppendOrigin
from broker.testing import Broker
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch, build_end_txn_marker, iter_records, split_batches

from tests.wait import async_wait_until

from .test_backpressure import Client, request_bytes

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST, EARLIEST = -1, -2


class Producer:
    """One producer's batches, by Produce v9, with its sequence numbers."""

    def __init__(self, client: Client, topic: str, pid: int) -> None:
        self.client = client
        self.topic = topic
        self.pid = pid
        self.seq = 0

    async def send(self, n: int = 2, *, txn: bool = True, ts: int | None = None) -> tuple[int, int]:
        """Produce ``n`` records in one batch; returns (first offset, last offset)."""
        now = ts if ts is not None else int(time.time() * 1000)
        recs = [Record(i, now, b"%d-%d" % (self.pid, self.seq + i), b"v", []) for i in range(n)]
        raw = build_batch(recs, producer_id=self.pid, producer_epoch=0, base_sequence=self.seq, is_transactional=txn)
        self.seq += n
        body = {
            # no transactional id: Produce then skips the coordinator's check of a transaction's first
            # batch (as Kafka does), so this data-plane test needs no transaction coordinator
            "transactional_id": None,
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": self.topic, "partition_data": [{"index": 0, "records": raw}]}],
        }
        resp = await self.client.request(0, 9, body)
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none, part
        return part.base_offset, part.base_offset + n - 1


async def plain(client: Client, topic: str, n: int = 2, ts: int | None = None) -> tuple[int, int]:
    now = ts if ts is not None else int(time.time() * 1000)
    recs = [Record(i, now, None, b"p", []) for i in range(n)]
    body = {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch(recs)}]}]}
    resp = await client.request(0, 9, body)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none
    return part.base_offset, part.base_offset + n - 1


def end_txn(broker: Broker, topic: str, pid: int, *, commit: bool) -> int:
    """Append a COMMIT/ABORT marker as the transaction coordinator will; returns its offset."""
    raw = build_end_txn_marker(commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=int(time.time() * 1000))
    return broker.cluster.partition(topic, 0).append(split_batches(raw), AppendOrigin.COORDINATOR).base_offset


def fetch_request(topic: str, offset: int, isolation: int, max_wait: int = 0, max_bytes: int = 1 << 20, topic_id=None) -> dict:
    return {
        "max_wait": max_wait,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                                                                         "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
    }


async def fetch(client: Client, topic: str, offset: int, isolation: int, version: int = 12, topic_id=None):
    """One partition's answer; v13+ name the topic by ``topic_id``."""
    resp = await client.request(1, version, fetch_request(topic, offset, isolation, topic_id=topic_id))
    (part,) = resp.responses[0].partitions
    assert part.error_code == ErrorCode.none, part
    return part


def offsets(part) -> list[int]:
    """Offsets of the data records of a fetch answer (markers left out), whole batches checked."""
    out = []
    for hdr, batch in split_batches(part.records or b""):
        if not hdr.is_control:
            out += [r.offset for r in iter_records(batch)]
    return out


def last_offset(part) -> int:
    batches = split_batches(part.records or b"")
    return batches[-1][0].last_offset if batches else -1


def aborted(part) -> list[tuple[int, int]] | None:
    if part.aborted_transactions is None:
        return None
    return [(a.producer_id, a.first_offset) for a in part.aborted_transactions]


async def list_offset(client: Client, topic: str, ts: int, isolation: int, version: int = 5) -> tuple[int, int]:
    body = {"replica_id": -1, "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]}
    resp = await client.request(2, version, body)
    (part,) = resp.topics[0].partitions
    assert part.error_code == ErrorCode.none
    return part.offset, part.timestamp


async def view(client: Client, topic: str) -> dict:
    """What a READ_COMMITTED consumer reading from offset 0 sees: LSO, high watermark, the
    records' offsets and the aborted transactions it is told about (fetching on until it
    gets nothing more: one fetch reads one segment)."""
    at, seen, told = 0, [], []
    while True:
        part = await fetch(client, topic, at, READ_COMMITTED)
        seen += offsets(part)
        told += [a for a in aborted(part) if a not in told]
        if not part.records:
            break
        at = last_offset(part) + 1
    return {
        "lso": part.last_stable_offset,
        "hw": part.high_watermark,
        "offsets": seen,
        "aborted": told,
        "latest": (await list_offset(client, topic, LATEST, READ_COMMITTED))[0],
    }


# --------------------------------------------------------------------------- fetch
async def test_read_committed_stops_at_the_lso_until_the_commit():
    async with Broker() as broker:
        await broker.create_topic("rc")
        client = await Client.open(broker.port)
        await plain(client, "rc", 3)  # 0-2
        a = Producer(client, "rc", 1001)
        first, _ = await a.send(2)  # 3-4
        await plain(client, "rc", 2)  # 5-6
        topic_id = broker.cluster.topics["rc"].topic_id
        for version in (4, 11, 12, 16):
            part = await fetch(client, "rc", 0, READ_COMMITTED, version, topic_id)
            assert offsets(part) == [0, 1, 2]
            assert (part.last_stable_offset, part.high_watermark) == (first, 7)
            assert aborted(part) == []  # an empty array, as Kafka answers, not null
            part = await fetch(client, "rc", 0, READ_UNCOMMITTED, version, topic_id)
            assert offsets(part) == list(range(7))
            assert (part.last_stable_offset, part.high_watermark) == (first, 7)
            assert aborted(part) is None
        # at or past the LSO: nothing, and no error
        for at in (first, 5, 7):
            part = await fetch(client, "rc", at, READ_COMMITTED)
            assert part.records in (b"", None) and aborted(part) == []
        await a.send(1)  # 7, same transaction
        marker = end_txn(broker, "rc", 1001, commit=True)  # 8
        part = await fetch(client, "rc", 0, READ_COMMITTED)
        assert offsets(part) == list(range(8)) and last_offset(part) == marker
        assert part.last_stable_offset == part.high_watermark == marker + 1
        assert aborted(part) == []
        client.close()


async def test_aborted_transaction_is_listed_with_the_records():
    async with Broker() as broker:
        await broker.create_topic("ab")
        client = await Client.open(broker.port)
        b = Producer(client, "ab", 2002)
        first, _ = await b.send(2)  # 0-1
        await plain(client, "ab", 1)  # 2
        await b.send(1)  # 3
        marker = end_txn(broker, "ab", 2002, commit=False)  # 4
        await plain(client, "ab", 2)  # 5-6
        part = await fetch(client, "ab", 0, READ_COMMITTED)
        assert offsets(part) == [0, 1, 2, 3, 5, 6]  # the consumer drops the aborted ones itself
        assert aborted(part) == [(2002, first)]
        assert part.last_stable_offset == part.high_watermark == 7
        assert aborted(await fetch(client, "ab", 2, READ_COMMITTED)) == [(2002, first)]
        assert aborted(await fetch(client, "ab", marker, READ_COMMITTED)) == [(2002, first)]
        assert aborted(await fetch(client, "ab", marker + 1, READ_COMMITTED)) == []
        assert aborted(await fetch(client, "ab", 0, READ_UNCOMMITTED)) is None
        client.close()


async def test_aborted_transactions_are_those_overlapping_what_the_fetch_returned():
    async with Broker() as broker:
        await broker.create_topic("bound")
        client = await Client.open(broker.port)
        a, b = Producer(client, "bound", 71), Producer(client, "bound", 72)
        fa, _ = await a.send(2)  # 0-1
        end_txn(broker, "bound", 71, commit=False)  # 2
        for _ in range(10):
            await plain(client, "bound", 5)  # 3-52
        fb, _ = await b.send(2)  # 53-54
        end_txn(broker, "bound", 72, commit=False)  # 55
        body = fetch_request("bound", 0, READ_COMMITTED, max_bytes=300)  # a few batches only
        resp = await client.request(1, 12, body)
        (part,) = resp.responses[0].partitions
        assert 2 <= last_offset(part) < fb
        assert aborted(part) == [(71, fa)]
        whole = await fetch(client, "bound", 0, READ_COMMITTED)
        assert aborted(whole) == [(71, fa), (72, fb)]
        assert aborted(await fetch(client, "bound", 3, READ_COMMITTED)) == [(72, fb)]
        client.close()


async def test_interleaved_transactions_of_three_producers():
    async with Broker() as broker:
        await broker.create_topic("il")
        client = await Client.open(broker.port)
        a, b, c = (Producer(client, "il", pid) for pid in (11, 12, 13))
        fa, _ = await a.send(2)  # 0-1
        fb, _ = await b.send(2)  # 2-3
        fc, _ = await c.send(2)  # 4-5
        await a.send(1)  # 6
        await plain(client, "il", 1)  # 7
        assert (await view(client, "il"))["lso"] == fa
        end_txn(broker, "il", 12, commit=True)  # 8: A is still open
        v = await view(client, "il")
        assert v["lso"] == v["latest"] == fa and v["offsets"] == [] and v["aborted"] == []
        ma = end_txn(broker, "il", 11, commit=False)  # 9: C is still open, from 4
        v = await view(client, "il")
        assert v["lso"] == v["latest"] == fc
        assert v["offsets"] == [0, 1, 2, 3]  # the batches below 4
        assert v["aborted"] == [(11, fa)]  # A's [0, 9] overlaps [0, 3]
        await b.send(2)  # 10-11: B's next transaction
        mc = end_txn(broker, "il", 13, commit=False)  # 12: B still open, from 10
        v = await view(client, "il")
        assert v["lso"] == 10 and v["offsets"] == list(range(8))
        assert v["aborted"] == [(11, fa), (13, fc)]
        end_txn(broker, "il", 12, commit=True)  # 13
        v = await view(client, "il")
        assert v["lso"] == v["hw"] == v["latest"] == 14
        assert aborted(await fetch(client, "il", 5, READ_COMMITTED)) == [(11, fa), (13, fc)]
        assert aborted(await fetch(client, "il", ma + 1, READ_COMMITTED)) == [(13, fc)]
        assert aborted(await fetch(client, "il", mc + 1, READ_COMMITTED)) == []
        client.close()


async def test_a_parked_read_committed_fetch_wakes_when_the_transaction_commits():
    async with Broker() as broker:
        await broker.create_topic("lp")
        client = await Client.open(broker.port)
        p = Producer(client, "lp", 31)
        await p.send(3)  # 0-2: there is data, but none below the LSO
        client.corr += 1
        client.writer.write(request_bytes(1, 12, fetch_request("lp", 0, READ_COMMITTED, max_wait=30_000), client.corr))
        part = broker.cluster.partition("lp", 0)
        await async_wait_until(lambda: bool(part.waiters), what="the fetch to wait for committed data")
        end_txn(broker, "lp", 31, commit=True)
        corr, resp = await client.response(1, 12)
        assert corr == client.corr
        (got,) = resp.responses[0].partitions
        assert offsets(got) == [0, 1, 2] and got.last_stable_offset == 4
        client.close()


# --------------------------------------------------------------------------- list offsets
async def test_list_offsets_latest_is_the_lso_under_read_committed():
    async with Broker() as broker:
        await broker.create_topic("lo")
        client = await Client.open(broker.port)
        base = int(time.time() * 1000)
        await plain(client, "lo", 2, ts=base)  # 0-1
        p = Producer(client, "lo", 41)
        first, _ = await p.send(2, ts=base + 10)  # 2-3
        await plain(client, "lo", 2, ts=base + 20)  # 4-5
        for version in (2, 5, 7):
            assert await list_offset(client, "lo", LATEST, READ_COMMITTED, version) == (first, -1)
            assert await list_offset(client, "lo", LATEST, READ_UNCOMMITTED, version) == (6, -1)
            assert (await list_offset(client, "lo", EARLIEST, READ_COMMITTED, version))[0] == 0
        # a timestamp found at or past the LSO is not answered under READ_COMMITTED
        assert await list_offset(client, "lo", base, READ_COMMITTED) == (0, base)
        assert await list_offset(client, "lo", base + 20, READ_COMMITTED) == (-1, -1)
        assert await list_offset(client, "lo", base + 20, READ_UNCOMMITTED) == (4, base + 20)
        assert await list_offset(client, "lo", -3, READ_COMMITTED, 7) == (-1, -1)
        end_txn(broker, "lo", 41, commit=True)
        assert await list_offset(client, "lo", LATEST, READ_COMMITTED) == (7, -1)
        assert await list_offset(client, "lo", base + 20, READ_COMMITTED) == (4, base + 20)
        client.close()


# --------------------------------------------------------------------------- restarts
async def _history(broker: Broker, client: Client, topic: str) -> dict:
    """Aborted transactions spread over several segments, one transaction left open."""
    producers = [Producer(client, topic, pid) for pid in (51, 52, 53, 54)]
    for round_ in range(3):
        for p in producers[:3]:
            await p.send(2)
        await plain(client, topic, 3)
        end_txn(broker, topic, 51, commit=round_ != 1)
        end_txn(broker, topic, 52, commit=False)
        end_txn(broker, topic, 53, commit=round_ == 2)
    await producers[3].send(2)  # open
    await plain(client, topic, 2)
    return await view(client, topic)


def _partition_dir(broker: Broker, topic: str):
    return broker.data_dir / f"{topic}-0"


async def test_restart_keeps_the_lso_and_the_aborted_transactions():
    async with Broker() as broker:
        await broker.create_topic("rs", config={"segment.bytes": "400"})
        client = await Client.open(broker.port)
        before = await _history(broker, client, "rs")
        assert len(before["aborted"]) == 6 and before["lso"] < before["hw"]
        assert len(broker.cluster.partition("rs", 0).log.segment_base_offsets()) > 3
        client.close()
        await broker.restart()
        client = await Client.open(broker.port)
        assert await view(client, "rs") == before
        end_txn(broker, "rs", 54, commit=False)
        after = await view(client, "rs")
        assert after["lso"] == after["hw"] and len(after["aborted"]) == 7
        client.close()
        await broker.restart()
        client = await Client.open(broker.port)
        assert await view(client, "rs") == after
        client.close()


async def test_crash_without_clean_shutdown_keeps_the_state():
    async with Broker() as broker:
        await broker.create_topic("cr", config={"segment.bytes": "400"})
        client = await Client.open(broker.port)
        before = await _history(broker, client, "cr")
        client.close()
        await broker.stop()
        # as if killed before closing: no clean-shutdown marker, no snapshot at the log end
        d = _partition_dir(broker, "cr")
        (d / "clean-shutdown").unlink()
        (d / f"{before['hw']:020d}.txnsnapshot").unlink()
        await broker.start()
        client = await Client.open(broker.port)
        assert await view(client, "cr") == before
        client.close()


async def test_a_torn_tail_takes_the_torn_marker_with_it():
    async with Broker() as broker:
        await broker.create_topic("tt")
        client = await Client.open(broker.port)
        p = Producer(client, "tt", 61)
        first, _ = await p.send(2)
        await plain(client, "tt", 2)
        marker = end_txn(broker, "tt", 61, commit=False)
        v = await view(client, "tt")
        assert v["aborted"] == [(61, first)] and v["lso"] == marker + 1
        client.close()
        await broker.stop()
        d = _partition_dir(broker, "tt")
        (d / "clean-shutdown").unlink()
        log_file = d / "00000000000000000000.log"
        with open(log_file, "r+b") as f:
            f.truncate(log_file.stat().st_size - 7)  # the marker's write was torn
        await broker.start()
        client = await Client.open(broker.port)
        v = await view(client, "tt")
        assert v["hw"] == marker and v["lso"] == v["latest"] == first  # the transaction is open again
        assert v["offsets"] == [] and v["aborted"] == []
        assert aborted(await fetch(client, "tt", 0, READ_UNCOMMITTED)) is None
        marker = end_txn(broker, "tt", 61, commit=True)  # the coordinator's retry
        v = await view(client, "tt")
        assert v["lso"] == v["hw"] == marker + 1 and v["aborted"] == [] and v["offsets"] == [0, 1, 2, 3]
        client.close()


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "huge"])
async def test_garbage_transaction_indexes_are_rebuilt(damage):
    async with Broker() as broker:
        await broker.create_topic("gi", config={"segment.bytes": "400"})
        client = await Client.open(broker.port)
        before = await _history(broker, client, "gi")
        client.close()
        await broker.stop()
        d = _partition_dir(broker, "gi")
        indexes = sorted(p for p in d.iterdir() if p.name.endswith(".txnindex"))
        assert indexes
        for p in indexes:
            size = p.stat().st_size
            if damage == "truncated":
                os.truncate(p, size - 3)
            elif damage == "garbage":
                p.write_bytes(os.urandom(size))
            elif damage == "empty":
                p.write_bytes(b"")
            else:
                os.truncate(p, 1 << 30)
        for p in d.iterdir():
            if p.name.endswith(".txnsnapshot"):
                p.write_bytes(os.urandom(30))
        await broker.start()
        client = await Client.open(broker.port)
        assert await view(client, "gi") == before
        client.close()
        broker.check_handler_errors()
