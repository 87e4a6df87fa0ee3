"""Kafka's own Java clients (kafka-clients 4.1.0) as child processes, for interop tests.

``tests/java/clients/Harness.java`` is a small program around the producer, the
consumer (classic and KIP-848 protocols) and the admin client; it prints one JSON
object per line on stdout (``{"event": "assigned", "partitions": [[topic, p], ...]}``
and so on) and takes commands on stdin. This module builds it once and runs it:

* its jars come from Maven Central: ``tests/java/clients/pom.xml`` names them and
  ``mvn dependency:copy-dependencies`` copies them into a cache outside the
  repository (``$KAFKALITE_JAVA_CLIENTS_HOME`` or ``~/.cache/kafkalite/java-clients-4.1.0``);
* ``javac`` compiles Harness.java into ``classes-<hash>`` in the same cache, the
  hash covering the source and the POM, so an edit rebuilds and nothing lands in
  the repository.

``available()`` says whether that is possible here (Java 17+, javac, and mvn for
the first fetch); ``JavaClient`` runs one harness process (``run_java`` runs one to
completion).
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
SRC_DIR = ROOT / "tests" / "java" / "clients"
KAFKA_CLIENTS_VERSION = "4.1.0"
HOME = Path(os.environ.get("KAFKALITE_JAVA_CLIENTS_HOME") or Path.home() / ".cache" / "kafkalite" / f"java-clients-{KAFKA_CLIENTS_VERSION}")
LIBS = HOME / "libs"
_LIBS_COMPLETE = LIBS / ".complete"  # names the POM the jars came from
# quick JVM start for short-lived client processes on a small machine
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true"]

_availability: tuple[bool, str] | None = None
_classes: Path | None = None


def _source_hash() -> str:
    h = hashlib.sha256()
    for f in sorted(SRC_DIR.glob("*.java")) + [SRC_DIR / "pom.xml"]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _fetch_libs(timeout: float = 900.0) -> None:
    stamp = (SRC_DIR / "pom.xml").read_text()
    with contextlib.suppress(OSError):
        if _LIBS_COMPLETE.read_text() == stamp:
            return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("mvn (Apache Maven) is not on PATH; it is needed once to fetch kafka-clients")
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=HOME))
    try:
        proc = subprocess.run(
            [mvn, "-B", "-q", "-f", str(SRC_DIR / "pom.xml"), "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={staging}"],
            capture_output=True, text=True, timeout=timeout,
        )
        if proc.returncode != 0 or not list(staging.glob("kafka-clients-*.jar")):
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"mvn could not fetch kafka-clients {KAFKA_CLIENTS_VERSION} (exit {proc.returncode}):\n{tail}")
        shutil.rmtree(LIBS, ignore_errors=True)
        staging.rename(LIBS)
        _LIBS_COMPLETE.write_text(stamp)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"mvn did not finish fetching kafka-clients within {timeout:.0f}s") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def build() -> Path:
    """Fetch the jars and compile the harness once; return the classes directory."""
    global _classes
    if _classes is not None:
        return _classes
    HOME.mkdir(parents=True, exist_ok=True)
    classes = HOME / f"classes-{_source_hash()}"
    with open(HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _fetch_libs()
        if not (classes / "Harness.class").exists():
            staging = Path(tempfile.mkdtemp(prefix="classes-", dir=HOME))
            try:
                javac = shutil.which("javac") or "javac"
                proc = subprocess.run(
                    [javac, "-encoding", "UTF-8", "-d", str(staging), "-cp", f"{LIBS}/*", *map(str, sorted(SRC_DIR.glob("*.java")))],
                    capture_output=True, text=True, timeout=300,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"javac failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
                shutil.rmtree(classes, ignore_errors=True)
                staging.rename(classes)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    _classes = classes
    return classes


def available() -> tuple[bool, str]:
    """(True, "") if the Java harness can run here, else (False, why not). Builds on first use."""
    global _availability
    if _availability is None:
        _availability = _check_available()
    return _availability


def _check_available() -> tuple[bool, str]:
    if os.environ.get("KAFKALITE_NO_JAVA_CLIENTS"):
        return False, "Java client tests disabled by KAFKALITE_NO_JAVA_CLIENTS"
    java = shutil.which("java")
    if java is None:
        return False, f"java is not on PATH (kafka-clients {KAFKA_CLIENTS_VERSION} needs Java {MIN_JAVA}+ here)"
    major = _java_major(java)
    if major is None or major < MIN_JAVA:
        return False, f"the Java client harness needs Java {MIN_JAVA}+, found {major or 'an unknown version'}"
    if shutil.which("javac") is None:
        return False, "javac is not on PATH (a JDK, not only a JRE, is needed to compile the harness)"
    try:
        build()
    except Exception as e:  # noqa: BLE001 - any failure means "skip, and say why"
        return False, f"Java client harness unavailable: {e}"
    return True, ""


def _command(mode: str, bootstrap: str, *args: str) -> list[str]:
    classes = build()
    return [shutil.which("java") or "java", *JVM_FLAGS, "-cp", f"{classes}:{LIBS}/*", "Harness", mode, "--bootstrap", bootstrap, *map(str, args)]


class JavaClient:
    """One running harness process; its JSON events accumulate in ``events``.

    ``wait_for(pred)`` waits (bounded) for an event matching ``pred``; ``send(cmd)``
    writes a stdin command; ``close()`` sends "quit" and waits, killing on timeout.
    """

    def __init__(self, mode: str, bootstrap: str, *args: str, name: str = "java") -> None:
        self.name = name
        self.argv = _command(mode, bootstrap, *args)
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


if __name__ == "__main__":  # python -m tests.java_harness: build once, report
    ok, why = available()
    print(f"java harness ready: classes {build()}, jars {LIBS}" if ok else why)
