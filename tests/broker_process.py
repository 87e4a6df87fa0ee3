"""Run a kafkalite broker as a child process, for tests and benchmarks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class BrokerProcess:
    """``kafkalite serve --port 0`` on 127.0.0.1; waits for its READY line."""

    def __init__(self, data_dir: Path | None = None, *extra: str, env: dict | None = None) -> None:
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kafkalite-"))
        self.extra = list(extra)
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.stderr_lines: list[str] = []
        self._stderr_changed = threading.Condition()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        args = [sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--data-dir", str(self.data_dir)]
        # the same port again on restart, so clients reconnect
        args += ["--port", str(self.port or 0), *self.extra]
        env = {**os.environ, "PYTHONPATH": str(ROOT), **self.env}
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        threading.Thread(target=self._drain_stderr, args=(self.proc,), daemon=True).start()
        line_box: list[str] = []
        reader = threading.Thread(target=lambda: line_box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        line = line_box[0] if line_box else ""
        if not line.startswith("READY "):
            self.kill()
            raise RuntimeError(f"broker did not become ready: {line!r}\n" + "".join(self.stderr_lines[-40:]))
        self.port = int(line.strip().rsplit(":", 1)[1])
        return self

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
        """SIGTERM and wait: the graceful path."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self.proc = None
        return rc

    def kill(self) -> None:
        """SIGKILL: the crash path."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def logs(self) -> str:
        return "".join(self.stderr_lines)
