"""Both brokers for the conformance suite, started once per session, and the report written at its end.

kafkalite and Apache Kafka 4.4 (``tests/reference_kafka.py``; another 4.x with
``KAFKALITE_REFERENCE_KAFKA_VERSION``, as ``make test-conformance-4.1`` does) get the same
relevant settings: no initial rebalance delay, a 1 s minimum classic session
timeout (so timeout scenarios can use short ones), a 500 ms KIP-848 heartbeat
interval and a 3 s KIP-848 session timeout (Kafka's min.* bounds lowered to allow
them), 50 ``__consumer_offsets`` partitions and single-partition auto-created topics.

kafkalite's own hand-over lever, the shorter heartbeat interval it gives a KIP-848
member that waits for partitions or must revoke some
(``group_consumer_pending_heartbeat_interval_ms``, docs/configuration.md), is
turned off here by setting it to the plain interval: the suite compares
kafkalite with Kafka's behaviour, and that lever is a documented departure from
it. Its own tests are in tests/unit (the consumer-group shard tests).

Scenarios marked ``listener="SASL_PLAINTEXT"`` get a second pair
(``conformance_sasl_brokers``, started only when one of them runs): the same
settings plus a SASL_PLAINTEXT listener with PLAIN, where the driver's
connections log in before the scenario's requests.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests import reference_kafka
from tests.broker_process import BrokerProcess
from tests.wait import wait_until

from . import report
from .driver import Conn
from .registry import load_all

CLASSIC_MIN_SESSION_MS = 1000
CONSUMER_HEARTBEAT_MS = 500
CONSUMER_SESSION_MS = 3000
SHARE_HEARTBEAT_MS = 500
SHARE_SESSION_MS = 3000

TXN_ABORT_CHECK_MS = 200  # timed-out transactions are looked for this often (Kafka's default is 10 s)
KAFKALITE_ARGS = (
    "--group-initial-rebalance-delay-ms", "0",
    "--group-min-session-timeout-ms", str(CLASSIC_MIN_SESSION_MS),
    "--group-consumer-heartbeat-interval-ms", str(CONSUMER_HEARTBEAT_MS),
    "--group-consumer-pending-heartbeat-interval-ms", str(CONSUMER_HEARTBEAT_MS),  # off: Kafka's behaviour
    "--group-consumer-session-timeout-ms", str(CONSUMER_SESSION_MS),
    "--group-consumer-assignment-interval-ms", "0",  # as the reference's (below)
    "--offsets-topic-num-partitions", "50",
    "--num-partitions", "1",
    "--auto-create-topics", "true",
    "--set", f"transaction.abort.timed.out.transaction.cleanup.interval.ms={TXN_ABORT_CHECK_MS}",
    "--set", f"group.share.heartbeat.interval.ms={SHARE_HEARTBEAT_MS}",
    "--set", f"group.share.session.timeout.ms={SHARE_SESSION_MS}",
    "--set", "group.share.assignment.interval.ms=0",
    "--log-level", "warning",
)
KAFKA_CONFIG = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": CLASSIC_MIN_SESSION_MS,
    "group.consumer.heartbeat.interval.ms": CONSUMER_HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": CONSUMER_SESSION_MS,
    "group.consumer.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 50,
    "num.partitions": 1,
    "auto.create.topics.enable": "true",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": TXN_ABORT_CHECK_MS,
    "group.share.heartbeat.interval.ms": SHARE_HEARTBEAT_MS,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.session.timeout.ms": SHARE_SESSION_MS,
    "group.share.min.session.timeout.ms": 1000,
}
# Kafka 4.2+ computes a consumer group's target assignment at most once per
# group.consumer.assignment.interval.ms (1 s by default; 4.4 on a background thread), and so does
# kafkalite (on its event loop). When it is computed depends on timing, and the suite compares the
# protocol, so it turns the batching off on both sides (as it turns the initial rebalance delay off);
# the default's effect is in docs/compatibility.md and tests/unit/test_coordinator_assignment_interval.py.
if tuple(int(x) for x in reference_kafka.KAFKA_MINOR.split(".")) >= (4, 2):
    KAFKA_CONFIG |= {
        "group.consumer.assignor.offload.enable": "false",
        "group.consumer.assignment.interval.ms": 0,
    }
# Kafka 4.3+ (KIP-1263) batches share-group target assignments the same way: off here too.
if tuple(int(x) for x in reference_kafka.KAFKA_MINOR.split(".")) >= (4, 3):
    KAFKA_CONFIG |= {
        "group.share.assignor.offload.enable": "false",
        "group.share.assignment.interval.ms": 0,
    }

RESULTS: dict[str, dict] = {}  # scenario name -> result entry, filled by test_conformance


def _java_string_hash(s: str) -> int:
    b = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _one_group_per_offsets_partition(n: int = 50) -> list[str]:
    found: dict[int, str] = {}
    i = 0
    while len(found) < n:
        g = f"warmup-{i}"
        h = _java_string_hash(g)
        found.setdefault((0 if h == -(1 << 31) else abs(h)) % n, g)
        i += 1
    return list(found.values())


def warm_up(bootstrap: str, timeout: float = 90.0) -> None:
    """Wait until every group coordinator (all 50 offsets partitions) answers without error."""
    groups = _one_group_per_offsets_partition()

    def ready() -> bool:
        try:
            c = Conn(bootstrap, "warmup")
            try:
                fc = c.request(10, 4, {"key_type": 0, "coordinator_keys": groups})
                if not all(x.error_code == 0 for x in fc.coordinators):
                    return False
                of = c.request(9, 8, {"groups": [{"group_id": g, "topics": None} for g in groups], "require_stable": True})
                return all(g.error_code == 0 for g in of.groups)
            finally:
                c.close()
        except Exception:  # noqa: BLE001 - not ready yet
            return False

    wait_until(ready, timeout=timeout, interval=0.2, what=f"every group coordinator at {bootstrap} to answer")


@pytest.fixture(scope="session")
def conformance_brokers():
    """{"kafkalite": bootstrap, "kafka": bootstrap}; skips when the reference broker is unavailable."""
    ok, reason = reference_kafka.available()
    if not ok:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="conformance-"))
    lite = BrokerProcess(root / "kafkalite", *KAFKALITE_ARGS)
    kafka = reference_kafka.ReferenceKafka(root / "kafka", config=KAFKA_CONFIG)
    # Kafka is started from this (the main) thread: its JVM gets SIGKILL when the thread that
    # spawned it ends (PR_SET_PDEATHSIG), so it must not be a pool thread.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        started = pool.submit(lite.start)
        try:
            kafka.start()
            started.result()
            for f in [pool.submit(warm_up, lite.bootstrap), pool.submit(warm_up, kafka.bootstrap)]:
                f.result()
        except BaseException:
            lite.kill()
            kafka.kill()
            raise
    yield {"kafkalite": lite, "kafka": kafka}
    try:
        lite.stop()  # raises HandlerFailed if a handler raised during the module
    finally:
        kafka.stop()
        shutil.rmtree(root, ignore_errors=True)


SASL_USER, SASL_PASSWORD = "cf-user", "cf-password-1"
SASL_PROPERTIES = {  # both brokers': a PLAINTEXT listener (and Kafka's controller) and a SASL_PLAINTEXT one with PLAIN
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{SASL_USER}="{SASL_PASSWORD}";',
}
# KAFKALITE_ARGS as settings, for the in-process broker of the SASL pair
KAFKALITE_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": CLASSIC_MIN_SESSION_MS,
    "group.consumer.heartbeat.interval.ms": CONSUMER_HEARTBEAT_MS,
    "group_consumer_pending_heartbeat_interval_ms": CONSUMER_HEARTBEAT_MS,
    "group.consumer.session.timeout.ms": CONSUMER_SESSION_MS,
    "group.consumer.assignment.interval.ms": 0,
    "offsets.topic.num.partitions": 50,
    "num.partitions": 1,
    "auto.create.topics.enable": "true",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": TXN_ABORT_CHECK_MS,
    "group.share.heartbeat.interval.ms": SHARE_HEARTBEAT_MS,
    "group.share.session.timeout.ms": SHARE_SESSION_MS,
    "group.share.assignment.interval.ms": 0,
}


def _free_port() -> int:
    from tests.ports import free_port

    return free_port()


@pytest.fixture(scope="session")
def conformance_sasl_brokers():
    """For the scenarios played on a SASL listener (``@scenario(..., listener="SASL_PLAINTEXT")``): another pair,
    with the conformance settings plus a SASL_PLAINTEXT listener where user ``SASL_USER`` logs in with PLAIN.
    kafkalite runs in this process (``BrokerThread``: named listeners); Kafka as the other pair's.
    {"kafkalite": address, "kafka": address, "login": (user, password)}, the SASL listeners' addresses."""
    from broker.testing import BrokerThread

    ok, reason = reference_kafka.available()
    if not ok:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="conformance-sasl-"))
    lite = BrokerThread(root / "kafkalite", log_level="warning", settings={
        **KAFKALITE_SETTINGS, **SASL_PROPERTIES, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    })
    kafka = reference_kafka.ReferenceKafka(root / "kafka", config=KAFKA_CONFIG)
    kafka.port, kafka.controller_port, sasl_port = _free_port(), _free_port(), _free_port()
    kafka.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:{kafka.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        **SASL_PROPERTIES,
    })
    try:
        lite.start()
        kafka.start()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for f in [pool.submit(warm_up, lite.listeners["PLAINTEXT"]), pool.submit(warm_up, kafka.bootstrap)]:
                f.result()
    except BaseException:
        lite.close()
        kafka.kill()
        raise
    yield {"kafkalite": lite.listeners["SASL_PLAINTEXT"], "kafka": f"127.0.0.1:{sasl_port}", "login": (SASL_USER, SASL_PASSWORD)}
    try:
        lite.close()  # raises HandlerFailed if a handler raised
    finally:
        kafka.stop()
        shutil.rmtree(root, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    if not RESULTS:
        return
    scenarios = load_all()
    path = report.write_json(RESULTS, scenarios)
    complete = set(RESULTS) == set(scenarios) and not os.environ.get("KAFKALITE_CONFORMANCE_NO_DOCS")
    if complete:
        report.write_markdown(path)
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        counts = report.totals(RESULTS)
        page = report.DOCS.relative_to(report.ROOT)
        tr.write_line(f"conformance report against Apache Kafka {reference_kafka.KAFKA_VERSION}: {path} "
                      f"({', '.join(f'{k} {v}' for k, v in counts.items())})"
                      + (f"; {page} regenerated" if complete else f"; {page} left alone (partial run)"))
