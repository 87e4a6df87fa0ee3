"""kafkajs against kafkalite.

kafkajs runs as tests/clients/node/harness.js (installed once with ``npm ci`` by
the ``node_toolchain`` fixture) through the two scenarios of
tests/clients/scenarios.py: a produce/consume round trip, and a group member that
consumes part of a topic, commits, and is resumed from the commit by a new process.
"""

from __future__ import annotations

import pytest

from tests.clients import scenarios
from tests.clients.clients import NodeClient


@pytest.fixture
def kafkajs(node_toolchain):
    return NodeClient(node_toolchain)


@pytest.mark.compat("kafkajs", "produce → consume round trip")
def test_kafkajs_round_trip(kafkajs, broker):
    scenarios.round_trip(kafkajs, broker)


@pytest.mark.compat("kafkajs", "classic group: join, commit, resume")
def test_kafkajs_group_commit_resume(kafkajs, broker):
    group = scenarios.commit_resume(kafkajs, broker)
    assert scenarios.group_type(broker, group) == "classic"
