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

``ReferenceKafkaCluster`` is a cluster of them (issue 26): one KRaft controller
(node id 100) and N brokers (1..N, 3 by default), one JVM each, with replication
factors of 3 and a killed broker fenced within seconds; its controls are those of
kafkalite's ``ClusterProcess`` (``kill_node``, ``stop_node``, ``start_node``, ...).

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


class _KafkaProcess:
    """One JVM running ``kafka.Kafka`` on a data directory of its own: its files (``server.properties``,
    log4j2, ``logs/``), the format, the process (dies with the test process) and its readiness waits.

    A subclass says what the node is by ``_properties()``; ``ReferenceKafka`` and each node of a
    ``ReferenceKafkaCluster`` are one.
    """

    what = "reference Kafka"  # in error messages

    def __init__(self, data_dir: Path, heap: str, cluster_id: str) -> None:
        self.data_dir = Path(data_dir)
        self.heap = heap
        self.cluster_id = cluster_id
        self.proc: subprocess.Popen | None = None

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    def _properties(self) -> dict:
        raise NotImplementedError

    # -- files -------------------------------------------------------------

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self._properties().items()))
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

    # -- the process -------------------------------------------------------

    def _spawn(self, props: Path) -> None:
        """Format (the first time) and exec the node; returns at once."""
        if self.proc is not None:
            raise RuntimeError(f"{self.what} already running")
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

    def _check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            rc = None if self.proc is None else self.proc.returncode
            raise RuntimeError(f"{self.what} exited ({rc}) during startup\n{self.logs(40)}")

    def _wait_listening(self, port: int, deadline: float) -> None:
        """Until ``port`` accepts connections (or the process exits, or ``deadline``)."""
        def listening() -> bool:
            self._check_alive()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
            return False

        wait_until(listening, timeout=max(0.0, deadline - time.monotonic()), what=f"{self.what} to open port {port}",
                   describe=lambda: self.logs(40))

    def _wait_registered(self, bootstrap: str, node_id: int, deadline: float) -> None:
        """Until the broker at ``bootstrap`` answers Metadata with ``node_id`` as a registered, unfenced broker."""
        from confluent_kafka.admin import AdminClient

        quiet = logging.getLogger("reference-kafka.readiness")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})

        def registered() -> bool:
            self._check_alive()
            with contextlib.suppress(Exception):
                return node_id in admin.list_topics(timeout=2).brokers
            return False

        wait_until(registered, timeout=max(0.0, deadline - time.monotonic()), interval=0.1,
                   what=f"{self.what} to answer Metadata as broker {node_id}", describe=lambda: self.logs(40))

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

    def logs(self, last: int | None = None) -> str:
        text = ""
        for f in (self.data_dir / "stdout.txt", self.log_file):
            with contextlib.suppress(OSError):
                text += f.read_text(errors="replace")
        return "\n".join(text.splitlines()[-last:]) if last else text


class ReferenceKafka(_KafkaProcess):
    """One Apache Kafka 4.x (KAFKA_VERSION) KRaft node (broker + controller) on 127.0.0.1."""

    kind = "kafka"

    def __init__(self, data_dir: Path | None = None, config: dict | None = None, heap: str = "512m") -> None:
        super().__init__(Path(data_dir or tempfile.mkdtemp(prefix="reference-kafka-")), heap, new_cluster_id())
        self.config = {**DEFAULT_CONFIG, **{k: str(v) for k, v in (config or {}).items()}}
        self.port: int | None = None
        self.controller_port: int | None = None
        self.startup_seconds: float | None = None  # of the last start(), from exec to ready

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> dict:
        return {
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
        self._spawn(props)
        try:
            self._wait_ready(began + timeout)
        except BaseException:
            self.kill()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_ready(self, deadline: float) -> None:
        self._wait_listening(self.port, deadline)  # 1. the listener accepts connections
        self._wait_registered(self.bootstrap, 1, deadline)  # 2. Metadata names it, registered and unfenced

    def restart(self) -> ReferenceKafka:
        self.stop()
        return self.start()


# What a cluster of ReferenceKafkaCluster changes of DEFAULT_CONFIG ("{rf}": min(3, brokers)), on every node.
CLUSTER_CONFIG = {
    "offsets.topic.replication.factor": "{rf}",
    "transaction.state.log.replication.factor": "{rf}",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "{rf}",
    "share.coordinator.state.topic.min.isr": "1",
    "default.replication.factor": "{rf}",
    # a broker killed is fenced (dropped from Metadata and the ISRs, its partitions led by others)
    # broker.session.timeout.ms after its last heartbeat: the controller's setting; the brokers'
    # heartbeat interval must stay well below it (Kafka's defaults: 9 s and 2 s)
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "250",
}


class _ClusterNode(_KafkaProcess):
    """A node of a ReferenceKafkaCluster: the controller or a broker."""

    def __init__(self, cluster: ReferenceKafkaCluster, node_id: int, heap: str) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.is_controller = node_id == cluster.CONTROLLER_ID
        self.what = f"reference Kafka {'controller' if self.is_controller else 'broker'} {node_id}"
        super().__init__(cluster.data_dir / (f"controller-{node_id}" if self.is_controller else f"broker-{node_id}"), heap, cluster.cluster_id)
        self.port = _free_port()  # kept across restarts, so clients reconnect to the same address

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> dict:
        controller = self.cluster.controller
        common = {
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{controller.node_id}@{controller.address}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(self.data_dir / "logs"),
        }
        if self.is_controller:
            own = {
                "process.roles": "controller",
                "listeners": f"CONTROLLER://{self.address}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            }
        else:
            own = {
                "process.roles": "broker",
                "listeners": f"PLAINTEXT://{self.address}",
                "advertised.listeners": f"PLAINTEXT://{self.address}",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            }
        return {**common, **own, **self.cluster.config}

    def start(self) -> None:
        self._spawn(self._write_config())

    def wait_ready(self, deadline: float) -> None:
        try:
            self._wait_listening(self.port, deadline)
            if not self.is_controller:
                self._wait_registered(self.address, self.node_id, deadline)
        except BaseException:
            self.kill()
            raise


class ReferenceKafkaCluster:
    """Apache Kafka 4.x (KAFKA_VERSION) as a KRaft cluster on 127.0.0.1: one controller
    (``process.roles=controller``, node id 100) and ``brokers`` brokers (node ids 1..N), each
    a JVM with a port and a data directory of its own under ``data_dir``, formatted with one
    cluster id.

    Its controls are those of kafkalite's ``broker.multinode.testing.ClusterProcess`` that a
    Kafka cluster has: ``bootstrap_servers``, ``address(i)``, ``nodes`` ({id: (address, pid)}),
    ``kill_node(i)`` (SIGKILL), ``stop_node(i)`` (SIGTERM: controlled shutdown), ``start_node(i)``
    (returns once the broker is registered and unfenced), ``close()``. A node keeps its port and
    data across a restart. Which broker leads a partition or hosts a coordinator is Kafka's
    choice: ask Metadata and FindCoordinator.

    ``CLUSTER_CONFIG`` is what it changes of ``DEFAULT_CONFIG`` (replication factors of 3, a
    killed broker fenced within about 2.5 s); ``config`` overrides both, on every node.
    """

    kind = "kafka"
    CONTROLLER_ID = 100

    def __init__(self, data_dir: Path | None = None, brokers: int = 3, config: dict | None = None,
                 heap: str = "320m", controller_heap: str = "256m") -> None:
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="reference-kafka-cluster-"))
        rf = str(min(3, brokers))
        self.config = {**DEFAULT_CONFIG, **{k: v.format(rf=rf) for k, v in CLUSTER_CONFIG.items()},
                       **{k: str(v) for k, v in (config or {}).items()}}
        self.cluster_id = new_cluster_id()
        self.controller = _ClusterNode(self, self.CONTROLLER_ID, controller_heap)
        self.brokers = {i: _ClusterNode(self, i, heap) for i in range(1, brokers + 1)}
        self.startup_seconds: float | None = None  # of start(), from the first exec to every broker ready

    # -- what clients need ---------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def address(self, node_id: int) -> str:
        return self.brokers[node_id].address

    @property
    def nodes(self) -> dict[int, tuple[str, int | None]]:
        """{broker id: (address, pid or None while it is down)}."""
        return {i: (b.address, b.proc.pid if b.proc is not None else None) for i, b in self.brokers.items()}

    def pid(self, node_id: int) -> int | None:
        return self.nodes[node_id][1]

    # -- lifecycle -----------------------------------------------------------

    def start(self, timeout: float = 180.0) -> ReferenceKafkaCluster:
        ok, reason = available()
        if not ok:
            raise RuntimeError(reason)
        began = time.monotonic()
        deadline = began + timeout
        everyone = [self.controller, *self.brokers.values()]
        try:
            self._each(everyone, lambda n: n._format(n._write_config()))  # one JVM each: side by side
            for node in everyone:
                node.start()
            self._each(everyone, lambda n: n.wait_ready(deadline))
            wait_until(self._all_registered, timeout=max(0.0, deadline - time.monotonic()), interval=0.1,
                       what="every reference Kafka broker to list every broker")
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    @staticmethod
    def _each(nodes: list[_ClusterNode], fn) -> None:
        """fn(node) for every node at once (each waits on a JVM); the first error is raised after all end."""
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
            for future in [pool.submit(fn, n) for n in nodes]:
                future.result()

    def _all_registered(self) -> bool:
        from confluent_kafka.admin import AdminClient

        quiet = logging.getLogger("reference-kafka.readiness")
        for b in self.brokers.values():
            try:
                seen = AdminClient({"bootstrap.servers": b.address, "logger": quiet}).list_topics(timeout=2).brokers
            except Exception:  # noqa: BLE001 - not yet
                return False
            if set(seen) != set(self.brokers):
                return False
        return True

    def kill_node(self, node_id: int) -> None:
        """SIGKILL broker ``node_id`` (returns once it is dead; the controller fences it about
        ``broker.session.timeout.ms`` later)."""
        self.brokers[node_id].kill()

    def stop_node(self, node_id: int, timeout: float = 60.0) -> int:
        """SIGTERM broker ``node_id`` and wait for its controlled shutdown."""
        return self.brokers[node_id].stop(timeout)

    def start_node(self, node_id: int, timeout: float = 120.0) -> None:
        """Start broker ``node_id`` again (same port and data); returns once it is registered and unfenced."""
        broker = self.brokers[node_id]
        broker.start()
        broker.wait_ready(time.monotonic() + timeout)

    def close(self) -> None:
        """Stop every broker (SIGTERM, side by side), then the controller."""
        self._each(list(self.brokers.values()), lambda b: b.stop(30))
        self.controller.stop(30)

    def logs(self, node_id: int, last: int | None = None) -> str:
        node = self.controller if node_id == self.CONTROLLER_ID else self.brokers[node_id]
        return node.logs(last)

    def __enter__(self) -> ReferenceKafkaCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


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
