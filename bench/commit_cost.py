"""Broker CPU per OffsetCommit, with bench-compare's commit load, against kafkalite alone.

1000 simple groups commit single partitions of a 64-partition topic over 64
connections with 8 requests in flight each (``bench.group_scenarios.commits``,
the load of ``make bench-compare``'s OffsetCommit phase), for ``--seconds``
after a second of warm-up; prints requests/s, the broker's CPU per request
(and its kernel share) and /proc/loadavg, per round.

``--base DIR`` runs a second broker from another source tree (for example
``git archive <commit> | tar -x -C DIR``) and alternates the rounds between
the two, so that before and after see the same load::

    python -m bench.commit_cost --rounds 3 --base /tmp/base

``--heartbeats`` measures bench-compare's Heartbeat phase the same way instead:
each round forms a new classic group of ``--members`` members (1000), and once it
is Stable every member keeps 4 Heartbeat v4 in flight for ``--seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from . import group_scenarios as gs
from .procstat import loadavg
from .spawn import Broker, stop_all

ROOT = Path(__file__).resolve().parent.parent
TOPIC, PARTITIONS = "commit-cost", 64


async def _round(port: int, pid: int, first: bool, run_id: str, args) -> gs.Throughput:
    if first:
        admin = (await gs.connect("127.0.0.1", port, 1))[0]
        await gs.create_topic(admin, TOPIC, PARTITIONS)
        admin.close()
    return await gs.commits("127.0.0.1", port, pid, TOPIC, PARTITIONS, label=run_id, groups=args.groups, n_conns=args.connections,
                            depth=args.depth, warmup=1.0, seconds=args.seconds, run_id=run_id)


async def _heartbeat_round(port: int, pid: int, run_id: str, args) -> gs.Throughput:
    _, kept, conns = await gs.rebalances("127.0.0.1", port, pid, [(args.members, 1)], keep_last=True)
    try:
        return await gs.heartbeats(kept, pid, 4, 1.0, args.seconds)
    finally:
        for c in conns:
            c.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.commit_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--depth", type=int, default=8, help="requests in flight per connection")
    ap.add_argument("--heartbeats", action="store_true", help="measure Heartbeats of a Stable classic group instead")
    ap.add_argument("--members", type=int, default=1000, help="with --heartbeats: the group's size")
    ap.add_argument("--base", type=Path, help="also run a broker from this source tree, alternating with this one")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="commit-cost-"))
    trees = {"this": ROOT} | ({"base": args.base} if args.base else {})
    brokers = {name: Broker(tmp / name, "--log-format", "json", root=tree).start() for name, tree in trees.items()}
    try:
        for r in range(args.rounds):
            for name, b in brokers.items():
                if args.heartbeats:
                    t, what = asyncio.run(_heartbeat_round(b.port, b.pid, f"{name}{r}", args)), "heartbeats"
                else:
                    t, what = asyncio.run(_round(b.port, b.pid, r == 0, f"{name}{r}", args)), "commits"
                print(f"{name:5} round {r + 1}: {t.rps:,.0f} {what}/s, broker {t.broker_us_per_req:.1f} µs each "
                      f"({t.broker_sys_s / t.requests * 1e6:.1f} µs in the kernel), errors {t.errors or 'none'}, load {loadavg()}", flush=True)
    finally:
        stop_all(brokers, tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
