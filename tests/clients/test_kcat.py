"""kcat (librdkafka) against kafkalite.

kcat is run directly (the ``kcat_toolchain`` fixture installs it with apt-get
where it is missing and the tests run as root): ``-P`` produces, ``-C -e`` reads a
topic to its end, ``-G`` consumes in a group (librdkafka commits the records it
handed out when kcat exits after ``-c N`` records).
"""

from __future__ import annotations

import pytest

from tests.clients import scenarios
from tests.clients.clients import KcatClient


@pytest.fixture
def kcat(kcat_toolchain):
    return KcatClient(kcat_toolchain)


@pytest.mark.compat("kcat", "produce (-P) → consume (-C, simple consumer to end) round trip")
def test_kcat_produce_consume(kcat, broker):
    topic = scenarios.unique("kcat")
    scenarios.create_topic(broker, topic)
    kcat.produce(broker.bootstrap, topic, scenarios.COUNT, scenarios.PARTITIONS)
    back = kcat.read_all(broker.bootstrap, topic)
    got = scenarios.records(back)
    assert sorted(k for _p, _o, k, _v in got) == sorted(f"k{i}" for i in range(scenarios.COUNT)), back.describe() + scenarios.broker_tail(broker)
    scenarios.check_records(got)


@pytest.mark.compat("kcat", "produce (-P) → consume (-G group) round trip")
def test_kcat_round_trip(kcat, broker):
    scenarios.round_trip(kcat, broker)


@pytest.mark.compat("kcat", "balanced consumer (-G): join, commit, resume")
def test_kcat_group_commit_resume(kcat, broker):
    scenarios.commit_resume(kcat, broker)
