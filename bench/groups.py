"""Load generator for the group coordinator: thousands of simulated members in one process.

    python -m bench.groups [--quick] [--seconds S] [--no-docs] [--profile DIR] [--kip848]

Speaks the Kafka protocol directly (kio through ``protocol.codec``) over
asyncio connections, one per simulated member, against child brokers on
loopback, and measures:

1. classic rebalances of new and of Stable groups of 10, 100 and 1000 members;
2. OffsetCommit throughput (single-partition "simple" commits) at
   ``--group-coordinator-append-linger-ms`` 5 and 1;
3. Heartbeat throughput of a Stable 1000-member group;
4. how fast the coordinator replays ~1M offset records at start-up;
5. (``kip848``, ``bench/kip848_scenarios.py``) one member joining a group of
   100, 1000 and 3000 members, with the KIP-848 consumer protocol and with
   classic eager and classic cooperative rebalancing.

Prints a table and replaces the ``## Group coordinator`` and ``## KIP-848 vs
classic rebalancing`` sections of ``docs/benchmarks.md`` (the rest of the page
is left alone; ``--kip848`` runs and rewrites only the latter). With
``--profile DIR`` every broker runs under cProfile and leaves a .prof file
in DIR (the numbers are then not comparable; use it to find hot spots).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import group_scenarios as gs
from . import kip848_report as kr
from . import kip848_scenarios as ks
from .procstat import cpu_seconds, loadavg, machine
from .spawn import ROOT, Broker

DOC = ROOT / "docs" / "benchmarks.md"
SECTION = "## Group coordinator"

TARGET_REBALANCE_MS = 300
TARGET_COMMIT_RPS = 20_000
TARGET_HB_US = 30
TARGET_LOAD_RPS = 1_000_000

COMMIT_TOPIC, COMMIT_TOPIC_PARTITIONS = "bench-commits", 16
LOAD_TOPIC = "bench-load"


@dataclass
class Plan:
    sizes_reps: list[tuple[int, int]]
    seconds: float
    warmup: float
    hb_depth: int
    commit_groups: int
    commit_shapes: list[tuple[int, int]]  # (connections, depth)
    lingers: list[int]
    load_groups: int
    load_partitions: int
    k848_sizes: list[tuple[int, int, int]] = field(default_factory=list)  # (group size, joins, heartbeat interval ms)
    k848_window: float = 2.0
    k848_protocols: list[str] = field(default_factory=lambda: ["eager", "cooperative", "kip848"])


def make_plan(args) -> Plan:
    if args.quick:
        plan = Plan([(10, 5), (100, 3), (1000, 1)], 1.5, 0.3, 4, 1000, [(64, 8), (256, 4)], [5, 1], 2000, 100,
                    [(100, 2, 200), (1000, 1, 1000), (3000, 1, 5000)], 1.5)
    else:
        plan = Plan([(10, 20), (100, 10), (1000, 3)], 5.0, 0.5, 4, 1000, [(64, 8), (256, 4)], [5, 1], 10_000, 100,
                    [(100, 3, 200), (1000, 2, 1000), (3000, 1, 5000)], 2.0)
    if args.seconds:
        plan.seconds = args.seconds
    if args.kip848_sizes:
        known = {n: (r, h) for n, r, h in plan.k848_sizes}
        plan.k848_sizes = [(n, *known.get(n, (2, 1000))) for n in args.kip848_sizes]
    if args.kip848_interval_ms:
        plan.k848_sizes = [(n, r, args.kip848_interval_ms) for n, r, _ in plan.k848_sizes]
    if args.kip848_protocols:
        plan.k848_protocols = args.kip848_protocols
    return plan


@dataclass
class LoadResult:
    write: gs.WriteResult
    stop_s: float
    ready_s: float
    loaded_s: float  # process start -> "coordinator loaded" seen in its log
    load_ms: float  # as the broker logs it
    records: int
    replay_cpu_s: float  # broker CPU from READY to "coordinator loaded" (shards load after READY)
    check_before: list[str]
    check_after: list[str]


@dataclass
class Results:
    started: dt.datetime
    machine: dict
    plan: Plan
    quick: bool
    rebalances: list = field(default_factory=list)
    heartbeat: gs.Throughput | None = None
    floor: gs.Throughput | None = None
    commits: dict = field(default_factory=dict)  # linger -> [Throughput]
    load: LoadResult | None = None
    k848: list = field(default_factory=list)  # ks.ProtocolResult
    k848_loadavg: list = field(default_factory=list)
    k848_elapsed_s: float = 0.0
    log_problems: dict = field(default_factory=dict)  # broker name -> Counter
    loadavg: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_async(coro):
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover
        return asyncio.run(coro)


class Brokers:
    """Starts brokers for the run, optionally under cProfile; remembers their logs."""

    def __init__(self, tmp: Path, profile: Path | None) -> None:
        self.tmp = tmp
        self.profile = profile
        self.logs: dict[str, str] = {}

    def start(self, name: str, data: str, *flags: str) -> Broker:
        py = ["-m", "cProfile", "-o", str(self.profile / f"{name}.prof")] if self.profile else []
        b = Broker(self.tmp / data, "--log-format", "json", *flags, python_args=py, log_path=self.tmp / f"{name}.log")
        b.start()
        b.name = name
        return b

    def stop(self, b: Broker) -> float:
        t0 = time.perf_counter()
        rc = b.stop(timeout=120)
        stopped = time.perf_counter() - t0
        self.logs[b.name] = b.logs() + (f"\n[broker exited with status {rc}]" if rc else "")
        return stopped


def wait_loaded(b: Broker, timeout: float = 300.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = b.logs()
        if "coordinator loaded" in text:
            for ev in gs.log_events(text):
                if ev.get("event") == "coordinator loaded":
                    return ev
        time.sleep(0.002)
    raise RuntimeError(f"broker {b.name} never logged 'coordinator loaded'")


# =========================================================================== phases
def phase_rebalance(brokers: Brokers, plan: Plan, res: Results) -> None:
    b = brokers.start("rebalance", "data-rebalance")
    try:
        wait_loaded(b)

        async def go():
            out, kept, conns = await gs.rebalances("127.0.0.1", b.port, b.pid, plan.sizes_reps, keep_last=True)
            for r in out:
                for kind, samples in (("new", r.new), ("stable", r.stable)):
                    say(f"  {r.size:>5} members, {kind:>6} group: sync {gs.median([s.sync_ms for s in samples]):7.1f} ms median "
                        f"(join {gs.median([s.join_ms for s in samples]):.1f} ms), generations {[s.generations for s in samples]}")
            hb = await gs.heartbeats(kept, b.pid, plan.hb_depth, plan.warmup, plan.seconds)
            say(f"  heartbeat: {hb.rps:,.0f}/s, broker {hb.broker_us_per_req:.1f} µs each, errors {hb.errors}")
            for c in conns:
                c.close()
            return out, hb

        res.rebalances, res.heartbeat = run_async(go())
    finally:
        brokers.stop(b)
    res.floor = measure_floor(plan)


def measure_floor(plan: Plan) -> gs.Throughput:
    """Heartbeats against bench.group_floor: what the event loop and sockets alone cost per request."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.group_floor"], stdout=subprocess.PIPE, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stdout.readline().decode()
        if not line.startswith("READY "):
            raise RuntimeError(f"bench.group_floor did not start: {line!r}")
        port = int(line.split()[1])
        n = plan.sizes_reps[-1][0]
        t = run_async(gs.floor_heartbeats(port, proc.pid, n, plan.hb_depth, plan.warmup, plan.seconds))
        say(f"  I/O floor ({n} connections × {plan.hb_depth}): {t.rps:,.0f}/s, server {t.broker_us_per_req:.1f} µs each")
        return t
    finally:
        proc.terminate()
        proc.wait()
        proc.stdout.close()


def phase_commits(brokers: Brokers, plan: Plan, res: Results) -> None:
    for linger in plan.lingers:
        b = brokers.start(f"commit-linger{linger}", f"data-commit-{linger}", "--group-coordinator-append-linger-ms", str(linger))
        try:
            wait_loaded(b)

            async def go(b=b, linger=linger):
                admin = (await gs.connect("127.0.0.1", b.port, 1))[0]
                await gs.create_topic(admin, COMMIT_TOPIC, COMMIT_TOPIC_PARTITIONS)
                admin.close()
                runs = []
                for groups, label in ((plan.commit_groups, f"{plan.commit_groups} groups"), (1, "1 group")):
                    for conns, depth in plan.commit_shapes:
                        t = await gs.commits("127.0.0.1", b.port, b.pid, COMMIT_TOPIC, COMMIT_TOPIC_PARTITIONS, label=label, groups=groups,
                                             n_conns=conns, depth=depth, warmup=plan.warmup, seconds=plan.seconds, run_id=f"c{len(runs)}")
                        say(f"  linger {linger} ms, {label}, {conns}×{depth}: {t.rps:,.0f}/s, broker {t.broker_us_per_req:.1f} µs each "
                            f"({t.broker_core:.0%} core), client {t.client_core:.0%}, others {t.other_core:.0%}, errors {t.errors}")
                        runs.append(t)
                return runs

            res.commits[linger] = run_async(go())
        finally:
            brokers.stop(b)


def phase_load(brokers: Brokers, plan: Plan, res: Results) -> None:
    parts = plan.load_partitions
    sample = [f"ld-{i:06d}" for i in (0, plan.load_groups // 2, plan.load_groups - 1)]
    b = brokers.start("load-write", "data-load")
    try:
        wait_loaded(b)

        async def write():
            admin = (await gs.connect("127.0.0.1", b.port, 1))[0]
            await gs.create_topic(admin, LOAD_TOPIC, parts)
            admin.close()
            w = await gs.write_offsets("127.0.0.1", b.port, b.pid, LOAD_TOPIC, parts, plan.load_groups)
            return w, await gs.check_offsets("127.0.0.1", b.port, LOAD_TOPIC, parts, sample)

        w, check_before = run_async(write())
        say(f"  wrote {w.records:,} offset records in {w.seconds:.1f} s ({w.records / w.seconds:,.0f} records/s), errors {w.errors}")
    finally:
        stop_s = brokers.stop(b)
    t0 = time.perf_counter()
    b = brokers.start("load-replay", "data-load")
    ready_s = time.perf_counter() - t0
    try:
        cpu_ready = cpu_seconds(b.pid)
        ev = wait_loaded(b)
        loaded_s = time.perf_counter() - t0
        replay_cpu = cpu_seconds(b.pid) - cpu_ready
        check_after = run_async(gs.check_offsets("127.0.0.1", b.port, LOAD_TOPIC, parts, sample))
    finally:
        brokers.stop(b)
    res.load = LoadResult(w, stop_s, ready_s, loaded_s, float(ev.get("load_ms", 0)), int(ev.get("records", 0)), replay_cpu, check_before, check_after)
    say(f"  replayed {res.load.records:,} records: load_ms {res.load.load_ms:.0f}, process start -> loaded {loaded_s * 1000:.0f} ms")


def raise_fd_limit(need: int) -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE (brokers started later inherit it); returns the (soft, hard) limits now in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


K848_TOPIC = "bench-k848-{n}"
K848_SESSION_MS = 600_000  # KIP-848 members do not heartbeat while their group forms (see kip848_scenarios.K848Sim.form)


def phase_kip848(brokers: Brokers, plan: Plan, res: Results) -> None:
    t_start = time.perf_counter()
    biggest = max(n for n, _, _ in plan.k848_sizes)
    soft, hard = raise_fd_limit(2 * biggest + 1024)
    if soft < biggest + 256:
        raise RuntimeError(f"RLIMIT_NOFILE is {soft} (hard {hard}): too few descriptors for {biggest} connections")
    for size, reps, interval_ms in plan.k848_sizes:
        interval = interval_ms / 1000
        res.k848_loadavg.append(loadavg())
        say(f"  {size} members (load average {res.k848_loadavg[-1]})")
        name = f"kip848-{size}"
        b = brokers.start(name, f"data-kip848-{size}", "--group-consumer-heartbeat-interval-ms", str(interval_ms),
                          "--group-consumer-session-timeout-ms", str(K848_SESSION_MS))
        try:
            wait_loaded(b)

            async def go(b=b, size=size, reps=reps, interval=interval):
                admin = (await gs.connect("127.0.0.1", b.port, 1))[0]
                topic = K848_TOPIC.format(n=size)
                topic_id = await ks.create_topic(admin, topic, size)
                conns = await gs.connect("127.0.0.1", b.port, size)
                out = []
                try:
                    for kind in plan.k848_protocols:
                        out.append(await ks.run_protocol(kind, conns, admin, b.pid, size, reps, topic, topic_id, interval, plan.k848_window,
                                                         lambda m: say(f"{time.perf_counter() - t_start:6.1f}s {m}")))
                finally:
                    for c in conns:
                        c.close()
                    admin.close()
                return out

            results = run_async(go())
        finally:
            brokers.stop(b)
        events = gs.log_events(brokers.logs.get(name, ""))
        for r in results:
            if r.protocol == "kip848":
                ks.fill_broker_assignor(r, events)
        res.k848 += results
    res.k848_loadavg.append(loadavg())
    res.k848_elapsed_s = time.perf_counter() - t_start


# =========================================================================== report
def _mark(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _ms(x: float) -> str:
    return f"{x:,.1f} ms"


def _cpu_ms(s: float) -> str:
    return f"{s * 1000:,.0f} ms"


def _errs(d: dict) -> str:
    return ", ".join(f"{k} ×{v}" for k, v in sorted(d.items())) or "none"


def _agg_errors(samples) -> dict:
    out: dict = {}
    for s in samples:
        for k, v in s.errors.items():
            out[k] = out.get(k, 0) + v
    return out


def rebalance_rows(res: Results) -> list[list[str]]:
    rows = []
    for r in res.rebalances:
        for kind, samples in (("new group", r.new), ("Stable group, leader rejoins", r.stable)):
            n = len(samples)
            rows.append([
                f"{r.size}", kind, str(n),
                _ms(gs.median([s.join_ms for s in samples])),
                _ms(gs.median([s.sync_ms for s in samples])),
                _ms(max(s.sync_ms for s in samples)),
                _cpu_ms(sum(s.broker_cpu_s for s in samples) / n),
                _cpu_ms(sum(s.client_cpu_s for s in samples) / n),
                _ms(gs.median([s.burst_ms for s in samples])),
                "/".join(str(s.generations) for s in samples) if n <= 10 else f"{min(s.generations for s in samples)}–{max(s.generations for s in samples)} (median {gs.median([s.generations for s in samples]):g})",
                _errs(_agg_errors(samples)),
            ])
    return rows


REB_HEAD = ["Members", "Rebalance", "Runs", "Last join sent → all JoinGroup answers (median)", "Last join sent → all SyncGroup answers (median)",
            "… (worst)", "Broker CPU per rebalance", "Client CPU per rebalance", "Client send time of the join burst (median)", "Generations per run", "Errors seen by members"]


def tp_row(t: gs.Throughput, linger: str = "") -> list[str]:
    return [
        *([linger] if linger else []), t.label, f"{t.connections} × {t.depth}", f"{t.rps:,.0f}", f"{t.broker_us_per_req:.1f} µs",
        f"{1e6 / t.broker_us_per_req if t.requests else 0:,.0f}",
        f"{t.broker_core:.0%} ({t.broker_sys_s / t.broker_cpu_s if t.broker_cpu_s else 0:.0%} in the kernel)", f"{t.client_core:.0%}", f"{t.other_core:.0%}", f"{t.requests:,} in {t.seconds:.1f} s", _errs(t.errors),
    ]


TP_HEAD = ["Workload", "Connections × depth", "Requests/s", "Broker CPU per request", "Requests/s one broker core could serve", "Broker CPU (of a core)", "Client CPU", "Other processes' CPU", "Measured", "Errors"]


def md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def targets(res: Results) -> list[list[str]]:
    rows = []
    big = next((r for r in res.rebalances if r.size == 1000), None)
    if big:
        st = gs.median([s.sync_ms for s in big.stable])
        nw = gs.median([s.sync_ms for s in big.new])
        cpu = sum(s.broker_cpu_s for s in big.stable) / len(big.stable) * 1000
        rows.append([f"1000-member classic rebalance completes within {TARGET_REBALANCE_MS} ms after the last JoinGroup",
                     f"Stable group: {st:,.0f} ms median from the last rejoin sent to the last SyncGroup answer (broker CPU {cpu:,.0f} ms); new group: {nw:,.0f} ms",
                     _mark(st <= TARGET_REBALANCE_MS)])
    for linger, runs in sorted(res.commits.items(), reverse=True):
        many = [t for t in runs if t.extra.get("groups", 0) > 1]
        best = max(many, key=lambda t: t.rps)
        rows.append([f"OffsetCommit ≥ {TARGET_COMMIT_RPS:,} requests/s (linger {linger} ms)",
                     f"{best.rps:,.0f}/s best ({best.connections} × {best.depth}, {best.broker_us_per_req:.0f} µs broker CPU each, so one broker core could serve ≈{1e6 / best.broker_us_per_req:,.0f}/s); "
                     + ", ".join(f"{t.connections} × {t.depth}: {t.rps:,.0f}/s" for t in many),
                     _mark(best.rps >= TARGET_COMMIT_RPS)])
    if res.heartbeat:
        hb = res.heartbeat
        rows.append([f"Heartbeat ≤ {TARGET_HB_US} µs broker CPU", f"{hb.broker_us_per_req:.1f} µs ({hb.rps:,.0f}/s measured; one broker core ≈{1e6 / hb.broker_us_per_req:,.0f}/s)", _mark(hb.broker_us_per_req <= TARGET_HB_US)])
    if res.load:
        ld = res.load
        rate = ld.records / (ld.load_ms / 1000) if ld.load_ms else 0
        per_cpu = ld.records / ld.replay_cpu_s if ld.replay_cpu_s else 0
        rows.append([f"Offsets load ≥ {TARGET_LOAD_RPS:,} records/s",
                     f"{rate:,.0f} records/s by the broker's load_ms ({ld.records:,} records in {ld.load_ms:,.0f} ms); "
                     f"{per_cpu:,.0f} records per second of broker CPU ({ld.replay_cpu_s:.1f} s)",
                     _mark(rate >= TARGET_LOAD_RPS)])
    return rows


def bottleneck(t) -> str:
    b, c, o = t.broker_core, t.client_core, t.other_core
    if b >= 0.8:
        return f"the broker is the limit ({b:.0%} of a core, its one event loop)"
    if c >= 0.8:
        return f"the client is the limit ({c:.0%} of a core)"
    if b + c + o >= 1.7:
        return f"the machine's 2 cores are saturated (broker {b:.0%}, client {c:.0%}, other processes {o:.0%}), so the broker gets less than a core"
    return f"neither process saturates a core (broker {b:.0%}, client {c:.0%}, other processes {o:.0%}): latency-bound"


def notes(res: Results) -> list[str]:
    out = []
    cores = int(res.machine.get("cores", "2") or 2)
    out.append(
        f"Broker and client share the machine's {cores} cores; other work on the machine was visible during the run "
        f"(load average at phase boundaries: {', '.join(res.loadavg)}). The \"Other processes' CPU\" column is the machine's busy time "
        "(/proc/stat) minus broker and client. Rates and latencies suffer most from it; CPU per request suffers less, but "
        "not nothing (the 2 vCPUs share caches and may be sibling hyperthreads)."
    )
    big = next((r for r in res.rebalances if r.size == 1000), None)
    if big:
        s = big.stable
        cpu = sum(x.broker_cpu_s for x in s) / len(s)
        ccpu = sum(x.client_cpu_s for x in s) / len(s)
        lat = gs.median([x.sync_ms for x in s]) / 1000
        out.append(
            f"1000-member Stable rebalance: the broker used {cpu * 1000:,.0f} ms of CPU per rebalance ({cpu / lat:.0%} of a core over the "
            f"{lat * 1000:,.0f} ms window; {cpu / big.size * 1e6:,.0f} µs per member for one JoinGroup plus one SyncGroup), the client "
            f"{ccpu * 1000:,.0f} ms. " + ("The broker's CPU alone exceeds the target." if cpu * 1000 > TARGET_REBALANCE_MS else
                                          "The broker's CPU fits the target; the rest of the window is queueing and the client.")
        )
    new_multi = [(r.size, x.generations) for r in res.rebalances for x in r.new if x.generations > 1]
    if new_multi:
        out.append(
            f"New groups: {len(new_multi)} of {sum(len(r.new) for r in res.rebalances)} formations took more than one generation. "
            "With group.initial.rebalance.delay.ms 0 (kafkalite's default; Kafka's is 3000) the initial join timer fires on the next loop "
            "iteration once no new member arrived in the previous one, so a join completes with the members that have arrived so far and "
            "later arrivals force another generation (SyncGroup answers REBALANCE_IN_PROGRESS, the members rejoin). The latency is then "
            "measured from the last rejoin sent."
        )
    if res.commits:
        out.append(
            "OffsetCommit: the broker handles one request at a time per connection, and a commit is answered only once the batch it "
            "rides in has been appended (after at most the linger), so N connections can get at most about N / linger commits/s "
            "whatever the pipelining depth (64 connections: ≈12,800/s at 5 ms, ≈64,000/s at 1 ms). Below that ceiling the broker's CPU per "
            "request decides: " + "; ".join(
                f"linger {linger} ms, {t.label}, {t.connections} × {t.depth}: {t.rps:,.0f}/s at {t.broker_us_per_req:.0f} µs, {bottleneck(t)}"
                for linger, runs in sorted(res.commits.items(), reverse=True) for t in runs
            ) + "."
        )
    if res.heartbeat:
        hb = res.heartbeat
        text = f"Heartbeat: {bottleneck(hb)}."
        if res.floor:
            fl = res.floor
            text += (
                f" For reference, the same load against `bench.group_floor` (a uvloop server that answers every frame with a canned "
                f"HeartbeatResponse, one write per answer, nothing decoded) costs {fl.broker_us_per_req:.1f} µs of server CPU per request "
                f"({fl.broker_sys_s / fl.broker_cpu_s if fl.broker_cpu_s else 0:.0%} in the kernel) and runs at {fl.rps:,.0f}/s: the event loop and the "
                f"socket calls are not what costs the broker {hb.broker_us_per_req:.0f} µs; about {hb.broker_us_per_req - fl.broker_us_per_req:.0f} µs "
                "per request are its own Python work (request decoding, the per-connection task hand-off, the handler, building and encoding "
                "the response)."
            )
        out.append(text)
    if res.load:
        ld = res.load
        w = ld.write
        out.append(
            f"Offsets load: {w.groups:,} simple groups × {w.partitions} partitions of one topic = {w.records:,} distinct keys "
            f"(no compaction can collapse them), written as {w.groups:,} OffsetCommit requests of {w.partitions} partitions "
            f"({w.records / w.seconds:,.0f} records/s, broker CPU {w.broker_cpu_s / w.records * 1e6:.1f} µs per record). After SIGTERM "
            f"(stop took {ld.stop_s:.1f} s) the broker was restarted on the same data directory: READY after {ld.ready_s * 1000:,.0f} ms, "
            f"`coordinator loaded` after {ld.loaded_s * 1000:,.0f} ms from process start; the broker's own load_ms was {ld.load_ms:,.0f} ms "
            f"for {ld.records:,} records. OffsetFetch of 3 sample groups before the restart: {'; '.join(ld.check_before) or 'all offsets correct'}; "
            f"after: {'; '.join(ld.check_after) or 'all offsets correct'}."
        )
    for name, problems in res.log_problems.items():
        if problems and not name.startswith("kip848-"):  # those are in the KIP-848 section
            top = "; ".join(f"`{k}` ×{v}" for k, v in problems.most_common(6))
            out.append(f"Broker log `{name}` had warnings/errors or non-JSON lines: {top}.")
    if not any(v for k, v in res.log_problems.items() if not k.startswith("kip848-")):
        out.append("No broker logged a warning, an error or a non-JSON line (a traceback).")
    return out


def render(res: Results) -> str:
    p = res.plan
    m = res.machine
    lines = [
        SECTION,
        "",
        "Generated by `python -m bench.groups`" + (" --quick" if res.quick else "") + "; rerun it to refresh this section.",
        "",
        f"- **Date:** {res.started:%Y-%m-%d %H:%M} UTC (run took {res.elapsed_s:.0f} s"
        + (f", of which {res.k848_elapsed_s:.0f} s for the KIP-848 comparison in the next section)" if res.k848 else ")"),
        f"- **Machine:** {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory')} RAM, {m.get('kernel')}; {m.get('python')}, uvloop {m.get('uvloop')}",
        "",
        "### Method",
        "",
        "A protocol-level load generator (`bench/groups.py`, `bench/group_scenarios.py`, `bench/group_client.py`) speaks the Kafka protocol "
        "itself: requests are encoded with kio through `protocol.codec`, once per distinct request where possible, and then only the "
        "correlation id and one integer field (generation, offset) are patched per send; answers are matched in order on each connection, "
        "and a success answer is recognised by comparing its bytes with the first (kio-decoded) success answer to the same request. One "
        "asyncio (uvloop) process holds every simulated member, each on its own TCP connection (a parked JoinGroup or SyncGroup blocks its "
        "connection). Brokers run as `python -m broker serve --log-format json` on fresh data directories on loopback, default flags unless "
        "stated. Broker CPU is utime+stime from `/proc/<pid>/stat` (10 ms ticks; figures per rebalance are averaged over the runs), client CPU "
        "is this process's rusage.",
        "",
        f"- **Rebalances.** For each size, {', '.join(f'{n} members × {r} runs' for n, r in p.sizes_reps)}: a new group is formed — every member "
        "sends JoinGroup v9 with no member id and gets MEMBER_ID_REQUIRED (KIP-394), then all rejoin at once with that id (protocol type "
        "`consumer`, one protocol `range` with a ConsumerProtocolSubscription v1 for one topic, session timeout 30 s, rebalance timeout 60 s); "
        f"whoever is leader assigns {gs.ASSIGNED_PARTITIONS} partitions with a range assignment (precomputed, so the assignor's cost is not "
        "measured) in SyncGroup v5 and the others send an empty SyncGroup as soon as their JoinGroup is answered; members whose SyncGroup "
        "gets REBALANCE_IN_PROGRESS rejoin. Then the Stable group is rebalanced: the leader rejoins, a follower heartbeats until it sees "
        "REBALANCE_IN_PROGRESS, and then every follower rejoins at once. Latencies run from the last JoinGroup sent to the last JoinGroup "
        "answer of the final generation, and to the last SyncGroup answer. Broker CPU covers the whole round. Groups then leave with one "
        "batched LeaveGroup v5, except the last 1000-member group.",
        f"- **Heartbeat.** Every member of that Stable 1000-member group sends Heartbeat v4 on its own connection, {p.hb_depth} in flight each, "
        f"for {p.seconds:g} s after a {p.warmup:g} s warm-up.",
        f"- **OffsetCommit.** On a new broker per linger ({', '.join(f'{x} ms' for x in p.lingers)} via `--group-coordinator-append-linger-ms`), "
        f"topic `{COMMIT_TOPIC}` with {COMMIT_TOPIC_PARTITIONS} partitions; OffsetCommit v9 of one partition per request, generation -1 and no "
        f"member id (\"simple\" groups), the offset increasing with every request. Either {p.commit_groups} groups (spread over all 50 shards; "
        "each connection cycles over its share) or one group for all connections; N connections each keeping D requests in flight, "
        f"{p.seconds:g} s measured after {p.warmup:g} s of warm-up.",
        f"- **Offsets load.** {p.load_groups:,} simple groups each commit all {p.load_partitions} partitions of `{LOAD_TOPIC}` in one OffsetCommit "
        f"v9 (16 connections × 4 in flight) = {p.load_groups * p.load_partitions:,} offset records with distinct keys; the broker is stopped "
        "with SIGTERM and started again on the same data directory; the time is read from its `coordinator loaded` event (`load_ms`, "
        "`records`) and, from outside, as process start → that event in its log.",
        "",
        "### Targets",
        "",
        md_table(["Target", "Measured", "Status"], targets(res)),
        "",
        "### Rebalances",
        "",
        md_table(REB_HEAD, rebalance_rows(res)),
        "",
        "### Throughput",
        "",
        md_table(["Linger", *TP_HEAD],
                 [tp_row(t, f"{linger} ms") for linger, runs in sorted(res.commits.items(), reverse=True) for t in runs]
                 + ([tp_row(res.heartbeat, "5 ms")] if res.heartbeat else [])
                 + ([tp_row(res.floor, "–")] if res.floor else [])),
        "",
    ]
    if res.load:
        ld = res.load
        w = ld.write
        lines += [
            "### Offsets load",
            "",
            md_table(
                ["Figure", "Value"],
                [
                    ["Offset records written", f"{w.records:,} ({w.groups:,} groups × {w.partitions} partitions), errors: {_errs(w.errors)}"],
                    ["Write rate (100-partition commits)", f"{w.records / w.seconds:,.0f} records/s, {w.groups / w.seconds:,.0f} requests/s; broker CPU {w.broker_cpu_s / w.records * 1e6:.1f} µs per record ({w.broker_cpu_s / w.seconds:.0%} of a core), client {w.client_cpu_s / w.seconds:.0%}, other processes {w.other_cpu_s / w.seconds:.0%}"],
                    ["SIGTERM → exit", f"{ld.stop_s * 1000:,.0f} ms"],
                    ["Process start → READY", f"{ld.ready_s * 1000:,.0f} ms"],
                    ["Process start → `coordinator loaded`", f"{ld.loaded_s * 1000:,.0f} ms"],
                    ["Broker's `load_ms` / `records`", f"{ld.load_ms:,.0f} ms / {ld.records:,}"],
                    ["Records replayed per second", f"{ld.records / (ld.load_ms / 1000) if ld.load_ms else 0:,.0f} (wall, load_ms); "
                     f"{ld.records / ld.replay_cpu_s if ld.replay_cpu_s else 0:,.0f} per second of broker CPU ({ld.replay_cpu_s:.2f} s from READY to loaded, {ld.replay_cpu_s / ld.records * 1e6 if ld.records else 0:.1f} µs per record)"],
                ],
            ),
            "",
        ]
    lines += ["### Notes", ""] + [f"- {n}" for n in notes(res)] + [""]
    return "\n".join(lines)


def write_doc(section: str, path: Path = DOC) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def print_summary(res: Results) -> None:
    def show(head, rows):
        widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
        for row in [head, *rows]:
            print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)))
        print()

    print()
    show(["Target", "Measured", "Status"], targets(res))
    show(REB_HEAD[:8], [r[:8] for r in rebalance_rows(res)])
    show(["Linger", *TP_HEAD[:8]], [tp_row(t, f"{lg} ms")[:9] for lg, runs in sorted(res.commits.items(), reverse=True) for t in runs]
         + ([tp_row(res.heartbeat, "5 ms")[:9]] if res.heartbeat else [])
         + ([tp_row(res.floor, "–")[:9]] if res.floor else []))
    for n in notes(res):
        print("-", n)


def show_profiles(directory: Path, top: int) -> None:
    import pstats

    for prof in sorted(directory.glob("*.prof")):
        print(f"\n=== {prof.name}: top {top} by own time ===")
        pstats.Stats(str(prof)).sort_stats("tottime").print_stats(top)
        print(f"=== {prof.name}: project code by cumulative time ===")
        pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(f"{ROOT}/(broker|protocol|storage)/", top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.groups")
    ap.add_argument("--quick", action="store_true", help="fewer runs, shorter windows, 200k offset records")
    ap.add_argument("--seconds", type=float, help="length of each throughput window")
    ap.add_argument("--no-docs", action="store_true", help="print only, leave docs/benchmarks.md alone")
    ap.add_argument("--profile", type=Path, help="run brokers under cProfile, .prof files into this directory")
    ap.add_argument("--top", type=int, default=25, help="with --profile: functions to list per broker")
    ap.add_argument("--only", choices=["rebalance", "commit", "load", "kip848"], action="append", help="run only these phases (repeatable)")
    ap.add_argument("--kip848", action="store_true", help="run only the KIP-848 vs classic join comparison (same as --only kip848)")
    ap.add_argument("--kip848-sizes", type=int, nargs="+", help="group sizes for the kip848 phase (default 100 1000 3000)")
    ap.add_argument("--kip848-interval-ms", type=int, help="heartbeat interval of every protocol in the kip848 phase (default 200, 1000, 5000 ms for 100, 1000, 3000 members)")
    ap.add_argument("--kip848-protocols", nargs="+", choices=list(ks.PROTOCOLS), help="protocols for the kip848 phase (default all three)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (data and broker logs)")
    args = ap.parse_args(argv)
    plan = make_plan(args)
    phases = args.only or (["kip848"] if args.kip848 else ["rebalance", "commit", "load", "kip848"])
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-groups-"))
    res = Results(started, machine(), plan, args.quick)
    brokers = Brokers(tmp, args.profile)
    try:
        for name, fn in (("rebalance", phase_rebalance), ("commit", phase_commits), ("load", phase_load), ("kip848", phase_kip848)):
            if name in phases:
                res.loadavg.append(loadavg())
                say(f"{name} (load average {res.loadavg[-1]})")
                fn(brokers, plan, res)
        res.loadavg.append(loadavg())
    finally:
        res.log_problems = {name: gs.problems_in_log(text) for name, text in brokers.logs.items()}
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    res.elapsed_s = time.perf_counter() - t0
    if {"rebalance", "commit", "load"} & set(phases):
        print_summary(res)
    if res.k848:
        kr.print_summary(res)
    if args.profile:
        show_profiles(args.profile, args.top)
    if not args.no_docs and not args.profile:
        if {"rebalance", "commit", "load"} <= set(phases):
            write_doc(render(res))
            say(f"wrote the '{SECTION}' section of {DOC}")
        if res.k848 and args.kip848_sizes is None and args.kip848_protocols is None:
            kr.write_section(kr.render(res), DOC, SECTION)
            say(f"wrote the '{kr.SECTION}' section of {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
