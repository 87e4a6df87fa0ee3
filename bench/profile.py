"""Profile the broker under cProfile for a produce phase and a consume phase.

    python -m bench.profile [--size 1000] [--mb 200] [--top 25] [--out DIR]

The broker runs as ``python -m cProfile -o FILE -m broker serve ...``: one
process for the produce phase, then a second on the same data directory for
the consume phase, so each profile holds one phase (plus start-up and
shutdown). Prints the top functions by own time and by cumulative time.
Not part of ``make bench``: cProfile slows the broker down a lot.
"""

from __future__ import annotations

import argparse
import pstats
import shutil
import tempfile
from pathlib import Path

from . import workload
from .spawn import ROOT, Broker


def run_phase(data: Path, out: Path, fn, topic: str, size: int, count: int, create: bool) -> workload.Phase:
    broker = Broker(data, "--fsync", "interval", python_args=["-m", "cProfile", "-o", str(out)]).start()
    try:
        if create:
            workload.create_topic(broker.bootstrap, topic)
        return fn(broker.bootstrap, broker.pid, topic, size, count)
    finally:
        broker.stop()


def show(path: Path, top: int) -> None:
    for key in ("tottime", "cumulative"):
        print(f"\n=== {path.name}: top {top} by {key} ===")
        pstats.Stats(str(path)).sort_stats(key).print_stats(top)
    # the project's own code only, without the import-time noise of start-up
    own = f"{ROOT}/(broker|protocol|storage)/"
    print(f"\n=== {path.name}: project code, top {top} by cumulative ===")
    pstats.Stats(str(path)).sort_stats("cumulative").print_stats(own, top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile")
    ap.add_argument("--size", type=int, default=1000, help="record value size in bytes (default 1000)")
    ap.add_argument("--mb", type=float, default=200, help="MB of values to move (default 200)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path, default=None, help="where to keep the .prof files (default: a temp dir)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-prof-"))
    out = args.out or tmp
    out.mkdir(parents=True, exist_ok=True)
    count = int(args.mb * 1e6 / args.size)
    topic = f"prof-{args.size}b"
    data = tmp / "data"
    for name, fn, create in (("produce", workload.produce, True), ("consume", workload.consume, False)):
        prof = out / f"{name}-{args.size}b.prof"
        phase = run_phase(data, prof, fn, topic, args.size, count, create)
        print(
            f"{name}: {phase.mb_per_s:.1f} MB/s under cProfile, broker CPU {phase.broker_cpu_s:.2f} s "
            f"({phase.broker_cpu_ms_per_mb:.1f} ms/MB); profile in {prof}"
        )
        show(prof, args.top)
    shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
