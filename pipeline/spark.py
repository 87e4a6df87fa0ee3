"""The SparkSession the jobs share, and the few things they do on the driver.

``session(master)`` builds (or reuses) a SparkSession with the Kafka connector:
``spark.jars`` from the local cache that ``python -m pipeline.jars`` fills, else
``spark.jars.packages`` for Spark's own resolver. For ``local[*]`` masters it
also sets what a laptop or CI wants: few shuffle partitions, no UI.

``end_offsets()`` asks the brokers for log-end offsets with the kafka-clients
consumer that the connector brought onto the driver's classpath (ListOffsets,
through py4j), so the jobs speak nothing but the Kafka protocol to the brokers.

``write_file()`` copies a file the driver made (a PNG) under the job's output
path through Hadoop's FileSystem API, so ``--output`` may be a local directory,
``file://``, ``hdfs://`` or ``s3a://`` alike.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pipeline import jars


def session(master: str | None = None, app_name: str = "kafkalite-pipeline", conf: dict | None = None):
    """A SparkSession with the Kafka connector on its classpath."""
    jars.check_versions()
    problem = jars.java_problem()
    if problem:
        raise jars.JarsUnavailable(problem)
    # the executors' Python must be this one (pandas_udf needs pandas and pyarrow there)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    paths = jars.jar_paths()
    if paths:
        builder = builder.config("spark.jars", ",".join(str(p) for p in paths))
    else:
        builder = builder.config("spark.jars.packages", jars.CONNECTOR)
    local = (master or "local").startswith("local")
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if local:
        settings.update({
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.memory": "1g",
            "spark.sql.streaming.stateStore.maintenanceInterval": "600s",
            # the driver binds to loopback: nothing of Spark's listens on other addresses
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        })
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("KAFKALITE_SPARK_LOG_LEVEL", "WARN"))
    return spark


def kafka_options(bootstrap: str, extra: dict | None = None) -> dict:
    """Options for ``format("kafka")`` readers and writers."""
    opts = {"kafka.bootstrap.servers": bootstrap}
    for k, v in (extra or {}).items():
        opts[k if k.startswith("kafka.") else f"kafka.{k}"] = v
    return opts


def end_offsets(spark, bootstrap: str, topics, client_config: dict | None = None) -> dict[tuple[str, int], int]:
    """{(topic, partition): log-end offset} for every partition of ``topics``.

    ListOffsets(latest) through a kafka-clients consumer on the driver's JVM:
    the high watermark, the offset a consumer's lag is measured against (it
    counts transaction markers too, as Kafka's own tools do).
    """
    return {tp: end for tp, (_, end) in offset_bounds(spark, bootstrap, topics, client_config).items()}


def offset_bounds(spark, bootstrap: str, topics, client_config: dict | None = None) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (log-start offset, log-end offset)} for every partition of ``topics``.

    A kafka-clients consumer on the driver's JVM (the one the Kafka connector
    brings), used without a group: Metadata, then ListOffsets earliest and latest.
    """
    topics = sorted(set(topics))
    if not topics:
        return {}
    jvm = spark.sparkContext._jvm
    props = jvm.java.util.Properties()
    props.setProperty("bootstrap.servers", bootstrap)
    props.setProperty("client.id", "kafkalite-pipeline-offsets")
    props.setProperty("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer")
    props.setProperty("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer")
    props.setProperty("enable.auto.commit", "false")
    for k, v in (client_config or {}).items():
        props.setProperty(k, str(v))
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(props)
    try:
        timeout = jvm.java.time.Duration.ofSeconds(30)
        partitions = jvm.java.util.ArrayList()
        for topic in topics:
            infos = consumer.partitionsFor(topic, timeout)
            if infos is None:
                continue
            for info in infos:
                partitions.add(jvm.org.apache.kafka.common.TopicPartition(topic, info.partition()))
        if partitions.isEmpty():
            return {}
        begin = {(e.getKey().topic(), e.getKey().partition()): int(e.getValue())
                 for e in consumer.beginningOffsets(partitions, timeout).entrySet()}
        end = {(e.getKey().topic(), e.getKey().partition()): int(e.getValue())
               for e in consumer.endOffsets(partitions, timeout).entrySet()}
        return {tp: (begin.get(tp, 0), end[tp]) for tp in sorted(end)}
    finally:
        consumer.close()


def write_file(spark, local_path: Path, output: str, name: str) -> str:
    """Copy a driver-local file to ``<output>/<name>`` through Hadoop's FileSystem."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    dest = jvm.org.apache.hadoop.fs.Path(join(output, name))
    fs = dest.getFileSystem(conf)
    fs.copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path(str(Path(local_path).resolve())), dest)
    return join(output, name)


def join(output: str, name: str) -> str:
    return output.rstrip("/") + "/" + name


def print_table(title: str, pdf, stream=None) -> None:
    """A plain console table (pandas' own formatting, every row and column)."""
    import pandas as pd

    stream = stream or sys.stdout
    print(f"\n== {title} ({len(pdf)} rows)", file=stream)
    if len(pdf) == 0:
        print("(none)", file=stream)
        return
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 200, "display.max_colwidth", 60):
        print(pdf.to_string(index=False), file=stream)
