"""``docker compose up --wait`` of the repository's docker-compose.yml, the ``examples``
profile included, with a real engine.

The project gets a name of its own and the EXTERNAL listener an ephemeral host port
(KAFKALITE_EXTERNAL_PORT); PYTHON_IMAGE points both builds at the local stand-in for the
pinned base image, since no registry is reachable here. Nothing else is changed.
"""

from __future__ import annotations

import json

import pytest

from tests.wait import wait_until

from . import clients
from .harness import BASE_IMAGE, ROOT, ComposeProject, free_port

PARTITIONS = 6  # the producer service's PARTITIONS


class Stack(ComposeProject):
    def __init__(self, docker) -> None:
        self.port = free_port()
        self.bootstrap = f"localhost:{self.port}"
        super().__init__(docker, "kl-test", {"PYTHON_IMAGE": BASE_IMAGE, "KAFKALITE_EXTERNAL_PORT": str(self.port)})

    def compose_args(self) -> list[str]:
        return ["-f", str(ROOT / "docker-compose.yml"), "--profile", "examples"]

    def containers(self, service: str) -> list[str]:
        return self.compose("ps", "-q", service).stdout.split()

    def describe(self, group: str) -> dict:
        out = self.compose("exec", "-T", "kafkalite", "kafkalite", "groups", "describe", group, "--json", check=False)
        return json.loads(out.stdout) if out.stdout.strip() else {"members": [], "error": out.stderr}


@pytest.fixture(scope="module")
def stack(docker, kafkalite_image, metrics):
    yield from Stack(docker).up(metrics, "compose")


def test_the_examples_image_is_built_by_one_service_only(docker):
    stack = Stack(docker)
    config = json.loads(stack.compose("config", "--format", "json").stdout)
    builders = {name: svc["image"] for name, svc in config["services"].items() if "build" in svc}
    assert builders == {"kafkalite": "kafkalite:local", "producer": "kafkalite-examples:local"}
    assert config["services"]["consumer"]["image"] == "kafkalite-examples:local"
    assert config["services"]["kafkalite"]["healthcheck"]["start_interval"] == "500ms"


def test_up_wait_leaves_a_healthy_broker_and_the_example_apps_running(stack):
    (broker,) = stack.containers("kafkalite")
    assert stack.docker.inspect(broker, "{{.State.Health.Status}}") == "healthy"
    assert len(stack.containers("producer")) == 1 and len(stack.containers("consumer")) == 2
    # the host reaches the EXTERNAL listener on the chosen port, advertised as localhost
    assert clients.advertised(stack.bootstrap) == [stack.bootstrap]


def test_the_consumers_split_the_partitions(stack):
    def split():  # the group reconciles over heartbeats; nothing to wait on from outside
        group = stack.describe("order-processors")
        assignments = [sorted(p for t, p in m["assignment"] if t == "orders") for m in group["members"]]
        return group if len(assignments) == 2 and all(assignments) and sorted(sum(assignments, [])) == list(range(PARTITIONS)) else None

    # each answer is a `docker compose exec`: asked twice a second, not more
    group = wait_until(split, timeout=90, interval=0.5, what=f"the two consumers to split orders' {PARTITIONS} partitions",
                       describe=lambda: json.dumps(stack.describe("order-processors"))[:2000])
    assert group["type"] == "consumer"  # GROUP_PROTOCOL: consumer (KIP-848)
    client_ids = [m["client_id"] for m in group["members"]]
    assert len(set(client_ids)) == 2 and all(c.startswith("example-consumer-") for c in client_ids), client_ids
    # and they process: the committed offsets move
    def committed() -> dict:
        out = stack.compose("exec", "-T", "kafkalite", "kafkalite", "groups", "lag", "order-processors", "--json").stdout
        return {(r["topic"], r["partition"]): r["current_offset"] for r in json.loads(out)["partitions"]}

    first = committed()
    wait_until(lambda: committed() != first, interval=0.5, what="the group's committed offsets to move")


def test_a_message_that_is_not_json_is_skipped_without_a_restart(stack):
    # the producer service writes to the same partition meanwhile
    ((partition, bad_offset),) = clients.produce(stack.bootstrap, "orders", ["this is not JSON"], partition_of=lambda i: 0)
    assert partition == 0
    wait_until(lambda: clients.committed(stack.bootstrap, "order-processors", "orders", PARTITIONS)[0] > bad_offset, timeout=60,
               interval=0.5, what="the group to commit past the message that is not JSON")
    logs = stack.compose("logs", "consumer").stdout
    assert f"skipped orders-0@{bad_offset}" in logs, logs[-3000:]
    for container in stack.containers("consumer"):
        assert stack.docker.inspect(container, "{{.State.Running}} {{.RestartCount}}") == "true 0"


def test_down_removes_the_stack(stack):
    created = stack.project_resources()
    assert created["containers"] and created["volumes"] and created["networks"], created
    stack.compose("down", "--volumes", "--remove-orphans", "--timeout", "20", timeout=120)
    assert stack.project_resources() == {"containers": [], "volumes": [], "networks": []}
