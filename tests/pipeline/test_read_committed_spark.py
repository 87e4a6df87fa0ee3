"""Spark's Kafka source on a transactional topic: read_committed against read_uncommitted.

confluent-kafka writes a topic of three partitions in which committed
transactions, aborted ones and an open one (begun, records on the broker,
never ended) alternate, so that the logs are full of holes a reader must step
over: the control batch (commit or abort marker) after every transaction, the
records of aborted ones, a partition whose only records are aborted, a
partition that ends in an aborted transaction, and committed records past an
open transaction (beyond the last stable offset, LSO).

A Spark batch read (``spark.read.format("kafka")``, ``startingOffsets=earliest``,
``endingOffsets=latest``) with ``kafka.isolation.level=read_committed`` and
nothing else set (so ``failOnDataLoss`` keeps its default, true) must return
exactly the committed records below the LSO, at their offsets, as Kafka's own
read_committed consumer sees them: no aborted record, nothing of the open
transaction, and neither a failure nor a wait on the holes. Spark asks for
"latest" with the reader's isolation level, so its end is the LSO, not the
high watermark. ``read_uncommitted`` (Spark's default) returns every data
record. The same holds for ``pipeline.common.read_topic`` given
``isolation.level=read_committed``, and for a Structured Streaming query
(``Trigger.AvailableNow``), which, run again on its checkpoint after the open
transaction commits, reads the rest once. Each case runs against kafkalite
and, as a cross-check, Apache Kafka 4.1.
"""

from __future__ import annotations

import json
import uuid

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[test]')")

from pipeline import common  # noqa: E402 - after the pyspark check
from pipeline import spark as ps  # noqa: E402
from tests import reference_kafka  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402
from tests.integration.test_transactions import new_topic, producer  # noqa: E402
from tests.pipeline.helpers import read_all  # noqa: E402

pytestmark = pytest.mark.slow

PARTITIONS = 3
# (name, outcome, partitions): each record of a transaction goes to the next partition of its list
TRANSACTIONS = [
    ("a", "commit", [0, 1, 0, 1]),
    ("b", "abort", [0, 1, 2, 2]),     # partition 2 holds nothing else: all of it is a hole
    ("c", "commit", [0, 1, 1]),
    ("open", "open", [1, 1]),         # another producer's, never ended while the reads run
    ("d", "commit", [0, 1, 0, 1]),    # on partition 1 past the open transaction: above the LSO
    ("e", "abort", [0, 1]),           # partitions 0 and 1 end in an aborted transaction
]
OPEN_PARTITION = 1


def records(name: str, parts: list[int]) -> list[tuple[str, int]]:
    """A transaction's (value, partition) pairs."""
    return [(f"{name}{i}", p) for i, p in enumerate(parts)]


def write_scenario(bootstrap: str, topic: str):
    """Write TRANSACTIONS; returns the producer whose transaction is still open."""
    main = producer(bootstrap, "spark-rc-" + uuid.uuid4().hex[:8])
    held = producer(bootstrap, "spark-rc-open-" + uuid.uuid4().hex[:8])
    for name, outcome, parts in TRANSACTIONS:
        p = held if outcome == "open" else main
        p.begin_transaction()
        for value, partition in records(name, parts):
            p.produce(topic, value=value.encode(), partition=partition)
        p.flush(30)  # on the broker before the end: an abort must hide written data
        if outcome == "commit":
            p.commit_transaction(30)
        elif outcome == "abort":
            p.abort_transaction(30)
    return held


def read_committed_values(open_committed: bool = False) -> set[str]:
    """What a read_committed reader sees: while the open transaction is open, the committed
    records below the LSO; once it commits, every committed record, its own included."""
    names = [n for n, _, _ in TRANSACTIONS]
    past_lso = set(names[names.index("open"):])
    out = set()
    for name, outcome, parts in TRANSACTIONS:
        if outcome == "commit" or (outcome == "open" and open_committed):
            out |= {v for v, p in records(name, parts) if open_committed or not (p == OPEN_PARTITION and name in past_lso)}
    return out


def every_data_record() -> set[str]:
    return {v for name, _, parts in TRANSACTIONS for v, _ in records(name, parts)}


def triples(rows) -> list[tuple[int, int, str]]:
    return sorted((r["partition"], r["offset"], bytes(r["value"]).decode()) for r in rows)


def kafka_view(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, int, str]]:
    """(partition, offset, value) as librdkafka's consumer sees them with ``isolation``."""
    return sorted((m.partition(), m.offset(), m.value().decode()) for m in read_all(bootstrap, topic, PARTITIONS, isolation=isolation))


def batch(spark, bootstrap: str, topic: str, **options):
    reader = (spark.read.format("kafka").options(**ps.kafka_options(bootstrap)).option("subscribe", topic)
              .option("startingOffsets", "earliest").option("endingOffsets", "latest"))
    return reader.options(**options).load()


@pytest.fixture(scope="module", params=["kafkalite", pytest.param("kafka", marks=pytest.mark.reference)])
def txn_broker(request, spark, tmp_path_factory):
    """kafkalite, or a reference Kafka; the spark fixture first, so a missing Spark skips before any broker starts."""
    if request.param == "kafka":
        ok, why = reference_kafka.available()
        if not ok:
            pytest.skip(why)
        b = reference_kafka.ReferenceKafka(tmp_path_factory.mktemp("kafka"))
    else:
        b = BrokerProcess(tmp_path_factory.mktemp("kafkalite"))
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def scenario(txn_broker):
    """The topic of TRANSACTIONS, its open transaction held open while the module's tests run."""
    topic = new_topic(txn_broker.bootstrap, PARTITIONS)
    held = write_scenario(txn_broker.bootstrap, topic)
    yield topic
    held.abort_transaction(30)


def test_batch_read_committed_returns_only_committed_records_below_the_lso(spark, txn_broker, scenario):
    got = triples(batch(spark, txn_broker.bootstrap, scenario, **{"kafka.isolation.level": "read_committed"}).collect())
    assert {v for _, _, v in got} == read_committed_values()
    assert len(got) == len(read_committed_values()), "a record came twice"
    assert got == kafka_view(txn_broker.bootstrap, scenario, "read_committed")  # the same offsets too
    assert not [t for t in got if t[0] == 2], "partition 2 holds only an aborted transaction"


def test_batch_read_uncommitted_returns_every_data_record(spark, txn_broker, scenario):
    got = triples(batch(spark, txn_broker.bootstrap, scenario).collect())  # Spark's default isolation
    assert {v for _, _, v in got} == every_data_record() and len(got) == len(every_data_record())
    assert got == kafka_view(txn_broker.bootstrap, scenario, "read_uncommitted")


def test_pipeline_read_topic_with_read_committed(spark, txn_broker, scenario):
    """The batch jobs' reader (bounds looked up first, then assign) given isolation.level."""
    committed = triples(common.read_topic(spark, txn_broker.bootstrap, scenario, {"isolation.level": "read_committed"}).collect())
    assert committed == kafka_view(txn_broker.bootstrap, scenario, "read_committed")
    everything = triples(common.read_topic(spark, txn_broker.bootstrap, scenario).collect())
    assert {v for _, _, v in everything} == every_data_record()


def test_ending_offsets_past_the_lso_are_data_loss_to_spark(spark, txn_broker, scenario):
    """Explicit endingOffsets at the high watermark (looked up read_uncommitted) while a
    transaction is open: under read_committed nothing past the LSO can be fetched, and Spark
    takes the hole for lost data, as against Kafka. With the default failOnDataLoss=true the
    read fails; with false it skips the rest of the range. So bounds for a read_committed read
    are to be looked up read_committed too ("latest", or pipeline.common.read_topic given
    isolation.level), and then the default works."""
    bootstrap = txn_broker.bootstrap
    hwm = {p: end for (_, p), (_, end) in ps.offset_bounds(spark, bootstrap, [scenario]).items()}
    lso = {p: end for (_, p), (_, end) in ps.offset_bounds(spark, bootstrap, [scenario], {"isolation.level": "read_committed"}).items()}
    assert lso[OPEN_PARTITION] < hwm[OPEN_PARTITION] and all(lso[p] == hwm[p] for p in hwm if p != OPEN_PARTITION)
    options = {"kafka.isolation.level": "read_committed", "endingOffsets": json.dumps({scenario: {str(p): e for p, e in hwm.items()}}),
               "kafkaConsumer.pollTimeoutMs": "2000"}
    with pytest.raises(Exception, match="(?s)data may have been lost.*OffsetOutOfRange"):
        batch(spark, bootstrap, scenario, **options).collect()
    skipped = triples(batch(spark, bootstrap, scenario, failOnDataLoss="false", **options).collect())
    assert skipped == kafka_view(bootstrap, scenario, "read_committed")


def test_streaming_read_committed_reads_the_rest_once_the_open_transaction_commits(spark, txn_broker, tmp_path):
    bootstrap = txn_broker.bootstrap
    topic = new_topic(bootstrap, PARTITIONS)
    held = write_scenario(bootstrap, topic)
    checkpoint = str(tmp_path / "checkpoint")
    seen: list[tuple[int, int, str]] = []

    def run_available_now() -> None:
        source = (spark.readStream.format("kafka").options(**ps.kafka_options(bootstrap)).option("subscribe", topic)
                  .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed").load())
        query = (source.writeStream.foreachBatch(lambda df, _: seen.extend(triples(df.collect())))
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        assert query.awaitTermination(120), "the AvailableNow query did not finish"
        assert query.exception() is None, query.exception()

    run_available_now()
    assert sorted(seen) == kafka_view(bootstrap, topic, "read_committed")
    assert {v for _, _, v in seen} == read_committed_values()
    held.commit_transaction(30)
    run_available_now()  # resumes from the checkpoint: at the old LSO, now below the new one
    after = kafka_view(bootstrap, topic, "read_committed")
    assert sorted(seen) == after, "a record missing or read twice across the two runs"
    assert {v for _, _, v in after} == read_committed_values(open_committed=True)
