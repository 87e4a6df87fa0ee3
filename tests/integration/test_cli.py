"""The command line: READY line, environment variables, logs, clean shutdown."""

from __future__ import annotations

import json
import subprocess
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from broker.cli import config_from_args
from tests.broker_process import ROOT, BrokerProcess


def test_flags_override_environment():
    cfg = config_from_args(["serve", "--port", "0"], environ={"KAFKALITE_PORT": "1234", "KAFKALITE_LOG_FORMAT": "json", "KAFKALITE_AUTO_CREATE_TOPICS": "false"})
    assert cfg.port == 0 and cfg.log_format == "json" and cfg.auto_create_topics is False


def test_ready_line_json_logs_and_sigterm_exit_zero(tmp_path):
    b = BrokerProcess(tmp_path / "d", env={"KAFKALITE_LOG_FORMAT": "json", "KAFKALITE_LOG_LEVEL": "debug"}).start()
    assert b.port > 0
    p = Producer({"bootstrap.servers": b.bootstrap, "client.software.name": "cli-test"})
    p.produce("sigterm-topic", b"v")
    assert p.flush(15) == 0
    assert b.stop() == 0
    records = [json.loads(line) for line in b.logs().splitlines() if line.startswith("{")]
    events = [r["event"] for r in records]
    assert "ready" in events and events[-1] == "stopped"
    # KIP-511: the client's software name is in the connection's log context
    assert any(str(r.get("client_software", "")).startswith("cli-test/") for r in records)


def test_environment_disables_auto_create(tmp_path):
    b = BrokerProcess(tmp_path / "d", env={"KAFKALITE_AUTO_CREATE_TOPICS": "false"}).start()
    try:
        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(topic="not-created", timeout=10)
        assert md.topics["not-created"].error is not None
        assert md.topics["not-created"].error.name() == "UNKNOWN_TOPIC_OR_PART"
    finally:
        b.stop()


def test_python_dash_m_broker_help():
    out = subprocess.run([sys.executable, "-m", "broker", "serve", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "--advertised-host" in out.stdout and "KAFKALITE_PORT" in out.stdout


def test_port_in_use_fails_cleanly(tmp_path):
    first = BrokerProcess(tmp_path / "a").start()
    try:
        out = subprocess.run(
            [sys.executable, "-m", "broker", "serve", "--port", str(first.port), "--data-dir", str(tmp_path / "b")],
            cwd=ROOT, capture_output=True, text=True, timeout=30,
        )
        assert out.returncode == 1 and "cannot listen" in out.stderr and "READY" not in out.stdout
    finally:
        first.stop()


def test_sigusr1_writes_a_diagnostics_snapshot_and_the_broker_goes_on(tmp_path):
    import os
    import re
    import signal

    b = BrokerProcess(tmp_path / "d", env={"KAFKALITE_LOG_FORMAT": "json"}).start()
    try:
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce("diag-topic", b"v")
        assert p.flush(15) == 0
        os.kill(b.proc.pid, signal.SIGUSR1)
        line = b.wait_for_log("diagnostics written")
        path = json.loads(line)["path"]
        text = open(path).read()
        assert re.search(r"connections: \d+", text) and "coordinator shards:" in text and "shard 0: state=active" in text
        assert "tasks:" in text
        # the broker goes on serving
        p.produce("diag-topic", b"w")
        assert p.flush(15) == 0
    finally:
        assert b.stop() == 0
