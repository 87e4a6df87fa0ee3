"""Idempotent producer sequence rules (Kafka's ProducerAppendInfo)."""

from protocol.errors import ErrorCode

from broker.producers import ProducerStateTable

OK = ErrorCode.none


def table_with(pid=7, epoch=0, batches=((0, 4, 0, 4),)):
    t = ProducerStateTable()
    for first, last, off0, off1 in batches:
        t.update(pid, epoch, first, last, off0, off1, 0)
    return t


def test_unknown_producer_is_accepted_at_any_sequence():
    assert ProducerStateTable().check(1, 0, 42, 50) == (OK, None)


def test_next_sequence_is_accepted_and_a_gap_is_out_of_order():
    t = table_with()
    assert t.check(7, 0, 5, 9) == (OK, None)
    assert t.check(7, 0, 6, 9) == (ErrorCode.out_of_order_sequence_number, None)


def test_duplicate_of_any_of_the_last_five_batches_returns_its_offsets():
    t = table_with(batches=[(i * 10, i * 10 + 9, 100 + i * 10, 109 + i * 10) for i in range(6)])
    code, meta = t.check(7, 0, 50, 59)
    assert code is OK and (meta.first_offset, meta.last_offset) == (150, 159)
    # the oldest of six fell out of the cache: no longer recognised as a duplicate
    assert t.check(7, 0, 0, 9) == (ErrorCode.out_of_order_sequence_number, None)


def test_epochs_fence_and_reset():
    t = table_with(epoch=3)
    assert t.check(7, 2, 5, 9) == (ErrorCode.invalid_producer_epoch, None)
    assert t.check(7, 4, 5, 9) == (ErrorCode.out_of_order_sequence_number, None)
    assert t.check(7, 4, 0, 9) == (OK, None)


def test_sequence_wraps_at_int32_max():
    t = table_with(batches=[(2**31 - 10, 2**31 - 1, 0, 9)])
    assert t.check(7, 0, 0, 3) == (OK, None)


def test_a_marker_that_bumps_the_epoch_makes_the_producer_start_at_zero():
    # transactions V2: the marker carries the next epoch. A batch of the next transaction whose
    # predecessor (sequence 0) was refused with a retriable error must not be appended ahead of it,
    # or the predecessor's retry is out of order (franz-go's TestTxnEtl failed so)
    t = table_with(epoch=3, batches=[(0, 4, 0, 4), (5, 9, 5, 9)])
    t.end_txn(7, 4)
    assert t.check(7, 4, 1, 3) == (ErrorCode.out_of_order_sequence_number, None)
    assert t.check(7, 4, 0, 0) == (OK, None)
    t.update(7, 4, 0, 0, 11, 11, 0)
    assert t.check(7, 4, 1, 3) == (OK, None)


def test_a_marker_of_the_same_epoch_keeps_the_sequence():
    t = table_with(epoch=3)
    t.end_txn(7, 3)
    assert t.check(7, 3, 5, 9) == (OK, None)
    assert t.check(7, 3, 0, 9) == (ErrorCode.out_of_order_sequence_number, None)


def test_a_marker_of_a_producer_not_known_before_leaves_its_sequence_unknown():
    # after a restart the producer's batches may be older than the segments replayed
    t = ProducerStateTable()
    t.end_txn(7, 3)
    assert t.check(7, 3, 42, 50) == (OK, None)
    assert t.check(7, 2, 0, 0) == (ErrorCode.invalid_producer_epoch, None)
