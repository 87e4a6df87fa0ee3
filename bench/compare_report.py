"""Tables, notes and bar charts for ``bench.compare``: the ``## kafkalite vs Apache Kafka`` section."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from pathlib import Path

from . import group_scenarios as gs
from .spawn import ROOT

DOC = ROOT / "docs" / "benchmarks.md"
IMG = ROOT / "docs" / "img"
SECTION = "## kafkalite vs Apache Kafka"
KL, KF = "kafkalite", "Kafka"
COLORS = {KL: "#2a9d8f", KF: "#7a7a7a"}
NAN = float("nan")


def med(xs) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else NAN


def ok(x: float) -> bool:
    return x == x and x not in (float("inf"), float("-inf"))


# =========================================================================== logs
_KAFKA_LINE = re.compile(r"^\[[^\]]+\] (WARN|ERROR|FATAL) (.*?)(?: \(([\w.$]+)\))?$")


def log_problems(kind: str, text: str) -> Counter:
    if kind == KL:
        return gs.problems_in_log(text)
    found: Counter = Counter()
    for line in text.splitlines():
        m = _KAFKA_LINE.match(line.strip())
        if m:
            msg = re.sub(r"\d+", "N", m.group(2))[:140]
            found[f"{m.group(1)}: {msg}"] += 1
    return found


def k848_log_summary(text: str, group: str) -> str:
    """What kafkalite's JSON log says about one KIP-848 group: joins, assignor runs, session expiries."""
    import datetime as dt

    evs = [e for e in gs.log_events(text) if e.get("group") == group and "timestamp" in e]
    if not evs:
        return "no events."

    def ts(e) -> float:
        return dt.datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()

    t0 = ts(evs[0])
    removed = [e for e in evs if e.get("event") == "consumer group member removed"]
    targets = [e for e in evs if e.get("event") == "target assignment computed"]
    bumps = sum(1 for e in evs if e.get("event") == "consumer group epoch bumped")
    reasons = Counter(e.get("reason") for e in removed)
    ms = [float(e.get("assignor_ms", 0)) for e in targets]
    most = max((int(e.get("members", 0)) for e in targets), default=0)
    out = (f"{bumps:,} group epoch bumps and {len(targets):,} target assignments in {ts(evs[-1]) - t0:,.0f} s (assignor median "
           f"{med(ms):,.1f} ms, max {max(ms, default=0):,.0f} ms, {sum(ms) / 1000:,.0f} s in all); at most {most:,} members in a target assignment")
    if removed:
        out += (f"; {len(removed):,} members removed ({', '.join(f'{r} ×{n}' for r, n in reasons.most_common())}), the first "
                f"{ts(removed[0]) - t0:,.1f} s after the group's first event")
    return out + "."


# =========================================================================== figures
class Row:
    """One figure measured on both brokers; ``higher`` says whether a larger value is better."""

    def __init__(self, label: str, kl: float, kf: float, unit: str, higher: bool, fmt: str = "{:,.1f}", note: str = "") -> None:
        self.label, self.kl, self.kf, self.unit, self.higher, self.fmt, self.note = label, kl, kf, unit, higher, fmt, note

    def value(self, x: float) -> str:
        return (self.fmt.format(x) + (f" {self.unit}" if self.unit else "")) if ok(x) else "–"

    @property
    def ratio(self) -> float:
        return self.kl / self.kf if ok(self.kl) and ok(self.kf) and self.kf else NAN

    def ratio_text(self) -> str:
        r = self.ratio
        return f"{r:,.2f}" if ok(r) else "–"

    def better(self) -> str:
        r = self.ratio
        if r == 0:
            return "Kafka" if self.higher else "kafkalite"
        if not ok(r) or r < 0:
            return "–"
        if 0.95 <= r <= 1.05:
            return "about equal"
        kl_wins = r > 1 if self.higher else r < 1
        factor = r if r > 1 else 1 / r
        return f"{'kafkalite' if kl_wins else 'Kafka'}, {factor:,.1f}×"


def table(rows: list[Row], notes: bool = False) -> list[str]:
    head = "| Figure | kafkalite | Kafka 4.1 | kafkalite / Kafka | Better (by) |"
    if notes:
        head += " Notes |"
    out = [head, "|" + "---|" * (6 if notes else 5)]
    for r in rows:
        line = f"| {r.label} | {r.value(r.kl)} | {r.value(r.kf)} | {r.ratio_text()} | {r.better()} |"
        if notes:
            line += f" {r.note} |"
        out.append(line)
    return out


def _phase(side, name: str, size: int, attr: str) -> float:
    return med([getattr(p, attr) for p in side.phases if p.name == name and p.value_size == size])


def _size(n: int) -> str:
    return "1 KB" if n == 1000 else f"{n} B"


def startup_rows(res) -> list[Row]:
    kl, kf = res.sides[KL], res.sides[KF]
    return [
        Row("Spawn → first ApiVersions answered (median)", med(kl.startup_api_ms), med(kf.startup_api_ms), "ms", False, "{:,.0f}",
            f"{len(kl.startup_api_ms)} / {len(kf.startup_api_ms)} starts; min {min(kl.startup_api_ms, default=NAN):,.0f} / {min(kf.startup_api_ms, default=NAN):,.0f} ms"),
        Row("Spawn → ready (kafkalite: READY line; Kafka: itself registered in Metadata)", med(kl.startup_ready_ms), med(kf.startup_ready_ms), "ms", False,
            "{:,.0f}", f"Kafka's `kafka-storage format` before the first start adds {med(kf.format_ms):,.0f} ms (not counted)"),
        Row("Idle RSS, 3 s after start", kl.idle_rss_mb, kf.idle_rss_mb, "MB", False, "{:,.1f}", f"Kafka `-Xmx{res.kafka_heap} -Xms128m`, G1"),
        Row("Idle CPU over those 3 s", kl.idle_cpu_pct, kf.idle_cpu_pct, "% of a core", False, "{:,.1f}", ""),
        Row("RSS after the workloads (before the fresh KIP-848 brokers)", kl.rss_end_mb, kf.rss_end_mb, "MB", False, "{:,.1f}", ""),
        Row("Peak RSS over those workloads (VmHWM)", kl.peak_rss_mb, kf.peak_rss_mb, "MB", False, "{:,.1f}", ""),
    ]


def throughput_rows(res) -> list[Row]:
    kl, kf = res.sides[KL], res.sides[KF]
    rows = []
    for name in ("produce", "consume"):
        for size in (1000, 100):
            rows.append(Row(f"{name.capitalize()} {_size(size)} records", _phase(kl, name, size, "mb_per_s"), _phase(kf, name, size, "mb_per_s"),
                            "MB/s", True, "{:,.1f}",
                            f"broker CPU {_phase(kl, name, size, 'broker_cpu_ms_per_mb'):,.1f} / {_phase(kf, name, size, 'broker_cpu_ms_per_mb'):,.1f} ms per MB; "
                            f"client {_phase(kl, name, size, 'client_util'):.0%} / {_phase(kf, name, size, 'client_util'):.0%} of a core"))
    for name in ("produce", "consume"):
        for size in (1000, 100):
            rows.append(Row(f"Broker CPU per MB, {name} {_size(size)}", _phase(kl, name, size, "broker_cpu_ms_per_mb"),
                            _phase(kf, name, size, "broker_cpu_ms_per_mb"), "ms", False, "{:,.2f}",
                            f"broker at {_phase(kl, name, size, 'broker_util'):.0%} / {_phase(kf, name, size, 'broker_util'):.0%} of a core"))
    return rows


def _tp(ts) -> tuple[float, float, float]:
    return med([t.rps for t in ts]), med([t.broker_us_per_req for t in ts]), med([t.broker_core for t in ts])


def group_rows(res) -> list[Row]:
    kl, kf = res.sides[KL], res.sides[KF]
    a = res.args
    c_kl, c_kf = _tp(kl.commits), _tp(kf.commits)
    h_kl = _tp([kl.heartbeat] if kl.heartbeat else [])
    h_kf = _tp([kf.heartbeat] if kf.heartbeat else [])
    shape = f"{a.commit_conns} connections × {a.commit_depth} in flight, {a.commit_groups} groups"
    return [
        Row("OffsetCommit requests/s", c_kl[0], c_kf[0], "/s", True, "{:,.0f}", f"{shape}; broker at {c_kl[2]:.0%} / {c_kf[2]:.0%} of a core"),
        Row("Broker CPU per OffsetCommit", c_kl[1], c_kf[1], "µs", False, "{:,.1f}", ""),
        Row("Heartbeat requests/s", h_kl[0], h_kf[0], "/s", True, "{:,.0f}",
            f"1000-member Stable classic group, 4 in flight per member; broker at {h_kl[2]:.0%} / {h_kf[2]:.0%} of a core"),
        Row("Broker CPU per Heartbeat", h_kl[1], h_kf[1], "µs", False, "{:,.1f}", ""),
    ]


def _reb(side, size: int, kind: str, attr: str, agg=med) -> float:
    for r in side.rebalances:
        if r.size == size:
            samples = r.new if kind == "new" else r.stable
            return agg([getattr(s, attr) for s in samples]) if samples else NAN
    return NAN


def _gens(side, size: int, kind: str) -> str:
    for r in side.rebalances:
        if r.size == size:
            return "/".join(str(s.generations) for s in (r.new if kind == "new" else r.stable))
    return "–"


def rebalance_rows(res) -> list[Row]:
    kl, kf = res.sides[KL], res.sides[KF]
    rows = []
    for size in (10, 100, 1000):
        for kind, label in (("new", "new group"), ("stable", "Stable group, leader rejoins")):
            cpu_kl = _reb(kl, size, kind, "broker_cpu_s", lambda xs: statistics.mean(xs)) * 1000
            cpu_kf = _reb(kf, size, kind, "broker_cpu_s", lambda xs: statistics.mean(xs)) * 1000
            rows.append(Row(f"{size} members, {label}: last JoinGroup sent → all SyncGroup answers", _reb(kl, size, kind, "sync_ms"),
                            _reb(kf, size, kind, "sync_ms"), "ms", False, "{:,.1f}",
                            f"broker CPU {cpu_kl:,.0f} / {cpu_kf:,.0f} ms per rebalance; generations {_gens(kl, size, kind)} / {_gens(kf, size, kind)}"))
    return rows


def _k(side, size: int):
    return next((r for r in side.k848 if r.size == size), None)


def k848_rows(res) -> list[Row]:
    kl, kf = res.sides[KL], res.sides[KF]
    rows = []
    for size, _ in res.args.k848:
        a, b = _k(kl, size), _k(kf, size)

        def j(r, attr):
            return med([getattr(s, attr) for s in r.joins]) if r and r.joins else NAN

        runs = f"{len(a.joins) if a else 0} / {len(b.joins) if b else 0} joins"
        fail = "; ".join(f"{k} failed: {side.k848_failed[size]}" for k, side in ((KL, kl), (KF, kf)) if size in side.k848_failed)
        rows += [
            Row(f"{size} members: joiner's first heartbeat → its first partition", j(a, "joiner_wait_ms"), j(b, "joiner_wait_ms"), "ms", False, "{:,.0f}",
                runs + (f"; {fail}" if fail else "")),
            Row(f"{size} members: joiner's first heartbeat → group settled", j(a, "settle_ms"), j(b, "settle_ms"), "ms", False, "{:,.0f}", ""),
            Row(f"{size} members: existing members that revoked a partition", j(a, "revokers"), j(b, "revokers"), "", False, "{:,.0f}",
                f"members whose assignment changed: {j(a, 'moved'):,.0f} / {j(b, 'moved'):,.0f}; group epochs per join {j(a, 'rebalances'):,.0f} / {j(b, 'rebalances'):,.0f}"),
            Row(f"{size} members: longest time a partition was unowned", j(a, "max_gap_ms"), j(b, "max_gap_ms"), "ms", False, "{:,.0f}", ""),
            Row(f"{size} members: broker CPU per steady-state heartbeat", a.steady.us_per_hb if a and a.steady else NAN,
                b.steady.us_per_hb if b and b.steady else NAN, "µs", False, "{:,.1f}",
                f"{a.steady.rps if a and a.steady else 0:,.0f} / {b.steady.rps if b and b.steady else 0:,.0f} heartbeats/s (every member every {K848_MS} ms)"),
            Row(f"{size} members: forming the group ({size - 1} members, 25 at a time)", a.form_s if a else NAN, b.form_s if b else NAN, "s", False, "{:,.1f}", ""),
        ]
    return rows


# =========================================================================== plots
def _bars(ax, labels: list[str], kl: list[float], kf: list[float], ylabel: str, title: str, log: bool = False) -> None:
    import numpy as np

    x = np.arange(len(labels))
    w = 0.38
    for off, name, vals in ((-w / 2, KL, kl), (w / 2, "Kafka 4.1", kf)):
        v = [x if ok(x) else 0 for x in vals]
        bars = ax.bar(x + off, v, w, label=name, color=COLORS[KL if name == KL else KF])
        for bar, val in zip(bars, vals, strict=True):
            if not ok(val):
                ax.annotate("no result", (bar.get_x() + bar.get_width() / 2, 0), ha="center", va="bottom", fontsize=7, rotation=90,
                            xytext=(0, 3), textcoords="offset points", color=COLORS[KL if name == KL else KF])
            elif val > 0:
                ax.annotate(f"{val:,.0f}" if val >= 10 else f"{val:,.1f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if log:
        ax.set_yscale("log")
    ax.margins(y=0.15)
    ax.legend(fontsize=8)


def plots(res, outdir: Path = IMG) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    kl, kf = res.sides[KL], res.sides[KF]
    made = []

    def save(fig, name: str, alt: str) -> None:
        fig.suptitle(f"kafkalite vs Apache Kafka 4.1 — {res.started:%Y-%m-%d}, {res.machine.get('cores')} cores, shared machine", fontsize=9)
        fig.tight_layout()
        fig.savefig(outdir / name, dpi=110)
        plt.close(fig)
        made.append((name, alt))

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    _bars(axes[0], ["spawn → ApiVersions"], [med(kl.startup_api_ms)], [med(kf.startup_api_ms)], "ms (log scale)", "Start-up (lower is better)", log=True)
    _bars(axes[1], ["after start", "after workloads", "peak"], [kl.idle_rss_mb, kl.rss_end_mb, kl.peak_rss_mb],
          [kf.idle_rss_mb, kf.rss_end_mb, kf.peak_rss_mb], "MB", "Resident memory (lower is better)")
    save(fig, "compare-startup.png", "Start-up time and resident memory")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    cats = [(n, s) for n in ("produce", "consume") for s in (1000, 100)]
    labels = [f"{n}\n{_size(s)}" for n, s in cats]
    _bars(axes[0], labels, [_phase(kl, n, s, "mb_per_s") for n, s in cats], [_phase(kf, n, s, "mb_per_s") for n, s in cats],
          "MB/s", "Throughput, confluent-kafka (higher is better)")
    _bars(axes[1], labels, [_phase(kl, n, s, "broker_cpu_ms_per_mb") for n, s in cats], [_phase(kf, n, s, "broker_cpu_ms_per_mb") for n, s in cats],
          "ms CPU per MB", "Broker CPU per MB (lower is better)")
    save(fig, "compare-throughput.png", "Produce and consume throughput and broker CPU per MB")

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    g = group_rows(res)
    _bars(axes[0], ["OffsetCommit", "Heartbeat"], [g[0].kl, g[2].kl], [g[0].kf, g[2].kf], "requests/s", "Request throughput (higher is better)")
    _bars(axes[1], ["OffsetCommit", "Heartbeat"], [g[1].kl, g[3].kl], [g[1].kf, g[3].kf], "µs CPU per request", "Broker CPU per request (lower is better)")
    save(fig, "compare-requests.png", "OffsetCommit and Heartbeat throughput and broker CPU per request")

    fig, ax = plt.subplots(1, 1, figsize=(9, 3.8))
    cats = [(n, k) for n in (10, 100, 1000) for k in ("new", "stable")]
    _bars(ax, [f"N={n}\n{'new' if k == 'new' else 'Stable'}" for n, k in cats], [_reb(kl, n, k, "sync_ms") for n, k in cats],
          [_reb(kf, n, k, "sync_ms") for n, k in cats], "ms (log scale)", "Classic rebalance: last JoinGroup → all SyncGroup answers (lower is better)", log=True)
    save(fig, "compare-rebalance.png", "Classic rebalance latency")

    sizes = [n for n, _ in res.args.k848]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))

    def jm(side, n, attr):
        r = _k(side, n)
        return med([getattr(s, attr) for s in r.joins]) if r and r.joins else NAN

    labels = [f"N={n}\n{w}" for n in sizes for w in ("first partition", "settled")]
    _bars(axes[0], labels, [jm(kl, n, a) for n in sizes for a in ("joiner_wait_ms", "settle_ms")],
          [jm(kf, n, a) for n in sizes for a in ("joiner_wait_ms", "settle_ms")], "ms", "KIP-848 join latency (lower is better)")
    _bars(axes[1], [f"N={n}" for n in sizes], [jm(kl, n, "revokers") for n in sizes], [jm(kf, n, "revokers") for n in sizes],
          "members", "KIP-848: members that revoked a partition (lower is better)")
    save(fig, "compare-kip848.png", "KIP-848 join latency and revocations")
    return made


# =========================================================================== doc
def notes(res) -> list[str]:
    kl, kf = res.sides[KL], res.sides[KF]
    out = []
    out.append(
        f"The machine is shared: other jobs (test suites, other benchmarks) ran during this run; /proc/loadavg (1, 5, 15 min) at each "
        f"phase: {'; '.join(f'{name} {la}' for name, la in res.loadavg)}. On {res.machine.get('cores')} cores a load average above "
        "2 means the brokers and the load generator waited for CPU, so treat single figures as ±20 % or worse; the ratios are more "
        "robust because both brokers ran one after the other within each workload.")
    out.append(
        "Kafka's JVM runs many threads (network, request handlers, group coordinator, log cleaner, GC) and can use both cores; kafkalite "
        "runs one asyncio event loop and can use about one. The load generator and the confluent-kafka client share the same 2 cores, "
        "so where the client is the bottleneck both brokers show similar MB/s and only the broker CPU per MB tells them apart.")
    out.append(
        "Kafka is measured from a cold JVM: each workload runs for seconds, so the JIT compiler is still warming up in the first "
        "workloads (the broker CPU of the JIT threads is counted in Kafka's process CPU).")
    if kf.format_ms:
        out.append(f"Kafka needs `kafka-storage format` (another JVM start, median {med(kf.format_ms):,.0f} ms here) before the first start of a "
                   "fresh node; the start-up figure does not include it. kafkalite has no such step.")
    for k, side in ((KL, kl), (KF, kf)):
        for what, err in side.failures:
            out.append(f"{k}: {what} did not complete: `{err.split(', epochs Counter(')[0][:400]}`.")
    for size, text in sorted(getattr(kl, "k848_log", {}).items()):
        out.append(f"kafkalite's own log of the {size}-member KIP-848 group: {text}")
    for k, side in ((KL, kl), (KF, kf)):
        errs: Counter = Counter()
        for r in side.rebalances:
            for s in r.new + r.stable:
                errs.update(s.errors)
        for t in side.commits + ([side.heartbeat] if side.heartbeat else []):
            errs.update(t.errors)
        for r in side.k848:
            errs.update(r.errors)
            if r.double_owned:
                errs[f"partition handed out while another member still owned it (KIP-848, {r.size} members)"] += r.double_owned
        if errs:
            out.append(f"Errors the {k} load generator saw in answers: " + ", ".join(f"{e} ×{n}" for e, n in errs.most_common(8)) + ".")
    for k, side in ((KL, kl), (KF, kf)):
        if side.log_problems:
            top = "; ".join(f"`{e}` ×{n}" for e, n in side.log_problems.most_common(5))
            out.append(f"{k} log warnings/errors: {top}.")
        else:
            out.append(f"{k} logged no warning or error.")
    return out


def render(res, images: list[tuple[str, str]]) -> str:
    a = res.args
    m = res.machine
    w: list[str] = []
    add = w.append
    add(SECTION)
    add("")
    add("Generated by `make bench-compare` (`python -m bench.compare`" + (" --quick" if a.quick else "") + "); rerun it to refresh this section.")
    add("")
    add(f"- **Date:** {res.started:%Y-%m-%d %H:%M} UTC (run took {res.elapsed_s:.0f} s)")
    add(f"- **Machine:** {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory')} RAM, {m.get('kernel')}; shared with other jobs "
        f"(load average at the start {res.loadavg[0][1] if res.loadavg else '?'}, at the end {res.loadavg[-1][1] if res.loadavg else '?'})")
    add(f"- **Software:** kafkalite on {m.get('python')} with uvloop {m.get('uvloop')}; Apache Kafka {res.versions.get('kafka')} "
        f"(jars from Maven Central, `tests/reference_kafka.py`) on {res.versions.get('java', 'Java')}; clients confluent-kafka {m.get('confluent-kafka')} "
        "and the project's kio-based load generator (`bench/group_client.py`)")
    add("")
    add("### Method")
    add("")
    add(
        "Both brokers run side by side on loopback as child processes with fresh data directories, and each workload runs against "
        "kafkalite and then against Kafka with identical client settings. kafkalite: `python -m broker serve --fsync interval` "
        "(its default: fsync every 1000 ms) `--log-format json`. Kafka: one KRaft node in combined mode (broker + controller), "
        f"`-Xmx{res.kafka_heap} -Xms128m -XX:+UseG1GC`, the settings of `tests/reference_kafka.py` (replication factor 1, 50 offsets "
        "partitions, `group.initial.rebalance.delay.ms=0` as in kafkalite) and Kafka's default flush policy (no fsync by the broker; "
        "the OS writes back). Both group coordinators batch writes with a 5 ms append linger (both defaults). For the KIP-848 workload "
        f"both hand out a {K848_MS} ms heartbeat interval (Kafka also needs `group.consumer.min.heartbeat.interval.ms={K848_MS}`). "
        "Broker CPU is utime+stime of the broker process (every thread) from `/proc/<pid>/stat`; memory is `VmRSS`/`VmHWM` from "
        "`/proc/<pid>/status`."
    )
    add("")
    add(f"- **Start-up.** From just before the process is spawned until a TCP connection answers ApiVersions v3 (kio, `tests/raw.py`), "
        f"polled every 2 ms; {a.startup_kafkalite + 1} kafkalite and {a.startup_kafka + 1} Kafka starts on empty data directories "
        "(the last one is the broker the other workloads then use). Kafka's data directory is formatted before the clock starts.")
    add("- **Idle.** RSS and CPU over 3 s once both brokers are up and their group coordinators answer on every offsets partition "
        "(on Kafka this creates `__consumer_offsets`).")
    add(f"- **Produce / consume.** `bench/workload.py` as in `make bench`, smaller: {a.mb_1k:g} MB of 1 KB and {a.mb_100:g} MB of 100 B values, "
        f"3 partitions, confluent-kafka `Producer` (acks=all, linger.ms 10, batch.size 1 MB) then a `Consumer` with assign() from offset 0; "
        f"{a.repeats} runs per size per broker, median shown.")
    add(f"- **OffsetCommit.** `group_scenarios.commits`: single-partition OffsetCommit v9 of simple groups, {a.commit_groups} groups, "
        f"{a.commit_conns} connections × {a.commit_depth} in flight, {a.seconds:g} s after {a.warmup:g} s warm-up; {a.commit_runs} runs per broker, median.")
    add(f"- **Classic rebalances and Heartbeat.** `group_scenarios.rebalances` (as in `make bench`'s group section): new groups and "
        f"Stable groups whose leader rejoins, 10 members × {a.reps_10}, 100 × {a.reps_100}, 1000 × {a.reps_1000} runs; then every member of "
        f"the last 1000-member group sends Heartbeat v4, 4 in flight each, for {a.seconds:g} s.")
    add("- **KIP-848.** `kip848_scenarios.run_protocol('kip848', …)`: a group of N − 1 simulated ConsumerGroupHeartbeat v1 members on a "
        "topic of N partitions (server-side `uniform` assignor on both), then one member joins; measured are the joiner's wait for its "
        "first partition, the time until every member has reconciled, and how many existing members had to revoke a partition. "
        + ", ".join(f"N = {n}: {r} join{'s' if r > 1 else ''}" for n, r in a.k848) + ". Members stop without leaving, so every "
        "size after the first runs on a fresh pair of brokers (otherwise the previous group's members would expire during it). "
        "While the group forms, its members heartbeat every 5 s (`K848Sim.form`), then every 500 ms.")
    add("")
    add("Ratios are kafkalite / Kafka; the last column says which broker is better on that figure and by what factor.")
    add("")
    sections = [
        ("Start-up and memory", startup_rows(res), "compare-startup.png"),
        ("Produce and consume (confluent-kafka)", throughput_rows(res), "compare-throughput.png"),
        ("OffsetCommit and Heartbeat throughput", group_rows(res), "compare-requests.png"),
        ("Classic rebalance latency", rebalance_rows(res), "compare-rebalance.png"),
        ("KIP-848 join", k848_rows(res), "compare-kip848.png"),
    ]
    alts = dict(images)
    for title, rows, img in sections:
        add(f"### {title}")
        add("")
        w.extend(table(rows, notes=True))
        add("")
        if img in alts:
            add(f"![{alts[img]}](img/{img})")
            add("")
    add("### Notes")
    add("")
    for n in notes(res):
        add(f"- {n}")
    add("")
    return "\n".join(w)


K848_MS = 500


def write_section(text: str, path: Path = DOC) -> None:
    """Replace (or add) the section and keep it the last one on the page; other sections are left as they are."""
    doc = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    doc = pattern.sub("", doc, count=1)
    path.write_text(doc.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n")


def write(res) -> None:
    images = plots(res)
    write_section(render(res, images))
    print(f"wrote the '{SECTION}' section of {DOC} and {', '.join(n for n, _ in images)} in {IMG}")


def print_summary(res) -> None:
    for title, rows in (("start-up and memory", startup_rows(res)), ("produce/consume", throughput_rows(res)),
                        ("requests", group_rows(res)), ("classic rebalances", rebalance_rows(res)), ("KIP-848", k848_rows(res))):
        print(f"\n== {title}")
        for r in rows:
            print(f"  {r.label[:78]:78s} {r.value(r.kl):>16s} {r.value(r.kf):>16s}  {r.ratio_text():>7s}  {r.better()}")
    for n in notes(res):
        print("-", n)
