"""Kafka Streams exactly_once_v2 across kill -9, against kafkalite and the reference Apache Kafka.

A Kafka Streams 4.1 word count (``tests/java/streams/WordCount.java``, built and
run by ``tests/java_harness.py``; classic rebalance protocol, commit every
100 ms) re-keys words through a repartition topic, counts them in a RocksDB
store backed by a changelog topic, and writes every update of a count to the
output topic. Its store cache is off, so each input record yields exactly one
output record, "WORD:COUNT".

While an idempotent producer writes a known multiset of words at a steady
pace, the broker is killed with SIGKILL and, after an outage longer than the
app's session and transaction timeouts, restarted on the same port and data
(the app is left to recover on its own); later the app's JVM is killed with
SIGKILL and a new one started on the same state directory (the count of
changelog records it restored is printed). At the end the input topic holds each produced
record once, and a READ_COMMITTED reader of the output topic sees, for every
word, the counts 1, 2, ..., n with n the number of times the word was
produced: no count missing, none twice, none skipped. That is exactly once,
not "the last count is right". No stream thread may die on the way. Each
broker (kafkalite, and a reference Kafka of this test's own, so that it may
be killed too) runs the whole scenario; kafkalite twice, with transactions V2
(its default) and V1. About 30 s on kafkalite, 60 s on Kafka, each.

Where the committed output stops short (every word counted 1..k, no count twice or skipped, k
below n), what held a read_committed reader back is printed: each partition's last stable offset
against its end, the producers with a transaction open there, and the transaction coordinator's
view. On kafkalite that fails the test; on the reference Kafka it is an expected failure with the
same diagnosis (Kafka 4.4 did it once in CI), since exactly-once held and only Kafka's liveness
is in question.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter, defaultdict

import pytest
from confluent_kafka import Producer

from bench.txn import read_all
from broker.coordinator import placement
from tests import java_harness, reference_kafka
from tests.broker_process import BrokerProcess
from tests.raw import RawClient
from tests.wait import wait_until
from tests.integration.test_transactions import QUIET, new_topic

pytestmark = pytest.mark.slow

PARTITIONS = 3
RECORDS = 36_000
WORDS = 120
RATE = 1_500  # records/s: production lasts RECORDS / RATE seconds, so the kills land mid-stream
OUTAGE_S = 12  # the broker stays down this long: past the app's session (6 s) and transaction (10 s) timeouts
WAIT_S = 120


@pytest.fixture(scope="module")
def streams_app():
    """Skips, with the reason, where the word count cannot be built (no Java 17+, javac or Maven)."""
    ok, reason = java_harness.STREAMS.available()
    if not ok:
        pytest.skip(reason)


@pytest.fixture(params=["kafkalite", "kafkalite-tv1", pytest.param("kafka", marks=pytest.mark.reference)])
def own_broker(request, streams_app, tmp_path):
    """A broker for this test alone (it gets killed): kafkalite with transactions V2 (its
    default, as Kafka 4.1's), kafkalite with transaction.version 0 (the clients use V1), or a
    reference Kafka."""
    if request.param == "kafka":
        ok, reason = reference_kafka.available()
        if not ok:
            pytest.skip(reason)
        b = reference_kafka.ReferenceKafka(tmp_path / "kafka")
    else:
        tv1 = {"KAFKALITE_TRANSACTION_VERSION": "0"} if request.param == "kafkalite-tv1" else {}
        b = BrokerProcess(tmp_path / "kafkalite", env=tv1)
    b.kind = request.param
    b.start()
    yield b
    if b.proc is not None:
        b.stop()


def words(seed: int = 1071) -> list[str]:
    """RECORDS words of a skewed vocabulary (a few frequent ones, a long tail)."""
    rng = random.Random(seed)
    vocabulary = [f"word{i:03d}" for i in range(WORDS)]
    return rng.choices(vocabulary, weights=[1 / (i + 1) for i in range(WORDS)], k=RECORDS)


class PacedProducer(threading.Thread):
    """An idempotent producer writing "WORD:SEQ" values at RATE records/s, with no key
    (spread over the partitions), through whatever happens to the broker meanwhile."""

    def __init__(self, bootstrap: str, topic: str, values: list[str]) -> None:
        super().__init__(daemon=True, name="paced-producer")
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **QUIET})
        self.topic = topic
        self.values = values
        self.sent = 0
        self.errors: list[str] = []
        self.unflushed = -1
        self.stopping = threading.Event()

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def run(self) -> None:
        began = time.monotonic()
        for i, value in enumerate(self.values):
            ahead = i / RATE - (time.monotonic() - began)
            if ahead > 0 and self.stopping.wait(ahead):  # pacing; a failed test stops it early
                return
            self.producer.produce(self.topic, value=value.encode(), on_delivery=self._delivered)
            self.producer.poll(0)
            self.sent = i + 1
        self.unflushed = self.producer.flush(WAIT_S)


def start_app(bootstrap: str, inp: str, out: str, app_id: str, state_dir, name: str) -> java_harness.JavaClient:
    return java_harness.JavaClient("run", bootstrap, "--input", inp, "--output", out, "--app-id", app_id,
                                   "--state-dir", str(state_dir), "--threads", "2", "--progress-every", "500",
                                   program=java_harness.STREAMS, name=name)


def progress_since(app: java_harness.JavaClient, start: int, records: int, timeout: float = WAIT_S) -> dict:
    """Wait until the app reports ``records`` more records seen than at event index ``start``."""
    before = max((e["processed"] for e in app.events[:start] if e.get("event") == "progress"), default=0)
    return app.wait_for(f"{records} records processed", lambda e: e.get("event") == "progress" and e["processed"] >= before + records,
                        timeout=timeout, start=start)


def held_back(bootstrap: str, topic: str, partitions: int | list[int]) -> dict:
    """What holds a read_committed reader of ``topic`` back: per partition, its last stable offset
    against its end, and the producers with a transaction open on it (where it began); and the
    transaction coordinator's view of every transaction it knows. A partition whose LSO sits at
    the start of a transaction that no coordinator has open any more is a hanging transaction."""
    partitions = list(range(partitions)) if isinstance(partitions, int) else partitions
    raw = RawClient(bootstrap)
    try:
        ends = {}
        for isolation in (0, 1):
            r = raw.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
                {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in partitions]}]})
            for p in r.topics[0].partitions:
                ends.setdefault(p.partition_index, []).append(p.offset)
        r = raw.request(61, 0, {"topics": [{"name": topic, "partition_indexes": partitions}]})
        open_txns = {p.partition_index: [(x.producer_id, x.producer_epoch, x.current_txn_start_offset)
                                         for x in p.active_producers if x.current_txn_start_offset >= 0]
                     for p in r.topics[0].partitions}
        listed = raw.request(66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}).transaction_states
        described = raw.request(65, 0, {"transactional_ids": [x.transactional_id for x in listed]}).transaction_states if listed else []
        coordinator = {x.transactional_id: (x.producer_id, x.producer_epoch, x.transaction_state,
                                            sorted((t.topic, sorted(t.partitions)) for t in x.topics)) for x in described}
        return {"end, lso": ends, "open transactions (pid, epoch, start)": open_txns, "coordinator": coordinator}
    except Exception as e:  # noqa: BLE001 - a diagnosis only
        return {"diagnosis failed": repr(e)}
    finally:
        raw.sock.close()


def after_a_kill(broker, app_id: str, wait, *args):
    """``wait(*args)``, a wait for progress after a kill. On the reference Kafka, a time-out is an
    expected failure with the diagnosis of what held the app back: its group's committed offsets
    (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT while a transaction that
    committed offsets is open on the group's ``__consumer_offsets`` partition).
    Seen once in CI (2026-12-07): Kafka 4.4's new app, after the broker's and the old app's kill -9,
    timed out for 120 s fetching its committed offsets. On kafkalite a time-out fails the test."""
    try:
        return wait(*args)
    except AssertionError as e:
        if broker.kind != "kafka" or "timed out" not in str(e):
            raise
        offsets = placement.partition_for(app_id)
        pytest.xfail(f"the reference Kafka made no progress after a kill: {str(e).splitlines()[0]}; "
                     f"__consumer_offsets-{offsets}: {held_back(broker.bootstrap, '__consumer_offsets', [offsets])}")


def test_word_count_is_exactly_once_across_broker_and_app_kill_9(own_broker, tmp_path):
    broker = own_broker
    bootstrap = broker.bootstrap
    inp, out = new_topic(bootstrap, PARTITIONS), new_topic(bootstrap, PARTITIONS)
    app_id = "wordcount-" + uuid.uuid4().hex[:8]
    state_dir = tmp_path / "streams-state"
    values = [f"{w}:{i}" for i, w in enumerate(words())]
    expected = Counter(words())

    app = start_app(bootstrap, inp, out, app_id, state_dir, "streams-1")
    apps = [app]
    producer = PacedProducer(bootstrap, inp, values)
    try:
        app.wait_for("the app RUNNING", lambda e: e.get("event") == "state" and e["state"] == "RUNNING", timeout=WAIT_S)
        producer.start()

        # 1. the broker dies under the app's open transactions and stays down longer than the
        # app's session timeout while the producer keeps writing; the app must carry on by itself
        progress_since(app, 0, RECORDS // 6)
        broker.kill()
        down_at = producer.sent
        wait_until(lambda: producer.sent >= down_at + OUTAGE_S * RATE, timeout=OUTAGE_S + WAIT_S,
                   what="records written while the broker is down")
        broker.start()
        mark = len(app.events)
        after_a_kill(broker, app_id, progress_since, app, mark, RECORDS // 6)  # processing again, same broker

        # 2. the app's JVM dies; a new one, on the same state directory, takes over
        app.kill()
        app = start_app(bootstrap, inp, out, app_id, state_dir, "streams-2")
        apps.append(app)
        after_a_kill(broker, app_id, progress_since, app, 0, RECORDS // 10)

        wait_until(lambda: not producer.is_alive(), timeout=RECORDS / RATE + WAIT_S, what="the producer to finish")
        assert producer.unflushed == 0 and not producer.errors, (producer.unflushed, producer.errors[:5])

        # the input is exactly what was produced (the idempotent producer wrote nothing twice)
        produced = read_all(bootstrap, inp, PARTITIONS, "read_uncommitted", RECORDS, timeout=WAIT_S)
        assert len(produced) == RECORDS and set(produced) == {v.encode() for v in values}, \
            f"the input topic holds {len(produced)} records ({len(set(produced))} distinct), {RECORDS} were produced"

        # every input record's update, committed, is in the output; then the app stops cleanly
        got = read_all(bootstrap, out, PARTITIONS, "read_committed", RECORDS, timeout=WAIT_S)
        assert app.proc.poll() is None, app.describe()
        assert app.close() == 0, app.describe()
        assert app.of("closed") and app.of("closed")[0]["clean"], app.describe()
    finally:
        for a in apps:
            a.kill()
        producer.stopping.set()
        if producer.is_alive():
            producer.join(WAIT_S)

    # nothing more arrived once the app was closed: re-read the quiet topic
    final = read_all(bootstrap, out, PARTITIONS, "read_committed", len(got), timeout=WAIT_S)
    assert sorted(final) == sorted(got), "the committed output changed after the app stopped"
    counts: dict[str, list[int]] = defaultdict(list)
    for v in final:  # a word's updates share its key, so one partition, in offset order
        word, count = v.decode().split(":")
        counts[word].append(int(count))
    wrong = {w: (c[:5], len(c), expected[w]) for w, c in counts.items() if c != list(range(1, expected[w] + 1))}
    if wrong:
        told = (f"{len(wrong)} words not counted 1..n exactly once (first counts, how many, expected n): {dict(list(wrong.items())[:5])}; "
                f"the output topic: {held_back(bootstrap, out, PARTITIONS)}")
        short = all(counts[w] == list(range(1, len(counts[w]) + 1)) for w in wrong)
        if broker.kind == "kafka" and short:
            # Seen once in CI (2026-11-26, 1 run of about 20): Apache Kafka 4.4's committed output stopped
            # where the broker was killed while the app ran on and closed cleanly. Nothing was counted
            # twice or skipped, so exactly-once held; what the reference failed is liveness, and that
            # says nothing of kafkalite, whose runs above stay strict. The diagnosis says what held it back.
            pytest.xfail(f"the reference Kafka's committed output stopped short: {told}")
        pytest.fail(told)
    assert set(counts) == set(expected), set(expected) ^ set(counts)
    assert len(final) == RECORDS
    # Streams handled both kills itself: no stream thread died (the app would replace it)
    assert not [e for a in apps for e in a.of("uncaught")], [e for a in apps for e in a.of("uncaught")]

    uncommitted = read_all(bootstrap, out, PARTITIONS, "read_uncommitted", RECORDS, timeout=WAIT_S)
    print(f"{broker.kind}: {RECORDS} records, {len(final)} committed updates, "
          f"{len(uncommitted) - len(final)} aborted ones; restored by the second JVM: "
          f"{sum(e['records'] for e in apps[1].of('restored'))} changelog records")
