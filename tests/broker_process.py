"""Run a kafkalite broker as a child process, for tests and benchmarks.

A request handler that raises is a broker bug (the broker logs "handler
failed" and closes the client's connection): ``stop()`` and ``kill()`` scan
the broker's stderr and raise ``broker.testing.HandlerFailed`` when it logged
one, so the test that provoked it fails. ``fail_on_handler_errors=False``
turns this off, for a test that provokes such a bug on purpose.

With ``--nodes N`` among the arguments the child is a cluster's controller,
which prints ``NODE <id> <host>:<port> <pid>`` for every node before its
READY line (node 1's address): ``node_ports`` and ``node_pids`` hold them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.reference_kafka import own_session


ROOT = Path(__file__).resolve().parent.parent
# the start of a log entry: a JSON object, or the console format's ISO time stamp
_LOG_ENTRY = re.compile(r"^(\{|\d{4}-\d\d-\d\dT)")


class BrokerProcess:
    """``kafkalite serve --port 0`` on 127.0.0.1; waits for its READY line."""

    def __init__(self, data_dir: Path | None = None, *extra: str, env: dict | None = None, fail_on_handler_errors: bool = True) -> None:
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kafkalite-"))
        self.extra = list(extra)
        self.env = env or {}
        self.fail_on_handler_errors = fail_on_handler_errors
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.node_ports: dict[int, int] = {}  # a cluster's nodes (their NODE lines): id -> port
        self.node_pids: dict[int, int] = {}  # and id -> pid
        self.stderr_lines: list[str] = []
        self._stderr_changed = threading.Condition()
        self._stderr_reader: threading.Thread | None = None
        self._checked_lines = 0  # stderr lines already scanned for handler failures

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        args = [sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--data-dir", str(self.data_dir)]
        # the same port again on restart, so clients reconnect
        args += ["--port", str(self.port or 0), *self.extra]
        env = {**os.environ, "PYTHONPATH": str(ROOT), **self.env}
        # a session of its own, as every broker under test (tests/reference_kafka.py own_session); no
        # PR_SET_PDEATHSIG: it fires when the *thread* that started the broker ends, and fixtures start
        # brokers from threads (the conformance suite starts both brokers at once)
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                                     start_new_session=own_session())
        self._stderr_reader = threading.Thread(target=self._drain_stderr, args=(self.proc,), daemon=True)
        self._stderr_reader.start()
        line_box: list[str] = []
        nodes: dict[int, tuple[int, int]] = {}
        reader = threading.Thread(target=self._read_ready, args=(self.proc, line_box, nodes), daemon=True)
        reader.start()
        reader.join(timeout)
        line = line_box[0] if line_box else ""
        self.node_ports = {i: port for i, (port, _) in nodes.items()}
        self.node_pids = {i: pid for i, (_, pid) in nodes.items()}
        if not line.startswith("READY "):
            self._kill()
            raise RuntimeError(f"broker did not become ready: {line!r}\n" + "".join(self.stderr_lines[-40:]))
        self.port = int(line.strip().rsplit(":", 1)[1])
        return self

    @staticmethod
    def _read_ready(proc, line_box: list[str], nodes: dict[int, tuple[int, int]]) -> None:
        """The first stdout line that is not a cluster's ``NODE`` line into ``line_box``; the NODE lines into ``nodes``."""
        while True:
            line = proc.stdout.readline()
            words = line.split()
            if len(words) == 4 and words[0] == "NODE" and words[1].isdigit() and words[3].isdigit():
                nodes[int(words[1])] = (int(words[2].rsplit(":", 1)[1]), int(words[3]))
                continue
            line_box.append(line)
            return

    def _drain_stderr(self, proc) -> None:
        for line in proc.stderr:
            with self._stderr_changed:
                self.stderr_lines.append(line)
                self._stderr_changed.notify_all()

    def wait_for_log(self, text: str, timeout: float = 60.0, start: int = 0) -> str:
        """The first stderr line (from line ``start`` on) containing ``text``; waits for it."""
        deadline = time.monotonic() + timeout
        with self._stderr_changed:
            while True:
                for line in self.stderr_lines[start:]:
                    if text in line:
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no log line with {text!r} within {timeout} s")
                self._stderr_changed.wait(remaining)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: the graceful path. Raises HandlerFailed if a handler raised."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self.proc = None
        self.check_handler_errors()
        return rc

    def kill(self) -> None:
        """SIGKILL: the crash path. Raises HandlerFailed if a handler raised before."""
        if self._kill():
            self.check_handler_errors()

    def _kill(self) -> bool:
        if self.proc is None:
            return False
        self._kill_nodes()
        self.proc.kill()
        self.proc.wait()
        self.proc = None
        return True

    def _kill_nodes(self) -> None:
        """A cluster's node processes, SIGKILLed too (still the controller's children: no pid reused)."""
        for pid in self.node_pids.values():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
                if int(stat[stat.rindex(")") + 2 :].split()[1]) == self.proc.pid:
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def handler_failures(self) -> list[str]:
        """The "handler failed" log entries (each with its traceback) not yet reported."""
        return self._scan()[0]

    def check_handler_errors(self) -> None:
        """Raise HandlerFailed if the broker logged a handler failure since the last check."""
        failures, upto = self._scan()
        self._checked_lines = upto
        if failures and self.fail_on_handler_errors:
            from broker.testing import HandlerFailed  # not at import: benchmarks use this module too

            raise HandlerFailed(failures)

    def _scan(self) -> tuple[list[str], int]:
        reader = self._stderr_reader
        if self.proc is None and reader is not None:
            reader.join(10)  # the broker has exited: read its stderr to the end
        with self._stderr_changed:
            upto = len(self.stderr_lines)
            lines = self.stderr_lines[self._checked_lines : upto]
        failures = []
        for i, line in enumerate(lines):
            if "handler failed" in line:
                # the console format prints the traceback on the lines up to the next entry
                context = []
                for following in lines[i + 1 : i + 80]:
                    if _LOG_ENTRY.match(following):
                        break
                    context.append(following)
                failures.append(line + "".join(context))
        return failures, upto

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def logs(self) -> str:
        return "".join(self.stderr_lines)
