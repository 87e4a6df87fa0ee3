"""The transaction coordinator: shards on ``__transaction_state``, write-then-respond, markers.

Each partition of ``__transaction_state`` is one ``TxnShard`` (broker/txn/shard.py)
with one writer, the event loop. An operation runs atomically against the
shard (``TxnShard.run``); its records are appended to the partition in one
write, and only then is its answer released. A transaction that an operation
moved to PREPARE_COMMIT or PREPARE_ABORT comes back as a ``Completion``: its
COMMIT or ABORT markers are then written to every partition of the
transaction (``__consumer_offsets`` partitions through the group coordinator,
which applies the transaction's offsets), and then its COMPLETE_* record,
as Kafka's marker channel does after answering EndTxn. Until then the
transactional id answers CONCURRENT_TRANSACTIONS, and clients retry.

``__transaction_state`` is created when a client first needs a transaction
coordinator (FindCoordinator with key type 1, InitProducerId with a
transactional id), as Kafka creates it, so that a broker that never sees a
transaction pays nothing at start; once it exists it is loaded at every
start, and the transactions a crash left in PREPARE_* are completed then.

A failed append reloads the shard from its log (the last durable state) and
the request gets NOT_COORDINATOR, as a coordinator that lost its partition
answers; the client looks the coordinator up again and retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from protocol.errors import ErrorCode
from protocol.records import build_end_txn_marker, split_batches

from ..partition import AppendOrigin
from ..coordinator.common import CoordinatorError, Result
from ..coordinator.lost import report_cuts, transactional_id
from ..coordinator.placement import partition_for
from ..coordinator_runtime.constants import OFFSETS_TOPIC, TXN_LOAD_BUFFER_BYTES, TXN_TOPIC, now_ms
from ..coordinator_runtime.owner import RuntimeOwner
from ..coordinator_runtime.runtime import ACTIVE, LOADING, CoordinatorRuntime, KeyValueLoader
from ..logs import get_logger
from .model import Completion, Marker, TxnConfig, TxnResult
from .shard import TxnShard

log = get_logger("transactions")

TXN_SEGMENT_BYTES = 100 * 1024 * 1024  # transaction.state.log.segment.bytes
# markers that could not be written are tried again after 20 ms, doubling to at most 5 s
_MARKER_RETRY_S = 0.02
_RETRY_MAX_S = 5.0


def txn_topic_configs(segment_bytes: int = TXN_SEGMENT_BYTES) -> dict[str, str]:
    """The configs ``__transaction_state`` is created with (also given to one rebuilt from its directories)."""
    return {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}


class TxnStateShard(TxnShard):
    """A ``TxnShard`` as the coordinator runtime runs it (its ``Shard`` protocol): operations hand back
    a ``Result`` whose ``on_commit`` starts the transactions' completions once their records are durable,
    and the periodic expiry (``transaction.abort.timed.out.transaction.cleanup.interval.ms``) is its timer."""

    settled_events = ()

    def __init__(self, runtime: TxnRuntime) -> None:
        owner = runtime.owner
        super().__init__(owner.cluster.allocate_producer_id, owner.config, index=runtime.index, coordinator_epoch=0, clock_ms=runtime.clock_ms)
        self.runtime = runtime
        self._next_expiry: int | None = None

    def run(self, op: Callable[[TxnShard], TxnResult]) -> Result:
        result = super().run(op)
        completions = result.completions
        return Result(records=result.records, response=result.response,
                      on_commit=(lambda: self.runtime.complete(completions)) if completions else None)

    def loader(self) -> KeyValueLoader:
        return KeyValueLoader(self.replay_bytes, summary=lambda: {"transactional_ids": len(self.txns)})

    def activated(self) -> TxnResult:
        """Loaded: the producer ids the transactional ids hold are never handed out again (even after
        cluster metadata rebuilt from the partition directories: Cluster.reserve_producer_ids), and the
        transactions a crash left in PREPARE_* are completed."""
        self.runtime.owner.cluster.reserve_producer_ids(max(
            (max(m.producer_id, m.prev_producer_id, m.next_producer_id) for m in self.txns.values()), default=-1,
        ))
        self._next_expiry = self.clock_ms() + self.config.abort_timed_out_transaction_cleanup_interval_ms
        return TxnResult(completions=self.on_loaded())

    def applied(self, records: list, base_offset: int) -> None:
        pass  # an operation applies its records as it writes them (TxnShard.emit)

    def next_deadline(self) -> int | None:
        return self._next_expiry

    def fire_timers(self) -> TxnResult:
        """Abort timed-out transactions and forget expired transactional ids; the next pass one interval on."""
        now = self.clock_ms()
        self._next_expiry = now + self.config.abort_timed_out_transaction_cleanup_interval_ms
        return self.expire(now)


class TxnRuntime(CoordinatorRuntime):
    """One ``__transaction_state`` partition: the coordinator runtime with a ``TxnStateShard``, and its completions."""

    def __init__(self, owner: TransactionCoordinator, partition) -> None:
        self.owner = owner
        index = partition.index
        super().__init__(index, partition, topic=TXN_TOPIC, fsync_always=owner.fsync_always, log=log, load_chunk=TXN_LOAD_BUFFER_BYTES,
                         new_shard=TxnStateShard, error=CoordinatorError, clock_ms=owner.clock_ms,
                         cuts=lambda plog: report_cuts(plog, TXN_TOPIC, index, "transactional_ids", transactional_id))

    def complete(self, completions: list[Completion]) -> None:
        for completion in completions:
            self._complete_later(completion)

    async def _complete(self, completion: Completion, attempt: int = 0) -> None:
        """Write the transaction's markers, then its COMPLETE_* record; on a failure (a partition's
        append, a group coordinator reloading) try it all again a little later, as Kafka's marker
        channel retries: a marker written twice is harmless, one never written would stall readers.
        An unload (or a reload) stops it: the next load completes the transaction again."""
        try:
            for marker in completion.markers:
                await self.owner.write_marker(marker)
            if self.state != ACTIVE:
                return  # reloaded meanwhile: the load completes it again
            error = self.write_now(lambda shard: shard.complete(completion))
            if error not in (ErrorCode.none, None):
                log.warning("transaction completion refused", transactional_id=completion.transactional_id, error=ErrorCode(error).name)
            return
        except asyncio.CancelledError:
            raise
        except CoordinatorError as exc:
            log.warning("transaction markers not written yet; trying again", transactional_id=completion.transactional_id, error=exc.code.name,
                        attempt=attempt + 1)
        except Exception as exc:  # noqa: BLE001 - storage failures (OSError) and bugs alike: retried, never dropped
            log.error("transaction markers not written yet; trying again", transactional_id=completion.transactional_id, error=str(exc),
                      attempt=attempt + 1)
        if self.state == ACTIVE:
            self.call_later(min(_RETRY_MAX_S, _MARKER_RETRY_S * 2 ** min(attempt, 10)), self._complete_later, completion, attempt + 1)

    def _complete_later(self, completion: Completion, attempt: int = 0) -> None:
        if self.state != ACTIVE and attempt:
            return
        self.spawn(self._complete(completion, attempt))


class TransactionCoordinator(RuntimeOwner):
    """Every partition of ``__transaction_state`` (``runtimes``; ``load(index)``, ``unload(index)``),
    and the markers the transactions write."""

    load_failure = "transaction state partition failed to load"

    def __init__(self, cluster, groups, config: TxnConfig, *, num_partitions: int = 50, segment_bytes: int = TXN_SEGMENT_BYTES,
                 fsync_always: bool = False, clock_ms: Callable[[], int] = now_ms) -> None:
        self.cluster = cluster
        self.clock_ms = clock_ms
        self.groups = groups  # the group coordinator: markers for __consumer_offsets partitions
        self.config = config
        self.num_partitions = num_partitions
        self.segment_bytes = segment_bytes
        self.fsync_always = fsync_always
        self.runtimes: list[TxnRuntime] = []
        self._load_task: asyncio.Task | None = None

    @property
    def started(self) -> bool:
        return bool(self.runtimes)

    def start_if_present(self) -> None:
        """At broker start: load ``__transaction_state`` if an earlier run created it."""
        if TXN_TOPIC in self.cluster.topics:
            self.ensure_started()

    def ensure_started(self) -> None:
        """Create (once) and load ``__transaction_state``; the first transactional request does this."""
        if self.runtimes:
            return
        topic = self.cluster.topics.get(TXN_TOPIC)
        if topic is None:
            topic = self.cluster.create_topic(TXN_TOPIC, self.num_partitions, txn_topic_configs(self.segment_bytes))
        self.runtimes = [TxnRuntime(self, p) for p in topic.partitions]
        self._start_loading()

    def stop(self) -> None:
        self._stop_runtimes()

    # ================================================================ routing
    def runtime_for(self, transactional_id: str) -> TxnRuntime:
        self.ensure_started()
        return self.runtimes[partition_for(transactional_id, len(self.runtimes))]

    def _write(self, transactional_id: str, op: Callable[[TxnShard], TxnResult]):
        return self.runtime_for(transactional_id).write_now(op)

    # ================================================================ the API (each answers once its records are appended)
    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int):
        return self._write(transactional_id, lambda s: s.init_producer_id(transactional_id, timeout_ms, producer_id, producer_epoch))

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]], *,
                       verify_only: bool = False, client_txn_version: int = 0) -> dict:
        return self._write(transactional_id, lambda s: s.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, verify_only=verify_only, client_txn_version=client_txn_version))

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> ErrorCode:
        n = self.groups.num_partitions or self.config.offsets_topic_num_partitions
        return self._write(transactional_id, lambda s: s.add_offsets(transactional_id, producer_id, producer_epoch, group_id, offsets_partitions=n))

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, client_txn_version: int = 0):
        return self._write(transactional_id, lambda s: s.end_txn(transactional_id, producer_id, producer_epoch, commit, client_txn_version))

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]], *,
               add: bool = False) -> dict:
        """KIP-890 part 1: are these partitions in the producer's ongoing transaction? (nothing written)

        ``add``: part 2 (transactions V2: Produce v12+, TxnOffsetCommit v5+): they join it
        instead, as a broker's AddPartitionsToTxn of transaction version 2 adds them."""
        if add:
            return self.add_partitions(transactional_id, producer_id, producer_epoch, partitions, client_txn_version=2)
        return self.add_partitions(transactional_id, producer_id, producer_epoch, partitions, verify_only=True)

    def describe(self, transactional_ids: list[str]) -> list:
        """DescribeTransactions: a TxnDescription per id (reads only; nothing is created)."""
        from .model import TxnDescription

        out = []
        for tid in transactional_ids:
            if not self.runtimes:
                out.append(TxnDescription(tid, ErrorCode.coordinator_not_available))
                continue
            rt = self.runtimes[partition_for(tid, len(self.runtimes))]
            if rt.state != ACTIVE:
                out.append(TxnDescription(tid, ErrorCode.coordinator_load_in_progress if rt.state == LOADING else ErrorCode.not_coordinator))
                continue
            out += rt.shard.describe([tid])
        return out

    def list_transactions(self, states: list[str], producer_ids: list[int], duration_ms: int = -1, pattern: str | None = None) -> list:
        """ListTransactions: each loaded partition's TxnListing (none before any transaction)."""
        now = self.clock_ms()
        return [rt.shard.list_transactions(states, producer_ids, duration_ms, pattern, now=now) for rt in self.runtimes if rt.state == ACTIVE]

    # ================================================================ markers
    async def write_marker(self, marker: Marker) -> None:
        """Append one COMMIT or ABORT marker to its partition (durable under the fsync policy)."""
        if marker.topic == OFFSETS_TOPIC:  # through the group coordinator, which applies the transaction's offsets
            error = await self.groups.complete_txn(marker.partition, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                                   marker.commit)
            if error is not ErrorCode.none:  # loading, reloading: TxnRuntime._complete tries again
                raise CoordinatorError(error, f"marker for {OFFSETS_TOPIC}-{marker.partition}")
            return
        part = self.cluster.partition(marker.topic, marker.partition)
        if part is None:  # the topic was deleted: Kafka drops the marker too
            return
        batch = build_end_txn_marker(commit=marker.commit, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                                     coordinator_epoch=marker.coordinator_epoch, timestamp=self.clock_ms())
        part.append(split_batches(batch, verify_crc=False), AppendOrigin.COORDINATOR)
        part.producers.end_txn(marker.producer_id, marker.producer_epoch)
        if self.fsync_always:
            part.log.flush()
