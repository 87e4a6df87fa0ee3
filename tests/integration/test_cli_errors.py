"""The command line's rough edges: each bad input gets one line and exit status 1 or 2, never a
traceback, and each question about something that does not exist says so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.broker_process import ROOT, BrokerProcess


def cli(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKALITE_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "broker", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def one_line_error(out: subprocess.CompletedProcess, code: int) -> str:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


@pytest.mark.parametrize("spec", ["log.append:0", ":3", "segment.roll:00"])
def test_a_malformed_crash_point_spec_stops_the_start_with_one_line(spec, tmp_path):
    line = one_line_error(cli("serve", "--port", "0", "--data-dir", str(tmp_path / "data"), env_extra={"KAFKALITE_CRASH_AT": spec}), 1)
    assert "KAFKALITE_CRASH_AT" in line and "<name>[:<n>]" in line
    assert not (tmp_path / "data").exists()  # stopped before it touched the directory


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("cli-errors") / "data").start()
    yield b
    assert b.stop() == 0


# ---------------------------------------------------------------- usage: no broker needed


@pytest.mark.parametrize("bootstrap", ["127.0.0.1:notaport", "127.0.0.1:", "127.0.0.1:70000", "[::1]:x", ",", "127.0.0.1:9092,host:port"])
def test_a_bad_bootstrap_is_a_usage_error(bootstrap):
    for command in (["topics", "list"], ["health"], ["groups", "describe", "g"]):
        line = one_line_error(cli(*command, "--bootstrap", bootstrap), 2)
        assert "--bootstrap" in line


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(timeout):
    line = one_line_error(cli("topics", "list", "--bootstrap", "127.0.0.1:1", f"--timeout={timeout}"), 2)
    assert "--timeout" in line


def test_an_unknown_group_state_is_a_usage_error():
    line = one_line_error(cli("groups", "list", "--state", "Bogus", "--bootstrap", "127.0.0.1:1"), 2)
    assert "Bogus" in line and "Stable" in line and "Reconciling" in line


@pytest.mark.parametrize("args", [["--version"], ["version"]])
def test_version(args):
    from importlib.metadata import PackageNotFoundError, version

    from broker.cli import package_version

    out = cli(*args)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout == f"kafkalite {package_version()}\n"
    try:
        assert package_version() == version("kafkalite")
    except PackageNotFoundError:  # a source checkout: pyproject.toml's
        import tomllib

        assert package_version() == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_version_falls_back_to_pyproject(monkeypatch):
    import importlib.metadata

    from broker.cli import package_version

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    import tomllib

    assert package_version() == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


# ---------------------------------------------------------------- against a broker


def test_group_states_are_case_insensitive_and_comma_separated(broker):
    out = cli("groups", "list", "--state", "stable,EMPTY", "--state", "reconciling", "--bootstrap", broker.bootstrap)
    assert out.returncode == 0 and "Traceback" not in out.stderr and out.stdout.startswith("GROUP")


def test_describe_of_an_unknown_transactional_id_says_not_found(broker):
    """On a broker that has run no transaction yet (no __transaction_state): as Kafka's admin
    client, the CLI finds the coordinator first, and the answer is TRANSACTIONAL_ID_NOT_FOUND."""
    line = one_line_error(cli("transactions", "describe", "nosuchtx", "--bootstrap", broker.bootstrap), 1)
    assert "TRANSACTIONAL_ID_NOT_FOUND" in line and "COORDINATOR_NOT_AVAILABLE" not in line


@pytest.mark.parametrize(
    "args",
    [
        ["describe", "nosuch"],
        ["describe", "nosuch", "--json"],
        ["lag", "nosuch"],
        ["lag", "nosuch", "--json"],
        ["history", "nosuch"],
        ["history", "nosuch", "--json"],
        ["delete", "nosuch"],
        ["reset-offsets", "nosuch", "--to-earliest"],
    ],
    ids=lambda a: "-".join(a),
)
def test_every_groups_subcommand_says_an_unknown_group_does_not_exist(broker, args):
    out = cli("groups", *args, "--bootstrap", broker.bootstrap)
    line = one_line_error(out, 1)
    assert "nosuch" in line
    assert "does not exist" in line or "GROUP_ID_NOT_FOUND" in line


def test_a_new_group_gets_offsets_from_reset_offsets_and_then_exists(broker):
    """As Kafka's tool: reset-offsets --topic gives a group that does not exist its first offsets;
    from then on it exists (Empty), and a history with no matching event is an empty table."""
    assert cli("topics", "create", "cli-errors-t", "--partitions", "2", "--bootstrap", broker.bootstrap).returncode == 0
    out = cli("groups", "reset-offsets", "cli-errors-g", "--topic", "cli-errors-t", "--to-earliest", "--execute", "--bootstrap", broker.bootstrap)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    out = cli("groups", "describe", "cli-errors-g", "--bootstrap", broker.bootstrap)
    assert out.returncode == 0 and "State: Empty" in out.stdout, out.stdout + out.stderr
    out = cli("groups", "history", "cli-errors-g", "--event", "no such event", "--bootstrap", broker.bootstrap)
    assert out.returncode == 0 and out.stdout.startswith("TIME") and out.stderr == ""


# ---------------------------------------------------------------- serve


def test_replication_settings_of_a_kafka_config_are_accepted_with_a_note(tmp_path):
    names = {
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
    }
    sets = [a for name, value in names.items() for a in ("--set", f"{name}={value}")]
    b = BrokerProcess(tmp_path / "d", *sets).start()
    try:
        note = b.wait_for_log("a single node keeps one copy")
    finally:
        assert b.stop() == 0
    assert "offsets.topic.replication.factor=1" in note and "transaction.state.log.replication.factor=3" in note


@pytest.mark.parametrize("setting", ["offsets.topic.replication.factor=0", "transaction.state.log.min.isr=x", "offsets.topic.replicaton.factor=1"])
def test_bad_replication_settings_are_still_refused(tmp_path, setting):
    line = one_line_error(cli("serve", "--port", "0", "--data-dir", str(tmp_path / "d"), "--set", setting), 2)
    assert setting.split("=")[0] in line
    assert not (tmp_path / "d").exists()
