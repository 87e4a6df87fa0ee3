"""Fixtures for the Spark pipeline tests: one local[2] SparkSession per test session.

Spark's start-up (a JVM, the Kafka connector's jars, the first Python worker)
is paid once. Every test skips, saying why, when Java 17+, pyspark, or the
connector's jars (``python -m pipeline.jars``, i.e. ``make spark-jars``) are
not to be had.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.broker_process import BrokerProcess

_spark_problem: str | None = None


def _why_not() -> str | None:
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"pyspark is not installed ({e})"
    from pipeline import jars

    try:
        jars.check_versions()
    except jars.JarsUnavailable as e:
        return str(e)
    problem = jars.java_problem()
    if problem:
        return problem
    if os.environ.get("KAFKALITE_NO_SPARK"):
        return "Spark tests disabled by KAFKALITE_NO_SPARK"
    try:
        jars.fetch()
    except jars.JarsUnavailable as e:
        return f"Spark's Kafka connector is unavailable: {e}"
    return None


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    problem = _why_not()
    if problem:
        pytest.skip(problem)
    from pipeline import spark as ps

    began = time.monotonic()
    session = ps.session("local[2]", "kafkalite-pipeline-tests", {
        "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("spark-warehouse")),
        "spark.local.dir": str(tmp_path_factory.mktemp("spark-local")),
    })
    session.startup_seconds = time.monotonic() - began
    yield session
    session.stop()


@pytest.fixture
def kafkalite(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    yield b
    if b.proc is not None:
        b.stop()
