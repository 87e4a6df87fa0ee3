"""Spark Structured Streaming and batch reads against kafkalite (format("kafka"))."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[test]')")

from pipeline import spark as ps
from pipeline import streaming
from tests.pipeline.helpers import create_topic, produce, read_all
from tests.wait import wait_until

pytestmark = pytest.mark.slow

S = 1000
# a 10 s window boundary ten minutes ago, in ms: event times well inside the
# topic's retention (older records may be deleted by time retention at once)
T0 = (int(time.time()) // 10 * 10 - 600) * S


def _wait(predicate, timeout: float, what: str, query):
    """``predicate`` (reading the output topic) until it holds; a failed query ends the wait at once."""

    def ready():
        if query.exception() is not None:
            raise AssertionError(f"streaming query failed: {query.exception()}")
        return predicate()

    return wait_until(ready, timeout=timeout, what=what, describe=lambda: f"last progress: {query.lastProgress}")


def _outputs(bootstrap: str, topic: str):
    rows = []
    for m in read_all(bootstrap, topic, 1, timeout=2.0):
        v = json.loads(m.value())
        assert m.key().decode() == v["key"]
        rows.append((v["window_start"], v["window_end"], v["key"], v["count"]))
    return rows


def test_windowed_counts_survive_stop_and_restart(spark, kafkalite, tmp_path):
    """Stop the query mid-stream, produce more, restart it on its checkpoint.

    Expected in the output topic: every closed window's count per key, exactly,
    including a window whose records straddle the restart (so its state came
    back from the checkpoint) and none from before the restart's
    ``startingOffsets=latest`` was given (a restarted query resumes from its
    checkpoint; the option only applies to a new one). Duplicates: Spark's
    Kafka sink is at-least-once, so a micro-batch replayed after the stop may
    write its rows again; the only duplicates allowed are such exact copies
    (same window, key and count); a second, different count for a window and
    key is a failure, as is a missing or extra one.
    """
    bs = kafkalite.bootstrap
    create_topic(bs, "clicks", 2)
    create_topic(bs, "click-counts", 1)
    checkpoint = str(tmp_path / "checkpoint")

    # phase 1: window [T0, T0+10s) complete, [T0+10s, T0+20s) begun; event time reaches
    # T0+16s, so the 5 s watermark (T0+11s) closes the first window only
    phase1 = [(0, b"a", b"1", T0 + 1 * S), (1, b"a", b"2", T0 + 2 * S), (0, b"b", b"3", T0 + 3 * S),
              (1, b"a", b"4", T0 + 8 * S), (0, b"b", b"5", T0 + 9 * S),
              (1, b"a", b"6", T0 + 12 * S), (0, b"a", b"7", T0 + 16 * S)]
    produce(bs, "clicks", phase1)
    query = streaming.start(spark, bs, "clicks", "click-counts", checkpoint, starting_offsets="earliest", name="counts1")
    try:
        _wait(lambda: len(_outputs(bs, "click-counts")) >= 2, 90, "the first window's counts", query)
    finally:
        query.stop()
    first = Counter(_outputs(bs, "click-counts"))
    assert set(first) == {(T0, T0 + 10 * S, "a", 3), (T0, T0 + 10 * S, "b", 2)}

    # phase 2, while the query is down: more of the open window, a third window, and an
    # event at T0+60s whose watermark (T0+55s) closes everything before it
    phase2 = [(1, b"b", b"8", T0 + 11 * S), (0, b"b", b"9", T0 + 13 * S), (1, b"a", b"10", T0 + 19 * S),
              (0, b"c", b"11", T0 + 29 * S), (1, b"z", b"12", T0 + 60 * S)]
    produce(bs, "clicks", phase2)
    query = streaming.start(spark, bs, "clicks", "click-counts", checkpoint, starting_offsets="latest", name="counts2")
    try:
        _wait(lambda: len(set(_outputs(bs, "click-counts"))) >= 5, 90, "the later windows' counts", query)
        query.processAllAvailable()  # every batch the input allows has run: a stray extra row would show
    finally:
        query.stop()

    rows = _outputs(bs, "click-counts")
    expected = {
        (T0, T0 + 10 * S, "a", 3), (T0, T0 + 10 * S, "b", 2),
        (T0 + 10 * S, T0 + 20 * S, "a", 3), (T0 + 10 * S, T0 + 20 * S, "b", 2),
        (T0 + 20 * S, T0 + 30 * S, "c", 1),
    }
    assert set(rows) == expected  # no loss; nothing for the still-open window of "z"
    per_window_key = Counter((w, e, k) for (w, e, k, _) in set(rows))
    assert max(per_window_key.values()) == 1  # one count per window and key
    duplicates = len(rows) - len(set(rows))
    assert duplicates <= 2, f"{duplicates} replayed rows: more than one micro-batch's worth"


def test_batch_read_with_explicit_offsets(spark, kafkalite):
    bs = kafkalite.bootstrap
    create_topic(bs, "ranged", 2)
    produce(bs, "ranged", [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), None) for p in (0, 1) for i in range(6)])
    starting = json.dumps({"ranged": {"0": 2, "1": -2}})  # -2: earliest
    ending = json.dumps({"ranged": {"0": 5, "1": -1}})  # -1: latest
    df = (
        spark.read.format("kafka").options(**ps.kafka_options(bs))
        .option("subscribe", "ranged").option("startingOffsets", starting).option("endingOffsets", ending).load()
    )
    got = sorted((r["partition"], r["offset"], r["key"].decode(), r["value"].decode()) for r in df.collect())
    assert got == [(0, o, f"k0-{o}", f"v0-{o}") for o in range(2, 5)] + [(1, o, f"k1-{o}", f"v1-{o}") for o in range(6)]
    # the same range through assign
    df = (
        spark.read.format("kafka").options(**ps.kafka_options(bs))
        .option("assign", json.dumps({"ranged": [0]}))
        .option("startingOffsets", json.dumps({"ranged": {"0": 4}})).option("endingOffsets", json.dumps({"ranged": {"0": 6}})).load()
    )
    assert sorted(r["offset"] for r in df.collect()) == [4, 5]
