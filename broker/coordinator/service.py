"""The group coordinator as the broker's handlers see it (Kafka's GroupCoordinatorService).

Handlers call one method per API (``join_group``, ``offset_commit`` ...) and
get the answer's data back, or a ``CoordinatorError`` whose code is already
the one the client must see (``errors.for_exception``, the one mapping).
Behind it: routing a group id to its shard, choosing between classic and
KIP-848 logic, and the shard runtime that makes every answer wait for its
records to be durable. No handler touches a shard or the runtime.

``__consumer_offsets`` is created on first start with
``offsets.topic.num.partitions`` partitions (then fixed: the existing count is
used), ``cleanup.policy=compact`` and 100 MiB segments. Each partition's shard
loads in the background after the broker is ready; until it has, requests for
its groups get COORDINATOR_LOAD_IN_PROGRESS (Heartbeat gets NONE).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode

from ..coordinator_runtime.constants import OFFSETS_TOPIC
from ..coordinator_runtime.owner import RuntimeOwner
from ..logs import get_logger
from .arrivals import Arrivals
from .classic import JoinParams, join_error
from .common import CoordinatorError, GroupConfig, Result
from .consumer import HeartbeatParams
from .consumer_group import ConsumerGroup
from .described import (
    ClassicGroupDescription,
    ClassicMemberDescription,
    ConsumerGroupDescription,
    ConsumerMemberDescription,
    GroupListing,
    ShareGroupDescription,
    ShareMemberDescription,
    TopicAssignment,
)
from .errors import for_exception
from .events import EventPublisher
from .offsets import UNSTABLE, CommitPartition
from .placement import partition_for
from ..pending import Pending, settle
from .runtime import ACTIVE, LOADING, LoopWatch, ShardRuntime

if TYPE_CHECKING:  # share.py is imported by the first share-group request, not at start
    from .share import ShareHeartbeatParams

# The service's public surface: what the handlers may import from the coordinator (with
# CoordinatorError, also in errors.py): the service, the parameters of its operations, the plain
# data its describe and list operations answer (described.py), and the constants of its answers.
__all__ = [
    "OFFSETS_TOPIC",
    "UNSTABLE",  # an offset_fetch row's value while a transactional commit of it is pending
    "ClassicGroupDescription",
    "ClassicMemberDescription",
    "CommitPartition",
    "ConsumerGroupDescription",
    "ConsumerMemberDescription",
    "CoordinatorError",
    "GroupCoordinator",
    "GroupListing",
    "HeartbeatParams",
    "JoinParams",
    "ShareGroupDescription",
    "ShareHeartbeatParams",
    "ShareMemberDescription",
    "TopicAssignment",
    "join_error",
]


def __getattr__(name: str):
    """``ShareHeartbeatParams``, imported (with the share-group code) when a handler first asks for it."""
    if name == "ShareHeartbeatParams":
        from .share import ShareHeartbeatParams

        return ShareHeartbeatParams
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ==================================================================== operations
# What each classic request does to a shard, whichever protocol the group speaks
# (a classic member may be inside a KIP-848 group): pure functions of the shard,
# run by the runtime (and by the deterministic shard tests).
def join_op(params: JoinParams):
    def op(shard):
        group = shard.groups.get(params.group_id)
        if isinstance(group, ConsumerGroup):
            if group.members:  # a classic member joining a consumer group
                return shard.migration.classic_join(group, params, shard.new_future())
            shard.migration.drop_empty(group)
        return shard.classic.join(params)

    return op


def sync_op(group_id: str, generation: int, member_id: str, instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
            assignments: dict[str, bytes]):
    def op(shard):
        group = shard.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return Result(response=shard.migration.classic_sync(group, member_id, instance_id, generation, protocol_type, protocol_name))
        return shard.classic.sync(group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments)

    return op


def heartbeat_op(group_id: str, generation: int, member_id: str, instance_id: str | None):
    def op(shard):
        group = shard.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return Result(response=shard.migration.classic_heartbeat(group, member_id, instance_id, generation))
        return Result(response=shard.classic.heartbeat(group_id, generation, member_id, instance_id))

    return op


def leave_op(group_id: str, members: list[tuple[str, str | None, str | None]]):
    def op(shard):
        group = shard.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            top, results, records = shard.migration.classic_leave(group, members)
        else:
            top, results, records = shard.classic.leave(group_id, members)
        return Result(records=records, response=(top, results))

    return op

log = get_logger("coordinator")


def _with_extra(result: Result) -> Result:
    result.response = (result.response, result.extra)
    return result


def offsets_topic_configs(config: GroupConfig) -> dict[str, str]:
    """The configs ``__consumer_offsets`` is created with (also given to one rebuilt from its directories)."""
    return {"cleanup.policy": "compact", "segment.bytes": str(config.offsets_topic_segment_bytes)}



def _translated(exc: Exception) -> CoordinatorError:
    code, message = for_exception(exc)
    return CoordinatorError(code, message)


def _checked(get):
    """A write's value, its failure translated; None (a parked request whose shard was reset
    under it: a failed append, shutdown) is NOT_COORDINATOR."""
    try:
        value = get()
    except (CoordinatorError, OSError) as exc:
        raise _translated(exc) from None
    if value is None:
        raise CoordinatorError(ErrorCode.not_coordinator)
    return value


def _heartbeat_code(exc: CoordinatorError) -> ErrorCode:
    if exc.code is ErrorCode.coordinator_load_in_progress:
        return ErrorCode.none  # as Kafka: a loading coordinator does not fail heartbeats
    raise exc


def _heartbeat_answer(get) -> ErrorCode:
    try:
        return get()
    except CoordinatorError as exc:
        return _heartbeat_code(exc)

class GroupCoordinator(RuntimeOwner):
    """Every partition of ``__consumer_offsets`` (``runtimes``, also ``shards``), loaded at start;
    ``load(index)`` and ``unload(index)`` (``RuntimeOwner``) as its leadership moves."""

    load_failure = "shard failed to load"

    def __init__(self, cluster, config: GroupConfig, *, fsync_always: bool) -> None:
        self.cluster = cluster
        self.config = config
        self.fsync_always = fsync_always
        self.runtimes: list[ShardRuntime] = []
        self._load_task: asyncio.Task | None = None
        self.loaded = asyncio.Event()
        self.watch: LoopWatch | None = None
        # the connections record group members' requests here while they wait to be handled
        self.arrivals = Arrivals()
        self._share_state = None  # the share-state hook (see share_state)
        self._share_tasks: set[asyncio.Task] = set()

    @property
    def shards(self) -> list[ShardRuntime]:
        return self.runtimes

    @property
    def num_partitions(self) -> int:
        return len(self.runtimes)

    def start(self) -> None:
        topic = self.cluster.topics.get(OFFSETS_TOPIC)
        if topic is None:
            topic = self.cluster.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, offsets_topic_configs(self.config))
        publisher = EventPublisher(self.cluster)
        self.watch = LoopWatch(asyncio.get_running_loop())
        self.watch.start()
        self.runtimes = [
            ShardRuntime(
                p.index, p, self.config, fsync_always=self.fsync_always, log=log, metadata=self.cluster.metadata, watch=self.watch,
                publisher=publisher, arrivals=self.arrivals,
            )
            for p in topic.partitions
        ]
        self._tell_share_state_hook()
        self._load_task = asyncio.get_running_loop().create_task(self._load_all())

    async def _load_all(self) -> None:
        t0 = time.perf_counter()
        await self.load_all(freeze=True)
        total = sum(s.load_stats.get("records", 0) for s in self.shards)
        log.info("coordinator loaded", shards=len(self.shards), records=total, load_ms=round((time.perf_counter() - t0) * 1000, 1))
        self.loaded.set()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, len(self.shards))

    def shard_for(self, group_id: str) -> ShardRuntime:
        if not self.shards:
            raise CoordinatorError(ErrorCode.coordinator_not_available)
        return self.shards[self.partition_for(group_id)]

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        self._stop_runtimes()
        for runtime in self.runtimes:
            runtime.shard.reset()  # resolves parked requests: their handlers answer NOT_COORDINATOR

    # ================================================================ the API
    def _begin(self, group_id: str, op):
        """Run a write operation now: its value, or a ``Pending`` of it (``ShardRuntime.begin``);
        failures as CoordinatorError (``errors.for_exception``)."""
        try:
            out = self.shard_for(group_id).begin(op)
        except (CoordinatorError, OSError) as exc:
            raise _translated(exc) from None
        if type(out) is Pending:
            return out.then(_checked)
        return _checked(lambda: out)

    async def _write(self, group_id: str, op):
        return await settle(self._begin(group_id, op))

    async def _read(self, group_id: str, op, *, stable: bool = False):
        try:
            shard = self.shard_for(group_id)
            if stable:
                await shard.barrier()
            return await shard.read(op)
        except (CoordinatorError, OSError) as exc:
            code, message = for_exception(exc)
            raise CoordinatorError(code, message) from None

    async def join_group(self, params: JoinParams) -> dict:
        """The JoinGroup answer (once the join phase completes)."""
        return dict(await self._write(params.group_id, join_op(params)))

    async def sync_group(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes]) -> dict:
        return await self._write(group_id, sync_op(group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments))

    def begin_heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None):
        """The Heartbeat's error code, or a ``Pending`` of it."""
        try:
            out = self._begin(group_id, heartbeat_op(group_id, generation, member_id, instance_id))
        except CoordinatorError as exc:
            return _heartbeat_code(exc)
        return out.then(_heartbeat_answer) if type(out) is Pending else out

    async def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        return await settle(self.begin_heartbeat(group_id, generation, member_id, instance_id))

    async def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]) -> tuple[ErrorCode, list[dict]]:
        """members: (member_id, group_instance_id, reason). Returns (top-level error, per-member answers)."""
        return await self._write(group_id, leave_op(group_id, members))

    def begin_consumer_group_heartbeat(self, params: HeartbeatParams):
        """The ConsumerGroupHeartbeat answer's fields, or a ``Pending`` of them."""
        return self._begin(params.group_id, lambda shard: shard.consumer.heartbeat(params))

    async def consumer_group_heartbeat(self, params: HeartbeatParams) -> dict:
        return await settle(self.begin_consumer_group_heartbeat(params))

    # ================================================================ share groups (KIP-932)
    @property
    def share_state(self):
        """The share-state hook (``share_init.py``): an object with ``async initialize(group_id,
        group_epoch, {topic_id: [partitions]})`` and ``async delete(group_id, {topic_id: [partitions]})``,
        or None (share partitions count as initialized at once)."""
        return self._share_state

    @share_state.setter
    def share_state(self, hook) -> None:
        self._share_state = hook
        self._tell_share_state_hook()

    def _tell_share_state_hook(self) -> None:
        for runtime in self.runtimes:
            runtime.share_state_hook = runtime.shard.share_state_hook = self._share_state is not None

    async def share_group_heartbeat(self, params: ShareHeartbeatParams) -> dict:
        answer, initialize = await self._write(params.group_id, lambda shard: shard.share.heartbeat(params))
        if initialize is not None and self._share_state is not None:
            task = asyncio.get_running_loop().create_task(self._initialize_share_state(*initialize))
            self._share_tasks.add(task)
            task.add_done_callback(self._share_tasks.discard)
        return answer

    async def _initialize_share_state(self, group_id: str, group_epoch: int, partitions: dict) -> None:
        """Kafka's persister.initializeState, then the partitions' move to initialized (or back)."""
        hook = self._share_state
        try:
            await hook.initialize(group_id, group_epoch, partitions)
        except Exception as exc:  # noqa: BLE001 - whatever the hook raised, the partitions are retried later
            log.warning("share state initialization failed", group=group_id, error=repr(exc))
            record = "uninitialized"
        else:
            record = "initialized"

        def op(shard) -> Result:
            getattr(shard.share.init, record)(group_id, partitions)
            return Result(response=record)  # (a None answer would mean a request parked by a reset shard)

        try:
            await self._write(group_id, op)
        except CoordinatorError as exc:
            log.warning("share state initialization not recorded", group=group_id, error=exc.code.name)

    async def _delete_share_state(self, deleted: dict) -> None:
        hook = self._share_state
        if hook is None:
            return
        for group_id, partitions in deleted.items():
            try:
                await hook.delete(group_id, partitions)
            except Exception as exc:  # noqa: BLE001 - the group is gone either way, as in Kafka
                log.warning("share state deletion failed", group=group_id, error=repr(exc))

    async def share_group_describe(self, group_id: str) -> ShareGroupDescription | GroupListing | None:
        """The share group as it stands, the listing of a group of another kind, or None."""
        return await self._read(group_id, lambda shard: shard.describe_share_group(group_id))

    def begin_offset_commit(self, group_id: str, member_id: str, generation: int, instance_id: str | None, version: int,
                            retention_ms: int, partitions: list[CommitPartition]):
        """(topic, partition, error) for each partition, or a ``Pending`` of them (answered once durable)."""
        return self._begin(
            group_id, lambda shard: shard.offset_commit(group_id, member_id, generation, instance_id, version, retention_ms, partitions)
        )

    async def offset_commit(self, group_id: str, member_id: str, generation: int, instance_id: str | None, version: int,
                            retention_ms: int, partitions: list[CommitPartition]) -> list[tuple[str, int, ErrorCode]]:
        return await settle(self.begin_offset_commit(group_id, member_id, generation, instance_id, version, retention_ms, partitions))

    async def txn_offset_commit(self, group_id: str, member_id: str, generation: int, instance_id: str | None, version: int,
                                producer_id: int, producer_epoch: int, partitions: list[CommitPartition]) -> list[tuple[str, int, ErrorCode]]:
        """TxnOffsetCommit: offsets written in the producer's transaction, shown once its COMMIT marker is."""
        return await self._write(
            group_id,
            lambda shard: shard.txn_offset_commit(group_id, member_id, generation, instance_id, version, producer_id, producer_epoch, partitions),
        )

    async def complete_txn(self, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool) -> ErrorCode:
        """Write a transaction's COMMIT or ABORT marker to one partition of ``__consumer_offsets``
        (what Kafka's WriteTxnMarkers does there); answers once the marker is durable."""
        runtime = self.shards[partition]
        try:
            await runtime.write(lambda shard: shard.complete_txn(producer_id, producer_epoch, coordinator_epoch, commit))
        except (CoordinatorError, OSError) as exc:
            return for_exception(exc)[0]
        return ErrorCode.none

    async def offset_fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None, *, stable: bool,
                           member_id: str | None = None, member_epoch: int = -1) -> list:
        """(topic, partition, OffsetCommitValue or None) rows; raises for a fenced KIP-848 member."""

        def op(shard):
            error = shard.validate_fetch(group_id, member_id, member_epoch)
            if error is not None:
                raise CoordinatorError(error)
            return shard.offset_fetch(group_id, topics, stable=stable)

        return await self._read(group_id, op, stable=stable)

    async def offset_delete(self, group_id: str, topics: list[tuple[str, list[int]]]) -> list[tuple[str, int, ErrorCode]]:
        error, answer = await self._write(group_id, lambda shard: shard.offset_delete(group_id, topics))
        if error is not ErrorCode.none:
            raise CoordinatorError(error)
        return answer

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """Each group's answer; groups of one shard are deleted in one operation."""
        by_shard: dict[int, list[str]] = {}
        for gid in group_ids:
            by_shard.setdefault(self.partition_for(gid), []).append(gid)
        results: dict[str, ErrorCode] = {}
        for ids in by_shard.values():
            try:
                answer, share_state = await self._write(ids[0], lambda shard, ids=ids: _with_extra(shard.delete_groups(ids)))
            except CoordinatorError as exc:
                results.update({gid: exc.code for gid in ids})
                continue
            results.update(dict(answer))
            if share_state:
                await self._delete_share_state(share_state)
        return results

    async def describe_group(self, group_id: str) -> ClassicGroupDescription | None:
        """The classic group (DescribeGroups), or None for one that is absent, Dead or KIP-848;
        raises while its shard cannot answer."""
        return await self._read(group_id, lambda shard: shard.describe_group(group_id))

    async def list_groups(self) -> list[GroupListing]:
        """Every live group of every shard; raises COORDINATOR_LOAD_IN_PROGRESS while one is loading."""
        if any(shard.state == LOADING for shard in self.shards):
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress)
        out = []
        for shard in self.shards:
            if shard.state == ACTIVE:
                out += await shard.read(lambda s: s.list_groups())
        return out

    async def consumer_group_describe(self, group_id: str) -> ConsumerGroupDescription | None:
        """The KIP-848 consumer group as it stands, whatever its state, or None for another kind or none."""
        return await self._read(group_id, lambda shard: shard.describe_consumer_group(group_id))
