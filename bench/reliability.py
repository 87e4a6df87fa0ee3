"""The reliability report: fuzzing, connection memory, kill -9 and group churn, in docs/reliability.md.

    python -m bench.reliability            # full: about an hour
    python -m bench.reliability --quick    # a few minutes, reduced bounds
    python -m bench.reliability --parts fuzz,killnine --fuzz-seconds 300

Each part runs as a subprocess with a timeout and leaves a JSON report:

* ``fuzz``: the network fuzzer, ``python -m tests.fuzz.network`` (1,000,000
  frames, or as many as fit in ``--fuzz-seconds``, 15 min by default);
* ``protocol-fuzz``: the protocol-level fuzzer, ``python -m tests.fuzz.protocol``;
* ``connections``: ``python -m bench.connections nonreader`` and ``idle``;
* ``killnine``: ``python -m bench.killnine`` (50 restarts);
* ``churn``: ``python -m bench.churn`` for 10 minutes, on kafkalite and on the
  reference Apache Kafka, side by side.

A part whose script is missing, or that fails, is listed as "not run" with
the reason. The JSON reports are kept in ``--json-dir`` (a temporary
directory unless given); the Markdown report goes to ``--out``
(docs/reliability.md). Every table has the date, the load average when the
part started and ended (the machine may be shared), the commit, and the
target with met / not met.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

FUZZ_TARGET_FRAMES = 1_000_000
CHURN_TARGET_SECONDS = 600
IDLE_MB_PER_1000_TARGET = 2.0


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return f.read().strip()


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        commit = out.stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return commit + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _max_frame_bytes() -> int:
    sys.path.insert(0, str(ROOT))
    from broker.config import BrokerConfig

    return BrokerConfig().max_frame_bytes


_STORED: dict[str, dict] = {}  # runs recorded by earlier invocations, by name (--from-json)
_ALL_RUNS: list = []


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass
class Run:
    """One subprocess: its command, what it printed, its JSON."""

    name: str
    cmd: list[str]
    timeout: float
    json_path: Path | None = None
    rc: int | None = None
    seconds: float = 0.0
    load_start: str = ""
    load_end: str = ""
    result: dict | None = None
    problem: str | None = None
    tail: str = ""
    extra: dict = field(default_factory=dict)
    started: str = ""  # date and time (UTC)
    commit: str = ""

    STORED_FIELDS = ("cmd", "timeout", "rc", "seconds", "load_start", "load_end", "result", "problem", "tail", "extra", "started", "commit")

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.STORED_FIELDS}
        d["extra"] = {**self.extra, "stdout": self.extra.get("stdout", "")[-20_000:]}
        return {"name": self.name, **d}

    def go(self) -> Run:
        stored = _STORED.get(self.name)
        if stored is not None:  # --from-json: what an earlier invocation recorded
            for k in self.STORED_FIELDS:
                setattr(self, k, stored.get(k, getattr(self, k)))
            _ALL_RUNS.append(self)
            return self
        _ALL_RUNS.append(self)
        print(f"[reliability] {self.name}: {' '.join(self.cmd)} (timeout {self.timeout:.0f} s)", file=sys.stderr, flush=True)
        self.started = _now()
        self.commit = _commit()
        self.load_start = _loadavg()
        t0 = time.monotonic()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        try:
            proc = subprocess.run(self.cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=self.timeout)
            self.rc = proc.returncode
            out, err = proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            self.problem = f"timed out after {self.timeout:.0f} s"
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        self.seconds = time.monotonic() - t0
        self.load_end = _loadavg()
        self.tail = (err or "")[-3000:]
        self.extra["stdout"] = out or ""
        if self.json_path is not None and self.json_path.exists():
            try:
                self.result = json.loads(self.json_path.read_text())
            except ValueError as exc:
                self.problem = self.problem or f"unreadable JSON: {exc}"
        elif out:
            self.result = _last_json(out)
        if self.result is None and self.problem is None:
            self.problem = f"no JSON report (exit code {self.rc}): {self.tail[-400:].strip()}"
        print(f"[reliability] {self.name}: done in {self.seconds:.0f} s, exit {self.rc}" + (f", {self.problem}" if self.problem else ""),
              file=sys.stderr, flush=True)
        return self


def _last_json(text: str) -> dict | None:
    """The last JSON object in ``text``: a one-line object, or an indented one at the end."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    start = text.rfind("\n{")
    while start >= 0:
        try:
            return json.loads(text[start:])
        except ValueError:
            start = text.rfind("\n{", 0, start)
    return None


# ============================================================== the parts

_TITLES = {
    "fuzz": "Network fuzzer (`tests/fuzz/network.py`)",
    "protocol-fuzz": "Protocol-level fuzzer (`tests/fuzz/protocol.py`)",
    "connections": "Connections (`bench/connections.py`)",
    "killnine": "kill -9 durability (`bench/killnine.py`)",
    "churn": "Consumer-group churn (`bench/churn.py`)",
}


@dataclass
class Section:
    title: str
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # figure, value, target, verdict
    runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_run: str | None = None


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "**not met**")


_DURATIONS = {
    "fuzz": "15 min by default",
    "protocol-fuzz": "10 min",
    "connections": "about 1 min",
    "killnine": "about 2-5 min for 50 restarts",
    "churn": "about 25 min: 10 minutes of churn on kafkalite, then on Apache Kafka, each with its settle time; Kafka needs Java 17+ and Maven",
}


def part_fuzz(args, out: Path) -> Section:
    sec = Section(_TITLES["fuzz"])
    if not (ROOT / "tests/fuzz/network.py").exists():
        sec.not_run = "tests/fuzz/network.py is missing"
        return sec
    frames = args.fuzz_frames
    seconds = args.fuzz_seconds
    js = out / "fuzz.json"
    run = Run("fuzz", [PY, "-m", "tests.fuzz.network", "--frames", str(frames), "--seconds", str(seconds),
                       "--connections", str(args.fuzz_connections), "--json", str(js), "--corpus-dir", str(out / "fuzz-corpus")],
              timeout=seconds + 900, json_path=js).go()
    sec.runs.append(run)
    r = run.result
    if r is None:
        sec.not_run = f"the fuzzer did not report: {run.problem}"
        return sec
    sent = r["frames_sent"]
    reached = sent >= FUZZ_TARGET_FRAMES
    sec.rows += [
        ("frames sent", f"{sent:,} in {r['seconds']:.0f} s ({r['frames_per_s']:.0f}/s), over {r['connections']:,} connections",
         f"{FUZZ_TARGET_FRAMES:,}", _verdict(reached)),
        ("frames the broker had to parse (up to the first one that closes the connection)", f"{r.get('frames_parsed', 0):,}", "", ""),
        ("seed requests", f"{r.get('seeds')}, from {r.get('seeds_source')}", "", ""),
        ("CPU: broker / fuzzer", f"{r.get('broker_cpu_s')} s / {r.get('fuzzer_cpu_s')} s", "", ""),
        ("crashes (process exited or wedged)", str(r["crashes"]), "0", _verdict(r["crashes"] == 0)),
        ("hung connections (10 s bound)", str(r["hangs"]), "0", _verdict(r["hangs"] == 0)),
        ("other connections affected: bystander failures", str(r["bystander_failures"]), "0", _verdict(r["bystander_failures"] == 0)),
        ("other connections affected: fresh-client failures", str(r["fresh_client_failures"]), "0", _verdict(r["fresh_client_failures"] == 0)),
        ("\"handler failed\" on stderr", str(r["handler_failures"]), "0", _verdict(r["handler_failures"] == 0)),
        ("other errors on stderr", str(r["broker_errors"]), "0", _verdict(r["broker_errors"] == 0)),
        ("informational: connections closed with answers owed / answer mismatches / parked",
         f"{r['unexpected_closes']} / {r['answer_mismatches']} / {r['parked']}", "", ""),
    ]
    if not reached:
        sec.notes.append(f"Stopped by the {seconds:.0f} s bound at {sent:,} frames: the 1,000,000-frame target needs "
                         f"about {FUZZ_TARGET_FRAMES / max(r['frames_per_s'], 1) / 60:.0f} min at this rate on this machine.")
    sec.notes += _finding_notes(r)
    return sec


def _finding_notes(r: dict) -> list[str]:
    """One line per kind of finding, with its count over the whole run and an example frame."""
    notes = []
    examples: dict = {}
    for h in r.get("handler_failure_details", []):
        last = ((h.get("traceback") or "").strip().splitlines() or [""])[-1]
        examples.setdefault(f"{h.get('api')}: {last[:160]}", (h.get("frame") or {}).get("hex", ""))
    for kind, n in (r.get("handler_failures_by_kind") or {}).items():
        frame = examples.get(kind, "")
        notes.append(f"handler failure ({n}×): {kind}" + (f" — frame `{frame[:200]}`" if frame else ""))
    kinds = r.get("hangs_by_first_unanswered") or {}
    if kinds:
        notes.append("hung connections by their first unanswered request: " + ", ".join(f"{kind} {n}" for kind, n in kinds.items()))
        names = _api_names()
        shown = set()
        for h in r.get("hang_details", []):
            first = h.get("first_unanswered") or {}
            label = f"{names.get(first.get('api_key'), first.get('api_key'))} v{first.get('version')}"
            if first.get("hex") and label not in shown and len(shown) < 3:
                shown.add(label)
                notes.append(f"a hung connection's first unanswered request, {label}: `{first['hex'][:200]}`")
    for c in r.get("crash_details", [])[:5]:
        m = c.get("minimized") or {}
        frame = m.get("frame") or {}
        notes.append(f"{c.get('kind')}: exit code {c.get('returncode')}; " +
                     (f"single frame API {frame.get('api_key')} v{frame.get('version')} `{frame.get('hex', '')[:200]}`" if frame else f"shrinking: {m}"))
    for kind, n in (r.get("broker_errors_by_kind") or {}).items():
        notes.append(f"broker stderr error ({n}×): `{kind}`")
    return notes


def _api_names() -> dict:
    try:
        sys.path.insert(0, str(ROOT))
        from broker.handlers import HANDLERS

        return {key: mod.NAME for key, mod in HANDLERS.items()}
    except Exception:  # noqa: BLE001 - names are a nicety
        return {}


_PROTOCOL_SUMMARY = re.compile(
    r"frames (?P<frames>\d+)\s+crashes (?P<crashes>\d+)\s+hangs (?P<hangs>\d+)\s+exceptions (?P<exceptions>\d+)\s+"
    r"seconds (?P<seconds>\d+)\s+rate (?P<rate>\d+)/s(?:\s+slowest frame (?P<slowest>[\d.]+) ms)?"
)


def part_protocol_fuzz(args, out: Path) -> Section:
    sec = Section(_TITLES["protocol-fuzz"])
    if not (ROOT / "tests/fuzz/protocol.py").exists():
        sec.not_run = "tests/fuzz/protocol.py is missing"
        return sec
    seconds = args.protocol_fuzz_seconds
    run = Run("protocol-fuzz", [PY, "-m", "tests.fuzz.protocol", "--frames", str(args.protocol_fuzz_frames), "--seconds", str(seconds),
                                "--jobs", "1", "--corpus", str(out / "protocol-corpus")],
              timeout=seconds + 600)
    run.go()
    sec.runs.append(run)
    # it prints one summary line, not JSON
    text = run.extra.get("stdout", "")
    matches = list(_PROTOCOL_SUMMARY.finditer(text))
    m = matches[-1] if matches else None
    if m is None:
        sec.not_run = f"no summary line from the protocol fuzzer: {run.problem or run.tail[-300:]}"
        return sec
    r = {k: (float(v) if k == "slowest" else int(v)) for k, v in m.groupdict().items() if v is not None}
    run.result, run.problem = r, None
    sec.rows += [
        ("frames given to `ServerConnection.receive_data`", f"{r['frames']:,} in {r['seconds']} s ({r['rate']:,}/s)", "", ""),
        ("crashes (the process died)", str(r["crashes"]), "0", _verdict(r["crashes"] == 0)),
        ("hangs", str(r["hangs"]), "0", _verdict(r["hangs"] == 0)),
        ("exceptions other than ProtocolError", str(r["exceptions"]), "0", _verdict(r["exceptions"] == 0)),
    ]
    if "slowest" in r:
        sec.rows.append(("slowest frame", f"{r['slowest']} ms", "", ""))
    return sec


def part_connections(args, out: Path) -> Section:
    sec = Section(_TITLES["connections"])
    if not (ROOT / "bench/connections.py").exists():
        sec.not_run = "bench/connections.py is missing"
        return sec
    limit_mb = 2 * _max_frame_bytes() / 1e6
    nonreader = Run("connections nonreader", [PY, "-m", "bench.connections", "nonreader", "--seconds", str(args.nonreader_seconds)],
                    timeout=args.nonreader_seconds + 300).go()
    idle = Run("connections idle", [PY, "-m", "bench.connections", "idle", "--count", str(args.idle_count)], timeout=900).go()
    sec.runs += [nonreader, idle]
    r = nonreader.result
    if r is not None and r.get("rss_max_mb") is not None:
        held = r["rss_max_mb"] - r["rss_before_mb"]
        sec.rows += [
            ("non-reading client: RSS before / max while it sends / after it leaves (MB)",
             f"{r['rss_before_mb']:.1f} / {r['rss_max_mb']:.1f} / {r['rss_after_leave_mb']:.1f}", "", ""),
            ("non-reading client: RSS it holds (max − before)", f"{held:.1f} MB",
             f"≤ 2 × socket.request.max.bytes = {limit_mb:.0f} MB", _verdict(held <= limit_mb)),
            ("another client's ApiVersions meanwhile: median / max", f"{r.get('probe_api_versions_ms_median')} / {r.get('probe_api_versions_ms_max')} ms", "", ""),
        ]
    else:
        sec.notes.append(f"nonreader: not run: {nonreader.problem}")
    r = idle.result
    if r is not None and r.get("mb_per_1000") is not None:
        sec.rows += [
            (f"{r['connections']:,} idle connections: RSS before / open / after they close (MB)",
             f"{r['rss_before_mb']:.1f} / {r['rss_open_mb']:.1f} / {r['rss_after_close_mb']:.1f}", "", ""),
            ("RSS per 1,000 idle connections", f"{r['mb_per_1000']:.2f} MB", f"≤ {IDLE_MB_PER_1000_TARGET:g} MB",
             _verdict(r["mb_per_1000"] <= IDLE_MB_PER_1000_TARGET)),
            ("RSS given back after they close", f"{r['rss_open_mb'] - r['rss_after_close_mb']:.1f} of {r['rss_open_mb'] - r['rss_before_mb']:.1f} MB", "", ""),
        ]
    else:
        sec.notes.append(f"idle: not run: {idle.problem}")
    return sec


def part_killnine(args, out: Path) -> Section:
    sec = Section(_TITLES["killnine"])
    if not (ROOT / "bench/killnine.py").exists():
        sec.not_run = "bench/killnine.py is missing"
        return sec
    js = out / "killnine.json"
    run = Run("killnine", [PY, "-m", "bench.killnine", "--restarts", str(args.restarts), "--json", str(js)],
              timeout=120 + args.restarts * 60, json_path=js).go()
    sec.runs.append(run)
    r = run.result
    if r is None:
        sec.not_run = f"killnine did not report: {run.problem}"
        return sec
    sec.rows += [
        ("restarts (SIGKILL, restart on the same port and data directory)", str(r["restarts"]), str(args.restarts), _verdict(r["restarts"] == args.restarts)),
        ("acknowledged records (acks=all)", f"{r['acked_records']:,}", "", ""),
        ("acknowledged records lost", str(r["records_lost"]), "0", _verdict(r["records_lost"] == 0)),
        ("acknowledged commits (synchronous)", f"{r['acked_commits']:,}", "", ""),
        ("acknowledged commits lost", str(r["commits_lost"]), "0", _verdict(r["commits_lost"] == 0)),
        ("records stored but never acknowledged (retries after a lost ack)", str(r.get("stored_not_acked")), "", ""),
        ("broker fsync policy", str(r["fsync"]), "", ""),
        ("duration", f"{r['duration_s']:.0f} s", "", ""),
    ]
    if r.get("client_errors"):
        sec.notes.append(f"client errors: {r['client_errors']}")
    if r.get("handler_failures"):
        sec.notes.append(f"\"handler failed\" on the broker's stderr: {r['handler_failures']}")
    return sec


def part_churn(args, out: Path) -> Section:
    sec = Section(_TITLES["churn"])
    if not (ROOT / "bench/churn.py").exists():
        sec.not_run = "bench/churn.py is missing"
        return sec
    results = {}
    for broker in ("kafkalite", "kafka"):
        js = out / f"churn-{broker}.json"
        run = Run(f"churn {broker}", [PY, "-m", "bench.churn", "--broker", broker, "--seconds", str(args.churn_seconds), "--json", str(js)],
                  timeout=args.churn_seconds + 900, json_path=js).go()
        sec.runs.append(run)
        results[broker] = run
    sec.rows.append(("", "kafkalite", "Apache Kafka (reference)", ""))
    keys = [("churn seconds", "churn_seconds"), ("joins / leaves / crashes", None), ("overlapping assignments", "overlaps"),
            ("unowned partitions after settling", "unowned_after_settle"), ("doubly owned after settling", "doubly_owned_after_settle"),
            ("backwards commits", "backwards_commits"), ("successful commits", "commits_ok")]

    def cell(broker, key):
        r = results[broker].result
        if r is None:
            return f"not run: {results[broker].problem}"
        if key is None:
            return f"{r.get('joins')} / {r.get('leaves')} / {r.get('crashes')}"
        return str(r.get(key))

    for label, key in keys:
        sec.rows.append((label, cell("kafkalite", key), cell("kafka", key), ""))
    r = results["kafkalite"].result
    if r is not None:
        violations = sum(int(r.get(k) or 0) for k in ("overlaps", "unowned_after_settle", "doubly_owned_after_settle", "backwards_commits"))
        long_enough = float(r.get("churn_seconds") or 0) >= CHURN_TARGET_SECONDS * 0.98
        sec.notes.append(f"Target (kafkalite): churn for 10 minutes with 0 invariant violations — {violations} violations over "
                         f"{float(r.get('churn_seconds') or 0):.0f} s: **{'met' if violations == 0 and long_enough else 'not met'}**"
                         + ("" if long_enough else " (a shorter run than the target)"))
    return sec


PARTS = {"fuzz": part_fuzz, "protocol-fuzz": part_protocol_fuzz, "connections": part_connections, "killnine": part_killnine, "churn": part_churn}


# ============================================================== the report


def render(sections: list[Section], *, commit: str, started: str, load_start: str, quick: bool, command: str, json_dir: Path) -> str:
    lines = [
        "# Reliability",
        "",
        f"Generated by `{command}` on {started} at commit {commit}. "
        f"Load average (`/proc/loadavg`) at the start: `{load_start}`. Each part below gives its own date, commit and "
        "load average (the machine may be shared: the load average says how much)."
        + (" **Quick mode**: bounds are reduced, so the full targets cannot all be met." if quick else ""),
        "",
        "Targets: 1,000,000 fuzzed frames with 0 crashes, 0 hangs and 0 other connections affected; "
        "a non-reading client holds at most 2 × `socket.request.max.bytes`; at most 2 MB RSS per 1,000 idle connections; "
        "consumer-group churn for 10 minutes with 0 invariant violations; no acknowledged record or commit lost to `kill -9`.",
        "",
        f"The JSON reports were written to `{json_dir}`.",
        "",
        "What the data directory holds, how its metadata is written and recovered when a file is lost or damaged "
        "(tested by `tests/integration/test_metadata_recovery.py`): [data-directory.md](data-directory.md).",
        "",
    ]
    for sec in sections:
        lines += [f"## {sec.title}", ""]
        if sec.not_run:
            lines += [f"Not run: {sec.not_run}.", ""]
            continue
        for run in sec.runs:
            lines.append(f"- `{' '.join(_short(c) for c in run.cmd)}`: {run.started}, commit {run.commit}, {run.seconds:.0f} s, "
                         f"load average `{run.load_start}` → `{run.load_end}`" + (f"; {run.problem}" if run.problem else ""))
        lines.append("")
        if sec.rows:
            header = sec.rows[0] if sec.rows[0][0] == "" else None
            if header:
                lines += ["| | kafkalite | Apache Kafka (reference) |", "|---|---|---|"]
                lines += [f"| {a} | {b} | {c} |" for a, b, c, _ in sec.rows[1:]]
            else:
                lines += ["| figure | value | target | |", "|---|---|---|---|"]
                lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in sec.rows]
            lines.append("")
        for note in sec.notes:
            lines.append(f"- {note}")
        if sec.notes:
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _short(arg: str) -> str:
    if arg == PY:
        return "python"
    if arg.startswith(tempfile.gettempdir()):
        return Path(arg).name
    return arg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.reliability", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="reduced bounds: a few minutes in all")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, from {', '.join(PARTS)}")
    ap.add_argument("--out", type=Path, default=ROOT / "docs/reliability.md")
    ap.add_argument("--json-dir", type=Path, default=None)
    ap.add_argument("--fuzz-frames", type=int, default=None)
    ap.add_argument("--fuzz-seconds", type=float, default=None)
    ap.add_argument("--fuzz-connections", type=int, default=32)
    ap.add_argument("--protocol-fuzz-seconds", type=float, default=None)
    ap.add_argument("--protocol-fuzz-frames", type=int, default=None)
    ap.add_argument("--restarts", type=int, default=None)
    ap.add_argument("--churn-seconds", type=float, default=None)
    ap.add_argument("--nonreader-seconds", type=float, default=None)
    ap.add_argument("--idle-count", type=int, default=None)
    ap.add_argument("--from-json", type=Path, nargs="+", default=None, metavar="DIR",
                    help="run nothing: rebuild the report from the runs.json of earlier --json-dir directories (later ones win)")
    args = ap.parse_args(argv)
    stored_args: dict[str, dict] = {}
    if args.from_json:
        for d in args.from_json:
            saved = json.loads((d / "runs.json").read_text())
            for run in saved["runs"]:
                _STORED[run["name"]] = run
            for part in saved["parts"]:
                stored_args[part] = saved["args"]
    q = args.quick
    defaults = {
        "fuzz_frames": 20_000 if q else FUZZ_TARGET_FRAMES,
        "fuzz_seconds": 60 if q else 900,
        "protocol_fuzz_seconds": 60 if q else 600,
        "protocol_fuzz_frames": 50_000 if q else 5_000_000,
        "restarts": 5 if q else 50,
        "churn_seconds": 60 if q else CHURN_TARGET_SECONDS,
        "nonreader_seconds": 5 if q else 15,
        "idle_count": 2000 if q else 10_000,
    }
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if args.from_json:
        parts = [p for p in PARTS if p in stored_args]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown parts {unknown}")
    json_dir = args.json_dir or (args.from_json[-1] if args.from_json else Path(tempfile.mkdtemp(prefix="kafkalite-reliability-")))
    json_dir.mkdir(parents=True, exist_ok=True)
    started = _now()
    load_start = _loadavg()
    commit = _commit()
    sections = []
    for name in PARTS:
        if name in parts:
            part_args = argparse.Namespace(**{**vars(args), **stored_args[name]}) if name in stored_args else args
            sections.append(PARTS[name](part_args, json_dir))
        else:
            sections.append(Section(_TITLES[name], not_run=f"left out of this invocation (`--parts`); `python -m bench.reliability --parts {name}` runs it ({_DURATIONS[name]})"))
    if not args.from_json:
        keep = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "from_json"}
        (json_dir / "runs.json").write_text(json.dumps(
            {"started": started, "commit": commit, "load_start": load_start, "parts": parts, "args": keep,
             "runs": [r.to_dict() for r in _ALL_RUNS]}, indent=1, default=str))
    command = "python -m bench.reliability" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    quick = q or any(a.get("quick") for a in stored_args.values())
    text = render(sections, commit=commit, started=started, load_start=load_start, quick=quick, command=command.strip(), json_dir=json_dir)
    args.out.write_text(text)
    (json_dir / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
