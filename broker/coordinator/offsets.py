"""Committed offsets: OffsetCommit validation, OffsetFetch, OffsetDelete, expiry.

Offsets change only through OffsetCommit records: the write path replays them
into ``latest`` at once (so later writes see them), and into ``committed``
when the batch holding them is durable. Reads without ``require_stable`` use
``committed``, so they never see a write that could still be lost.

Transactional offset commits (TxnOffsetCommit) are OffsetCommit records in a
transactional batch of the producer: they wait in ``pending`` until the
producer's transaction ends with a COMMIT marker (then they become the group's
offsets, unless a plain commit of the same partition came after them: the
most recent commit wins, as Kafka's record offsets decide) or an ABORT marker
(then they vanish). A tombstone removes the pending offsets of its partition
too, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.group_records import OffsetCommitKey, OffsetCommitValue

from .classic_group import COMPLETING_REBALANCE, DEAD, EMPTY, STABLE, ClassicGroup

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


def java_length(s: str) -> int:
    """String.length() in Java: UTF-16 code units."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le")) // 2


class OffsetStore:
    __slots__ = ("latest", "committed", "pending", "open_by_group", "stale")

    def __init__(self) -> None:
        self.latest: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
        self.committed: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
        # transactional offsets of open transactions: producer id -> group -> partition -> value
        self.pending: dict[int, dict[str, dict[TopicPartition, OffsetCommitValue]]] = {}
        self.open_by_group: dict[str, set[int]] = {}  # group -> producers with pending offsets in it
        # (producer, group, partition) whose pending offset a later plain commit outdates
        self.stale: set[tuple[int, str, TopicPartition]] = set()

    @staticmethod
    def _apply(view: dict, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        if value is None:
            offsets = view.get(key.group)
            if offsets is not None:
                offsets.pop((key.topic, key.partition), None)
                if not offsets:
                    del view[key.group]
        else:
            view.setdefault(key.group, {})[(key.topic, key.partition)] = value

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        self._apply(self.latest, key, value)
        if self.open_by_group and key.group in self.open_by_group:
            self.outdate(key.group, ((key.topic, key.partition),), value is None)

    def outdate(self, group: str, partitions, removed: bool) -> None:
        """Plain records of ``partitions`` of ``group`` were replayed while transactions hold
        pending offsets there: a tombstone drops those pending offsets, a value outdates them."""
        for pid in self.open_by_group[group]:
            mine = self.pending[pid].get(group)
            if not mine:
                continue
            for tp in partitions:
                if tp in mine:
                    if removed:
                        del mine[tp]
                        self.stale.discard((pid, group, tp))
                    else:
                        self.stale.add((pid, group, tp))

    def replay_txn(self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """An offset record of ``producer_id``'s open transaction."""
        tp = (key.topic, key.partition)
        if value is None:  # Kafka writes none; a tombstone would act as a plain one
            self.replay(key, None)
            return
        self.pending.setdefault(producer_id, {}).setdefault(key.group, {})[tp] = value
        self.open_by_group.setdefault(key.group, set()).add(producer_id)
        self.stale.discard((producer_id, key.group, tp))

    def end_txn(self, producer_id: int, commit: bool) -> list[tuple[OffsetCommitKey, OffsetCommitValue]]:
        """The producer's transaction ended (its marker replayed): on commit its pending offsets that
        no later plain commit outdated become the groups' offsets. Returns those records."""
        mine = self.pending.pop(producer_id, None)
        if mine is None:
            return []
        applied = []
        stale = self.stale
        for group, offsets in mine.items():
            producers = self.open_by_group.get(group)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self.open_by_group[group]
            for tp, value in offsets.items():
                if (producer_id, group, tp) in stale:
                    stale.discard((producer_id, group, tp))
                elif commit:
                    key = OffsetCommitKey(group, tp[0], tp[1])
                    self._apply(self.latest, key, value)
                    applied.append((key, value))
        return applied

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        producers = self.open_by_group.get(group)
        if not producers:
            return False
        tp = (topic, partition)
        pending = self.pending
        return any(tp in pending[pid].get(group, _EMPTY) for pid in producers)

    def save_txn(self) -> tuple:
        """A copy of the transactional offsets' state (an operation's journal: ``restore_txn``)."""
        return (
            {pid: {g: dict(tps) for g, tps in groups.items()} for pid, groups in self.pending.items()},
            {g: set(pids) for g, pids in self.open_by_group.items()},
            set(self.stale),
        )

    def restore_txn(self, saved: tuple) -> None:
        self.pending, self.open_by_group, self.stale = saved

    def pending_partitions(self, group: str) -> list[TopicPartition]:
        """The partitions of ``group`` with a pending transactional offset."""
        out: dict = {}
        for pid in self.open_by_group.get(group, ()):
            out.update(dict.fromkeys(self.pending[pid].get(group, _EMPTY)))
        return list(out)

    def pending_of(self, producer_id: int) -> dict[str, dict[TopicPartition, OffsetCommitValue]] | None:
        return self.pending.get(producer_id)

    def commit(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        self._apply(self.committed, key, value)

    def sync_committed(self) -> None:
        """After a load: what was replayed is what is durable."""
        self.committed = {g: dict(offsets) for g, offsets in self.latest.items()}

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.latest.get(group_id))

    def count(self) -> int:
        return sum(len(v) for v in self.latest.values())


_EMPTY: dict = {}
# OffsetFetch with require_stable: a partition with a transactional offset still pending
UNSTABLE = object()


def offset_record(group_id: str, topic: str, partition: int, value: OffsetCommitValue | None) -> tuple[OffsetCommitKey, OffsetCommitValue | None]:
    return OffsetCommitKey(group_id, topic, partition), value


def validate_commit(classic, group: ClassicGroup | None, *, version: int, generation: int, member_id: str, instance_id: str | None,
                    transactional: bool = False) -> ErrorCode | None:
    """Kafka's OffsetCommit (and TxnOffsetCommit) validation matrix for classic groups (None = accept)."""
    if group is None:
        if generation < 0:
            return None  # a "simple" group is created by the caller
        if transactional:
            return ErrorCode.illegal_generation
        return ErrorCode.group_id_not_found if version >= 9 else ErrorCode.illegal_generation
    if group.state == DEAD:
        return ErrorCode.coordinator_not_available
    if generation < 0 and group.state == EMPTY:
        return None  # admin client or standalone consumer, whatever member id it sends
    if generation >= 0 or member_id or instance_id is not None:
        error = classic.validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation != group.generation:
            return ErrorCode.illegal_generation
    elif not transactional:  # old TxnOffsetCommit versions send no member id and generation
        return ErrorCode.unknown_member_id  # no member id, generation < 0, group not Empty
    if group.state == COMPLETING_REBALANCE and not transactional:
        return ErrorCode.rebalance_in_progress
    return None


def validate_consumer_commit(group, *, version: int, epoch: int, member_id: str, transactional: bool = False,
                             partitions: list[CommitPartition] = (), metadata_limit: int = 0, topic_id=None) -> ErrorCode | None:
    """OffsetCommit (and TxnOffsetCommit) against a KIP-848 group (section 3.10 of the reference), with
    Kafka 4.3+'s assignment epochs (KIP-1251): a commit at an older epoch than the member's is
    accepted if the member still holds every partition of ``partitions`` and was assigned each at
    that epoch or before. Partitions whose metadata exceeds ``metadata_limit`` are not looked at
    (they are answered OFFSET_METADATA_TOO_LARGE first, as Kafka does). ``topic_id(name)`` gives a
    topic's id (None if the topic is unknown)."""
    if epoch < 0 and not group.members:
        return None  # admin or standalone commit
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if member.classic is None and version < 9 and not transactional:
        return ErrorCode.unsupported_version
    if epoch == member.member_epoch:
        return None
    stale = ErrorCode.illegal_generation if member.classic is not None or transactional else ErrorCode.stale_member_epoch
    if epoch > member.member_epoch:
        return stale  # (TxnOffsetCommit: Kafka turns a stale member epoch into ILLEGAL_GENERATION)
    held = member.assignment_epochs
    for p in partitions:
        if java_length(p.metadata or "") > metadata_limit:
            continue
        assigned_at = held.get((topic_id(p.topic), p.partition))
        if assigned_at is None or epoch < assigned_at:
            return stale
    return None


def validate_consumer_fetch(group, *, member_id: str | None, epoch: int) -> ErrorCode | None:
    """OffsetFetch v9+ with a member id and epoch, against a KIP-848 group."""
    if member_id is None and epoch < 0:
        return None
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    if epoch != member.member_epoch:
        return ErrorCode.illegal_generation if member.classic is not None else ErrorCode.stale_member_epoch
    return None


def expired_consumer_offsets(group, offsets: dict[TopicPartition, OffsetCommitValue], now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """KIP-848 groups: each offset ages from its commit, and only for unsubscribed topics."""
    subscribed = group.subscribed_topic_names()
    out = []
    for tp, value in offsets.items():
        if tp[0] in subscribed:
            continue
        if value.expire_timestamp >= 0:
            if now_ms >= value.expire_timestamp:
                out.append(tp)
        elif now_ms - value.commit_timestamp >= retention_ms:
            out.append(tp)
    return out


def expired_offsets(group: ClassicGroup | None, offsets: dict[TopicPartition, OffsetCommitValue], now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """KIP-211 / KIP-496 expiry for one classic group's offsets."""
    if group is None:
        return []
    if group.protocol_type:
        if group.state == EMPTY:
            base_of = (lambda v: group.state_timestamp if group.state_timestamp >= 0 else v.commit_timestamp)  # noqa: E731
        elif group.state == STABLE and group.protocol_type == "consumer" and group.subscribed is not None:
            base_of = (lambda v: v.commit_timestamp)  # noqa: E731
        else:
            return []
    else:
        base_of = (lambda v: v.commit_timestamp)  # noqa: E731
    out = []
    for tp, value in offsets.items():
        if group.is_subscribed(tp[0]):
            continue
        if value.expire_timestamp >= 0:
            if now_ms >= value.expire_timestamp:
                out.append(tp)
        elif now_ms - base_of(value) >= retention_ms:
            out.append(tp)
    return out
