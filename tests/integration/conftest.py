"""Fixtures for tests that run against kafkalite and, as a cross-check, real Apache Kafka.

``group_broker`` is parametrised: the ``kafkalite`` case runs the broker under
test, the ``kafka`` case runs the same test against an Apache Kafka broker (4.4 by default)
(``tests/reference_kafka.py``), proving that the test asserts what Kafka does.
The ``kafka`` case carries the ``reference`` marker:

    pytest -m reference ...        only against real Kafka
    pytest -m "not reference" ...  only against kafkalite

It is skipped, with the reason, where Java 17+ or Maven (needed once, to fetch
Kafka's jars from Maven Central) are missing.
"""

from __future__ import annotations

import pytest

from tests import reference_kafka
from tests.broker_process import BrokerProcess


def pytest_configure(config):
    config.addinivalue_line("markers", "reference: the same test run against a real Apache Kafka broker, 4.4 by default (tests/reference_kafka.py)")


@pytest.fixture(scope="session")
def reference_broker(tmp_path_factory):
    """One Apache Kafka broker (4.4 by default) for the whole session (it takes several seconds to start)."""
    ok, reason = reference_kafka.available()
    if not ok:
        pytest.skip(reason)
    k = reference_kafka.ReferenceKafka(tmp_path_factory.mktemp("reference-kafka")).start()
    yield k
    k.stop()


@pytest.fixture(scope="module", params=["kafkalite", pytest.param("kafka", marks=pytest.mark.reference)])
def _module_group_broker(request, tmp_path_factory):
    if request.param == "kafka":
        yield request.getfixturevalue("reference_broker")
        return
    b = BrokerProcess(tmp_path_factory.mktemp("kafkalite-data")).start()
    b.kind = "kafkalite"
    yield b
    if b.proc is not None:
        b.stop()


@pytest.fixture
def group_broker(_module_group_broker):
    """A running broker (kafkalite or real Kafka), shared by a module's tests.

    Tests isolate themselves with unique topic and group names. A test may stop,
    kill or restart it; the next test gets it running again.
    """
    b = _module_group_broker
    if b.proc is not None and b.proc.poll() is not None:
        b.proc = None  # died on its own; the failing test has already reported it
    if b.proc is None:
        b.start()
    return b
