"""The brokers the peer suites run against, with the same KIP-848 timings.

kafkalite: a fresh ``BrokerProcess`` per test. The reference: one
``tests.reference_kafka.ReferenceKafka`` for a whole recording run (every
test uses its own topics and groups, and a Kafka start costs seconds).
Timings match tests/clients/conftest.py's (500 ms KIP-848 heartbeat, 10 s
session), so consumer-protocol tests wait as long on both.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from tests import reference_kafka
from tests.broker_process import BrokerProcess

KAFKALITE_ARGS = ("--group-consumer-heartbeat-interval-ms", "500", "--group-consumer-session-timeout-ms", "10000")
REFERENCE_CONFIG = {
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 10000,
    "group.consumer.min.session.timeout.ms": 1000,
}


def reference_name() -> str:
    return f"Apache Kafka {reference_kafka.KAFKA_VERSION}"


@contextlib.contextmanager
def kafkalite(data_dir: Path | None = None, partitions: int = 1, extra: tuple[str, ...] = ()):
    """A fresh kafkalite (auto-created topics get ``partitions``, ``extra`` are more serve
    arguments); on exit stops it, raising HandlerFailed if a handler raised."""
    own = data_dir is None
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="kafkalite-peers-"))
    broker = BrokerProcess(data_dir, *KAFKALITE_ARGS, "--num-partitions", str(partitions), *extra).start()
    try:
        yield broker
    finally:
        try:
            broker.stop()
        finally:
            if own:
                shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.contextmanager
def reference(partitions: int = 1):
    """One reference Kafka (``tests.reference_kafka``); RuntimeError if it cannot run here."""
    ok, why = reference_kafka.available()
    if not ok:
        raise RuntimeError(why)
    broker = reference_kafka.ReferenceKafka(config={**REFERENCE_CONFIG, "num.partitions": partitions}).start()
    try:
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(broker.data_dir, ignore_errors=True)
