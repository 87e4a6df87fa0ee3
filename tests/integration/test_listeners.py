"""Named listeners: each client is given the address of the listener it came through."""

from __future__ import annotations

import subprocess
import sys
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from broker.cli import main
from broker.testing import BrokerThread
from tests.broker_process import ROOT


def _addr(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def _seen_by_confluent(bootstrap: str, group: str) -> dict[str, tuple[str, int]]:
    """What a confluent-kafka client connected to ``bootstrap`` is told in Metadata, FindCoordinator and DescribeCluster."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=15)
    (broker,) = md.brokers.values()
    coordinator = admin.describe_consumer_groups([group])[group].result(15).coordinator
    (node,) = admin.describe_cluster().result(15).nodes
    return {
        "metadata": (broker.host, broker.port),
        "coordinator": (coordinator.host, coordinator.port),
        "cluster": (node.host, node.port),
    }


def _serve(tmp_path, *args: str) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker", "serve", "--data-dir", str(tmp_path / "data"), "--log-level", "warning", *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines = [proc.stdout.readline().strip()]
    while len(lines) < 1 + sum(a == "--listener" for a in args):
        lines.append(proc.stdout.readline().strip())
    return proc, lines


def test_two_listeners_each_client_sees_its_own_address(tmp_path):
    proc, lines = _serve(
        tmp_path,
        "--listener", "INTERNAL://127.0.0.1:0",
        "--listener", "EXTERNAL://127.0.0.2:0",
        "--advertised-listener", "INTERNAL://localhost:0",  # port 0: the bound port
    )
    try:
        assert lines[0].startswith("READY 127.0.0.1:"), lines
        listeners = {}
        for line in lines[1:]:
            word, name, address = line.split()
            assert word == "LISTENER"
            listeners[name] = _addr(address)
        assert list(listeners) == ["INTERNAL", "EXTERNAL"]
        assert lines[0] == "READY 127.0.0.1:%d" % listeners["INTERNAL"][1]
        internal_port, external_port = listeners["INTERNAL"][1], listeners["EXTERNAL"][1]
        assert internal_port != external_port

        group = f"g-{uuid.uuid4().hex[:8]}"
        seen_internal = _seen_by_confluent(f"127.0.0.1:{internal_port}", group)
        seen_external = _seen_by_confluent(f"127.0.0.2:{external_port}", group)
        assert set(seen_internal.values()) == {("localhost", internal_port)}, seen_internal
        assert set(seen_external.values()) == {("127.0.0.2", external_port)}, seen_external

        # kafka-python, through the external listener, is told the same
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.2:{external_port}", request_timeout_ms=15000)
        try:
            brokers = admin.describe_cluster()["brokers"]
            assert [(b["host"], b["port"]) for b in brokers] == [("127.0.0.2", external_port)]
        finally:
            admin.close()
    finally:
        proc.terminate()
        assert proc.wait(20) == 0


def test_in_process_listeners_carry_a_group_through_each():
    with BrokerThread(listeners="A://127.0.0.1:0,B://127.0.0.2:0", settings={"advertised.listeners": "B://127.0.0.2:0"}) as b:
        assert list(b.listeners) == ["A", "B"]
        assert b.bootstrap_servers == b.listeners["A"]
        topic = f"t-{uuid.uuid4().hex[:8]}"
        b.create_topic(topic, 2)
        p = Producer({"bootstrap.servers": b.listeners["A"]})
        for i in range(10):
            p.produce(topic, b"v%d" % i, partition=i % 2)
        assert p.flush(15) == 0
        # a consumer group, coordinated through listener B only
        c = Consumer({"bootstrap.servers": b.listeners["B"], "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
        try:
            c.subscribe([topic])
            got = 0
            for _ in range(100):
                msg = c.poll(0.5)
                if msg is not None and msg.error() is None:
                    got += 1
                if got == 10:
                    break
            assert got == 10
            c.commit(asynchronous=False)
        finally:
            c.close()
        # the restart keeps each listener on its port
        before = dict(b.listeners)
        b.restart()
        assert b.listeners == before
        assert _seen_by_confluent(b.listeners["B"], f"g-{topic}")["coordinator"] == _addr(b.listeners["B"])


def test_single_default_listener_is_named_plaintext(tmp_path):
    proc, lines = _serve(tmp_path, "--host", "127.0.0.1", "--port", "0", "--advertised-host", "localhost")
    try:
        proc.stdout.readline()  # LISTENER line of the default listener
        port = int(lines[0].rsplit(":", 1)[1])
        seen = _seen_by_confluent(f"127.0.0.1:{port}", "g-default")
        assert set(seen.values()) == {("localhost", port)}
    finally:
        proc.terminate()
        assert proc.wait(20) == 0


def test_bad_listener_settings_exit_2(tmp_path, capsys):
    cases = [
        (["--listener", "A://127.0.0.1:0", "--port", "0"], "cannot be combined"),
        (["--listener", "A:127.0.0.1:0"], "expected NAME://host:port"),
        (["--listener", "A://127.0.0.1:0", "--advertised-listener", "B://h:1"], "not one of the listeners"),
        (["--listener", "A://127.0.0.1:0", "--advertised-listener", "A://0.0.0.0:1"], "cannot be advertised"),
        (["--listener", "SSL://127.0.0.1:0"], "a TLS listener needs ssl.keystore.location"),
        (["--listener", "A://127.0.0.1:0", "--set", "listener.security.protocol.map=A:SSL"], "a TLS listener needs ssl.keystore.location"),
        (["--listener", "A://127.0.0.1:0", "--set", "listener.security.protocol.map=A:TLS"], "unknown security protocol"),
        (["--listener", "A://127.0.0.1:0", "--set", "listener.security.protocol.map=B:SSL"], "missing from listener.security.protocol.map"),
        (["--listener", "SASL_PLAINTEXT://127.0.0.1:0"], "needs sasl.enabled.mechanisms"),
        (["--listener", "A://127.0.0.1:0", "--listener", "a://127.0.0.1:1"], "defined twice"),
        (["--advertised-listener", "A://h:1"], "need listeners"),
    ]
    for args, message in cases:
        assert main(["serve", "--data-dir", str(tmp_path / "d"), *args]) == 2, args
        out = capsys.readouterr()
        assert message in out.err and out.err.startswith("kafkalite: "), (args, out.err)
        assert out.out == ""
    # and as a process: exit code 2, the message, no traceback
    out = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--data-dir", str(tmp_path / "d"), "--listener", "SSL://127.0.0.1:0"],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 2 and "needs ssl.keystore.location" in out.stderr and "Traceback" not in out.stderr and out.stdout == ""
