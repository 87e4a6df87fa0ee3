"""Brokers under test run in a session of their own (tests/reference_kafka.py ``own_session``).

Under Linux's autogroup a session is a scheduling group: the broker then competes for the CPUs
as one group against the test's clients and CPU hogs, as it would from its own container.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.spawn import Broker
from tests.broker_process import BrokerProcess


def _autogroup(pid: int) -> str | None:
    """The autogroup a process runs in; None without one.

    The file is missing without CONFIG_SCHED_AUTOGROUP, and empty for a process whose task group
    is not an autogroup (a container in a cgroup with the cpu controller, as CI runs in).
    """
    try:
        fields = Path(f"/proc/{pid}/autogroup").read_text().split()
    except OSError:
        return None
    return fields[0] if fields else None


@pytest.mark.parametrize("start", ["broker_process", "bench_spawn"])
def test_a_broker_under_test_leads_a_session_of_its_own(tmp_path, start):
    broker = BrokerProcess(tmp_path / "d").start() if start == "broker_process" else Broker(tmp_path / "d").start()
    try:
        pid = broker.proc.pid
        assert os.getsid(pid) == pid != os.getsid(0)
        mine, its = _autogroup(os.getpid()), _autogroup(pid)
        if mine is not None and its is not None:  # Linux with autogroup: a scheduling group of its own
            assert its != mine
    finally:
        broker.stop()


def test_bench_own_session_0_keeps_the_broker_in_the_tests_session(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_OWN_SESSION", "0")
    broker = BrokerProcess(tmp_path / "d").start()
    try:
        assert os.getsid(broker.proc.pid) == os.getsid(0)
    finally:
        broker.stop()
