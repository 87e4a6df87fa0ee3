"""The group coordinator as the broker sees it: routing group ids to shards.

``__consumer_offsets`` is created on first start with
``offsets.topic.num.partitions`` partitions (then fixed: the existing count is
used), ``cleanup.policy=compact`` and 100 MiB segments. Each partition's shard
loads in the background after the broker is ready; until it has, requests for
its groups get COORDINATOR_LOAD_IN_PROGRESS (Heartbeat gets NONE).
"""

from __future__ import annotations

import asyncio
import time

from protocol.errors import ErrorCode

from ..logs import get_logger
from .common import CoordinatorError, GroupConfig
from .events import EventLog, EventPublisher
from .placement import partition_for
from .runtime import LoopWatch, ShardRuntime

OFFSETS_TOPIC = "__consumer_offsets"

log = get_logger("coordinator")


class GroupCoordinator:
    def __init__(self, cluster, config: GroupConfig, *, fsync_always: bool) -> None:
        self.cluster = cluster
        self.config = config
        self.fsync_always = fsync_always
        self.shards: list[ShardRuntime] = []
        self._load_task: asyncio.Task | None = None
        self.loaded = asyncio.Event()
        self.watch: LoopWatch | None = None

    @property
    def num_partitions(self) -> int:
        return len(self.shards)

    def start(self) -> None:
        topic = self.cluster.topics.get(OFFSETS_TOPIC)
        if topic is None:
            topic = self.cluster.create_topic(
                OFFSETS_TOPIC,
                self.config.offsets_topic_num_partitions,
                {"cleanup.policy": "compact", "segment.bytes": str(self.config.offsets_topic_segment_bytes)},
            )
        publisher = EventPublisher(self.cluster)
        events_log = EventLog(log, publisher)
        self.watch = LoopWatch(asyncio.get_running_loop())
        self.watch.start()
        self.shards = [
            ShardRuntime(p.index, p, self.config, fsync_always=self.fsync_always, log=events_log, metadata=self.cluster.metadata, watch=self.watch)
            for p in topic.partitions
        ]
        self._load_task = asyncio.get_running_loop().create_task(self._load_all())

    async def _load_all(self) -> None:
        t0 = time.perf_counter()
        for shard in self.shards:
            try:
                await shard.load()
            except Exception:  # noqa: BLE001 - one bad shard must not stop the others
                shard.state = "failed"
                log.exception("shard failed to load", shard=shard.index)
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
        if self._load_task is not None:
            self._load_task.cancel()
        if self.watch is not None:
            self.watch.stop()
        for shard in self.shards:
            shard.close()
            shard.shard.reset()  # resolves parked requests: their handlers answer NOT_COORDINATOR
