"""Form one KIP-848 group against kafkalite alone, optionally under py-spy, and time it.

    python -m bench.k848_profile [--members 3000] [--reps 1] [--py-spy FILE] [--rate 100]

The same workload as the KIP-848 phase of ``make bench-compare``
(``bench.kip848_scenarios.run_protocol``: N - 1 members form a group on an
N-partition topic, then one more joins), against a kafkalite broker started
here with the heartbeat interval of ``bench.compare``. With ``--py-spy FILE``
the broker runs under ``py-spy record`` and its profile is written to FILE
(speedscope JSON if FILE ends in .json, a flame graph if .svg, otherwise
py-spy's raw collapsed stacks). Prints the forming time, the join figures and
the errors the members saw. Measures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import group_scenarios as gs
from . import kip848_scenarios as ks
from .compare import K848_INTERVAL_MS, coordinator_ready, loadavg, run_async
from .procstat import cpu_split
from .spawn import ROOT


def start(data: Path, py_spy: Path | None, rate: int, extra: list[str]) -> tuple[subprocess.Popen, int, Path]:
    cmd = [sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data),
           "--fsync", "interval", "--log-format", "json", "--group-consumer-heartbeat-interval-ms", str(K848_INTERVAL_MS), *extra]
    if py_spy is not None:
        fmt = "speedscope" if py_spy.suffix == ".json" else "flamegraph" if py_spy.suffix == ".svg" else "raw"
        cmd = [str(Path(sys.executable).with_name("py-spy")), "record", "--nonblocking", "-r", str(rate), "-f", fmt, "-o", str(py_spy), "--", *cmd]
    log = data.parent / "broker.log"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log, "w"), env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    line = proc.stdout.readline().decode()
    while line.startswith("py-spy>") or line == "\n":
        line = proc.stdout.readline().decode()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}\n{log.read_text()[-3000:]}")
    return proc, int(line.strip().rsplit(":", 1)[1]), log


def broker_pid(proc: subprocess.Popen) -> int:
    """The broker's pid when it runs as py-spy's child."""
    with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
        return int(f.read().split()[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--py-spy", type=Path, help="run the broker under py-spy record, writing here")
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    ap.add_argument("--window", type=float, default=2.0, help="seconds of steady heartbeats measured after the first join")
    ap.add_argument("--broker-arg", action="append", default=[], help="one more argument for broker serve (repeatable)")
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="k848-profile-"))
    proc, port, log = start(tmp / "data", a.py_spy.resolve() if a.py_spy else None, a.rate, a.broker_arg)
    print(f"broker pid {proc.pid} port {port}, load {loadavg()}", flush=True)

    pid = broker_pid(proc) if a.py_spy else proc.pid

    async def go():
        await coordinator_ready("127.0.0.1", port)
        admin = (await gs.connect("127.0.0.1", port, 1))[0]
        topic = f"prof-k848-{a.members}"
        topic_id = await ks.create_topic(admin, topic, a.members)
        conns = await gs.connect("127.0.0.1", port, a.members)
        split: list = []
        cpu0 = (ks.busy_seconds(pid), ks.self_cpu_seconds(), time.perf_counter())

        def say(m: str) -> None:
            if "settled in" in m:  # the end of forming: CPU each side spent on it
                b, c, t = ks.busy_seconds(pid) - cpu0[0], ks.self_cpu_seconds() - cpu0[1], time.perf_counter() - cpu0[2]
                m += f" (broker CPU {b:.1f} s = {b / t:.0%} of a core, load generator CPU {c:.1f} s = {c / t:.0%})"
            if "join 1/" in m:
                split[:] = cpu_split(pid)
            if "steady:" in m and split:
                user, system = (a - b for a, b in zip(cpu_split(pid), split, strict=True))
                m += f" (broker user {user:.1f} s, system {system:.1f} s since the first join)"
            print(f"{time.strftime('%H:%M:%S')} {m.strip()}", flush=True)

        try:
            return await ks.run_protocol("kip848", conns, admin, pid, a.members, a.reps, topic, topic_id, K848_INTERVAL_MS / 1000, a.window, say)
        finally:
            for c in conns:
                c.close()
            admin.close()

    try:
        r = run_async(go())
        print(f"formed {a.members - 1} members in {r.form_s:.1f} s; errors {dict(r.errors)}; handed out while owned {r.double_owned}; load {loadavg()}")
        for s in r.joins:
            print(f"join: waited {s.joiner_wait_ms:,.0f} ms, longest gap {s.max_gap_ms:,.0f} ms, settled {s.settle_ms:,.0f} ms")
    finally:
        proc.send_signal(signal.SIGINT if a.py_spy else signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
        print(f"broker log: {log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
