"""The share partition state machine (broker/share/partition.py) on a manual clock: no sleeping."""

from __future__ import annotations

import pytest

from broker.coordinator.common import Timers
from broker.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    AckError,
    Limits,
    SharePartition,
)
from protocol.errors import ErrorCode
from protocol.share_records import StateBatch


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def sp():
    clock = Clock()
    timers = Timers(clock)
    writes = []
    limits = Limits(lock_duration_ms=30_000, delivery_count_limit=3, max_record_locks=10)
    p = SharePartition("g/t/0", lambda: limits, timers, lambda start, batches, done: writes.append((start, batches)))
    p.load(0, [])
    p.clock, p.timers_, p.writes, p.lims = clock, timers, writes, limits
    return p


def _tick(sp, ms: int) -> None:
    sp.clock.now += ms
    sp.timers_.fire_due()


def test_acquire_then_accept_moves_the_start(sp):
    assert sp.acquire("m1", [(0, 4)], 100) == [(0, 4, 1)]
    assert sp.state_of(2) == (ACQUIRED, 1)
    assert sp.writes == []  # acquiring is not persisted, as in Kafka
    sp.acknowledge("m1", [(0, 2, [ACCEPT])])
    assert sp.start == 3 and sp.next_fetch_offset() == 5
    assert sp.writes == [(0, [StateBatch(0, 2, ACKNOWLEDGED, 1)])]  # the start before the change, as Kafka writes it


def test_lock_expiry_redelivers_with_count_plus_one(sp):
    sp.acquire("m1", [(0, 1)], 100)
    _tick(sp, 29_999)
    assert sp.state_of(0) == (ACQUIRED, 1)
    _tick(sp, 1)
    assert sp.state_of(0) == (AVAILABLE, 1) and sp.next_fetch_offset() == 0
    assert sp.writes[-1] == (0, [StateBatch(0, 1, AVAILABLE, 1)])
    assert sp.acquire("m2", [(0, 1)], 100) == [(0, 1, 2)]
    # the first member's acknowledgement comes too late
    with pytest.raises(AckError) as err:
        sp.acknowledge("m1", [(0, 1, [ACCEPT])])
    assert err.value.code == ErrorCode.invalid_record_state


def test_release_redelivers_and_the_limit_archives_a_poison_record(sp):
    for delivery in (1, 2):
        assert sp.acquire("m1", [(0, 0)], 100) == [(0, 0, delivery)]
        sp.acknowledge("m1", [(0, 0, [RELEASE])])
        assert sp.state_of(0) == (AVAILABLE, delivery)
    assert sp.acquire("m1", [(0, 0)], 100) == [(0, 0, 3)]
    sp.acknowledge("m1", [(0, 0, [RELEASE])])  # the third delivery was the last (limit 3)
    assert sp.state_of(0) is None and sp.start == 1  # archived, and the start moved past it
    assert sp.writes[-1] == (0, [StateBatch(0, 0, ARCHIVED, 3)])
    assert sp.acquire("m1", [(0, 0)], 100) == []


def test_poison_record_archived_after_lock_timeouts(sp):
    for delivery in (1, 2, 3):
        assert sp.acquire("m1", [(0, 1)], 100) == [(0, 1, delivery)]
        _tick(sp, 30_000)
    assert sp.start == 2 and sp.entries == {}


def test_reject_archives(sp):
    sp.acquire("m1", [(0, 3)], 100)
    sp.acknowledge("m1", [(1, 1, [REJECT])])
    assert sp.state_of(1) == (ARCHIVED, 1) and sp.start == 0
    sp.acknowledge("m1", [(0, 0, [ACCEPT]), (2, 3, [ACCEPT, GAP])])
    assert sp.start == 4


def test_max_record_locks_bound_the_window(sp):
    assert sp.acquire("m1", [(0, 99)], 1000) == [(0, 9, 1)]
    assert not sp.can_acquire()
    assert sp.acquire("m2", [(10, 20)], 1000) == []
    sp.acknowledge("m1", [(0, 4, [ACCEPT])])
    assert sp.acquire("m2", [(10, 20)], 1000) == [(10, 14, 1)]


def test_max_records_and_per_offset_types(sp):
    assert sp.acquire("m1", [(0, 9)], 4) == [(0, 3, 1)]
    sp.acknowledge("m1", [(0, 3, [ACCEPT, RELEASE, REJECT, RELEASE])])
    assert (sp.state_of(1), sp.state_of(2), sp.state_of(3)) == ((AVAILABLE, 1), (ARCHIVED, 1), (AVAILABLE, 1))
    # redelivery mixes counts: ranges split where the delivery count changes
    assert sp.acquire("m2", [(0, 9)], 100) == [(1, 1, 2), (3, 3, 2), (4, 9, 1)]


def test_bad_acknowledgements_change_nothing(sp):
    sp.acquire("m1", [(0, 4)], 100)
    for batches in ([(3, 7, [ACCEPT])], [(0, 0, [ACCEPT]), (100, 100, [ACCEPT])], [(-5, 0, [ACCEPT])]):
        with pytest.raises(AckError):
            sp.acknowledge("m1", batches)
    with pytest.raises(AckError) as err:
        sp.acknowledge("m2", [(0, 0, [ACCEPT])])
    assert err.value.message == "Member is not the owner of offset"
    assert all(sp.state_of(o) == (ACQUIRED, 1) for o in range(5)) and sp.writes == []


def test_persist_failure_leaves_state_unchanged(sp):
    sp.acquire("m1", [(0, 1)], 100)

    def fail(start, batches, done):
        raise RuntimeError("coordinator down")

    sp.persist = fail
    with pytest.raises(RuntimeError):
        sp.acknowledge("m1", [(0, 1, [ACCEPT])])
    assert sp.state_of(0) == (ACQUIRED, 1)
    # a lock expiry still releases the records (they are delivered again either way)
    _tick(sp, 30_000)
    assert sp.state_of(0) == (AVAILABLE, 1)


def test_renew_extends_the_lock(sp):
    sp.acquire("m1", [(0, 0)], 100)
    _tick(sp, 20_000)
    sp.acknowledge("m1", [(0, 0, [RENEW])])
    _tick(sp, 20_000)
    assert sp.state_of(0) == (ACQUIRED, 1)
    _tick(sp, 10_000)
    assert sp.state_of(0) == (AVAILABLE, 1)


def test_renew_refused_when_the_group_disables_it(sp):
    sp.acquire("m1", [(0, 0)], 100)
    sp.lims.renew_enabled = False
    with pytest.raises(AckError) as err:
        sp.acknowledge("m1", [(0, 0, [RENEW])])
    assert err.value.code == ErrorCode.invalid_record_state and sp.state_of(0) == (ACQUIRED, 1)


def test_session_end_releases_the_members_records(sp):
    sp.acquire("m1", [(0, 1)], 100)
    sp.acquire("m2", [(2, 3)], 100)
    sp.release_member("m1")
    assert sp.state_of(0) == (AVAILABLE, 1) and sp.state_of(2) == (ACQUIRED, 1)
    assert len(sp.timers_) == 1  # m1's lock timer is gone


def test_load_from_persisted_state(sp):
    sp.load(5, [StateBatch(5, 7, ACKNOWLEDGED, 1), StateBatch(8, 9, AVAILABLE, 2), StateBatch(10, 10, ARCHIVED, 3),
                StateBatch(11, 10**15, AVAILABLE, 1)])
    assert sp.start == 8 and sp.next_fetch_offset() == 8
    assert sp.acquire("m1", [(8, 12)], 100) == [(8, 9, 3), (11, 12, 2)]
    assert len(sp.entries) <= 2 * sp.lims.max_record_locks + 3  # a huge persisted batch is not expanded
