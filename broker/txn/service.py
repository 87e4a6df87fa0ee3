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
import time
from collections.abc import Callable

from protocol.errors import ErrorCode
from protocol.records import build_end_txn_marker, build_key_value_batch, iter_key_values, split_batches

from ..cluster import AppendOrigin
from ..coordinator.common import CoordinatorError
from ..coordinator.lost import report_cuts, transactional_id
from ..coordinator.placement import partition_for
from ..logs import get_logger
from . import TXN_TOPIC
from .shard import Completion, Marker, TxnConfig, TxnResult, TxnShard

log = get_logger("transactions")

OFFSETS_TOPIC = "__consumer_offsets"
LOADING, ACTIVE, FAILED = "loading", "active", "failed"
_LOAD_CHUNK = 5 * 1024 * 1024
TXN_SEGMENT_BYTES = 100 * 1024 * 1024  # transaction.state.log.segment.bytes
# markers that could not be written are tried again after 20 ms, doubling to at most 5 s
_MARKER_RETRY_S = 0.02
_RETRY_MAX_S = 5.0


def _now_ms() -> int:
    return int(time.time() * 1000)


async def replay_log(plog, replay, chunk: int = _LOAD_CHUNK, *, with_offset: bool = False) -> int:
    """Hand every keyed record of a coordinator partition's log to ``replay(key, value)`` (with
    ``with_offset``, ``replay(key, value, base offset of its batch)``), in order, yielding to the
    loop between chunks (control batches carry none); returns how many."""
    offset = plog.log_start_offset
    records = 0
    while offset < plog.log_end_offset:
        data = plog.read(offset, chunk)
        if not data:
            break
        for header, batch in split_batches(data, verify_crc=False):
            if header.last_offset < offset:
                continue
            offset = header.last_offset + 1
            if header.is_control:
                continue
            for key, value in iter_key_values(batch):
                if key is not None:
                    if with_offset:
                        replay(key, value, header.base_offset)
                    else:
                        replay(key, value)
                    records += 1
        await asyncio.sleep(0)
    return records


def check_active(state: str, error: type[Exception] = CoordinatorError) -> None:
    """A coordinator partition takes requests once loaded: COORDINATOR_LOAD_IN_PROGRESS before, NOT_COORDINATOR when it failed."""
    if state == LOADING:
        raise error(ErrorCode.coordinator_load_in_progress)
    if state != ACTIVE:
        raise error(ErrorCode.not_coordinator)


async def load_all(runtimes: list, failure: str) -> None:
    """Load a coordinator's partitions one after the other; one that fails is FAILED (NOT_COORDINATOR), the others load."""
    for rt in runtimes:
        try:
            await rt.load()
        except Exception:  # noqa: BLE001 - one bad partition must not stop the others
            rt.state = FAILED
            log.exception(failure, partition=rt.partition.index)


def txn_topic_configs(segment_bytes: int = TXN_SEGMENT_BYTES) -> dict[str, str]:
    """The configs ``__transaction_state`` is created with (also given to one rebuilt from its directories)."""
    return {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}


class TxnRuntime:
    """One ``__transaction_state`` partition: its shard, its appends and its completions."""

    def __init__(self, owner: TransactionCoordinator, partition, shard: TxnShard) -> None:
        self.owner = owner
        self.partition = partition
        self.shard = shard
        self.state = LOADING
        self.completing: set[asyncio.Task] = set()

    async def load(self) -> None:
        self.state = LOADING
        if getattr(self.partition.log, "recovery_truncations", None):
            report_cuts(self.partition.log, TXN_TOPIC, self.partition.index, "transactional_ids", transactional_id)
        records = await replay_log(self.partition.log, self.shard.replay_bytes)
        # the producer ids the transactional ids hold are never handed out again, even after cluster
        # metadata rebuilt from the partition directories (Cluster.reserve_producer_ids)
        self.owner.cluster.reserve_producer_ids(max(
            (max(m.producer_id, m.prev_producer_id, m.next_producer_id) for m in self.shard.txns.values()), default=-1,
        ))
        self.state = ACTIVE
        for completion in self.shard.on_loaded(_now_ms()):
            self._complete_later(completion)
        if records:
            log.info("transaction state loaded", partition=self.partition.index, records=records, transactional_ids=len(self.shard.txns))

    def check(self) -> None:
        check_active(self.state)

    def write(self, op: Callable[[TxnShard], TxnResult]):
        """Run ``op``, append its records (durable under the broker's fsync policy), start its
        completions; returns its response. Raises CoordinatorError (nothing written) on failure."""
        self.check()
        result = self.shard.run(op)
        if result.records:
            try:
                self._append(self.shard.encode(result.records))
            except Exception as exc:  # noqa: BLE001 - any storage failure: the log is the truth
                log.error("transaction state append failed; reloading the partition", partition=self.partition.index, error=str(exc))
                self.shard.reset()
                asyncio.get_running_loop().create_task(self.load())
                raise CoordinatorError(ErrorCode.not_coordinator, str(exc)) from None
        for completion in result.completions:
            self._complete_later(completion)
        return result.response

    def _append(self, encoded: list[tuple[bytes, bytes | None]]) -> None:
        now = _now_ms()
        self.partition.append([build_key_value_batch(encoded, now)], AppendOrigin.COORDINATOR)
        if self.owner.fsync_always:
            self.partition.log.flush()

    async def _complete(self, completion: Completion, attempt: int = 0) -> None:
        """Write the transaction's markers, then its COMPLETE_* record; on a failure (a partition's
        append, a group coordinator reloading) try it all again a little later, as Kafka's marker
        channel retries: a marker written twice is harmless, one never written would stall readers."""
        try:
            for marker in completion.markers:
                await self.owner.write_marker(marker)
            if self.state != ACTIVE:
                return  # reloaded meanwhile: the load completes it again
            error = self.write(lambda shard: shard.complete(completion))
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
            delay = min(_RETRY_MAX_S, _MARKER_RETRY_S * 2 ** min(attempt, 10))
            asyncio.get_running_loop().call_later(delay, self._complete_later, completion, attempt + 1)

    def _complete_later(self, completion: Completion, attempt: int = 0) -> None:
        if self.state != ACTIVE and attempt:
            return
        task = asyncio.get_running_loop().create_task(self._complete(completion, attempt))
        self.completing.add(task)
        task.add_done_callback(self.completing.discard)

    def tick(self, now: int) -> None:
        """Abort timed-out transactions and forget expired transactional ids."""
        if self.state != ACTIVE:
            return
        try:
            self.write(lambda shard: shard.expire(now))
        except CoordinatorError:
            pass


class TransactionCoordinator:
    """Every partition of ``__transaction_state``, and the markers the transactions write."""

    def __init__(self, cluster, groups, config: TxnConfig, *, num_partitions: int = 50, segment_bytes: int = TXN_SEGMENT_BYTES,
                 fsync_always: bool = False) -> None:
        self.cluster = cluster
        self.groups = groups  # the group coordinator: markers for __consumer_offsets partitions
        self.config = config
        self.num_partitions = num_partitions
        self.segment_bytes = segment_bytes
        self.fsync_always = fsync_always
        self.runtimes: list[TxnRuntime] = []
        self._timer: asyncio.TimerHandle | None = None
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
        allocate = self.cluster.allocate_producer_id
        self.runtimes = [
            TxnRuntime(self, p, TxnShard(allocate, self.config, index=p.index, coordinator_epoch=0, clock_ms=_now_ms))
            for p in topic.partitions
        ]
        loop = asyncio.get_running_loop()
        self._load_task = loop.create_task(self._load_all())
        self._arm()

    async def _load_all(self) -> None:
        await load_all(self.runtimes, "transaction state partition failed to load")

    def _arm(self) -> None:
        interval = self.config.abort_timed_out_transaction_cleanup_interval_ms / 1000
        self._timer = asyncio.get_running_loop().call_later(interval, self._tick)

    def _tick(self) -> None:
        now = _now_ms()
        for rt in self.runtimes:
            rt.tick(now)
        self._arm()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._load_task is not None:
            self._load_task.cancel()
        for rt in self.runtimes:
            for task in list(rt.completing):
                task.cancel()
            rt.state = FAILED

    # ================================================================ routing
    def runtime_for(self, transactional_id: str) -> TxnRuntime:
        self.ensure_started()
        return self.runtimes[partition_for(transactional_id, len(self.runtimes))]

    def _write(self, transactional_id: str, op: Callable[[TxnShard], TxnResult]):
        return self.runtime_for(transactional_id).write(op)

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
        from .shard import TxnDescription

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
        now = _now_ms()
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
                                     coordinator_epoch=marker.coordinator_epoch, timestamp=_now_ms())
        part.append(split_batches(batch, verify_crc=False), AppendOrigin.COORDINATOR)
        part.producers.end_txn(marker.producer_id, marker.producer_epoch)
        if self.fsync_always:
            part.log.flush()
