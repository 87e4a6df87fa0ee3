"""Broker CPU per MB consumed, at 4 MiB and 16 MiB fetches.

Produces ``--mb`` MB of ``--value-size`` byte records once (3 partitions), then
consumes all of it again and again with confluent-kafka, with
``fetch.max.bytes`` = ``max.partition.fetch.bytes`` = 4 MiB and 16 MiB in
turn, and reports, per round, the MB/s and the broker's CPU per MB of record values,
with /proc/loadavg: on-CPU time from /proc/<pid>/task/*/schedstat
(nanoseconds; the consume phase includes the consumer's connection set-up)
and utime + stime from /proc/<pid>/stat (10 ms ticks: coarse for short phases).

``--base DIR`` runs a second broker from another source tree (for example
``git archive <commit> | tar -x -C DIR``) on its own data, and alternates the
rounds between the two brokers, so that before and after see the same load::

    python -m bench.fetch_cost --mb 200 --value-size 1024 --rounds 3 --base /tmp/base
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .workload import Phase, consume, create_topic, produce

Phase.oncpu_ms_per_mb = 0.0  # set per phase below

ROOT = Path(__file__).resolve().parent.parent
# fetch.max.bytes = max.partition.fetch.bytes; "default" is bench.workload's consumer as it is
# (fetch.max.bytes 50 MiB, max.partition.fetch.bytes 4 MiB), the one bench.compare measures
SIZES = {"4MiB": 4 * 1024 * 1024, "16MiB": 16 * 1024 * 1024, "default": None}


class _Broker:
    """A broker from the source tree ``root``, on ``data_dir``."""

    def __init__(self, root: Path, data_dir: Path, label: str) -> None:
        self.root = root
        self.label = label
        self.data_dir = data_dir
        self.log = open(data_dir.parent / f"{label}.stderr.log", "w")
        args = [sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir)]
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=root, bufsize=0)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"{label} broker did not start: {line!r}")
        self.bootstrap = "127.0.0.1:" + line.strip().rsplit(":", 1)[1]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _oncpu_s(pid: int) -> float:
    """Time ``pid``'s threads have spent on a CPU, from /proc/<pid>/task/*/schedstat (nanoseconds:
    finer than utime + stime, which count 10 ms ticks)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total / 1e9


class _Kafka:
    """The reference Kafka (tests.reference_kafka), measured the same way."""

    def __init__(self, data_dir: Path) -> None:
        from tests.reference_kafka import ReferenceKafka

        self.label = "kafka"
        self.kafka = ReferenceKafka(data_dir).start()
        self.bootstrap = self.kafka.bootstrap

    @property
    def pid(self) -> int:
        return self.kafka.proc.pid

    def stop(self) -> None:
        self.kafka.stop()


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fetch_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=200.0, help="MB of record values to produce (default 200)")
    ap.add_argument("--value-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3, help="consume rounds per fetch size (default 3)")
    ap.add_argument("--sizes", default="4MiB,16MiB")
    ap.add_argument("--base", type=Path, help="also run a broker from this source tree, alternating with this one")
    ap.add_argument("--kafka", action="store_true", help="also run the reference Kafka (tests.reference_kafka), alternating")
    args = ap.parse_args(argv)
    count = int(args.mb * 1e6 / args.value_size)
    sizes = args.sizes.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="fetch-cost-"))
    brokers = []
    try:
        trees = [("new", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
        for label, root in trees:
            (tmp / label).mkdir()
            brokers.append(_Broker(root, tmp / label, label))
        if args.kafka:
            brokers.append(_Kafka(tmp / "kafka"))
        topic = "fetch-cost"
        for b in brokers:
            create_topic(b.bootstrap, topic)
            p = produce(b.bootstrap, b.pid, topic, args.value_size, count)
            print(f"{b.label}: produced {count} x {args.value_size} B in {p.wall_s:.1f}s ({p.mb_per_s:.0f} MB/s)  load {_load()}", flush=True)
        results: dict[tuple[str, str], list] = {}
        for r in range(args.rounds):
            for size in sizes:
                order = brokers[r % len(brokers):] + brokers[: r % len(brokers)]
                for b in order:
                    n = SIZES[size]
                    c0 = _oncpu_s(b.pid)
                    overrides = {"fetch.max.bytes": n, "max.partition.fetch.bytes": n} if n else {}
                    ph = consume(b.bootstrap, b.pid, topic, args.value_size, count, overrides, size)
                    ph.oncpu_ms_per_mb = (_oncpu_s(b.pid) - c0) * 1000 / (ph.payload_bytes / 1e6)
                    results.setdefault((b.label, size), []).append(ph)
                    print(f"round {r} {b.label:4} {size:5}: {ph.mb_per_s:6.0f} MB/s  broker {ph.oncpu_ms_per_mb:5.2f} ms/MB on-CPU, "
                          f"{ph.broker_cpu_ms_per_mb:5.2f} utime+stime (sys {ph.broker_sys_share:.0%}, util {ph.broker_util:.0%})  "
                          f"client util {ph.client_util:.0%}  load {_load()}", flush=True)
                    time.sleep(0.5)
        print(f"\nmedians, {args.value_size} B records, {count} records ({args.mb:.0f} MB):")
        for (label, size), phases in sorted(results.items()):
            mbps = statistics.median(p.mb_per_s for p in phases)
            cpu = statistics.median(p.broker_cpu_ms_per_mb for p in phases)
            oncpu = statistics.median(p.oncpu_ms_per_mb for p in phases)
            print(f"  {label:4} {size:5}: {mbps:6.0f} MB/s  broker {oncpu:5.2f} ms/MB on-CPU, {cpu:5.2f} utime+stime")
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
