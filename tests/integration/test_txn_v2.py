"""Transactions V2 (KIP-890 part 2) on the wire, against an in-process broker.

The producer sends no AddPartitionsToTxn or AddOffsetsToTxn: Produce v12+ and
TxnOffsetCommit v5+ add their partition to the transaction, and every EndTxn v5
bumps the producer epoch, so a batch of the finished transaction's epoch that
arrives late is fenced instead of joining the next one. The Java client and
franz-go take this path on their own (tests/integration/test_java_clients.py,
tests/clients/test_franz_txn.py); tests/conformance/scenarios/txn.py compares
it with Kafka.
"""

from __future__ import annotations

import asyncio
import time

from bench.txn import read_all
from broker.testing import Broker
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from tests.integration.test_backpressure import Client
from tests.wait import async_wait_until

E = ErrorCode


def _batch(pid: int, epoch: int, seq: int, value: bytes) -> bytes:
    return build_batch([Record(0, int(time.time() * 1000), b"k", value, [])], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=True)


class Txn:
    """One transactional id over a raw connection."""

    def __init__(self, client: Client, tid: str) -> None:
        self.client, self.tid = client, tid
        self.pid = self.epoch = -1

    async def init(self) -> None:
        body = {"transactional_id": self.tid, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}
        answer = await self.client.request(22, 5, body)
        while answer.error_code in (E.coordinator_load_in_progress, E.concurrent_transactions):
            answer = await self.client.request(22, 5, body)
        assert answer.error_code == E.none
        self.pid, self.epoch = answer.producer_id, answer.producer_epoch

    async def produce(self, topic: str, partition: int, seq: int, value: bytes, *, version: int = 12, epoch: int | None = None) -> ErrorCode:
        records = _batch(self.pid, self.epoch if epoch is None else epoch, seq, value)
        body = {"transactional_id": self.tid, "acks": -1, "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
        return ErrorCode((await self.client.request(0, version, body)).responses[0].partition_responses[0].error_code)

    async def end(self, commit: bool, *, version: int = 5):
        body = {"transactional_id": self.tid, "producer_id": self.pid, "producer_epoch": self.epoch, "committed": commit}
        return await self.client.request(26, version, body)

    async def commit_offset(self, group: str, topic: str, offset: int, *, version: int = 5) -> list[ErrorCode]:
        body = {"transactional_id": self.tid, "group_id": group, "producer_id": self.pid, "producer_epoch": self.epoch, "generation_id": -1,
                "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                                                           "committed_metadata": ""}]}]}
        r = await self.client.request(28, version, body)
        return [ErrorCode(p.error_code) for t in r.topics for p in t.partitions]


def _state(broker, tid: str):
    (d,) = broker.server.transactions.describe([tid])
    return d


async def _stable(log) -> None:
    await async_wait_until(lambda: log.last_stable_offset == log.log_end_offset, what="the transaction's markers")


async def test_produce_adds_the_partition_and_every_end_bumps_the_epoch():
    async with Broker() as broker:
        await broker.create_topic("v2", 3)
        client = await Client.open(broker.port)
        tx = Txn(client, "v2-basic")
        await tx.init()
        assert tx.epoch == 0
        assert await tx.produce("v2", 0, 0, b"a") == E.none  # no AddPartitionsToTxn before
        assert await tx.produce("v2", 1, 0, b"b") == E.none
        assert await tx.produce("v2", 2, 0, b"never", version=11) == E.transaction_abortable  # v11 only verifies
        assert broker.cluster.partition("v2", 2).log.log_end_offset == 0
        d = _state(broker, "v2-basic")
        assert d.state == "Ongoing" and [(t, sorted(ps)) for t, ps in d.topics] == [("v2", [0, 1])]
        ended = await tx.end(True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (E.none, tx.pid, 1)
        log0 = broker.cluster.partition("v2", 0).log
        await _stable(log0)
        # the finished transaction's epoch is fenced on its partitions: a late batch cannot join the next one
        assert await tx.produce("v2", 0, 1, b"zombie", epoch=0) == E.invalid_producer_epoch
        tx.epoch = ended.producer_epoch
        assert await tx.produce("v2", 0, 0, b"c") == E.none  # the new epoch starts at sequence 0
        aborted = await tx.end(False)
        assert (aborted.error_code, aborted.producer_epoch) == (E.none, 2)
        await _stable(log0)
        await async_wait_until(lambda: _state(broker, "v2-basic").state == "CompleteAbort", what="COMPLETE_ABORT")
        bootstrap = f"127.0.0.1:{broker.port}"
        committed = await asyncio.to_thread(read_all, bootstrap, "v2", 3, "read_committed", 2)
        assert sorted(committed) == [b"a", b"b"]
        everything = await asyncio.to_thread(read_all, bootstrap, "v2", 3, "read_uncommitted", 3)
        assert sorted(everything) == [b"a", b"b", b"c"]
        client.close()


async def test_the_next_transaction_waits_until_the_last_ones_markers_are_written():
    """The next transaction's first batch on a partition, sent while the last transaction's
    marker there is still unwritten, is refused (retriable) instead of joining the last one."""
    async with Broker() as broker:
        await broker.create_topic("held", 1)
        coordinator = broker.server.transactions
        real = coordinator.write_marker
        release = asyncio.Event()

        async def held(marker):
            await release.wait()
            await real(marker)

        coordinator.write_marker = held
        client = await Client.open(broker.port)
        tx = Txn(client, "v2-held")
        await tx.init()
        assert await tx.produce("held", 0, 0, b"first") == E.none
        assert await tx.commit_offset("g-held", "held", 1) == [E.none]
        ended = await tx.end(True)
        assert ended.error_code == E.none
        log = broker.cluster.partition("held", 0).log
        end_before = log.log_end_offset
        tx.epoch = ended.producer_epoch
        assert await tx.produce("held", 0, 0, b"second") == E.not_enough_replicas  # CONCURRENT_TRANSACTIONS at the coordinator
        assert await tx.commit_offset("g-held", "held", 2) == [E.concurrent_transactions]
        assert log.log_end_offset == end_before and log.in_transaction(tx.pid)
        release.set()
        await async_wait_until(lambda: _state(broker, "v2-held").state == "CompleteCommit", what="COMPLETE_COMMIT")
        assert await tx.produce("held", 0, 0, b"second") == E.none
        assert await tx.commit_offset("g-held", "held", 2) == [E.none]
        assert (await tx.end(False)).error_code == E.none
        await async_wait_until(lambda: _state(broker, "v2-held").state == "CompleteAbort", what="COMPLETE_ABORT")
        bootstrap = f"127.0.0.1:{broker.port}"
        assert await asyncio.to_thread(read_all, bootstrap, "held", 1, "read_committed", 1) == [b"first"]
        fetched = await client.request(9, 7, {"group_id": "g-held", "topics": [{"name": "held", "partition_indexes": [0]}], "require_stable": True})
        assert fetched.topics[0].partitions[0].committed_offset == 1  # the first transaction's; the second was aborted
        client.close()


async def test_txn_offset_commit_adds_the_offsets_partition():
    """TxnOffsetCommit v5 without AddOffsetsToTxn: pending (UNSTABLE_OFFSET_COMMIT) until the commit;
    v4 and below still need AddOffsetsToTxn."""
    async with Broker() as broker:
        await broker.create_topic("src", 1)
        client = await Client.open(broker.port)
        tx = Txn(client, "v2-offsets")
        await tx.init()
        assert await tx.commit_offset("g-v2", "src", 7, version=4) == [E.transaction_abortable]
        assert await tx.commit_offset("g-v2", "src", 7) == [E.none]

        async def fetch():
            r = await client.request(9, 7, {"group_id": "g-v2", "topics": [{"name": "src", "partition_indexes": [0]}], "require_stable": True})
            p = r.topics[0].partitions[0]
            return ErrorCode(p.error_code), p.committed_offset

        assert await fetch() == (E.unstable_offset_commit, -1)
        assert (await tx.end(True)).error_code == E.none
        await async_wait_until(lambda: _state(broker, "v2-offsets").state == "CompleteCommit", what="COMPLETE_COMMIT")
        assert await fetch() == (E.none, 7)
        client.close()


async def test_transaction_version_0_is_not_advertised():
    """The feature at level 0: clients see no transaction.version and use transactions V1."""
    # share.version: finalized at 2 as on a new Kafka 4.4 cluster (share groups, KIP-932)
    for level, expected in ((2, {"group.version": 1, "transaction.version": 2, "share.version": 2}), (0, {"group.version": 1, "share.version": 2})):
        async with Broker(transaction_version=level) as broker:
            client = await Client.open(broker.port)
            r = await client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert {f.name: f.max_version_level for f in r.finalized_features} == expected
            assert {f.name: f.max_version for f in r.supported_features}["transaction.version"] == 2
            client.close()
