"""Tables, notes and bar charts for ``bench.compare``: the ``## kafkalite vs Apache Kafka`` section.

A summary table of every figure first (kafkalite, Kafka, kfake, the kafkalite/Kafka ratio, which is better, and the load
average of the phase it comes from), then the detailed tables per workload."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from pathlib import Path

from . import group_scenarios as gs
from .spawn import ROOT

PHASES = ("startup", "idle", "throughput", "fetch", "commits", "rebalances", "k848", "load")  # as bench.compare

DOC = ROOT / "docs" / "benchmarks.md"
IMG = ROOT / "docs" / "img"
SECTION = "## kafkalite vs Apache Kafka"
KL, KF, KK = "kafkalite", "Kafka", "kfake"
COLORS = {KL: "#2a9d8f", KF: "#7a7a7a", KK: "#e9c46a"}
NAMES = {KL: "kafkalite", KF: "Kafka", KK: "kfake"}  # chart legends; titles and tables name the version (kafka_label)
NAN = float("nan")
KAFKA_PUBLISHED_LOAD = "published figure about 4.4M records/s"


def kfake_side(res):
    """The kfake results, or None when kfake was not part of the run."""
    return getattr(res, "sides", {}).get(KK)


def has_kfake(res) -> bool:
    return kfake_side(res) is not None


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
    if kind == KK:  # kfake.BasicLogger: "15:04:05.000 [WRN] message"
        for line in text.splitlines():
            m = re.match(r"^[\d:.]+ \[(WRN|ERR)\] (.*)$", line.strip())
            if m:
                found[f"{m.group(1)}: {re.sub(r'[0-9]+', 'N', m.group(2))[:140]}"] += 1
        return found
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
    """One figure measured on the brokers; ``higher`` says whether a larger value is better. ``kk`` is kfake's value, ``kk_na``
    (``kf_na``) what to show instead when kfake (Kafka) has no value; ``phase`` names the run phase the figure comes from."""

    def __init__(self, label: str, kl: float, kf: float, unit: str, higher: bool, fmt: str = "{:,.1f}", note: str = "",
                 kk: float = NAN, kk_na: str = "", kf_na: str = "", phase: str = "", count: bool = False) -> None:
        self.label, self.kl, self.kf, self.unit, self.higher, self.fmt, self.note = label, kl, kf, unit, higher, fmt, note
        self.kk, self.kk_na, self.kf_na, self.phase, self.count = kk, kk_na, kf_na, phase, count

    def value(self, x: float) -> str:
        return (self.fmt.format(x) + (f" {self.unit}" if self.unit else "")) if ok(x) else "–"

    @property
    def ratio(self) -> float:
        return self.kl / self.kf if ok(self.kl) and ok(self.kf) and self.kf else NAN

    def ratio_text(self) -> str:
        r = self.ratio
        return f"{r:,.2f}" if ok(r) else "–"

    def better(self) -> str:
        if self.count and ok(self.kl) and ok(self.kf) and self.kf == 0:
            return "equal (none)" if self.kl == 0 else "Kafka (none)"
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


def _cell(r: Row, x: float, na: str) -> str:
    return r.value(x) if ok(x) else (na or "–")


def kafka_label(res) -> str:
    """"Kafka 4.4": the reference Kafka of the run, by its minor version."""
    version = getattr(res, "versions", {}).get("kafka") or "?"
    return "Kafka " + ".".join(str(version).split(".")[:2])


def table(rows: list[Row], kafka: str, notes: bool = False, kfake: bool = False, load=None) -> list[str]:
    """Markdown rows; ``kafka`` names Kafka's column, ``kfake`` adds its column, ``load`` (phase name -> text) a load-average column."""
    head = f"| Figure | kafkalite | {kafka} |" + (" kfake |" if kfake else "") + " kafkalite / Kafka | Better (by) |"
    cols = 5 + bool(kfake)
    if load is not None:
        head += " Load average (1 min, phase start → end) |"
        cols += 1
    if notes:
        head += " Notes |"
        cols += 1
    out = [head, "|" + "---|" * cols]
    for r in rows:
        line = f"| {r.label} | {_cell(r, r.kl, '')} | {_cell(r, r.kf, r.kf_na)} |"
        if kfake:
            line += f" {_cell(r, r.kk, r.kk_na)} |"
        line += f" {r.ratio_text()} | {r.better()} |"
        if load is not None:
            line += f" {load(r.phase)} |"
        if notes:
            line += f" {r.note} |"
        out.append(line)
    return out


def _phase(side, name: str, size: int, attr: str) -> float:
    if side is None:
        return NAN
    return med([getattr(p, attr) for p in side.phases if p.name == name and p.value_size == size and not getattr(p, "variant", "")])


def _fetch(side, mib: int, attr: str) -> float:
    if side is None:
        return NAN
    return med([getattr(p, attr) for p in getattr(side, "fetch", []) if getattr(p, "variant", "") == f"fetch {mib} MiB"])


def _failed(side, *what: str) -> str:
    """'failed' when the side recorded a failure of one of these workloads (the notes say how), else ''."""
    if side is None:
        return ""
    return "failed (see notes)" if any(w.startswith(what) for w, _ in side.failures) else ""


def _g(side, attr: str, default=NAN):
    return getattr(side, attr, default) if side is not None else default


def _size(n: int) -> str:
    return "1 KB" if n == 1000 else f"{n} B"


def startup_rows(res) -> list[Row]:
    kl, kf, kk = res.sides[KL], res.sides[KF], kfake_side(res)
    kk_api = _g(kk, "startup_api_ms", [])
    return [
        Row("Spawn → first ApiVersions answered (median)", med(kl.startup_api_ms), med(kf.startup_api_ms), "ms", False, "{:,.0f}",
            f"{len(kl.startup_api_ms)} / {len(kf.startup_api_ms)}" + (f" / {len(kk_api)}" if kk else "") + " starts; min "
            f"{min(kl.startup_api_ms, default=NAN):,.0f} / {min(kf.startup_api_ms, default=NAN):,.0f}"
            + (f" / {min(kk_api, default=NAN):,.0f}" if kk else "") + " ms", kk=med(kk_api), phase="start-up"),
        Row("Spawn → ready (kafkalite, kfake: READY line; Kafka: itself registered in Metadata)", med(kl.startup_ready_ms),
            med(kf.startup_ready_ms), "ms", False, "{:,.0f}",
            f"Kafka's `kafka-storage format` before the first start adds {med(kf.format_ms):,.0f} ms (not counted)",
            kk=med(_g(kk, "startup_ready_ms", [])), phase="start-up"),
        Row("Idle RSS, 3 s after start", kl.idle_rss_mb or NAN, kf.idle_rss_mb or NAN, "MB", False, "{:,.1f}",
            f"Kafka `-Xmx{res.kafka_heap} -Xms128m`, G1", kk=_g(kk, "idle_rss_mb") or NAN, phase="idle"),
        Row("Idle CPU over those 3 s", kl.idle_cpu_pct if kl.idle_rss_mb else NAN, kf.idle_cpu_pct if kf.idle_rss_mb else NAN, "% of a core",
            False, "{:,.1f}", "", kk=_g(kk, "idle_cpu_pct") if _g(kk, "idle_rss_mb", 0) else NAN, phase="idle"),
        Row("RSS after the workloads (before the fresh KIP-848 brokers)", kl.rss_end_mb or NAN, kf.rss_end_mb or NAN, "MB", False, "{:,.1f}", "",
            kk=_g(kk, "rss_end_mb") or NAN),
        Row("Peak RSS over those workloads (VmHWM)", kl.peak_rss_mb or NAN, kf.peak_rss_mb or NAN, "MB", False, "{:,.1f}", "",
            kk=_g(kk, "peak_rss_mb") or NAN),
    ]


def _three(fn) -> str:
    return " / ".join(fn)


def throughput_rows(res) -> list[Row]:
    kl, kf, kk = res.sides[KL], res.sides[KF], kfake_side(res)
    sides = [s for s in (kl, kf, kk) if s is not None]
    rows = []
    for name in ("produce", "consume"):
        for size in (1000, 100):
            rows.append(Row(f"{name.capitalize()} {_size(size)} records", _phase(kl, name, size, "mb_per_s"), _phase(kf, name, size, "mb_per_s"),
                            "MB/s", True, "{:,.1f}",
                            "broker CPU " + " / ".join(f"{_phase(s, name, size, 'broker_cpu_ms_per_mb'):,.1f}" for s in sides) + " ms per MB; client "
                            + " / ".join(f"{_phase(s, name, size, 'client_util'):.0%}" for s in sides) + " of a core",
                            kk=_phase(kk, name, size, "mb_per_s"), kk_na=_failed(kk, "produce/consume"), phase="produce/consume"))
    for name in ("produce", "consume"):
        for size in (1000, 100):
            rows.append(Row(f"Broker CPU per MB, {name} {_size(size)}", _phase(kl, name, size, "broker_cpu_ms_per_mb"),
                            _phase(kf, name, size, "broker_cpu_ms_per_mb"), "ms", False, "{:,.2f}",
                            "broker at " + " / ".join(f"{_phase(s, name, size, 'broker_util'):.0%}" for s in sides) + " of a core",
                            kk=_phase(kk, name, size, "broker_cpu_ms_per_mb"), kk_na=_failed(kk, "produce/consume"), phase="produce/consume"))
    for mib in (4, 16):
        rows.append(Row(f"Consume 1 KB, {mib} MiB fetches (fetch.max.bytes = max.partition.fetch.bytes)", _fetch(kl, mib, "mb_per_s"),
                        _fetch(kf, mib, "mb_per_s"), "MB/s", True, "{:,.1f}",
                        "broker CPU " + " / ".join(f"{_fetch(s, mib, 'broker_cpu_ms_per_mb'):,.2f}" for s in sides) + " ms per MB",
                        kk=_fetch(kk, mib, "mb_per_s"), kk_na=_failed(kk, "consume with"), phase=FETCH_PHASE))
    return rows


FETCH_PHASE = "consume, 4 / 16 MiB fetches"


def _tp(ts) -> tuple[float, float, float]:
    ts = [t for t in ts if t is not None]
    return med([t.rps for t in ts]), med([t.broker_us_per_req for t in ts]), med([t.broker_core for t in ts])


def group_rows(res) -> list[Row]:
    kl, kf, kk = res.sides[KL], res.sides[KF], kfake_side(res)
    a = res.args
    c_kl, c_kf, c_kk = _tp(kl.commits), _tp(kf.commits), _tp(_g(kk, "commits", []))
    h_kl, h_kf, h_kk = _tp([kl.heartbeat]), _tp([kf.heartbeat]), _tp([_g(kk, "heartbeat", None)])
    shape = f"{a.commit_conns} connections × {a.commit_depth} in flight, {a.commit_groups} groups"

    def cores(t1, t2, t3) -> str:
        return f"{t1[2]:.0%} / {t2[2]:.0%}" + (f" / {t3[2]:.0%}" if kk else "")

    return [
        Row("OffsetCommit requests/s", c_kl[0], c_kf[0], "/s", True, "{:,.0f}", f"{shape}; broker at {cores(c_kl, c_kf, c_kk)} of a core",
            kk=c_kk[0], kk_na=_failed(kk, "OffsetCommit"), phase="OffsetCommit"),
        Row("Broker CPU per OffsetCommit", c_kl[1], c_kf[1], "µs", False, "{:,.1f}", "", kk=c_kk[1], kk_na=_failed(kk, "OffsetCommit"),
            phase="OffsetCommit"),
        Row("Heartbeat requests/s", h_kl[0], h_kf[0], "/s", True, "{:,.0f}",
            f"1000-member Stable classic group, 4 in flight per member; broker at {cores(h_kl, h_kf, h_kk)} of a core",
            kk=h_kk[0], kk_na=_failed(kk, "classic Heartbeat", "classic rebalances, 1000"), phase=REBALANCE_PHASE),
        Row("Broker CPU per Heartbeat", h_kl[1], h_kf[1], "µs", False, "{:,.1f}", "", kk=h_kk[1],
            kk_na=_failed(kk, "classic Heartbeat", "classic rebalances, 1000"),
            phase=REBALANCE_PHASE),
    ]


REBALANCE_PHASE = "classic rebalances + Heartbeat"


def _reb(side, size: int, kind: str, attr: str, agg=med) -> float:
    if side is None:
        return NAN
    for r in side.rebalances:
        if r.size == size:
            samples = r.new if kind == "new" else r.stable
            return agg([getattr(s, attr) for s in samples]) if samples else NAN
    return NAN


def _gens(side, size: int, kind: str) -> str:
    for r in _g(side, "rebalances", []):
        if r.size == size:
            return "/".join(str(s.generations) for s in (r.new if kind == "new" else r.stable))
    return "–"


def rebalance_rows(res) -> list[Row]:
    kl, kf, kk = res.sides[KL], res.sides[KF], kfake_side(res)
    sides = [s for s in (kl, kf, kk) if s is not None]
    rows = []
    for size in (10, 100, 1000):
        for kind, label in (("new", "new group"), ("stable", "Stable group, leader rejoins")):
            cpu = [_reb(s, size, kind, "broker_cpu_s", lambda xs: statistics.mean(xs)) * 1000 for s in sides]
            rows.append(Row(f"{size} members, {label}: last JoinGroup sent → all SyncGroup answers", _reb(kl, size, kind, "sync_ms"),
                            _reb(kf, size, kind, "sync_ms"), "ms", False, "{:,.1f}",
                            "broker CPU " + " / ".join(f"{c:,.0f}" for c in cpu) + " ms per rebalance; generations "
                            + " / ".join(_gens(s, size, kind) for s in sides),
                            kk=_reb(kk, size, kind, "sync_ms"), kk_na=_failed(kk, f"classic rebalances, {size} "), phase=REBALANCE_PHASE))
    return rows


def _k(side, size: int):
    return next((r for r in _g(side, "k848", []) if r.size == size), None)


def k848_phase(res, size: int) -> str:
    return next((n for n in getattr(res, "phases", {}) if n.startswith(f"KIP-848 {size} members")), "")


def _j(r, attr):
    return med([getattr(s, attr) for s in r.joins]) if r and r.joins else NAN


def _k848_na(side, size: int) -> str:
    if side is None:
        return ""
    return "failed (see notes)" if size in side.k848_failed else ""


def k848_rows(res) -> list[Row]:
    kl, kf, kk = res.sides[KL], res.sides[KF], kfake_side(res)
    sides = [s for s in (kl, kf, kk) if s is not None]
    rows = []
    for size, _ in res.args.k848:
        a, b, c = _k(kl, size), _k(kf, size), _k(kk, size)
        na = _k848_na(kk, size)
        ph = k848_phase(res, size)

        def row(label, attr, unit, fmt, note="", a=a, b=b, c=c, na=na, ph=ph):
            return Row(label, _j(a, attr), _j(b, attr), unit, False, fmt, note, kk=_j(c, attr), kk_na=na, phase=ph)

        runs = " / ".join(str(len(r.joins) if r else 0) for r in (a, b, c)[: len(sides)]) + " joins"
        fail = "; ".join(f"{k} failed: {side.k848_failed[size]}" for k, side in ((KL, kl), (KF, kf), (KK, kk))
                         if side is not None and size in side.k848_failed)
        steady = [(r.steady.us_per_hb if r and r.steady else NAN, r.steady.rps if r and r.steady else 0) for r in (a, b, c)]
        rows += [
            row(f"{size} members: joiner's first heartbeat → its first partition", "joiner_wait_ms", "ms", "{:,.0f}",
                runs + (f"; {fail}" if fail else "")),
            row(f"{size} members: joiner's first heartbeat → group settled", "settle_ms", "ms", "{:,.0f}"),
            row(f"{size} members: existing members that revoked a partition", "revokers", "", "{:,.0f}",
                "members whose assignment changed: " + " / ".join(f"{_j(r, 'moved'):,.0f}" for r in (a, b, c)[: len(sides)])
                + "; group epochs per join " + " / ".join(f"{_j(r, 'rebalances'):,.0f}" for r in (a, b, c)[: len(sides)])),
            row(f"{size} members: longest time a moved partition had no owner", "max_gap_ms", "ms", "{:,.0f}"),
            Row(f"{size} members: broker CPU per steady-state heartbeat", steady[0][0], steady[1][0], "µs", False, "{:,.1f}",
                " / ".join(f"{x[1]:,.0f}" for x in steady[: len(sides)]) + f" heartbeats/s (every member every {K848_MS} ms)",
                kk=steady[2][0], kk_na=na, phase=ph),
            Row(f"{size} members: forming the group ({size - 1:,} members, 25 at a time)", a.form_s if a else NAN, b.form_s if b else NAN,
                "s", False, "{:,.1f}", "", kk=c.form_s if c else NAN, kk_na=na, phase=ph),
        ]
    return rows


def _form_errors(r, name: str) -> float:
    if r is None:
        return NAN
    errs = getattr(r, "form_errors", None)
    return float(errs.get(name, 0)) if errs is not None else NAN


def load_row(res) -> Row:
    kl, kf, kk = res.sides[KL], res.sides[KF], kfake_side(res)

    def v(side):
        return _g(side, "load", {}).get("records_per_s", NAN) if side is not None else NAN

    n = {k: _g(s, "load", {}).get("records", 0) for k, s in ((KL, kl), (KF, kf), (KK, kk)) if s is not None}
    kf_na = KAFKA_PUBLISHED_LOAD if not ok(v(kf)) else ""
    return Row("Coordinator load of distinct keys (offset commits), records/s", v(kl), v(kf), "/s", True, "{:,.0f}",
               "records loaded " + " / ".join(f"{x:,}" for x in n.values()), kk=v(kk),
               kk_na=_failed(kk, "coordinator load") or ("" if kk is None else "n/a"), kf_na=kf_na, phase="coordinator load")


def _txn_row(res, attr: str, figure: str, label: str, unit: str, fmt: str) -> Row:
    kl, kf, kk = res.sides[KL], res.sides[KF], kfake_side(res)

    def v(side):
        return med([r[figure] for r in _g(side, attr, [])]) if side is not None and _g(side, attr, []) else NAN

    def exact(side):
        runs = _g(side, attr, []) if side is not None else []
        return ("yes" if all(r["exact"] for r in runs) else "NO") if runs else "–"

    sides = [s for s in (kl, kf, kk) if s is not None]
    return Row(label, v(kl), v(kf), unit, True, fmt, "exactly once (read_committed check): " + " / ".join(exact(x) for x in sides),
               kk=v(kk), kk_na=_failed(kk, "transactions"), phase="transactions")


def txn_rows(res) -> list[Row]:
    from .compare import (TXN_BULK_PER_PRODUCER, TXN_BULK_PRODUCERS, TXN_BULK_RECORDS, TXN_BULK_VALUE, TXN_PER_PRODUCER, TXN_PRODUCERS,
                          TXN_RECORDS)

    return [
        _txn_row(res, "txn", "txns_s", f"Transactions/s ({TXN_PRODUCERS} confluent-kafka producers × {TXN_PER_PRODUCER} transactions of "
                 f"{TXN_RECORDS} records, a fifth aborted)", "/s", "{:,.0f}"),
        _txn_row(res, "txn_bulk", "mb_s", f"Produce inside transactions, committed MB/s ({TXN_BULK_PRODUCERS} producers × {TXN_BULK_PER_PRODUCER} "
                 f"transactions of {TXN_BULK_RECORDS:,} records of {TXN_BULK_VALUE} B, a fifth aborted)", "MB/s", "{:,.1f}"),
    ]


def tls_rows(res) -> list[Row]:
    """bench.tls_cost's figures (issue 15's targets): TLS's CPU cost as a multiple of PLAINTEXT, and what SASL_SSL adds to a connection."""
    kl, kf = res.sides[KL], res.sides[KF]
    na = "n/a (no TLS listener)"

    def v(side, key):
        return _g(side, "tls", {}).get(key, NAN) if _g(side, "tls", {}) else NAN

    def added(side, kind):
        hs = _g(side, "tls", {}).get("handshakes") if _g(side, "tls", {}) else None
        return hs[kind][0] - hs["PLAINTEXT"][0] if hs else NAN

    def per_mb(side):
        return f"{v(side, 'plain_ms_per_mb'):,.2f} → {v(side, 'tls_ms_per_mb'):,.2f} ms" if ok(v(side, "plain_ms_per_mb")) else "–"

    return [
        Row("Broker CPU per MB produced and consumed over SSL, as a multiple of PLAINTEXT", v(kl, "ratio"), v(kf, "ratio"), "×", False, "{:,.2f}",
            f"broker CPU per MB, PLAINTEXT → SSL: {per_mb(kl)} / {per_mb(kf)}", kk_na=na, phase="TLS"),
        Row("SASL_SSL (PLAIN): connect, log in, first Metadata answer: time added over PLAINTEXT", added(kl, "SASL_SSL/PLAIN"), added(kf, "SASL_SSL/PLAIN"),
            "ms", False, "{:,.2f}", kk_na=na, phase="TLS"),
        Row("SASL_SSL (SCRAM-SHA-512): connect, log in, first Metadata answer: time added over PLAINTEXT", added(kl, "SASL_SSL/SCRAM-SHA-512"),
            added(kf, "SASL_SSL/SCRAM-SHA-512"), "ms", False, "{:,.2f}", kk_na=na, phase="TLS"),
    ]


def summary_rows(res) -> list[Row]:
    """Every figure of issue 12, one row each, from this run."""
    st, tp, gr = startup_rows(res), throughput_rows(res), group_rows(res)
    kl, kf, kk = res.sides[KL], res.sides[KF], kfake_side(res)
    rows = [
        _relabel(st[0], "Process start → first ApiVersions answered"),
        _relabel(tp[2], "Consume 1 KB records, MB/s"),
        _relabel(tp[6], "Broker CPU per MB consumed, 1 KB records"),
        _relabel(tp[7], "Broker CPU per MB consumed, 100 B records"),
    ]
    for mib in (4, 16):
        rows.append(Row(f"Broker CPU per MB consumed, 1 KB records, {mib} MiB fetches", _fetch(kl, mib, "broker_cpu_ms_per_mb"),
                        _fetch(kf, mib, "broker_cpu_ms_per_mb"), "ms", False, "{:,.2f}", kk=_fetch(kk, mib, "broker_cpu_ms_per_mb"),
                        kk_na=_failed(kk, "consume with"), phase=FETCH_PHASE))
    rows += [gr[1], gr[3]]
    for kind, label in (("new", "new group"), ("stable", "Stable group, leader rejoins")):
        rows.append(Row(f"Classic rebalance, 1000 members, {label} (last JoinGroup → all SyncGroup answers)", _reb(kl, 1000, kind, "sync_ms"),
                        _reb(kf, 1000, kind, "sync_ms"), "ms", False, "{:,.0f}", kk=_reb(kk, 1000, kind, "sync_ms"),
                        kk_na=_failed(kk, "classic rebalances, 1000 "), phase=REBALANCE_PHASE))
    if res.args.k848:
        size = max(n for n, _ in res.args.k848)
        a, b, c = _k(kl, size), _k(kf, size), _k(kk, size)
        na, ph = _k848_na(kk, size), k848_phase(res, size)
        rows += [
            Row(f"KIP-848, {size:,} members: joiner's wait for its first partition", _j(a, "joiner_wait_ms"), _j(b, "joiner_wait_ms"), "ms", False,
                "{:,.0f}", kk=_j(c, "joiner_wait_ms"), kk_na=na, phase=ph),
            Row(f"KIP-848, {size:,} members: longest time a moved partition had no owner", _j(a, "max_gap_ms"), _j(b, "max_gap_ms"), "ms", False,
                "{:,.0f}", kk=_j(c, "max_gap_ms"), kk_na=na, phase=ph),
            Row(f"KIP-848: forming the group ({size - 1:,} members)", a.form_s if a else NAN, b.form_s if b else NAN, "s", False, "{:,.1f}",
                kk=c.form_s if c else NAN, kk_na=na, phase=ph),
            Row(f"KIP-848, forming {size - 1:,} members: partitions handed out while another member still owned them (count)",
                float(getattr(a, "form_double_owned", NAN)) if a else NAN, float(getattr(b, "form_double_owned", NAN)) if b else NAN, "", False,
                "{:,.0f}", kk=float(getattr(c, "form_double_owned", NAN)) if c else NAN, kk_na=na, phase=ph, count=True),
            Row(f"KIP-848, forming {size - 1:,} members: ConsumerGroupHeartbeat answered UNKNOWN_MEMBER_ID (count)",
                _form_errors(a, "ConsumerGroupHeartbeat unknown_member_id"), _form_errors(b, "ConsumerGroupHeartbeat unknown_member_id"), "",
                False, "{:,.0f}", kk=_form_errors(c, "ConsumerGroupHeartbeat unknown_member_id"), kk_na=na, phase=ph, count=True),
        ]
    if any(_g(s, "txn", []) for s in res.sides.values()):
        rows += txn_rows(res)
    rows.append(load_row(res))
    if any(_g(s, "tls", {}) for s in res.sides.values() if s is not None):
        rows += tls_rows(res)
    return rows


def _relabel(r: Row, label: str) -> Row:
    import copy

    r = copy.copy(r)
    r.label = label
    return r


def phase_load(res):
    """phase name -> "start → end" of the 1-minute load average."""
    phases = getattr(res, "phases", {})

    def text(name: str) -> str:
        p = phases.get(name)
        if p is None:
            return "–"
        return f"{p.start.split()[0]} → {p.end.split()[0] if p.end else '?'}"

    return text


# =========================================================================== plots
def _bars(ax, labels: list[str], series: list[tuple[str, list[float]]], ylabel: str, title: str, log: bool = False) -> None:
    """Grouped bars, one series per broker: ``series`` is [(KL / KF / KK, values)]."""
    import numpy as np

    x = np.arange(len(labels))
    w = 0.8 / len(series)
    for i, (who, vals) in enumerate(series):
        off = (i - (len(series) - 1) / 2) * w
        v = [y if ok(y) else 0 for y in vals]
        bars = ax.bar(x + off, v, w, label=NAMES[who], color=COLORS[who])
        for bar, val in zip(bars, vals, strict=True):
            if not ok(val):
                ax.annotate("no result", (bar.get_x() + bar.get_width() / 2, 0), ha="center", va="bottom", fontsize=6, rotation=90,
                            xytext=(0, 3), textcoords="offset points", color=COLORS[who])
            elif val > 0:
                ax.annotate(f"{val:,.0f}" if val >= 10 else f"{val:,.1f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=6, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if log:
        ax.set_yscale("log")
    ax.margins(y=0.15)
    ax.legend(fontsize=8)


def _series(res, fn) -> list[tuple[str, list[float]]]:
    """[(broker, fn(side))] for every broker in the run."""
    out = [(KL, fn(res.sides[KL])), (KF, fn(res.sides[KF]))]
    if has_kfake(res):
        out.append((KK, fn(kfake_side(res))))
    return out


def _advantage(r: Row, x: float) -> float:
    """How many times better than Kafka ``x`` is on this figure (> 1: better)."""
    if not (ok(x) and ok(r.kf)) or x <= 0 or r.kf <= 0:
        return NAN
    return x / r.kf if r.higher else r.kf / x


def summary_plot(res, rows: list[Row], ax) -> None:
    import numpy as np

    rows = [r for r in rows if not r.count]
    y = np.arange(len(rows))
    series = [(KL, [_advantage(r, r.kl) for r in rows])]
    if has_kfake(res):
        series.append((KK, [_advantage(r, r.kk) for r in rows]))
    h = 0.8 / len(series)
    for i, (who, vals) in enumerate(series):
        off = (i - (len(series) - 1) / 2) * h
        for yy, v in zip(y + off, vals, strict=True):
            if ok(v):  # a bar from 1 to the factor: right of 1 better than Kafka, left worse
                ax.barh(yy, abs(v - 1) or 0.01, h, left=min(v, 1.0), color=COLORS[who])
                ax.annotate(f"{v:,.1f}×" if v < 10 else f"{v:,.0f}×", (max(v, 1.0), yy), va="center", fontsize=6, xytext=(2, 0),
                            textcoords="offset points")
            else:
                ax.annotate(f"{NAMES[who]}: no result", (1.0, yy), va="center", fontsize=6, xytext=(2, 0), textcoords="offset points",
                            color=COLORS[who])
    from matplotlib.patches import Patch

    ax.axvline(1, color="black", lw=0.8)
    ax.set_xscale("log")
    vals = [v for _, vs in series for v in vs if ok(v) and v > 0]
    if vals:
        ax.set_xlim(min(min(vals), 1.0) / 1.6, max(max(vals), 1.0) * 1.8)
    ax.set_yticks(y, [r.label if len(r.label) < 56 else r.label[:53] + "…" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"times better than Apache {kafka_label(res)} on this figure (log scale; right of 1: better, left: worse)")
    ax.legend(handles=[Patch(color=COLORS[who], label=NAMES[who]) for who, _ in series], fontsize=8)


def plots(res, outdir: Path = IMG) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    made = []
    who = f"kafkalite vs Apache {kafka_label(res)}" + (" and kfake" if has_kfake(res) else "")

    def save(fig, name: str, alt: str) -> None:
        fig.suptitle(f"{who} — {res.started:%Y-%m-%d}, {res.machine.get('cores')} cores, shared machine", fontsize=9)
        fig.tight_layout()
        fig.savefig(outdir / name, dpi=110)
        plt.close(fig)
        made.append((name, alt))

    rows = summary_rows(res)
    fig, ax = plt.subplots(1, 1, figsize=(11, 0.38 * len(rows) + 1.6))
    summary_plot(res, rows, ax)
    save(fig, "compare-summary.png", "Every figure of the summary table as a factor against Apache Kafka")

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    _bars(axes[0], ["spawn → ApiVersions"], _series(res, lambda s: [med(s.startup_api_ms)]), "ms (log scale)", "Start-up (lower is better)", log=True)
    _bars(axes[1], ["after start", "after workloads", "peak"], _series(res, lambda s: [s.idle_rss_mb, s.rss_end_mb, s.peak_rss_mb]),
          "MB", "Resident memory (lower is better)")
    save(fig, "compare-startup.png", "Start-up time and resident memory")

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    cats = [(n, s) for n in ("produce", "consume") for s in (1000, 100)]
    labels = [f"{n}\n{_size(s)}" for n, s in cats] + ["consume 1 KB\n4 MiB\nfetches", "consume 1 KB\n16 MiB\nfetches"]
    _bars(axes[0], labels, _series(res, lambda sd: [_phase(sd, n, s, "mb_per_s") for n, s in cats] + [_fetch(sd, m, "mb_per_s") for m in (4, 16)]),
          "MB/s", "Throughput, confluent-kafka (higher is better)")
    _bars(axes[1], labels, _series(res, lambda sd: [_phase(sd, n, s, "broker_cpu_ms_per_mb") for n, s in cats]
                                   + [_fetch(sd, m, "broker_cpu_ms_per_mb") for m in (4, 16)]),
          "ms CPU per MB", "Broker CPU per MB (lower is better)")
    save(fig, "compare-throughput.png", "Produce and consume throughput and broker CPU per MB")

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    g = group_rows(res)
    _bars(axes[0], ["OffsetCommit", "Heartbeat"], [(KL, [g[0].kl, g[2].kl]), (KF, [g[0].kf, g[2].kf])] + ([(KK, [g[0].kk, g[2].kk])] if has_kfake(res) else []),
          "requests/s", "Request throughput (higher is better)")
    _bars(axes[1], ["OffsetCommit", "Heartbeat"], [(KL, [g[1].kl, g[3].kl]), (KF, [g[1].kf, g[3].kf])] + ([(KK, [g[1].kk, g[3].kk])] if has_kfake(res) else []),
          "µs CPU per request", "Broker CPU per request (lower is better)")
    save(fig, "compare-requests.png", "OffsetCommit and Heartbeat throughput and broker CPU per request")

    fig, ax = plt.subplots(1, 1, figsize=(9, 3.8))
    cats = [(n, k) for n in (10, 100, 1000) for k in ("new", "stable")]
    _bars(ax, [f"N={n}\n{'new' if k == 'new' else 'Stable'}" for n, k in cats], _series(res, lambda s: [_reb(s, n, k, "sync_ms") for n, k in cats]),
          "ms (log scale)", "Classic rebalance: last JoinGroup → all SyncGroup answers (lower is better)", log=True)
    save(fig, "compare-rebalance.png", "Classic rebalance latency")

    sizes = [n for n, _ in res.args.k848]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    labels = [f"N={n}\n{w}" for n in sizes for w in ("first partition", "longest gap")]
    _bars(axes[0], labels, _series(res, lambda s: [_j(_k(s, n), a) for n in sizes for a in ("joiner_wait_ms", "max_gap_ms")]),
          "ms", "KIP-848 join: joiner's wait, longest unowned (lower is better)")
    _bars(axes[1], [f"N={n}" for n in sizes], _series(res, lambda s: [_j(_k(s, n), "revokers") for n in sizes]),
          "members", "KIP-848: members that revoked (lower is better)")
    _bars(axes[2], [f"N={n}" for n in sizes], _series(res, lambda s: [(_k(s, n).form_s if _k(s, n) else NAN) for n in sizes]),
          "s", "KIP-848: forming N − 1 members (lower is better)")
    save(fig, "compare-kip848.png", "KIP-848 join latency, revocations and forming time")
    return made


# =========================================================================== doc
def _all_sides(res) -> list[tuple[str, object]]:
    return [(KL, res.sides[KL]), (KF, res.sides[KF])] + ([(KK, kfake_side(res))] if has_kfake(res) else [])


def kfake_support(res) -> list[str]:
    """What kfake runs here and what it does not, for the notes."""
    v = res.versions.get("kfake", "?")
    if not has_kfake(res):
        return [f"kfake (github.com/twmb/franz-go/pkg/kfake {v}) is not in this run: {getattr(res, 'kfake', '') or 'unknown reason'}."]
    return [
        f"kfake is franz-go's fake Kafka cluster (github.com/twmb/franz-go/pkg/kfake {v}, pinned by `bench/kfake/go.mod`, built with "
        f"{res.versions.get('go', 'go')} into `build/kfake/`), a library Go programs use in tests instead of a broker; `bench/kfake/main.go` "
        f"runs one broker of it on 127.0.0.1 with `group.consumer.heartbeat.interval.ms={K848_MS}`, auto-created topics of 1 partition "
        "(as Kafka's `num.partitions=1`) and kfake's defaults otherwise. It keeps everything in memory (no fsync, no files) during the "
        "workloads, so its produce figures are not a like-for-like comparison with brokers that write a log. It has no "
        "`__consumer_offsets` topic, so the 50 offsets partitions do not apply: groups live in its one-goroutine cluster loop. It "
        "implements every request the workloads send (ApiVersions, Produce, Fetch, OffsetCommit/Fetch, the classic group requests, "
        "KIP-848 ConsumerGroupHeartbeat with the `uniform` and `range` server assignors), so it runs every workload; where its column "
        "says \"failed\" the notes give the error. Its coordinator-load figure uses its optional persistence (`-data-dir`, "
        "`kfake.DataDir`), which saves state on shutdown and reloads it in `NewCluster`; there it runs with "
        "`state.log.compact.bytes` at 1 TiB, because past that size (10 MiB by default) kfake rewrites its whole groups log after "
        "every request, which with only distinct keys makes writing the commits quadratic (it had written about 12 MB of the "
        "500k commits after a minute when first tried).",
        "kfake answers OffsetFetch v7 for a group it does not know with GROUP_ID_NOT_FOUND (Kafka and kafkalite answer no error and no "
        "offsets); the coordinator readiness probe accepts both.",
    ]


def notes(res) -> list[str]:
    kl, kf = res.sides[KL], res.sides[KF]
    out = []
    out.append(
        "The machine is shared: other jobs (test suites, other benchmarks) ran during this run; /proc/loadavg (1, 5, 15 min) at the "
        "start and end of each phase: "
        + ("; ".join(f"{p.name} {p.start} → {p.end or '?'} ({p.seconds:,.0f} s)" for p in getattr(res, "phases", {}).values())
           or "; ".join(f"{name} {la}" for name, la in res.loadavg))
        + f". On {res.machine.get('cores')} cores a load average above "
        "2 means the brokers and the load generator waited for CPU, so treat single figures as ±20 % or worse; the ratios are more "
        "robust because the brokers ran one after the other within each workload.")
    out.append(
        "Kafka's JVM runs many threads (network, request handlers, group coordinator, log cleaner, GC) and can use both cores, and so "
        "can kfake's goroutines; kafkalite runs one asyncio event loop and can use about one. The load generator and the "
        "confluent-kafka client share the same 2 cores, so where the client is the bottleneck the brokers show similar MB/s and only "
        "the broker CPU per MB tells them apart.")
    out.append(
        "Kafka is measured from a cold JVM: each workload runs for seconds, so the JIT compiler is still warming up in the first "
        "workloads (the broker CPU of the JIT threads is counted in Kafka's process CPU).")
    if kf.format_ms:
        out.append(f"Kafka needs `kafka-storage format` (another JVM start, median {med(kf.format_ms):,.0f} ms here) before the first start of a "
                   "fresh node; the start-up figure does not include it. kafkalite and kfake have no such step.")
    out.extend(kfake_support(res))
    for k, side in _all_sides(res):
        ld = getattr(side, "load", {})
        if ld:
            extra = ""
            if "sum_ms" in ld:
                extra = (f" (the {ld.get('partitions', 0)} partitions' own load times, which include their wait for a coordinator "
                         f"thread, add up to {ld['sum_ms']:,} ms, {ld['sum_ms'] - ld.get('sum_sched_ms', 0):,} ms without the time "
                         f"Kafka says was spent in the scheduler; the longest {ld['max_ms']:,} ms)")
            out.append(f"Coordinator load, {k}: {ld.get('records', 0):,} records in {ld.get('ms', NAN):,.1f} ms, measured as {ld.get('how')}"
                       f"{extra}; the commits took {ld.get('write_s', NAN):,.1f} s to write (errors {ld.get('write_errors') or 'none'}); "
                       f"offsets read back after the restart: {'; '.join(ld.get('problems') or []) or 'as committed'}.")
    if not ok(getattr(kf, "load", {}).get("records_per_s", NAN)):
        out.append(f"Kafka's coordinator load was not measured in this run; the summary shows its {KAFKA_PUBLISHED_LOAD} instead.")
    for k, side in _all_sides(res):
        for what, err in side.failures:
            out.append(f"{k}: {what} did not complete: `{err.split(', epochs Counter(')[0][:400]}`.")
    for size, text in sorted(getattr(kl, "k848_log", {}).items()):
        out.append(f"kafkalite's own log of the {size}-member KIP-848 group: {text}")
    for k, side in _all_sides(res):
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
    for k, side in _all_sides(res):
        if side.log_problems:
            top = "; ".join(f"`{e}` ×{n}" for e, n in side.log_problems.most_common(5))
            out.append(f"{k} log warnings/errors: {top}.")
        else:
            out.append(f"{k} logged no warning or error.")
    return out


def render(res, images: list[tuple[str, str]]) -> str:
    a = res.args
    m = res.machine
    kk = has_kfake(res)
    w: list[str] = []
    add = w.append
    add(SECTION)
    add("")
    cmd = "python -m bench.compare" + (" --quick" if a.quick else "") + (f" --only {','.join(a.only)}" if set(getattr(a, "only", [])) != set(PHASES) else "")
    add(f"Generated by `make bench-compare` (`{cmd}`); rerun it to refresh this section.")
    add("")
    add(f"- **Date:** {res.started:%Y-%m-%d %H:%M} UTC (run took {res.elapsed_s:.0f} s)")
    add(f"- **Machine:** {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory')} RAM, {m.get('kernel')}; shared with other jobs "
        f"(load average at the start {res.loadavg[0][1] if res.loadavg else '?'}, at the end {res.loadavg[-1][1] if res.loadavg else '?'})")
    add(f"- **Software:** kafkalite on {m.get('python')} with uvloop {m.get('uvloop')}; Apache Kafka {res.versions.get('kafka')} "
        f"(jars from Maven Central, `tests/reference_kafka.py`) on {res.versions.get('java', 'Java')}; "
        + (f"kfake {res.versions.get('kfake')} (`bench/kfake`, {res.versions.get('go', 'go')}); " if kk else
           f"no kfake ({getattr(res, 'kfake', '')}); ")
        + f"clients confluent-kafka {m.get('confluent-kafka')} and the project's kio-based load generator (`bench/group_client.py`)")
    add("")
    add("### Summary")
    add("")
    add("Every figure from this one run: kafkalite / Kafka is the ratio of the two values, \"Better (by)\" says which of kafkalite and "
        "Kafka is better on that figure and by what factor, and the last column is the 1-minute load average (/proc/loadavg) when the "
        "figure's phase began and when it ended (on 2 cores, above 2 means the brokers and the load generator waited for CPU)."
        + (" kfake (franz-go's in-memory fake Kafka, in Go) is a third column for reference; see the notes for what it does and "
           "does not do." if kk else ""))
    add("")
    rows = summary_rows(res)
    w.extend(table(rows, kafka_label(res), kfake=kk, load=phase_load(res)))
    add("")
    alts = dict(images)
    if "compare-summary.png" in alts:
        add(f"![{alts['compare-summary.png']}](img/compare-summary.png)")
        add("")
    add("### Method")
    add("")
    add(
        "The brokers run side by side on loopback as child processes with fresh data directories, and each workload runs against "
        "kafkalite, then Kafka" + (", then kfake" if kk else "") + " with identical client settings. kafkalite: `python -m broker serve "
        "--fsync interval` (its default: fsync every 1000 ms) `--log-format json`. Kafka: one KRaft node in combined mode (broker + "
        f"controller), `-Xmx{res.kafka_heap} -Xms128m -XX:+UseG1GC`, the settings of `tests/reference_kafka.py` (replication factor 1, 50 offsets "
        "partitions, `group.initial.rebalance.delay.ms=0` as in kafkalite) and Kafka's default flush policy (no fsync by the broker; "
        "the OS writes back). Both group coordinators batch their writes with their default append linger (`group.coordinator.append.linger.ms`: -1, adaptive, in kafkalite and in Kafka from 4.2; 5 ms in Kafka 4.1). For the KIP-848 workload "
        f"all hand out a {K848_MS} ms heartbeat interval (Kafka also needs `group.consumer.min.heartbeat.interval.ms={K848_MS}`). "
        "Broker CPU is the run time of every thread of the broker process: for produce and consume the sum of `/proc/<pid>/task/*/schedstat` (nanoseconds), elsewhere utime+stime from `/proc/<pid>/stat` (10 ms ticks); memory is `VmRSS`/`VmHWM` from "
        "`/proc/<pid>/status`."
    )
    add("")
    add(f"- **Start-up.** From just before the process is spawned until a TCP connection answers ApiVersions v3 (kio, `tests/raw.py`), "
        f"polled every 2 ms; {a.startup_kafkalite + 1} kafkalite" + (f", {a.startup_kafkalite + 1} kfake" if kk else "")
        + f" and {a.startup_kafka + 1} Kafka starts on empty data directories "
        "(the last one is the broker the other workloads then use). Kafka's data directory is formatted before the clock starts.")
    add("- **Idle.** RSS and CPU over 3 s once the brokers are up and their group coordinators answer on every offsets partition "
        "(on Kafka this creates `__consumer_offsets`).")
    add(f"- **Produce / consume.** `bench/workload.py` as in `make bench`, smaller: {a.mb_1k:g} MB of 1 KB and {a.mb_100:g} MB of 100 B values, "
        f"3 partitions, confluent-kafka `Producer` (acks=all, linger.ms 10, batch.size 1 MB) then a `Consumer` with assign() from offset 0 "
        f"(`max.partition.fetch.bytes` 4 MiB, `fetch.max.bytes` 50 MiB); {a.repeats} runs per size per broker, median shown.")
    add(f"- **Fetch size.** {getattr(a, 'mb_fetch', 0):g} MB of 1 KB values in one 3-partition topic, consumed {a.repeats} time(s) with "
        "`fetch.max.bytes` = `max.partition.fetch.bytes` = 4 MiB and as often with 16 MiB, alternating; broker CPU per MB, median.")
    add(f"- **OffsetCommit.** `group_scenarios.commits`: single-partition OffsetCommit v9 of simple groups, {a.commit_groups} groups, "
        f"{a.commit_conns} connections × {a.commit_depth} in flight, {a.seconds:g} s after {a.warmup:g} s warm-up; {a.commit_runs} runs per broker, median.")
    add("- **Transactions.** `bench.txn`: 10 confluent-kafka transactional producers (threads, one transactional id each) run 30 "
        "transactions of 20 records over a fresh 6-partition topic, a seeded fifth of them aborted after their records reached the broker; "
        "then a read_committed consumer checks exactly-once (every committed record once, no aborted one); 2 runs per broker, median "
        "transactions/s, timed from the moment every producer has its producer id (`init_transactions`) to the last commit or abort.")
    add("- **TLS.** `bench.tls_cost` on brokers of their own with PLAINTEXT, SSL and SASL_SSL listeners (a development CA from "
        "`kafkalite certs`' code, PEM keystores on both): confluent-kafka produces and consumes 50 MB of 1 KB records over PLAINTEXT "
        "and over SSL, 3 rounds alternating which goes first, broker CPU per MB (produce plus consume) as the median; then 100 "
        "connections of each kind connect, log in (SASL PLAIN or SCRAM-SHA-512) and get a first Metadata answer, median time. kfake "
        "has no TLS listener.")
    add(f"- **Classic rebalances and Heartbeat.** `group_scenarios.rebalances` (as in `make bench`'s group section): new groups and "
        f"Stable groups whose leader rejoins, 10 members × {a.reps_10}, 100 × {a.reps_100}, 1000 × {a.reps_1000} runs; then every member of "
        f"the last 1000-member group sends Heartbeat v4, 4 in flight each, for {a.seconds:g} s.")
    add("- **KIP-848.** `kip848_scenarios.run_protocol('kip848', …)`: a group of N − 1 simulated ConsumerGroupHeartbeat v1 members on a "
        "topic of N partitions (server-side `uniform` assignor), formed 25 joins at a time, then one member joins; measured are the "
        "time to form the group (until it has settled), the joiner's wait for its first partition, the time until every member has "
        "reconciled, the longest time a moved partition had no owner, and how many existing members had to revoke a partition. The "
        "load generator also counts, while the group forms, partitions handed to a member while another member still owned them and "
        "ConsumerGroupHeartbeat answers with UNKNOWN_MEMBER_ID. "
        + ", ".join(f"N = {n}: {r} join{'s' if r > 1 else ''}" for n, r in a.k848) + ". Members stop without leaving, so every "
        "size after the first runs on fresh brokers (otherwise the previous group's members would expire during it). "
        "While the group forms, its members heartbeat only when they have something to act on, then every 500 ms.")
    add(f"- **Coordinator load.** {getattr(a, 'load_groups', 0):,} simple groups each commit all 100 partitions of a topic in one OffsetCommit "
        "v9 (16 connections × 4 in flight): one offset record per distinct key. The broker is stopped and started on the same data "
        "and the load of those records is timed: kafkalite by its `coordinator loaded` event, Kafka by its per-partition "
        "`Finished loading of metadata from __consumer_offsets-N` lines (the span from the first `Scheduling loading` line to the last "
        "`Finished loading` line)" + (", kfake by the time `kfake.NewCluster` takes with its data directory" if kk else "")
        + "; records/s is records over that time. Then a few groups' offsets are read back.")
    add("")
    add("Ratios are kafkalite / Kafka; \"Better (by)\" says which of the two is better on that figure and by what factor.")
    add("")
    sections = [
        ("Start-up and memory", startup_rows(res), "compare-startup.png"),
        ("Produce and consume (confluent-kafka)", throughput_rows(res), "compare-throughput.png"),
        ("OffsetCommit and Heartbeat throughput", group_rows(res), "compare-requests.png"),
        ("Classic rebalance latency", rebalance_rows(res), "compare-rebalance.png"),
        ("KIP-848 join", k848_rows(res), "compare-kip848.png"),
        ("Coordinator load", [load_row(res)], ""),
    ]
    for title, rows, img in sections:
        add(f"### {title}")
        add("")
        w.extend(table(rows, kafka_label(res), notes=True, kfake=kk))
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


def write(res, out: Path | None = None) -> None:
    """The section into docs/benchmarks.md and the charts into docs/img, or into ``out`` and img/ beside it."""
    doc, img = (DOC, IMG) if out is None else (out, out.parent / "img")
    images = plots(res, img)
    write_section(render(res, images), doc)
    print(f"wrote the '{SECTION}' section of {doc} and {', '.join(n for n, _ in images)} in {img}")


def print_summary(res) -> None:
    kk = has_kfake(res)
    load = phase_load(res)
    for title, rows in (("summary", summary_rows(res)), ("start-up and memory", startup_rows(res)), ("produce/consume", throughput_rows(res)),
                        ("requests", group_rows(res)), ("classic rebalances", rebalance_rows(res)), ("KIP-848", k848_rows(res))):
        print(f"\n== {title}" + ("   (kafkalite, Kafka" + (", kfake" if kk else "") + ", ratio, better, load average)" if title == "summary" else ""))
        for r in rows:
            line = f"  {r.label[:78]:78s} {_cell(r, r.kl, ''):>14s} {_cell(r, r.kf, r.kf_na)[:16]:>16s}"
            if kk:
                line += f" {_cell(r, r.kk, r.kk_na)[:18]:>18s}"
            line += f"  {r.ratio_text():>7s}  {r.better()}"
            if title == "summary":
                line += f"  [{load(r.phase)}]"
            print(line)
    for n in notes(res):
        print("-", n)
