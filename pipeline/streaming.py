"""Windowed counts per key, Kafka to Kafka, with Structured Streaming.

``python -m pipeline.streaming --bootstrap B --input T --output-topic O
--checkpoint DIR`` reads ``T`` with Spark's Kafka source (``subscribe``,
``startingOffsets``), counts records per key in tumbling event-time windows
of the Kafka record timestamp, and writes each window's final count to ``O``
through Spark's Kafka sink: key = the record key, value = JSON
``{"window_start": ms, "window_end": ms, "key": ..., "count": n}``.

The query runs in ``append`` mode behind a watermark, so a window is written
once, when the watermark passes its end, never as a running total. Offsets,
the window state and the committed batches live in the checkpoint: a stopped
query restarted on the same checkpoint resumes where it stopped (the
``startingOffsets`` option then no longer applies) and loses nothing. Spark's
Kafka sink is at-least-once: a micro-batch whose output reached Kafka but
whose commit did not reach the checkpoint runs again on restart and writes the
same rows a second time (same window, key and count).
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import functions as F

from pipeline import common
from pipeline import spark as ps


def windowed_counts(spark, bootstrap: str, input_topic: str, *, starting_offsets: str = "earliest",
                    window: str = "10 seconds", watermark: str = "5 seconds", kafka: dict | None = None):
    """The streaming DataFrame of (key, value) rows the Kafka sink writes."""
    source = (
        spark.readStream.format("kafka")
        .options(**ps.kafka_options(bootstrap, kafka))
        .option("subscribe", input_topic)
        .option("startingOffsets", starting_offsets)
        .option("failOnDataLoss", "true")
        .load()
    )
    counts = (
        source.select(F.col("key").cast("string").alias("key"), F.col("timestamp"))
        .withWatermark("timestamp", watermark)
        .groupBy(F.window("timestamp", window).alias("w"), F.col("key"))
        .count()
    )
    return counts.select(
        F.col("key"),
        F.to_json(F.struct(
            F.unix_millis(F.col("w.start")).alias("window_start"),
            F.unix_millis(F.col("w.end")).alias("window_end"),
            F.col("key"),
            F.col("count"),
        )).alias("value"),
    )


def start(spark, bootstrap: str, input_topic: str, output_topic: str, checkpoint: str, *,
          starting_offsets: str = "earliest", window: str = "10 seconds", watermark: str = "5 seconds",
          trigger: str = "1 second", kafka: dict | None = None, name: str | None = None):
    """Start the query; returns the StreamingQuery."""
    rows = windowed_counts(spark, bootstrap, input_topic, starting_offsets=starting_offsets,
                           window=window, watermark=watermark, kafka=kafka)
    writer = (
        rows.writeStream.format("kafka")
        .options(**ps.kafka_options(bootstrap, kafka))
        .option("topic", output_topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(processingTime=trigger)
    )
    if name:
        writer = writer.queryName(name)
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.streaming", description="Windowed counts per key, Kafka to Kafka.")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True, help="topic to read")
    ap.add_argument("--output-topic", required=True, help="topic to write the counts to")
    ap.add_argument("--checkpoint", required=True, help="checkpoint directory (any Hadoop URI)")
    ap.add_argument("--master", default=None)
    ap.add_argument("--starting-offsets", default="earliest", help='earliest, latest or Spark\'s JSON ({"t":{"0":5}})')
    ap.add_argument("--window", default="10 seconds")
    ap.add_argument("--watermark", default="5 seconds")
    ap.add_argument("--trigger", default="1 second")
    ap.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    spark = ps.session(args.master, "kafkalite-windowed-counts")
    try:
        query = start(spark, args.bootstrap, args.input, args.output_topic, args.checkpoint,
                      starting_offsets=args.starting_offsets, window=args.window, watermark=args.watermark,
                      trigger=args.trigger, kafka=common.kafka_settings(args.kafka_option))
        query.awaitTermination()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
