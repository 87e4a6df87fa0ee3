"""One transaction coordinator shard: the transactional ids of one ``__transaction_state`` partition.

The same design as the group coordinator's ``GroupShard``: no sockets, no
asyncio, no clock of its own. An operation returns a :class:`TxnResult`: the
typed records to append to ``__transaction_state`` (``(TransactionLogKey,
TransactionLogValue | None)``; ``None`` is a tombstone), the response, and
for every transaction it moved to PREPARE_COMMIT or PREPARE_ABORT a
:class:`Completion`: the markers to write and the COMPLETE_* record to
write once they are written (``TxnShard.complete``).

State changes only through ``replay``: an operation emits its records, and
emitting a record replays it at once, so the rest of the operation (and the
next one) sees it, as the group coordinator does; an operation that raises
is rolled back from its journal and writes nothing. Loading a partition is
replaying its records in log order (``replay_bytes``), then ``on_loaded``
hands back the completions of the transactions left in PREPARE_*.

Behaviour is Kafka 4.x's ``TransactionCoordinator`` / ``TransactionMetadata``
(docs/transactions.md lists what differs and why). Two things Kafka keeps
beside the record are carried by the typed value, outside its bytes (see
``TransactionLogValue``): the last producer epoch (KIP-360 retries), which a
loaded transaction does not have, and the iteration order of the partition
set, which decides the order of partitions in the next record Kafka writes.

A transaction in PREPARE_COMMIT or PREPARE_ABORT is *completing*: its markers
are being written and its COMPLETE_* record is pending. Kafka marks it with a
pending state for that whole time (set right after the PREPARE_* append, and
again at load), so every request for it answers CONCURRENT_TRANSACTIONS
before any other check that looks at the pending state; here that is simply
the PREPARE_* state.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import replace

from broker.coordinator.common import CoordinatorError
from broker.coordinator.placement import partition_for
from broker.coordinator_runtime.constants import OFFSETS_TOPIC
from protocol.errors import ErrorCode
from protocol.txn_records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionLogKey,
    TransactionLogValue,
    TxnState,
    UnknownTxnKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

from ..javahash import copied_set_order
from .model import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    COMPLETED,
    Completion,
    DEAD,
    E,
    EMPTY,
    EXPIRABLE,
    INT_MAX,
    Marker,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    PREPARED,
    ProducerIdResponse,
    SHORT_MAX,
    TxnConfig,
    TxnDescription,
    TxnListing,
    TxnMetadata,
    TxnResult,
    VALID_PREVIOUS,
    is_epoch_exhausted,
)

__all__ = ["TxnShard"]

class _IllegalTransition(Exception):
    """A transition Kafka's TransactionMetadata refuses (an IllegalStateException there:
    the request gets UNKNOWN_SERVER_ERROR)."""


_MISSING = object()


class _Operation:
    __slots__ = ("records", "journal", "completions")

    def __init__(self) -> None:
        self.records: list = []
        self.journal: list = []
        self.completions: list[Completion] = []


def _operation(fn):
    """Run a public operation inside ``TxnShard.run`` unless one is already running."""

    @functools.wraps(fn)
    def wrapper(self: TxnShard, *args, **kwargs):
        if self._op is not None:
            return fn(self, *args, **kwargs)
        return self.run(lambda shard: fn(shard, *args, **kwargs))

    return wrapper


def _pid_error(error: ErrorCode) -> TxnResult:
    return TxnResult(response=ProducerIdResponse(error))


def _dedup(partitions: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    return list(dict.fromkeys((str(t), int(p)) for t, p in partitions))


class TxnShard:
    """The transactional ids of one ``__transaction_state`` partition.

    ``allocate_producer_id()`` returns a new producer id (Kafka's
    ``ProducerIdManager.generateProducerId``); it may raise
    ``CoordinatorError(code)``, which becomes the request's error.
    ``clock_ms()`` is the time of operations that are not given ``now``.
    ``coordinator_epoch`` is the partition's leader epoch, carried by markers.
    """

    def __init__(
        self,
        allocate_producer_id: Callable[[], int],
        config: TxnConfig | None = None,
        *,
        index: int = 0,
        coordinator_epoch: int = 0,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.index = index
        self.config = config or TxnConfig()
        self.coordinator_epoch = coordinator_epoch
        self.allocate_producer_id = allocate_producer_id
        self.clock_ms = clock_ms
        self.txns: dict[str, TxnMetadata] = {}
        self.skipped_records = 0  # keys of another record type met while loading
        self._op: _Operation | None = None

    # ================================================================ replay
    def replay(self, key, value: TransactionLogValue | None) -> None:
        """Apply one decoded record: the only way state changes. A tombstone removes the id."""
        if isinstance(key, UnknownTxnKey):
            self.skipped_records += 1
            return
        tid = key.transactional_id
        op = self._op
        if op is not None:
            op.journal.append((tid, self.txns.get(tid, _MISSING)))
        if value is None:
            self.txns.pop(tid, None)
        else:
            self.txns[tid] = TxnMetadata.from_value(tid, value)

    def replay_bytes(self, key_bytes: bytes, value_bytes: bytes | None) -> None:
        """Replay one record as the log holds it (loading). Malformed bytes raise ``TxnRecordError``."""
        key = decode_key(key_bytes)
        if isinstance(key, UnknownTxnKey):
            self.skipped_records += 1
            return
        self.replay(key, decode_value(value_bytes))

    def encode(self, records: Iterable[tuple]) -> list[tuple[bytes, bytes | None]]:
        """The bytes of typed records, at the value version of the cluster's transaction.version."""
        version = self.config.value_version
        return [(encode_key(k), encode_value(v, version)) for k, v in records]

    def on_loaded(self, now: int | None = None) -> list[Completion]:
        """After loading: the completions of transactions left in PREPARE_* (Kafka
        computes their COMPLETE_* transition at load time and writes their markers)."""
        now = self._now(now)
        return [self._completion(meta, now) for meta in self.txns.values() if meta.completing]

    def reset(self) -> None:
        """Forget everything (before reloading the partition)."""
        self.txns.clear()

    # ================================================================ operations
    def run(self, op: Callable[[TxnShard], TxnResult]) -> TxnResult:
        """Run one operation: its result, or its exception after rolling it back.

        The result carries every record and every completion the run made, in
        order, whatever ``op`` composes (operations called inside it return
        only their responses)."""
        if self._op is not None:
            raise RuntimeError("transaction coordinator operations do not nest")
        current = self._op = _Operation()
        try:
            result = op(self)
        except BaseException:
            self._op = None
            for tid, prior in reversed(current.journal):
                if prior is _MISSING:
                    self.txns.pop(tid, None)
                else:
                    self.txns[tid] = prior
            raise
        self._op = None
        if result is None:
            result = TxnResult()
        if current.records:
            result.records = current.records + result.records
        if current.completions:
            result.completions = current.completions + result.completions
        return result

    def emit(self, key: TransactionLogKey, value: TransactionLogValue | None) -> None:
        """Write a record as part of the running operation, applying it at once."""
        op = self._op
        if op is None:
            raise RuntimeError("records are written only by an operation (TxnShard.run)")
        self.replay(key, value)
        op.records.append((key, value))

    def _write(self, meta: TxnMetadata) -> None:
        self.emit(TransactionLogKey(meta.transactional_id), meta.to_value())

    def _now(self, now: int | None) -> int:
        if now is not None:
            return now
        if self.clock_ms is None:
            raise ValueError("no time given and no clock")
        return self.clock_ms()

    def _allocate(self) -> tuple[int, ErrorCode | None]:
        try:
            return self.allocate_producer_id(), None
        except CoordinatorError as exc:
            return NO_PRODUCER_ID, exc.code

    def _valid_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    @staticmethod
    def _transition(meta: TxnMetadata, state: TxnState, **changes) -> TxnMetadata:
        """``TransactionMetadata.prepareTransitionTo``: the new state, with the checks Kafka makes
        there; the previous producer id of every transition is the current producer id."""
        if meta.state not in VALID_PREVIOUS[state]:
            raise _IllegalTransition(f"{meta.transactional_id}: {meta.state.name} -> {state.name} is not a valid transition")
        new = replace(meta, state=state, prev_producer_id=meta.producer_id, **changes)
        if new.producer_id < 0:
            raise _IllegalTransition(f"illegal new producer id {new.producer_id}")
        if state != DEAD and not 0 <= new.producer_epoch <= SHORT_MAX:
            raise _IllegalTransition(f"illegal new producer epoch {new.producer_epoch}")
        if "partition_order" in changes:
            new = replace(new, partitions=frozenset(new.partition_order))
        return new

    def _completion(self, prepared: TxnMetadata, now: int) -> Completion:
        """``prepareComplete`` and the markers of a PREPARE_* transaction."""
        commit = prepared.state == PREPARE_COMMIT
        if prepared.client_txn_version >= 2 and prepared.next_producer_id != NO_PRODUCER_ID:
            pid, epoch = prepared.next_producer_id, 0  # the epoch overflowed: the producer id rotates
        else:
            pid, epoch = prepared.producer_id, prepared.producer_epoch
        done = self._transition(prepared, COMPLETE_COMMIT if commit else COMPLETE_ABORT, producer_id=pid, producer_epoch=epoch,
                                next_producer_id=NO_PRODUCER_ID, partition_order=(), last_update_ms=now)
        markers = tuple(
            Marker(topic, partition, prepared.producer_id, prepared.producer_epoch, commit, self.coordinator_epoch,
                   prepared.client_txn_version)
            for topic, partition in prepared.partition_order
        )
        return Completion(prepared.transactional_id, prepared.producer_id, prepared.producer_epoch, commit, self.coordinator_epoch,
                          prepared.client_txn_version, markers, (TransactionLogKey(prepared.transactional_id), done.to_value()))

    def _prepare(self, prepared: TxnMetadata, now: int) -> Completion:
        """Write a PREPARE_* transition; its completion goes into the running operation's result."""
        completion = self._completion(prepared, now)  # before writing: it checks the COMPLETE_* transition
        self._write(prepared)
        self._op.completions.append(completion)
        return completion

    # ---------------------------------------------------------------- InitProducerId
    @_operation
    def init_producer_id(self, transactional_id: str | None, timeout_ms: int, producer_id: int = NO_PRODUCER_ID,
                         producer_epoch: int = NO_PRODUCER_EPOCH, *, now: int | None = None) -> TxnResult:
        """InitProducerId: a new producer id, an epoch bump, or a KIP-360 recovery when the
        producer passes its current id and epoch. An ongoing transaction is fenced and aborted
        first and the answer is CONCURRENT_TRANSACTIONS (the producer retries)."""
        now = self._now(now)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return _pid_error(E.invalid_request)  # KafkaApis: one of the two without the other
        if transactional_id is None:  # an idempotent producer: a new id, epoch 0, nothing written
            pid, error = self._allocate()
            return _pid_error(error) if error else TxnResult(response=ProducerIdResponse(E.none, pid, 0))
        if not transactional_id:
            return _pid_error(E.invalid_request)
        if not self._valid_timeout(timeout_ms):
            return _pid_error(E.invalid_transaction_timeout)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        meta = self.txns.get(transactional_id)
        if meta is None:
            pid, error = self._allocate()
            if error:
                return _pid_error(error)
            meta = TxnMetadata.new(transactional_id, pid, timeout_ms, now)
        if meta.completing:
            return _pid_error(E.concurrent_transactions)
        if expected is not None and not (
            meta.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == meta.producer_id
            or (expected[0] == meta.prev_producer_id and is_epoch_exhausted(expected[1]))
        ):
            return _pid_error(E.producer_fenced)
        try:
            if meta.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT):
                return self._bump_epoch(meta, timeout_ms, expected, now)
            if meta.state == ONGOING:
                completion = self._fence_and_abort(meta, now)
                if isinstance(completion, ErrorCode):
                    return _pid_error(completion)
                return TxnResult(response=ProducerIdResponse(E.concurrent_transactions))
            raise _IllegalTransition(f"{transactional_id} is in state {meta.state.name}")  # DEAD, PREPARE_EPOCH_FENCE
        except _IllegalTransition:
            return _pid_error(E.unknown_server_error)

    def _bump_epoch(self, meta: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None, now: int) -> TxnResult:
        reset = {"timeout_ms": timeout_ms, "partition_order": (), "start_ms": -1, "last_update_ms": now}
        if is_epoch_exhausted(meta.producer_epoch) and (expected is None or expected[1] == meta.producer_epoch):
            # prepareProducerIdRotation
            pid, error = self._allocate()
            if error:
                return _pid_error(error)
            last = meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            new = self._transition(meta, EMPTY, producer_id=pid, producer_epoch=0, last_producer_epoch=last, **reset)
        else:
            # prepareIncrementProducerEpoch
            if is_epoch_exhausted(meta.producer_epoch):
                raise _IllegalTransition(f"no producer epoch left for producer id {meta.producer_id}")
            if expected is None:
                epoch, last = meta.producer_epoch + 1, NO_PRODUCER_EPOCH
            elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
                epoch, last = meta.producer_epoch + 1, meta.producer_epoch
            elif expected[1] == meta.last_producer_epoch:
                epoch, last = meta.producer_epoch, meta.last_producer_epoch  # a retry of a bump that succeeded
            else:
                return _pid_error(E.producer_fenced)
            new = self._transition(meta, EMPTY, producer_epoch=epoch, last_producer_epoch=last, **reset)
        self._write(new)
        return TxnResult(response=ProducerIdResponse(E.none, new.producer_id, new.producer_epoch))

    def _fence_and_abort(self, meta: TxnMetadata, now: int) -> Completion | ErrorCode:
        """Fence the producer of an ongoing transaction and abort it (InitProducerId, and
        transaction timeouts): ``prepareFenceProducerEpoch`` then ``endTransaction`` at the
        server's transaction version, not from the client."""
        self._transition(meta, PREPARE_EPOCH_FENCE)  # only from ONGOING
        fenced = meta.producer_epoch if meta.producer_epoch == SHORT_MAX else meta.producer_epoch + 1
        if self.config.transaction_version < 2:
            # endTransactionWithTV1: the fenced epoch is the one written, the last epoch is forgotten
            new = self._transition(meta, PREPARE_ABORT, producer_epoch=fenced, last_producer_epoch=NO_PRODUCER_EPOCH,
                                   next_producer_id=NO_PRODUCER_ID, last_update_ms=now, client_txn_version=0)
        else:
            # TV2: prepareAbortOrCommit makes the only bump (at the top epoch the producer id rotates)
            next_pid = NO_PRODUCER_ID
            if is_epoch_exhausted(meta.producer_epoch):
                next_pid, error = self._allocate()
                if error:
                    return error
            epoch = meta.producer_epoch if meta.producer_epoch == SHORT_MAX else meta.producer_epoch + 1
            new = self._transition(meta, PREPARE_ABORT, producer_epoch=epoch, last_producer_epoch=meta.producer_epoch,
                                   next_producer_id=next_pid, last_update_ms=now, client_txn_version=self.config.transaction_version)
        return self._prepare(new, now)

    # ---------------------------------------------------------------- AddPartitionsToTxn / AddOffsetsToTxn
    @_operation
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[tuple[str, int]],
                       *, verify_only: bool = False, client_txn_version: int = 0, now: int | None = None) -> TxnResult:
        """AddPartitionsToTxn. The response is ``{(topic, partition): error}`` in request order.

        ``verify_only`` (v4+ from a partition leader, TV1's produce check): NONE for
        partitions in the transaction, TRANSACTION_ABORTABLE for the others; nothing is
        written. Otherwise the partitions join the transaction (EMPTY/COMPLETE_* ->
        ONGOING, with a start time); every partition gets the same error.
        ``client_txn_version`` is the client's transaction version
        (``client_version_for_add_partitions``), recorded in the ONGOING record."""
        now = self._now(now)
        parts = _dedup(partitions)

        def every(error: ErrorCode) -> TxnResult:
            return TxnResult(response={tp: error for tp in parts})

        if not transactional_id:
            return every(E.invalid_request)
        meta = self.txns.get(transactional_id)
        if meta is None:
            return every(E.invalid_producer_id_mapping)
        if verify_only:  # handleVerifyPartitionsInTransaction: no pending-state check
            if meta.producer_id != producer_id:
                return every(E.invalid_producer_id_mapping)
            if meta.producer_epoch != producer_epoch:
                return every(E.producer_fenced)
            if meta.state in PREPARED:
                return every(E.concurrent_transactions)
            return TxnResult(response={tp: E.none if tp in meta.partitions else E.transaction_abortable for tp in parts})
        if meta.completing:  # checked first: a TV2 producer may already use the next producer id
            return every(E.concurrent_transactions)
        if meta.producer_id != producer_id:
            return every(E.invalid_producer_id_mapping)
        if meta.producer_epoch != producer_epoch:
            return every(E.producer_fenced)
        if meta.state == ONGOING and meta.partitions.issuperset(parts):
            return every(E.none)  # nothing new: no record
        try:
            start = now if meta.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) else meta.start_ms
            order = tuple(copied_set_order(list(meta.partition_order), parts))
            new = self._transition(meta, ONGOING, partition_order=order, start_ms=start, last_update_ms=now,
                                   client_txn_version=client_txn_version)
        except _IllegalTransition:
            return every(E.unknown_server_error)
        self._write(new)
        return every(E.none)

    @_operation
    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, *,
                    offsets_partitions: int | None = None, now: int | None = None) -> TxnResult:
        """AddOffsetsToTxn: adds the group's ``__consumer_offsets`` partition, as a client
        AddPartitionsToTxn of transaction version 0 (what KafkaApis passes). The response
        is one error."""
        n = offsets_partitions or self.config.offsets_topic_num_partitions
        tp = (OFFSETS_TOPIC, partition_for(group_id, n))
        result = self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], client_txn_version=0, now=now)
        result.response = result.response[tp]
        return result

    # ---------------------------------------------------------------- EndTxn
    @_operation
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, client_txn_version: int = 0,
                *, now: int | None = None) -> TxnResult:
        """EndTxn: ONGOING -> PREPARE_COMMIT / PREPARE_ABORT plus a :class:`Completion`.

        ``client_txn_version`` (``client_version_for_end_txn``) picks the rules: TV2
        bumps the epoch on every end (and may abort an EMPTY or completed transaction,
        so a client unsure of the state can always abort), answers a retry of a
        finished end with NONE, and the response carries the producer id and epoch to
        use next. TV0/1 answer NONE to a repeated end of the same kind and the
        response carries no producer id."""
        now = self._now(now)
        if not transactional_id:
            return _pid_error(E.invalid_request)
        meta = self.txns.get(transactional_id)
        if meta is None:
            return _pid_error(E.invalid_producer_id_mapping)
        try:
            if client_txn_version >= 2:
                return self._end_txn_v2(meta, producer_id, producer_epoch, commit, client_txn_version, now)
            return self._end_txn_v1(meta, producer_id, producer_epoch, commit, now)
        except _IllegalTransition:
            return _pid_error(E.unknown_server_error)

    def _end_txn_v1(self, meta: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool, now: int) -> TxnResult:
        if meta.producer_id != producer_id:
            return _pid_error(E.invalid_producer_id_mapping)
        if producer_epoch != meta.producer_epoch:  # strict for clients: they do not bump the epoch
            return _pid_error(E.producer_fenced)
        if meta.completing:
            return _pid_error(E.concurrent_transactions)
        state = meta.state
        if state == ONGOING:
            new = self._transition(meta, PREPARE_COMMIT if commit else PREPARE_ABORT, next_producer_id=NO_PRODUCER_ID,
                                   last_update_ms=now, client_txn_version=0)
            self._prepare(new, now)
            return TxnResult(response=ProducerIdResponse(E.none))
        if state == COMPLETE_COMMIT:
            return _pid_error(E.none if commit else E.invalid_txn_state)
        if state == COMPLETE_ABORT:
            return _pid_error(E.invalid_txn_state if commit else E.none)
        if state == EMPTY:
            return _pid_error(E.invalid_txn_state)
        raise _IllegalTransition(f"{meta.transactional_id} is in state {state.name}")

    def _end_txn_v2(self, meta: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool, client_txn_version: int,
                    now: int) -> TxnResult:
        if meta.completing:  # first: the producer may be using the next producer id already
            return _pid_error(E.concurrent_transactions)
        # a retry of an end that overflowed the epoch: the next producer id is in place
        retry_on_overflow = meta.prev_producer_id == producer_id and producer_epoch == SHORT_MAX - 1 and meta.producer_epoch == 0
        retry_on_bump = meta.producer_epoch == producer_epoch + 1  # a retry of an end that bumped the epoch
        if meta.producer_id != producer_id and not retry_on_overflow:
            return _pid_error(E.invalid_producer_id_mapping)
        state = meta.state
        if state in COMPLETED:
            valid = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
        else:
            valid = producer_epoch == meta.producer_epoch
        if not valid:
            return _pid_error(E.producer_fenced)
        retry = retry_on_bump or retry_on_overflow
        current = ProducerIdResponse(E.none, meta.producer_id, meta.producer_epoch)
        if state == ONGOING:
            return self._end_v2(meta, PREPARE_COMMIT if commit else PREPARE_ABORT, False, client_txn_version, now)
        if state == COMPLETE_COMMIT:
            if commit:
                return TxnResult(response=current) if retry else _pid_error(E.invalid_txn_state)
            return _pid_error(E.invalid_txn_state) if retry else self._end_v2(meta, PREPARE_ABORT, True, client_txn_version, now)
        if state == COMPLETE_ABORT:
            if commit:
                return _pid_error(E.invalid_txn_state)
            return TxnResult(response=current) if retry else self._end_v2(meta, PREPARE_ABORT, True, client_txn_version, now)
        if state == EMPTY:
            return _pid_error(E.invalid_txn_state) if commit else self._end_v2(meta, PREPARE_ABORT, True, client_txn_version, now)
        raise _IllegalTransition(f"{meta.transactional_id} is in state {state.name}")

    def _end_v2(self, meta: TxnMetadata, state: TxnState, no_partition_added: bool, client_txn_version: int, now: int) -> TxnResult:
        """``prepareAbortOrCommit`` at TV2: the epoch is bumped; at the last usable epoch a next
        producer id is allocated, which the COMPLETE_* record switches to (epoch 0)."""
        next_pid = NO_PRODUCER_ID
        if is_epoch_exhausted(meta.producer_epoch):
            next_pid, error = self._allocate()
            if error:
                return _pid_error(error)
        if meta.producer_epoch == SHORT_MAX and state == PREPARE_ABORT:
            epoch = meta.producer_epoch  # already broken: let the abort through without overflowing
        else:
            epoch = meta.producer_epoch + 1
        new = self._transition(meta, state, producer_epoch=epoch, last_producer_epoch=meta.producer_epoch, next_producer_id=next_pid,
                               start_ms=now if no_partition_added else meta.start_ms, last_update_ms=now,
                               client_txn_version=client_txn_version)
        completion = self._prepare(new, now)
        done = completion.record[1]
        return TxnResult(response=ProducerIdResponse(E.none, done.producer_id, done.producer_epoch))

    # ---------------------------------------------------------------- markers written
    @_operation
    def complete(self, completion: Completion) -> TxnResult:
        """The markers of ``completion`` are written: append its COMPLETE_* record.

        The response is an ErrorCode: NONE once written; NOT_COORDINATOR if the shard
        was reloaded at another coordinator epoch since; INVALID_TXN_STATE,
        INVALID_PRODUCER_ID_MAPPING or PRODUCER_FENCED (nothing written) if the
        transaction is no longer the one the completion was made for."""
        if completion.coordinator_epoch != self.coordinator_epoch:
            return TxnResult(response=E.not_coordinator)
        meta = self.txns.get(completion.transactional_id)
        if meta is None or meta.state != (PREPARE_COMMIT if completion.commit else PREPARE_ABORT):
            return TxnResult(response=E.invalid_txn_state)
        if meta.producer_id != completion.producer_id:
            return TxnResult(response=E.invalid_producer_id_mapping)
        if meta.producer_epoch != completion.producer_epoch:
            return TxnResult(response=E.producer_fenced)
        self.emit(*completion.record)
        return TxnResult(response=E.none)

    # ---------------------------------------------------------------- expiry
    @_operation
    def expire(self, now: int | None = None) -> TxnResult:
        """Both of Kafka's periodic passes at ``now``: transactions ONGOING for longer than
        their timeout (``start + timeout < now``) are fenced and aborted
        (``abortTimedOutTransactions``), then ids idle for ``transactional.id.expiration.ms``
        in EMPTY or COMPLETE_* (``lastUpdate <= now - expiration``) get a tombstone.
        The response is ``{"aborted": [ids], "removed": [ids]}``."""
        now = self._now(now)
        aborted = self._abort_timed_out(now)
        removed = self._remove_expired(now)
        return TxnResult(response={"aborted": [c.transactional_id for c in aborted], "removed": removed})

    @_operation
    def abort_timed_out(self, now: int | None = None) -> TxnResult:
        """Only the timed-out transactions' pass of ``expire`` (Kafka runs it every 10 s)."""
        aborted = self._abort_timed_out(self._now(now))
        return TxnResult(response=[c.transactional_id for c in aborted])

    @_operation
    def remove_expired(self, now: int | None = None) -> TxnResult:
        """Only the expired ids' pass of ``expire`` (Kafka runs it every hour)."""
        return TxnResult(response=self._remove_expired(self._now(now)))

    def _abort_timed_out(self, now: int) -> list[Completion]:
        out = []
        for meta in list(self.txns.values()):
            if meta.state != ONGOING or meta.timeout_ms == INT_MAX or not meta.start_ms + meta.timeout_ms < now:
                continue
            try:
                completion = self._fence_and_abort(meta, now)
            except _IllegalTransition:
                continue  # Kafka logs and skips it; so does the next pass
            if isinstance(completion, Completion):
                out.append(completion)
        return out

    def _remove_expired(self, now: int) -> list[str]:
        removed = []
        limit = now - self.config.transactional_id_expiration_ms
        for meta in list(self.txns.values()):
            if meta.state in EXPIRABLE and meta.last_update_ms <= limit:
                self.emit(TransactionLogKey(meta.transactional_id), None)
                removed.append(meta.transactional_id)
        return removed

    def next_deadline(self) -> int | None:
        """The earliest time at which ``expire`` would do something, for the runtime's timer."""
        times = []
        expiration = self.config.transactional_id_expiration_ms
        for meta in self.txns.values():
            if meta.state == ONGOING and meta.timeout_ms != INT_MAX:
                times.append(meta.start_ms + meta.timeout_ms + 1)
            elif meta.state in EXPIRABLE:
                times.append(meta.last_update_ms + expiration)
        return min(times) if times else None

    # ---------------------------------------------------------------- DescribeTransactions / ListTransactions
    def describe(self, transactional_ids: Iterable[str]) -> list[TxnDescription]:
        """DescribeTransactions for ids of this shard (reads only)."""
        out = []
        for tid in transactional_ids:
            meta = self.txns.get(tid) if tid else None
            if not tid:
                out.append(TxnDescription(tid, E.invalid_request))
            elif meta is None or meta.state == DEAD:
                out.append(TxnDescription(tid, E.transactional_id_not_found))
            else:
                topics = tuple((topic, tuple(ps)) for topic, ps in meta.topics())
                out.append(TxnDescription(tid, E.none, meta.state.state_name, meta.timeout_ms, meta.start_ms, meta.producer_id,
                                          meta.producer_epoch, topics))
        return out

    def list_transactions(self, states_filter: Iterable[str] = (), producer_id_filter: Iterable[int] = (), duration_filter_ms: int = -1,
                          transactional_id_pattern: str | None = None, *, now: int | None = None) -> TxnListing:
        """ListTransactions for this shard (reads only). Unknown state names are reported back;
        ``duration_filter_ms`` >= 0 keeps transactions started more than that long ago;
        the pattern (v2, KIP-1152) must match the whole id; an empty one is no filter."""
        states_filter = list(states_filter)
        producer_ids = set(producer_id_filter)
        known = {TxnState.from_name(name) for name in states_filter} - {None}
        unknown = tuple(name for name in states_filter if TxnState.from_name(name) is None)
        pattern = None
        if transactional_id_pattern:
            try:
                pattern = re.compile(transactional_id_pattern)
            except re.error:
                return TxnListing(E.invalid_regular_expression)
        now = self._now(now) if duration_filter_ms >= 0 else 0
        out = []
        for meta in self.txns.values():
            if meta.state == DEAD:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if states_filter and meta.state not in known:
                continue
            if duration_filter_ms >= 0 and now - meta.start_ms <= duration_filter_ms:
                continue
            if pattern is not None and pattern.fullmatch(meta.transactional_id) is None:
                continue
            out.append((meta.transactional_id, meta.producer_id, meta.state.state_name))
        return TxnListing(E.none, unknown, tuple(out))

    list = list_transactions  # the brief's name for it; last in the class body, where it shadows the builtin
