"""Go clients against kafkalite: franz-go (pkg/kgo) and segmentio/kafka-go.

Each library runs as a small harness binary (tests/clients/go/<name>/main.go,
built once by the ``go_toolchain`` fixture) through the two scenarios of
tests/clients/scenarios.py: a produce/consume round trip, and a group member that
consumes part of a topic, commits, and is resumed from the commit by a new
process. franz-go also runs the second scenario with KIP-848
(``kgo.ServerSideBalancer``: ConsumerGroupHeartbeat instead of JoinGroup/SyncGroup).
"""

from __future__ import annotations

import pytest

from tests.clients import scenarios
from tests.clients.clients import GoClient


@pytest.fixture
def franz(go_toolchain):
    return GoClient(go_toolchain, "franz", "franz-go")


@pytest.fixture
def franz_kip848(go_toolchain):
    return GoClient(go_toolchain, "franz", "franz-go", protocol="consumer")


@pytest.fixture
def segmentio(go_toolchain):
    return GoClient(go_toolchain, "segmentio", "segmentio/kafka-go")


@pytest.mark.compat("franz-go", "produce → consume round trip")
def test_franz_round_trip(franz, broker):
    scenarios.round_trip(franz, broker)


@pytest.mark.compat("franz-go", "classic group (cooperative-sticky): join, commit, resume")
def test_franz_group_commit_resume(franz, broker):
    group = scenarios.commit_resume(franz, broker)
    assert scenarios.group_type(broker, group) == "classic"


@pytest.mark.compat("franz-go", "KIP-848 group (ServerSideBalancer): join, commit, resume")
def test_franz_kip848_group_commit_resume(franz_kip848, broker):
    group = scenarios.commit_resume(franz_kip848, broker)
    assert scenarios.group_type(broker, group) == "consumer"


@pytest.mark.compat("segmentio/kafka-go", "produce (Writer) → consume (Reader) round trip")
def test_segmentio_round_trip(segmentio, broker):
    scenarios.round_trip(segmentio, broker)


@pytest.mark.compat("segmentio/kafka-go", "classic group (Reader with GroupID): join, commit, resume")
def test_segmentio_group_commit_resume(segmentio, broker):
    scenarios.commit_resume(segmentio, broker)
