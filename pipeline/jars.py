"""The Spark Kafka connector's jars: which, where, and fetching them once.

pyspark from PyPI bundles Spark but not its Kafka connector. The connector
(``org.apache.spark:spark-sql-kafka-0-10_2.13``) and the few jars it needs that
pyspark lacks (spark-token-provider-kafka, kafka-clients, commons-pool2) are
named by ``tests/java/spark/pom.xml``; ``fetch()`` copies them from Maven Central
with ``mvn dependency:copy-dependencies`` into a cache outside the repository
(``$KAFKALITE_SPARK_JARS`` or ``~/.cache/kafkalite/spark-kafka-<version>``),
once. ``make spark-jars`` runs ``python -m pipeline.jars``.

Where no such directory exists (a cluster node, say), the jobs fall back to
``spark.jars.packages`` with the same coordinate, which Spark's own resolver
fetches from Maven Central.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POM = ROOT / "tests" / "java" / "spark" / "pom.xml"

SPARK_VERSION = "4.0.0"
SCALA_BINARY = "2.13"
CONNECTOR = f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{SPARK_VERSION}"
HOME = Path(os.environ.get("KAFKALITE_SPARK_JARS") or Path.home() / ".cache" / "kafkalite" / f"spark-kafka-{SPARK_VERSION}")
LIBS = HOME / "libs"
_COMPLETE = LIBS / ".complete"  # holds the POM the jars were copied for


class JarsUnavailable(RuntimeError):
    pass


def check_versions() -> None:
    """Fail loudly if the installed pyspark is not the Spark the connector was built for."""
    import pyspark

    if pyspark.__version__ != SPARK_VERSION:
        raise JarsUnavailable(
            f"pyspark {pyspark.__version__} is installed but the Kafka connector is for Spark {SPARK_VERSION}: "
            f"pin pyspark=={SPARK_VERSION} (the connector must match Spark exactly)"
        )
    bundled = Path(pyspark.__file__).parent / "jars"
    scala = [p.name for p in bundled.glob("scala-library-*.jar")]
    if scala and not any(n.startswith(f"scala-library-{SCALA_BINARY}.") for n in scala):
        raise JarsUnavailable(f"pyspark bundles {scala[0]}, the connector is for Scala {SCALA_BINARY}")


def _pom_stamp() -> str:
    return POM.read_text()


def ready() -> bool:
    with contextlib.suppress(OSError):
        return _COMPLETE.read_text() == _pom_stamp()
    return False


def jar_paths() -> list[Path]:
    return sorted(LIBS.glob("*.jar")) if ready() else []


def fetch(timeout: float = 900.0) -> Path:
    """Copy the connector's jars into LIBS (no-op when already there for this POM)."""
    if ready():
        return LIBS
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsUnavailable("mvn (Apache Maven) is not on PATH; it is needed once to fetch Spark's Kafka connector")
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return LIBS
        staging = Path(tempfile.mkdtemp(prefix="libs-", dir=HOME))
        try:
            proc = subprocess.run(
                [mvn, "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
                 "-DincludeScope=runtime", f"-DoutputDirectory={staging}"],
                capture_output=True, text=True, timeout=timeout,
            )
            if proc.returncode != 0 or not list(staging.glob("spark-sql-kafka-0-10_*.jar")):
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                raise JarsUnavailable(f"mvn could not fetch {CONNECTOR} (exit {proc.returncode}):\n{tail}")
            shutil.rmtree(LIBS, ignore_errors=True)
            staging.rename(LIBS)
            _COMPLETE.write_text(_pom_stamp())
        except subprocess.TimeoutExpired as e:
            raise JarsUnavailable(f"mvn did not finish fetching {CONNECTOR} within {timeout:.0f}s") from e
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return LIBS


def java_problem() -> str | None:
    """None if a Java 17+ runtime is on PATH (or JAVA_HOME), else why not."""
    java = shutil.which("java")
    if os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        if candidate.exists():
            java = str(candidate)
    if java is None:
        return "Java is not installed (Spark 4 needs Java 17+; no java on PATH or in JAVA_HOME)"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not run {java}: {e}"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = None if not m else (int(m.group(2) or 0) if m.group(1) == "1" else int(m.group(1)))
    if major is None or major < 17:
        return f"Spark 4 needs Java 17+, found {major or 'an unknown version'} at {java}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.jars", description="Fetch Spark's Kafka connector jars once.")
    ap.add_argument("--if-possible", action="store_true", help="exit 0 with a note when Java or Maven is missing")
    args = ap.parse_args(argv)
    try:
        check_versions()
        problem = java_problem()
        if problem:
            raise JarsUnavailable(problem)
        path = fetch()
    except JarsUnavailable as e:
        print(f"pipeline.jars: {e}", file=sys.stderr)
        return 0 if args.if_possible else 1
    for jar in jar_paths():
        print(jar)
    print(f"pipeline.jars: {CONNECTOR} and its dependencies are in {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
