"""``make bench``: throughput, broker CPU per MB, start-up time and idle RSS.

Runs everything against child broker processes on loopback, prints a table
and rewrites ``docs/benchmarks.md``. It measures; it asserts nothing.

    python -m bench.run [--repeats N] [--mb-1k MB] [--mb-100 MB] [--startup-runs N] [--no-docs]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import workload
from .procstat import cpu_seconds, machine, peak_rss_mb, rss_mb
from .spawn import ROOT, Broker

DOC = ROOT / "docs" / "benchmarks.md"
SIZES = (1000, 100)  # record value sizes in bytes

TARGET_READY_MS = 150
TARGET_RSS_MB = 50
TARGET_PRODUCE_MBS = 100
TARGET_CONSUME_MBS = 150


@dataclass
class StartupResult:
    ready_ms: list[float] = field(default_factory=list)
    startup_ms: list[float] = field(default_factory=list)
    rss_at_ready_mb: list[float] = field(default_factory=list)


@dataclass
class Results:
    started: dt.datetime
    machine: dict[str, str]
    args: argparse.Namespace
    startup: StartupResult
    idle_rss_start_mb: float = 0.0
    idle_cpu_pct: float = 0.0
    idle_rss_after_mb: float = 0.0
    peak_rss_mb: float = 0.0
    phases: list[workload.Phase] = field(default_factory=list)
    imports: tuple[float, list[tuple[str, float]]] = (0.0, [])
    hypothesis_cost: tuple[float, float, float, float] | None = None
    elapsed_s: float = 0.0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- measurements
def measure_startup(tmp: Path, runs: int) -> StartupResult:
    res = StartupResult()
    for i in range(runs):
        data = tmp / f"startup-{i}"
        broker = Broker(data, "--fsync", "interval").start()
        try:
            res.ready_ms.append(broker.ready_s * 1000)
            res.rss_at_ready_mb.append(rss_mb(broker.pid))
            ms = broker.startup_ms()
            if ms is not None:
                res.startup_ms.append(ms)
        finally:
            broker.stop()
        shutil.rmtree(data, ignore_errors=True)
    log(f"start-up: READY after median {statistics.median(res.ready_ms):.0f} ms, min {min(res.ready_ms):.0f} ms")
    return res


def idle(pid: int, seconds: float) -> tuple[float, float]:
    """Sleep, then return (RSS in MB, broker CPU % of one core over the sleep)."""
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)
    c1, t1 = cpu_seconds(pid), time.perf_counter()
    return rss_mb(pid), (c1 - c0) / (t1 - t0) * 100


BIG_FETCH = {"max.partition.fetch.bytes": 16 * 1024 * 1024}
BIG_FETCH_LABEL = "max.partition.fetch.bytes 16 MiB"


def measure_throughput(tmp: Path, res: Results) -> None:
    args = res.args
    counts = {1000: int(args.mb_1k * 1e6 / 1000), 100: int(args.mb_100 * 1e6 / 100)}
    with Broker(tmp / "data", "--fsync", "interval").start() as broker:
        res.idle_rss_start_mb, res.idle_cpu_pct = idle(broker.pid, 2.0)
        log(f"idle after start: RSS {res.idle_rss_start_mb:.1f} MB, CPU {res.idle_cpu_pct:.1f}%")
        for rep in range(args.repeats):
            for size in SIZES:
                topic = f"bench-{size}b-{rep}"
                workload.create_topic(broker.bootstrap, topic)
                steps = [(workload.produce, None), (workload.consume, None)]
                if size == 1000:
                    steps.append((workload.consume, (BIG_FETCH, BIG_FETCH_LABEL)))
                for fn, overrides in steps:
                    # write-back of earlier phases must not overlap this one
                    os.sync()
                    if overrides:
                        phase = fn(broker.bootstrap, broker.pid, topic, size, counts[size], *overrides)
                    else:
                        phase = fn(broker.bootstrap, broker.pid, topic, size, counts[size])
                    res.phases.append(phase)
                    log(
                        f"run {rep + 1}/{args.repeats} {phase.name:7s} {size:4d} B: {phase.mb_per_s:7.1f} MB/s "
                        f"{phase.records_per_s:10,.0f} rec/s  broker {phase.broker_cpu_ms_per_mb:5.1f} ms/MB "
                        f"({phase.broker_util * 100:.0f}% of a core, {phase.broker_sys_share * 100:.0f}% sys), "
                        f"client {phase.client_util * 100:.0f}% (Python thread {phase.client_main_util * 100:.0f}%)" + (f"  [{phase.variant}]" if phase.variant else "")
                    )
                try:
                    workload.delete_topic(broker.bootstrap, topic)
                except Exception as exc:  # only to save disk space
                    log(f"could not delete {topic}: {exc}")
        res.idle_rss_after_mb, _ = idle(broker.pid, 3.0)
        res.peak_rss_mb = peak_rss_mb(broker.pid)
        log(f"idle after load: RSS {res.idle_rss_after_mb:.1f} MB (peak {res.peak_rss_mb:.1f} MB)")


def measure_imports() -> tuple[float, list[tuple[str, float]]]:
    """``python -X importtime`` of what the broker imports before READY: (total ms, [(package, self ms)])."""
    code = "import broker.cli, broker.server, broker.logs, uvloop"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
    ).stderr
    per_pkg: dict[str, float] = {}
    total = 0.0
    for line in out.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cum, name = line[len("import time:") :].split("|")
        pkg = name.strip().split(".")[0]
        per_pkg[pkg] = per_pkg.get(pkg, 0.0) + int(self_us) / 1000
        total += int(self_us) / 1000
    return total, sorted(per_pkg.items(), key=lambda kv: -kv[1])


def measure_hypothesis_cost(runs: int = 5) -> tuple[float, float, float, float] | None:
    """Median wall ms and max RSS MB of importing the broker's modules, with and without hypothesis importable."""
    code = "import resource, sys{block}; import broker.cli, broker.server, broker.logs, uvloop; " \
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, 'hypothesis' in sys.modules and sys.modules['hypothesis'] is not None)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = []
    for block in ("", "; sys.modules['hypothesis'] = None"):
        walls, rss, loaded = [], [], False
        for _ in range(runs):
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-c", code.format(block=block)], capture_output=True, text=True, env=env, cwd=ROOT)
            walls.append((time.perf_counter() - t0) * 1000)
            if r.returncode != 0:
                return None
            kb, hyp = r.stdout.split()
            rss.append(int(kb) * 1024 / 1e6)
            loaded = loaded or hyp == "True"
        if not block and not loaded:
            return None  # hypothesis is not imported at all: nothing to report
        out += [statistics.median(walls), statistics.median(rss)]
    return tuple(out)


# ---------------------------------------------------------------- reporting
@dataclass
class Summary:
    name: str
    size: int
    variant: str
    runs: list[workload.Phase]

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.name, self.size, self.variant)

    @property
    def label(self) -> str:
        text = f"{self.name.capitalize()} {_size(self.size)} records"
        return text + (f" ({self.variant})" if self.variant else "")

    def med(self, attr: str) -> float:
        return statistics.median(getattr(p, attr) for p in self.runs)

    def best(self, attr: str) -> float:
        return max(getattr(p, attr) for p in self.runs)


def summaries(phases: list[workload.Phase]) -> list[Summary]:
    out = []
    variants = sorted({p.variant for p in phases})
    for name in ("produce", "consume"):
        for size in SIZES:
            for variant in variants:
                runs = [p for p in phases if p.name == name and p.value_size == size and p.variant == variant]
                if runs:
                    out.append(Summary(name, size, variant, runs))
    return out


def _mark(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _size(n: int) -> str:
    return "1 KB" if n == 1000 else f"{n} B"


def render(res: Results) -> str:
    su = summaries(res.phases)
    by = {s.key: s for s in su}
    st = res.startup
    ready_med = statistics.median(st.ready_ms)
    args = res.args
    m = res.machine
    lines: list[str] = []
    w = lines.append
    w("# Benchmarks")
    w("")
    w("Generated by `make bench` (`python -m bench.run`); rerun it to refresh this page.")
    w("")
    w(f"- **Date:** {res.started:%Y-%m-%d %H:%M} UTC (run took {res.elapsed_s:.0f} s)")
    w(f"- **Machine:** {m['cpu']}, {m['cores']} cores, {m['memory']} RAM, {m['kernel']}")
    w(f"- **Software:** {m['python']}, confluent-kafka {m['confluent-kafka']}, uvloop {m['uvloop']}, structlog {m['structlog']}")
    w("")
    w("## Method")
    w("")
    w(
        "One broker process (`python -m broker serve --port 0 --fsync interval`, fresh data directory in a "
        "temporary directory) and the benchmark client share the machine and talk over loopback. For each "
        f"record size a new topic with {workload.PARTITIONS} partitions is created with `AdminClient`; "
        f"{args.mb_1k:g} MB of 1 KB values and {args.mb_100:g} MB of 100 B values (no keys, no compression) "
        "are produced round-robin over the partitions by a confluent-kafka `Producer` with `acks=all`, "
        f"`linger.ms={workload.PRODUCER_CONFIG['linger.ms']}`, `batch.size=1000000` and large queues, timed "
        "from the first `produce()` to the end of `flush()`. The same records are then read back by a "
        "`Consumer` using `assign()` at offset 0 on every partition and `consume(num_messages=10000)` in a "
        "loop (`max.partition.fetch.bytes` 4 MiB, `fetch.max.bytes` 50 MiB), timed from `assign()` to the last "
        "record (the data is in the page cache by then); the 1 KB records are read a second time with "
        "`max.partition.fetch.bytes` 16 MiB to show how the response size affects the broker. `sync()` runs "
        "before every phase so that write-back of earlier data does not overlap it, and each topic is deleted "
        "after its runs. "
        f"Each produce/consume pair is repeated {args.repeats} times on fresh topics; the table shows the median "
        "and the best run. MB are 10^6 bytes of record values (protocol overhead not counted)."
    )
    w("")
    w(
        "Broker CPU is the broker process's utime+stime from `/proc/<pid>/stat` before and after each phase, "
        "divided by the MB and by the records moved; it shows the broker's cost even where the client is the "
        "bottleneck. Client CPU is this process's own rusage (Python plus librdkafka threads); the client's Python "
        "thread is its main thread's time from `/proc/self/task/<tid>/stat`, which is idle while it waits in "
        "`flush()` or `consume()`. "
        f"Start-up is the wall time from just before `exec` to reading the `READY` line, over {len(st.ready_ms)} "
        "starts on empty data directories; `startup_ms` is what the broker itself logs (from just before it loads "
        "its data directory to READY, so it excludes interpreter start and imports). Idle RSS is `VmRSS` from "
        "`/proc/<pid>/status`, 2 s after READY and again 3 s after the last consume."
    )
    w("")
    w("## Results")
    w("")
    w("| Figure | Median | Best | Broker CPU per MB | Broker CPU per record | CPU: broker / client (Python thread), of one core |")
    w("|---|---|---|---|---|---|")
    for s in su:
        w(
            f"| {s.label} | {s.med('mb_per_s'):.1f} MB/s, "
            f"{s.med('records_per_s'):,.0f} rec/s | {s.best('mb_per_s'):.1f} MB/s, {s.best('records_per_s'):,.0f} rec/s "
            f"| {s.med('broker_cpu_ms_per_mb'):.1f} ms | {s.med('broker_cpu_us_per_record'):.2f} µs "
            f"| {s.med('broker_util') * 100:.0f}% / {s.med('client_util') * 100:.0f}% ({s.med('client_main_util') * 100:.0f}%) |"
        )
    startup_ms = f"; broker-logged `startup_ms` median {statistics.median(st.startup_ms):.1f} ms" if st.startup_ms else ""
    w(
        f"| Process start → READY | {ready_med:.0f} ms | {min(st.ready_ms):.0f} ms (min) | – | – "
        f"| {len(st.ready_ms)} runs{startup_ms} |"
    )
    w(f"| Idle RSS after start | {res.idle_rss_start_mb:.1f} MB | – | – | – | idle CPU {res.idle_cpu_pct:.1f}% |")
    w(
        f"| Idle RSS after produce/consume | {res.idle_rss_after_mb:.1f} MB | – | – | – "
        f"| peak RSS (VmHWM) {res.peak_rss_mb:.1f} MB |"
    )
    w("")
    w("## Targets")
    w("")
    w("| Target | Measured | Status |")
    w("|---|---|---|")
    w(f"| READY within {TARGET_READY_MS} ms of process start | {ready_med:.0f} ms median, {min(st.ready_ms):.0f} ms min | {_mark(ready_med <= TARGET_READY_MS)} |")
    w(f"| Idle RSS at most {TARGET_RSS_MB} MB (after start) | {res.idle_rss_start_mb:.1f} MB | {_mark(res.idle_rss_start_mb <= TARGET_RSS_MB)} |")
    w(f"| Idle RSS at most {TARGET_RSS_MB} MB (idle after load) | {res.idle_rss_after_mb:.1f} MB | {_mark(res.idle_rss_after_mb <= TARGET_RSS_MB)} |")
    if ("produce", 1000, "") in by:
        v = by[("produce", 1000, "")].med("mb_per_s")
        w(f"| Produce ≥ {TARGET_PRODUCE_MBS} MB/s, 1 KB records | {v:.1f} MB/s median | {_mark(v >= TARGET_PRODUCE_MBS)} |")
    if ("consume", 1000, "") in by:
        v = by[("consume", 1000, "")].med("mb_per_s")
        w(f"| Consume ≥ {TARGET_CONSUME_MBS} MB/s, 1 KB records | {v:.1f} MB/s median | {_mark(v >= TARGET_CONSUME_MBS)} |")
    w("")
    w("## All runs")
    w("")
    w("In run order. Broker CPU s is user+system; sys is the kernel's share of it.")
    w("")
    w("| Phase | Value size | Records | Wall s | MB/s | Records/s | Broker CPU s (sys) | Client CPU s |")
    w("|---|---|---|---|---|---|---|---|")
    for p in res.phases:
        name = p.name + (f" ({p.variant})" if p.variant else "")
        w(
            f"| {name} | {_size(p.value_size)} | {p.records:,} | {p.wall_s:.2f} | {p.mb_per_s:.1f} "
            f"| {p.records_per_s:,.0f} | {p.broker_cpu_s:.2f} ({p.broker_sys_share * 100:.0f}%) | {p.client_cpu_s:.2f} |"
        )
    w("")
    w("## Notes")
    w("")
    for note in notes(res, by):
        w(f"- {note}")
    w("")
    return "\n".join(lines)


def notes(res: Results, by: dict) -> list[str]:
    out = []
    cores = int(res.machine.get("cores") or 0)
    out.append(
        f"Client and broker share {cores} cores, so every throughput figure is for the pair; the broker runs one "
        "asyncio event loop and can use at most about one core (plus a little for its flush thread)."
    )
    for s in by.values():
        bu, cu, mu = s.med("broker_util"), s.med("client_util"), s.med("client_main_util")
        if bu >= 0.85:
            who = "the broker is the bottleneck (its event loop is close to a full core)"
        elif mu >= 0.8:
            who = (
                "the client's Python thread is the bottleneck (it is busy calling "
                f"{'produce()' if s.name == 'produce' else 'consume() and reading the messages'} nearly all the time)"
            )
        elif cu >= 0.95 and cu >= 1.5 * bu:
            who = "the client side (librdkafka threads plus Python) is the bottleneck; the broker has headroom"
        elif bu + cu >= 0.85 * cores:
            who = "together they keep the machine busy; neither alone saturates a core"
        else:
            who = "no single thread saturates a core, so hand-offs between client and broker bound the rate"
        sys_share = statistics.median(p.broker_sys_share for p in s.runs)
        out.append(
            f"{s.label}: broker at {bu * 100:.0f}% of a core ({sys_share * 100:.0f}% of it in the kernel), "
            f"client at {cu * 100:.0f}% (its Python thread {mu * 100:.0f}%) → {who}."
        )
    normal, big = by.get(("consume", 1000, "")), by.get(("consume", 1000, BIG_FETCH_LABEL))
    if normal and big:
        out.append(
            f"Fetch response size matters: with 16 MiB per partition (about 48 MiB per response) consume of 1 KB "
            f"records runs at {big.med('mb_per_s'):.0f} MB/s and costs the broker {big.med('broker_cpu_ms_per_mb'):.1f} ms/MB, "
            f"against {normal.med('mb_per_s'):.0f} MB/s and {normal.med('broker_cpu_ms_per_mb'):.1f} ms/MB with 4 MiB; "
            f"the broker's kernel share goes from {_sys(normal) * 100:.0f}% to {_sys(big) * 100:.0f}% of its CPU "
            "(on plain TCP, partitions' records of 256 KiB or more are sent from the segment file with sendfile, "
            "so the size of a response should change only the per-request share of the cost)."
        )
    for s in by.values():
        if len(s.runs) >= 3:
            first, rest = s.runs[0].mb_per_s, statistics.median(p.mb_per_s for p in s.runs[1:])
            if first < 0.75 * rest:
                out.append(
                    f"{s.label}: the first run ({first:.0f} MB/s) was well below the later ones (median {rest:.0f} MB/s); "
                    "both processes warm up (allocators growing, first-time page faults) during the first large transfers."
                )
    st = res.startup
    if st.startup_ms:
        gap = statistics.median(st.ready_ms) - statistics.median(st.startup_ms)
        out.append(
            f"Of the {statistics.median(st.ready_ms):.0f} ms to READY, the broker's own start-up accounts for "
            f"{statistics.median(st.startup_ms):.1f} ms; the remaining ~{gap:.0f} ms is interpreter start and imports."
        )
    total, per_pkg = res.imports
    if per_pkg:
        top = ", ".join(f"{pkg} {ms:.0f} ms" for pkg, ms in per_pkg[:6])
        out.append(
            f"`python -X importtime` of the modules the broker loads before READY: {total:.0f} ms in all (inflated "
            f"somewhat by the tracing); largest by package (own time): {top}."
        )
    if res.hypothesis_cost:
        w_with, rss_with, w_without, rss_without = res.hypothesis_cost
        out.append(
            "`hypothesis` (a test dependency, installed here by the `[test]` extra) is imported by the broker: "
            "`kio.static._phantom` imports it whenever it is importable, to register test strategies. Importing the "
            f"broker's modules takes {w_with:.0f} ms and {rss_with:.0f} MB max RSS with it, {w_without:.0f} ms and "
            f"{rss_without:.0f} MB with `sys.modules['hypothesis'] = None` (medians of 5 runs)."
        )
    out.append(
        "Timings vary with machine load; throughput figures are medians of a few runs, not a guarantee. "
        "Consume reads data that was just written, from the page cache."
    )
    return out


def _sys(s: Summary) -> float:
    return statistics.median(p.broker_sys_share for p in s.runs)


def print_table(res: Results) -> None:
    print()
    print(f"{'figure':32s} {'median':>24s} {'best':>24s} {'broker ms/MB':>13s} {'µs/rec':>8s}")
    for s in summaries(res.phases):
        print(
            f"{s.name + ' ' + _size(s.size) + (' big fetch' if s.variant else ''):32s} "
            f"{s.med('mb_per_s'):8.1f} MB/s {s.med('records_per_s'):9,.0f}/s "
            f"{s.best('mb_per_s'):8.1f} MB/s {s.best('records_per_s'):9,.0f}/s "
            f"{s.med('broker_cpu_ms_per_mb'):13.1f} {s.med('broker_cpu_us_per_record'):8.2f}"
        )
    st = res.startup
    extra = f" (broker startup_ms {statistics.median(st.startup_ms):.1f})" if st.startup_ms else ""
    print(f"{'start → READY':32s} {statistics.median(st.ready_ms):21.0f} ms {min(st.ready_ms):21.0f} ms{extra}")
    print(f"{'idle RSS after start':32s} {res.idle_rss_start_mb:21.1f} MB")
    print(f"{'idle RSS after load':32s} {res.idle_rss_after_mb:21.1f} MB (peak {res.peak_rss_mb:.1f} MB)")
    print(f"total {res.elapsed_s:.0f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="produce/consume runs per record size (default 5)")
    ap.add_argument("--mb-1k", type=float, default=500, help="MB of 1 KB values per run (default 500)")
    ap.add_argument("--mb-100", type=float, default=200, help="MB of 100 B values per run (default 200)")
    ap.add_argument("--startup-runs", type=int, default=10, help="process starts to time (default 10)")
    ap.add_argument("--no-docs", action="store_true", help="print only, leave docs/benchmarks.md alone")
    ap.add_argument("--output", type=Path, default=DOC, help="where to write the report")
    args = ap.parse_args(argv)

    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-bench-"))
    try:
        res = Results(started, machine(), args, measure_startup(tmp, args.startup_runs))
        res.imports = measure_imports()
        res.hypothesis_cost = measure_hypothesis_cost()
        measure_throughput(tmp, res)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res.elapsed_s = time.perf_counter() - t0
    print_table(res)
    if not args.no_docs:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        # keep the sections other benchmarks own (e.g. bench.groups' "## Group coordinator")
        kept = ""
        if args.output.exists():
            old = args.output.read_text()
            marker = old.find("\n## Group coordinator")
            if marker >= 0:
                kept = old[marker:]
        args.output.write_text(render(res).rstrip("\n") + "\n" + kept)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
