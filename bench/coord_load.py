"""In-process timing of one coordinator shard's load (no broker process, no network).

    python -m bench.coord_load [--groups G] [--partitions P] [--rounds R] [--tombstone-every K] [--repeat N] [--profile FILE] [--dir DIR]
    python -m bench.coord_load --broker-data DIR [--repeat N] [--profile FILE]

Writes a ``__consumer_offsets``-format log the way the coordinator runtime
writes it (one record batch per OffsetCommit of ``P`` partitions of one topic,
value v4, the keys and values of ``protocol.group_records``) into a temporary
partition directory, then times ``ShardRuntime.load`` on it ``N`` times (a
fresh shard each time). ``--rounds R`` commits every (group, partition) ``R``
times, so all but the last round are superseded; ``--tombstone-every K``
deletes every K-th group's offsets at the end. ``--profile`` writes a cProfile
of one load. The figure is records per second of the shard's own ``load``
(the broker's ``load_ms`` adds 50 shards' bookkeeping and its start-up).
``--broker-data`` loads the 50 ``__consumer_offsets`` partitions of a broker
data directory (``python -m bench.groups --only load --no-docs --keep``
leaves one) one after the other, as the broker does, and sums the loads.
"""

from __future__ import annotations

import argparse
import cProfile
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from broker.coordinator.common import GroupConfig
from broker.coordinator.runtime import ShardRuntime
from protocol.group_records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from protocol.records import Record, build_batch, split_batches
from storage.config import LogConfig
from storage.log import PartitionLog


class _Log:
    def _ignore(self, *_a, **_kw):
        pass

    info = warning = error = exception = debug = _ignore

    def bind(self, **_kw):
        return self


def write_log(path: Path, groups: int, partitions: int, rounds: int, tombstone_every: int, topic: str = "bench-load") -> int:
    plog = PartitionLog.open(path, LogConfig(cleanup_policy="compact", fsync="never"))
    now = 1_700_000_000_000
    n = 0
    for r in range(rounds):
        for g in range(groups):
            gid = f"ld-{g:06d}"
            recs = []
            for p in range(partitions):
                key = encode_key(OffsetCommitKey(gid, topic, p))
                value = encode_value(OffsetCommitValue(offset=1000 * r + p, leader_epoch=-1, metadata="", commit_timestamp=now + r, expire_timestamp=-1))
                recs.append(Record(offset=len(recs), timestamp=now, key=key, value=value))
            plog.append(split_batches(build_batch(recs), verify_crc=False))
            n += len(recs)
    if tombstone_every:
        for g in range(0, groups, tombstone_every):
            gid = f"ld-{g:06d}"
            recs = [Record(offset=p, timestamp=now, key=encode_key(OffsetCommitKey(gid, topic, p)), value=None) for p in range(partitions)]
            plog.append(split_batches(build_batch(recs), verify_crc=False))
            n += len(recs)
    plog.close()
    return n


async def load_once(path: Path) -> tuple[float, float, int, ShardRuntime]:
    plog = PartitionLog.open(path, LogConfig(cleanup_policy="compact", fsync="never"))
    try:
        partition = SimpleNamespace(index=0, log=plog)
        rt = ShardRuntime(0, partition, GroupConfig(), fsync_always=False, log=_Log())
        t0, c0 = time.perf_counter(), time.process_time()
        await rt.load(freeze=True)  # as at start
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        rt.close()
        return elapsed, cpu, rt.load_stats["records"], rt
    finally:
        plog.close()


def load_broker_data(args) -> int:
    import gc

    import uvloop

    parts = sorted(args.broker_data.glob("__consumer_offsets-*"))

    async def all_shards():
        wall = cpu = 0.0
        n = 0
        shards = []
        for p in parts:  # (opening and closing each log is not counted: the broker does it before the load)
            w, c, records, rt = await load_once(p)
            wall += w
            cpu += c
            n += records
            shards.append(rt)
        return wall, cpu, n, shards

    for _ in range(args.repeat):
        with open("/proc/loadavg") as f:
            la = " ".join(f.read().split()[:3])
        elapsed, cpu, records, shards = uvloop.run(all_shards())
        print(f"{len(parts)} shards: {records:,} records in {elapsed * 1000:.0f} ms = {records / elapsed:,.0f} records/s; "
              f"CPU {cpu * 1000:.0f} ms = {records / cpu:,.0f} records/CPU-s (loadavg {la})")
        del shards
        gc.collect()
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        uvloop.run(all_shards())
        prof.disable()
        prof.dump_stats(str(args.profile))
        import pstats

        pstats.Stats(str(args.profile)).sort_stats("tottime").print_stats(18)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.coord_load")
    ap.add_argument("--groups", type=int, default=2000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tombstone-every", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", type=Path)
    ap.add_argument("--dir", type=Path, help="reuse (or create) the log here instead of a temporary one")
    ap.add_argument("--broker-data", type=Path, help="load every __consumer_offsets-N partition of this broker data directory (e.g. kept by bench.groups --keep)")
    args = ap.parse_args(argv)
    if args.broker_data:
        return load_broker_data(args)
    tmp = args.dir or Path(tempfile.mkdtemp(prefix="coord-load-"))
    try:
        if not (tmp / "00000000000000000000.log").exists():
            t0 = time.perf_counter()
            n = write_log(tmp, args.groups, args.partitions, args.rounds, args.tombstone_every)
            print(f"wrote {n:,} records in {time.perf_counter() - t0:.1f} s")
        import uvloop

        for _ in range(args.repeat):
            with open("/proc/loadavg") as f:
                la = " ".join(f.read().split()[:3])
            elapsed, cpu, records, rt = uvloop.run(load_once(tmp))
            print(f"load {records:,} records in {elapsed * 1000:.0f} ms = {records / elapsed:,.0f} records/s; CPU {cpu * 1000:.0f} ms = {records / cpu:,.0f} records/CPU-s "
                  f"(offsets {rt.shard.offsets.count():,}, groups {len(rt.shard.groups):,}; loadavg {la})")
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            uvloop.run(load_once(tmp))
            prof.disable()
            prof.dump_stats(str(args.profile))
            import pstats

            pstats.Stats(str(args.profile)).sort_stats("tottime").print_stats(15)
    finally:
        if args.dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
