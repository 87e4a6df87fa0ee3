"""The transaction coordinator shard (broker/txn): every operation's transitions and errors.

Expectations follow Kafka 4.x's TransactionCoordinator / TransactionMetadata
(the test names of TransactionCoordinatorTest are cited where one pins the
behaviour). Time is a plain number the tests move; producer ids come from a
counter; every record an operation returns is encoded into ``H.log`` so a
test can load a fresh shard from it.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import replace

import pytest

from broker.coordinator.common import CoordinatorError
from broker.txn.model import (
    Completion,
    Marker,
    ProducerIdResponse,
    TxnConfig,
    client_version_for_add_partitions,
    client_version_for_end_txn,
    fenced_error_for,
    txn_partition_for,
)
from broker.txn.shard import TxnShard
from broker.javahash import JavaHashTable, copied_set_order, fresh_set_order, group_by_topic, topic_partition_hash
from protocol.errors import ErrorCode
from protocol.txn_records import TransactionLogKey, TransactionLogValue, TxnState, decode_key, decode_value, encode_key, encode_value

E = ErrorCode
S = TxnState
T0 = 1_000_000
MAX = 32767


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


class H:
    """A shard with a manual clock, a producer id counter and the log it wrote."""

    def __init__(self, tv: int = 2, **config) -> None:
        self.now = T0
        self.pids = itertools.count(1000)
        self.fail_allocation: ErrorCode | None = None
        self.log: list[tuple[bytes, bytes | None]] = []
        self.shard = TxnShard(self._allocate, TxnConfig(transaction_version=tv, **config), coordinator_epoch=5, clock_ms=lambda: self.now)

    def _allocate(self) -> int:
        if self.fail_allocation is not None:
            raise CoordinatorError(self.fail_allocation)
        return next(self.pids)

    def keep(self, result):
        self.log += self.shard.encode(result.records)
        return result

    def init(self, tid="t", timeout=60_000, pid=-1, epoch=-1):
        return self.keep(self.shard.init_producer_id(tid, timeout, pid, epoch))

    def add(self, pid, epoch, parts=(("a", 0),), tid="t", **kw):
        return self.keep(self.shard.add_partitions(tid, pid, epoch, list(parts), **kw))

    def end(self, pid, epoch, commit=True, tv=None, tid="t"):
        return self.keep(self.shard.end_txn(tid, pid, epoch, commit, self.shard.config.transaction_version if tv is None else tv))

    def complete(self, completion):
        return self.keep(self.shard.complete(completion))

    def expire(self):
        return self.keep(self.shard.expire(self.now))

    def meta(self, tid="t"):
        return self.shard.txns[tid]

    def put(self, tid="t", **fields):
        """Put a state in place the way loading does (a replayed record)."""
        base = dict(producer_id=1000, producer_epoch=0, timeout_ms=60_000, status=S.EMPTY, partitions=None, last_update_ms=self.now,
                    start_ms=-1, prev_producer_id=-1, client_txn_version=self.shard.config.transaction_version)
        base.update(fields)
        value = TransactionLogValue(**base)
        raw = (encode_key(TransactionLogKey(tid)), encode_value(value, self.shard.config.value_version))
        self.log.append(raw)
        self.shard.replay_bytes(*raw)
        return self.meta(tid)

    def loaded(self) -> TxnShard:
        fresh = TxnShard(self._allocate, self.shard.config, coordinator_epoch=self.shard.coordinator_epoch, clock_ms=lambda: self.now)
        for key, value in self.log:
            fresh.replay_bytes(key, value)
        return fresh

    def started(self, tid="t", parts=(("a", 0),)):
        """A transaction in ONGOING; returns its (producer id, epoch)."""
        r = self.init(tid).response
        assert self.add(r.producer_id, r.producer_epoch, parts, tid=tid).response == {tuple(p): E.none for p in parts}
        return r.producer_id, r.producer_epoch


def only_record(result):
    assert len(result.records) == 1
    return result.records[0]


# ================================================================ InitProducerId


@pytest.mark.parametrize("tv, version", [(2, 1), (1, 1), (0, 0)])
def test_init_new_id_writes_empty(tv, version):
    h = H(tv)
    r = h.init("txn-1", 60_000)
    assert r.response == ProducerIdResponse(E.none, 1000, 0)
    key, value = only_record(r)
    assert key == TransactionLogKey("txn-1")
    m = h.meta("txn-1")
    assert (m.producer_id, m.producer_epoch, m.state, m.timeout_ms, m.start_ms, m.last_update_ms) == (1000, 0, S.EMPTY, 60_000, -1, T0)
    assert m.prev_producer_id == 1000  # Kafka's transit: the previous producer id is the current one, which is the new one
    head = i64(1000) + i16(0) + i32(60_000) + b"\x00"
    if version == 1:
        assert h.log == [(b"\x00\x00\x00\x05txn-1", i16(1) + head + b"\x00" + i64(T0) + i64(-1) + b"\x01\x00\x08" + i64(1000))]
    else:
        assert h.log == [(b"\x00\x00\x00\x05txn-1", i16(0) + head + i32(-1) + i64(T0) + i64(-1))]


def test_init_idempotent_producer_gets_an_id_and_writes_nothing():
    h = H()
    r = h.shard.init_producer_id(None, 0)
    assert r.response == ProducerIdResponse(E.none, 1000, 0) and r.records == []
    assert h.shard.init_producer_id(None, 0).response.producer_id == 1001
    assert h.shard.txns == {}


@pytest.mark.parametrize("timeout, ok", [(0, False), (-1, False), (1, True), (900_000, True), (900_001, False)])
def test_init_transaction_timeout_bounds(timeout, ok):
    h = H()
    r = h.init(timeout=timeout)
    assert r.response.error == (E.none if ok else E.invalid_transaction_timeout)
    assert bool(r.records) == ok


def test_init_timeout_bound_is_the_config():
    h = H(transaction_max_timeout_ms=1000)
    assert h.init(timeout=1001).response.error == E.invalid_transaction_timeout
    assert h.init(timeout=1000).response.error == E.none


def test_init_invalid_requests():
    h = H()
    assert h.init("").response == ProducerIdResponse(E.invalid_request)
    assert h.init("t", pid=5, epoch=-1).response == ProducerIdResponse(E.invalid_request)
    assert h.init("t", pid=-1, epoch=3).response == ProducerIdResponse(E.invalid_request)
    assert h.log == [] and next(h.pids) == 1000  # no producer id was spent


def test_reinit_bumps_the_epoch_and_resets_the_transaction_fields():
    h = H()
    h.init(timeout=10_000)
    h.now += 7
    r = h.init(timeout=20_000)
    assert r.response == ProducerIdResponse(E.none, 1000, 1)
    m = h.meta()
    assert (m.producer_epoch, m.last_producer_epoch, m.timeout_ms, m.last_update_ms, m.start_ms) == (1, -1, 20_000, T0 + 7, -1)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_reinit_from_every_finished_state(state):
    h = H()
    h.put(producer_epoch=4, status=state, partitions=None if state == S.EMPTY else [], start_ms=T0 - 5)
    r = h.init(timeout=10)
    assert r.response == ProducerIdResponse(E.none, 1000, 5)
    assert h.meta().state == S.EMPTY and h.meta().timeout_ms == 10


def test_kip360_recovery_with_current_epoch_then_retry():
    # testInitProducerIdWithCurrentEpochProvided
    h = H()
    h.put(producer_epoch=10)
    assert h.init(pid=1000, epoch=10).response == ProducerIdResponse(E.none, 1000, 11)
    assert h.meta().last_producer_epoch == 10
    # the producer did not get the answer and retries: same epoch back, no second bump
    r = h.init(pid=1000, epoch=10)
    assert r.response == ProducerIdResponse(E.none, 1000, 11)
    assert len(r.records) == 1 and h.meta().producer_epoch == 11


def test_kip360_stale_epoch_or_other_producer_is_fenced():
    # testInitProducerIdStaleCurrentEpochProvided, testFenceProducerWhenMappingExistsWithDifferentProducerId
    h = H()
    h.put(producer_epoch=10)
    assert h.init().response == ProducerIdResponse(E.none, 1000, 11)  # a new producer: last epoch forgotten
    assert h.init(pid=1000, epoch=10).response == ProducerIdResponse(E.producer_fenced)
    assert h.init(pid=999, epoch=11).response == ProducerIdResponse(E.producer_fenced)
    assert h.init(pid=1000, epoch=9).response == ProducerIdResponse(E.producer_fenced)


def test_kip360_retry_fails_after_the_partition_is_reloaded():
    # Kafka does not log the last epoch: a loaded coordinator fences the retry
    h = H()
    h.put(producer_epoch=10)
    h.init(pid=1000, epoch=10)
    h.shard = h.loaded()
    assert h.meta().last_producer_epoch == -1
    assert h.init(pid=1000, epoch=10).response == ProducerIdResponse(E.producer_fenced)


def test_kip360_unknown_id_with_producer_id_gets_a_new_one():
    # shouldGenerateNewProducerIdIfNoStateAndProducerIdAndEpochProvided
    h = H()
    assert h.init(pid=77, epoch=3).response == ProducerIdResponse(E.none, 1000, 0)


def test_exhausted_epoch_rotates_the_producer_id():
    # shouldGenerateNewProducerIdIfEpochsExhausted
    h = H()
    h.put(producer_id=10, producer_epoch=MAX - 1)
    r = h.init()
    assert r.response == ProducerIdResponse(E.none, 1000, 0)
    m = h.meta()
    assert (m.producer_id, m.producer_epoch, m.prev_producer_id, m.last_producer_epoch) == (1000, 0, 10, -1)


def test_retry_after_rotation_and_stale_epoch_after_rotation():
    # testRetryInitProducerIdAfterProducerIdRotation, testInitProducerIdWithInvalidEpochAfterProducerIdRotation
    h = H()
    h.put(producer_id=10, producer_epoch=MAX - 1)
    first = h.init(pid=10, epoch=MAX - 1).response
    assert first == ProducerIdResponse(E.none, 1000, 0)
    assert h.meta().last_producer_epoch == MAX - 1
    assert h.init(pid=10, epoch=MAX - 1).response == ProducerIdResponse(E.none, 1000, 0)
    assert h.init(pid=10, epoch=MAX - 2).response == ProducerIdResponse(E.producer_fenced)


def test_exhausted_epoch_with_another_expected_epoch_is_kafkas_illegal_state():
    # prepareIncrementProducerEpoch throws on an exhausted epoch: UNKNOWN_SERVER_ERROR, nothing written
    h = H()
    h.put(producer_epoch=MAX - 1, prev_producer_id=1000)
    r = h.init(pid=1000, epoch=5)
    assert r.response == ProducerIdResponse(E.unknown_server_error) and r.records == []


def test_producer_id_allocation_failure_is_the_answer():
    h = H()
    h.fail_allocation = E.coordinator_load_in_progress
    r = h.init()
    assert r.response == ProducerIdResponse(E.coordinator_load_in_progress)
    assert r.records == [] and h.shard.txns == {}


def test_init_while_completing_is_concurrent_transactions():
    # shouldWaitForCommitToCompleteOnHandleInitPidAndExistingTransactionInPrepare*State
    h = H()
    pid, epoch = h.started()
    h.end(pid, epoch, commit=True)
    r = h.init()
    assert r.response == ProducerIdResponse(E.concurrent_transactions) and r.records == []
    assert h.init(pid=pid, epoch=epoch + 1).response.error == E.concurrent_transactions


@pytest.mark.parametrize("tv", [0, 1, 2])
def test_init_fences_and_aborts_an_ongoing_transaction(tv):
    # shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState
    h = H(tv)
    pid, epoch = h.started(parts=[("a", 0), ("b", 3)])
    h.now += 100
    r = h.init()
    assert r.response == ProducerIdResponse(E.concurrent_transactions)
    _, value = only_record(r)
    assert (value.status, value.producer_id, value.producer_epoch) == (S.PREPARE_ABORT, pid, epoch + 1)
    assert value.start_ms == T0 and value.last_update_ms == T0 + 100
    m = h.meta()
    if tv >= 2:
        assert (m.client_txn_version, m.last_producer_epoch) == (2, epoch)
    else:
        assert (m.client_txn_version, m.last_producer_epoch) == (0, -1)
    [c] = r.completions
    assert c.commit is False and (c.producer_id, c.producer_epoch, c.coordinator_epoch) == (pid, epoch + 1, 5)
    assert sorted(c.partitions) == [("a", 0), ("b", 3)]
    assert all(mk.transaction_version == m.client_txn_version for mk in c.markers)
    # the old producer is fenced at once, the new one waits for the abort to complete
    assert h.add(pid, epoch).response == {("a", 0): E.concurrent_transactions}
    assert h.init().response.error == E.concurrent_transactions
    assert h.complete(c).response == E.none
    assert h.meta().state == S.COMPLETE_ABORT
    assert h.add(pid, epoch).response == {("a", 0): E.producer_fenced}
    assert h.init().response == ProducerIdResponse(E.none, pid, epoch + 2)


def test_fence_at_the_top_epoch_tv0_writes_the_last_epoch():
    # shouldUseLastEpochToFenceWhenEpochsAreExhausted
    h = H(0)
    h.put(producer_id=10, producer_epoch=MAX - 1, status=S.ONGOING, partitions=[("a", [0])], start_ms=T0, client_txn_version=0)
    r = h.init()
    _, value = only_record(r)
    assert (value.status, value.producer_epoch, value.next_producer_id, value.client_txn_version) == (S.PREPARE_ABORT, MAX, -1, 0)
    assert h.meta().last_producer_epoch == -1
    h.complete(r.completions[0])
    assert (h.meta().producer_id, h.meta().producer_epoch) == (10, MAX)
    assert h.init().response == ProducerIdResponse(E.none, 1000, 0)  # the producer's retry: a new producer id
    assert h.meta().prev_producer_id == 10


def test_fence_at_the_top_epoch_tv2_rotates_on_completion():
    # shouldRotateProducerIdWhenInitPidFencesOngoingTxnAtEpochOverflowBoundaryTV2 (Kafka 4.3)
    h = H(2)
    h.put(producer_id=10, producer_epoch=MAX - 1, status=S.ONGOING, partitions=[("a", [0])], start_ms=T0)
    r = h.init()
    assert r.response == ProducerIdResponse(E.concurrent_transactions)
    _, value = only_record(r)
    assert (value.producer_id, value.producer_epoch, value.next_producer_id, value.status) == (10, MAX, 1000, S.PREPARE_ABORT)
    [c] = r.completions
    assert (c.producer_id, c.producer_epoch) == (10, MAX)
    h.complete(c)
    m = h.meta()
    assert (m.state, m.producer_id, m.producer_epoch, m.prev_producer_id, m.next_producer_id) == (S.COMPLETE_ABORT, 1000, 0, 10, -1)
    # the old client's late abort is a retry over the overflow
    assert h.end(10, MAX - 1, commit=False).response == ProducerIdResponse(E.none, 1000, 0)
    # and so is its InitProducerId (shouldHandleTimeoutAtEpochOverflowBoundaryCorrectlyAndRetryInitProducerIdTV2)
    assert h.init(pid=10, epoch=MAX - 1).response == ProducerIdResponse(E.none, 1000, 0)


# ================================================================ AddPartitionsToTxn


def test_add_partitions_starts_the_transaction():
    h = H()
    h.init()
    h.now += 10
    r = h.add(1000, 0, [("a", 0), ("b", 1), ("a", 1)], client_txn_version=2)
    assert r.response == {("a", 0): E.none, ("b", 1): E.none, ("a", 1): E.none}
    m = h.meta()
    assert (m.state, m.start_ms, m.last_update_ms, m.client_txn_version) == (S.ONGOING, T0 + 10, T0 + 10, 2)
    assert m.partitions == {("a", 0), ("a", 1), ("b", 1)}
    # the record lists the partitions in the order of Kafka's hash set and groupingBy map
    assert h.log[-1][1] == (
        i16(1) + i64(1000) + i16(0) + i32(60_000) + b"\x01"
        + b"\x03" + b"\x02a\x03" + i32(1) + i32(0) + b"\x00" + b"\x02b\x02" + i32(1) + b"\x00"
        + i64(T0 + 10) + i64(T0 + 10) + b"\x02" + b"\x00\x08" + i64(1000) + b"\x02\x02" + i16(2)
    )


def test_add_known_partitions_writes_nothing_and_new_ones_keep_the_start():
    h = H()
    pid, epoch = h.started(parts=[("a", 0)])
    h.now += 5
    r = h.add(pid, epoch, [("a", 0)])
    assert r.response == {("a", 0): E.none} and r.records == []
    r = h.add(pid, epoch, [("a", 0), ("z", 9), ("z", 9)])
    assert r.response == {("a", 0): E.none, ("z", 9): E.none}
    m = h.meta()
    assert len(r.records) == 1 and m.start_ms == T0 and m.last_update_ms == T0 + 5 and m.partitions == {("a", 0), ("z", 9)}


@pytest.mark.parametrize("state", [S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_add_after_a_completed_transaction_starts_a_new_one(state):
    h = H()
    h.put(producer_epoch=3, status=state, partitions=[], start_ms=T0 - 100, last_update_ms=T0 - 50)
    h.now += 1
    assert h.add(1000, 3, [("x", 1)]).response == {("x", 1): E.none}
    m = h.meta()
    assert (m.state, m.start_ms, m.partitions) == (S.ONGOING, T0 + 1, frozenset({("x", 1)}))


def test_add_partitions_errors():
    h = H()
    assert h.add(1000, 0, tid="").response == {("a", 0): E.invalid_request}
    assert h.add(1000, 0, tid="nope").response == {("a", 0): E.invalid_producer_id_mapping}
    h.init()
    assert h.add(999, 0, [("a", 0), ("b", 0)]).response == {("a", 0): E.invalid_producer_id_mapping, ("b", 0): E.invalid_producer_id_mapping}
    assert h.add(1000, 1).response == {("a", 0): E.producer_fenced}
    assert h.add(1000, -1).response == {("a", 0): E.producer_fenced}
    assert h.meta().state == S.EMPTY and len(h.log) == 1


def test_add_while_completing_is_concurrent_transactions_before_the_other_checks():
    # shouldReturnConcurrentTxnOnAddPartitionsIfEndTxnV2EpochOverflowAndNotComplete
    h = H()
    pid, epoch = h.started()
    r = h.end(pid, epoch)
    for p, e in ((pid, epoch + 1), (pid, epoch), (pid + 1, 0)):
        assert h.add(p, e).response == {("a", 0): E.concurrent_transactions}
    h.complete(r.completions[0])
    assert h.add(pid, epoch + 1).response == {("a", 0): E.none}


def test_verify_only():
    h = H()
    pid, epoch = h.started(parts=[("a", 0)])
    r = h.add(pid, epoch, [("a", 0), ("b", 0)], verify_only=True)
    assert r.response == {("a", 0): E.none, ("b", 0): E.transaction_abortable} and r.records == []
    assert h.add(pid + 1, epoch, verify_only=True).response == {("a", 0): E.invalid_producer_id_mapping}
    assert h.add(pid, epoch + 1, verify_only=True).response == {("a", 0): E.producer_fenced}
    assert h.add(pid, epoch, tid="nope", verify_only=True).response == {("a", 0): E.invalid_producer_id_mapping}
    assert h.add(pid, epoch, tid="", verify_only=True).response == {("a", 0): E.invalid_request}
    h.end(pid, epoch, tv=0)
    assert h.add(pid, epoch, verify_only=True).response == {("a", 0): E.concurrent_transactions}
    # verification does not look at the pending completion first
    assert h.add(pid + 1, epoch, verify_only=True).response == {("a", 0): E.invalid_producer_id_mapping}
    assert h.meta().partitions == {("a", 0)}


def test_add_offsets_adds_the_groups_offsets_partition():
    h = H()
    h.init()
    # "g".hashCode() = 103: partition 103 % 50 = 3, or 103 % 7 = 5 with 7 partitions
    r = h.keep(h.shard.add_offsets("t", 1000, 0, "g"))
    assert r.response == E.none
    assert h.meta().partitions == {("__consumer_offsets", 3)} and h.meta().client_txn_version == 0
    r = h.keep(h.shard.add_offsets("t", 1000, 0, "g", offsets_partitions=7))
    assert r.response == E.none and ("__consumer_offsets", 5) in h.meta().partitions
    assert h.shard.add_offsets("t", 1000, 1, "g").response == E.producer_fenced
    assert h.shard.add_offsets("other", 1000, 0, "g").response == E.invalid_producer_id_mapping


# ================================================================ EndTxn, transaction version 0/1


def test_end_v1_commit_and_complete():
    h = H(1)
    pid, epoch = h.started(parts=[("a", 0), ("a", 1)])
    h.now += 20
    r = h.end(pid, epoch, commit=True, tv=0)
    assert r.response == ProducerIdResponse(E.none)  # TV1 answers no producer id
    _, value = only_record(r)
    assert (value.status, value.producer_epoch, value.client_txn_version, value.last_update_ms) == (S.PREPARE_COMMIT, epoch, 0, T0 + 20)
    [c] = r.completions
    assert c.markers == (
        Marker("a", 1, pid, epoch, True, 5, 0),
        Marker("a", 0, pid, epoch, True, 5, 0),
    )
    key, done = c.record
    assert key == TransactionLogKey("t")
    assert (done.status, done.partitions, done.producer_epoch, done.last_update_ms) == (S.COMPLETE_COMMIT, [], epoch, T0 + 20)
    h.now += 30
    r = h.complete(c)
    assert r.response == E.none and r.records == [c.record]
    assert h.meta().state == S.COMPLETE_COMMIT and h.meta().partitions == frozenset()


def test_end_v1_retries_and_invalid_states():
    h = H(0)
    pid, epoch = h.started()
    r = h.end(pid, epoch, commit=True, tv=0)
    assert h.end(pid, epoch, commit=True, tv=0).response == ProducerIdResponse(E.concurrent_transactions)
    assert h.end(pid, epoch, commit=False, tv=0).response == ProducerIdResponse(E.concurrent_transactions)
    h.complete(r.completions[0])
    n = len(h.log)
    assert h.end(pid, epoch, commit=True, tv=0).response == ProducerIdResponse(E.none)  # a retry after completion
    assert h.end(pid, epoch, commit=False, tv=0).response == ProducerIdResponse(E.invalid_txn_state)  # abort after commit
    assert len(h.log) == n
    assert h.end(pid, epoch - 1, commit=True, tv=0).response == ProducerIdResponse(E.producer_fenced)
    assert h.end(pid, epoch + 1, commit=True, tv=0).response == ProducerIdResponse(E.producer_fenced)
    assert h.end(pid + 5, epoch, commit=True, tv=0).response == ProducerIdResponse(E.invalid_producer_id_mapping)
    assert h.end(pid, epoch, tid="other").response == ProducerIdResponse(E.invalid_producer_id_mapping)
    assert h.end(pid, epoch, tid="").response == ProducerIdResponse(E.invalid_request)


def test_end_v1_abort_then_commit_is_invalid_and_empty_cannot_end():
    h = H(0)
    pid, epoch = h.started()
    h.complete(h.end(pid, epoch, commit=False).completions[0])
    assert h.end(pid, epoch, commit=False).response == ProducerIdResponse(E.none)
    assert h.end(pid, epoch, commit=True).response == ProducerIdResponse(E.invalid_txn_state)
    h.init()
    for commit in (True, False):
        assert h.end(pid, epoch + 1, commit=commit).response == ProducerIdResponse(E.invalid_txn_state)


# ================================================================ EndTxn, transaction version 2


def test_end_v2_bumps_the_epoch_and_answers_it():
    h = H(2)
    pid, epoch = h.started(parts=[("a", 0)])
    r = h.end(pid, epoch, commit=True, tv=2)
    assert r.response == ProducerIdResponse(E.none, pid, epoch + 1)
    _, value = only_record(r)
    assert (value.status, value.producer_epoch, value.client_txn_version, value.start_ms) == (S.PREPARE_COMMIT, epoch + 1, 2, T0)
    assert h.meta().last_producer_epoch == epoch
    [c] = r.completions
    assert c.markers == (Marker("a", 0, pid, epoch + 1, True, 5, 2),)
    h.complete(c)
    m = h.meta()
    assert (m.state, m.producer_epoch, m.client_txn_version) == (S.COMPLETE_COMMIT, epoch + 1, 2)
    # the next transaction runs with the new epoch; the old one is fenced
    assert h.add(pid, epoch).response == {("a", 0): E.producer_fenced}
    assert h.add(pid, epoch + 1, client_txn_version=2).response == {("a", 0): E.none}


def test_end_v2_while_completing_is_concurrent_transactions():
    # shouldReturnInvalidTxnRequestOnEndTxnV2IfNotEndTxnV2Retry (Kafka 4.3: CONCURRENT_TRANSACTIONS for every PREPARE_*)
    h = H(2)
    pid, epoch = h.started()
    h.end(pid, epoch, commit=True)
    for e, commit in ((epoch, True), (epoch + 1, True), (epoch, False), (epoch + 7, True)):
        r = h.end(pid, e, commit=commit)
        assert r.response == ProducerIdResponse(E.concurrent_transactions) and r.records == []


# Kafka's table for TV2 (TransactionCoordinator.endTransaction): state x result x (retry, current)
# PF = PRODUCER_FENCED, ITS = INVALID_TXN_STATE, NONE = no bump, EB = epoch bump
TV2_TABLE = {
    (S.EMPTY, False): ("PF", "EB"),
    (S.EMPTY, True): ("PF", "ITS"),
    (S.COMPLETE_ABORT, False): ("NONE", "EB"),
    (S.COMPLETE_ABORT, True): ("ITS", "ITS"),
    (S.COMPLETE_COMMIT, False): ("ITS", "EB"),
    (S.COMPLETE_COMMIT, True): ("NONE", "ITS"),
}


@pytest.mark.parametrize("state, commit", list(TV2_TABLE))
@pytest.mark.parametrize("retry", [True, False])
def test_end_v2_table(state, commit, retry):
    h = H(2)
    h.put(producer_epoch=4, status=state, partitions=None if state == S.EMPTY else [], start_ms=-1 if state == S.EMPTY else T0 - 9)
    h.now += 3
    expected = TV2_TABLE[(state, commit)][0 if retry else 1]
    r = h.end(1000, 3 if retry else 4, commit=commit, tv=2)
    if expected == "PF":
        assert r.response == ProducerIdResponse(E.producer_fenced) and r.records == []
    elif expected == "ITS":
        assert r.response == ProducerIdResponse(E.invalid_txn_state) and r.records == []
    elif expected == "NONE":
        assert r.response == ProducerIdResponse(E.none, 1000, 4) and r.records == []
    else:
        assert r.response == ProducerIdResponse(E.none, 1000, 5)
        _, value = only_record(r)
        assert (value.status, value.producer_epoch, value.start_ms, value.partitions) == (S.PREPARE_ABORT, 5, T0 + 3, [])
        [c] = r.completions
        assert c.markers == () and c.commit is False
        h.complete(c)
        assert (h.meta().state, h.meta().producer_epoch) == (S.COMPLETE_ABORT, 5)


def test_end_v2_epoch_errors():
    # shouldReturnInvalidEpochOnEndTxnWhenEpochIsLarger / IsSmaller
    h = H(2)
    h.put(producer_epoch=2, status=S.COMPLETE_COMMIT, partitions=[], start_ms=T0)
    assert h.end(1000, 3, commit=True).response == ProducerIdResponse(E.producer_fenced)
    assert h.end(1000, 0, commit=True).response == ProducerIdResponse(E.producer_fenced)
    h.put(producer_epoch=2, status=S.ONGOING, partitions=[("a", [0])], start_ms=T0)
    assert h.end(1000, 1, commit=True).response == ProducerIdResponse(E.producer_fenced)  # no retry while ongoing
    assert h.end(1001, 2, commit=True).response == ProducerIdResponse(E.invalid_producer_id_mapping)


def test_end_v2_epoch_overflow_rotates_the_producer_id():
    # shouldGenerateNewProducerIdIfEpochsExhaustedV2, shouldReturnOkOnEndTxnV2IfEndTxnV2RetryEpochOverflow
    h = H(2)
    h.put(producer_id=10, producer_epoch=MAX - 1, status=S.ONGOING, partitions=[("a", [0])], start_ms=T0)
    r = h.end(10, MAX - 1, commit=True)
    assert r.response == ProducerIdResponse(E.none, 1000, 0)
    _, value = only_record(r)
    assert (value.producer_id, value.producer_epoch, value.next_producer_id) == (10, MAX, 1000)
    [c] = r.completions
    assert c.markers == (Marker("a", 0, 10, MAX, True, 5, 2),)
    # the producer already uses the next id: it waits for the completion
    assert h.add(1000, 0).response == {("a", 0): E.concurrent_transactions}
    assert h.end(10, MAX - 1, commit=True).response == ProducerIdResponse(E.concurrent_transactions)
    h.complete(c)
    m = h.meta()
    assert (m.producer_id, m.producer_epoch, m.prev_producer_id, m.next_producer_id, m.last_producer_epoch) == (1000, 0, 10, -1, MAX - 1)
    assert h.end(10, MAX - 1, commit=True).response == ProducerIdResponse(E.none, 1000, 0)  # the retry
    assert h.end(10, MAX - 1, commit=False).response == ProducerIdResponse(E.invalid_txn_state)
    assert h.add(1000, 0).response == {("a", 0): E.none}


def test_end_v2_overflow_allocation_failure_writes_nothing():
    h = H(2)
    h.put(producer_epoch=MAX - 1, status=S.ONGOING, partitions=[("a", [0])], start_ms=T0)
    h.fail_allocation = E.not_coordinator
    r = h.end(1000, MAX - 1, commit=True)
    assert r.response == ProducerIdResponse(E.not_coordinator) and r.records == [] and h.meta().state == S.ONGOING


def test_end_v2_abort_at_the_broken_top_epoch_does_not_overflow():
    h = H(2)
    h.put(producer_epoch=MAX, status=S.ONGOING, partitions=[("a", [0])], start_ms=T0)
    r = h.end(1000, MAX, commit=False)
    assert r.response.error == E.none
    assert only_record(r)[1].producer_epoch == MAX and only_record(r)[1].next_producer_id == 1000
    h2 = H(2)
    h2.put(producer_epoch=MAX, status=S.ONGOING, partitions=[("a", [0])], start_ms=T0)
    assert h2.end(1000, MAX, commit=True).response == ProducerIdResponse(E.unknown_server_error)  # Kafka: illegal epoch


def test_mixed_versions_v1_end_after_v2_transaction():
    h = H(2)
    pid, epoch = h.started()
    r = h.end(pid, epoch, commit=False, tv=0)  # an older client on a TV2 cluster
    assert r.response == ProducerIdResponse(E.none)
    assert only_record(r)[1].producer_epoch == epoch and h.meta().client_txn_version == 0


# ================================================================ complete


def test_complete_checks_what_it_completes():
    h = H(2)
    pid, epoch = h.started()
    c = h.end(pid, epoch).completions[0]
    stale = Completion(c.transactional_id, c.producer_id, c.producer_epoch, c.commit, 4, c.transaction_version, c.markers, c.record)
    assert h.complete(stale).response == E.not_coordinator
    wrong = Completion(c.transactional_id, c.producer_id, c.producer_epoch, False, 5, c.transaction_version, c.markers, c.record)
    assert h.complete(wrong).response == E.invalid_txn_state
    other = Completion(c.transactional_id, c.producer_id + 1, c.producer_epoch, True, 5, 2, c.markers, c.record)
    assert h.complete(other).response == E.invalid_producer_id_mapping
    older = Completion(c.transactional_id, c.producer_id, c.producer_epoch - 1, True, 5, 2, c.markers, c.record)
    assert h.complete(older).response == E.producer_fenced
    assert h.meta().state == S.PREPARE_COMMIT
    assert c in {c}  # completions can be kept in sets and dicts by the runtime
    assert h.complete(c).response == E.none
    r = h.complete(c)
    assert r.response == E.invalid_txn_state and r.records == []


# ================================================================ expiry


@pytest.mark.parametrize("tv", [0, 2])
def test_timeout_to_the_millisecond(tv):
    # shouldAbortExpiredTransactionsInOngoingStateAndBumpEpoch
    h = H(tv)
    h.init(timeout=500)
    h.now = T0 + 1
    h.add(1000, 0, [("a", 0)])
    assert h.shard.next_deadline() == T0 + 1 + 500 + 1
    h.now = T0 + 1 + 500
    r = h.expire()
    assert r.records == [] and r.response == {"aborted": [], "removed": []}
    h.now += 1
    r = h.expire()
    assert r.response == {"aborted": ["t"], "removed": []}
    _, value = only_record(r)
    assert (value.status, value.producer_epoch, value.last_update_ms, value.start_ms) == (S.PREPARE_ABORT, 1, h.now, T0 + 1)
    assert value.client_txn_version == (2 if tv >= 2 else 0)
    assert h.meta().last_producer_epoch == (0 if tv >= 2 else -1)
    [c] = r.completions
    assert c.markers == (Marker("a", 0, 1000, 1, False, 5, value.client_txn_version),)
    # the timed-out producer learns it was fenced
    h.complete(c)
    assert h.end(1000, 0, commit=True, tv=0).response == ProducerIdResponse(E.producer_fenced)
    assert h.add(1000, 0).response == {("a", 0): E.producer_fenced}


def test_timeout_leaves_other_states_alone():
    # shouldOnlyConsiderTransactionsInTheOngoingStateToAbort
    h = H()
    pid, epoch = h.started("prepared")
    h.end(pid, epoch, tid="prepared")
    h.init("empty")
    h.started("young")
    h.now += 60_001
    h.started("fresh")
    r = h.expire()
    assert r.response["aborted"] == ["young"]


def test_two_phase_commit_transactions_never_time_out():
    h = H()
    h.put(status=S.ONGOING, partitions=[("a", [0])], start_ms=0, timeout_ms=2**31 - 1)
    h.now = 2**40
    assert h.expire().response["aborted"] == []


def test_transactional_id_expiration():
    h = H()
    h.init("done")
    pid, epoch = h.started("open")
    h.init("aborted")
    week = 7 * 24 * 3600 * 1000
    assert h.shard.next_deadline() == T0 + 60_000 + 1
    h.now = T0 + week - 1
    r = h.shard.remove_expired()
    assert r.response == [] and r.records == []
    h.now = T0 + week
    r = h.expire()
    assert sorted(r.response["removed"]) == ["aborted", "done"]
    assert sorted(r.response["aborted"]) == ["open"]
    assert [k for k, v in r.records if v is None] == [TransactionLogKey("done"), TransactionLogKey("aborted")]
    assert set(h.shard.txns) == {"open"}
    assert (encode_key(TransactionLogKey("done")), None) in h.log
    # an expired id starts over with a new producer id
    assert h.init("done").response == ProducerIdResponse(E.none, 1003, 0)


def test_expiration_setting_and_completing_transactions_stay():
    h = H(transactional_id_expiration_ms=1000)
    pid, epoch = h.started()
    h.end(pid, epoch)
    h.now += 10**9
    assert h.shard.remove_expired().response == []
    assert h.shard.abort_timed_out().response == []


# ================================================================ DescribeTransactions / ListTransactions


def test_describe():
    h = H()
    h.started("t", parts=[("b", 1), ("a", 0), ("a", 1)])
    h.init("idle")
    [t, idle, missing, empty] = h.shard.describe(["t", "idle", "missing", ""])
    assert (t.error, t.state, t.timeout_ms, t.start_ms, t.producer_id, t.producer_epoch) == (E.none, "Ongoing", 60_000, T0, 1000, 0)
    assert t.topics == (("a", (1, 0)), ("b", (1,)))  # the hash set's order, topics as they first appear
    assert (idle.state, idle.start_ms, idle.topics) == ("Empty", -1, ())
    assert missing.error == E.transactional_id_not_found and missing.state == ""
    assert empty.error == E.invalid_request


def test_list_filters():
    h = H()
    h.started("t0")
    h.now += 1000
    h.started("my-special-0")
    pid, epoch = h.started("t2")
    h.end(pid, epoch, tid="t2")
    h.now += 1000
    h.init("e")
    listing = h.shard.list()
    assert listing.error == E.none and listing.unknown_state_filters == ()
    assert {t for t, _, _ in listing.transactions} == {"t0", "my-special-0", "t2", "e"}
    assert {(t, s) for t, _, s in h.shard.list(["Ongoing", "Bogus"]).transactions} == {("t0", "Ongoing"), ("my-special-0", "Ongoing")}
    assert h.shard.list(["Ongoing", "Bogus"]).unknown_state_filters == ("Bogus",)
    assert h.shard.list(["Bogus"]).transactions == ()
    assert {t for t, _, _ in h.shard.list(producer_id_filter=[1002]).transactions} == {"t2"}
    # duration: kept when started more than that long ago (now - start > duration)
    assert {t for t, _, _ in h.shard.list(duration_filter_ms=2000).transactions} == {"e"}  # start -1: "forever"
    assert {t for t, _, _ in h.shard.list(duration_filter_ms=1999).transactions} == {"t0", "e"}
    assert {t for t, _, _ in h.shard.list(duration_filter_ms=999).transactions} == {"t0", "my-special-0", "t2", "e"}
    assert {t for t, _, _ in h.shard.list(transactional_id_pattern=".*special-.*").transactions} == {"my-special-0"}
    assert h.shard.list(transactional_id_pattern="special").transactions == ()  # the whole id must match
    assert len(h.shard.list(transactional_id_pattern="").transactions) == 4
    assert h.shard.list(transactional_id_pattern="(ab(cd").error == E.invalid_regular_expression
    assert h.shard.list_transactions(["CompleteCommit"]).transactions == ()


# ================================================================ replay, loading, rollback


def scenario(h: H) -> None:
    """A bit of everything, spread over time."""
    h.init("gone")
    h.now += 1
    h.started("ongoing", parts=[("orders", 3), ("orders", 1), ("pay", 0)])
    h.now += 5
    pid, epoch = h.started("committing", parts=[("a", 0)])
    assert h.end(pid, epoch, commit=True, tid="committing").response.error == E.none
    h.now += 5
    pid, epoch = h.started("committed", parts=[("a", 1)])
    h.complete(h.end(pid, epoch, commit=True, tid="committed").completions[0])
    h.now += 5
    pid, epoch = h.started("aborted", parts=[("b", 2)])
    h.complete(h.end(pid, epoch, commit=False, tid="aborted").completions[0])
    h.init("empty")
    h.now += 5
    h.started("fenced", parts=[("c", 0)])
    h.init("fenced")
    h.put("overflow", producer_epoch=MAX - 1, status=S.ONGOING, partitions=[("o", [0])], start_ms=h.now)
    h.complete(h.end(1000, MAX - 1, tid="overflow").completions[0])
    assert h.keep(h.shard.run(lambda s: s.remove_expired(T0 + 7 * 24 * 3600 * 1000))).response == ["gone"]


def persisted(txns, tv):
    """What the log holds of a live state: at v0 (no tagged fields) not the previous and next producer ids,
    which Kafka then loads as -1 too."""
    if tv >= 1:
        return txns
    return {tid: replace(m, prev_producer_id=-1, next_producer_id=-1) for tid, m in txns.items()}


@pytest.mark.parametrize("tv", [0, 1, 2])
def test_loading_the_log_gives_the_same_state(tv):
    h = H(tv)
    scenario(h)
    assert set(h.shard.txns) == {"ongoing", "committing", "committed", "aborted", "empty", "fenced", "overflow"}
    loaded = h.loaded()
    if tv == 0:
        assert any(m.prev_producer_id != -1 for m in h.shard.txns.values())
    assert loaded.txns == persisted(h.shard.txns, tv)
    for tid, meta in h.shard.txns.items():
        assert loaded.txns[tid].partition_order == meta.partition_order
        assert encode_value(loaded.txns[tid].to_value(), loaded.config.value_version) == encode_value(meta.to_value(), h.shard.config.value_version)
    # the same completions come back for what was left completing
    pending = {c.transactional_id for c in loaded.on_loaded(h.now)}
    assert pending == {"committing", "fenced"}
    assert loaded.on_loaded(h.now) == h.shard.on_loaded(h.now)
    # and the two shards answer the next operations alike, record for record
    a, b = h.shard, loaded
    pid = a.txns["ongoing"].producer_id
    ops = (
        lambda s: s.add_partitions("ongoing", pid, 0, [("zz", 5)]),
        lambda s: s.end_txn("ongoing", pid, 0, True, tv),
        lambda s: s.init_producer_id("empty", 10),
        lambda s: s.expire(h.now + 10**10),
    )
    for op in ops:
        ra, rb = a.run(op), b.run(op)
        assert ra.response == rb.response
        assert a.encode(ra.records) == b.encode(rb.records) and ra.records
    assert persisted(a.txns, tv) == persisted(b.txns, tv)
    assert a.txns["ongoing"].state == S.PREPARE_COMMIT and a.txns["ongoing"].partitions == {("orders", 3), ("orders", 1), ("pay", 0), ("zz", 5)}


def test_replayed_records_are_the_only_state():
    h = H()
    scenario(h)
    fresh = TxnShard(lambda: 0)
    for key, value in h.log:
        fresh.replay(decode_key(key), decode_value(value))
    assert fresh.txns == h.shard.txns


def test_unknown_record_types_are_skipped():
    h = H()
    h.init()
    shard = h.loaded()
    shard.replay_bytes(b"\x00\x01\x00\x01x", b"\x00\x00")
    assert shard.skipped_records == 1 and set(shard.txns) == {"t"}


def test_a_failed_operation_is_rolled_back():
    h = H()
    pid, epoch = h.started()
    before = dict(h.shard.txns)

    def op(shard):
        shard.add_partitions("t", pid, epoch, [("new", 1)])
        shard.init_producer_id("other", 10)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        h.shard.run(op)
    assert h.shard.txns == before and "other" not in h.shard.txns
    assert h.shard._op is None
    # operations compose inside one run: records in order
    r = h.shard.run(lambda s: (s.add_partitions("t", pid, epoch, [("new", 1)]), s.init_producer_id("other", 10))[1])
    assert [k.transactional_id for k, _ in r.records] == ["t", "other"]
    with pytest.raises(RuntimeError):
        h.shard.run(lambda s: s.run(lambda s2: None))


def test_emit_outside_an_operation_is_refused():
    with pytest.raises(RuntimeError):
        TxnShard(lambda: 0).emit(TransactionLogKey("t"), None)


def test_an_empty_record_keeps_no_partitions_and_an_odd_state_is_refused():
    h = H()
    h.put(status=S.EMPTY, partitions=[("a", [1])])  # Kafka never writes this; loading ignores the list
    assert h.meta().partitions == frozenset()
    h.put(status=S.DEAD)
    assert h.shard.describe(["t"])[0].error == E.transactional_id_not_found
    assert h.shard.list().transactions == ()
    assert h.init().response == ProducerIdResponse(E.unknown_server_error)
    assert h.add(1000, 0).response == {("a", 0): E.unknown_server_error}
    assert h.end(1000, 0).response == ProducerIdResponse(E.unknown_server_error)


# ================================================================ Java hash order


def test_topic_partition_hash():
    # 31 * (31 + partition) + "a".hashCode() (97); int32 overflow wraps
    assert topic_partition_hash("a", 0) == 1058
    assert topic_partition_hash("a", 1) == 1089
    assert topic_partition_hash("a", 2**31 - 1) == (31 * (31 + 2**31 - 1) + 97 + 2**31) % 2**32 - 2**31


def test_hash_set_order_is_by_bucket_then_insertion():
    # buckets in a 16-slot table: (a,0) -> 1058 % 16 = 2, (a,1) -> 1 , (a,2) -> 1120 % 16 = 0, (b,1) -> 1090 % 16 = 2
    assert fresh_set_order([("a", 0), ("a", 1), ("a", 2)]) == [("a", 2), ("a", 1), ("a", 0)]
    assert fresh_set_order([("b", 1), ("a", 0)]) == [("b", 1), ("a", 0)]
    assert fresh_set_order([("a", 0), ("b", 1)]) == [("a", 0), ("b", 1)]


def test_hash_set_resizes_after_the_thirteenth_key():
    # topics "a".."l" at partition 0: hashes 961 + 97..108 = 1058..1069, buckets 2..13 of 16;
    # a 13th key, ("q", 0) = 1074, passes the threshold (12): 32 buckets, where it is in bucket 18, the last one used
    table = JavaHashTable()
    for topic in "abcdefghijkl":
        table.put((topic, 0), topic_partition_hash(topic, 0))
    assert table.capacity == 16
    table.put(("q", 0), topic_partition_hash("q", 0))
    assert table.capacity == 32 and table.keys()[-1] == ("q", 0)


def test_group_by_topic_inserts_at_the_head_and_resizes_late():
    # "Aa" and "BB" have the same hashCode (2112): computeIfAbsent puts the later one first
    assert group_by_topic([("Aa", 0), ("BB", 0), ("Aa", 1)]) == [("BB", [0]), ("Aa", [0, 1])]
    # "a".."l" are buckets 1..12 of 16; "q" (113) is bucket 1 of 16: 13 keys do not resize a computeIfAbsent map yet
    topics = list("abcdefghijkl") + ["q"]
    assert [t for t, _ in group_by_topic([(t, 0) for t in topics])] == ["q"] + list("abcdefghijkl")
    # a 14th key resizes first (size 13 > 12): "q" moves to bucket 17, "r" (114) goes to 18
    assert [t for t, _ in group_by_topic([(t, 0) for t in topics + ["r"]])] == list("abcdefghijkl") + ["q", "r"]


def test_copy_sizes_like_jdk19():
    # new HashSet<>(c) with 12 keys: HashMap.newHashMap(12) -> 16 slots, so 4 more keys resize once, to 32
    order = fresh_set_order([("t", p) for p in range(12)])
    grown = copied_set_order(order, [("t", p) for p in range(12, 16)])
    assert sorted(grown) == [("t", p) for p in range(16)]
    big = JavaHashTable.for_mappings(12)
    assert big.initial == 16
    assert JavaHashTable.for_mappings(13).initial == 32


# ================================================================ helpers for the wiring


def test_request_version_helpers():
    assert [client_version_for_end_txn(v) for v in range(6)] == [0, 0, 0, 0, 0, 2]
    assert [client_version_for_add_partitions(v) for v in range(6)] == [0, 0, 0, 0, 2, 2]
    assert fenced_error_for(22, 3, E.producer_fenced) == E.invalid_producer_epoch
    assert fenced_error_for(22, 4, E.producer_fenced) == E.producer_fenced
    for api in (24, 25, 26):
        assert fenced_error_for(api, 1, E.producer_fenced) == E.invalid_producer_epoch
        assert fenced_error_for(api, 2, E.producer_fenced) == E.producer_fenced
        assert fenced_error_for(api, 0, E.concurrent_transactions) == E.concurrent_transactions
    assert txn_partition_for("g", 50) == 3


def test_results_without_a_clock_need_a_time():
    shard = TxnShard(lambda: 1)
    with pytest.raises(ValueError):
        shard.init_producer_id("t", 10)
    assert shard.init_producer_id("t", 10, now=5).response == ProducerIdResponse(E.none, 1, 0)


def test_allocation_failures_on_rotation_and_fence_write_nothing():
    h = H(2)
    h.put(producer_id=10, producer_epoch=MAX - 1)
    h.put("o", producer_id=11, producer_epoch=MAX - 1, status=S.ONGOING, partitions=[("a", [0])], start_ms=T0)
    h.fail_allocation = E.coordinator_not_available
    for tid in ("t", "o"):
        r = h.init(tid)
        assert r.response == ProducerIdResponse(E.coordinator_not_available) and r.records == [] and r.completions == []
    assert (h.meta().state, h.meta("o").state) == (S.EMPTY, S.ONGOING)
    assert h.shard.init_producer_id(None, 0).response == ProducerIdResponse(E.coordinator_not_available)


def test_reset_and_an_empty_shards_deadline():
    h = H()
    assert h.shard.next_deadline() is None
    h.init()
    assert h.shard.next_deadline() == T0 + 7 * 24 * 3600 * 1000
    h.shard.reset()
    assert h.shard.txns == {} and h.shard.next_deadline() is None


def test_a_composed_run_returns_every_completion():
    h = H()
    p1, e1 = h.started("x")
    p2, e2 = h.started("y")
    r = h.shard.run(lambda s: [s.end_txn("x", p1, e1, True, 2), s.end_txn("y", p2, e2, False, 2)][0])
    assert r.response == ProducerIdResponse(E.none, p1, e1 + 1)
    assert [(c.transactional_id, c.commit) for c in r.completions] == [("x", True), ("y", False)]
    assert [k.transactional_id for k, _ in r.records] == ["x", "y"]
