"""``RuntimeOwner``: what a coordinator has of the runtime, one ``CoordinatorRuntime`` per partition.

At start the owner loads every partition of its topic, one after the other
(``load_all``). As partition leadership moves (Kafka's scheduleLoadOperation
and scheduleUnloadOperation), ``load(index)`` rebuilds one partition's shard
from its log and ``unload(index)`` drops it, answering its waiters
NOT_COORDINATOR. ``stop`` ends them all.
"""

from __future__ import annotations

import asyncio

from ..logs import get_logger
from .runtime import ACTIVE, LOADING, CoordinatorRuntime

log = get_logger("coordinator-runtime")


class RuntimeOwner:
    """Mixed into a coordinator; ``runtimes[i]`` serves partition ``i`` of its topic."""

    runtimes: list[CoordinatorRuntime]
    _load_task: asyncio.Task | None = None
    load_failure = "coordinator partition failed to load"

    def _start_loading(self, *, freeze: bool = False) -> None:
        """Load every partition in the background (the start-up load)."""
        self._load_task = asyncio.get_running_loop().create_task(self.load_all(freeze=freeze))

    async def wait_loaded(self) -> None:
        """Wait for the start-up load to end."""
        if self._load_task is not None:
            await asyncio.shield(self._load_task)

    async def load_all(self, *, freeze: bool = False) -> None:
        """Load each partition still due (LOADING, no load in progress), one after the other;
        one that fails is FAILED (NOT_COORDINATOR), the others load."""
        for rt in list(self.runtimes):
            if rt.state == LOADING and not rt.loading_now:
                await self._load_one(rt, freeze=freeze)

    async def _load_one(self, rt: CoordinatorRuntime, *, freeze: bool = False) -> None:
        try:
            await rt.load(freeze=freeze)
        except Exception:  # noqa: BLE001 - one bad partition must not stop the others
            log.exception(self.load_failure, topic=rt.topic, partition=rt.index)

    async def load(self, index: int) -> None:
        """Partition ``index`` is ours again: rebuild its shard from the log (nothing if it is
        active; a load in progress is overtaken by this one). Returns once it is loaded, failed
        or unloaded meanwhile."""
        rt = self.runtimes[index]
        if rt.state == ACTIVE:
            return
        await self._load_one(rt)

    def unload(self, index: int) -> None:
        """Partition ``index`` is no longer ours: its waiters get NOT_COORDINATOR, its state goes."""
        self.runtimes[index].unload()

    def _stop_runtimes(self) -> None:
        if self._load_task is not None:
            self._load_task.cancel()
        for rt in self.runtimes:
            rt.close()
