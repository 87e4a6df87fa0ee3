"""The broker's imports on the way to READY, from ``python -X importtime``, over N starts.

    python -m bench.import_time [-n 9] [--top 25] [--base DIR]

Each start is ``python -X importtime -m broker serve`` on a fresh data
directory, stopped once it printed READY. Prints the median of the sum of
every module's own import time (what importing cost in all), then the modules
with the largest median cumulative time, indented as imported. ``--base DIR``
also starts brokers from another source tree (``git archive <commit> | tar -x
-C DIR``), alternating with this one, and prints both. Times include
``-X importtime``'s own overhead; compare trees, not absolute figures.
It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .compare import loadavg
from .spawn import ROOT


def _imports(root: Path, data_dir: Path) -> dict[str, tuple[int, int, int]]:
    """module -> (self µs, cumulative µs, depth) of one start from ``root``."""
    p = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "broker", "serve", "--host", "127.0.0.1", "--port", "0",
                          "--data-dir", str(data_dir), "--log-format", "json"],
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline()
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    if not line.startswith(b"READY"):
        raise RuntimeError(f"the broker from {root} did not start: {err.decode(errors='replace')[-2000:]}")
    out = {}
    for text in err.decode(errors="replace").splitlines():
        if not text.startswith("import time:") or "self [us]" in text:
            continue
        own, cumulative, name = text[len("import time:"):].split("|")
        out.setdefault(name.strip(), (int(own), int(cumulative), (len(name) - len(name.lstrip()) - 1) // 2))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=9, help="starts per tree (default 9)")
    ap.add_argument("--top", type=int, default=25, help="modules listed per tree (default 25)")
    ap.add_argument("--base", type=Path, help="also start brokers from this source tree, alternating with this one")
    a = ap.parse_args()
    trees = {"this": ROOT} | ({"base": a.base.resolve()} if a.base else {})
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-imports-"))
    print(f"loadavg before: {loadavg()}")
    try:
        for i in range(a.n):
            for name, root in trees.items():
                runs[name].append(_imports(root, tmp / f"{name}-{i}"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"loadavg after: {loadavg()}")
    for name, starts in runs.items():
        totals = [sum(own for own, _, _ in s.values()) / 1000 for s in starts]
        print(f"[{name}: {trees[name]}] all imports (sum of self times): median {statistics.median(totals):.1f} ms, "
              f"min {min(totals):.1f} ms (n={len(totals)})")
        cumulative = {m: statistics.median(s[m][1] for s in starts if m in s) for m in starts[0]}
        for m in sorted(cumulative, key=cumulative.get, reverse=True)[:a.top]:
            print(f"  {cumulative[m] / 1000:7.1f} ms  {'  ' * starts[0][m][2]}{m}")


if __name__ == "__main__":
    main()
