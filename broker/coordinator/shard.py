"""One coordinator shard: the groups and offsets of one ``__consumer_offsets`` partition.

Every operation runs through ``GroupShard.run``, which hands the runtime one
``Result``: the typed records the operation wrote, its response and its group
events. Records reach state through ``replay``, the single path that turns a
record into state for live writes and start-up loading alike; a live write
applies its records as it emits them (``emit``), so the rest of the same
operation sees them, and journals what each one replaced. An operation that
raises is rolled back from that journal: its records are un-applied in
reverse, the groups it added, replaced or removed and the timers it armed or
cancelled are put back, and nothing of it is written (a timer that fired stays
consumed). Kafka gets the same from its timeline data structures.

The in-memory side of classic groups (members awaiting a join, parked
responses) is not made of records, in Kafka as here: classic operations
change it directly, validating before they change anything, and write
GroupMetadata records only to persist what must survive a restart.
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

from . import described
from .classic import ClassicGroups
from .consumer import ConsumerGroups
from .consumer_group import ConsumerGroup
from .consumer_replay import CONSUMER_KEYS, consumer_undo, replay_consumer
from .loader import ShardLoader
from .migration import Migration
from .classic_group import DEAD, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup
from .common import TIMER, GroupConfig, GroupEvent, Result, Timers, merge_results
from .offsets import (
    UNSTABLE,
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

# The share-group code (share.py, share_group.py, share_init.py and the share records' codecs) is
# imported by the first share-group request or share record (_share_group_module): until then no
# group is a ShareGroup and no key a share key, and these empty tuples stand for their classes.
_ShareGroup: type | tuple = ()
_SHARE_KEYS: tuple = ()
_share_group = None


def _share_group_module():
    """broker.coordinator.share_group, imported on first use (and the stand-ins above replaced)."""
    global _share_group, _ShareGroup, _SHARE_KEYS
    if _share_group is None:
        from . import share_group

        _share_group, _ShareGroup, _SHARE_KEYS = share_group, share_group.ShareGroup, share_group.SHARE_KEYS
    return _share_group

_MISSING = object()
_NO_OFFSETS: dict = {}
# journal entries: a record's prior value, a groups entry, a classic group's state, the transactional offsets
_RECORD, _GROUP, _STATE, _TXN, _UNDO = 0, 1, 2, 4, 5  # (3 is common.TIMER)


class _Groups(dict):
    """The shard's groups by id. While an operation runs, every entry it adds,
    replaces or removes is journaled, so a failed operation can put it back."""

    __slots__ = ("journal",)

    def __init__(self) -> None:
        super().__init__()
        self.journal: list | None = None

    def __setitem__(self, key, value) -> None:
        if self.journal is not None:
            self.journal.append((_GROUP, key, dict.get(self, key, _MISSING)))
        dict.__setitem__(self, key, value)

    def __delitem__(self, key) -> None:
        if self.journal is not None:
            self.journal.append((_GROUP, key, dict.get(self, key, _MISSING)))
        dict.__delitem__(self, key)

    def pop(self, key, *default):
        if self.journal is not None and key in self:
            self.journal.append((_GROUP, key, dict.__getitem__(self, key)))
        return dict.pop(self, key, *default)


class _Operation:
    __slots__ = ("records", "events", "journal", "txn_saved")

    def __init__(self) -> None:
        self.records: list = []
        self.events: list[GroupEvent] = []
        self.journal: list = []
        self.txn_saved = False  # the transactional offsets are journaled (once an operation touches them)


class _EmptyMetadata:
    """No topics (unit tests that do not care about KIP-848)."""

    version = 0
    by_name: dict = {}
    by_id: dict = {}

    def match(self, regex: str) -> list[str]:
        return []


# how soon an expiry deferred for a request still waiting to be handled is checked again
EXPIRY_RECHECK_MS = 50


def _nobody_waiting(group_id: str, member_id: str) -> bool:
    return False


def _no_stall() -> int:
    return 0


class GroupShard:
    def __init__(
        self,
        index: int,
        config: GroupConfig,
        clock_ms: Callable[[], int],
        log,
        new_future: Callable,
        submit: Callable[[Callable], object] | None = None,
        metadata=None,
        lost_ms: Callable[[], int] | None = None,
        waiting: Callable[[str, str], bool] | None = None,
        silent_ms: Callable[[str, str], int | None] | None = None,
        recent_stall_ms: Callable[[], int] | None = None,
    ) -> None:
        self.index = index
        self.config = config
        self.now_ms = clock_ms
        self.log = log
        self.new_future = new_future
        # runs a follow-up operation outside the current one (a failed append's clean-up)
        self.submit = submit or (lambda op: None)
        self.lost_ms = lost_ms
        # the event loop's longest recent stall while it keeps stalling (LoopWatch.sustained_stall_ms), in ms
        self.recent_stall_ms = recent_stall_ms or _no_stall
        # whether a request of (group id, member id) has arrived and waits to be handled (arrivals.py)
        self.waiting = waiting or _nobody_waiting
        self.silent_ms = silent_ms  # ms since a request of (group id, member id) dropped unhandled was read, or None
        self.timers = Timers(clock_ms, lost_ms)
        self.groups: dict[str, ClassicGroup] = _Groups()
        self._op: _Operation | None = None
        self.settled_events: list[GroupEvent] = []  # events of commit callbacks, for the runtime to publish
        self.offsets = OffsetStore()
        self.classic = ClassicGroups(self)
        self.metadata = metadata if metadata is not None else _EmptyMetadata()
        self.consumer = ConsumerGroups(self)
        self.migration = Migration(self)
        self._share = None  # the share groups' part (share.py), made on first use: see share
        # the broker has a share-state hook (share_init.py): partitions wait for its initialization
        self.share_state_hook = False
        self.skipped_records = 0

    # ================================================================ replay
    def replay(self, key, value, *, committed: bool = False, producer_id: int = -1) -> None:
        """Apply one decoded record. ``committed`` also updates the read view; ``producer_id``
        is that of a transactional batch (its offsets wait for the transaction's marker)."""
        if isinstance(key, OffsetCommitKey):
            if producer_id >= 0:
                self.offsets.replay_txn(producer_id, key, value)
            else:
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
        else:
            share_group = _share_group_module()  # a share-group record: the first one imports the share-group code
            if isinstance(key, share_group.SHARE_KEYS):
                share_group.replay_share(self.groups, key, value)

    @property
    def share(self):
        """The share groups' part (share.py), made, and the share-group code imported, on first use."""
        if self._share is None:
            _share_group_module()
            from .share import ShareGroups

            self._share = ShareGroups(self)
        return self._share

    def replay_marker(self, producer_id: int, commit: bool) -> list:
        """Apply a COMMIT or ABORT marker of ``producer_id``: the offset records its transaction made
        the groups' offsets (none on abort), for the read view once the marker is durable."""
        return self.offsets.end_txn(producer_id, commit)

    def replay_bytes(self, key_bytes: bytes, value_bytes: bytes | None, *, committed: bool = False, producer_id: int = -1) -> None:
        """Replay one record as the log holds it (loading)."""
        key = decode_key(key_bytes)
        if isinstance(key, UnknownRecordType):
            self.skipped_records += 1
            return
        self.replay(key, decode_value(key, value_bytes), committed=committed, producer_id=producer_id)

    def commit_record(self, key, value) -> None:
        """The batch holding this replayed record is durable: show it to reads."""
        if isinstance(key, OffsetCommitKey):
            self.offsets.commit(key, value)

    # ================================================================ operations
    def run(self, op: Callable[[GroupShard], object]) -> Result:
        """Run one operation: its Result, or its exception after rolling it back."""
        if self._op is not None:
            raise RuntimeError("coordinator operations do not nest")
        current = self._op = _Operation()
        timers = self.timers
        self.groups.journal = timers.journal = current.journal
        try:
            result = op(self)
            if type(result) is not Result:
                result = merge_results(result)
        except BaseException:
            self.groups.journal = timers.journal = None
            self._rollback(current.journal)
            raise
        finally:
            self._op = None
            self.groups.journal = timers.journal = None
        if current.records:
            result.records = current.records + result.records if result.records else current.records
        if current.events:
            result.events = current.events + result.events if result.events else current.events
        return result

    def emit(self, key, value, *, apply: bool = True) -> None:
        """Write a record as part of the running operation. ``apply`` replays it into
        state at once (journaled); classic groups' own records persist state that
        their code has already changed, so they are not applied."""
        op = self._op
        if op is None:
            raise RuntimeError("records are written only by an operation (GroupShard.run)")
        if apply:
            if type(key) is OffsetCommitKey:  # the hot path (OffsetCommit): _prior and replay, inlined
                offsets = self.offsets
                if offsets.open_by_group and not op.txn_saved:
                    self._save_txn(op)
                op.journal.append((_RECORD, key, offsets.latest.get(key.group, _NO_OFFSETS).get((key.topic, key.partition))))
                offsets.replay(key, value)
                if value is not None and key.group not in self.groups:
                    self.groups[key.group] = ClassicGroup(key.group)  # a "simple" group
            else:
                op.journal.append(self._prior(key))
                self.replay(key, value)
        op.records.append((key, value))

    def _save_txn(self, op: _Operation) -> None:
        """Journal the transactional offsets once per operation that may change them."""
        op.txn_saved = True
        op.journal.append((_TXN, self.offsets.save_txn(), None))

    def emit_txn(self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue) -> None:
        """Write a transactional offset record (TxnOffsetCommit) as part of the running operation."""
        op = self._op
        if op is None:
            raise RuntimeError("records are written only by an operation (GroupShard.run)")
        if not op.txn_saved:
            self._save_txn(op)
        self.offsets.replay_txn(producer_id, key, value)
        if key.group not in self.groups:
            self.groups[key.group] = ClassicGroup(key.group)  # a "simple" group
        op.records.append((key, value))

    def write(self, out) -> None:
        """Write the records a classic helper returned (already reflected in state)."""
        for key, value in merge_results(out).records:
            self.emit(key, value, apply=False)

    def event(self, name: str, group: str, *, debug: bool = False, **fields) -> None:
        """A group event: logged now (at debug level with ``debug``), published once the running
        operation's records are durable."""
        (self.log.debug if debug else self.log.info)(name, group=group, **fields)
        event = GroupEvent(group, name, self.now_ms(), {"shard": self.index, **fields})
        op = self._op
        if op is not None:
            op.events.append(event)
        else:  # a commit callback (the state it describes is durable): the runtime publishes it next
            self.settled_events.append(event)

    def _prior(self, key) -> tuple:
        """What undoes replaying ``key`` (not an offset: ``emit`` journals those itself)."""
        if isinstance(key, GroupMetadataKey):
            group = self.groups.get(key.group)
            return _STATE, group, group.state if group is not None else None
        if isinstance(key, CONSUMER_KEYS):
            return _UNDO, key, consumer_undo(self.groups, key)
        if isinstance(key, _SHARE_KEYS):  # emitted by share.py: the stand-in is replaced by then
            return _UNDO, key, _share_group_module().share_undo(self.groups, key)
        return _RECORD, key, None

    def _rollback(self, journal: list) -> None:
        for kind, a, b in reversed(journal):
            if kind == _RECORD:
                if type(a) is OffsetCommitKey:
                    OffsetStore._apply(self.offsets.latest, a, b)  # the pending offsets come back from _TXN
                else:
                    self.replay(a, b)
            elif kind == _UNDO:
                build, arg = b
                self.replay(a, build(arg))
            elif kind == _TXN:
                self.offsets.restore_txn(a)
            elif kind == _GROUP:
                if b is _MISSING:
                    dict.pop(self.groups, a, None)
                else:
                    dict.__setitem__(self.groups, a, b)
            elif kind == TIMER:
                self.timers.restore(a, b)
            elif a is not None:  # _STATE
                a.state = b

    def on_loaded(self) -> list:
        self.offsets.sync_committed()
        out: list = []
        for group in list(self.groups.values()):
            if isinstance(group, ConsumerGroup):
                self.consumer.on_loaded(group)
            elif isinstance(group, _ShareGroup):
                self.share.on_loaded(group)
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
    def defer_expiry(self, key: str, group_id: str, member_ids, limit_ms: int, until: int | None, retry: Callable[[int | None], object],
                     *, session: bool = False) -> bool:
        """Liveness is judged from what arrived, not from when the loop got to it (arrivals.py).
        Returns True, with the timer ``key`` armed again to call ``retry(until)``, when it must
        not fire yet:

        - one of ``member_ids`` has a request read and queued but not handled: checked again
          ``EXPIRY_RECHECK_MS`` later (its handler, which runs before then, re-arms or cancels
          the timer), for at most ``limit_ms`` past the first deferral (``until``), so a client
          that queues requests and never reads its answers does not live for ever;
        - for a session (``session``): a request of the member that its connection dropped
          before it was handled was read less than ``limit_ms`` ago (its session runs from
          then, as from a heartbeat handled; one handled is judged by the coordinator).
        """
        waiting = self.waiting
        if any(waiting(group_id, m) for m in member_ids):
            now = self.now_ms()
            if until is None:
                until = now + max(limit_ms, EXPIRY_RECHECK_MS)
            if now < until:
                self.timers.schedule(key, EXPIRY_RECHECK_MS, lambda: retry(until))
                return True
        if session and self.silent_ms is not None:
            silent = [ms for ms in (self.silent_ms(group_id, m) for m in member_ids) if ms is not None]
            if silent and min(silent) < limit_ms:
                self.timers.schedule(key, max(limit_ms - min(silent), EXPIRY_RECHECK_MS), lambda: retry(None))
                return True
        return False

    def fire_timers(self) -> list:
        """Run due timers (inside ``run``); returns what they returned, flattened."""
        out: list = []
        for item in self.timers.fire_due():
            if isinstance(item, list):
                out += item
            elif item is not None:
                out.append(item)
        extended = self.timers.extended
        if extended and max(ms for _, ms in extended) >= 1000:
            self.log.info("timers given back the time the event loop lost", timers=len(extended), lost_ms=max(ms for _, ms in extended))
        return out

    # ================================================================ the coordinator runtime's shard protocol
    def encode(self, records: list) -> list[tuple[bytes, bytes | None]]:
        return [(encode_key(k), None if v is None else encode_value(v)) for k, v in records]

    def loader(self) -> ShardLoader:
        return ShardLoader(self)

    def activated(self) -> list:
        return self.on_loaded()

    def applied(self, records: list, base_offset: int) -> None:
        """The records are durable: offsets reach reads."""
        commit = self.commit_record
        for key, value in records:
            commit(key, value)

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    # ================================================================ offsets
    def offset_commit(self, group_id: str, member_id: str, generation: int, instance_id: str | None, version: int,
                      retention_ms: int, partitions: list[CommitPartition]) -> Result:
        group = self.groups.get(group_id)
        if isinstance(group, _ShareGroup):  # as Kafka: "Group g is not a consumer group."
            error = ErrorCode.group_id_not_found
        elif isinstance(group, ConsumerGroup):
            error = validate_consumer_commit(group, version=version, epoch=generation, member_id=member_id,
                                             partitions=partitions, metadata_limit=self.config.offset_metadata_max_bytes, topic_id=self._topic_id)
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
        answer = []
        limit = self.config.offset_metadata_max_bytes
        emit = self.emit
        for p in partitions:
            metadata = p.metadata or ""
            if 2 * len(metadata) > limit and java_length(metadata) > limit:  # at most 2 UTF-16 units a character
                answer.append((p.topic, p.partition, ErrorCode.offset_metadata_too_large))
                continue
            key = OffsetCommitKey(group_id, p.topic, p.partition)
            emit(key, OffsetCommitValue(p.offset, p.leader_epoch, metadata, now, expire))  # offset, epoch, metadata, commit and expire times
            answer.append((p.topic, p.partition, ErrorCode.none))
        return Result(response=answer)

    def _topic_id(self, name: str):
        entry = self.metadata.by_name.get(name)
        return None if entry is None else entry[0]

    def txn_offset_commit(self, group_id: str, member_id: str, generation: int, instance_id: str | None, version: int,
                          producer_id: int, producer_epoch: int, partitions: list[CommitPartition]) -> Result:
        """TxnOffsetCommit: the offsets wait in the producer's transaction until its marker."""
        group = self.groups.get(group_id)
        if isinstance(group, _ShareGroup):
            error = ErrorCode.group_id_not_found
        elif isinstance(group, ConsumerGroup):
            error = validate_consumer_commit(group, version=version, epoch=generation, member_id=member_id, transactional=True,
                                             partitions=partitions, metadata_limit=self.config.offset_metadata_max_bytes, topic_id=self._topic_id)
        else:
            error = validate_commit(self.classic, group, version=version, generation=generation, member_id=member_id,
                                    instance_id=instance_id, transactional=True)
        if error is not None:
            return Result(response=[(p.topic, p.partition, error) for p in partitions])
        if group is None:
            self.groups[group_id] = ClassicGroup(group_id, state_timestamp=self.now_ms())
        now = self.now_ms()
        answer = []
        limit = self.config.offset_metadata_max_bytes
        for p in partitions:
            metadata = p.metadata or ""
            if java_length(metadata) > limit:
                answer.append((p.topic, p.partition, ErrorCode.offset_metadata_too_large))
                continue
            value = OffsetCommitValue(offset=p.offset, leader_epoch=p.leader_epoch, metadata=metadata, commit_timestamp=now, expire_timestamp=-1)
            self.emit_txn(producer_id, OffsetCommitKey(group_id, p.topic, p.partition), value)
            answer.append((p.topic, p.partition, ErrorCode.none))
        result = Result(response=answer)
        if self._op.records:
            result.producer = (producer_id, producer_epoch)
        return result

    def complete_txn(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool) -> Result:
        """Write a transaction's COMMIT or ABORT marker to this partition (the transaction
        coordinator's WriteTxnMarkers); the offsets it commits reach reads once it is durable."""
        self._save_txn(self._op)
        pending = {group: len(tps) for group, tps in (self.offsets.pending_of(producer_id) or {}).items() if tps}
        applied = self.replay_marker(producer_id, commit)
        offsets = self.offsets
        counts: dict[str, int] = {}
        for key, _ in applied:
            counts[key.group] = counts.get(key.group, 0) + 1
        for group, n in pending.items():  # what `groups history` shows of the transaction
            if commit:
                self.event("transactional offsets committed", group, producer_id=producer_id, producer_epoch=producer_epoch, partitions=counts.get(group, 0),
                           outdated=n - counts.get(group, 0))
            else:
                self.event("transactional offsets aborted", group, producer_id=producer_id, producer_epoch=producer_epoch, partitions=n)

        def show() -> None:
            for key, value in applied:
                offsets.commit(key, value)

        return Result(response=ErrorCode.none, marker=(producer_id, producer_epoch, coordinator_epoch, commit), on_commit=show if applied else None)

    def validate_fetch(self, group_id: str, member_id: str | None, epoch: int) -> ErrorCode | None:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return validate_consumer_fetch(group, member_id=member_id, epoch=epoch)
        return None

    def offset_fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None, *, stable: bool) -> list[tuple[str, int, OffsetCommitValue | None]]:
        view = (self.offsets.latest if stable else self.offsets.committed).get(group_id, {})
        if topics is None:
            rows = sorted(((t, p, v) for (t, p), v in view.items()), key=lambda x: (x[0], x[1]))
        else:
            rows = [(t, p, view.get((t, p))) for t, parts in topics for p in parts]
        if stable and group_id in self.offsets.open_by_group:  # a transaction's offset still pending: not stable yet
            pending = self.offsets.has_pending
            rows = [(t, p, UNSTABLE if pending(group_id, t, p) else v) for t, p, v in rows]
        return rows

    def offset_delete(self, group_id: str, topics: list[tuple[str, list[int]]]) -> Result:
        group = self.groups.get(group_id)
        if group is None or group.state == DEAD:
            return Result(response=(ErrorCode.group_id_not_found, []))
        if isinstance(group, _ShareGroup):
            return Result(response=(ErrorCode.group_id_not_found, []))
        if group.state != EMPTY and group.protocol_type != "consumer":
            return Result(response=(ErrorCode.non_empty_group, []))
        offsets = self.offsets.latest.get(group_id, {})
        answer = []
        for topic, parts in topics:
            for p in parts:
                if group.is_subscribed(topic):
                    answer.append((topic, p, ErrorCode.group_subscribed_to_topic))
                    continue
                if (topic, p) in offsets or self.offsets.has_pending(group_id, topic, p):  # the tombstone drops a pending one too
                    self.emit(*offset_record(group_id, topic, p, None))
                answer.append((topic, p, ErrorCode.none))
        return Result(response=(ErrorCode.none, answer))

    # ================================================================ groups
    # the describe and list operations: reads answering plain data (described.py), as Kafka's
    # GroupMetadataManager builds its DescribedGroup and ListedGroup
    def describe_group(self, group_id: str) -> described.ClassicGroupDescription | None:
        """DescribeGroups: None for a group that is not a live classic group (absent, Dead, or KIP-848)."""
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or group.state == DEAD:
            return None
        return described.classic_group(group)

    def describe_consumer_group(self, group_id: str) -> described.ConsumerGroupDescription | None:
        """ConsumerGroupDescribe: None for a group that is not a KIP-848 consumer group."""
        group = self.groups.get(group_id)
        return described.consumer_group(group, self.metadata.by_id) if isinstance(group, ConsumerGroup) else None

    def describe_share_group(self, group_id: str) -> described.ShareGroupDescription | described.GroupListing | None:
        """ShareGroupDescribe: the share group, the listing of a group of another kind, or None."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if isinstance(group, _ShareGroup):
            return described.share_group(group, self.metadata.by_id)
        return described.listing(group, self._group_type(group))

    def delete_groups(self, group_ids: list[str]) -> Result:
        """Result.response: the (group id, error) answers; Result.extra: the share-partition
        state deleted share groups leave, {group id: {topic id: [partitions]}} (for the hook)."""
        answer = []
        share_state: dict = {}
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None or group.state == DEAD:
                answer.append((gid, ErrorCode.group_id_not_found))
                continue
            if group.state != EMPTY:
                answer.append((gid, ErrorCode.non_empty_group))
                continue
            doomed = list(self.offsets.latest.get(gid, {}))
            if gid in self.offsets.open_by_group:  # partitions with only a transaction's pending offset get one too
                doomed += [tp for tp in self.offsets.pending_partitions(gid) if tp not in self.offsets.latest.get(gid, {})]
            for topic, partition in doomed:
                self.emit(*offset_record(gid, topic, partition, None))
            if isinstance(group, _ShareGroup):
                held = self.share.init.held_partitions(group)
                if held:
                    share_state[gid] = held
            self._write_group_tombstones(group)
            answer.append((gid, ErrorCode.none))
            self.event("group deleted", gid)
        return Result(response=answer, extra=share_state or None)

    def _write_group_tombstones(self, group) -> None:
        if isinstance(group, ConsumerGroup):
            self.consumer.delete_group_records(group)
        elif isinstance(group, _ShareGroup):
            self.share.delete_group_records(group)
        else:
            self.emit(*group.tombstone())

    def _retention_tick(self) -> None:
        self.timers.schedule(RETENTION_TIMER, self.config.offsets_retention_check_interval_ms, self._retention_tick)
        self.expire_offsets()

    def expire_offsets(self) -> None:
        """Tombstones for expired offsets, and for groups left with nothing (inside ``run``)."""
        now = self.now_ms()
        removed_groups = []
        for gid, group in list(self.groups.items()):
            if isinstance(group, _ShareGroup):
                continue  # as Kafka: share groups are not expired
            offsets = self.offsets.latest.get(gid, {})
            if isinstance(group, ConsumerGroup):
                expired = expired_consumer_offsets(group, offsets, now, self.config.offsets_retention_ms)
            else:
                expired = expired_offsets(group, offsets, now, self.config.offsets_retention_ms)
            everything = len(expired) == len(offsets)  # before the tombstones below empty ``offsets``
            if gid in self.offsets.open_by_group:  # as Kafka: not while a transaction holds a pending offset there
                expired = [tp for tp in expired if not self.offsets.has_pending(gid, *tp)]
                everything = False
            for topic, partition in expired:
                self.emit(*offset_record(gid, topic, partition, None))
            if expired:
                self.event("offsets expired", gid, partitions=len(expired))
            if group.state == EMPTY and everything:
                self._write_group_tombstones(group)
                removed_groups.append(gid)
        if removed_groups:
            self.log.info("groups expired", groups=removed_groups)

    def list_groups(self) -> list[described.GroupListing]:
        """ListGroups: every group that is not Dead."""
        return [described.listing(g, self._group_type(g)) for g in self.groups.values() if g.state != DEAD]

    @staticmethod
    def _group_type(group) -> str:
        if isinstance(group, ConsumerGroup):
            return described.CONSUMER
        return described.SHARE if isinstance(group, _ShareGroup) else described.CLASSIC


__all__ = ["GroupShard", "PREPARING_REBALANCE", "STABLE"]
