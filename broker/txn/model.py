"""The transaction coordinator's model: the states, the per-transactional-id metadata, and the
plain data an operation of ``TxnShard`` (broker/txn/shard.py) takes and hands back (``TxnResult``,
``Completion``, ``Marker``, the descriptions), with the request-version rules the handlers share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from broker.coordinator.placement import partition_for
from protocol.errors import ErrorCode
from protocol.txn_records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionLogKey, TransactionLogValue, TxnState, value_version_for

from ..javahash import copied_set_order, fresh_set_order, group_by_topic

E = ErrorCode
SHORT_MAX = 32767
INT_MAX = 2**31 - 1  # a two-phase-commit transaction's timeout (KIP-939): never timed out

EMPTY = TxnState.EMPTY
ONGOING = TxnState.ONGOING
PREPARE_COMMIT = TxnState.PREPARE_COMMIT
PREPARE_ABORT = TxnState.PREPARE_ABORT
COMPLETE_COMMIT = TxnState.COMPLETE_COMMIT
COMPLETE_ABORT = TxnState.COMPLETE_ABORT
DEAD = TxnState.DEAD
PREPARE_EPOCH_FENCE = TxnState.PREPARE_EPOCH_FENCE

PREPARED = (PREPARE_COMMIT, PREPARE_ABORT)
COMPLETED = (COMPLETE_COMMIT, COMPLETE_ABORT)
EXPIRABLE = (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)  # TransactionState.isExpirationAllowed

# TransactionState.validPreviousStates
VALID_PREVIOUS = {
    EMPTY: {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
    ONGOING: {ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
    PREPARE_COMMIT: {ONGOING},
    PREPARE_ABORT: {ONGOING, PREPARE_EPOCH_FENCE, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
    COMPLETE_COMMIT: {PREPARE_COMMIT},
    COMPLETE_ABORT: {PREPARE_ABORT},
    DEAD: {EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT},
    PREPARE_EPOCH_FENCE: {ONGOING},
}


def is_epoch_exhausted(epoch: int) -> bool:
    """``TransactionMetadata.isEpochExhausted``: the coordinator keeps the last epoch to fence with."""
    return epoch >= SHORT_MAX - 1


def txn_partition_for(transactional_id: str, partitions: int = 50) -> int:
    """The ``__transaction_state`` partition of a transactional id (``Utils.abs(hashCode) % n``)."""
    return partition_for(transactional_id, partitions)


def client_version_for_add_partitions(request_version: int) -> int:
    """``TransactionVersion.transactionVersionForAddPartitionsToTxn``: v4+ (from brokers) is TV2."""
    return 2 if request_version > 3 else 0


def client_version_for_end_txn(request_version: int) -> int:
    """``TransactionVersion.transactionVersionForEndTxn``: EndTxn v5+ is TV2."""
    return 2 if request_version > 4 else 0


# the request versions below which KafkaApis answers INVALID_PRODUCER_EPOCH for PRODUCER_FENCED
_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2}  # InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn


def fenced_error_for(api_key: int, version: int, error: ErrorCode) -> ErrorCode:
    """The error KafkaApis sends: older clients get INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED."""
    if error == E.producer_fenced and version < _FENCED_SINCE.get(api_key, 0):
        return E.invalid_producer_epoch
    return error


@dataclass
class TxnConfig:
    """Kafka 4.x's transaction coordinator settings (names in comments)."""

    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms (7 days)
    transaction_version: int = 2  # the finalized transaction.version feature level (server TV)
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions (AddOffsetsToTxn)
    # how often Kafka runs the two expiry passes (the runtime's business; ``next_deadline`` is exact)
    abort_timed_out_transaction_cleanup_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_transactional_id_cleanup_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms

    @classmethod
    def from_broker(cls, config) -> TxnConfig:
        """The transaction coordinator's settings, from the broker's (a ``BrokerConfig``)."""
        return cls(
            transaction_max_timeout_ms=config.transaction_max_timeout_ms,
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
            transaction_version=config.transaction_version,
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            abort_timed_out_transaction_cleanup_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        )

    @property
    def value_version(self) -> int:
        """The TransactionLogValue version this cluster writes."""
        return value_version_for(self.transaction_version)


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """One transactional id's state (Kafka's ``TransactionMetadata`` once its pending transition is done).

    ``partitions`` is the set; ``partition_order`` the iteration order of
    Kafka's hash set (records, markers and DescribeTransactions follow it).
    ``last_producer_epoch`` is in memory only: -1 after loading, as in Kafka.
    Neither of those two takes part in equality.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    prev_producer_id: int
    next_producer_id: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int
    client_txn_version: int
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = field(default=NO_PRODUCER_EPOCH, compare=False)
    partition_order: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)

    @property
    def completing(self) -> bool:
        """In PREPARE_*: markers are being written (Kafka's pending COMPLETE_* transition)."""
        return self.state in PREPARED

    @classmethod
    def new(cls, transactional_id: str, producer_id: int, timeout_ms: int, now: int) -> TxnMetadata:
        """What Kafka puts in its cache for an unknown id before the first InitProducerId transition."""
        return cls(transactional_id, producer_id, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_PRODUCER_ID, timeout_ms, EMPTY,
                   frozenset(), -1, now, 0)

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue) -> TxnMetadata:
        state = TxnState(value.status)
        if value.partition_order is not None:
            order = tuple(value.partition_order) if state != EMPTY else ()
        elif state == EMPTY or not value.partitions:
            order = ()  # Kafka ignores an EMPTY record's partitions
        else:
            # TransactionLog.read fills a new HashSet in record order; TransactionMetadata copies it
            flat = [(topic, p) for topic, ids in value.partitions for p in ids]
            order = tuple(copied_set_order(fresh_set_order(flat)))
        return cls(transactional_id, value.producer_id, value.producer_epoch, value.prev_producer_id, value.next_producer_id,
                   value.timeout_ms, state, frozenset(order), value.start_ms, value.last_update_ms, value.client_txn_version,
                   value.next_producer_epoch, value.last_producer_epoch, order)

    def to_value(self) -> TransactionLogValue:
        """The record Kafka's ``TransactionLog.valueToBytes`` writes for this state."""
        parts = None if self.state == EMPTY else group_by_topic(self.partition_order)
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            status=self.state,
            partitions=parts,
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
            prev_producer_id=self.prev_producer_id,
            next_producer_id=self.next_producer_id,
            client_txn_version=self.client_txn_version,
            next_producer_epoch=self.next_producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            partition_order=self.partition_order,
        )

    def topics(self) -> list[tuple[str, list[int]]]:
        """Partitions by topic, topics in order of first appearance (DescribeTransactions)."""
        out: dict[str, list[int]] = {}
        for topic, p in self.partition_order:
            out.setdefault(topic, []).append(p)
        return list(out.items())


class Marker(NamedTuple):
    """One WriteTxnMarkers entry for one partition."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: int  # the transaction's client version (WriteTxnMarkers' TransactionVersion)


@dataclass(frozen=True)
class Completion:
    """A transaction whose PREPARE_* record was written: write ``markers``, then
    run ``TxnShard.complete(completion)``, which appends ``record`` (COMPLETE_*).

    ``producer_id``/``producer_epoch`` are the PREPARE_* record's, which the
    markers carry; with no partitions there are no markers and the runtime
    completes it at once (Kafka does the same)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: int
    markers: tuple[Marker, ...]
    record: tuple[TransactionLogKey, TransactionLogValue] = field(hash=False)

    @property
    def partitions(self) -> list[tuple[str, int]]:
        return [(m.topic, m.partition) for m in self.markers]


class ProducerIdResponse(NamedTuple):
    """InitProducerId's and EndTxn's answer (EndTxn v5 carries the producer id and epoch)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class TxnDescription:
    """One DescribeTransactions entry (fields Kafka leaves unset on an error are 0 and "")."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class TxnListing:
    """ListTransactions' answer for this shard: ``transactions`` are
    ``(transactional id, producer id, state name)``."""

    error: ErrorCode = E.none
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[tuple[str, int, str], ...] = ()


@dataclass
class TxnResult:
    """What an operation hands back: data, no side effects.

    ``records`` are typed ``(TransactionLogKey, TransactionLogValue | None)``
    in the order they must be appended (``TxnShard.encode`` gives their
    bytes); the shard has already applied them. ``response`` is the
    operation's answer, sent once the records are durable. ``completions``
    are the transactions that must now have their markers written.
    """

    records: list = field(default_factory=list)
    response: Any = None
    completions: list[Completion] = field(default_factory=list)
