"""The share coordinator's shard: the share-partition states of one ``__share_group_state`` partition.

Like the transaction coordinator's ``TxnShard``: no sockets, no asyncio, no
clock of its own. Each operation works on one share-partition key
``(group id, topic id, partition)`` and returns the records to append
(``(ShareKey, value)`` pairs) and its answer; the records are applied by
``replay``, the same function the load runs over the log, so what a read sees
after a write is what a restart rebuilds.

Kafka 4.4's ``ShareCoordinatorShard`` rules:

* a WriteShareGroupState of a key with no state is refused (INVALID_REQUEST,
  "Write operation on uninitialized share partition not allowed."): state is
  made by InitializeShareGroupState, which writes a ShareSnapshot (snapshot
  epoch 0, or the current one + 1), the request's state epoch and start
  offset, leader epoch -1, no batches;
* a write is a ShareUpdate holding the request's own batches (merged among
  themselves), unless ``share.coordinator.snapshot.update.records.per.snapshot``
  (500) updates were written since the last snapshot: then a ShareSnapshot
  with the snapshot epoch + 1 and the current batches merged with the
  request's; replaying an update merges its batches into the state;
* a leader epoch or a state epoch older than the recorded one is fenced
  (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH), negative ones are INVALID_REQUEST;
* a ReadShareGroupState with a newer leader epoch writes it (a ShareUpdate
  or ShareSnapshot with no batches) before answering;
* DeleteShareGroupState writes a tombstone (the ShareSnapshot key); replaying
  it forgets the key; deleting a key with no state succeeds;
* ReadShareGroupStateSummary of a key with no state answers start offset -1.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.share_records import SNAPSHOT, UPDATE, ShareKey, ShareSnapshotValue, ShareUpdateValue, StateBatch, decode_key, decode_value

from .batches import merge_batches

E = ErrorCode
SharePartitionKey = tuple[str, uuid.UUID, int]

MSG_NULL_TOPIC = "The topic id cannot be null."
MSG_NEGATIVE_PARTITION = "The partition id cannot be a negative number."
MSG_NEGATIVE_LEADER_EPOCH = "The leader epoch cannot be a negative number."
MSG_NEGATIVE_STATE_EPOCH = "The state epoch cannot be a negative number."
MSG_WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
MSG_READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
# Errors.message() of the errors Kafka answers with their default message
DEFAULT_MESSAGES = {
    E.fenced_state_epoch: "The coordinator rejected the request because the state epoch did not match.",
    E.fenced_leader_epoch: "The leader epoch in the request is older than the epoch on the broker.",
    E.unknown_topic_or_partition: "This server does not host this topic-partition.",
    E.coordinator_not_available: "Share coordinator is not available.",
    E.not_coordinator: "This is not the correct coordinator.",
    E.coordinator_load_in_progress: "The coordinator is loading and hence can't process requests.",
    E.unknown_server_error: "The server experienced an unexpected error when processing the request.",
}


class ShareStateError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or DEFAULT_MESSAGES.get(code, code.name))
        self.code = code
        self.message = message or DEFAULT_MESSAGES.get(code)


@dataclass(slots=True)
class ShareGroupOffset:
    """One share-partition's durable state (Kafka's ``ShareGroupOffset``)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1
    state_batches: list[StateBatch] = field(default_factory=list)


@dataclass(slots=True)
class WriteData:
    """One partition's WriteShareGroupState data (the request's fields)."""

    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch]
    delivery_complete_count: int = -1


@dataclass(slots=True)
class ShareConfig:
    """The share coordinator's settings (Kafka names in comments)."""

    num_partitions: int = 50  # share.coordinator.state.topic.num.partitions
    segment_bytes: int = 104857600  # share.coordinator.state.topic.segment.bytes
    snapshot_update_records_per_snapshot: int = 500  # share.coordinator.snapshot.update.records.per.snapshot
    prune_interval_ms: int = 300_000  # share.coordinator.state.topic.prune.interval.ms
    cold_snapshot_interval_ms: int = 300_000  # share.coordinator.cold.partition.snapshot.interval.ms
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
    max_share_sessions: int = 2000  # group.share.max.share.sessions

    @classmethod
    def from_broker(cls, config) -> ShareConfig:
        """The share coordinator's settings, from the broker's (a ``BrokerConfig``)."""
        return cls(
            num_partitions=config.share_coordinator_state_topic_num_partitions,
            snapshot_update_records_per_snapshot=config.share_coordinator_snapshot_update_records_per_snapshot,
            prune_interval_ms=config.share_coordinator_state_topic_prune_interval_ms,
            cold_snapshot_interval_ms=config.share_coordinator_cold_partition_snapshot_interval_ms,
            record_lock_duration_ms=config.group_share_record_lock_duration_ms,
            delivery_count_limit=config.group_share_delivery_count_limit,
            partition_max_record_locks=config.group_share_partition_max_record_locks,
            max_share_sessions=config.group_share_max_share_sessions,
        )


class ShareStateShard:
    """The share-partition states of one ``__share_group_state`` partition."""

    def __init__(self, config: ShareConfig, clock_ms: Callable[[], int], partition_count: Callable[[uuid.UUID], int | None]) -> None:
        self.config = config
        self.clock_ms = clock_ms
        self.partition_count = partition_count  # topic id -> partitions, None for an unknown topic
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}
        self.state_epochs: dict[SharePartitionKey, int] = {}
        self.update_counts: dict[SharePartitionKey, int] = {}
        # the offset (of its batch) of each key's latest ShareSnapshot: nothing below the smallest
        # is needed to rebuild the state (Kafka's ShareCoordinatorOffsetsManager)
        self.snapshot_offsets: dict[SharePartitionKey, int] = {}

    # ================================================================ replay
    def replay_bytes(self, key: bytes, value: bytes | None, offset: int | None = None) -> None:
        k = decode_key(key)
        if k is not None:
            self.replay(k, decode_value(k.record_type, value), offset)

    def replay(self, key: ShareKey, value, offset: int | None = None) -> None:
        sk = (key.group_id, key.topic_id, key.partition)
        if key.record_type == SNAPSHOT:
            if value is None:  # the tombstone of DeleteShareGroupState
                for table in (self.states, self.leader_epochs, self.state_epochs, self.update_counts, self.snapshot_offsets):
                    table.pop(sk, None)
                return
            if offset is not None:
                self.snapshot_offsets[sk] = offset
            self._raise_epoch(self.leader_epochs, sk, value.leader_epoch)
            self._raise_epoch(self.state_epochs, sk, value.state_epoch)
            self.states[sk] = ShareGroupOffset(value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset,
                                               value.delivery_complete_count, value.create_timestamp, value.write_timestamp,
                                               list(value.state_batches))
            if self.update_counts.get(sk, 0) >= self.config.snapshot_update_records_per_snapshot:
                self.update_counts[sk] = 0
            return
        if value is None:
            return
        self._raise_epoch(self.leader_epochs, sk, value.leader_epoch)
        current = self.states.get(sk)
        if current is None:
            self.states[sk] = ShareGroupOffset(value.snapshot_epoch, -1, value.leader_epoch, value.start_offset,
                                               value.delivery_complete_count, -1, -1, list(value.state_batches))
        else:
            start = value.start_offset if value.start_offset != -1 else current.start_offset
            self.states[sk] = ShareGroupOffset(
                current.snapshot_epoch, current.state_epoch, value.leader_epoch if value.leader_epoch != -1 else current.leader_epoch,
                start, value.delivery_complete_count if value.delivery_complete_count != -1 else current.delivery_complete_count,
                current.create_timestamp, current.write_timestamp, merge_batches(current.state_batches, value.state_batches, start),
            )
        self.update_counts[sk] = self.update_counts[sk] + 1 if sk in self.update_counts else 0

    @staticmethod
    def _raise_epoch(table: dict, sk, epoch: int) -> None:
        if table.get(sk, epoch) <= epoch:
            table[sk] = epoch

    # ================================================================ checks
    def _check_partition(self, topic_id: uuid.UUID, partition: int) -> None:
        count = self.partition_count(topic_id)
        if count is None or partition >= count:
            raise ShareStateError(E.unknown_topic_or_partition)

    @staticmethod
    def _check_common(topic_id, partition: int) -> None:
        if topic_id is None:
            raise ShareStateError(E.invalid_request, MSG_NULL_TOPIC)
        if partition < 0:
            raise ShareStateError(E.invalid_request, MSG_NEGATIVE_PARTITION)

    # ================================================================ operations (each returns (records, answer))
    def write(self, group_id: str, topic_id: uuid.UUID, data: WriteData) -> list:
        self._check_common(topic_id, data.partition)
        if data.leader_epoch < 0:
            raise ShareStateError(E.invalid_request, MSG_NEGATIVE_LEADER_EPOCH)
        if data.state_epoch < 0:
            raise ShareStateError(E.invalid_request, MSG_NEGATIVE_STATE_EPOCH)
        sk = (group_id, topic_id, data.partition)
        if sk not in self.states:
            raise ShareStateError(E.invalid_request, MSG_WRITE_UNINITIALIZED)
        if self.leader_epochs.get(sk, data.leader_epoch) > data.leader_epoch:
            raise ShareStateError(E.fenced_leader_epoch)
        if self.state_epochs.get(sk, data.state_epoch) > data.state_epoch:
            raise ShareStateError(E.fenced_state_epoch)
        self._check_partition(topic_id, data.partition)
        return [self._state_record(sk, data)]

    def _state_record(self, sk: SharePartitionKey, data: WriteData):
        current = self.states[sk]
        key_args = (sk[0], sk[1], sk[2])
        if self.update_counts.get(sk, 0) >= self.config.snapshot_update_records_per_snapshot:
            start = data.start_offset if data.start_offset != -1 else current.start_offset
            value = ShareSnapshotValue(
                current.snapshot_epoch + 1,
                data.state_epoch if data.state_epoch != -1 else current.state_epoch,
                data.leader_epoch if data.leader_epoch != -1 else current.leader_epoch,
                start, current.create_timestamp, self.clock_ms(),
                merge_batches(current.state_batches, data.state_batches, start),
                data.delivery_complete_count if data.start_offset != -1 else current.delivery_complete_count,
            )
            return ShareKey(SNAPSHOT, *key_args), value
        value = ShareUpdateValue(current.snapshot_epoch, data.leader_epoch, data.start_offset,
                                 merge_batches([], data.state_batches, data.start_offset), data.delivery_complete_count)
        return ShareKey(UPDATE, *key_args), value

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> tuple[list, ShareGroupOffset]:
        """ReadShareGroupState: the state, and the record of a newer leader epoch to write first."""
        self._check_common(topic_id, partition)
        if leader_epoch < 0:
            raise ShareStateError(E.invalid_request, "The leader epoch cannot be a negative number.")
        sk = (group_id, topic_id, partition)
        if sk not in self.states:
            raise ShareStateError(E.invalid_request, MSG_READ_UNINITIALIZED)
        if self.leader_epochs.get(sk, leader_epoch) > leader_epoch:
            raise ShareStateError(E.fenced_leader_epoch)
        self._check_partition(topic_id, partition)
        state = self.states[sk]
        if self.leader_epochs.get(sk) == leader_epoch:
            return [], state
        record = self._state_record(sk, WriteData(partition, state.state_epoch, leader_epoch, state.start_offset, [],
                                                  state.delivery_complete_count))
        return [record], state

    def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareGroupOffset | None:
        self._check_common(topic_id, partition)
        self._check_partition(topic_id, partition)
        return self.states.get((group_id, topic_id, partition))

    def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int) -> list:
        self._check_common(topic_id, partition)
        if state_epoch < 0:
            raise ShareStateError(E.invalid_request, MSG_NEGATIVE_STATE_EPOCH)
        sk = (group_id, topic_id, partition)
        if self.state_epochs.get(sk, state_epoch) > state_epoch:
            raise ShareStateError(E.fenced_state_epoch)
        self._check_partition(topic_id, partition)
        current = self.states.get(sk)
        now = self.clock_ms()
        value = ShareSnapshotValue(0 if current is None else current.snapshot_epoch + 1, state_epoch, -1, start_offset, now, now, [], -1)
        return [(ShareKey(SNAPSHOT, group_id, topic_id, partition), value)]

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> list:
        self._check_common(topic_id, partition)
        sk = (group_id, topic_id, partition)
        if sk not in self.states:
            return []
        self._check_partition(topic_id, partition)
        return [(ShareKey(SNAPSHOT, group_id, topic_id, partition), None)]

    def cold_snapshots(self) -> list:
        """A ShareSnapshot (the next snapshot epoch, the state as it is) for every share partition whose
        last snapshot is older than ``share.coordinator.cold.partition.snapshot.interval.ms``, as Kafka
        writes them, so that an idle share partition does not hold the topic's pruning back."""
        now = self.clock_ms()
        out = []
        for (group_id, topic_id, partition), st in self.states.items():
            if now - st.write_timestamp <= self.config.cold_snapshot_interval_ms:
                continue
            out.append((ShareKey(SNAPSHOT, group_id, topic_id, partition), ShareSnapshotValue(
                st.snapshot_epoch + 1, st.state_epoch, st.leader_epoch, st.start_offset, st.create_timestamp, now,
                list(st.state_batches), st.delivery_complete_count)))
        return out

    def redundant_offset(self, log_end: int) -> int:
        """Below this offset no record is needed to rebuild the state: the smallest offset of a key's
        latest snapshot, or the log end when no key has a state (every record is then spent)."""
        if not self.states:
            return log_end
        if len(self.snapshot_offsets) < len(self.states):  # a state of unknown origin: keep everything
            return 0
        return min(self.snapshot_offsets.values())

    def keys_of_group(self, group_id: str) -> list[SharePartitionKey]:
        return [sk for sk in self.states if sk[0] == group_id]
