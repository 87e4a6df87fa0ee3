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

Every round starts with ``os.sync()`` and a pause of ``SETTLE_S``, so that no
round pays for the writeback of the produced data or for the broker returning
the previous round's memory after it (the sweep's ``gc.collect`` and
``malloc_trim``, 10-20 ms, which used to land in a random round). ``--kafka`` adds the reference Kafka to the rotation. ``--raw`` consumes with
a plain-socket Fetch v11 loop that reads batch headers only, so that the
client, not the broker, is no longer what limits the MB/s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import struct
import tempfile
import time
from pathlib import Path

from .procstat import oncpu_seconds
from .spawn import Broker
from .workload import PARTITIONS, Phase, consume, create_topic, produce

Phase.oncpu_ms_per_mb = 0.0  # set per phase below

ROOT = Path(__file__).resolve().parent.parent
# fetch.max.bytes = max.partition.fetch.bytes; "default" is bench.workload's consumer as it is
# (fetch.max.bytes 50 MiB, max.partition.fetch.bytes 4 MiB), the one bench.compare measures
# the pause before each round: two of the broker's sweeps (1 s apart) with nothing new to trim
SETTLE_S = 2.5
SIZES = {"4MiB": 4 * 1024 * 1024, "16MiB": 16 * 1024 * 1024, "default": None}


def _broker(root: Path, data_dir: Path, label: str) -> Broker:
    """A broker from the source tree ``root``, on ``data_dir``."""
    b = Broker(data_dir, root=root, log_path=data_dir.parent / f"{label}.stderr.log").start()
    b.label = label
    return b


def _raw_fetch_request(corr: int, topic: str, offsets: list[int], size: int) -> bytes:
    from kio.schema.request_header.v1.header import RequestHeader

    from protocol.codec import build, encode, request_class

    header = RequestHeader(request_api_key=1, request_api_version=11, correlation_id=corr, client_id="fetch-cost")
    parts = [{"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1, "partition_max_bytes": size}
             for p, o in enumerate(offsets)]
    body = {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": len(offsets) * size, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": parts}],
            "forgotten_topics_data": [], "rack_id": ""}
    payload = encode(header) + encode(build(request_class(1, 11), body))
    return struct.pack(">i", len(payload)) + payload


def raw_consume(bootstrap: str, pid: int, topic: str, count: int, size: int) -> tuple[float, float]:
    """Fetch v11 in a loop over a plain socket, reading batch headers only (the client costs
    next to nothing): (MB/s of response frames, broker on-CPU ms per MB of frames)."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    buf = bytearray(len(range(PARTITIONS)) * size + (1 << 20))
    view = memoryview(buf)
    offsets = [0] * PARTITIONS
    got = corr = nbytes = 0
    c0, t0 = oncpu_seconds(pid), time.perf_counter()
    try:
        while got < count:
            corr += 1
            sock.sendall(_raw_fetch_request(corr, topic, offsets, size))
            (n,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
            if n > len(buf):
                buf = bytearray(n)
                view = memoryview(buf)
            pos = 0
            while pos < n:
                pos += sock.recv_into(view[pos:n], n - pos)
            nbytes += n + 4
            # v11: correlation id, throttle, error, session id, one topic (name), its partitions
            p = 18
            (name_len,) = struct.unpack_from(">h", buf, p)
            p += 2 + name_len
            (nparts,) = struct.unpack_from(">i", buf, p)
            p += 4
            for _ in range(nparts):
                (index,) = struct.unpack_from(">i", buf, p)
                p += 30
                (naborted,) = struct.unpack_from(">i", buf, p)
                p += 4 + max(naborted, 0) * 16 + 4
                (rlen,) = struct.unpack_from(">i", buf, p)
                p += 4
                end = p + max(rlen, 0)
                while p + 61 <= end:
                    base, blen = struct.unpack_from(">qi", buf, p)
                    if p + 12 + blen > end:
                        break
                    offsets[index] = base + struct.unpack_from(">i", buf, p + 23)[0] + 1
                    got += struct.unpack_from(">i", buf, p + 57)[0]
                    p += 12 + blen
                p = end
    finally:
        sock.close()
    wall, cpu = time.perf_counter() - t0, oncpu_seconds(pid) - c0
    return nbytes / 1e6 / wall, cpu * 1000 / (nbytes / 1e6)


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
    ap.add_argument("--raw", action="store_true",
                    help="consume with a raw Fetch loop (reads batch headers only) instead of confluent-kafka; "
                         "MB are of response frames, sizes are per partition")
    args = ap.parse_args(argv)
    count = int(args.mb * 1e6 / args.value_size)
    sizes = args.sizes.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="fetch-cost-"))
    brokers = []
    try:
        trees = [("new", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
        for label, root in trees:
            (tmp / label).mkdir()
            brokers.append(_broker(root, tmp / label, label))
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
                    # outside the measurement: the produced data's writeback (the broker's flush
                    # thread would otherwise pay for it in whichever round it falls), and the
                    # broker's sweep returning the last burst's memory (a full collection and
                    # malloc_trim, once no connection or large buffer came or went for a sweep)
                    os.sync()
                    time.sleep(SETTLE_S)
                    if args.raw:
                        mbps, cpu = raw_consume(b.bootstrap, b.pid, topic, count, n or 4 * 1024 * 1024)
                        results.setdefault((b.label, size), []).append((mbps, cpu, cpu))
                        print(f"round {r} {b.label:4} {size:5}: {mbps:6.0f} MB/s  broker {cpu:5.2f} ms/MB on-CPU (raw Fetch loop)  "
                              f"load {_load()}", flush=True)
                        continue
                    c0 = oncpu_seconds(b.pid)
                    overrides = {"fetch.max.bytes": n, "max.partition.fetch.bytes": n} if n else {}
                    ph = consume(b.bootstrap, b.pid, topic, args.value_size, count, overrides, size)
                    ph.oncpu_ms_per_mb = (oncpu_seconds(b.pid) - c0) * 1000 / (ph.payload_bytes / 1e6)
                    results.setdefault((b.label, size), []).append((ph.mb_per_s, ph.oncpu_ms_per_mb, ph.broker_cpu_ms_per_mb))
                    print(f"round {r} {b.label:4} {size:5}: {ph.mb_per_s:6.0f} MB/s  broker {ph.oncpu_ms_per_mb:5.2f} ms/MB on-CPU, "
                          f"{ph.broker_cpu_ms_per_mb:5.2f} utime+stime (sys {ph.broker_sys_share:.0%}, util {ph.broker_util:.0%})  "
                          f"client util {ph.client_util:.0%}  load {_load()}", flush=True)
        print(f"\nmedians, {args.value_size} B records, {count} records ({args.mb:.0f} MB):")
        for (label, size), phases in sorted(results.items()):
            mbps = statistics.median(p[0] for p in phases)
            oncpu = statistics.median(p[1] for p in phases)
            cpu = statistics.median(p[2] for p in phases)
            print(f"  {label:4} {size:5}: {mbps:6.0f} MB/s  broker {oncpu:5.2f} ms/MB on-CPU, {cpu:5.2f} utime+stime")
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
