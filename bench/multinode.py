"""Issue 26's figures for a cluster on one host (``serve --nodes 3``): start-up, leader failover
and a coordinator move under a 100-member group. It measures; it asserts nothing.

    python -m bench.multinode [--runs N] [--members N] [--json]

- **ready**: from the controller's exec to its READY line (every node live, the active one
  serving), and each node's RSS then;
- **failover**: from SIGKILL of the active node to a surviving node's Metadata naming a new,
  live leader (polled every 2 ms over one connection);
- **coordinator move**: a group of N confluent-kafka consumers (classic, then KIP-848), one
  partition each, is Stable; the active node is killed and one record is written to each
  partition; the times until a surviving node's DescribeGroups / ConsumerGroupDescribe
  answers Stable with all N members, and until every partition's record was consumed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from broker.multinode.testing import ClusterProcess

from .procstat import machine, rss_mb


def ready_runs(root: Path, runs: int) -> dict:
    ready, rss = [], []
    for i in range(runs):
        cluster = ClusterProcess(root / f"ready-{i}" / "data", nodes=3)
        t0 = time.perf_counter()
        cluster.start()
        ready.append((time.perf_counter() - t0) * 1000)
        rss.append([round(rss_mb(pid), 1) for _, pid in cluster.describe_addresses()])
        cluster.close()
    return {"ready_ms": [round(x, 1) for x in ready], "median_ready_ms": round(statistics.median(ready), 1), "node_rss_mb": rss}


def _leader_of(raw, topic: str) -> int:
    answer = raw.request(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
    parts = answer.topics[0].partitions if answer.topics else []
    live = {b.node_id for b in answer.brokers}
    return parts[0].leader_id if parts and parts[0].leader_id in live else -1


def failover_runs(root: Path, runs: int) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.raw import RawClient

    cluster = ClusterProcess(root / "failover" / "data", nodes=3).start()
    times = []
    try:
        creator = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        creator.create_topics([NewTopic("f", 1, 3)])["f"].result(30)
        for _ in range(runs):
            killed = cluster.active
            survivor = next(i for i in (1, 2, 3) if i != killed)
            raw = RawClient(cluster.address(survivor))
            while _leader_of(raw, "f") != killed:
                time.sleep(0.01)
            t0 = time.perf_counter()
            os.kill(cluster.pid(killed), signal.SIGKILL)
            while _leader_of(raw, "f") in (killed, -1):
                time.sleep(0.002)
            times.append((time.perf_counter() - t0) * 1000)
            raw.close()
            cluster.start_node(killed)
    finally:
        cluster.close()
    return {"failover_ms": [round(x, 1) for x in times], "median_failover_ms": round(statistics.median(times), 1)}


def coordinator_move(root: Path, members: int, protocol: str) -> dict:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = ClusterProcess(root / f"move-{protocol}" / "data", nodes=3).start()
    consumers = []
    stop = threading.Event()
    try:
        creator = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        creator.create_topics([NewTopic("m", members, 3)])["m"].result(30)
        conf = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"g-{protocol}", "group.protocol": protocol, "enable.auto.commit": False,
                "auto.offset.reset": "earliest"}
        if protocol == "classic":
            conf.update({"session.timeout.ms": 30000, "heartbeat.interval.ms": 1000})
        for _ in range(members):
            c = ck.Consumer(conf)
            c.subscribe(["m"])
            consumers.append(c)

        seen: set[int] = set()

        def poll() -> None:
            while not stop.is_set():
                for c in consumers:
                    msg = c.poll(0)
                    if msg is not None and msg.error() is None:
                        seen.add(msg.partition())
                time.sleep(0.01)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()

        def stable(admin) -> bool:
            try:
                d = admin.describe_consumer_groups([f"g-{protocol}"], request_timeout=5)[f"g-{protocol}"].result(10)
            except Exception:  # noqa: BLE001 - the coordinator is moving
                return False
            return d.state.name == "STABLE" and len(d.members) == members and all(m.assignment.topic_partitions for m in d.members)

        admin1 = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        t0 = time.perf_counter()
        while not stable(admin1):
            time.sleep(0.05)
        formed_ms = (time.perf_counter() - t0) * 1000
        killed = cluster.active
        survivors = ",".join(cluster.address(i) for i in (1, 2, 3) if i != killed)
        admin = AdminClient({"bootstrap.servers": survivors})
        producer = ck.Producer({"bootstrap.servers": survivors, "acks": "all", "linger.ms": 0})
        t0 = time.perf_counter()
        os.kill(cluster.pid(killed), signal.SIGKILL)
        for partition in range(members):  # one record a partition: each member must consume again
            producer.produce("m", value=b"x", partition=partition)
        producer.poll(0)
        time.sleep(0.05)  # let the kill land before asking (a describe answered by the dying node would read as settled)
        while not stable(admin):
            time.sleep(0.02)
        moved_ms = (time.perf_counter() - t0) * 1000
        assert producer.flush(60) == 0, "the records were not all written"
        while len(seen) < members and time.perf_counter() - t0 < 120:
            time.sleep(0.01)
        consuming_ms = (time.perf_counter() - t0) * 1000
    finally:
        stop.set()
        for c in consumers:
            c.close()
        cluster.close()
    return {"protocol": protocol, "members": members, "formed_ms": round(formed_ms), "back_to_stable_ms": round(moved_ms),
            "every_partition_consumed_again_ms": round(consuming_ms), "partitions_consumed_again": len(seen)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.multinode")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--members", type=int, default=100)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kl-multinode-") as tmp:
        root = Path(tmp)
        result = {"machine": machine(), "load_before": os.getloadavg()[0]}
        result["ready"] = ready_runs(root, args.runs)
        result["failover"] = failover_runs(root, args.runs)
        result["moves"] = [coordinator_move(root, args.members, proto) for proto in ("classic", "consumer")]
        result["load_after"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1) if args.json else json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
