"""What both batch jobs share: arguments, reading a topic whole, shipping code."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import zipfile
from pathlib import Path

from pyspark.sql import types as T

from pipeline import spark as ps

KAFKA_SCHEMA = T.StructType([
    T.StructField("key", T.BinaryType()),
    T.StructField("value", T.BinaryType()),
    T.StructField("topic", T.StringType()),
    T.StructField("partition", T.IntegerType()),
    T.StructField("offset", T.LongType()),
    T.StructField("timestamp", T.TimestampType()),
    T.StructField("timestampType", T.IntegerType()),
])

ROOT = Path(__file__).resolve().parent.parent
DEPRECATED_FETCHING = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
_shipped: set[int] = set()


def arg_parser(prog: str, description: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers (host:port[,host:port...])")
    ap.add_argument("--output", required=True, help="output directory (local path or any Hadoop URI: file://, hdfs://, s3a://)")
    ap.add_argument("--master", default=None, help="Spark master (local[2], spark://host:7077, yarn, k8s://...); default: spark-submit's")
    ap.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                    help="extra Kafka client setting (security.protocol, sasl.*, ...), for Spark's reader and the end-offset lookup")
    ap.add_argument("--quiet", action="store_true", help="no console table")
    return ap


def kafka_settings(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--kafka-option wants KEY=VALUE, got {pair!r}")
        out[key.removeprefix("kafka.")] = value
    return out


@contextlib.contextmanager
def internal_topic_reads(spark):
    """Let Spark's Kafka source see internal topics while the block runs.

    Spark's default offset reader (the Admin client) drops every partition of a
    topic whose metadata says ``is_internal`` (``ConsumerStrategy
    .retrieveAllPartitions`` filters on ``TopicDescription.isInternal``), even
    when the topic is named in ``subscribe`` or ``assign``: the read succeeds
    with no rows. The consumer-based reader that
    ``spark.sql.streaming.kafka.useDeprecatedOffsetFetching`` selects assigns
    the partitions by name and reads them. ``__consumer_offsets`` is internal
    on every Kafka; kafkalite also marks ``__kafkalite_group_events`` internal.
    """
    before = spark.conf.get(DEPRECATED_FETCHING, None)
    spark.conf.set(DEPRECATED_FETCHING, "true")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(DEPRECATED_FETCHING)
        else:
            spark.conf.set(DEPRECATED_FETCHING, before)


def read_topic(spark, bootstrap: str, topic: str, kafka: dict | None = None):
    """A snapshot of the whole topic, log start to log end, as a batch DataFrame.

    The partitions and their bounds are looked up first (:func:`offset_bounds`)
    and handed to Spark as ``assign`` with explicit ``startingOffsets`` and
    ``endingOffsets`` JSON: no consumer group is joined (a ``subscribe`` read
    through the consumer-based reader would join one, and write its own
    GroupMetadata into ``__consumer_offsets``), empty partitions cost no task,
    and every action on the DataFrame sees the same records.
    """
    bounds = {tp: b for tp, b in ps.offset_bounds(spark, bootstrap, [topic], kafka).items() if b[1] > b[0]}
    if not bounds:
        bounds = {}
    parts = sorted(p for (_, p) in bounds)
    reader = spark.read.format("kafka").options(**ps.kafka_options(bootstrap, kafka))
    if not parts:  # nothing to read: an empty frame with the Kafka source's schema
        return spark.createDataFrame([], KAFKA_SCHEMA)
    return (
        reader.option("assign", json.dumps({topic: parts}))
        .option("startingOffsets", json.dumps({topic: {str(p): bounds[(topic, p)][0] for p in parts}}))
        .option("endingOffsets", json.dumps({topic: {str(p): bounds[(topic, p)][1] for p in parts}}))
        .option("failOnDataLoss", "false")
        .load()
    )


def ship_code(spark) -> None:
    """addPyFile a zip of ``pipeline`` and ``protocol.group_records`` so executors
    on a cluster can run the UDFs without kafkalite installed there."""
    sc = spark.sparkContext
    if id(sc) in _shipped:
        return
    path = Path(tempfile.gettempdir()) / f"kafkalite-pipeline-{os.getpid()}.zip"
    with zipfile.ZipFile(path, "w") as z:
        for pkg in ("pipeline", "protocol/group_records"):
            for f in sorted((ROOT / pkg).glob("*.py")):
                z.write(f, str(f.relative_to(ROOT)))
        # protocol/__init__.py only: the rest of protocol (kio, codecs) is not needed
        z.write(ROOT / "protocol" / "__init__.py", "protocol/__init__.py")
    sc.addPyFile(str(path))
    _shipped.add(id(sc))


def chart_path(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix="kafkalite-chart-")) / name
