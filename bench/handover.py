"""Hand-over: the longest time a moved partition has no owner when one member joins a KIP-848 group.

    python -m bench.handover [--sizes 100,1000,3000] [--reps 3] [--clients 8] [--no-kafka] [--out FILE]

For each group size N the KIP-848 workload of ``make bench-compare``
(``bench.kip848_scenarios``: N - 1 simulated members on an N-partition topic,
then one more joins, ``--reps`` times, heartbeat interval 500 ms) runs against

* kafkalite as it ships (members mid-hand-over get the pending interval, 100 ms),
* kafkalite with the pending interval set to the plain one (Kafka's behaviour),
* Apache Kafka 4.1 (``tests.reference_kafka``), unless ``--no-kafka``,

each on a fresh broker. The simulated members adopt the interval each answer
hands them, as the Java client, librdkafka and franz-go do. Then the same
with real clients: ``--clients`` confluent-kafka consumers (librdkafka,
``group.protocol=consumer``) on a topic of 2 x that many partitions, and one
more joining; a partition's gap runs from its old owner's revocation callback
to its new owner's assignment callback. Prints a table (and writes it to
``--out``); asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from . import group_scenarios as gs
from . import kip848_scenarios as ks
from .compare import K848_INTERVAL_MS, coordinator_ready, loadavg, run_async, start_kafka, start_kafkalite

SETUPS = ("kafkalite", "kafkalite, pending interval off", "Kafka 4.1")


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def start(setup: str, data: Path, heap: str):
    if setup == "Kafka 4.1":
        return start_kafka(data, heap, **{"group.consumer.heartbeat.interval.ms": K848_INTERVAL_MS,
                                          "group.consumer.min.heartbeat.interval.ms": K848_INTERVAL_MS})
    extra = ["--group-consumer-heartbeat-interval-ms", str(K848_INTERVAL_MS)]
    if "off" in setup:
        extra += ["--group-consumer-pending-heartbeat-interval-ms", str(K848_INTERVAL_MS)]
    return start_kafkalite(data, *extra)


def simulated(b, size: int, reps: int) -> dict:
    async def go():
        await coordinator_ready(b.host, b.port)
        admin = (await gs.connect(b.host, b.port, 1))[0]
        topic = f"handover-{size}"
        topic_id = await ks.create_topic(admin, topic, size)
        await asyncio.sleep(2.0 if b.kind == "Kafka" else 0.2)  # Kafka creates the partitions' logs asynchronously
        conns = await gs.connect(b.host, b.port, size)
        try:
            return await ks.run_protocol("kip848", conns, admin, b.pid, size, reps, topic, topic_id, K848_INTERVAL_MS / 1000, 1.0, lambda m: say(f"      {m.strip()}"))
        finally:
            for c in conns:
                c.close()
            admin.close()

    r = run_async(asyncio.wait_for(go(), 600))
    return {"gap_ms": max(s.max_gap_ms for s in r.joins), "wait_ms": statistics.median(s.joiner_wait_ms for s in r.joins),
            "form_s": r.form_s, "errors": sum(r.errors.values()), "double_owned": r.double_owned}


def real_clients(b, n: int, reps: int) -> dict:
    """n confluent-kafka consumers, then one more joins (``reps`` times, the joiner leaving in between)."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"handover-real-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 2 * n, 1)])[topic].result(30)
    lock = threading.Lock()
    released: dict[int, float] = {}
    owner: dict[int, str] = {}
    gaps: list[float] = []
    stop = threading.Event()

    def member(name: str, done: threading.Event) -> None:
        def on_assign(c, parts):
            now = time.perf_counter()
            with lock:
                for p in parts:
                    if p.partition in released:
                        gaps.append(now - released.pop(p.partition))
                    owner[p.partition] = name

        def on_revoke(c, parts):
            now = time.perf_counter()
            with lock:
                for p in parts:
                    if owner.get(p.partition) == name:
                        del owner[p.partition]
                        released[p.partition] = now

        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}", "group.protocol": "consumer",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        while not stop.is_set() and not done.is_set():
            c.poll(0.005)
        c.close()

    threads = []
    for i in range(n):
        t = threading.Thread(target=member, args=(f"m{i}", threading.Event()), daemon=True)
        t.start()
        threads.append(t)

    def settled(count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with lock:
                if len(owner) == 2 * n and len(set(owner.values())) == count and not released:
                    return
            time.sleep(0.01)
        raise RuntimeError(f"real clients did not settle: {len(owner)} partitions owned by {len(set(owner.values()))} members")

    samples = []
    try:
        settled(n)
        for rep in range(reps):
            with lock:
                gaps.clear()
            done = threading.Event()
            t = threading.Thread(target=member, args=(f"joiner{rep}", done), daemon=True)
            t.start()
            settled(n + 1)
            with lock:
                samples.append(max(gaps, default=0.0) * 1000)
            done.set()
            t.join(30)
            settled(n)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    return {"gap_ms": max(samples), "gaps_ms": samples}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,3000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--clients", type=int, default=8, help="real consumers before the joiner (0: none)")
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--kafka-heap", default="1g")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    sizes = [int(x) for x in a.sizes.split(",") if x]
    setups = [s for s in SETUPS if not (a.no_kafka and s.startswith("Kafka"))]
    tmp = Path(tempfile.mkdtemp(prefix="handover-"))
    rows = []
    for label, work in [(f"{n} simulated members", n) for n in sizes] + ([(f"{a.clients} + 1 confluent-kafka consumers", -1)] if a.clients else []):
        row = {"workload": label}
        for setup in setups:
            say(f"{label}: {setup} (load {loadavg()})")
            b = start(setup, tmp / f"{len(rows)}-{setup.split(',')[0].replace(' ', '')}-{len(row)}", a.kafka_heap)
            try:
                r = simulated(b, work, a.reps) if work > 0 else real_clients(b, a.clients, a.reps)
            except Exception as e:  # noqa: BLE001 - a row says what failed
                r = {"failed": f"{type(e).__name__}: {e}"}
            finally:
                b.stop()
            r["load"] = loadavg()
            row[setup] = r
            say(f"    {r}")
        rows.append(row)
    lines = ["| Workload | " + " | ".join(setups) + " |", "|---|" + "---|" * len(setups)]
    for row in rows:
        cells = []
        for setup in setups:
            r = row[setup]
            if "failed" in r:
                cells.append(f"failed: {r['failed']}")
                continue
            cell = f"{r['gap_ms']:,.0f} ms"
            if "wait_ms" in r:
                cell += f" (joiner waited {r['wait_ms']:,.0f} ms; forming {r['form_s']:.1f} s, {r['errors']} errors, {r['double_owned']} double-owned)"
            cell += f"; load {r['load']}"
            cells.append(cell)
        lines.append(f"| {row['workload']} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    if a.out:
        a.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
