"""Java programs of ``tests/java/`` as child processes, for interop tests.

Two programs are built and run the same way (a ``JavaProgram`` each):

* ``HARNESS``, ``tests/java/clients/Harness.java``: a small program around Kafka's
  own Java clients (kafka-clients 4.1.0): the producer, the consumer (classic and
  KIP-848 protocols) and the admin client;
* ``STREAMS``, ``tests/java/streams/WordCount.java``: a Kafka Streams 4.1.0 word
  count under ``processing.guarantee=exactly_once_v2``.

Each prints one JSON object per line on stdout (``{"event": "assigned",
"partitions": [[topic, p], ...]}`` and so on) and takes commands on stdin. For
each, this module:

* copies the jars its ``pom.xml`` names from Maven Central with ``mvn
  dependency:copy-dependencies`` into a cache outside the repository (for the
  harness ``$KAFKALITE_JAVA_CLIENTS_HOME`` or ``~/.cache/kafkalite/java-clients-4.1.0``,
  for Streams ``$KAFKALITE_KAFKA_STREAMS_HOME`` or ``~/.cache/kafkalite/kafka-streams-4.1.0``);
* compiles its ``*.java`` with ``javac`` into ``classes-<hash>`` in the same
  cache, the hash covering the sources and the POM, so an edit rebuilds and
  nothing lands in the repository.

``available()`` (``program.available()``) says whether that is possible here
(Java 17+, javac, and mvn for the first fetch); ``JavaClient`` runs one program
process (the harness unless told otherwise; ``run_java`` runs one to completion).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.reference_kafka import MIN_JAVA, _die_with_parent, _java_major

ROOT = Path(__file__).resolve().parent.parent
KAFKA_CLIENTS_VERSION = "4.1.0"
CACHE = Path.home() / ".cache" / "kafkalite"
# quick JVM start for short-lived client processes on a small machine
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true"]


class JavaProgram:
    """The ``*.java`` of one directory under tests/java, compiled against the jars its POM names.

    ``main`` is the class to run; ``marker_jar`` a glob of the jar that the Maven
    copy must have produced; ``what`` names the dependency in messages.
    """

    def __init__(self, src_dir: Path, home: Path, main: str, marker_jar: str, what: str) -> None:
        self.src_dir = src_dir
        self.home = home
        self.libs = home / "libs"
        self.main = main
        self.marker_jar = marker_jar
        self.what = what
        self._classes: Path | None = None
        self._availability: tuple[bool, str] | None = None

    def _source_hash(self) -> str:
        h = hashlib.sha256()
        for f in sorted(self.src_dir.glob("*.java")) + [self.src_dir / "pom.xml"]:
            h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
        return h.hexdigest()[:16]

    def _fetch_libs(self, timeout: float = 900.0) -> None:
        stamp = (self.src_dir / "pom.xml").read_text()
        complete = self.libs / ".complete"  # names the POM the jars came from
        with contextlib.suppress(OSError):
            if complete.read_text() == stamp:
                return
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError(f"mvn (Apache Maven) is not on PATH; it is needed once to fetch {self.what}")
        staging = Path(tempfile.mkdtemp(prefix="libs-", dir=self.home))
        try:
            proc = subprocess.run(
                [mvn, "-B", "-q", "-f", str(self.src_dir / "pom.xml"), "dependency:copy-dependencies",
                 "-DincludeScope=runtime", f"-DoutputDirectory={staging}"],
                capture_output=True, text=True, timeout=timeout,
            )
            if proc.returncode != 0 or not list(staging.glob(self.marker_jar)):
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                raise RuntimeError(f"mvn could not fetch {self.what} (exit {proc.returncode}):\n{tail}")
            shutil.rmtree(self.libs, ignore_errors=True)
            staging.rename(self.libs)
            complete.write_text(stamp)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"mvn did not finish fetching {self.what} within {timeout:.0f}s") from e
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def build(self) -> Path:
        """Fetch the jars and compile the sources once; return the classes directory."""
        if self._classes is not None:
            return self._classes
        self.home.mkdir(parents=True, exist_ok=True)
        classes = self.home / f"classes-{self._source_hash()}"
        with open(self.home / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._fetch_libs()
            if not (classes / f"{self.main}.class").exists():
                staging = Path(tempfile.mkdtemp(prefix="classes-", dir=self.home))
                try:
                    javac = shutil.which("javac") or "javac"
                    proc = subprocess.run(
                        [javac, "-encoding", "UTF-8", "-d", str(staging), "-cp", f"{self.libs}/*",
                         *map(str, sorted(self.src_dir.glob("*.java")))],
                        capture_output=True, text=True, timeout=300,
                    )
                    if proc.returncode != 0:
                        raise RuntimeError(f"javac failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
                    shutil.rmtree(classes, ignore_errors=True)
                    staging.rename(classes)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
        self._classes = classes
        return classes

    def available(self) -> tuple[bool, str]:
        """(True, "") if the program can run here, else (False, why not). Builds on first use."""
        if self._availability is None:
            self._availability = self._check_available()
        return self._availability

    def _check_available(self) -> tuple[bool, str]:
        if os.environ.get("KAFKALITE_NO_JAVA_CLIENTS"):
            return False, "Java client tests disabled by KAFKALITE_NO_JAVA_CLIENTS"
        java = shutil.which("java")
        if java is None:
            return False, f"java is not on PATH ({self.what} needs Java {MIN_JAVA}+ here)"
        major = _java_major(java)
        if major is None or major < MIN_JAVA:
            return False, f"{self.src_dir.name}/{self.main}.java needs Java {MIN_JAVA}+, found {major or 'an unknown version'}"
        if shutil.which("javac") is None:
            return False, f"javac is not on PATH (a JDK, not only a JRE, is needed to compile {self.main}.java)"
        try:
            self.build()
        except Exception as e:  # noqa: BLE001 - any failure means "skip, and say why"
            return False, f"{self.main}.java unavailable: {e}"
        return True, ""

    def command(self, *args: str) -> list[str]:
        classes = self.build()
        return [shutil.which("java") or "java", *JVM_FLAGS, "-cp", f"{classes}:{self.libs}/*", self.main, *map(str, args)]


HARNESS = JavaProgram(
    ROOT / "tests" / "java" / "clients",
    Path(os.environ.get("KAFKALITE_JAVA_CLIENTS_HOME") or CACHE / f"java-clients-{KAFKA_CLIENTS_VERSION}"),
    "Harness", "kafka-clients-*.jar", f"kafka-clients {KAFKA_CLIENTS_VERSION}",
)
# the share consumer harness (tests/java/share/ShareHarness.java): KafkaShareConsumer of kafka-clients 4.4.0
SHARE = JavaProgram(
    ROOT / "tests" / "java" / "share",
    Path(os.environ.get("KAFKALITE_JAVA_SHARE_HOME") or CACHE / "java-share-4.4.0"),
    "ShareHarness", "kafka-clients-*.jar", "kafka-clients 4.4.0",
)
STREAMS = JavaProgram(
    ROOT / "tests" / "java" / "streams",
    Path(os.environ.get("KAFKALITE_KAFKA_STREAMS_HOME") or CACHE / f"kafka-streams-{KAFKA_CLIENTS_VERSION}"),
    "WordCount", "kafka-streams-*.jar", f"kafka-streams {KAFKA_CLIENTS_VERSION}",
)
# the harness's names, as they were before there were two programs
SRC_DIR, HOME, LIBS = HARNESS.src_dir, HARNESS.home, HARNESS.libs
build = HARNESS.build
available = HARNESS.available


def _command(mode: str, bootstrap: str, *args: str, program: JavaProgram = HARNESS) -> list[str]:
    return program.command(mode, "--bootstrap", bootstrap, *args)


class JavaClient:
    """One running program process (the harness by default); its JSON events accumulate in ``events``.

    ``wait_for(pred)`` waits (bounded) for an event matching ``pred``; ``send(cmd)``
    writes a stdin command; ``close()`` sends "quit" and waits, killing on timeout.
    """

    def __init__(self, mode: str, bootstrap: str, *args: str, name: str = "java", program: JavaProgram = HARNESS) -> None:
        self.name = name
        self.argv = _command(mode, bootstrap, *args, program=program)
        self.events: list[dict] = []
        self.stderr_lines: list[str] = []
        self._changed = threading.Condition()
        self._eof = False  # stdout closed: the process is gone and every event is in
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
            preexec_fn=_die_with_parent,
        )
        threading.Thread(target=self._read_stdout, daemon=True, name=f"{name}-stdout").start()
        threading.Thread(target=self._read_stderr, daemon=True, name=f"{name}-stderr").start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "unparsed", "line": line}
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    # -- queries -------------------------------------------------------------------

    def of(self, event: str) -> list[dict]:
        with self._changed:
            return [e for e in self.events if e.get("event") == event]

    def describe(self, last: int = 30) -> str:
        with self._changed:
            events = self.events[-last:]
        return (f"{self.name} rc={self.proc.poll()} events(last {last}):\n" + "\n".join(json.dumps(e) for e in events)
                + "\nstderr (tail):\n" + "".join(self.stderr_lines[-30:]))

    def wait_for(self, what: str, pred: Callable[[dict], bool] | str, timeout: float = 60.0, start: int = 0) -> dict:
        """The first event (from index ``start``) matching ``pred`` (an event name or a predicate)."""
        if isinstance(pred, str):
            name = pred
            pred = lambda e: e.get("event") == name  # noqa: E731
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for e in self.events[start:]:
                    if pred(e):
                        return e
                if self._eof:
                    raise AssertionError(f"{self.name} exited before {what}\n{self.describe()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{self.describe()}")
                self._changed.wait(min(remaining, 0.5))

    # -- control -------------------------------------------------------------------

    def send(self, command: str) -> int:
        """Write a stdin command; returns the event index to wait from."""
        with self._changed:
            start = len(self.events)
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return start

    def wait(self, timeout: float = 60.0) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired as e:
            self.kill()
            raise AssertionError(f"{self.name} did not exit within {timeout}s\n{self.describe()}") from e
        with self._changed:  # let the reader drain the pipe
            self._changed.wait_for(lambda: self._eof, timeout=5)
        return rc

    def close(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                self.send("quit")
        return self.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_java(mode: str, bootstrap: str, *args: str, timeout: float = 90.0) -> list[dict]:
    """Run the harness to completion; its events. Fails with its output on a non-zero exit."""
    c = JavaClient(mode, bootstrap, *args, name=f"java-{mode}")
    c.proc.stdin.close()
    rc = c.wait(timeout)
    if rc != 0:
        raise AssertionError(f"java harness {mode} exited {rc}\n{c.describe()}")
    return list(c.events)


def admin(bootstrap: str, op: str, *args: str, timeout: float = 90.0) -> dict:
    """One admin operation; its single "result" (or "error") event."""
    events = run_java("admin", bootstrap, op, *args, timeout=timeout)
    results = [e for e in events if e.get("event") in ("result", "error")]
    assert len(results) == 1, events
    return results[0]


if __name__ == "__main__":  # python -m tests.java_harness: build both once, report
    for program in (HARNESS, STREAMS):
        ok, why = program.available()
        print(f"{program.main} ready: classes {program.build()}, jars {program.libs}" if ok else why)
