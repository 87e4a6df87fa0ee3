"""``make bench-compare``: the same workloads against kafkalite and Apache Kafka, in one run.

    python -m bench.compare [--quick] [--no-docs] [--skip-3000] [--kafka-heap 512m]

Both brokers run side by side on loopback for the whole run (kafkalite as
``python -m broker serve --fsync interval``, Apache Kafka 4.1.0 as one KRaft
node from ``tests.reference_kafka``) and every workload is run against one
and then the other, so that both see the machine in about the same state:

1. process spawn -> first ApiVersions answered (a fresh data directory each time);
2. idle RSS (and idle CPU) a few seconds after start;
3. produce and consume MB/s with confluent-kafka, 1 KB and 100 B records (``bench.workload``);
4. OffsetCommit and Heartbeat request throughput and broker CPU per request
   (``bench.group_scenarios``, the kio-based swarm of ``bench.groups``);
5. classic rebalance latency with 10, 100 and 1000 members (``bench.group_scenarios``);
6. KIP-848: one member joining a group of 1000 and 3000 members, join latency
   and revocations (``bench.kip848_scenarios``).

It writes the ``## kafkalite vs Apache Kafka`` section at the end of
``docs/benchmarks.md`` and bar charts ``docs/img/compare-*.png``
(``bench.compare_report``). It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections import Counter
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker.coordinator.placement import partition_for
from protocol.errors import ErrorCode

from . import group_scenarios as gs
from . import workload
from .procstat import cpu_seconds, machine, peak_rss_mb, rss_mb
from .spawn import Broker

KAFKALITE, KAFKA = "kafkalite", "Kafka"
K848_INTERVAL_MS = 500
SIZES = (1000, 100)
COMMIT_TOPIC, COMMIT_PARTITIONS = "bench-commits", 16
FIND_COORDINATOR, OFFSET_FETCH = 10, 9


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def perf() -> float:
    return time.perf_counter()


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def run_async(coro):
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover
        return asyncio.run(coro)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# =========================================================================== start-up: spawn -> ApiVersions
def poll_api_versions(port: int, t0: float, alive, deadline: float) -> float:
    """Connect and send ApiVersions v3 (kio, ``tests.raw.RawClient``) until one is answered; seconds since ``t0``."""
    from tests.raw import RawClient

    while True:
        if not alive():
            raise RuntimeError("the broker exited before it answered ApiVersions")
        if perf() > deadline:
            raise TimeoutError(f"no ApiVersions answer on port {port}")
        try:
            c = RawClient(f"127.0.0.1:{port}")
        except OSError:
            time.sleep(0.002)
            continue
        try:
            c.sock.settimeout(max(deadline - perf(), 1.0))
            r = c.request(18, 3, {"client_software_name": "kafkalite-bench", "client_software_version": "1"})
            if r.error_code == ErrorCode.none:
                return perf() - t0
        except (OSError, AssertionError, ValueError):
            pass
        finally:
            c.close()
        time.sleep(0.002)


@dataclass
class Spawned:
    """A running broker of either kind, as the workloads see it."""

    kind: str
    host: str
    port: int
    pid: int
    api_versions_s: float  # spawn -> first ApiVersions answered
    ready_s: float  # spawn -> the broker's own readiness signal (kafkalite READY line; Kafka: registered in Metadata)
    format_s: float = 0.0  # Kafka only: kafka-storage format, a separate JVM run before the broker starts
    handle: object = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def logs(self) -> str:
        return self.handle.logs()

    def stop(self) -> None:
        if isinstance(self.handle, Broker):
            self.handle.stop(timeout=120)
        else:
            self.handle.stop()


def start_kafkalite(data: Path, *extra: str) -> Spawned:
    """``bench.spawn.Broker`` on a port chosen here, with an ApiVersions poller running from just before exec."""
    port = free_port()
    b = Broker(data, "--port", str(port), "--fsync", "interval", "--log-format", "json", *extra,
               log_path=data.parent / f"{data.name}.log")
    box: dict = {}

    def poll() -> None:
        try:
            box["s"] = poll_api_versions(port, t0, lambda: b.proc is None or b.proc.poll() is None, t0 + 60)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            box["e"] = e

    t0 = perf()
    th = threading.Thread(target=poll, daemon=True)
    th.start()
    b.start(timeout=60)
    th.join(60)
    if "e" in box:
        b.stop()
        raise box["e"]
    return Spawned(KAFKALITE, "127.0.0.1", b.port, b.pid, box["s"], b.ready_s, handle=b)


def _timed_kafka_class():
    """``tests.reference_kafka.ReferenceKafka`` that also notes when it spawned the JVM and when ApiVersions first answered."""
    from tests.reference_kafka import ReferenceKafka

    class TimedKafka(ReferenceKafka):
        spawn_t = 0.0
        format_s = 0.0
        api_versions_s = 0.0
        ready_s = 0.0

        def _format(self, props):
            t = perf()
            super()._format(props)
            self.format_s = perf() - t
            self.spawn_t = perf()  # start() spawns the broker JVM right after formatting

        def _wait_ready(self, deadline):
            self.api_versions_s = poll_api_versions(
                self.port, self.spawn_t, lambda: self.proc is not None and self.proc.poll() is None,
                perf() + max(deadline - time.monotonic(), 1.0))
            super()._wait_ready(deadline)
            self.ready_s = perf() - self.spawn_t

    return TimedKafka


def start_kafka(data: Path, heap: str, **config) -> Spawned:
    k = _timed_kafka_class()(data, config=config, heap=heap)
    k.start(timeout=180)
    return Spawned(KAFKA, "127.0.0.1", k.port, k.proc.pid, k.api_versions_s, k.ready_s, k.format_s, handle=k)


# =========================================================================== readiness of the group coordinator
def shard_groups(n: int = 50) -> list[str]:
    """One group id per ``__consumer_offsets`` partition (Kafka's placement, which kafkalite copies)."""
    out: dict[int, str] = {}
    i = 0
    while len(out) < n:
        g = f"probe-{i}"
        out.setdefault(partition_for(g, n), g)
        i += 1
    return [out[p] for p in range(n)]


async def coordinator_ready(host: str, port: int, timeout: float = 120.0) -> float:
    """FindCoordinator (creates Kafka's ``__consumer_offsets``) then OffsetFetch on every shard until all answer cleanly."""
    conn = (await gs.connect(host, port, 1))[0]
    groups = shard_groups()
    t0 = perf()
    try:
        while True:
            r = await conn.request(FIND_COORDINATOR, 4, {"key": "", "key_type": 0, "coordinator_keys": groups})
            if all(c.error_code == ErrorCode.none for c in r.coordinators):
                break
            if perf() - t0 > timeout:
                raise TimeoutError(f"FindCoordinator: {sorted({c.error_code.name for c in r.coordinators})}")
            await asyncio.sleep(0.1)
        while True:
            rs = await asyncio.gather(*(conn.request(OFFSET_FETCH, 7, {"group_id": g, "topics": None, "require_stable": False}) for g in groups))
            bad = {r.error_code.name for r in rs if r.error_code != ErrorCode.none}
            if not bad:
                return perf() - t0
            if perf() - t0 > timeout:
                raise TimeoutError(f"OffsetFetch: {sorted(bad)}")
            await asyncio.sleep(0.1)
    finally:
        conn.close()


# =========================================================================== results
@dataclass
class Side:
    """Everything measured on one broker."""

    startup_api_ms: list[float] = field(default_factory=list)
    startup_ready_ms: list[float] = field(default_factory=list)
    format_ms: list[float] = field(default_factory=list)
    idle_rss_mb: float = 0.0
    idle_cpu_pct: float = 0.0
    rss_end_mb: float = 0.0
    peak_rss_mb: float = 0.0
    phases: list = field(default_factory=list)  # workload.Phase
    commits: list = field(default_factory=list)  # gs.Throughput
    heartbeat: gs.Throughput | None = None
    rebalances: list = field(default_factory=list)  # gs.RebalanceResult
    k848: list = field(default_factory=list)  # ks.ProtocolResult
    k848_failed: dict = field(default_factory=dict)  # size -> error text
    k848_log: dict = field(default_factory=dict)  # size -> what kafkalite's log says about a failed group
    failures: list = field(default_factory=list)  # (workload, error text)
    log_problems: Counter = field(default_factory=Counter)
    coordinator_ready_ms: float = 0.0


@dataclass
class Results:
    started: dt.datetime
    machine: dict
    args: argparse.Namespace
    sides: dict = field(default_factory=lambda: {KAFKALITE: Side(), KAFKA: Side()})
    loadavg: list = field(default_factory=list)  # (phase, "1 5 15")
    elapsed_s: float = 0.0
    kafka_heap: str = "512m"
    versions: dict = field(default_factory=dict)


# =========================================================================== workloads
def measure_startup(tmp: Path, res: Results) -> None:
    a = res.args
    for i in range(max(a.startup_kafkalite, a.startup_kafka)):
        if i < a.startup_kafkalite:
            s = start_kafkalite(tmp / f"startup-kl-{i}")
            res.sides[KAFKALITE].startup_api_ms.append(s.api_versions_s * 1000)
            res.sides[KAFKALITE].startup_ready_ms.append(s.ready_s * 1000)
            s.stop()
            say(f"  kafkalite start {i + 1}: ApiVersions after {s.api_versions_s * 1000:,.0f} ms (READY line {s.ready_s * 1000:,.0f} ms)")
        if i < a.startup_kafka:
            s = start_kafka(tmp / f"startup-kafka-{i}", res.kafka_heap)
            record_kafka_start(res, s, f"start {i + 1}")
            s.stop()
    for d in tmp.glob("startup-*"):
        shutil.rmtree(d, ignore_errors=True) if d.is_dir() else d.unlink()


def record_kafka_start(res: Results, s: Spawned, label: str) -> None:
    side = res.sides[KAFKA]
    side.startup_api_ms.append(s.api_versions_s * 1000)
    side.startup_ready_ms.append(s.ready_s * 1000)
    side.format_ms.append(s.format_s * 1000)
    say(f"  Kafka {label}: ApiVersions after {s.api_versions_s * 1000:,.0f} ms (registered {s.ready_s * 1000:,.0f} ms; "
        f"storage format before it {s.format_s * 1000:,.0f} ms)")


def measure_idle(brokers: dict[str, Spawned], res: Results, seconds: float = 3.0) -> None:
    c0 = {k: cpu_seconds(b.pid) for k, b in brokers.items()}
    t0 = perf()
    time.sleep(seconds)
    wall = perf() - t0
    for k, b in brokers.items():
        side = res.sides[k]
        side.idle_rss_mb = rss_mb(b.pid)
        side.idle_cpu_pct = (cpu_seconds(b.pid) - c0[k]) / wall * 100
        say(f"  {k}: idle RSS {side.idle_rss_mb:.1f} MB, idle CPU {side.idle_cpu_pct:.1f}% of a core")


def measure_throughput(brokers: dict[str, Spawned], res: Results) -> None:
    a = res.args
    counts = {1000: int(a.mb_1k * 1e6 / 1000), 100: int(a.mb_100 * 1e6 / 100)}
    for k, b in brokers.items():  # warm-up, not recorded: Kafka's JIT, both brokers' first allocations
        try:
            for size in SIZES:
                topic, n = f"cmp-warmup-{size}", int(a.mb_warmup * 1e6 / size)
                workload.create_topic(b.bootstrap, topic)
                workload.produce(b.bootstrap, b.pid, topic, size, n)
                workload.consume(b.bootstrap, b.pid, topic, size, n)
                workload.delete_topic(b.bootstrap, topic)
        except Exception as e:  # noqa: BLE001
            res.sides[k].failures.append(("produce/consume warm-up", f"{type(e).__name__}: {e}"))
            say(f"  {k}: warm-up failed: {e}")
    for size in SIZES:
        for rep in range(a.repeats):
            for k, b in brokers.items():
                topic = f"cmp-{size}b-{rep}"
                try:
                    workload.create_topic(b.bootstrap, topic)
                    for fn in (workload.produce, workload.consume):
                        os.sync()  # write-back of earlier phases must not overlap this one
                        p = fn(b.bootstrap, b.pid, topic, size, counts[size])
                        res.sides[k].phases.append(p)
                        say(f"  {k:9s} {p.name:7s} {size:4d} B run {rep + 1}: {p.mb_per_s:7.1f} MB/s, broker {p.broker_cpu_ms_per_mb:.1f} ms CPU/MB "
                            f"({p.broker_util:.0%} of a core), client {p.client_util:.0%}")
                    workload.delete_topic(b.bootstrap, topic)
                except Exception as e:  # noqa: BLE001 - recorded and reported
                    res.sides[k].failures.append((f"produce/consume {size} B", f"{type(e).__name__}: {e}"))
                    say(f"  {k}: produce/consume {size} B failed: {e}")


def measure_commits(brokers: dict[str, Spawned], res: Results) -> None:
    a = res.args

    async def go(b: Spawned, run: int):
        if run == 0:
            admin = (await gs.connect(b.host, b.port, 1))[0]
            await gs.create_topic(admin, COMMIT_TOPIC, COMMIT_PARTITIONS)
            admin.close()
            await asyncio.sleep(1.0)  # Kafka creates the partitions' logs asynchronously
        return await gs.commits(b.host, b.port, b.pid, COMMIT_TOPIC, COMMIT_PARTITIONS, label=f"{a.commit_groups} groups",
                                groups=a.commit_groups, n_conns=a.commit_conns, depth=a.commit_depth, warmup=a.warmup,
                                seconds=a.seconds, run_id=f"cmp{run}")

    for run in range(a.commit_runs):
        for k, b in brokers.items():
            try:
                t = run_async(go(b, run))
            except Exception as e:  # noqa: BLE001
                res.sides[k].failures.append(("OffsetCommit", f"{type(e).__name__}: {e}"))
                say(f"  {k}: OffsetCommit failed: {e}")
                continue
            res.sides[k].commits.append(t)
            say(f"  {k:9s} OffsetCommit run {run + 1}: {t.rps:,.0f}/s, broker {t.broker_us_per_req:.1f} µs each ({t.broker_core:.0%} of a core), "
                f"client {t.client_core:.0%}, others {t.other_core:.0%}, errors {t.errors}")


def measure_rebalances(brokers: dict[str, Spawned], res: Results) -> None:
    a = res.args
    sizes_reps = [(10, a.reps_10), (100, a.reps_100), (1000, a.reps_1000)]

    async def go(b: Spawned):
        out, kept, conns = await gs.rebalances(b.host, b.port, b.pid, sizes_reps, keep_last=True, timeout=a.rebalance_timeout)
        hb = None
        try:
            if kept:
                hb = await gs.heartbeats(kept, b.pid, 4, a.warmup, a.seconds)
                admin = (await gs.connect(b.host, b.port, 1))[0]
                await gs.leave_all(admin, kept)
                admin.close()
        finally:
            for c in conns:
                c.close()
        return out, hb

    for k, b in brokers.items():
        try:
            out, hb = run_async(go(b))
        except Exception as e:  # noqa: BLE001
            res.sides[k].failures.append(("classic rebalances / Heartbeat", f"{type(e).__name__}: {e}"))
            say(f"  {k}: rebalances failed: {type(e).__name__}: {e}")
            continue
        side = res.sides[k]
        side.rebalances, side.heartbeat = out, hb
        for r in out:
            for kind, samples in (("new", r.new), ("stable", r.stable)):
                say(f"  {k:9s} {r.size:>5} members, {kind:>6} group: sync {gs.median([s.sync_ms for s in samples]):8.1f} ms median, "
                    f"generations {[s.generations for s in samples]}, errors {[s.errors for s in samples if s.errors]}")
        if hb:
            say(f"  {k:9s} Heartbeat: {hb.rps:,.0f}/s, broker {hb.broker_us_per_req:.1f} µs each ({hb.broker_core:.0%} of a core), errors {hb.errors}")


def measure_kip848(brokers: dict[str, Spawned], res: Results, t_start: float, fresh) -> None:
    """One size after the other; every size after the first on a fresh pair of brokers (``fresh()``), so that the members
    of the previous group (which stop without leaving) do not expire during the next measurement."""
    from . import kip848_scenarios as ks

    a = res.args
    for i, (size, reps) in enumerate(a.k848):
        if i:
            brokers = fresh()
        for k, b in brokers.items():
            res.loadavg.append((f"KIP-848 {size} members, {k}", loadavg()))

            async def go(b=b, size=size, reps=reps, k=k):
                admin = (await gs.connect(b.host, b.port, 1))[0]
                topic = f"cmp-k848-{size}"
                topic_id = await ks.create_topic(admin, topic, size)
                await asyncio.sleep(2.0 if b.kind == KAFKA else 0.2)  # Kafka creates the partitions' logs asynchronously
                conns = await gs.connect(b.host, b.port, size)
                try:
                    r = await ks.run_protocol("kip848", conns, admin, b.pid, size, reps, topic, topic_id, K848_INTERVAL_MS / 1000,
                                              a.k848_window, lambda m: say(f"{perf() - t_start:6.1f}s {k:9s} {m.strip()}"))
                    # a copy: closing the connections below makes in-flight heartbeats count "connection closed"
                    r.errors = Counter(r.errors)
                    return r
                finally:
                    for c in conns:
                        c.close()
                    admin.close()

            try:
                r = run_async(asyncio.wait_for(go(), a.k848_timeout))
            except Exception as e:  # noqa: BLE001
                text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                res.sides[k].k848_failed[size] = text
                res.sides[k].failures.append((f"KIP-848 {size} members", text))
                if k == KAFKALITE:
                    from .compare_report import k848_log_summary

                    res.sides[k].k848_log[size] = k848_log_summary(b.logs(), f"kip848-{size}")
                say(f"  {k}: KIP-848 with {size} members failed: {text}")
                continue
            res.sides[k].k848.append(r)


def load_results(path: Path) -> Results:
    """Unpickle a ``--save`` file (written by ``python -m bench.compare``, whose classes live in ``__main__``)."""
    import pickle

    class Loader(pickle.Unpickler):
        def find_class(self, module, name):
            return super().find_class("bench.compare" if module == "__main__" else module, name)

    with open(path, "rb") as f:
        return Loader(f).load()


def java_version() -> str:
    import subprocess

    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr.splitlines()
        return out[0].replace('"', "") if out else "Java"
    except (OSError, subprocess.SubprocessError):
        return "Java"


# =========================================================================== main
def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small volumes, few runs, no 3000-member group (a smoke test)")
    ap.add_argument("--no-docs", action="store_true", help="print only; leave docs/benchmarks.md and docs/img alone")
    ap.add_argument("--skip-3000", action="store_true", help="leave out the 3000-member KIP-848 group")
    ap.add_argument("--kafka-heap", default="512m", help="Kafka's -Xmx (default 512m, as tests.reference_kafka)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (data and broker logs)")
    ap.add_argument("--save", type=Path, help="also pickle the results into this file")
    ap.add_argument("--render", type=Path, help="only render a pickled run (from --save) into the doc and plots")
    a = ap.parse_args(argv)
    # volumes: smaller than `make bench` so that the whole comparison stays near 10 minutes on 2 cores
    a.startup_kafkalite, a.startup_kafka = (2, 1) if a.quick else (4, 2)
    a.mb_1k, a.mb_100, a.repeats = (20, 5, 1) if a.quick else (100, 30, 2)
    a.mb_warmup = 5 if a.quick else 20
    a.commit_groups, a.commit_conns, a.commit_depth, a.commit_runs = 1000, 64, 8, (1 if a.quick else 2)
    a.warmup, a.seconds = (0.5, 1.5) if a.quick else (1.0, 3.0)
    a.reps_10, a.reps_100, a.reps_1000 = (2, 1, 1) if a.quick else (5, 3, 2)
    a.rebalance_timeout = 120.0
    a.k848 = [(100, 1)] if a.quick else [(1000, 2)] + ([] if a.skip_3000 else [(3000, 1)])
    a.k848_window = 1.5 if a.quick else 2.0
    a.k848_timeout = 300.0
    return a


def main(argv: list[str] | None = None) -> int:
    from tests.reference_kafka import KAFKA_VERSION, available

    from . import compare_report as report
    from .groups import raise_fd_limit

    args = parse_args(argv)
    if args.render:
        res = load_results(args.render)
        report.print_summary(res)
        if not args.no_docs:
            report.write(res)
        return 0
    ok, why = available()
    if not ok:
        say(f"bench-compare needs the reference broker: {why}")
        return 1
    raise_fd_limit(16_384)  # 3000 connections here; both brokers inherit the limit
    res = Results(dt.datetime.now(dt.UTC), machine(), args, kafka_heap=args.kafka_heap)
    res.versions = {"kafka": KAFKA_VERSION, "java": java_version()}
    t_start = perf()
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-compare-"))
    brokers: dict[str, Spawned] = {}

    def phase(name: str) -> None:
        res.loadavg.append((name, loadavg()))
        say(f"{perf() - t_start:6.1f}s {name} (load average {res.loadavg[-1][1]})")

    try:
        phase("start-up")
        measure_startup(tmp, res)
        phase("main brokers")

        def start_pair(name: str) -> dict[str, Spawned]:
            for k in list(brokers):
                b = brokers.pop(k)
                if k in res.sides and not res.sides[k].rss_end_mb:
                    res.sides[k].rss_end_mb, res.sides[k].peak_rss_mb = rss_mb(b.pid), peak_rss_mb(b.pid)
                b.stop()
                res.sides[k].log_problems.update(report.log_problems(k, b.logs()))
            brokers[KAFKALITE] = start_kafkalite(tmp / f"kafkalite-{name}", "--group-consumer-heartbeat-interval-ms", str(K848_INTERVAL_MS))
            brokers[KAFKA] = start_kafka(tmp / f"kafka-{name}", args.kafka_heap, **{
                "group.consumer.heartbeat.interval.ms": K848_INTERVAL_MS,
                "group.consumer.min.heartbeat.interval.ms": K848_INTERVAL_MS,
            })
            for k in brokers:
                run_async(coordinator_ready(brokers[k].host, brokers[k].port))
            return dict(brokers)

        start_pair("main")
        s = res.sides[KAFKALITE]
        s.startup_api_ms.append(brokers[KAFKALITE].api_versions_s * 1000)
        s.startup_ready_ms.append(brokers[KAFKALITE].ready_s * 1000)
        record_kafka_start(res, brokers[KAFKA], "main broker")
        phase("idle")
        measure_idle(brokers, res)
        for k, b in brokers.items():
            res.sides[k].coordinator_ready_ms = run_async(coordinator_ready(b.host, b.port)) * 1000
        phase("produce/consume")
        measure_throughput(brokers, res)
        phase("OffsetCommit")
        measure_commits(brokers, res)
        phase("classic rebalances + Heartbeat")
        measure_rebalances(brokers, res)
        phase("KIP-848")
        measure_kip848(dict(brokers), res, t_start, lambda: (phase("KIP-848: a fresh pair of brokers"), start_pair("k848"))[1])
        phase("end")
        for k, b in brokers.items():
            if not res.sides[k].rss_end_mb:
                res.sides[k].rss_end_mb, res.sides[k].peak_rss_mb = rss_mb(b.pid), peak_rss_mb(b.pid)
    finally:
        for k, b in brokers.items():
            try:
                b.stop()
            except Exception as e:  # noqa: BLE001
                say(f"stopping {k}: {e}")
            try:
                res.sides[k].log_problems.update(report.log_problems(k, b.logs()))
            except Exception as e:  # noqa: BLE001
                say(f"reading the {k} log: {e}")
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    res.elapsed_s = perf() - t_start
    if args.save:
        import pickle

        args.save.write_bytes(pickle.dumps(res))
    report.print_summary(res)
    if not args.no_docs:
        report.write(res)
    say(f"bench-compare took {res.elapsed_s:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
