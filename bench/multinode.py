"""Issue 26's figures for a cluster on one host, on kafkalite (``serve --nodes 3``) and on a
3-broker Apache Kafka (``tests.reference_kafka.ReferenceKafkaCluster``, bench/multinode_kafka.py),
with the same workload and client settings: start-up, leader failover and a coordinator move
under a 100-member group. It measures; it asserts nothing.

    python -m bench.multinode [--broker kafkalite|kafka|both] [--runs N] [--members N] [--json]

It prints a table of both brokers and the kafkalite/Kafka ratio (``--json``: the raw figures too).

- **ready**: kafkalite from the controller's exec to its READY line (every node live, the active
  one serving); Kafka by the harness's own clock (the module of its side says what it spans);
  and the RSS of every process of the cluster then;
- **failover**: with every replica of a 1-partition, 3-replica topic in its ISR, from SIGKILL of
  the broker Metadata names as its leader to a surviving broker's Metadata naming a new, live
  leader (polled every 2 ms over one connection);
- **coordinator move**: a group of N confluent-kafka consumers (classic, then KIP-848), one
  partition each, is Stable; the broker FindCoordinator names for the group is killed and one
  record is written to each partition; the times until the coordinator a survivor names answers
  DescribeGroups / ConsumerGroupDescribe with Stable, N members, each assigned (polled every
  20 ms), and until every partition's record was consumed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from broker.multinode.testing import ClusterProcess
from protocol.consumer_protocol import assigned_partitions
from tests.raw import RawClient
from tests.wait import wait_until

from .procstat import loadavg, machine, rss_mb

NODES = (1, 2, 3)


class Kafkalite:
    """``serve --nodes 3``: its start-up figure runs from the controller's exec to READY."""

    name = "kafkalite"

    def start(self, data_dir: Path):
        cluster = ClusterProcess(data_dir / "data", nodes=3)
        t0 = time.perf_counter()
        cluster.start()
        return cluster, (time.perf_counter() - t0) * 1000

    def pids(self, cluster) -> tuple[list[int], int]:
        """(the nodes' pids, the controller's)."""
        return [pid for _, pid in cluster.describe_addresses()], cluster.proc.pid

    def kill(self, cluster, node: int) -> None:
        os.kill(cluster.pid(node), signal.SIGKILL)

    def restart(self, cluster, node: int) -> None:
        cluster.start_node(node)


def sides(broker: str) -> list:
    if broker == "kafkalite":
        return [Kafkalite()]
    from .multinode_kafka import Kafka

    return [Kafka()] if broker == "kafka" else [Kafkalite(), Kafka()]


def _span(values: list[float]) -> dict:
    return {"runs_ms": [round(x, 1) for x in values], "median_ms": round(statistics.median(values), 1)}


def _ask(address, api_key: int, version: int, body: dict):
    """One request on a connection of its own to ``address`` (or on the RawClient given)."""
    if isinstance(address, RawClient):
        return address.request(api_key, version, body)
    raw = RawClient(address)
    try:
        return raw.request(api_key, version, body)
    finally:
        raw.close()


def _metadata(address, topics: list[str]):
    return _ask(address, 3, 12, {"topics": [{"name": t, "topic_id": None} for t in topics], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})


def _leader_of(raw, topic: str) -> int:
    answer = _metadata(raw, [topic])
    parts = answer.topics[0].partitions if answer.topics else []
    live = {b.node_id for b in answer.brokers}
    return parts[0].leader_id if parts and parts[0].leader_id in live else -1


def _whole(address: str, topics: list[str]) -> bool:
    """Every node live in ``address``'s Metadata and every replica of ``topics`` in its ISR."""
    with contextlib.suppress(OSError, AssertionError):
        answer = _metadata(address, topics)
        live = {b.node_id for b in answer.brokers}
        return live == set(NODES) and all(t.error_code == 0 and t.partitions for t in answer.topics) and all(
            p.leader_id in live and sorted(p.isr_nodes) == sorted(p.replica_nodes) == list(NODES) for t in answer.topics for p in t.partitions)
    return False


def _until(predicate, what: str, interval: float = 0.02):
    return wait_until(predicate, timeout=120, interval=interval, what=what)


def ready_runs(side, root: Path, runs: int) -> dict:
    ready, rss = [], []
    for i in range(runs):
        cluster, ms = side.start(root / f"{side.name}-ready-{i}")
        ready.append(ms)
        nodes, controller = side.pids(cluster)
        rss.append({"nodes": [round(rss_mb(pid), 1) for pid in nodes], "controller": round(rss_mb(controller), 1)})
        cluster.close()
    return {**_span(ready), "rss_mb": rss}


def _create(cluster, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})  # held: a client collected mid-request fails it
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)


def failover_runs(side, root: Path, runs: int) -> dict:
    cluster, _ = side.start(root / f"{side.name}-failover")
    times = []
    try:
        _create(cluster, "f", 1)
        for _ in range(runs):
            _until(lambda: _whole(cluster.address(1), ["f"]), "every replica of f in its ISR")
            killed = _leader_of(cluster.address(1), "f")
            raw = RawClient(cluster.address(next(i for i in NODES if i != killed)))
            while _leader_of(raw, "f") != killed:
                time.sleep(0.01)
            t0 = time.perf_counter()
            side.kill(cluster, killed)
            while _leader_of(raw, "f") in (killed, -1):
                time.sleep(0.002)
            times.append((time.perf_counter() - t0) * 1000)
            raw.close()
            side.restart(cluster, killed)
    finally:
        cluster.close()
    return _span(times)


def _coordinator(address: str, group: str) -> tuple[int, str]:
    """(node id, address) of ``group``'s coordinator as the broker at ``address`` names it (-1: none yet)."""
    (c,) = _ask(address, 10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators
    return (c.node_id if c.error_code == 0 else -1), f"{c.host}:{c.port}"


def _stable(address: str, group: str, protocol: str, members: int) -> bool:
    """Whether the coordinator the broker at ``address`` names answers Stable, ``members`` members, each assigned."""
    with contextlib.suppress(OSError, AssertionError):
        node, coordinator = _coordinator(address, group)
        if node < 0:
            return False
        if protocol == "classic":
            (g,) = _ask(coordinator, 15, 5, {"groups": [group], "include_authorized_operations": False}).groups
            assigned = [assigned_partitions(m.member_assignment) for m in g.members]
        else:
            (g,) = _ask(coordinator, 69, 0, {"group_ids": [group], "include_authorized_operations": False}).groups
            assigned = [m.assignment.topic_partitions for m in g.members]
        return g.error_code == 0 and g.group_state == "Stable" and len(assigned) == members and all(assigned)
    return False


def coordinator_move(side, root: Path, members: int, protocol: str) -> dict:
    import confluent_kafka as ck

    cluster, _ = side.start(root / f"{side.name}-move-{protocol}")
    group = f"g-{protocol}"
    consumers = []
    stop = threading.Event()
    try:
        _create(cluster, "m", members)
        conf = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "group.protocol": protocol, "enable.auto.commit": False,
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

        t0 = time.perf_counter()
        _until(lambda: _stable(cluster.address(1), group, protocol, members), f"{group} Stable", interval=0.05)
        formed_ms = (time.perf_counter() - t0) * 1000
        _until(lambda: _whole(cluster.address(1), ["m", "__consumer_offsets"]), "every replica in its ISR")
        killed = _coordinator(cluster.address(1), group)[0]
        survivors = [cluster.address(i) for i in NODES if i != killed]
        producer = ck.Producer({"bootstrap.servers": ",".join(survivors), "acks": "all", "linger.ms": 0})
        t0 = time.perf_counter()
        side.kill(cluster, killed)
        for partition in range(members):  # one record a partition: each member must consume again
            producer.produce("m", value=b"x", partition=partition)
        producer.poll(0)
        time.sleep(0.05)  # let the kill land before asking (a describe answered by the dying node would read as settled)
        _until(lambda: _stable(survivors[0], group, protocol, members), f"{group} Stable again")
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
    return {"protocol": protocol, "members": members, "killed": killed, "formed_ms": round(formed_ms), "back_to_stable_ms": round(moved_ms),
            "every_partition_consumed_again_ms": round(consuming_ms), "partitions_consumed_again": len(seen)}


def _median_range(figure: dict) -> str:
    return f"{figure['median_ms']:.0f} ({min(figure['runs_ms']):.0f}-{max(figure['runs_ms']):.0f})"


def _rss(r: dict) -> float:
    return sum(r["ready"]["rss_mb"][0]["nodes"]) + r["ready"]["rss_mb"][0]["controller"]


ROWS = [  # (figure, the target, its value on one broker, the value as printed)
    ("ready (ms), median (min-max)", "≤ 1 s", lambda r: r["ready"]["median_ms"], lambda r: _median_range(r["ready"])),
    ("RSS of the cluster's processes at ready (MB), first run", "", _rss, lambda r: f"{_rss(r):.0f}"),
    ("killed leader replaced (ms), median (min-max)", "≤ 2 s", lambda r: r["failover"]["median_ms"], lambda r: _median_range(r["failover"])),
    *[row for i, p in enumerate(("classic", "KIP-848")) for row in (
        (f"{p}: coordinator killed to Stable with every member (ms)", "≤ 3 s", lambda r, i=i: r["moves"][i]["back_to_stable_ms"], None),
        (f"{p}: coordinator killed to every member consumed again (ms)", "", lambda r, i=i: r["moves"][i]["every_partition_consumed_again_ms"], None))],
]


def table(results: dict) -> str:
    names = list(results)
    ratio = len(names) == 2
    head = ["figure", *names, *(["kafkalite/Kafka"] if ratio else []), "target"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for label, target, value, shown in ROWS:
        values = [value(results[n]) for n in names]
        cells = [(shown or value)(results[n]) for n in names]
        lines.append("| " + " | ".join([label, *map(str, cells), *([f"{values[0] / values[1]:.2f}"] if ratio else []), target]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.multinode")
    p.add_argument("--broker", choices=("kafkalite", "kafka", "both"), default="both")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--members", type=int, default=100)
    p.add_argument("--json", action="store_true", help="print the raw figures too")
    args = p.parse_args(argv)
    chosen = sides(args.broker)
    results: dict = {s.name: {} for s in chosen}
    load = {"before": loadavg()}
    with tempfile.TemporaryDirectory(prefix="kl-multinode-") as tmp:
        root = Path(tmp)
        for side in chosen:  # each figure on every broker before the next figure, so both meet the same load
            results[side.name]["ready"] = ready_runs(side, root, args.runs)
        for side in chosen:
            results[side.name]["failover"] = failover_runs(side, root, args.runs)
        for protocol in ("classic", "consumer"):
            for side in chosen:
                results[side.name].setdefault("moves", []).append(coordinator_move(side, root, args.members, protocol))
    load["after"] = loadavg()
    print(table(results))
    print(f"load average (1, 5, 15 min): {load['before']} before, {load['after']} after")
    if args.json:
        print(json.dumps({"machine": machine(), "load": load, **results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
