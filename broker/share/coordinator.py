"""The share coordinator: shards on ``__share_group_state``, write-then-respond.

Each partition of ``__share_group_state`` is one ``ShareStateShard``
(broker/share/state.py) with one writer, the event loop. An operation runs
against its shard; its records are appended to the partition in one write
(flushed to disk first under ``fsync=always``, as the group
coordinator's), and only then applied to the shard and answered. A failed
append reloads the shard from its log and answers NOT_COORDINATOR, as a
coordinator that lost its partition.

A share-partition key ``groupId:topicId:partition`` (the topic id in Kafka's
base64 form) lives on partition ``Utils.abs(key.hashCode()) % n`` of
``__share_group_state`` (Kafka's ``ShareCoordinatorService.partitionFor``),
n being ``share.coordinator.state.topic.num.partitions`` (50).

The topic is created when the share coordinator is first needed (a
FindCoordinator of key type SHARE, a share-state RPC, a share group's first
initialization), as Kafka creates it, and loaded at every start once it
exists: replaying its records in order rebuilds every state.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Callable

from protocol.share_records import SNAPSHOT, ShareKey, encode_key, encode_value

from ..coordinator.common import Result
from ..coordinator.lost import report_cuts, share_group
from ..coordinator.placement import partition_for
from ..coordinator_runtime.constants import SHARE_LOAD_BUFFER_BYTES, SHARE_STATE_TOPIC, now_ms
from ..coordinator_runtime.owner import RuntimeOwner
from ..coordinator_runtime.runtime import ACTIVE, CoordinatorRuntime, KeyValueLoader
from ..logs import get_logger
from .state import ShareConfig, ShareGroupOffset, ShareStateError, ShareStateShard, WriteData

log = get_logger("share-coordinator")


def java_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def parse_java_uuid(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; ValueError when it is not 22 base64 characters of 16 bytes."""
    if len(text) != 22:
        raise ValueError("not a Uuid")
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError("not a Uuid")
    return uuid.UUID(bytes=raw)


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """``SharePartitionKey.asCoordinatorKey``."""
    return f"{group_id}:{java_uuid(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> tuple[str, uuid.UUID, int]:
    """``SharePartitionKey.getInstance(String)``: ValueError for a malformed key."""
    parts = (key or "").split(":")
    if len(parts) != 3 or not parts[0].strip():
        raise ValueError("Share coordinator key is not in the format: groupId:topicId:partition")
    partition = int(parts[2])
    return parts[0], parse_java_uuid(parts[1]), partition


class ShareCoordinatorShard(ShareStateShard):
    """A ``ShareStateShard`` as the coordinator runtime runs it (its ``Shard`` protocol): an operation
    returns the records to write, which reach the state once durable, at the offset they got."""

    settled_events = ()

    def run(self, op: Callable[[ShareStateShard], list]) -> Result:
        return Result(records=op(self))

    def encode(self, records: list) -> list[tuple[bytes, bytes | None]]:
        return [(encode_key(k), encode_value(v)) for k, v in records]

    def loader(self) -> KeyValueLoader:
        return KeyValueLoader(self.replay_bytes, with_offset=True, summary=lambda: {"share_partitions": len(self.states)})

    def activated(self) -> list:
        return []

    def applied(self, records: list, base_offset: int) -> None:
        for key, value in records:
            self.replay(key, value, base_offset)

    def next_deadline(self) -> None:
        return None  # pruning is the coordinator's (ShareCoordinator.prune)

    def fire_timers(self) -> list:
        return []

    def reset(self) -> None:
        for table in (self.states, self.leader_epochs, self.state_epochs, self.update_counts, self.snapshot_offsets):
            table.clear()


class ShareRuntime(CoordinatorRuntime):
    """One ``__share_group_state`` partition: the coordinator runtime with a ``ShareCoordinatorShard``."""

    def __init__(self, owner: ShareCoordinator, partition) -> None:
        self.owner = owner
        index = partition.index
        super().__init__(index, partition, topic=SHARE_STATE_TOPIC, fsync_always=owner.fsync_always, log=log, load_chunk=SHARE_LOAD_BUFFER_BYTES,
                         new_shard=lambda runtime: owner.new_shard(), error=ShareStateError, clock_ms=owner.clock_ms,
                         cuts=lambda plog: report_cuts(plog, SHARE_STATE_TOPIC, index, "share_groups", share_group))

    def commit(self, records: list) -> None:
        """Append the records (durable under the fsync policy), then apply them to the shard;
        raises ShareStateError (NOT_COORDINATOR for a storage failure, which reloads the partition)."""
        if records:
            self.write_now(lambda shard: records)

    def prune(self) -> int:
        """Snapshot the cold share partitions, then delete the records no longer needed (below every
        key's latest snapshot); returns the new log start."""
        plog = self.partition.log
        if self.state != ACTIVE:
            return plog.log_start_offset
        self.commit(self.shard.cold_snapshots())
        upto = min(self.shard.redundant_offset(plog.log_end_offset), plog.log_end_offset)
        if upto > plog.log_start_offset:
            plog.delete_records_before(upto)
        return plog.log_start_offset


def share_state_topic_configs(config: ShareConfig) -> dict[str, str]:
    """The configs ``__share_group_state`` is created with (ShareCoordinatorService.shareGroupStateTopicConfigs),
    also given to one rebuilt from its directories."""
    return {"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": str(config.segment_bytes)}


class ShareCoordinator(RuntimeOwner):
    """Every partition of ``__share_group_state`` (``runtimes``; ``load(index)``, ``unload(index)``):
    Kafka's share coordinator on one node."""

    load_failure = "share state partition failed to load"

    def __init__(self, cluster, config: ShareConfig | None = None, *, fsync_always: bool = False,
                 clock_ms: Callable[[], int] = now_ms) -> None:
        self.cluster = cluster
        self.config = config or ShareConfig()
        self.fsync_always = fsync_always
        self.clock_ms = clock_ms
        self.runtimes: list[ShareRuntime] = []
        self._load_task: asyncio.Task | None = None
        self._prune_handle: asyncio.TimerHandle | None = None

    def new_shard(self) -> ShareCoordinatorShard:
        return ShareCoordinatorShard(self.config, self.clock_ms, self._partition_count)

    def _partition_count(self, topic_id: uuid.UUID) -> int | None:
        topic = self.cluster.by_id.get(topic_id)
        return None if topic is None else len(topic.partitions)

    # ================================================================ life cycle
    def start_if_present(self) -> None:
        if SHARE_STATE_TOPIC in self.cluster.topics:
            self.ensure_started()

    def ensure_started(self) -> None:
        if self.runtimes:
            return
        topic = self.cluster.topics.get(SHARE_STATE_TOPIC)
        if topic is None:  # ShareCoordinatorService.shareGroupStateTopicConfigs
            topic = self.cluster.create_topic(SHARE_STATE_TOPIC, self.config.num_partitions, share_state_topic_configs(self.config))
            self.runtimes = [ShareRuntime(self, p) for p in topic.partitions]
            for rt in self.runtimes:
                rt.start_empty()  # a new topic: nothing to load
            self._arm_prune()
            return
        self.runtimes = [ShareRuntime(self, p) for p in topic.partitions]
        self._start_loading()
        self._arm_prune()

    async def loaded(self) -> None:
        """Wait until every partition is loaded (tests, and callers at start)."""
        self.ensure_started()
        if self._load_task is not None:
            await asyncio.shield(self._load_task)

    def _arm_prune(self) -> None:
        self._prune_handle = asyncio.get_running_loop().call_later(self.config.prune_interval_ms / 1000, self._prune_tick)

    def _prune_tick(self) -> None:
        self.prune()
        self._arm_prune()

    def prune(self) -> None:
        """Kafka's periodic pruning of ``__share_group_state`` (every share.coordinator.state.topic.prune.interval.ms)."""
        for rt in self.runtimes:
            try:
                rt.prune()
            except Exception:  # noqa: BLE001 - storage trouble: the next round tries again
                log.exception("share state pruning failed", partition=rt.partition.index)

    def stop(self) -> None:
        if self._prune_handle is not None:
            self._prune_handle.cancel()
            self._prune_handle = None
        self._stop_runtimes()

    # ================================================================ routing
    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        n = len(self.runtimes) if self.runtimes else self.config.num_partitions
        return partition_for(coordinator_key(group_id, topic_id, partition), n)

    def _runtime(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareRuntime:
        self.ensure_started()
        rt = self.runtimes[self.partition_for(group_id, topic_id, partition)]
        rt.check()
        return rt

    # ================================================================ the RPCs, per share-partition key
    # Each raises ShareStateError (nothing written) or returns once its records are durable.
    def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int) -> None:
        rt = self._runtime(group_id, topic_id, partition)
        rt.commit(rt.shard.initialize(group_id, topic_id, partition, state_epoch, start_offset))

    def write(self, group_id: str, topic_id: uuid.UUID, data: WriteData) -> None:
        rt = self._runtime(group_id, topic_id, data.partition)
        rt.commit(rt.shard.write(group_id, topic_id, data))

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> ShareGroupOffset:
        rt = self._runtime(group_id, topic_id, partition)
        records, state = rt.shard.read(group_id, topic_id, partition, leader_epoch)
        rt.commit(records)
        return rt.shard.states.get((group_id, topic_id, partition), state)

    def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareGroupOffset | None:
        rt = self._runtime(group_id, topic_id, partition)
        return rt.shard.summary(group_id, topic_id, partition)

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        rt = self._runtime(group_id, topic_id, partition)
        rt.commit(rt.shard.delete(group_id, topic_id, partition))

    def topic_deleted(self, topic_id: uuid.UUID) -> None:
        """Tombstones for every share state of a deleted topic (Kafka's maybeCleanupShareState)."""
        for rt in self.runtimes:
            if rt.state != ACTIVE:
                continue
            keys = [sk for sk in rt.shard.states if sk[1] == topic_id]
            try:
                rt.commit([(ShareKey(SNAPSHOT, g, t, p), None) for g, t, p in keys])
            except ShareStateError:
                log.warning("share state of a deleted topic not removed", topic_id=java_uuid(topic_id), partition=rt.partition.index)

    def peek(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareGroupOffset | None:
        """The durable state of a key, or None (no checks; nothing created)."""
        if not self.runtimes:
            return None
        rt = self.runtimes[self.partition_for(group_id, topic_id, partition)]
        return rt.shard.states.get((group_id, topic_id, partition)) if rt.state == ACTIVE else None


class ShareStateHook:
    """What the group coordinator calls to initialize and delete a share group's state
    (``broker.share_state_hook``, installed as the group coordinator's ``share_state``).

    ``initialize(group_id, [group_epoch,] {topic_id: [partitions]})`` writes a fresh
    state for each partition, as Kafka's InitializeShareGroupState: start offset -1
    (the share partition takes its start from ``share.auto.offset.reset`` at first
    use) and the group epoch as state epoch (0 without one), which fences the
    writes of a share partition still holding the previous state.
    ``delete(group_id, {topic_id: [partitions]} | None)`` deletes the given
    partitions' states (every state of the group with None) and drops the share
    partitions kept in memory. Both return ``{}``, or raise ``ShareStateError``
    (the first failure's code) once they have tried every partition.
    """

    def __init__(self, coordinator: ShareCoordinator, on_delete: Callable[[str, uuid.UUID, int], None] | None = None) -> None:
        self.coordinator = coordinator
        self.on_delete = on_delete  # drops the share partition kept in memory (SharePartitionManager.forget)

    async def initialize(self, group_id: str, *args) -> dict:
        state_epoch, partitions = (0, args[0]) if len(args) == 1 else (int(args[0]), args[1])
        await self.coordinator.loaded()
        failed = {}
        for topic_id, parts in partitions.items():
            for p in parts:
                try:
                    current = self.coordinator.peek(group_id, topic_id, p)
                    epoch = max(state_epoch, current.state_epoch + 1 if current is not None else 0)
                    self.coordinator.initialize(group_id, topic_id, p, epoch, -1)
                except ShareStateError as exc:
                    failed[(topic_id, p)] = exc.code
                    continue
                if self.on_delete is not None:
                    self.on_delete(group_id, topic_id, p)  # a share partition of the old state is dropped
        return _raise_first(failed)

    async def delete(self, group_id: str, partitions: dict | None = None) -> dict:
        await self.coordinator.loaded()
        if partitions is None:
            keys = [sk for rt in self.coordinator.runtimes for sk in rt.shard.keys_of_group(group_id)]
        else:
            keys = [(group_id, t, p) for t, parts in partitions.items() for p in parts]
        failed = {}
        for _, topic_id, p in keys:
            try:
                self.coordinator.delete(group_id, topic_id, p)
            except ShareStateError as exc:
                failed[(topic_id, p)] = exc.code
                continue
            if self.on_delete is not None:
                self.on_delete(group_id, topic_id, p)
        return _raise_first(failed)


def _raise_first(failed: dict) -> dict:
    if failed:
        (topic_id, partition), code = next(iter(failed.items()))
        raise ShareStateError(code, f"share state of {java_uuid(topic_id)}-{partition} and {len(failed) - 1} more: {code.name}")
    return {}
