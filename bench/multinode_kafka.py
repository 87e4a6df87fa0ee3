"""bench/multinode.py's Kafka side: the 3-broker reference Kafka (``tests.reference_kafka.ReferenceKafkaCluster``:
Apache Kafka 4.4.0, KRaft, brokers 1-3 and a controller of its own, node 100), under the controls
kafkalite's side has.

- **Start-up** is the harness's own ``startup_seconds``: from the exec of the first JVM (the four
  ``kafka-storage format`` runs, side by side, then the four nodes' JVMs) to every broker's port
  open, every broker registered and unfenced in its own Metadata, and every broker listing all three.
- **Kill** is SIGKILL of the broker's JVM (``kill_node``: returns once it is dead). Kafka's
  controller fences a broker ``broker.session.timeout.ms`` after its last heartbeat
  (``CLUSTER_CONFIG``: 2.5 s, heartbeats every 250 ms; Kafka's defaults are 9 s and 2 s); only
  then are its partitions and coordinators led by others. That wait is in Kafka's figures as it is.
- **Restart** (``start_node``) returns once the broker is registered and unfenced again.
"""

from __future__ import annotations

from pathlib import Path

from tests.reference_kafka import ReferenceKafkaCluster, available


class Kafka:
    name = "kafka"

    def start(self, data_dir: Path):
        ok, why = available()
        if not ok:
            raise SystemExit(f"no reference Kafka here: {why} (--broker kafkalite measures kafkalite alone)")
        cluster = ReferenceKafkaCluster(data_dir).start()
        return cluster, cluster.startup_seconds * 1000

    def pids(self, cluster) -> tuple[list[int], int]:
        """(the brokers' pids, the controller's)."""
        return [pid for _, pid in cluster.nodes.values()], cluster.controller.proc.pid

    def kill(self, cluster, node: int) -> None:
        cluster.kill_node(node)

    def restart(self, cluster, node: int) -> None:
        cluster.start_node(node)
