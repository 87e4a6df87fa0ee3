"""Start a kafkalite broker as a child process and time it to its READY line.

Unlike ``tests.broker_process.BrokerProcess`` this one records the wall time
from just before exec to the READY line, can put Python flags (for example
``-m cProfile -o FILE``) in front of ``-m broker``, and sends stderr to a file
so that the broker's own ``startup_ms`` can be read back afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_STARTUP_MS = re.compile(r"startup_ms=([0-9.]+)")


def stop_all(brokers: dict, tmp: Path) -> None:
    """Stop every broker of a bench tool's run and remove its temporary directory."""
    for b in brokers.values():
        b.stop()
    shutil.rmtree(tmp, ignore_errors=True)


class Broker:
    def __init__(self, data_dir: Path, *extra: str, python_args: list[str] | None = None, log_path: Path | None = None,
                 root: Path = ROOT):
        self.root = Path(root)  # the source tree the broker runs from (another checkout, to compare)
        self.data_dir = Path(data_dir)
        self.extra = list(extra)
        self.python_args = list(python_args or [])
        self.log_path = Path(log_path or (self.data_dir.parent / f"{self.data_dir.name}.stderr.log"))
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.ready_s: float | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> Broker:
        args = [sys.executable, *self.python_args, "-m", "broker", "serve", "--host", "127.0.0.1", "--port", "0"]
        args += ["--data-dir", str(self.data_dir), *self.extra]
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        self._log = open(self.log_path, "w")
        t0 = time.perf_counter()
        from tests.reference_kafka import own_session

        # a session of its own: a scheduling group of its own under Linux's autogroup (tests/reference_kafka.py)
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=self.root, bufsize=0,
                                     start_new_session=own_session())
        line = self.proc.stdout.readline().decode()
        self.ready_s = time.perf_counter() - t0
        if not line.startswith("READY "):
            self.kill()
            raise RuntimeError(f"broker did not become ready: {line!r}\n{self.logs()[-4000:]}")
        self.port = int(line.strip().rsplit(":", 1)[1])
        return self

    def startup_ms(self, wait: float = 2.0) -> float | None:
        """The ``startup_ms`` the broker logs right after READY, if it shows up in time."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            m = _STARTUP_MS.search(self.logs())
            if m:
                return float(m.group(1))
            time.sleep(0.01)
        return None

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self._close()
        return rc

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._close()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None
        self._log.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.stop()
