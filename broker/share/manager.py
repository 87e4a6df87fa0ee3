"""The broker's share partitions and share sessions (Kafka's ``SharePartitionManager``).

A share partition (broker/share/partition.py) is made the first time a share
consumer fetches it for its group, from the state the share coordinator holds
(ReadShareGroupState). The group coordinator initializes that state when it
first assigns the partition to a member (``ShareStateHook.initialize``, start
offset -1); until then, as in Kafka 4.4, nothing is delivered from it
(``NotInitialized``). A start offset of -1 is taken from the group config
``share.auto.offset.reset``: ``latest`` (the default) the log end offset,
``earliest`` the log start offset, ``by_duration:<ISO-8601 duration>`` the
first record no older than that. Its changes are
written through the share coordinator (WriteShareGroupState) before they
take effect.

Acquisition locks are keys of one ``Timers`` on the injected clock, fired by
one loop timer armed for the earliest deadline (as the group coordinator's
shard runtime arms its own); tests drive them with a manual clock and
``fire_timers``. Releasing records wakes fetches waiting on the partition.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from protocol.errors import ErrorCode

from ..coordinator.common import Timers
from ..coordinator_runtime.constants import now_ms
from ..dynamic_config import by_duration_ms
from ..logs import get_logger
from .coordinator import ShareCoordinator
from .partition import Limits, SharePartition
from .sessions import ShareSessionCache
from .state import ShareConfig, ShareStateError, WriteData

log = get_logger("share-partitions")

# the share group configs (AlterConfigs on a GROUP resource) read at each use
_LOCK_MS, _DELIVERY_LIMIT, _MAX_LOCKS, _RESET = (
    "share.record.lock.duration.ms", "share.delivery.count.limit", "share.partition.max.record.locks", "share.auto.offset.reset")


class NotInitialized(Exception):
    """The group coordinator has not initialized this share partition's state (the group has no member
    assigned it yet): Kafka 4.4 delivers nothing from it, and refuses acknowledgements."""


class SharePartitionManager:
    def __init__(self, cluster, coordinator: ShareCoordinator, config: ShareConfig, *, clock_ms: Callable[[], int] = now_ms,
                 group_overrides: dict | None = None) -> None:
        self.cluster = cluster
        self.coordinator = coordinator
        self.config = config
        self.clock_ms = clock_ms
        self.group_overrides = group_overrides if group_overrides is not None else {}
        self.timers = Timers(clock_ms)
        self.timers.on_change = self._arm
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        self.state_epochs: dict[tuple[str, uuid.UUID, int], int] = {}
        self.sessions = ShareSessionCache(config.max_share_sessions)
        self._handle: asyncio.TimerHandle | None = None
        self._deadline = 0

    # ================================================================ settings
    def _group_value(self, group_id: str, name: str, default):
        value = self.group_overrides.get(group_id, {}).get(name) if self.group_overrides else None
        if value is None:
            return default
        try:
            return type(default)(value)
        except (TypeError, ValueError):
            return default

    def limits(self, group_id: str) -> Limits:
        c = self.config
        renew = str(self._group_value(group_id, "share.renew.acknowledge.enable", "true")).strip().lower() != "false"
        return Limits(self._group_value(group_id, _LOCK_MS, c.record_lock_duration_ms),
                      self._group_value(group_id, _DELIVERY_LIMIT, c.delivery_count_limit),
                      self._group_value(group_id, _MAX_LOCKS, c.partition_max_record_locks), renew)

    def lock_duration_ms(self, group_id: str) -> int:
        return self.limits(group_id).lock_duration_ms

    # ================================================================ share partitions
    def get(self, group_id: str, topic_id: uuid.UUID, partition: int, part) -> SharePartition:
        """The share partition, made (and its state read, or initialized) on first use.
        Raises ShareStateError when the share coordinator cannot answer."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is not None:
            return sp
        co = self.coordinator
        co.ensure_started()
        if co.peek(group_id, topic_id, partition) is None:
            raise NotInitialized(group_id, topic_id, partition)
        state = co.read(group_id, topic_id, partition, 0)
        start = state.start_offset
        if start < 0:
            start = self._reset_offset(group_id, part.log)
        sp = SharePartition(f"{group_id}/{topic_id}/{partition}", lambda: self.limits(group_id), self.timers,
                            self._persister(key, part))
        sp.load(max(start, part.log.log_start_offset), state.state_batches)
        self.partitions[key] = sp
        self.state_epochs[key] = state.state_epoch
        return sp

    def _reset_offset(self, group_id: str, plog) -> int:
        """Where a share partition with no start offset begins: ``share.auto.offset.reset`` earliest, latest
        (the default), or ``by_duration:<ISO-8601>`` (the first record at most that old, else the end)."""
        reset = str(self._group_value(group_id, _RESET, "latest")).strip()
        if reset.lower() == "earliest":
            return plog.log_start_offset
        duration = by_duration_ms(reset)
        if duration is not None:
            found = plog.offset_for_timestamp(self.clock_ms() - duration)
            return found[0] if found is not None else plog.log_end_offset
        return plog.log_end_offset

    def _persister(self, key, part):
        group_id, topic_id, partition = key

        def persist(start: int, batches, delivery_complete_count: int) -> None:
            self.coordinator.write(group_id, topic_id, WriteData(partition, self.state_epochs.get(key, 0), 0, start, batches,
                                                                 delivery_complete_count))
            part.notify()  # released records: fetches waiting on the partition look again

        return persist

    def forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """The share state was deleted (the group, or its offsets): drop the in-memory share partition."""
        sp = self.partitions.pop((group_id, topic_id, partition), None)
        self.state_epochs.pop((group_id, topic_id, partition), None)
        if sp is not None:
            for lock in list(sp.locks):
                self.timers.cancel(sp._lock_key(lock))

    def topic_deleted(self, topic_id: uuid.UUID) -> None:
        for group_id, tid, partition in [k for k in self.partitions if k[1] == topic_id]:
            self.forget(group_id, tid, partition)

    # ================================================================ sessions
    def release_session(self, session) -> None:
        """A share session ended (closed, replaced, its connection gone): its member's records go back."""
        for topic_id, partition in session.partitions:
            sp = self.partitions.get((session.group_id, topic_id, partition))
            if sp is not None:
                sp.release_member(session.member_id)

    def connection_closed(self, conn) -> None:
        if self.sessions.by_conn:
            for session in self.sessions.remove_connection(conn):
                self.release_session(session)

    # ================================================================ timers
    def _arm(self, deadline: int | None) -> None:
        if deadline is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # unit tests fire the timers themselves
            return
        if self._handle is not None:
            if self._deadline <= deadline:
                return
            self._handle.cancel()
        self._deadline = deadline
        self._handle = loop.call_later(max(deadline - self.clock_ms(), 0) / 1000, self._on_timer)

    def _on_timer(self) -> None:
        self._handle = None
        self.fire_timers()
        self._arm(self.timers.next_deadline())

    def fire_timers(self) -> None:
        try:
            self.timers.fire_due()
        except Exception:  # noqa: BLE001 - a lock expiry that fails must not stop the others
            log.exception("share partition lock expiry failed")

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def state_error(exc: ShareStateError) -> ErrorCode:
    """The partition error a ShareFetch gives when the share state cannot be read or written."""
    return exc.code if exc.code in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
                                    ErrorCode.unknown_topic_or_partition) else ErrorCode.unknown_server_error
