"""Consumer lag from ``__consumer_offsets``: ``python -m pipeline.lag``.

A batch job. It reads the whole ``__consumer_offsets`` topic through Spark's
Kafka source, decodes every record with ``protocol.group_records`` in a pandas
UDF (:mod:`pipeline.offsets`), keeps the latest value per key (a tombstone
deletes the committed offset), asks the brokers for the log-end offset of
every committed partition (ListOffsets, :func:`pipeline.spark.end_offsets`),
and writes one row per group, topic and partition:

==========================  ==================================================
``group``, ``topic``,       the key
``partition``
``committed_offset``        the latest commit's offset
``end_offset``              the partition's log-end offset (null: the topic or
                            partition no longer exists)
``lag``                     ``end_offset - committed_offset``
``last_commit_time``        the latest commit's commit timestamp (UTC)
``commits``                 commits to this key since its last tombstone that
                            are still in the log (compaction keeps fewer)
``commit_rate_per_min``     ``(commits - 1)`` over the minutes between the first
                            and the last of them; null with fewer than two
``leader_epoch``,           as committed
``commit_metadata``
==========================  ==================================================

Outputs, under ``--output``: ``lag/`` (Parquet), ``lag.png`` (total lag per
group, one bar segment per topic), and the table on stdout.
"""

from __future__ import annotations

import sys

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline import common
from pipeline import spark as ps
from pipeline.offsets import decode_records

OFFSETS_TOPIC = "__consumer_offsets"
COLUMNS = ["group", "topic", "partition", "committed_offset", "end_offset", "lag", "last_commit_time",
           "commits", "commit_rate_per_min", "leader_epoch", "commit_metadata"]


def decoded_commits(spark, bootstrap: str, kafka: dict | None = None, topic: str = OFFSETS_TOPIC):
    """Every offset-commit record of ``__consumer_offsets``, decoded, with its log position."""
    raw = common.read_topic(spark, bootstrap, topic, kafka)
    decoded = raw.select(
        F.col("partition").alias("log_partition"),
        F.col("offset").alias("log_offset"),
        decode_records(F.col("key"), F.col("value")).alias("d"),
    ).select("log_partition", "log_offset", "d.*")
    return decoded.where(F.col("kind") == "offset_commit")


def committed_offsets(commits):
    """Latest commit per (group, topic, partition) plus commit count and rate."""
    key = ["group", "topic", "partition"]
    latest_first = Window.partitionBy(*key).orderBy(F.col("log_offset").desc())
    whole_key = Window.partitionBy(*key)
    live = (
        commits
        .withColumn("last_tombstone", F.max(F.when(F.col("tombstone"), F.col("log_offset"))).over(whole_key))
        .where(F.col("last_tombstone").isNull() | (F.col("log_offset") > F.col("last_tombstone")))
    )
    stats = live.groupBy(*key).agg(
        F.count("*").alias("commits"),
        F.min("commit_timestamp_ms").alias("first_commit_ms"),
        F.max("commit_timestamp_ms").alias("last_commit_ms"),
    )
    latest = (
        commits.withColumn("rn", F.row_number().over(latest_first))
        .where((F.col("rn") == 1) & ~F.col("tombstone"))
        .select(*key, "committed_offset", "leader_epoch", "commit_metadata", F.col("commit_timestamp_ms").alias("latest_commit_ms"))
    )
    span_min = (F.col("last_commit_ms") - F.col("first_commit_ms")) / F.lit(60000.0)
    return latest.join(stats, key, "left").select(
        *key, "committed_offset", "leader_epoch", "commit_metadata", "commits",
        F.timestamp_millis(F.col("latest_commit_ms")).alias("last_commit_time"),
        F.when((F.col("commits") >= 2) & (span_min > 0), (F.col("commits") - 1) / span_min).alias("commit_rate_per_min"),
    )


def compute(spark, bootstrap: str, kafka: dict | None = None, topic: str = OFFSETS_TOPIC):
    """The lag table as a Spark DataFrame (COLUMNS), committed partitions only."""
    common.ship_code(spark)
    with common.internal_topic_reads(spark):
        committed = committed_offsets(decoded_commits(spark, bootstrap, kafka, topic)).cache()
        committed.count()  # materialise while the internal-topic reader is selected
    topics = [r["topic"] for r in committed.select("topic").distinct().collect()]
    ends = ps.end_offsets(spark, bootstrap, topics, kafka)
    schema = T.StructType([T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
                           T.StructField("end_offset", T.LongType())])
    end_df = spark.createDataFrame([(t, p, o) for (t, p), o in sorted(ends.items())], schema)
    return (
        committed.join(end_df, ["topic", "partition"], "left")
        .withColumn("lag", F.col("end_offset") - F.col("committed_offset"))
        .select(*COLUMNS)
        .orderBy("group", "topic", "partition")
    )


def chart(pdf, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.5 * max(1, pdf["group"].nunique()) + 1.5)))
    if len(pdf):
        per = pdf.assign(lag=pdf["lag"].fillna(0)).pivot_table(index="group", columns="topic", values="lag", aggfunc="sum", fill_value=0)
        per = per.loc[per.sum(axis=1).sort_values().index]
        left = None
        for topic in per.columns:
            ax.barh(per.index, per[topic], left=left, label=topic)
            left = per[topic] if left is None else left + per[topic]
        for y, total in enumerate(per.sum(axis=1)):
            ax.text(total, y, f" {int(total)}", va="center")
        ax.legend(title="topic", fontsize="small", loc="lower right")
    else:
        ax.text(0.5, 0.5, "no committed offsets", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("lag (messages)")
    ax.set_title("Consumer lag per group")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(spark, bootstrap: str, output: str, kafka: dict | None = None, quiet: bool = False, stream=None):
    """Compute, write ``<output>/lag`` and ``<output>/lag.png``, print; returns the pandas table."""
    df = compute(spark, bootstrap, kafka)
    df.write.mode("overwrite").parquet(ps.join(output, "lag"))
    pdf = spark.read.parquet(ps.join(output, "lag")).orderBy("group", "topic", "partition").toPandas()
    png = common.chart_path("lag.png")
    chart(pdf, png)
    ps.write_file(spark, png, output, "lag.png")
    if not quiet:
        ps.print_table("consumer lag", pdf, stream)
    return pdf


def main(argv: list[str] | None = None) -> int:
    args = common.arg_parser("python -m pipeline.lag", "Consumer lag per group, topic and partition, from __consumer_offsets.").parse_args(argv)
    spark = ps.session(args.master, "kafkalite-lag")
    try:
        run(spark, args.bootstrap, args.output, common.kafka_settings(args.kafka_option), args.quiet)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
