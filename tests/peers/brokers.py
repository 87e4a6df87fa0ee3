"""The brokers the peer suites run against, with the same KIP-848 timings.

kafkalite: a fresh ``BrokerProcess`` per test, or, for a cluster suite, one
``serve --nodes N`` (the same ``BrokerProcess``, the controller's child
nodes included in its handler-failure scan) shared by the suite's units. The
reference: one ``tests.reference_kafka.ReferenceKafka`` (a
``ReferenceKafkaCluster`` of N brokers for a cluster suite) for a whole
recording run (every test uses its own topics and groups, and a Kafka start
costs seconds). Either way ``bootstrap`` names every broker.
Timings match tests/clients/conftest.py's (500 ms KIP-848 heartbeat, 10 s
session), so consumer-protocol tests wait as long on both.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

from tests import reference_kafka
from tests.broker_process import BrokerProcess

KAFKALITE_ARGS = ("--group-consumer-heartbeat-interval-ms", "500", "--group-consumer-session-timeout-ms", "10000")
REFERENCE_CONFIG = {
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 10000,
    "group.consumer.min.session.timeout.ms": 1000,
}


def reference_name(nodes: int = 1) -> str:
    return f"Apache Kafka {reference_kafka.KAFKA_VERSION}" + (f" ({nodes} brokers, KRaft)" if nodes > 1 else "")


class Kafkalite(BrokerProcess):
    """A ``BrokerProcess`` whose ``bootstrap`` lists every node of a cluster (``--nodes N``)."""

    @property
    def bootstrap(self) -> str:
        if self.node_ports:
            return ",".join(f"127.0.0.1:{port}" for _, port in sorted(self.node_ports.items()))
        return super().bootstrap


@contextlib.contextmanager
def kafkalite(data_dir: Path | None = None, partitions: int = 1, extra: tuple[str, ...] = (), nodes: int = 1):
    """A fresh kafkalite (auto-created topics get ``partitions``, ``extra`` are more serve
    arguments; ``nodes`` > 1: a cluster, ``serve --nodes``); on exit stops it, raising
    HandlerFailed if a handler (of any node) raised."""
    own = data_dir is None
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="kafkalite-peers-"))
    cluster = ("--nodes", str(nodes)) if nodes > 1 else ()
    broker = Kafkalite(data_dir, *KAFKALITE_ARGS, "--num-partitions", str(partitions), *cluster, *extra).start(timeout=60)
    try:
        yield broker
    finally:
        try:
            broker.stop()
        finally:
            if own:
                shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.contextmanager
def reference(partitions: int = 1, nodes: int = 1):
    """One reference Kafka (``tests.reference_kafka``), a KRaft cluster of ``nodes`` brokers when
    ``nodes`` > 1 (replication factors of 3 by default); RuntimeError if it cannot run here."""
    ok, why = reference_kafka.available()
    if not ok:
        raise RuntimeError(why)
    config = {**REFERENCE_CONFIG, "num.partitions": partitions}
    if nodes > 1:
        cluster = reference_kafka.ReferenceKafkaCluster(brokers=nodes, config=config).start()
        try:
            yield SimpleNamespace(bootstrap=cluster.bootstrap_servers, cluster=cluster)
        finally:
            cluster.close()
            shutil.rmtree(cluster.data_dir, ignore_errors=True)
        return
    broker = reference_kafka.ReferenceKafka(config=config).start()
    try:
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(broker.data_dir, ignore_errors=True)


# serve arguments for single units, where a test assumes a Kafka default that kafkalite changes on
# purpose: 0118_commit_rebalance expects its second consumer's first revocation to come at close, which
# holds only if both consumers join the first generation together, as Kafka's 3 s initial rebalance
# delay makes them (kafkalite's default is 0: when the second consumer happens to join first it is
# revoked at the first rebalance, commits with a valid generation and the test fails, about 1 run in 7)
UNIT_BROKER_ARGS = {
    ("librdkafka", "0118"): ("--group-initial-rebalance-delay-ms", "3000"),
}


class UnitBrokers:
    """The kafkalite each unit of ``suite`` runs against: a fresh one per unit or, for a cluster
    suite (``suite.nodes`` > 1), one cluster started for the first unit and shared by the rest
    (each unit uses topics and groups of its own), until ``close``. A handler failure on the
    shared cluster fails the unit after which it is found (with units side by side, maybe the
    other one's)."""

    def __init__(self, suite) -> None:
        self.suite = suite
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()
        self._shared: Kafkalite | None = None

    @contextlib.contextmanager
    def unit(self, unit: str, data_dir: Path | None = None):
        if self.suite.nodes == 1:
            with kafkalite(data_dir, self.suite.partitions, UNIT_BROKER_ARGS.get((self.suite.name, unit), ())) as broker:
                yield broker
            return
        with self._lock:
            if self._shared is None:
                self._shared = self._stack.enter_context(kafkalite(partitions=self.suite.partitions, nodes=self.suite.nodes))
        yield self._shared
        self._shared.check_handler_errors()

    def close(self) -> None:
        """Stop the shared cluster, if any (HandlerFailed if a handler raised since the last unit)."""
        with self._lock:
            self._shared = None
            self._stack.close()

    def __enter__(self) -> UnitBrokers:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
