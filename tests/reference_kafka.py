"""A real Apache Kafka 4.x broker as a child process, for differential tests.

The same tests run against kafkalite and against this broker: if a test fails
against real Kafka, the test is wrong, not kafkalite.

The version is Apache Kafka 4.4.0 unless ``$KAFKALITE_REFERENCE_KAFKA_VERSION``
names another 4.x release (``make test-conformance-4.1`` sets 4.1.0). The
broker's jars come from Maven Central: ``tests/java/kafka-broker/pom.xml`` names
``org.apache.kafka:kafka_2.13`` (and ``kafka-tools``, for ConfigCommand) at
``${kafka.version}``, and ``mvn dependency:copy-dependencies`` copies them and
their runtime dependencies (about 45 MB) into a cache outside the repository,
once per version (``$KAFKALITE_REFERENCE_KAFKA_HOME`` or
``~/.cache/kafkalite/kafka-<version>``). Each ``ReferenceKafka`` is a single
KRaft node in combined mode (broker and controller, node id 1) listening on two
free ports of 127.0.0.1, with a data directory of its own.

``ReferenceKafka`` has the shape of ``tests.broker_process.BrokerProcess``:
``start()``, ``stop()`` (SIGTERM, controlled shutdown), ``kill()`` (SIGKILL),
``restart()``, ``bootstrap``, ``port``, ``proc``, ``logs()``. Ports and data
survive a restart, so clients reconnect to the same address.

Set ``KAFKALITE_NO_REFERENCE_KAFKA=1`` to skip everything that needs it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

from tests.wait import wait_until

ROOT = Path(__file__).resolve().parent.parent
POM_DIR = ROOT / "tests" / "java" / "kafka-broker"
DEFAULT_KAFKA_VERSION = "4.4.0"
VERSION_ENV = "KAFKALITE_REFERENCE_KAFKA_VERSION"


def _version_from_env() -> str:
    """The 4.x release to run: the brokers this harness knows how to configure (KRaft only, no ZooKeeper)."""
    version = (os.environ.get(VERSION_ENV) or DEFAULT_KAFKA_VERSION).strip()
    if not re.fullmatch(r"4\.\d+\.\d+", version):
        raise ValueError(f"{VERSION_ENV}={version!r}: expected an Apache Kafka 4.x release such as 4.1.0")
    return version


KAFKA_VERSION = _version_from_env()
KAFKA_MINOR = ".".join(KAFKA_VERSION.split(".")[:2])  # "4.4": what reports and known differences are keyed by
HOME = Path(os.environ.get("KAFKALITE_REFERENCE_KAFKA_HOME") or Path.home() / ".cache" / "kafkalite" / f"kafka-{KAFKA_VERSION}")
LIBS = HOME / "libs"
_COMPLETE = LIBS / ".complete"  # written after a successful copy, names the POM it came from
MIN_JAVA = 17

# Broker settings every reference broker gets; ReferenceKafka(config=...) overrides or adds.
DEFAULT_CONFIG = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "50",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
}

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""

_availability: tuple[bool, str] | None = None


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def _pom_stamp() -> str:
    """What the cached jars came from: the POM and the version it was resolved at."""
    return f"kafka.version={KAFKA_VERSION}\n" + (POM_DIR / "pom.xml").read_text()


def _libs_ready() -> bool:
    try:
        return _COMPLETE.read_text() == _pom_stamp()
    except OSError:
        return False


def fetch_libs(timeout: float = 900.0) -> Path:
    """Copy the broker's jars into LIBS once (concurrent callers wait on a file lock)."""
    if _libs_ready():
        return LIBS
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("mvn (Apache Maven) is not on PATH; it is needed once to fetch Kafka's jars")
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _libs_ready():
            return LIBS
        staging = Path(tempfile.mkdtemp(prefix="libs-", dir=HOME))
        try:
            proc = subprocess.run(
                [mvn, "-B", "-q", "-f", str(POM_DIR / "pom.xml"), "dependency:copy-dependencies",
                 f"-Dkafka.version={KAFKA_VERSION}", "-DincludeScope=runtime", f"-DoutputDirectory={staging}"],
                capture_output=True, text=True, timeout=timeout,
            )
            if proc.returncode != 0 or not list(staging.glob("kafka_2.13-*.jar")):
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                raise RuntimeError(f"mvn could not fetch Apache Kafka {KAFKA_VERSION} (exit {proc.returncode}):\n{tail}")
            shutil.rmtree(LIBS, ignore_errors=True)
            staging.rename(LIBS)
            _COMPLETE.write_text(_pom_stamp())
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"mvn did not finish fetching Apache Kafka {KAFKA_VERSION} within {timeout:.0f}s") from e
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return LIBS


def available() -> tuple[bool, str]:
    """(True, "") if a reference broker can be started here, else (False, why not).

    Fetches the jars on first use; the answer is remembered for the process.
    """
    global _availability
    if _availability is None:
        _availability = _check_available()
    return _availability


def config_command() -> str:
    """ConfigCommand's class in the fetched jars: kafka.admin (core) in 4.1, org.apache.kafka.tools later."""
    moved = "org/apache/kafka/tools/ConfigCommand.class"
    for jar in LIBS.glob("kafka-tools-*.jar"):
        with contextlib.suppress(OSError, zipfile.BadZipFile), zipfile.ZipFile(jar) as z:
            if moved in z.namelist():
                return "org.apache.kafka.tools.ConfigCommand"
    return "kafka.admin.ConfigCommand"


def _check_available() -> tuple[bool, str]:
    if os.environ.get("KAFKALITE_NO_REFERENCE_KAFKA"):
        return False, "reference Kafka disabled by KAFKALITE_NO_REFERENCE_KAFKA"
    java = shutil.which("java")
    if java is None:
        return False, f"java is not on PATH (Apache Kafka {KAFKA_VERSION} needs Java {MIN_JAVA}+)"
    major = _java_major(java)
    if major is None or major < MIN_JAVA:
        return False, f"Apache Kafka {KAFKA_VERSION} needs Java {MIN_JAVA}+, found {major or 'an unknown version'}"
    try:
        fetch_libs()
    except Exception as e:  # noqa: BLE001 - any failure means "skip, and say why"
        return False, f"reference Kafka unavailable: {e}"
    return True, ""


def new_cluster_id() -> str:
    """A random id in Kafka's form (url-safe base64 of 16 bytes, unpadded) that never starts with "-".

    StorageTool's command line (``format -t <id>``) would take such an id for
    an option; Kafka's own Uuid.randomUuid draws again in that case, and so
    does this. (A uuid4 is never one of Kafka's reserved ids, 0 and 1.)
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _free_port() -> int:
    from tests.ports import free_port

    return free_port()


def own_session() -> bool:
    """Whether a broker under test starts in a session of its own (``BENCH_OWN_SESSION``, on unless ``0``).

    With Linux's autogroup (``/proc/sys/kernel/sched_autogroup_enabled``, for processes in the root
    cpu cgroup) a session is a scheduling group of its own: the broker then shares the CPUs with the
    test's clients and CPU hogs as one group against another, as it would from a container of its
    own, instead of as one thread among a hundred. Every broker a test compares (kafkalite, Kafka,
    kfake) is started the same way, so comparisons stay fair.
    """
    return os.environ.get("BENCH_OWN_SESSION", "1") != "0"


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL if the test process dies, so no JVM is orphaned."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class ReferenceKafka:
    """One Apache Kafka 4.x (KAFKA_VERSION) KRaft node (broker + controller) on 127.0.0.1."""

    kind = "kafka"

    def __init__(self, data_dir: Path | None = None, config: dict | None = None, heap: str = "512m") -> None:
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="reference-kafka-"))
        self.config = {**DEFAULT_CONFIG, **{k: str(v) for k, v in (config or {}).items()}}
        self.heap = heap
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.controller_port: int | None = None
        self.cluster_id = new_cluster_id()
        self.startup_seconds: float | None = None  # of the last start(), from exec to ready

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    # -- files -------------------------------------------------------------

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            **self.config,
        }
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.data_dir / "log4j2.properties").write_text(LOG4J2.format(log=self.log_file))
        return path

    def _java(self, *args: str) -> list[str]:
        return [
            shutil.which("java") or "java",
            f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp", f"{LIBS}/*", *args,
        ]

    def _format(self, props: Path) -> None:
        if (self.data_dir / "logs" / "meta.properties").exists():
            return  # a restart: keep the data
        proc = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(props)),
            capture_output=True, text=True, timeout=120,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")

    # -- lifecycle ---------------------------------------------------------

    def start(self, timeout: float = 120.0) -> ReferenceKafka:
        ok, reason = available()
        if not ok:
            raise RuntimeError(reason)
        if self.proc is not None:
            raise RuntimeError("reference Kafka already running")
        if self.port is None:  # first start; a restart keeps the ports so clients reconnect
            self.port, self.controller_port = _free_port(), _free_port()
        props = self._write_config()
        began = time.monotonic()
        self._format(props)
        out = open(self.data_dir / "stdout.txt", "ab")
        try:
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(props)),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                start_new_session=own_session(),
            )
        finally:
            out.close()
        try:
            self._wait_ready(began + timeout)
        except BaseException:
            self.kill()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_ready(self, deadline: float) -> None:
        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        # 1. the listener accepts connections
        def listening() -> bool:
            self._check_alive()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
            return False

        wait_until(listening, timeout=left(), what=f"reference Kafka to open port {self.port}", describe=lambda: self.logs(40))
        # 2. the broker answers Metadata with itself as a registered, unfenced broker
        from confluent_kafka.admin import AdminClient

        quiet = logging.getLogger("reference-kafka.readiness")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": quiet})

        def registered() -> bool:
            self._check_alive()
            with contextlib.suppress(Exception):
                return 1 in admin.list_topics(timeout=2).brokers
            return False

        wait_until(registered, timeout=left(), interval=0.1, what="reference Kafka to answer Metadata as broker 1",
                   describe=lambda: self.logs(40))

    def _check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            rc = None if self.proc is None else self.proc.returncode
            raise RuntimeError(f"reference Kafka exited ({rc}) during startup\n{self.logs(40)}")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: Kafka's controlled shutdown."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        return rc

    def kill(self) -> None:
        """SIGKILL: the crash path (the log is recovered on the next start)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> ReferenceKafka:
        self.stop()
        return self.start()

    def logs(self, last: int | None = None) -> str:
        text = ""
        for f in (self.data_dir / "stdout.txt", self.log_file):
            with contextlib.suppress(OSError):
                text += f.read_text(errors="replace")
        return "\n".join(text.splitlines()[-last:]) if last else text


if __name__ == "__main__":  # make reference-kafka: fetch the jars, start the broker once, report
    ok, why = available()
    if not ok:
        print(f"reference Kafka unavailable: {why}", file=sys.stderr)
        raise SystemExit(1)
    k = ReferenceKafka()
    try:
        k.start()
        print(f"Apache Kafka {KAFKA_VERSION} ready at {k.bootstrap} in {k.startup_seconds:.1f}s "
              f"(data {k.data_dir}, jars {LIBS}; {VERSION_ENV} picks another 4.x)")
    finally:
        k.stop()
        shutil.rmtree(k.data_dir, ignore_errors=True)
