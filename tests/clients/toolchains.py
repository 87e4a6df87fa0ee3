"""Prepare each client of the matrix once, outside the repository.

Every ``prepare_*`` function is idempotent, takes a file lock (concurrent pytest
processes wait for one another), is bounded in time, and raises ``Unavailable``
with a one-line reason when the toolchain is missing or the preparation fails.
Everything it builds or downloads lands in ``$KAFKALITE_CLIENTS_CACHE`` (default
``~/.cache/kafkalite/clients``), in a directory named after a hash of the sources
it came from, so an edit rebuilds and nothing is written into the repository:

* Go: ``go build`` of ``tests/clients/go/{franz,segmentio}`` (modules come from
  the Go module proxy, checked against the committed go.sum);
* Node: ``npm ci`` of ``tests/clients/node`` (package.json + package-lock.json)
  into a copy of that directory;
* kcat: the ``kcat`` on PATH, else ``apt-get install -y kcat`` when running as
  root on a Debian-like system;
* Java: ``mvn dependency:copy-dependencies`` of ``tests/clients/java/pom.xml``
  (kafka-tools 4.1.0, which holds kafka-consumer-groups, and kafka-clients), then
  ``javac`` of ``GroupConsumer.java`` against it.

``python -m tests.clients.toolchains`` prepares all four and prints what it found.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.reference_kafka import MIN_JAVA, _java_major

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("KAFKALITE_CLIENTS_CACHE") or Path.home() / ".cache" / "kafkalite" / "clients")
GO_SRC = HERE / "go"
NODE_SRC = HERE / "node"
JAVA_SRC = HERE / "java"
JAVA_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
              "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err"]
CONSUMER_GROUPS_MAIN = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
REASSIGN_PARTITIONS_MAIN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"

# upper bounds of each preparation (first run: downloads and compiles)
GO_TIMEOUT_S = float(os.environ.get("KAFKALITE_GO_BUILD_TIMEOUT", 900))
NPM_TIMEOUT_S = float(os.environ.get("KAFKALITE_NPM_TIMEOUT", 600))
APT_TIMEOUT_S = float(os.environ.get("KAFKALITE_APT_TIMEOUT", 600))
MVN_TIMEOUT_S = float(os.environ.get("KAFKALITE_MVN_TIMEOUT", 900))


class Unavailable(Exception):
    """The toolchain is missing or could not be prepared; the message says why."""


@dataclass
class Toolchain:
    name: str
    versions: dict[str, str]  # client (library) name -> version
    runtime: str  # e.g. "go1.26.8"
    paths: dict[str, str] = field(default_factory=dict)
    prepare_seconds: float = 0.0


# -- helpers -----------------------------------------------------------------------


def _hash(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(str(f.relative_to(HERE)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(name: str):
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(argv: list[str], what: str, timeout: float, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        raise Unavailable(f"{what} did not finish within {timeout:.0f}s") from e
    except OSError as e:
        raise Unavailable(f"{what} could not run: {e}") from e
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise Unavailable(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return proc


def _which(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise Unavailable(f"{name} is not on PATH ({why})")
    return path


def _staging(prefix: str) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{prefix}-", dir=CACHE))


def _publish(staging: Path, final: Path) -> None:
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)


# -- Go: franz-go and segmentio/kafka-go ----------------------------------------------


def go_versions() -> dict[str, str]:
    text = (GO_SRC / "go.mod").read_text()
    out = {}
    for module, name in (("github.com/twmb/franz-go", "franz-go"), ("github.com/segmentio/kafka-go", "segmentio/kafka-go")):
        m = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.M)
        out[name] = m.group(1) if m else "?"
    return out


def prepare_go() -> Toolchain:
    start = time.monotonic()
    go = _which("go", "the Go toolchain builds the franz-go and segmentio/kafka-go harnesses")
    runtime = _run([go, "env", "GOVERSION"], "go env", 60).stdout.strip()
    sources = [GO_SRC / "go.mod", GO_SRC / "go.sum", *GO_SRC.glob("*/*.go")]
    out = CACHE / f"go-{_hash(sources)}"
    binaries = {name: out / name for name in ("franz", "segmentio")}
    with _locked("go"):
        if not all(b.exists() for b in binaries.values()):
            staging = _staging("go")
            try:
                # -mod=readonly: modules come from the proxy and must match the committed go.sum
                env = {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
                _run([go, "build", "-trimpath", "-o", str(staging) + "/", "./franz", "./segmentio"],
                     "go build of tests/clients/go", GO_TIMEOUT_S, cwd=GO_SRC, env=env)
                _publish(staging, out)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return Toolchain("go", go_versions(), runtime, {k: str(v) for k, v in binaries.items()}, time.monotonic() - start)


# -- Node: kafkajs ------------------------------------------------------------------


def node_versions() -> dict[str, str]:
    lock = json.loads((NODE_SRC / "package-lock.json").read_text())
    return {"kafkajs": lock["packages"]["node_modules/kafkajs"]["version"]}


def prepare_node() -> Toolchain:
    start = time.monotonic()
    node = _which("node", "Node.js runs the kafkajs harness")
    npm = _which("npm", "npm installs kafkajs from package-lock.json")
    runtime = "node " + _run([node, "--version"], "node --version", 60).stdout.strip()
    sources = [NODE_SRC / "package.json", NODE_SRC / "package-lock.json", NODE_SRC / "harness.js"]
    out = CACHE / f"node-{_hash(sources)}"
    with _locked("node"):
        if not (out / ".complete").exists():
            staging = _staging("node")
            try:
                for f in sources:
                    shutil.copy2(f, staging / f.name)
                _run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
                     "npm ci of tests/clients/node", NPM_TIMEOUT_S, cwd=staging)
                (staging / ".complete").write_text("")
                _publish(staging, out)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return Toolchain("node", node_versions(), runtime, {"node": node, "harness": str(out / "harness.js")}, time.monotonic() - start)


# -- kcat ---------------------------------------------------------------------------


def _apt_install(package: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    argv = ["apt-get", "install", "-y", "--no-install-recommends", package]
    try:
        _run(argv, f"apt-get install {package}", APT_TIMEOUT_S, env=env)
    except Unavailable:
        # a fresh machine may have no package lists yet
        _run(["apt-get", "update"], "apt-get update", APT_TIMEOUT_S, env=env)
        _run(argv, f"apt-get install {package}", APT_TIMEOUT_S, env=env)


def prepare_kcat() -> Toolchain:
    start = time.monotonic()
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        if os.environ.get("KAFKALITE_NO_APT"):
            raise Unavailable("kcat is not on PATH and KAFKALITE_NO_APT forbids installing it")
        if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise Unavailable("kcat is not on PATH (install it: apt-get install kcat; the tests do so themselves only as root)")
        with _locked("apt"):
            if shutil.which("kcat") is None:
                _apt_install("kcat")
        path = _which("kcat", "apt-get install kcat did not put it on PATH")
    banner = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=30)
    text = banner.stdout + banner.stderr
    m = re.search(r"Version (\S+)", text)
    lib = re.search(r"librdkafka (\S+)", text)
    version = (m.group(1) if m else "?") + (f" (librdkafka {lib.group(1)})" if lib else "")
    return Toolchain("kcat", {"kcat": version}, "", {"kcat": path}, time.monotonic() - start)


# -- Java: kafka-consumer-groups and GroupConsumer -------------------------------------


def java_versions() -> dict[str, str]:
    m = re.search(r"<kafka.version>([^<]+)</kafka.version>", (JAVA_SRC / "pom.xml").read_text())
    v = m.group(1) if m else "?"
    return {"kafka-clients": v, "kafka-consumer-groups": v, "kafka-reassign-partitions": v}


def prepare_java() -> Toolchain:
    start = time.monotonic()
    java = _which("java", f"Java {MIN_JAVA}+ runs kafka-clients and kafka-consumer-groups")
    major = _java_major(java)
    if major is None or major < MIN_JAVA:
        raise Unavailable(f"Java {MIN_JAVA}+ is needed, found {major or 'an unknown version'}")
    javac = _which("javac", "a JDK compiles GroupConsumer.java")
    versions = java_versions()
    home = CACHE / f"java-tools-{versions['kafka-clients']}"
    libs = home / "libs"
    pom = (JAVA_SRC / "pom.xml").read_text()
    classes = home / f"classes-{_hash([JAVA_SRC / 'GroupConsumer.java', JAVA_SRC / 'pom.xml'])}"
    with _locked("java"):
        stamp = libs / ".complete"
        if not (stamp.exists() and stamp.read_text() == pom):
            mvn = _which("mvn", "Maven fetches kafka-tools and kafka-clients once")
            home.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".libs-", dir=home))
            try:
                _run([mvn, "-B", "-q", "-f", str(JAVA_SRC / "pom.xml"), "dependency:copy-dependencies",
                      "-DincludeScope=runtime", f"-DoutputDirectory={staging}"],
                     "mvn dependency:copy-dependencies of tests/clients/java/pom.xml", MVN_TIMEOUT_S)
                if not list(staging.glob("kafka-tools-*.jar")):
                    raise Unavailable("mvn copied no kafka-tools jar")
                (staging / ".complete").write_text(pom)
                _publish(staging, libs)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        if not (classes / "GroupConsumer.class").exists():
            staging = Path(tempfile.mkdtemp(prefix=".classes-", dir=home))
            try:
                _run([javac, "-encoding", "UTF-8", "-d", str(staging), "-cp", f"{libs}/*", str(JAVA_SRC / "GroupConsumer.java")],
                     "javac GroupConsumer.java", 300)
                _publish(staging, classes)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return Toolchain("java", versions, f"java {major}",
                     {"java": java, "classpath": f"{classes}:{libs}/*"}, time.monotonic() - start)


PREPARE = {"go": prepare_go, "node": prepare_node, "kcat": prepare_kcat, "java": prepare_java}


if __name__ == "__main__":  # python -m tests.clients.toolchains [name...]
    status = 0
    for name in sys.argv[1:] or PREPARE:
        try:
            t = PREPARE[name]()
            print(f"{name}: ready in {t.prepare_seconds:.1f}s {t.runtime} {t.versions} {t.paths}")
        except Unavailable as e:
            status = 1
            print(f"{name}: unavailable: {e}")
    sys.exit(status)
