"""Share-partition state initialization: the group coordinator's side of KIP-932's contract.

Kafka 4.4 hands a share partition to members only once the share coordinator
has initialized its state (InitializeShareGroupState), and tracks which
partitions are initializing, initialized or being deleted in the group's
``ShareGroupStatePartitionMetadata`` record (type 15).

Here the share coordinator is reached through one optional hook, the
broker's ``share_state`` (see ``docs/share-groups.md``)::

    class ShareStateHook(Protocol):
        async def initialize(self, group_id: str, group_epoch: int,
                             partitions: dict[uuid.UUID, list[int]]) -> None: ...
        async def delete(self, group_id: str,
                         partitions: dict[uuid.UUID, list[int]]) -> None: ...

Both raise on failure. With a hook, a heartbeat that finds subscribed
partitions with no state writes them as *initializing* and returns them; the
service then awaits ``initialize`` and runs ``initialized`` (they become
*initialized*: the next heartbeat bumps the group epoch and assigns them) or,
if it raised, ``uninitialized`` (they are dropped from *initializing* and
asked for again after ``group.share.initialize.retry.interval.ms``). Without
a hook (``GroupShard.share_state_hook`` False) the same heartbeat writes them
as initialized at once. Deleting an empty share group writes its tombstones
and, with a hook, the service awaits ``delete`` for its initialized and
initializing partitions.
"""

from __future__ import annotations

import uuid

from protocol.group_records import ShareGroupStatePartitionMetadataKey

from .share_group import InitMap, ShareGroup, state_value


def _union(a: InitMap, b: InitMap) -> InitMap:
    out = dict(a)
    for tid, (name, parts) in b.items():
        old = out.get(tid)
        out[tid] = (name, parts | old[1]) if old is not None else (name, parts)
    return out


def _minus(a: InitMap, b: dict[uuid.UUID, frozenset[int]]) -> InitMap:
    out = {}
    for tid, (name, parts) in a.items():
        rest = parts - b.get(tid, frozenset())
        if rest:
            out[tid] = (name, rest)
    return out


class ShareInit:
    def __init__(self, shard) -> None:
        self.shard = shard

    def _write(self, group: ShareGroup, initializing: InitMap, initialized: InitMap, deleting: dict) -> None:
        self.shard.emit(ShareGroupStatePartitionMetadataKey(group.group_id), state_value(initializing, initialized, deleting))

    def assignable(self, group: ShareGroup) -> dict[uuid.UUID, frozenset[int]]:
        """The initialized partitions of topics that still exist (what the assignor may hand out)."""
        by_id, by_name = self.shard.metadata.by_id, self.shard.metadata.by_name
        out = {}
        for tid, (_, parts) in (group.initialized or {}).items():
            name = by_id.get(tid)
            if name is None:
                continue
            count = by_name[name][1]
            live = frozenset(p for p in parts if p < count)
            if live:
                out[tid] = live
        return out

    def assignment_pending(self, group: ShareGroup) -> bool:
        """Kafka's initializedAssignmentPending: an initialized partition of a subscribed topic
        that the target assignment does not hold yet."""
        if not group.members or not group.initialized:
            return False
        names = group.subscribed_topic_names()
        if not names:
            return False
        held = group.held_partitions()
        for tid, (name, parts) in group.initialized.items():
            if name in names and (tid not in held or held[tid] != set(parts)):
                return True
        return False

    def maybe_initialize(self, group: ShareGroup) -> tuple | None:
        """Inside a heartbeat: ask for the subscribed partitions that have no state yet."""
        meta = self.shard.metadata
        initializing = dict(group.initializing or {})
        initialized = dict(group.initialized or {})
        deleting = dict(group.deleting or {})
        # topics deleted from the cluster: their entries go (the share coordinator drops their state)
        gone = [tid for tid in (*initializing, *initialized, *deleting) if tid not in meta.by_id]
        for tid in gone:
            initializing.pop(tid, None)
            initialized.pop(tid, None)
            deleting.pop(tid, None)
        now = self.shard.now_ms()
        retry = self.shard.config.group_share_initialize_retry_interval_ms
        in_flight = initializing if now - group.initializing_since_ms < retry else {}
        known = _union(initialized, in_flight)
        wanted: InitMap = {}
        for name in sorted(group.subscribed_topic_names()):
            info = meta.by_name.get(name)
            if info is None:
                continue
            tid, count = info[0], info[1]
            missing = frozenset(range(count)) - known.get(tid, ("", frozenset()))[1]
            if missing:
                wanted[tid] = (name, missing)
        if not wanted:
            if gone:
                self._write(group, initializing, initialized, deleting)
            return None
        for tid in wanted:
            deleting.pop(tid, None)
        if not self.shard.share_state_hook:
            self._write(group, initializing, _union(initialized, wanted), deleting)
            return None
        self._write(group, _union(initializing, wanted), initialized, deleting)
        group.initializing_since_ms = now  # not state: when this shard last asked
        return group.group_id, group.group_epoch, {tid: sorted(parts) for tid, (_, parts) in wanted.items()}

    def initialized(self, group_id: str, partitions: dict[uuid.UUID, list[int]]) -> None:
        """The hook initialized ``partitions``: they move from initializing to initialized."""
        group = self.shard.groups.get(group_id)
        if not isinstance(group, ShareGroup) or group.initializing is None:
            return
        done = {tid: frozenset(parts) for tid, parts in partitions.items()}
        names = {tid: group.initializing[tid][0] for tid in done if tid in group.initializing}
        moved = {tid: (names[tid], parts & group.initializing[tid][1]) for tid, parts in done.items() if tid in names}
        moved = {tid: v for tid, v in moved.items() if v[1]}
        if not moved:
            return
        self._write(group, _minus(group.initializing, done), _union(group.initialized or {}, moved), dict(group.deleting or {}))

    def uninitialized(self, group_id: str, partitions: dict[uuid.UUID, list[int]]) -> None:
        """The hook failed: ``partitions`` leave initializing (asked for again at a later heartbeat)."""
        group = self.shard.groups.get(group_id)
        if not isinstance(group, ShareGroup) or not group.initializing:
            return
        rest = _minus(group.initializing, {tid: frozenset(parts) for tid, parts in partitions.items()})
        if rest != group.initializing:
            self._write(group, rest, dict(group.initialized or {}), dict(group.deleting or {}))

    @staticmethod
    def held_partitions(group: ShareGroup) -> dict[uuid.UUID, list[int]]:
        """The partitions whose state a deleted group leaves behind (for the hook's ``delete``)."""
        both = _union(group.initialized or {}, group.initializing or {})
        return {tid: sorted(parts) for tid, (_, parts) in both.items()}
