"""The shard's describe and list operations answer plain, frozen data (described.py), as Kafka
builds its DescribedGroup inside the shard: one view of the group as it stood, which a later
change to the group does not alter, and no group object."""

from __future__ import annotations

import dataclasses

import pytest

from broker.coordinator.classic_group import PREPARING_REBALANCE, STABLE
from broker.coordinator.described import (
    ClassicGroupDescription,
    ConsumerGroupDescription,
    GroupListing,
    TopicAssignment,
)

from .test_coordinator_classic import G, Harness, subscription
from .test_coordinator_consumer import G as CG
from .test_coordinator_consumer import T_ID, ConsumerHarness, two_members


def test_a_classic_description_is_the_group_as_it_stood(loop):
    h = Harness(loop)
    ids, _ = h.stable_group(2)
    d = h.shard.describe_group(G)
    assert isinstance(d, ClassicGroupDescription)
    assert (d.group_id, d.state, d.protocol_type, d.protocol_data) == (G, STABLE, "consumer", "range")
    assert sorted(m.member_id for m in d.members) == sorted(ids)
    assert all(m.metadata == subscription("t") and m.assignment for m in d.members)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.state = "Dead"  # type: ignore[misc]

    h.leave(ids[1])  # the group rebalances: the description taken before stays as it was
    assert d.state == STABLE and len(d.members) == 2
    after = h.shard.describe_group(G)
    assert after.state == PREPARING_REBALANCE and after.protocol_data == "" and [m.member_id for m in after.members] == [ids[0]]
    assert after.members[0].metadata == b""  # no protocol data outside Stable
    assert h.shard.describe_group("absent") is None


def test_a_consumer_group_description_names_its_topics_and_other_kinds_are_told_apart(loop):
    h = ConsumerHarness(loop)
    h.topic("t", 4, T_ID)
    a, b = two_members(h)
    d = h.shard.describe_consumer_group(CG)
    assert isinstance(d, ConsumerGroupDescription)
    assert (d.state, d.assignor_name) == ("Stable", "uniform")
    assert sorted(m.member_id for m in d.members) == [a, b]
    for m in d.members:
        assert m.assignment == m.target_assignment and not m.classic
        assert [(t.topic_id, t.topic_name) for t in m.assignment] == [(T_ID, "t")]
    assert sorted(p for m in d.members for t in m.assignment for p in t.partitions) == [0, 1, 2, 3]
    assert all(isinstance(t, TopicAssignment) and isinstance(t.partitions, tuple) for m in d.members for t in m.assignment)

    h.hb(b, -1)  # b leaves: the group moves on, the description does not
    assert len(d.members) == 2
    assert [m.member_id for m in h.shard.describe_consumer_group(CG).members] == [a]

    # a KIP-848 group is not a classic group, nor a share group; every live group is listed
    assert h.shard.describe_group(CG) is None
    listing = GroupListing(CG, "consumer", "consumer", h.cgroup().state)
    assert h.shard.describe_share_group(CG) == listing
    assert h.shard.list_groups() == [listing]
    assert h.shard.describe_consumer_group("absent") is None and h.shard.describe_share_group("absent") is None
