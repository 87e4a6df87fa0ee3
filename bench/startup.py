"""Start-up time: spawn -> first ApiVersions answered, over N starts.

    python -m bench.startup [-n 15] [--bytecode-cache DIR] [--base DIR] [-- more broker flags]

Each start is ``bench.compare.start_kafkalite`` (``python -m broker serve``
on a fresh data directory, an ApiVersions v3 poller every 2 ms from just
before exec), so the figure is the one ``make bench-compare`` reports. Prints
every start, then the median and minimum, the broker's CPU time by its first
answer (utime+stime in clock ticks, and the threads' on-CPU time from
schedstat in nanoseconds: both less sensitive to a busy machine than wall
time), and /proc/loadavg before and after.
``--base DIR`` also starts brokers from another source tree (for example
``git archive <commit> | tar -x -C DIR``), alternating with this one start by
start, so that before and after see the same load, and reports both::

    python -m bench.startup -n 15 --base /tmp/base

It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import tempfile
from pathlib import Path

from .compare import loadavg, start_kafkalite
from .procstat import cpu_seconds, oncpu_seconds
from .spawn import ROOT


def _startup_ms(log: str) -> float:
    m = re.search(r'"startup_ms": ([0-9.]+)', log)
    return float(m.group(1)) if m else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="starts (default 15)")
    ap.add_argument("--bytecode-cache", metavar="DIR", help="run the broker with PYTHONPYCACHEPREFIX=DIR and bytecode writing on, "
                    "after one unmeasured start that fills DIR: start-up as an installed package has it (pip compiles), "
                    "rather than recompiling every module of a checkout under PYTHONDONTWRITEBYTECODE=1")
    ap.add_argument("--base", type=Path, help="also start brokers from this source tree, alternating with this one")
    ap.add_argument("extra", nargs="*", help="more broker flags (after --)")
    a = ap.parse_args()
    if a.bytecode_cache:
        os.environ["PYTHONPYCACHEPREFIX"] = str(Path(a.bytecode_cache).resolve())
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    import tests.raw  # noqa: F401 - the poller's imports, done before the first clock starts
    from protocol.codec import request_class, response_class

    request_class(18, 3), response_class(18, 3)
    trees = {"this": ROOT} | ({"base": a.base.resolve()} if a.base else {})
    runs: dict[str, dict[str, list[float]]] = {t: {"api": [], "ready": [], "cpu": [], "oncpu": [], "own": []} for t in trees}
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-startup-"))
    print(f"loadavg before: {loadavg()}")
    try:
        if a.bytecode_cache:
            for name, root in trees.items():
                start_kafkalite(tmp / f"warm-{name}", *a.extra, root=root).stop()
        for i in range(a.n):
            for name, root in trees.items():
                s = start_kafkalite(tmp / f"{name}-{i}", *a.extra, root=root)
                r = runs[name]
                r["api"].append(s.api_versions_s * 1000)
                r["ready"].append(s.ready_s * 1000)
                r["cpu"].append(cpu_seconds(s.pid) * 1000)  # by the first answer (and READY): less sensitive to a busy machine than wall time
                r["oncpu"].append(oncpu_seconds(s.pid) * 1000)
                r["own"].append(_startup_ms(s.handle.logs()))
                s.stop()
                print(f"  {name} start {i + 1:2d}: ApiVersions {r['api'][-1]:6.1f} ms  READY {r['ready'][-1]:6.1f} ms  "
                      f"(startup_ms {r['own'][-1]:5.1f}, CPU {r['cpu'][-1]:4.0f} ms, on-CPU {r['oncpu'][-1]:5.1f} ms)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"loadavg after: {loadavg()}")
    for name, r in runs.items():
        label = f"[{name}: {trees[name]}] " if len(trees) > 1 else ""
        print(f"{label}ApiVersions: median {statistics.median(r['api']):.1f} ms, min {min(r['api']):.1f} ms (n={len(r['api'])})")
        print(f"{label}READY line:  median {statistics.median(r['ready']):.1f} ms, min {min(r['ready']):.1f} ms")
        print(f"{label}broker CPU (utime+stime) by then: median {statistics.median(r['cpu']):.0f} ms, min {min(r['cpu']):.0f} ms")
        print(f"{label}broker on-CPU (schedstat) by then: median {statistics.median(r['oncpu']):.1f} ms, min {min(r['oncpu']):.1f} ms")
        print(f"{label}startup_ms (the broker's own, data dir to READY): median {statistics.median(r['own']):.1f} ms")

if __name__ == "__main__":
    main()
