"""group.consumer.assignment.interval.ms (Kafka 4.4): at most one target assignment per interval.

A change inside the interval bumps the group epoch and leaves the target where it
was; the first heartbeat after the interval computes it, or the shard's timer
does, whichever comes first. The interval's start is persisted in the target
assignment metadata record (tagged field 0, as 4.4 writes it), so a reloaded
shard keeps to it. Deterministic: a manual clock past 0 (Kafka reads a
timestamp of 0 as "never computed").
"""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.consumer_group import ASSIGNING, STABLE, UNRELEASED_PARTITIONS
from protocol.group_records import (
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    decode_value,
    encode_value,
)

from .test_coordinator_consumer import T_ID, ConsumerHarness, decoded, replayed

START = 1_700_000_000_000


def harness(loop, **config) -> ConsumerHarness:
    h = ConsumerHarness(loop, **config)
    h.now = START
    h.topic("t", 4, T_ID)
    return h


def stamps(records) -> list[tuple[int, int]]:
    """(assignment epoch, timestamp) of every target assignment metadata record written."""
    return [(v.assignment_epoch, v.assignment_timestamp) for k, v in decoded(records)
            if isinstance(k, ConsumerGroupTargetAssignmentMetadataKey) and v is not None]


def test_a_join_inside_the_interval_waits_for_the_timer(loop):
    h = harness(loop)
    h.join("a")
    assert stamps(h.last_records) == [(2, START)]  # never computed before: at once
    h.now += 100
    resp = h.join("b")
    g = h.cgroup()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (3, 2, ASSIGNING)
    assert stamps(h.last_records) == [] and h.target("b") == {} and h.target("a") == {"t": [0, 1, 2, 3]}
    # not after the plain 5 s: a, holding partitions others may wait for, comes back when the target is
    # due; b, holding nothing, one pending interval later, once a has had time to revoke
    assert resp["heartbeat_interval"] == 900 + 100 and h.member("b").state == STABLE
    h.now += 50
    assert h.hb("a", h.member("a").member_epoch, owned=h.assigned("a"))["heartbeat_interval"] == 850
    records = h.advance(849)
    assert records == [] and g.assignment_epoch == 2
    records = h.advance(1)
    assert stamps(records) == [(3, START + 1000)]
    assert h.target("a") == {"t": [0, 1]} and h.target("b") == {"t": [2, 3]}
    resp = h.hb("b", h.member("b").member_epoch, owned={})
    assert h.member("b").state == UNRELEASED_PARTITIONS and resp["heartbeat_interval"] == 100


def test_the_first_heartbeat_after_the_interval_computes_and_cancels_the_timer(loop):
    h = harness(loop)
    h.join("a")
    h.now += 10
    h.join("b")
    h.now += 2000  # the timer's deadline passes without it running: a heartbeat comes first
    h.hb("a", h.member("a").member_epoch, owned=h.assigned("a"))
    assert stamps(h.last_records) == [(3, START + 2010)]
    g = h.cgroup()
    assert g.assignment_epoch == g.group_epoch == 3
    # the timer was cancelled by that computation: firing everything due writes no second target
    assert stamps(h.advance(1000)) == []


def test_many_joins_inside_one_interval_share_one_target_computation(loop):
    h = harness(loop)
    h.topic("t", 64, T_ID)
    h.join("m0")
    check, h.check_invariants = h.check_invariants, lambda: None
    for i in range(1, 300):
        h.now += 2
        h.join(f"m{i}")
    check()
    g = h.cgroup()
    assert g.group_epoch == 301 and g.assignment_epoch == 2
    assert stamps(h.advance(1000)) == [(301, START + 1000)]
    assert sum(len(h.target(f"m{i}").get("t", [])) for i in range(300)) == 64


@pytest.mark.parametrize("how", ["broker", "group"])
def test_an_interval_of_zero_computes_every_change(loop, how):
    if how == "broker":
        h = harness(loop, group_consumer_assignment_interval_ms=0)
    else:
        h = harness(loop)
        h.config.group_overrides = {"cg": {"consumer.assignment.interval.ms": "0"}}
    h.join("a")
    h.now += 1
    h.join("b")
    assert stamps(h.last_records) == [(3, START + 1)]
    assert h.target("b") == {"t": [2, 3]}


def test_a_group_config_lengthens_the_interval(loop):
    h = harness(loop)
    h.config.group_overrides = {"cg": {"consumer.assignment.interval.ms": "5000"}}
    h.join("a")
    h.now += 1500
    h.join("b")
    assert h.cgroup().state == ASSIGNING
    assert stamps(h.advance(3499)) == []
    assert stamps(h.advance(1)) == [(3, START + 5000)]


def test_the_interval_survives_a_reload(loop):
    h = harness(loop)
    h.join("a")
    h.now += 300
    h.join("b")
    h.shard = replayed(h, h.durable, folded=False)
    h.shard.on_loaded()
    g = h.cgroup()
    assert (g.group_epoch, g.assignment_epoch, g.assignment_timestamp) == (3, 2, START)
    # a heartbeat inside the persisted interval leaves the target alone, one after it computes
    h.now = START + 999
    h.hb("a", g.members["a"].member_epoch, owned=h.assigned("a"))
    assert g.assignment_epoch == 2
    h.now = START + 1000
    h.hb("a", g.members["a"].member_epoch, owned=h.assigned("a"))
    assert stamps(h.last_records) == [(3, START + 1000)]


def test_the_record_carries_the_timestamp_as_kafka_44_writes_it():
    key = ConsumerGroupTargetAssignmentMetadataKey("g")
    value = ConsumerGroupTargetAssignmentMetadataValue(7, START)
    raw = encode_value(value)
    # version 0, epoch, then one tagged field: tag 0, 8 bytes, the timestamp
    assert raw == struct.pack(">hi", 0, 7) + bytes([1, 0, 8]) + struct.pack(">q", START)
    assert decode_value(key, raw) == value
    # 0 (never computed, or written before 4.4) is left out
    assert encode_value(ConsumerGroupTargetAssignmentMetadataValue(7)) == struct.pack(">hi", 0, 7) + b"\x00"


def test_a_timer_for_a_group_that_settled_or_went_away_writes_nothing(loop):
    h = harness(loop)
    h.join("a")
    h.now += 10
    h.join("b")
    h.hb("b", -1)  # b leaves before the target was due: the group epoch moves again
    h.hb("a", -1)
    assert h.cgroup().members == {}
    assert stamps(h.advance(5000)) == [] and h.cgroup().assignment_epoch == h.cgroup().group_epoch
