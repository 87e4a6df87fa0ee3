"""Broker CPU per 1000-member classic rebalance, with bench-compare's rebalance load, against kafkalite alone.

Each round forms a new classic group of ``--members`` members (KIP-394: every
member is handed its id, then all rejoin at once), then makes it rebalance
``--stable`` times while Stable (the leader rejoins, then every follower at
once: ``bench.group_scenarios.rebalance_stable``, the load of ``make
bench-compare``'s 1000-member row), and finally empties it with one LeaveGroup.
It prints, per round, the broker's CPU (the ``schedstat`` run time of all its
threads, in nanoseconds, not clock ticks) for the new group's rebalance and the
median of the Stable ones, their windows as the client saw them (last JoinGroup
sent to last SyncGroup answered) and /proc/loadavg.

``--base DIR`` runs a second broker from another source tree (for example
``git archive <commit> | tar -x -C DIR``) and alternates the rounds between
the two, so that before and after see the same load::

    python -m bench.classic_cost --rounds 5 --base /tmp/base

``--spy FILE`` records a py-spy raw profile of this tree's broker during the
Stable rebalances of its first round (py-spy next to the Python running this).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from . import group_scenarios as gs
from .compare import loadavg, run_async
from .procstat import cpu_split, oncpu_seconds
from .spawn import Broker, stop_all

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120.0


async def _round(port: int, pid: int, group: str, args, spy: Path | None) -> dict:
    conns = await gs.connect("127.0.0.1", port, args.members)
    admin = (await gs.connect("127.0.0.1", port, 1))[0]
    try:
        c0 = oncpu_seconds(pid)
        members, new = await gs.form_group(conns, group, pid, TIMEOUT)
        new_cpu = oncpu_seconds(pid) - c0
        leader = new.leader
        profiler = None
        if spy is not None:
            py_spy = Path(sys.executable).with_name("py-spy")
            profiler = subprocess.Popen([str(py_spy), "record", "-r", "1000", "-f", "raw", "-o", str(spy), "--pid", str(pid)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await asyncio.sleep(1.0)  # py-spy attaches
        stable = []
        try:
            for _ in range(args.stable):
                c0, (_, sys0) = oncpu_seconds(pid), cpu_split(pid)
                s = await gs.rebalance_stable(members, leader, pid, TIMEOUT)
                cpu, sys_s = oncpu_seconds(pid) - c0, cpu_split(pid)[1] - sys0
                if s.generations != 1 or s.errors:
                    raise RuntimeError(f"a Stable rebalance took {s.generations} generations, errors {s.errors}")
                stable.append((cpu, s.sync_ms, sys_s))
                leader = s.leader
        finally:
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait()
        await gs.leave_all(admin, members)
        return {
            "new_cpu_ms": new_cpu * 1000,
            "new_ms": new.sync_ms,
            "stable_cpu_ms": statistics.median(c for c, _, _ in stable) * 1000,
            "stable_ms": statistics.median(w for _, w, _ in stable),
            # clock ticks: only their sum over the round means something
            "stable_sys_share": sum(k for _, _, k in stable) / sum(c for c, _, _ in stable),
        }
    finally:
        admin.close()
        for c in conns:
            c.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.classic_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stable", type=int, default=10, help="Stable rebalances per round")
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--base", type=Path, help="also run a broker from this source tree, alternating with this one")
    ap.add_argument("--spy", type=Path, help="py-spy raw profile of this tree's broker during the Stable rebalances")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="classic-cost-"))
    trees = {"this": ROOT} | ({"base": args.base} if args.base else {})
    brokers = {name: Broker(tmp / name, "--fsync", "interval", "--log-format", "json", root=tree).start() for name, tree in trees.items()}
    totals: dict[str, list[dict]] = {name: [] for name in brokers}
    try:
        for r in range(args.rounds):
            for name, b in brokers.items():
                spy = args.spy if name == "this" and args.spy is not None and r == 0 else None
                out = run_async(_round(b.port, b.pid, f"classic-cost-{r}", args, spy))
                totals[name].append(out)
                print(f"{name:5} round {r + 1}: Stable {out['stable_cpu_ms']:.1f} ms broker CPU (window {out['stable_ms']:.1f} ms, {out['stable_sys_share']:.0%} in the kernel), "
                      f"new group {out['new_cpu_ms']:.1f} ms (window {out['new_ms']:.1f} ms), load {loadavg()}", flush=True)
        for name, rounds in totals.items():
            print(f"{name:5} median of {len(rounds)} rounds: Stable {statistics.median(o['stable_cpu_ms'] for o in rounds):.1f} ms broker CPU "
                  f"(window {statistics.median(o['stable_ms'] for o in rounds):.1f} ms), new group "
                  f"{statistics.median(o['new_cpu_ms'] for o in rounds):.1f} ms (window {statistics.median(o['new_ms'] for o in rounds):.1f} ms)")
    finally:
        stop_all(brokers, tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
