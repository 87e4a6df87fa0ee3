"""One coordinator shard: the groups and offsets of one ``__consumer_offsets`` partition.

State changes either come from replaying records (offsets, group deletion, and
everything at load) or, for the in-memory parts of classic groups, from the
classic-protocol code directly, as in Kafka. ``replay`` is the single path
that turns a record into state, for live writes and start-up loading alike.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.errors import ErrorCode
from protocol.group_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordType,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

from .classic import ClassicGroups
from .consumer import ConsumerGroups
from .consumer_group import ConsumerGroup
from .consumer_replay import CONSUMER_KEYS, replay_consumer
from .migration import Migration
from .classic_group import DEAD, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup
from .common import GroupConfig, Result, Timers
from .offsets import (
    CommitPartition,
    OffsetStore,
    expired_consumer_offsets,
    expired_offsets,
    java_length,
    offset_record,
    validate_commit,
    validate_consumer_commit,
    validate_consumer_fetch,
)

RETENTION_TIMER = "offsets-retention"


class _EmptyMetadata:
    """No topics (unit tests that do not care about KIP-848)."""

    version = 0
    by_name: dict = {}
    by_id: dict = {}

    def match(self, regex: str) -> list[str]:
        return []


class GroupShard:
    def __init__(
        self,
        index: int,
        config: GroupConfig,
        clock_ms: Callable[[], int],
        log,
        new_future: Callable,
        submit: Callable[[Result], object] | None = None,
        metadata=None,
        lost_ms: Callable[[], int] | None = None,
    ) -> None:
        self.index = index
        self.config = config
        self.now_ms = clock_ms
        self.log = log
        self.new_future = new_future
        self.submit = submit or (lambda result: None)
        self.lost_ms = lost_ms
        self.timers = Timers(clock_ms, lost_ms)
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        self.classic = ClassicGroups(self)
        self.metadata = metadata if metadata is not None else _EmptyMetadata()
        self.consumer = ConsumerGroups(self)
        self.migration = Migration(self)
        self.skipped_records = 0

    # ================================================================ replay
    def replay(self, key, value, *, committed: bool = False) -> None:
        """Apply one decoded record. ``committed`` also updates the read view."""
        if isinstance(key, OffsetCommitKey):
            self.offsets.replay(key, value)
            if committed:
                self.offsets.commit(key, value)
            if value is not None and key.group not in self.groups:
                self.groups[key.group] = ClassicGroup(key.group)  # a "simple" group
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                group = self.groups.pop(key.group, None)
                if group is not None:
                    group.state = DEAD
            else:
                self.groups[key.group] = ClassicGroup.from_record(key.group, value)
        elif isinstance(key, CONSUMER_KEYS):
            replay_consumer(self.groups, key, value)

    def replay_bytes(self, key_bytes: bytes, value_bytes: bytes | None, *, committed: bool = False) -> None:
        key = decode_key(key_bytes)
        if isinstance(key, UnknownRecordType):
            self.skipped_records += 1
            return
        self.replay(key, decode_value(key, value_bytes), committed=committed)

    def commit_bytes(self, key_bytes: bytes, value_bytes: bytes | None) -> None:
        """The batch holding this replayed record is durable: show it to reads."""
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            self.offsets.commit(key, decode_value(key, value_bytes))

    def commit_decoded(self, key, value) -> None:
        if isinstance(key, OffsetCommitKey):
            self.offsets.commit(key, value)

    def on_loaded(self) -> list:
        self.offsets.sync_committed()
        out: list = []
        for group in list(self.groups.values()):
            if isinstance(group, ConsumerGroup):
                self.consumer.on_loaded(group)
            else:
                out += self.classic.on_loaded(group)
        self.timers.schedule(RETENTION_TIMER, self.config.offsets_retention_check_interval_ms, self._retention_tick)
        return out

    def reset(self) -> None:
        """Forget everything (before reloading from the log after a failed append)."""
        for group in self.groups.values():
            if not isinstance(group, ClassicGroup):
                continue  # KIP-848 members park nothing
            for m in group.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.set_result(None)
        self.groups.clear()
        self.offsets = OffsetStore()
        self.timers = Timers(self.now_ms, self.lost_ms)
        self.classic = ClassicGroups(self)

    # ================================================================ timers
    def fire_timers(self) -> list:
        """Run due timers; returns the records they produced."""
        records: list = []
        for out in self.timers.fire_due():
            for item in out or []:
                if isinstance(item, Result):
                    self.submit(item)
                else:
                    records.append(item)
        return records

    # ================================================================ offsets
    def offset_commit(self, group_id: str, member_id: str, generation: int, instance_id: str | None, version: int,
                      retention_ms: int, partitions: list[CommitPartition]) -> Result:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            error = validate_consumer_commit(group, version=version, epoch=generation, member_id=member_id)
        else:
            error = validate_commit(self.classic, group, version=version, generation=generation, member_id=member_id, instance_id=instance_id)
        if error is not None:
            return Result(response=[(p.topic, p.partition, error) for p in partitions])
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, state_timestamp=self.now_ms())
        elif isinstance(group, ClassicGroup):
            self.classic.touch(group, member_id)
        now = self.now_ms()
        expire = now + retention_ms if 2 <= version <= 4 and retention_ms != -1 else -1
        records = []
        decoded = []
        answer = []
        limit = self.config.offset_metadata_max_bytes
        for p in partitions:
            metadata = p.metadata or ""
            if java_length(metadata) > limit:
                answer.append((p.topic, p.partition, ErrorCode.offset_metadata_too_large))
                continue
            key = OffsetCommitKey(group_id, p.topic, p.partition)
            value = OffsetCommitValue(offset=p.offset, leader_epoch=p.leader_epoch, metadata=metadata, commit_timestamp=now, expire_timestamp=expire)
            records.append((encode_key(key), encode_value(value)))
            decoded.append((key, value))
            answer.append((p.topic, p.partition, ErrorCode.none))
        return Result(records=records, response=answer, replay=True, decoded=decoded)

    def validate_fetch(self, group_id: str, member_id: str | None, epoch: int) -> ErrorCode | None:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return validate_consumer_fetch(group, member_id=member_id, epoch=epoch)
        return None

    def offset_fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None, *, stable: bool) -> list[tuple[str, int, OffsetCommitValue | None]]:
        view = (self.offsets.latest if stable else self.offsets.committed).get(group_id, {})
        if topics is None:
            return sorted(((t, p, v) for (t, p), v in view.items()), key=lambda x: (x[0], x[1]))
        return [(t, p, view.get((t, p))) for t, parts in topics for p in parts]

    def offset_delete(self, group_id: str, topics: list[tuple[str, list[int]]]) -> Result:
        group = self.groups.get(group_id)
        if group is None or group.state == DEAD:
            return Result(response=(ErrorCode.group_id_not_found, []))
        if group.state != EMPTY and group.protocol_type != "consumer":
            return Result(response=(ErrorCode.non_empty_group, []))
        offsets = self.offsets.latest.get(group_id, {})
        records, answer = [], []
        for topic, parts in topics:
            for p in parts:
                if group.is_subscribed(topic):
                    answer.append((topic, p, ErrorCode.group_subscribed_to_topic))
                    continue
                if (topic, p) in offsets:
                    records.append(offset_record(group_id, topic, p, None))
                answer.append((topic, p, ErrorCode.none))
        return Result(records=records, response=(ErrorCode.none, answer), replay=True)

    # ================================================================ groups
    def describe_group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return None if group is None or group.state == DEAD else group

    def delete_groups(self, group_ids: list[str]) -> Result:
        records, answer = [], []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None or group.state == DEAD:
                answer.append((gid, ErrorCode.group_id_not_found))
                continue
            if group.state != EMPTY:
                answer.append((gid, ErrorCode.non_empty_group))
                continue
            for topic, partition in list(self.offsets.latest.get(gid, {})):
                records.append(offset_record(gid, topic, partition, None))
            records += self._group_tombstones(group)
            answer.append((gid, ErrorCode.none))
            self.log.info("group deleted", group=gid)
        return Result(records=records, response=answer, replay=True)

    def _group_tombstones(self, group) -> list:
        if isinstance(group, ConsumerGroup):
            self.consumer.records = []
            self.consumer.delete_group_records(group)
            return self.consumer._take_records()
        return [group.tombstone()]

    def _retention_tick(self) -> list:
        self.timers.schedule(RETENTION_TIMER, self.config.offsets_retention_check_interval_ms, self._retention_tick)
        return self.expire_offsets()

    def expire_offsets(self) -> list:
        """Tombstones for expired offsets, and for groups left with nothing."""
        now = self.now_ms()
        records = []
        removed_groups = []
        for gid, group in list(self.groups.items()):
            offsets = self.offsets.latest.get(gid, {})
            if isinstance(group, ConsumerGroup):
                expired = expired_consumer_offsets(group, offsets, now, self.config.offsets_retention_ms)
            else:
                expired = expired_offsets(group, offsets, now, self.config.offsets_retention_ms)
            for topic, partition in expired:
                records.append(offset_record(gid, topic, partition, None))
            if expired:
                self.log.info("offsets expired", group=gid, partitions=len(expired))
            if group.state == EMPTY and len(expired) == len(offsets):
                records += self._group_tombstones(group)
                removed_groups.append(gid)
        if removed_groups:
            self.log.info("groups expired", groups=removed_groups)
        if records:
            self.submit(Result(records=records, replay=True))
        return []

    def list_groups(self) -> list[ClassicGroup]:
        return [g for g in self.groups.values() if g.state != DEAD]


__all__ = ["GroupShard", "PREPARING_REBALANCE", "STABLE"]
