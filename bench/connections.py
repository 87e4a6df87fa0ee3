"""Connection-level memory and CPU of a broker child process, printed as JSON.

Each scenario starts a fresh broker (``kafkalite serve`` on 127.0.0.1, port 0),
drives it from this process over loopback, reads the broker's RSS and CPU
time from /proc and prints one JSON object. It measures; it asserts nothing.
Every scenario is bounded in time and in count.

    python -m bench.connections idle [--count 10000] [--hello] [--rounds 1]
        RSS before, with COUNT idle connections open (--hello: each sent one
        ApiVersions first, as clients do) and after they are closed; with
        --rounds, again and again (memory freed is reused, or it is not)
    python -m bench.connections nonreader [--seconds 15]
        a client sends Fetch requests for 1 MiB answers and never reads; RSS
        while it does, the ApiVersions latency of another client meanwhile,
        and RSS after it leaves
    python -m bench.connections liars [--clients 20] [--announce-mib 100] [--send-mib 40]
        clients announce large frames and send only part of them; RSS during
        the burst and after they leave
    python -m bench.connections cpu [--requests 20000]
        event-loop CPU per request for Heartbeat and ApiVersions round trips,
        and for Heartbeats 32 at a time

Common options: ``--root DIR`` runs the broker from another source tree (for
before/after comparisons: ``git archive HEAD | tar -x -C DIR``), ``--set
NAME=VALUE`` passes a setting (repeatable). The load average is included,
since the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .procstat import cpu_seconds, loadavg, rss_mb

ROOT = Path(__file__).resolve().parent.parent


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Child:
    """A broker child process run from ``root``."""

    def __init__(self, root: Path, sets: list[str]) -> None:
        self.root = root
        self.data_dir = Path(tempfile.mkdtemp(prefix="kafkalite-bench-"))
        args = [sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(self.data_dir)]
        args += ["--log-level", "warning"]
        for s in sets:
            args += ["--set", s]
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.log = open(self.data_dir.parent / f"{self.data_dir.name}.stderr.log", "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=root, preexec_fn=_raise_nofile)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"broker did not become ready: {line!r}")
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.pid = self.proc.pid

    def rss(self) -> float:
        return round(rss_mb(self.pid), 1)

    def settle(self, seconds: float = 3.0) -> float:
        """RSS after ``seconds`` (the broker hands memory back a sweep or two after a burst)."""
        time.sleep(seconds)
        return self.rss()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# ---------------------------------------------------------------- wire helpers


def _request_bytes(api_key: int, version: int, body: dict, corr: int = 1) -> bytes:
    from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
    from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

    from protocol.codec import build, encode, request_class

    cls = request_class(api_key, version)
    header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
    header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=corr, client_id="bench")
    payload = encode(header) + encode(build(cls, body))
    return struct.pack(">i", len(payload)) + payload


API_VERSIONS = None


def api_versions_bytes() -> bytes:
    global API_VERSIONS
    if API_VERSIONS is None:
        API_VERSIONS = _request_bytes(18, 3, {"client_software_name": "bench", "client_software_version": "1"})
    return API_VERSIONS


def _read_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def round_trip(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    return _read_frame(sock)


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


# ---------------------------------------------------------------- scenarios


def scenario_idle(child: Child, args) -> dict:
    hello = api_versions_bytes()
    warm = connect(child.port)  # the codec builds its classes on first use: not part of the burst
    round_trip(warm, hello)
    warm.close()
    base_fds = fd_count(child.pid)
    before = child.settle(3)
    rounds = []
    for _ in range(args.rounds):
        socks: list[socket.socket] = []
        deadline = time.monotonic() + 120
        for i in range(args.count):
            if time.monotonic() > deadline:
                break
            s = connect(child.port)
            if args.hello:
                round_trip(s, hello)
            socks.append(s)
            if i % 200 == 199:  # let the broker's accept loop keep up with the listen backlog
                while fd_count(child.pid) < base_fds + len(socks) - 150 and time.monotonic() < deadline:
                    time.sleep(0.01)
        while fd_count(child.pid) < base_fds + len(socks) and time.monotonic() < deadline:
            time.sleep(0.05)
        accepted = fd_count(child.pid) - base_fds
        during = child.settle(2)
        for s in socks:
            s.close()
        deadline = time.monotonic() + 30
        while fd_count(child.pid) > base_fds and time.monotonic() < deadline:
            time.sleep(0.05)
        after = child.settle(4)
        n = len(socks)
        rounds.append({
            "connections": n,
            "accepted": accepted,
            "rss_open_mb": during,
            "rss_after_close_mb": after,
            "mb_per_1000": round((during - before) / n * 1000, 2) if n else None,
        })
    return {"hello": args.hello, "rss_before_mb": before, **rounds[0], "rounds": rounds}


def _setup_topic(port: int, topic: str, mib: int) -> None:
    from protocol.records import Record, build_batch

    s = connect(port)
    create = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "configs": []}], "timeout": 5000}
    round_trip(s, _request_bytes(19, 7, create))
    value = b"x" * 1000
    now = int(time.time() * 1000)  # recent: retention (7 days) must not delete them
    for b in range(mib):
        recs = [Record(offset=i, timestamp=now + i, key=None, value=value, headers=[]) for i in range(1000)]
        batch = build_batch(recs)
        body = {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
        round_trip(s, _request_bytes(0, 9, body, corr=b + 2))
    s.close()


def _fetch_bytes(topic: str, max_bytes: int) -> bytes:
    body = {
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
    }
    return _request_bytes(1, 12, body)


def scenario_nonreader(child: Child, args) -> dict:
    topic = "bench-nonreader"
    _setup_topic(child.port, topic, 2)
    before = child.settle(2)
    fetch = _fetch_bytes(topic, 1 << 20)
    bad = connect(child.port)
    bad.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    bad.setblocking(False)
    probe = connect(child.port)
    hello = api_versions_bytes()
    sent = 0
    pending = memoryview(b"")
    samples: list[float] = []
    probe_ms: list[float] = []
    t0 = time.monotonic()
    cpu0 = cpu_seconds(child.pid)
    next_sample = t0
    stopped = "time"
    while time.monotonic() - t0 < args.seconds:
        if not pending:
            pending = memoryview(fetch * 16)
        _, writable, _ = select.select([], [bad], [], 0.05)
        if writable:
            try:
                n = bad.send(pending)
                sent += n
                pending = pending[n:]
            except BlockingIOError:
                pass
        now = time.monotonic()
        if now >= next_sample:
            next_sample = now + 0.5
            samples.append(child.rss())
            p0 = time.perf_counter()
            round_trip(probe, hello)
            probe_ms.append((time.perf_counter() - p0) * 1000)
            if samples[-1] > args.max_rss_mb:
                stopped = "rss cap"
                break
    cpu = cpu_seconds(child.pid) - cpu0
    bad.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the probe is answered once the broker has let go
        p0 = time.perf_counter()
        round_trip(probe, hello)
        if (time.perf_counter() - p0) < 0.05:
            break
    probe.close()
    after = child.settle(4)
    return {
        "seconds": round(time.monotonic() - t0, 1),
        "broker_cpu_seconds": round(cpu, 2),
        "stopped_by": stopped,
        "request_bytes_sent": sent,
        "fetch_requests_sent": sent // len(fetch),
        "rss_before_mb": before,
        "rss_max_mb": max(samples) if samples else None,
        "rss_last_mb": samples[-1] if samples else None,
        "rss_after_leave_mb": after,
        "probe_api_versions_ms_max": round(max(probe_ms), 2) if probe_ms else None,
        "probe_api_versions_ms_median": round(sorted(probe_ms)[len(probe_ms) // 2], 2) if probe_ms else None,
    }


def scenario_liars(child: Child, args) -> dict:
    before = child.settle(2)
    announce = args.announce_mib << 20
    target = args.send_mib << 20
    chunk = memoryview(b"\0" * (256 << 10))
    socks = []
    sent = []
    for _ in range(args.clients):
        s = connect(child.port)
        s.setblocking(False)
        s.send(struct.pack(">i", announce))
        socks.append(s)
        sent.append(0)
    samples: list[float] = []
    t0 = time.monotonic()
    next_sample = t0
    while time.monotonic() - t0 < args.seconds and min(sent) < target:
        _, writable, _ = select.select([], [s for s, n in zip(socks, sent, strict=True) if n < target], [], 0.1)
        for s in writable:
            i = socks.index(s)
            try:
                sent[i] += s.send(chunk[: min(len(chunk), target - sent[i])])
            except (BlockingIOError, ConnectionError):
                pass
        now = time.monotonic()
        if now >= next_sample:
            next_sample = now + 0.5
            samples.append(child.rss())
            if samples[-1] > args.max_rss_mb:
                break
    samples.append(child.settle(2))
    alive = fd_count(child.pid)
    for s in socks:
        s.close()
    deadline = time.monotonic() + 30
    while fd_count(child.pid) > alive - len(socks) and time.monotonic() < deadline:
        time.sleep(0.05)
    after = child.settle(5)
    return {
        "clients": args.clients,
        "announced_mib": args.announce_mib,
        "sent_mib_total": round(sum(sent) / (1 << 20), 1),
        "seconds": round(time.monotonic() - t0, 1),
        "rss_before_mb": before,
        "rss_max_mb": max(samples),
        "rss_after_leave_mb": after,
    }


def _loop_cpu_ns(pid: int) -> int:
    """CPU time of the broker's main thread (its event loop), in ns (schedstat: finer than clock ticks)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def scenario_cpu(child: Child, args) -> dict:
    """Event-loop CPU per request, in segments; the minimum is the least disturbed by other load."""
    s = connect(child.port)
    hello = api_versions_bytes()
    heartbeat = _request_bytes(12, 4, {"group_id": "bench-group", "generation_id": 1, "member_id": "nobody", "group_instance_id": None})
    segments = 8
    per = max(1, args.requests // segments)
    out = {}
    for name, req, depth in (("heartbeat", heartbeat, 1), ("api_versions", hello, 1), ("heartbeat_pipelined_32", heartbeat, 32)):
        batch = req * depth
        for _ in range(200):  # warm up
            s.sendall(batch)
            for _ in range(depth):
                _read_frame(s)
        samples = []
        for _ in range(segments):
            c0 = _loop_cpu_ns(child.pid)
            for _ in range(max(1, per // depth)):
                s.sendall(batch)
                for _ in range(depth):
                    _read_frame(s)
            samples.append((_loop_cpu_ns(child.pid) - c0) / (max(1, per // depth) * depth) / 1000)
        samples.sort()
        out[name] = {"requests": segments * max(1, per // depth) * depth, "loop_cpu_us_min": round(samples[0], 2), "loop_cpu_us_median": round(samples[len(samples) // 2], 2)}
    s.close()
    return out


SCENARIOS = {"idle": scenario_idle, "nonreader": scenario_nonreader, "liars": scenario_liars, "cpu": scenario_cpu}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.connections", description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--root", type=Path, default=ROOT, help="source tree the broker runs from")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--count", type=int, default=10_000)
    p.add_argument("--hello", action="store_true")
    p.add_argument("--rounds", type=int, default=1, help="idle: open and close the connections this many times")
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--max-rss-mb", type=float, default=3000.0, help="stop a scenario early past this broker RSS")
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--announce-mib", type=int, default=100)
    p.add_argument("--send-mib", type=int, default=40)
    p.add_argument("--requests", type=int, default=20_000)
    args = p.parse_args(argv)
    _raise_nofile()
    sys.path.insert(0, str(args.root))  # the wire helpers come from the same tree
    child = Child(args.root.resolve(), args.sets)
    try:
        load_before = loadavg()
        result = SCENARIOS[args.scenario](child, args)
    finally:
        child.stop()
    result = {"scenario": args.scenario, "root": str(args.root), "loadavg_before": load_before, "loadavg_after": loadavg(), **result}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
