"""``make bench-compare``: the same workloads against kafkalite, Apache Kafka and kfake, in one run.

    python -m bench.compare [--quick] [--only PHASE,...] [--out FILE] [--no-docs] [--skip-3000] [--no-kfake]
                            [--k848-sizes N,...] [--kafka-heap 512m]

The brokers run side by side on loopback for the whole run (kafkalite as
``python -m broker serve --fsync interval``, Apache Kafka (4.4.0 unless ``tests.reference_kafka`` is told otherwise) as one KRaft
node from ``tests.reference_kafka``, and franz-go's kfake, an in-memory fake
Kafka in Go, as one broker from ``bench/kfake``, built here with ``go build``
into ``build/kfake/``; without ``go`` or when the build fails its column says
why) and every workload is run against one and then the next, so that all see
the machine in about the same state:

1. process spawn -> first ApiVersions answered (a fresh data directory each time);
2. idle RSS (and idle CPU) a few seconds after start;
3. produce and consume MB/s with confluent-kafka, 1 KB and 100 B records (``bench.workload``);
4. OffsetCommit and Heartbeat request throughput and broker CPU per request
   (``bench.group_scenarios``, the kio-based swarm of ``bench.groups``);
5. classic rebalance latency with 10, 100 and 1000 members (``bench.group_scenarios``);
6. KIP-848: one member joining a group of 1000 and 3000 members, join latency
   and revocations (``bench.kip848_scenarios``);
7. consume with 4 MiB and with 16 MiB fetches (``fetch.max.bytes`` and
   ``max.partition.fetch.bytes``), broker CPU per MB;
8. coordinator load: offset commits of distinct keys written, the broker
   restarted, and the time it takes to load them (kafkalite's ``coordinator
   loaded`` event, Kafka's per-partition "Finished loading" log lines, kfake's
   NewCluster with its data directory).

It writes the ``## kafkalite vs Apache Kafka`` section at the end of
``docs/benchmarks.md`` (or into ``--out``) and bar charts ``docs/img/compare-*.png``
(``bench.compare_report``), a summary table of every figure first. It measures;
it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shutil
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections import Counter
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker.coordinator.placement import partition_for
from protocol.errors import ErrorCode
from tests.raw import RawClient  # imported here, not in the poller, so that no start-up includes its import

from . import group_scenarios as gs
from . import workload
from .procstat import cpu_seconds, loadavg, machine, peak_rss_mb, rss_mb
from .spawn import ROOT, Broker

KAFKALITE, KAFKA, KFAKE = "kafkalite", "Kafka", "kfake"
KFAKE_SRC = ROOT / "bench" / "kfake"
KFAKE_BUILD = ROOT / "build" / "kfake"  # outside git (.gitignore: build/)
PHASES = ("startup", "idle", "throughput", "fetch", "commits", "txn", "rebalances", "k848", "load", "tls")
# TLS: bench.tls_cost's brokers (PLAINTEXT, SSL and SASL_SSL listeners), MB each way per round, rounds, connections per kind
TLS_MB, TLS_ROUNDS, TLS_CONNECTIONS = 50.0, 3, 100
FETCH_SIZES = (4 * 1024 * 1024, 16 * 1024 * 1024)
LOAD_TOPIC, LOAD_PARTITIONS = "bench-load", 100
KFAKE_COMPACT_BYTES = 1 << 40
K848_INTERVAL_MS = 500
SIZES = (1000, 100)
COMMIT_TOPIC, COMMIT_PARTITIONS = "bench-commits", 16
FIND_COORDINATOR, OFFSET_FETCH = 10, 9


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def perf() -> float:
    return time.perf_counter()


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


def start_kafkalite(data: Path, *extra: str, log_name: str = "", root: Path | None = None) -> Spawned:
    """``bench.spawn.Broker`` on a port chosen here, with an ApiVersions poller running from just before exec;
    ``root``: run the broker from that source tree rather than this one."""
    port = free_port()
    b = Broker(data, "--port", str(port), "--fsync", "interval", "--log-format", "json", *extra,
               log_path=data.parent / f"{log_name or data.name}.log", root=root or ROOT)
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


# =========================================================================== kfake
def kfake_version() -> str:
    """The kfake module version ``bench/kfake/go.mod`` pins."""
    try:
        m = re.search(r"github\.com/twmb/franz-go/pkg/kfake (\S+)", (KFAKE_SRC / "go.mod").read_text())
        return m.group(1) if m else "?"
    except OSError:
        return "?"


def build_kfake() -> tuple[Path | None, str]:
    """``go build`` bench/kfake into build/kfake/kfake-broker; (binary, "") or (None, why not)."""
    go = shutil.which("go")
    if go is None:
        return None, "`go` is not on PATH, so bench/kfake could not be built"
    KFAKE_BUILD.mkdir(parents=True, exist_ok=True)
    out = KFAKE_BUILD / "kfake-broker"
    try:
        p = subprocess.run([go, "build", "-o", str(out), "."], cwd=KFAKE_SRC, capture_output=True, text=True, timeout=1200)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"`go build` of bench/kfake failed: {e}"
    if p.returncode != 0 or not out.exists():
        tail = " ".join((p.stdout + p.stderr).strip().splitlines()[-3:])[:300]
        return None, f"`go build` of bench/kfake failed (exit {p.returncode}): {tail}"
    return out, ""


class KfakeProcess:
    """``build/kfake/kfake-broker`` as a child process: one kfake broker on 127.0.0.1, in memory unless ``persist``."""

    def __init__(self, binary: Path, data: Path, persist: bool = False, port: int | None = None) -> None:
        self.binary, self.data, self.persist = binary, Path(data), persist
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.ready_s = 0.0
        self.new_cluster_ms = float("nan")  # kfake.NewCluster, which with a data directory reloads the persisted state
        self.log_path = self.data.parent / f"{self.data.name}.kfake.log"

    def start(self, t0: float, timeout: float = 60.0) -> None:
        from tests.reference_kafka import _die_with_parent, own_session

        self.data.mkdir(parents=True, exist_ok=True)
        args = [str(self.binary), "-port", str(self.port), "-heartbeat-interval-ms", str(K848_INTERVAL_MS), "-partitions", "1"]
        if self.persist:
            # kfake rewrites groups.log ("compaction", keeping the newest entry per key) after every request once the file is over
            # state.log.compact.bytes (10 MiB by default); with only distinct keys it stays over, and writing the load phase's
            # commits turns quadratic (hours for 500k). Compaction is not what the load phase measures: put it out of reach.
            args += ["-data-dir", str(self.data / "state"), "-c", f"state.log.compact.bytes={KFAKE_COMPACT_BYTES}"]
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                                         start_new_session=own_session())
        box: dict = {}
        th = threading.Thread(target=lambda: box.setdefault("line", self.proc.stdout.readline().decode()), daemon=True)
        th.start()
        th.join(timeout)
        line = box.get("line", "")
        if not line.startswith("READY"):
            self.stop()
            raise RuntimeError(f"kfake did not print READY within {timeout:.0f} s: {line!r} {self.logs()[-500:]}")
        self.ready_s = perf() - t0
        m = re.search(r"new_cluster_ms=([\d.]+)", line)
        if m:
            self.new_cluster_ms = float(m.group(1))

    def stop(self, timeout: float = 120.0) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc = None

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def start_kfake(binary: Path, data: Path, persist: bool = False) -> Spawned:
    k = KfakeProcess(binary, data, persist)
    box: dict = {}

    def poll() -> None:
        try:
            box["s"] = poll_api_versions(k.port, t0, lambda: k.proc is None or k.proc.poll() is None, t0 + 60)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            box["e"] = e

    t0 = perf()
    th = threading.Thread(target=poll, daemon=True)
    th.start()
    k.start(t0)
    th.join(60)
    if "e" in box:
        k.stop()
        raise box["e"]
    return Spawned(KFAKE, "127.0.0.1", k.port, k.proc.pid, box["s"], k.ready_s, handle=k)


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
            # kfake answers GROUP_ID_NOT_FOUND for a group it does not know (Kafka and kafkalite: no error, no offsets)
            bad = {r.error_code.name for r in rs if r.error_code not in (ErrorCode.none, ErrorCode.group_id_not_found)}
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
    fetch: list = field(default_factory=list)  # workload.Phase of the 4 MiB / 16 MiB fetch consumes (variant "fetch N MiB")
    load: dict = field(default_factory=dict)  # coordinator load: records, ms, records_per_s, how, problems
    skipped: dict = field(default_factory=dict)  # workload -> why this broker does not run it
    txn: list = field(default_factory=list)  # bench.txn.run_once results
    txn_bulk: list = field(default_factory=list)  # the same with large transactions of 1 KB records
    tls: dict = field(default_factory=dict)  # bench.tls_cost.measure_broker: CPU per MB over PLAINTEXT and SSL, connection times


@dataclass
class Phase:
    """One phase of the run: its name and /proc/loadavg when it began and ended."""

    name: str
    start: str
    end: str = ""
    seconds: float = 0.0


@dataclass
class Results:
    started: dt.datetime
    machine: dict
    args: argparse.Namespace
    sides: dict = field(default_factory=lambda: {KAFKALITE: Side(), KAFKA: Side()})
    loadavg: list = field(default_factory=list)  # (phase, "1 5 15")
    phases: dict = field(default_factory=dict)  # name -> Phase (load average at its start and end)
    kfake: str = ""  # why kfake is not in this run ("" when it is)
    elapsed_s: float = 0.0
    kafka_heap: str = "512m"
    versions: dict = field(default_factory=dict)


# =========================================================================== workloads
def measure_startup(tmp: Path, res: Results, kfake_bin: Path | None = None) -> None:
    a = res.args
    for i in range(max(a.startup_kafkalite, a.startup_kafka)):
        if kfake_bin is not None and i < a.startup_kafkalite:
            try:
                s = start_kfake(kfake_bin, tmp / f"startup-kfake-{i}")
            except Exception as e:  # noqa: BLE001
                res.sides[KFAKE].failures.append(("start-up", f"{type(e).__name__}: {e}"))
            else:
                res.sides[KFAKE].startup_api_ms.append(s.api_versions_s * 1000)
                res.sides[KFAKE].startup_ready_ms.append(s.ready_s * 1000)
                s.stop()
                say(f"  kfake start {i + 1}: ApiVersions after {s.api_versions_s * 1000:,.0f} ms (READY line {s.ready_s * 1000:,.0f} ms)")
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


def measure_fetch(brokers: dict[str, Spawned], res: Results) -> None:
    """Consume one topic of 1 KB records with 4 MiB and with 16 MiB fetches (``fetch.max.bytes`` = ``max.partition.fetch.bytes``)."""
    a = res.args
    n = int(a.mb_fetch * 1e6 / 1000)
    for k, b in brokers.items():
        topic = "cmp-fetch"
        try:
            workload.create_topic(b.bootstrap, topic)
            workload.produce(b.bootstrap, b.pid, topic, 1000, n)
            workload.consume(b.bootstrap, b.pid, topic, 1000, n)  # not recorded: the first read of the topic
            for rep in range(a.repeats):
                for size in FETCH_SIZES:
                    os.sync()
                    label = f"fetch {size >> 20} MiB"
                    p = workload.consume(b.bootstrap, b.pid, topic, 1000, n,
                                         overrides={"fetch.max.bytes": size, "max.partition.fetch.bytes": size}, variant=label)
                    res.sides[k].fetch.append(p)
                    say(f"  {k:9s} consume 1 KB, {label:12s} run {rep + 1}: {p.mb_per_s:7.1f} MB/s, broker {p.broker_cpu_ms_per_mb:.2f} ms CPU/MB "
                        f"({p.broker_util:.0%} of a core)")
            workload.delete_topic(b.bootstrap, topic)
        except Exception as e:  # noqa: BLE001
            res.sides[k].failures.append(("consume with 4 / 16 MiB fetches", f"{type(e).__name__}: {e}"))
            say(f"  {k}: fetch-size consume failed: {e}")


_KAFKA_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")
_KAFKA_SCHEDULED = re.compile(r"Scheduling loading of metadata from __consumer_offsets-(\d+) with epoch")
_KAFKA_LOADED = re.compile(r"Finished loading of metadata from __consumer_offsets-(\d+) with epoch \d+ in (\d+)ms "
                           r"where (\d+)ms was spent in the scheduler\. Loaded (\d+) records which total to (\d+) bytes")


def kafka_load_lines(text: str) -> dict:
    """Kafka's CoordinatorRuntime lines for ``__consumer_offsets``: per partition the load time it logs, records and the
    span from the first "Scheduling loading" to the last "Finished loading" (log timestamps, millisecond resolution)."""
    def ts(line: str) -> float | None:
        m = _KAFKA_TS.match(line)
        return dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None

    scheduled, finished, parts = [], [], {}
    for line in text.splitlines():
        if "__consumer_offsets" not in line:
            continue
        if _KAFKA_SCHEDULED.search(line):
            t = ts(line)
            if t is not None:
                scheduled.append(t)
        m = _KAFKA_LOADED.search(line)
        if m:
            parts[int(m.group(1))] = (int(m.group(2)), int(m.group(4)), int(m.group(3)))
            t = ts(line)
            if t is not None:
                finished.append(t)
    span = (max(finished) - min(scheduled)) * 1000 if finished and scheduled else float("nan")
    return {"partitions": len(parts), "records": sum(r for _, r, _ in parts.values()), "sum_ms": sum(ms for ms, _, _ in parts.values()),
            "sum_sched_ms": sum(s for _, _, s in parts.values()), "max_ms": max((ms for ms, _, _ in parts.values()), default=0), "span_ms": span}


def measure_load(tmp: Path, res: Results, kfake_bin: Path | None) -> None:
    """Coordinator load of distinct keys: ``load_groups`` simple groups each commit all partitions of a topic (one record per
    group and partition), the broker stops and starts again, and the load of those records is timed (one broker at a time)."""
    from . import compare_report as report
    from .groups import wait_loaded

    a = res.args
    sample = [f"ld-{i:06d}" for i in (0, a.load_groups // 2, a.load_groups - 1)]

    async def write(b: Spawned):
        admin = (await gs.connect(b.host, b.port, 1))[0]
        await gs.create_topic(admin, LOAD_TOPIC, LOAD_PARTITIONS)
        admin.close()
        await asyncio.sleep(2.0 if b.kind == KAFKA else 0.2)  # Kafka creates the partitions' logs asynchronously
        return await gs.write_offsets(b.host, b.port, b.pid, LOAD_TOPIC, LOAD_PARTITIONS, a.load_groups)

    def check(b: Spawned) -> list[str]:
        return run_async(gs.check_offsets(b.host, b.port, LOAD_TOPIC, LOAD_PARTITIONS, sample))

    kinds = [KAFKALITE, KAFKA] + ([KFAKE] if kfake_bin is not None else [])
    for k in kinds:
        side = res.sides[k]
        b = None
        try:
            if k == KAFKALITE:
                b = start_kafkalite(tmp / "load-kl")
                wait_loaded(b.handle)
            elif k == KAFKA:
                b = start_kafka(tmp / "load-kafka", res.kafka_heap)
                run_async(coordinator_ready(b.host, b.port))
            else:
                b = start_kfake(kfake_bin, tmp / "load-kfake", persist=True)
            w = run_async(write(b))
            say(f"  {k:9s} wrote {w.records:,} offset records in {w.seconds:.1f} s ({w.records / w.seconds:,.0f}/s), errors {w.errors}")
            if k == KAFKALITE:
                b.stop()
                b = start_kafkalite(tmp / "load-kl", log_name="load-kl-replay")
                ev = wait_loaded(b.handle)
                ms, records = float(ev.get("load_ms", "nan")), int(ev.get("records", 0))
                side.load = {"records": records, "ms": ms, "how": "the broker's `coordinator loaded` event (`load_ms`)"}
            elif k == KAFKA:
                kafka = b.handle
                kafka.stop()
                before = len(kafka.log_file.read_text(errors="replace"))
                kafka.start(timeout=180)
                b = Spawned(KAFKA, "127.0.0.1", kafka.port, kafka.proc.pid, kafka.api_versions_s, kafka.ready_s, handle=kafka)
                deadline = perf() + 180
                while True:
                    got = kafka_load_lines(kafka.log_file.read_text(errors="replace")[before:])
                    if got["partitions"] >= 50 or perf() > deadline:
                        break
                    time.sleep(0.2)
                side.load = {"records": got["records"], "ms": got["span_ms"], "sum_ms": got["sum_ms"], "max_ms": got["max_ms"],
                             "sum_sched_ms": got["sum_sched_ms"],
                             "partitions": got["partitions"],
                             "how": "the span from the first `Scheduling loading` to the last `Finished loading of metadata from "
                                    "__consumer_offsets-N` line of its log (CoordinatorRuntime), records as those lines count them"}
            else:
                b.stop()
                b = start_kfake(kfake_bin, tmp / "load-kfake", persist=True)
                side.load = {"records": w.records, "ms": b.handle.new_cluster_ms,
                             "how": "`kfake.NewCluster` with the data directory (it reloads every persisted file before it listens), "
                                    "records as written"}
            side.load["write_s"], side.load["write_errors"] = w.seconds, w.errors
            side.load["problems"] = check(b)
            ms = side.load["ms"]
            side.load["records_per_s"] = side.load["records"] / ms * 1000 if ms and ms == ms else float("nan")
            say(f"  {k:9s} loaded {side.load['records']:,} records in {ms:,.1f} ms ({side.load['records_per_s']:,.0f} records/s); "
                f"offsets after the restart: {side.load['problems'] or 'as committed'}")
        except Exception as e:  # noqa: BLE001
            side.failures.append(("coordinator load", f"{type(e).__name__}: {e}"))
            say(f"  {k}: coordinator load failed: {type(e).__name__}: {e}")
        finally:
            if b is not None:
                try:
                    b.stop()
                    side.log_problems.update(report.log_problems(k, b.logs()))
                except Exception as e:  # noqa: BLE001
                    say(f"  stopping {k}: {e}")


TXN_PRODUCERS, TXN_PER_PRODUCER, TXN_RECORDS, TXN_RUNS = 10, 30, 20, 2
# produce throughput inside transactions: few producers, large transactions of 1 KB records
TXN_BULK_PRODUCERS, TXN_BULK_PER_PRODUCER, TXN_BULK_RECORDS, TXN_BULK_VALUE = 2, 5, 5000, 1024


def measure_txn(brokers: dict[str, Spawned], res: Results) -> None:
    """bench.txn's workload (confluent-kafka transactional producers, a fifth of the transactions aborted,
    exactly-once checked by a read_committed consumer), TXN_RUNS rounds per broker."""
    from . import txn

    workloads = (("txn", (TXN_PRODUCERS, TXN_PER_PRODUCER, TXN_RECORDS), 0),
                 ("txn_bulk", (TXN_BULK_PRODUCERS, TXN_BULK_PER_PRODUCER, TXN_BULK_RECORDS), TXN_BULK_VALUE))
    for run in range(TXN_RUNS):
        for name, shape, value_bytes in workloads:
            for k, b in brokers.items():
                try:
                    r = txn.run_once(f"{b.host}:{b.port}", *shape, seed=run + 1, value_bytes=value_bytes)
                except Exception as e:  # noqa: BLE001
                    res.sides[k].failures.append(("transactions", f"{type(e).__name__}: {e}"))
                    say(f"  {k}: transactions failed: {e}")
                    continue
                if r["failures"] or not r["exact"]:
                    res.sides[k].failures.append(("transactions", "; ".join(r["failures"]) or "exactly-once check failed"))
                getattr(res.sides[k], name).append(r)
                say(f"  {k:9} {name} run {run + 1}: {r['txns_s']:,.0f} transactions/s, {r['records_s']:,.0f} records/s, "
                    f"{r['mb_s']:,.1f} MB/s, exactly once: {r['exact']}")


def measure_tls(tmp: Path, res: Results) -> None:
    """bench.tls_cost on kafkalite and Kafka, each on brokers of its own with PLAINTEXT, SSL and SASL_SSL listeners
    (kfake has no TLS listener)."""
    from broker.security.certs import generate

    from . import tls_cost

    certs = generate(tmp / "tls-certs")
    for k, cls in ((KAFKALITE, tls_cost.Kafkalite), (KAFKA, tls_cost.Kafka)):
        work = tmp / f"tls-{k.lower()}"
        work.mkdir()
        try:
            b = cls(work, certs)
        except Exception as e:  # noqa: BLE001
            res.sides[k].failures.append(("TLS", f"{type(e).__name__}: {e}"))
            say(f"  {k}: the TLS broker did not start: {e}")
            continue
        try:
            res.sides[k].tls = tls_cost.measure_broker(b, certs, TLS_MB, 1024, TLS_ROUNDS, TLS_CONNECTIONS, say=lambda m: say(f"  {m}"))
        except Exception as e:  # noqa: BLE001
            res.sides[k].failures.append(("TLS", f"{type(e).__name__}: {e}"))
            say(f"  {k}: TLS measurement failed: {e}")
        finally:
            b.stop()


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
    """Each size on its own connections, so that a failure at one size (kfake, now and then: a Stable group's follower answered
    UNKNOWN_MEMBER_ID) costs only that size; the last (largest) group stays for the Heartbeat measurement."""
    a = res.args
    sizes_reps = [(10, a.reps_10), (100, a.reps_100), (1000, a.reps_1000)]

    async def go(b: Spawned, k: str):
        out, hb = [], None
        for size, reps in sizes_reps:
            last = size == sizes_reps[-1][0]
            try:
                got, kept, conns = await gs.rebalances(b.host, b.port, b.pid, [(size, reps)], keep_last=last, timeout=a.rebalance_timeout)
            except Exception as e:  # noqa: BLE001
                text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                res.sides[k].failures.append((f"classic rebalances, {size} members", text))
                say(f"  {k}: classic rebalances of {size} members failed: {text}")
                continue
            out += got
            try:
                if kept:
                    hb = await gs.heartbeats(kept, b.pid, 4, a.warmup, a.seconds)
                    admin = (await gs.connect(b.host, b.port, 1))[0]
                    await gs.leave_all(admin, kept)
                    admin.close()
            except Exception as e:  # noqa: BLE001
                res.sides[k].failures.append(("classic Heartbeat", f"{type(e).__name__}: {e}"))
                say(f"  {k}: Heartbeat failed: {type(e).__name__}: {e}")
            finally:
                if kept:
                    for c in conns:
                        c.close()
        return out, hb

    for k, b in brokers.items():
        out, hb = run_async(go(b, k))
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
            brokers = fresh(size)
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
    ap.add_argument("--quick", action="store_true", help="small volumes, few runs, a 100-member KIP-848 group only (a smoke test)")
    ap.add_argument("--only", default="", help=f"comma-separated phases to run (of {', '.join(PHASES)}); default all")
    ap.add_argument("--out", type=Path, help="write the section into this file (a new file, or one whose section is replaced) and the "
                                              "charts into img/ beside it, instead of docs/benchmarks.md and docs/img")
    ap.add_argument("--no-docs", action="store_true", help="print only; leave docs/benchmarks.md and docs/img alone")
    ap.add_argument("--skip-3000", action="store_true", help="leave out the 3000-member KIP-848 group")
    ap.add_argument("--k848-sizes", default="", help="comma-separated KIP-848 group sizes (default 1000,3000; --quick 100)")
    ap.add_argument("--no-kfake", action="store_true", help="leave out the kfake column")
    ap.add_argument("--kafka-heap", default="512m", help="Kafka's -Xmx (default 512m, as tests.reference_kafka)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (data and broker logs)")
    ap.add_argument("--save", type=Path, help="also pickle the results into this file")
    ap.add_argument("--render", type=Path, help="only render a pickled run (from --save) into the doc and plots")
    a = ap.parse_args(argv)
    a.only = [x.strip() for x in a.only.split(",") if x.strip()] or list(PHASES)
    unknown = sorted(set(a.only) - set(PHASES))
    if unknown:
        ap.error(f"unknown phase(s) {', '.join(unknown)}; known: {', '.join(PHASES)}")
    # volumes: smaller than `make bench` so that the whole comparison stays near 10 minutes on 2 cores
    a.startup_kafkalite, a.startup_kafka = (2, 1) if a.quick else (4, 2)
    a.mb_1k, a.mb_100, a.repeats = (20, 5, 1) if a.quick else (100, 30, 2)
    a.mb_warmup = 5 if a.quick else 20
    a.mb_fetch = 20 if a.quick else 200  # broker CPU is read in 10 ms clock ticks: enough MB for a few dozen of them
    a.commit_groups, a.commit_conns, a.commit_depth, a.commit_runs = 1000, 64, 8, (1 if a.quick else 2)
    a.warmup, a.seconds = (0.5, 1.5) if a.quick else (1.0, 3.0)
    a.reps_10, a.reps_100, a.reps_1000 = (2, 1, 1) if a.quick else (5, 3, 2)
    a.rebalance_timeout = 120.0
    if a.k848_sizes:
        a.k848 = [(int(n), 3) for n in a.k848_sizes.split(",") if n.strip()]
    else:
        # 3 joins a size: the joiner's wait depends on when the member giving a partition way
        # next heartbeats (anywhere in its interval), so one join is a coin toss; the median is shown
        a.k848 = [(100, 1)] if a.quick else [(1000, 3)] + ([] if a.skip_3000 else [(3000, 3)])
    a.k848_window = 1.5 if a.quick else 2.0
    a.k848_timeout = 300.0 if max(n for n, _ in a.k848) <= 1000 else 900.0
    a.load_groups = 500 if a.quick else 5_000  # × LOAD_PARTITIONS records with distinct keys: 50k / 500k
    return a


def main(argv: list[str] | None = None) -> int:
    from tests.reference_kafka import KAFKA_VERSION, available

    from . import compare_report as report
    from .groups import raise_fd_limit

    args = parse_args(argv)
    if args.render:
        res = load_results(args.render)
        report.print_summary(res)
        if args.out:
            report.write(res, args.out)
        elif not args.no_docs:
            report.write(res)
        return 0
    ok, why = available()
    if not ok:
        say(f"bench-compare needs the reference broker: {why}")
        return 1
    raise_fd_limit(16_384)  # 3000 connections here; the brokers inherit the limit
    res = Results(dt.datetime.now(dt.UTC), machine(), args, kafka_heap=args.kafka_heap)
    res.versions = {"kafka": KAFKA_VERSION, "java": java_version(), "kfake": kfake_version()}
    t_start = perf()
    kfake_bin: Path | None = None
    if args.no_kfake:
        res.kfake = "left out (--no-kfake)"
    else:
        say("building bench/kfake (go build) ...")
        kfake_bin, res.kfake = build_kfake()
        if kfake_bin is None:
            say(f"  kfake column skipped: {res.kfake}")
        else:
            res.sides[KFAKE] = Side()
            res.versions["go"] = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-compare-"))
    brokers: dict[str, Spawned] = {}
    run = set(args.only)
    current: list[Phase] = []

    def phase(name: str) -> None:
        la = loadavg()
        if current:
            p = current.pop()
            p.end, p.seconds = la, perf() - p.seconds
        res.loadavg.append((name, la))
        if name != "end":
            res.phases[name] = Phase(name, la, seconds=perf())
            current.append(res.phases[name])
        say(f"{perf() - t_start:6.1f}s {name} (load average {la})")

    def start_all(name: str) -> dict[str, Spawned]:
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
        if kfake_bin is not None:
            try:
                brokers[KFAKE] = start_kfake(kfake_bin, tmp / f"kfake-{name}")
            except Exception as e:  # noqa: BLE001
                res.sides[KFAKE].failures.append((f"start ({name})", f"{type(e).__name__}: {e}"))
                say(f"  kfake did not start: {e}")
        for k in brokers:
            run_async(coordinator_ready(brokers[k].host, brokers[k].port))
        return dict(brokers)

    try:
        if "startup" in run:
            phase("start-up")
            measure_startup(tmp, res, kfake_bin)
        main_phases = run - {"startup", "load"}
        if main_phases:
            phase("main brokers")
            start_all("main")
            for k, b in brokers.items():
                if k == KAFKA:
                    record_kafka_start(res, b, "main broker")
                else:
                    res.sides[k].startup_api_ms.append(b.api_versions_s * 1000)
                    res.sides[k].startup_ready_ms.append(b.ready_s * 1000)
            if "idle" in run:
                phase("idle")
                measure_idle(brokers, res)
            for k, b in brokers.items():
                res.sides[k].coordinator_ready_ms = run_async(coordinator_ready(b.host, b.port)) * 1000
            if "throughput" in run:
                phase("produce/consume")
                measure_throughput(brokers, res)
            if "fetch" in run:
                phase("consume, 4 / 16 MiB fetches")
                measure_fetch(brokers, res)
            if "commits" in run:
                phase("OffsetCommit")
                measure_commits(brokers, res)
            if "txn" in run:
                phase("transactions")
                measure_txn(brokers, res)
            if "rebalances" in run:
                phase("classic rebalances + Heartbeat")
                measure_rebalances(brokers, res)
            if "k848" in run:
                phase(f"KIP-848 {args.k848[0][0]} members")
                measure_kip848(dict(brokers), res, t_start,
                               lambda size: (phase(f"KIP-848 {size} members (fresh brokers)"), start_all(f"k848-{size}"))[1])
            for k, b in list(brokers.items()):
                if not res.sides[k].rss_end_mb:
                    res.sides[k].rss_end_mb, res.sides[k].peak_rss_mb = rss_mb(b.pid), peak_rss_mb(b.pid)
                brokers.pop(k).stop()
                res.sides[k].log_problems.update(report.log_problems(k, b.logs()))
        if "load" in run:
            phase("coordinator load")
            measure_load(tmp, res, kfake_bin)
        if "tls" in run:
            phase("TLS")
            measure_tls(tmp, res)
        phase("end")
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
    if args.out:
        report.write(res, args.out)
    elif not args.no_docs:
        report.write(res)
    say(f"bench-compare took {res.elapsed_s:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
