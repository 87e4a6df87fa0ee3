"""``docker compose up --wait`` of docker-compose.cluster.yml (``kafkalite serve --nodes 3`` in
one container) with a real engine, and a failover seen from a client on the host.

The project gets a name of its own and the EXTERNAL listeners three consecutive free host
ports (KAFKALITE_EXTERNAL_PORT and KAFKALITE_EXTERNAL_PORT_LAST); PYTHON_IMAGE points the
build at the local stand-in for the pinned base image, since no registry is reachable here.
Nothing else is changed. The tests run in file order: the failover test kills the active node.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer

from tests.wait import wait_until

from . import clients
from .harness import BASE_IMAGE, ROOT, ComposeProject, free_ports_in_a_row

NODES = 3  # the service's KAFKALITE_NODES
COMPOSE_FILE = ROOT / "docker-compose.cluster.yml"


class Cluster(ComposeProject):
    def __init__(self, docker) -> None:
        first = free_ports_in_a_row(NODES)
        self.ports = {node: first + node - 1 for node in range(1, NODES + 1)}  # node id -> its host port
        super().__init__(docker, "kl-cluster", {"PYTHON_IMAGE": BASE_IMAGE, "KAFKALITE_EXTERNAL_PORT": str(first),
                                                "KAFKALITE_EXTERNAL_PORT_LAST": str(first + NODES - 1)})

    def compose_args(self) -> list[str]:
        return ["-f", str(COMPOSE_FILE)]

    def address(self, node: int) -> str:
        return f"localhost:{self.ports[node]}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(n) for n in sorted(self.ports))

    def container(self) -> str:
        (container,) = self.compose("ps", "-q", "kafkalite").stdout.split()
        return container

    def cluster(self, *args: str) -> dict:
        """``kafkalite cluster --json ARGS`` in the container (the controller's control socket)."""
        return json.loads(self.compose("exec", "-T", "kafkalite", "kafkalite", "cluster", "--json", *args, timeout=90).stdout)

    def nodes(self) -> dict[int, dict]:
        return {n["id"]: n for n in self.cluster("nodes")["nodes"]}

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "kafkalite", check=False).stdout[-4000:]


def brokers(bootstrap: str) -> dict[int, str]:
    """Metadata's brokers, id -> host:port, as a host client sees them."""
    md = clients.admin(bootstrap).list_topics(timeout=30)
    return {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}


@pytest.fixture(scope="module")
def cluster(docker, kafkalite_image, metrics):
    yield from Cluster(docker).up(metrics, "compose_cluster")


def test_the_external_ports_are_published_as_chosen(docker):
    c = Cluster(docker)
    config = json.loads(c.compose("config", "--format", "json").stdout)
    svc = config["services"]["kafkalite"]
    published = sorted((p["host_ip"], int(p["published"]), p["target"]) for p in svc["ports"])
    assert published == [("127.0.0.1", port, port) for port in sorted(c.ports.values())]
    assert svc["environment"]["KAFKALITE_NODES"] == str(NODES)
    assert svc["healthcheck"]["start_interval"] == "500ms"


def test_up_wait_leaves_a_healthy_container_with_three_live_nodes_one_active(cluster):
    container = cluster.container()
    assert cluster.docker.inspect(container, "{{.State.Health.Status}}") == "healthy"
    nodes = cluster.nodes()
    assert sorted(nodes) == list(range(1, NODES + 1))
    assert all(n["live"] for n in nodes.values()), nodes
    assert [i for i, n in nodes.items() if n["active"]] == [1], nodes  # the lowest live node
    # each node advertises its own INTERNAL port to the compose network
    assert {i: n["address"] for i, n in nodes.items()} == {i: f"kafkalite:{9091 + i}" for i in nodes}


def test_metadata_lists_three_brokers_at_the_published_ports(cluster):
    expected = {node: cluster.address(node) for node in cluster.ports}
    # whichever node a host client bootstraps from, it learns all three at localhost:<published port>
    for node in cluster.ports:
        assert brokers(cluster.address(node)) == expected, f"bootstrapped from node {node}"


def test_a_host_client_produces_and_consumes(cluster):
    clients.create_topic(cluster.bootstrap, "before-failover", 3)
    values = [f"m{i}" for i in range(12)]
    landed = clients.produce(cluster.bootstrap, "before-failover", values)
    assert len(landed) == len(values)
    partitions = {p for p, _ in landed}
    assert partitions <= {0, 1, 2} and len(partitions) > 1, landed  # keyed: spread over the partitions
    got = clients.consume_group(cluster.bootstrap, "before-failover-readers", "consumer", "before-failover", len(values))
    assert sorted(got) == sorted(values)


def test_a_client_keeps_producing_and_consuming_when_the_active_node_is_killed(cluster, metrics):
    topic, group = "failover", "failover-readers"
    clients.create_topic(cluster.bootstrap, topic, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    errors: list = []
    read: list[str] = []

    def send(values: list[str]) -> None:
        for v in values:
            producer.produce(topic, value=v.encode(), key=v.encode(), on_delivery=lambda err, msg: err and errors.append(err))
        assert producer.flush(60) == 0 and not errors, errors

    def read_all(expected: list[str]):
        def done():
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    read.append(msg.value().decode())
            return set(expected) <= set(read)
        wait_until(done, timeout=90, interval=0, what=f"the consumer to read {len(expected)} messages", describe=lambda: (sorted(read), cluster.logs()))

    try:
        before = [f"before-{i}" for i in range(10)]
        send(before)
        read_all(before)
        consumer.commit(asynchronous=False)

        old = cluster.nodes()
        (active,) = [i for i, n in old.items() if n["active"]]
        t0 = time.monotonic()
        cluster.cluster("kill-node", str(active))

        def another_active():
            nodes = cluster.nodes()
            serving = [i for i, n in nodes.items() if n["active"] and n["live"]]
            return nodes if serving and serving != [active] else None

        nodes = wait_until(another_active, timeout=60, interval=0.2, what=f"a node other than {active} to be active", describe=cluster.logs)
        metrics.record("compose_cluster_failover_s", round(time.monotonic() - t0, 2))
        assert nodes[active]["live"] is False and nodes[active]["active"] is False, nodes
        assert nodes[active]["pid"] == old[active]["pid"]  # the same node, reported down (not restarted)
        (new_active,) = [i for i, n in nodes.items() if n["active"]]
        assert new_active != active and sorted(i for i, n in nodes.items() if n["live"]) == sorted(set(old) - {active})

        # the same producer and consumer carry on against the new active node
        after = [f"after-{i}" for i in range(10)]
        send(after)
        read_all(before + after)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
        producer.flush(10)

    assert sorted(read) == sorted(before + after), "each message read once"
    # Metadata now lists the two live nodes only, at their published ports
    expected = {n: cluster.address(n) for n in cluster.ports if n != active}
    wait_until(lambda: brokers(cluster.bootstrap) == expected, timeout=30, interval=0.2,
               what=f"Metadata to list nodes {sorted(expected)}", describe=lambda: brokers(cluster.bootstrap))
    # the group's commits made before and after the kill are both there
    committed = clients.committed(cluster.bootstrap, group, topic, 3)
    assert sum(committed.values()) == len(before + after), committed
    # the container is still the same one, running and healthy: a node's death is not the container's
    container = cluster.container()
    assert cluster.docker.inspect(container, "{{.State.Running}} {{.RestartCount}} {{.State.Health.Status}}") == "true 0 healthy"


def test_down_removes_the_stack(cluster):
    created = cluster.project_resources()
    assert created["containers"] and created["volumes"] and created["networks"], created
    cluster.compose("down", "--volumes", "--remove-orphans", "--timeout", "20", timeout=120)
    assert cluster.project_resources() == {"containers": [], "volumes": [], "networks": []}
