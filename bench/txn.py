"""Transactions per second, kafkalite beside Apache Kafka, with confluent-kafka.

``--producers`` transactional producers (threads, one transactional id each)
each run ``--txns`` transactions of ``--records`` records spread over the 6
partitions of a fresh topic; a seeded fifth of the transactions abort (after
their records reached the broker), the rest commit. Then a READ_COMMITTED
consumer reads the topic back and the run checks exactly-once: every
committed record once, no aborted one. The clock runs from the moment every
producer has its producer id (``init_transactions``) to the last commit or
abort. Rounds alternate between the brokers;
each line gives transactions/s, records/s, the check and /proc/loadavg::

    python -m bench.txn --rounds 3
    python -m bench.txn --no-kafka       # kafkalite alone
    python -m bench.txn --producers 2 --txns 5 --records 5000 --value-bytes 1024   # produce throughput
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .spawn import Broker, stop_all

PARTITIONS = 6
QUIET = {"log_level": 3}


def _topic(bootstrap: str) -> str:
    name = "txnbench-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(60)
    return name


def run_once(bootstrap: str, producers: int, txns: int, records: int, seed: int = 1, value_bytes: int = 0) -> dict:
    """One round; ``value_bytes`` pads every value to that size (a produce-throughput workload)."""
    topic = _topic(bootstrap)
    committed: list[bytes] = []
    lock = threading.Lock()
    failures: list[str] = []

    # the clock starts once every producer has its producer id: librdkafka asks for one only once a
    # broker connection is up, and when its first try finds none it waits 500 ms before the next
    # (seen at random on either broker), which would count the client's start-up, not transactions
    ready = threading.Barrier(producers + 1)

    def worker(w: int) -> None:
        rng = random.Random(seed * 1000 + w)
        try:
            try:
                p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{w}", "linger.ms": 1, **QUIET})
                p.init_transactions(60)
            finally:
                ready.wait()
            for t in range(txns):
                p.begin_transaction()
                values = [f"{w}-{t}-{k}-".encode().ljust(value_bytes, b"x") for k in range(records)]
                for v in values:
                    p.produce(topic, value=v, partition=rng.randrange(PARTITIONS))
                if rng.random() < 0.2:
                    p.flush(60)  # on the broker before the abort
                    p.abort_transaction(60)
                else:
                    p.commit_transaction(60)
                    with lock:
                        committed.extend(values)
        except Exception as exc:  # noqa: BLE001 - reported with the round
            failures.append(f"producer {w}: {exc}")

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(producers)]
    for t in threads:
        t.start()
    ready.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    got = read_all(bootstrap, topic, PARTITIONS, "read_committed", len(committed), timeout=120)
    return {
        "txns_s": producers * txns / elapsed,
        "records_s": producers * txns * records / elapsed,
        "mb_s": sum(len(v) for v in committed) / (1 << 20) / elapsed,  # committed bytes only
        "committed": len(committed),
        "read": len(got),
        "exact": sorted(got) == sorted(committed),
        "failures": failures,
    }


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int, timeout: float = 30.0) -> list[bytes]:
    """Every value of the topic as a consumer with ``isolation`` (read_committed, read_uncommitted)
    sees it, once ``expect`` arrived and the end of every partition was reached (or the deadline passed)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-" + uuid.uuid4().hex[:8], "isolation.level": isolation,
                  "enable.partition.eof": True, "enable.auto.commit": False, **QUIET})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                    if len(at_end) == partitions and len(got) >= expect:
                        break
                continue
            at_end.discard(m.partition())
            got.append(m.value())
    finally:
        c.close()
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.txn", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--producers", type=int, default=10)
    ap.add_argument("--txns", type=int, default=50, help="transactions per producer")
    ap.add_argument("--records", type=int, default=20, help="records per transaction")
    ap.add_argument("--value-bytes", type=int, default=0, help="pad every value to this size (produce throughput inside transactions)")
    ap.add_argument("--no-kafka", action="store_true", help="kafkalite alone")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-txn-"))
    brokers: dict = {"kafkalite": Broker(tmp / "kafkalite", "--log-format", "json").start()}
    if not args.no_kafka:
        from tests.reference_kafka import ReferenceKafka, available

        ok, why = available()
        if ok:
            brokers["kafka"] = ReferenceKafka(tmp / "kafka").start()
        else:
            print(f"Kafka skipped: {why}")
    results: dict[str, list[dict]] = {k: [] for k in brokers}
    try:
        for r in range(args.rounds):
            for name, b in brokers.items():
                res = run_once(b.bootstrap, args.producers, args.txns, args.records, seed=r + 1, value_bytes=args.value_bytes)
                results[name].append(res)
                load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                print(f"{name:9} round {r + 1}: {res['txns_s']:,.0f} transactions/s, {res['records_s']:,.0f} records/s, {res['mb_s']:,.1f} MB/s; "
                      f"committed {res['committed']}, read committed {res['read']}, exactly once: {res['exact']}"
                      f"{'; failures ' + '; '.join(res['failures']) if res['failures'] else ''}; load {load}", flush=True)
        if "kafka" in results:
            lite = statistics.median(x["txns_s"] for x in results["kafkalite"])
            kafka = statistics.median(x["txns_s"] for x in results["kafka"])
            print(f"median transactions/s: kafkalite {lite:,.0f}, Kafka {kafka:,.0f}, kafkalite/Kafka {lite / kafka:.2f}")
    finally:
        stop_all(brokers, tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
