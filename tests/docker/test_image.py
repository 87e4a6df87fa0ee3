"""The image built from the repository's Dockerfile, run by a real Docker engine.

One broker container with a named volume on a user-defined network, two listeners as in
docker-compose.yml: INTERNAL (kafkalite:9092, for containers on the network) and EXTERNAL
(published on an ephemeral host port and advertised as 127.0.0.1:<that port>). Clients on
the host and in a container on the network use it, one group spans both, and a second
container on the same volume finds the data and the committed offsets.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer

from . import clients
from .harness import LABEL, ROOT, Failed, free_port

HEALTHCHECK_INTERVAL_S = 30  # the Dockerfile's --interval: what "healthy" would wait for without --start-interval


class Standalone:
    """The broker container and what it needs; ``start()`` can be called again with the
    same volume to replace the container."""

    def __init__(self, docker, image: str) -> None:
        self.docker = docker
        self.image = image
        self.id = uuid.uuid4().hex[:8]
        self.network = f"kl-test-{self.id}"
        self.volume = f"kl-test-{self.id}-data"
        self.name = ""
        self.generation = 0
        docker.run("network", "create", "--label", LABEL, self.network)
        docker.run("volume", "create", "--label", LABEL, self.volume)

    def start(self) -> dict:
        self.generation += 1
        self.name = f"kl-test-{self.id}-broker{self.generation}"
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        timings = self.docker.run_until_healthy(
            [
                "--network", self.network, "--network-alias", "kafkalite",
                "-p", f"127.0.0.1:{self.port}:9094",
                "-v", f"{self.volume}:/var/lib/kafkalite",
                "-e", "KAFKALITE_LISTENERS=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9094",
                "-e", f"KAFKALITE_ADVERTISED_LISTENERS=INTERNAL://kafkalite:9092,EXTERNAL://127.0.0.1:{self.port}",
                "-e", "KAFKALITE_GROUP_INITIAL_REBALANCE_DELAY_MS=0",
                self.image,
            ],
            self.name,
        )
        return timings

    def stop(self) -> int:
        """``docker stop`` (SIGTERM), then remove; returns the broker's exit code."""
        self.docker.run("stop", "--time", "30", self.name, timeout=60)
        code = int(self.docker.inspect(self.name, "{{.State.ExitCode}}"))
        self.docker.run("rm", self.name)
        return code

    def close(self) -> None:
        self.docker.run("rm", "-f", self.name, check=False)
        self.docker.run("volume", "rm", "-f", self.volume, check=False)
        self.docker.run("network", "rm", self.network, check=False)


@pytest.fixture(scope="module")
def broker(docker, kafkalite_image, metrics):
    b = Standalone(docker, kafkalite_image)
    try:
        timings = b.start()
        metrics.record("start_to_healthy_s", round(timings["start_to_healthy_s"], 2))
        metrics.record("start_to_ready_s", round(timings["start_to_ready_s"], 2))
        b.first_timings = timings
        yield b
    finally:
        b.close()


def netclient(docker, examples_image: str, network: str, *args: str, detach: bool = False, name: str | None = None):
    """tests/docker/netclient.py in the examples image, on ``network``."""
    run = ["run", "--label", LABEL, "--network", network, "-v", f"{ROOT / 'tests' / 'docker' / 'netclient.py'}:/netclient.py:ro"]
    if detach:
        run += ["-d", "--name", name]
    else:
        run += ["--rm"]
    return docker.run(*run, examples_image, "python", "/netclient.py", *args, timeout=180)


# ------------------------------------------------------------------ the image itself


def test_image_runs_as_10001_without_compilers_or_test_tools(docker, kafkalite_image):
    assert docker.inspect(kafkalite_image, "{{.Config.User}}") == "10001:10001"
    probe = docker.out(
        "run", "--rm", "--label", LABEL, "--entrypoint", "sh", kafkalite_image, "-c",
        "id -u; id -g; for t in gcc cc c++ make; do command -v $t || true; done; "
        "python -c 'import importlib.util as u; print([m for m in (\"pytest\", \"hypothesis\", \"confluent_kafka\") if u.find_spec(m)])'",
    )
    uid, gid, *rest = probe.splitlines()
    assert (uid, gid) == ("10001", "10001")
    assert rest == ["[]"], f"compilers or test dependencies in the image: {rest}"


def test_healthy_within_seconds_and_the_volume_holds_only_broker_data(docker, broker):
    t = broker.first_timings
    # without --start-interval the first check would run a full interval after the start
    assert t["start_to_healthy_s"] < 10, t
    assert t["start_to_ready_s"] < t["start_to_healthy_s"], t
    listing = docker.out("exec", broker.name, "ls", "-lan", "/var/lib/kafkalite")
    entries = [line.split() for line in listing.splitlines()[1:]]  # skip "total"
    names = {e[-1] for e in entries} - {".", ".."}
    # no .bashrc, .profile...: the only dot files are the broker's own locks of its data directory
    # (broker/datadir.py: .lock, and .controller.lock, held shared so no cluster starts on it)
    locks = {".lock", ".controller.lock"}
    assert locks <= names and not any(n.startswith(".") for n in names - locks), listing
    assert all(e[2] == "10001" and e[3] == "10001" for e in entries if e[-1] != ".."), listing


def test_idle_memory(docker, broker, metrics):
    status = docker.out("exec", broker.name, "cat", "/proc/1/status")
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    assert fields["Name"].strip().startswith("kafkalite") or "python" in fields["Name"], fields["Name"]
    rss_kb = int(fields["VmRSS"].split()[0])
    metrics.record("idle_rss_mib", round(rss_kb / 1024, 1))
    assert rss_kb < 200 * 1024


# ------------------------------------------------------------------ clients


def test_host_client_uses_the_external_listener(broker):
    assert clients.advertised(broker.bootstrap) == [broker.bootstrap]
    clients.create_topic(broker.bootstrap, "host-orders", 3)
    sent = [f"host-{i}" for i in range(30)]
    clients.produce(broker.bootstrap, "host-orders", sent)
    for protocol in ("classic", "consumer"):
        got = clients.consume_group(broker.bootstrap, f"host-{protocol}", protocol, "host-orders", len(sent))
        assert sorted(got) == sorted(sent), protocol
        assert clients.committed(broker.bootstrap, f"host-{protocol}", "host-orders", 3) == clients.end_offsets(broker.bootstrap, "host-orders", 3)


def test_container_client_uses_the_internal_listener(docker, broker, examples_image):
    out = netclient(docker, examples_image, broker.network, "selfcheck", "kafkalite:9092", "net-orders").stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"brokers": ["kafkalite:9092"], "classic": True, "consumer": True}, out


def test_one_group_spans_the_host_and_a_container(docker, broker, examples_image):
    topic, group, partitions = "span", "span-group", 4
    clients.create_topic(broker.bootstrap, topic, partitions)
    name = f"{broker.name}-member"
    netclient(docker, examples_image, broker.network, "member", "kafkalite:9092", group, topic, detach=True, name=name)
    lines: queue.Queue = queue.Queue()
    follower = subprocess.Popen(["docker", "logs", "--follow", name], env=docker.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threading.Thread(target=lambda: [lines.put(line) for line in follower.stdout], daemon=True).start()
    host = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        container_assignment: list[int] = []
        container_received: list = []

        def drain(wait: float = 0) -> None:
            """Take in what the container printed, waiting up to ``wait`` s for a first line."""
            while True:
                try:
                    line = lines.get(timeout=wait) if wait else lines.get_nowait()
                except queue.Empty:
                    return
                wait = 0
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # librdkafka's own log lines
                if "assignment" in event:
                    container_assignment[:] = event["assignment"]
                container_received.extend(event.get("received", []))

        # wait for the container member to be in the group before the host joins
        deadline = time.monotonic() + 60
        while not container_assignment and time.monotonic() < deadline:
            drain(wait=1)
        assert container_assignment == list(range(partitions)), container_assignment
        host.subscribe([topic])
        host_assignment: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            host.poll(0.2)
            drain()
            host_assignment = sorted(tp.partition for tp in host.assignment())
            if host_assignment and container_assignment and not set(host_assignment) & set(container_assignment) \
                    and sorted(host_assignment + container_assignment) == list(range(partitions)):
                break
        else:
            raise Failed(f"the group did not split the partitions: host {host_assignment}, container {container_assignment}")
        # each side reads exactly the messages of its own partitions
        sent = [f"span-{i}" for i in range(40)]
        clients.produce(broker.bootstrap, topic, sent, partition_of=lambda i: i % partitions)
        host_received = []
        deadline = time.monotonic() + 60
        while len(host_received) + len(container_received) < len(sent) and time.monotonic() < deadline:
            for msg in host.consume(100, 0.2):
                if msg.error() is None:
                    host_received.append([msg.partition(), msg.offset(), msg.value().decode()])
            drain()
        assert {p for p, _, _ in host_received} <= set(host_assignment)
        assert {p for p, _, _ in container_received} <= set(container_assignment)
        assert sorted(v for _, _, v in host_received + container_received) == sorted(sent)
    finally:
        host.close()
        docker.run("stop", "--time", "20", name, check=False, timeout=60)
        follower.wait(30)
        docker.run("rm", "-f", name, check=False)


def test_admin_cli_reaches_the_broker_from_containers(docker, broker, kafkalite_image):
    # inside the broker's container, the admin CLI's default bootstrap is the broker itself
    assert "host-orders" in docker.out("exec", broker.name, "kafkalite", "topics", "list")
    # a new container shares the broker's network namespace, so 127.0.0.1 is the broker's
    run = ["run", "--rm", "--label", LABEL]
    assert "host-orders" in docker.out(*run, "--network", f"container:{broker.name}", kafkalite_image, "topics", "list")
    # or joins its network and names it
    assert "host-orders" in docker.out(*run, "--network", broker.network, "-e", "KAFKALITE_BOOTSTRAP=kafkalite:9092", kafkalite_image, "topics", "list")


# ------------------------------------------------------------------ replacing the container


def test_a_new_container_on_the_volume_keeps_data_and_committed_offsets(docker, broker):
    before = {g: clients.committed(broker.bootstrap, g, "host-orders", 3) for g in ("host-classic", "host-consumer")}
    ends = clients.end_offsets(broker.bootstrap, "host-orders", 3)
    assert sum(ends.values()) == 30
    assert broker.stop() == 0  # SIGTERM: a clean stop
    broker.start()  # the same volume, a new container (and host port)
    assert clients.end_offsets(broker.bootstrap, "host-orders", 3) == ends
    assert {g: clients.committed(broker.bootstrap, g, "host-orders", 3) for g in before} == before
    assert sorted(clients.consume_group(broker.bootstrap, "after-replace", "classic", "host-orders", 30)) == sorted(f"host-{i}" for i in range(30))
    # the old groups resume at their committed offsets: nothing is left to read
    clients.produce(broker.bootstrap, "host-orders", ["after-0"])
    for protocol in ("classic", "consumer"):
        assert clients.consume_group(broker.bootstrap, f"host-{protocol}", protocol, "host-orders", 1) == ["after-0"]


# ------------------------------------------------------------------ a data directory the broker cannot write


def test_a_bind_mount_it_cannot_write_is_reported_as_such(docker, kafkalite_image, tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # owned by root, as a directory made on the host is
    name = f"kl-test-{uuid.uuid4().hex[:8]}-unwritable"
    try:
        docker.run("run", "-d", "--name", name, "--label", LABEL, "-v", f"{data}:/var/lib/kafkalite", kafkalite_image)
        assert docker.wait_for_exit(name) == 1
        logs = docker.logs(name)
        events = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
        (problem,) = [e for e in events if e["event"] == "data directory not writable"]
        assert problem["uid"] == 10001 and problem["data_dir"] == "/var/lib/kafkalite"
        assert "chown -R 10001:10001" in problem["fix"]
        assert not any(e["event"] == "cannot listen" for e in events), logs
    finally:
        docker.run("rm", "-f", name, check=False)
