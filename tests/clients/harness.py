"""Run a client harness as a child process and collect the JSON lines it prints.

Every harness of the matrix (Go, Node, Java) prints one JSON object per stdout
line, each with an ``"event"`` field; its logs go to stderr. ``run()`` runs one to
completion with a time bound; ``Harness`` keeps one running (stdin commands, waits
for events), for members that must stay in a group while the test looks at it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.reference_kafka import _die_with_parent


def _parse(line: str) -> dict | None:
    line = line.strip()
    if not line:
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return {"event": "unparsed", "line": line}
    return event if isinstance(event, dict) else {"event": "unparsed", "line": line}


@dataclass
class Run:
    argv: list[str]
    rc: int
    events: list[dict]
    stderr: str
    seconds: float

    def of(self, event: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == event]

    def describe(self, last: int = 25) -> str:
        err = "\n".join(self.stderr.strip().splitlines()[-30:])
        return (f"$ {' '.join(self.argv)}\nrc={self.rc} after {self.seconds:.1f}s; events (last {last}):\n"
                + "\n".join(json.dumps(e) for e in self.events[-last:]) + f"\nstderr (tail):\n{err}")


def run(argv: list[str], timeout: float = 90.0, stdin: str | None = None, check: bool = True, parse: bool = True) -> Run:
    """Run to completion; with ``check`` a non-zero exit (or any "error" event) fails the test with the output."""
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL, preexec_fn=_die_with_parent)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        r = Run(argv, -9, [x for x in map(_parse, out.splitlines()) if x] if parse else [], err, time.monotonic() - start)
        raise AssertionError(f"timed out after {timeout}s\n{r.describe()}") from e
    events = [x for x in map(_parse, proc.stdout.splitlines()) if x] if parse else [{"event": "stdout", "text": proc.stdout}]
    r = Run(argv, proc.returncode, events, proc.stderr, time.monotonic() - start)
    if check and (r.rc != 0 or r.of("error")):
        raise AssertionError(f"harness failed\n{r.describe()}")
    return r


class Harness:
    """One running harness; its events accumulate in ``events``."""

    def __init__(self, argv: list[str], name: str) -> None:
        self.name = name
        self.argv = argv
        self.events: list[dict] = []
        self.stderr_lines: list[str] = []
        self._changed = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1, preexec_fn=_die_with_parent)
        threading.Thread(target=self._read_stdout, daemon=True, name=f"{name}-stdout").start()
        threading.Thread(target=self._read_stderr, daemon=True, name=f"{name}-stderr").start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            event = _parse(line)
            if event is None:
                continue
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def of(self, event: str) -> list[dict]:
        with self._changed:
            return [e for e in self.events if e.get("event") == event]

    def describe(self, last: int = 25) -> str:
        with self._changed:
            events = self.events[-last:]
        return (f"{self.name} rc={self.proc.poll()} events (last {last}):\n" + "\n".join(json.dumps(e) for e in events)
                + "\nstderr (tail):\n" + "".join(self.stderr_lines[-30:]))

    def wait_for(self, what: str, pred: Callable[[dict], bool] | str, timeout: float = 60.0, start: int = 0) -> dict:
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

    def send(self, command: str) -> int:
        """Write a stdin command; returns the event index to wait from."""
        with self._changed:
            start = len(self.events)
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return start

    def request(self, command: str, reply: str, timeout: float = 60.0) -> dict:
        start = self.send(command)
        return self.wait_for(f"a {reply!r} reply to {command!r}", lambda e: e.get("event") in (reply, "error", f"{reply}_failed"),
                             timeout=timeout, start=start)

    def wait(self, timeout: float = 60.0) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired as e:
            self.kill()
            raise AssertionError(f"{self.name} did not exit within {timeout}s\n{self.describe()}") from e
        with self._changed:
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
