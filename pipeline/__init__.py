"""Spark jobs over kafkalite (or any Kafka): consumer lag and rebalance history.

* :mod:`pipeline.lag` - committed offsets from ``__consumer_offsets`` against
  end offsets, per group, topic and partition;
* :mod:`pipeline.rebalances` - rebalances from ``__kafkalite_group_events``;
* :mod:`pipeline.streaming` - a Structured Streaming windowed count, Kafka to
  Kafka, used by the compatibility tests;
* :mod:`pipeline.jars` and :mod:`pipeline.spark` - the Spark Kafka connector's
  jars and the SparkSession the jobs share.

The jobs read only through the Kafka protocol (Spark's Kafka source and the
kafka-clients consumer that comes with it) and write only under the output path
they are given, so the same command runs against a real Kafka on a cluster.
See docs/pipeline.md.
"""
