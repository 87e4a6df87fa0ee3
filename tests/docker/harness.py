"""A real Docker engine for the tests in tests/docker, and helpers to drive it.

The engine is the one tools/docker/engine.sh fetches from Debian's packages and starts on a
private socket under ~/.cache/kafkalite/docker (KL_DOCKER_HOME); tools/docker/base-image.sh
makes the stand-in for the pinned python base image, since no registry is reachable here.
Everything these tests create carries the label ``kafkalite.test=<session>`` and is removed
at the end; the engine is stopped at the end of the session if a test session started it.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "docker"
HOME = Path(os.environ.get("KL_DOCKER_HOME") or Path.home() / ".cache" / "kafkalite" / "docker")
BASE_IMAGE = "kafkalite-local/python:3.11-slim-bookworm"
SESSION = uuid.uuid4().hex[:8]
LABEL = f"kafkalite.test={SESSION}"
METRICS_FILE = ROOT / "build" / "docker-metrics.json"


def unavailable_reason() -> str | None:
    """Why no engine can be started here, or None."""
    if os.environ.get("KAFKALITE_DOCKER_TESTS", "1") == "0":
        return "KAFKALITE_DOCKER_TESTS=0"
    if not sys.platform.startswith("linux"):
        return f"tools/docker/engine.sh starts dockerd, which needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return "tools/docker/engine.sh starts dockerd, which needs root"
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            return f"tools/docker/engine.sh fetches the engine with Debian's {tool}, which is not on PATH"
    return None


def engine_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{HOME / 'engine' / 'root' / 'usr' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["DOCKER_HOST"] = f"unix://{HOME / 'docker.sock'}"
    env["DOCKER_CONFIG"] = str(HOME / "config")
    env["BUILDKIT_PROGRESS"] = "plain"
    env.pop("DOCKER_CONTEXT", None)
    return env


class Failed(AssertionError):
    pass


class Docker:
    """The docker CLI against the private engine."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def run(self, *args: str, check: bool = True, timeout: float = 300, input: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(["docker", *args], env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise Failed(f"docker {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def out(self, *args: str, **kw) -> str:
        return self.run(*args, **kw).stdout.strip()

    def inspect(self, name: str, fmt: str) -> str:
        return self.out("inspect", "--format", fmt, name)

    def logs(self, name: str) -> str:
        p = self.run("logs", name, check=False)
        return p.stdout + p.stderr

    # ------------------------------------------------------------ lifecycle with events

    def events(self, name: str, since: float) -> EventStream:
        return EventStream(self, name, since)

    def run_until_healthy(self, run_args: list[str], name: str, timeout: float = 60) -> dict:
        """``docker run -d --name NAME ...``; returns once the container's health check has
        passed, with the times seen: seconds from the container's start to healthy and to
        its READY line (the daemon's clock for both)."""
        since = time.time() - 1
        with self.events(name, since) as events:
            self.run("run", "-d", "--name", name, "--label", LABEL, *run_args)
            started_ns = healthy_ns = None
            for event in events.until(timeout, name=name, docker=self):
                action = event.get("Action", "")
                if action == "start":
                    started_ns = int(event["timeNano"])
                elif action == "health_status: healthy":
                    healthy_ns = int(event["timeNano"])
                    break
                elif action == "die":
                    raise Failed(f"{name} exited before it was healthy:\n{self.logs(name)[-3000:]}")
        assert started_ns is not None and healthy_ns is not None
        return {"start_to_healthy_s": (healthy_ns - started_ns) / 1e9, "start_to_ready_s": self.start_to_ready(name)}

    def start_to_ready(self, name: str) -> float:
        """Seconds from the container's start (State.StartedAt) to the READY line on its stdout."""
        started = _parse_time(self.inspect(name, "{{.State.StartedAt}}"))
        for line in self.out("logs", "--timestamps", name).splitlines():
            stamp, _, text = line.partition(" ")
            if text.startswith("READY "):
                return (_parse_time(stamp) - started).total_seconds()
        raise Failed(f"no READY line from {name}:\n{self.logs(name)[-2000:]}")

    def wait_for_exit(self, name: str, timeout: float = 60) -> int:
        return int(self.out("wait", name, timeout=timeout))

    def cleanup(self, label: str = LABEL) -> None:
        """Remove every container, volume and network that carries ``label``."""
        ids = self.out("ps", "-aq", "--filter", f"label={label}", check=False).split()
        if ids:
            self.run("rm", "-f", "-v", *ids, check=False)
        volumes = self.out("volume", "ls", "-q", "--filter", f"label={label}", check=False).split()
        if volumes:
            self.run("volume", "rm", "-f", *volumes, check=False)
        networks = self.out("network", "ls", "-q", "--filter", f"label={label}", check=False).split()
        if networks:
            self.run("network", "rm", *networks, check=False)


class EventStream:
    """``docker events`` for one container, from a moment before it was created."""

    def __init__(self, docker: Docker, name: str, since: float) -> None:
        self.proc = subprocess.Popen(
            ["docker", "events", "--since", f"{since:.3f}", "--filter", "type=container", "--filter", f"container={name}", "--format", "{{json .}}"],
            env=docker.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def until(self, timeout: float, name: str = "", docker: Docker | None = None):
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                event = self.lines.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                logs = docker.logs(name)[-3000:] if docker else ""
                raise Failed(f"no expected event from {name} within {timeout} s\n{logs}") from None
            if event is None:
                raise Failed("docker events ended")
            yield event

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _parse_time(text: str) -> datetime:
    """An RFC 3339 time with nanoseconds, as Docker writes them, to a datetime (microseconds)."""
    text = text.strip().replace("Z", "+00:00")
    head, _, tail = text.partition(".")
    if tail:
        digits = "".join(ch for ch in tail if ch.isdigit())
        zone = tail[len(digits) :]
        text = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    return datetime.fromisoformat(text)


def free_port() -> int:
    from tests.ports import free_port as fresh

    return fresh()


def free_ports_in_a_row(count: int) -> int:
    """The first of ``count`` consecutive free host ports (tests/ports.py)."""
    from tests.ports import free_ports_in_a_row as fresh

    return fresh(count)


class ComposeProject:
    """A compose file brought up under a project name of its own (``<prefix>-<hex>``), so that
    its containers, volumes and networks are found by label and removed with it."""

    def __init__(self, docker, prefix: str, env: dict[str, str]) -> None:
        self.docker = docker
        self.project = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.env = env

    def compose_args(self) -> list[str]:
        """``-f FILE`` (and ``--profile``) of this project's compose file: a subclass's."""
        raise NotImplementedError

    def compose(self, *args: str, **kw):
        return self.docker.run("compose", "-p", self.project, *self.compose_args(), *args, env=self.env, **kw)

    def project_resources(self) -> dict[str, list[str]]:
        label = f"label=com.docker.compose.project={self.project}"
        return {
            "containers": self.docker.out("ps", "-aq", "--filter", label).split(),
            "volumes": self.docker.out("volume", "ls", "-q", "--filter", label).split(),
            "networks": self.docker.out("network", "ls", "-q", "--filter", label).split(),
        }

    def up(self, metrics, name: str):
        """Build, ``up --wait``, yield the project, ``down -v`` whatever happened: a fixture's body.
        The build and start-up times go to ``metrics`` as ``<name>_build_s`` and ``<name>_up_wait_s``."""
        try:
            t0 = time.monotonic()
            self.compose("build", timeout=1800)
            metrics.record(f"{name}_build_s", round(time.monotonic() - t0, 1))
            t0 = time.monotonic()
            self.compose("up", "--detach", "--wait", "--wait-timeout", "120", timeout=300)
            metrics.record(f"{name}_up_wait_s", round(time.monotonic() - t0, 1))
            yield self
        finally:
            self.compose("down", "--volumes", "--remove-orphans", "--timeout", "20", check=False, timeout=120)


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "?"


class Metrics:
    """Measurements the tests take, written to build/docker-metrics.json for docs/benchmarks.md."""

    def __init__(self) -> None:
        self.values: dict = {}

    def record(self, key: str, value) -> None:
        self.values[key] = value
        self.values.setdefault("loadavg", {})[key] = loadavg()

    def save(self) -> None:
        if not self.values:
            return
        METRICS_FILE.parent.mkdir(parents=True, exist_ok=True)
        METRICS_FILE.write_text(json.dumps(self.values, indent=2, sort_keys=True) + "\n")


# ------------------------------------------------------------------ the engine


class Engine:
    """Starts the private engine if it is not running and stops it at the end, unless it
    was already running before any test session started it (someone's own engine)."""

    def __init__(self) -> None:
        self.env = engine_env()
        self.sessions = HOME / "test-sessions"
        self.started_marker = HOME / "started-by-tests"

    def _script(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        return subprocess.run([str(TOOLS / "engine.sh"), *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def start(self) -> Docker:
        HOME.mkdir(parents=True, exist_ok=True)
        self.sessions.mkdir(exist_ok=True)
        (self.sessions / str(os.getpid())).touch()
        if self._script("status").returncode != 0:
            out = self._script("start")
            if out.returncode != 0:
                raise Failed(f"tools/docker/engine.sh start failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
            self.started_marker.touch()
        return Docker(self.env)

    def base_image(self) -> None:
        out = subprocess.run([str(TOOLS / "base-image.sh"), BASE_IMAGE], env=self.env, capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            raise Failed(f"tools/docker/base-image.sh failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")

    def stop(self) -> None:
        (self.sessions / str(os.getpid())).unlink(missing_ok=True)
        for entry in self.sessions.iterdir():
            if entry.name.isdigit() and _alive(int(entry.name)):
                return  # another test session still uses the engine
            entry.unlink(missing_ok=True)
        if self.started_marker.exists():
            out = self._script("stop", timeout=120)
            if out.returncode != 0:
                raise Failed(f"tools/docker/engine.sh stop failed:\n{out.stderr[-2000:]}")
            self.started_marker.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
