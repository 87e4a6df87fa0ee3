"""``make test``: the suite as jobs of whole directories (or halves of one), two at a time.

    python -m tests.parallel [--jobs N] [--list] [pytest args ...]

The machine has two cores and most of a test's time is waiting (a broker's timer,
a JVM starting, a client's back-off), so two pytest processes side by side take
little more than half the time of one. Each job is one pytest run over a
directory, so the session fixtures of a directory (a reference Kafka, a built
toolchain, the Docker engine) start once in it, and its session hooks (the
conformance report, the client matrix) see all of its results. The longest jobs
go first, so that neither slot is left with a long job at the end.

A job's output goes to ``build/tests/<job>.log`` and is printed whole when the job
ends (the two never interleave); its JUnit report is ``build/test-report-<job>.xml``.
The exit status is 0 only if every job passed. ``KAFKALITE_TEST_JOBS`` (or
``--jobs``) sets how many run at once; 1 runs them one after the other.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "tests"

# integration is the longest directory: it runs as two jobs, split by file name
_INTEGRATION = sorted(p.name for p in (ROOT / "tests" / "integration").glob("test_*.py"))
_HALF = "test_m"  # test_multinode* onwards in the second half


def jobs() -> list[tuple[str, list[str]]]:
    """(name, pytest paths), longest first."""
    first = [f"tests/integration/{n}" for n in _INTEGRATION if n < _HALF]
    second = [f"tests/integration/{n}" for n in _INTEGRATION if n >= _HALF]
    whole = ["clients", "conformance", "docker", "peers", "security", "soak", "pipeline", "unit", "fuzz"]
    return [("integration-1", first), ("integration-2", second), *((d, [f"tests/{d}"]) for d in whole)]


def covered() -> set[str]:
    """Every test file the jobs run (tests/unit/test_parallel.py checks that none is left out)."""
    out = set()
    for _, paths in jobs():
        for p in paths:
            path = ROOT / p
            out |= {str(f.relative_to(ROOT)) for f in path.rglob("test_*.py")} if path.is_dir() else {p}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.parallel", description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("KAFKALITE_TEST_JOBS", "2")))
    ap.add_argument("--list", action="store_true", help="print the jobs and exit")
    args, extra = ap.parse_known_args(argv)
    todo = jobs()
    if args.list:
        for name, paths in todo:
            print(name, " ".join(paths))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    ended: queue.Queue = queue.Queue()  # (name, exit status, seconds) of each job, as it ends
    failed: list[str] = []
    pending, running = list(todo), 0
    while pending or running:
        while pending and running < max(1, args.jobs):
            name, paths = pending.pop(0)
            threading.Thread(target=_job, args=(name, paths, extra, ended), daemon=True).start()
            running += 1
            print(f"---- {name} started ({' '.join(paths) if len(paths) < 4 else f'{len(paths)} files'})", flush=True)
        name, code, seconds = ended.get()
        running -= 1
        print(f"==== {name}: exit {code} in {seconds:.0f} s ====", flush=True)
        with contextlib.suppress(OSError):
            sys.stdout.write((OUT / f"{name}.log").read_text(errors="replace"))
        sys.stdout.flush()
        if code != 0:
            failed.append(name)
    print(f"make test: {len(todo)} jobs in {time.monotonic() - began:.0f} s; " + (f"FAILED: {', '.join(failed)}" if failed else "all passed"), flush=True)
    return 1 if failed else 0


def _job(name: str, paths: list[str], extra: list[str], ended: queue.Queue) -> None:
    """Run one job's pytest, its output into its log; put (name, exit status, seconds) on ``ended``."""
    t0 = time.monotonic()
    argv = [sys.executable, "-m", "pytest", "-q", "--durations=15", f"--junitxml=build/test-report-{name}.xml", *extra, *paths]
    code = 1  # unless the run says otherwise: the main loop never waits for a job that is gone
    try:
        with open(OUT / f"{name}.log", "wb") as log:
            code = subprocess.run(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
    except OSError as exc:  # no log file, no interpreter: the job failed, and says why
        print(f"{name}: could not run {' '.join(argv)}: {exc}", file=sys.stderr, flush=True)
    finally:
        ended.put((name, code, time.monotonic() - t0))


if __name__ == "__main__":
    sys.exit(main())
