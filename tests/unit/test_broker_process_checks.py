"""tests.broker_process finds "handler failed" in a child broker's stderr and fails the test."""

from __future__ import annotations

import pytest

from broker.testing import HandlerFailed
from tests.broker_process import BrokerProcess

CONSOLE = [
    "2026-01-01T00:00:00.000001Z [info     ] listening                      host=127.0.0.1 port=1\n",
    "2026-01-01T00:00:01.000001Z [error    ] handler failed                 api=Fetch client_id=x peer=127.0.0.1:2 version=13\n",
    "Traceback (most recent call last):\n",
    '  File "broker/handlers/fetch.py", line 1, in handle\n',
    "AttributeError: 'FetchTopic' object has no attribute 'topic'\n",
    "2026-01-01T00:00:02.000001Z [info     ] stopped\n",
]
JSON = ['{"api": "Produce", "event": "handler failed", "level": "error", "exception": "Traceback ...KeyError: 1"}\n']


def _exited(tmp_path, lines, **kwargs) -> BrokerProcess:
    b = BrokerProcess(tmp_path, **kwargs)
    b.stderr_lines = list(lines)  # as the stderr reader leaves them once the broker has exited
    return b


def test_console_failure_is_reported_with_its_traceback(tmp_path):
    b = _exited(tmp_path, CONSOLE)
    with pytest.raises(HandlerFailed) as info:
        b.check_handler_errors()
    (failure,) = info.value.failures
    assert "api=Fetch" in failure and "AttributeError" in failure and "stopped" not in failure
    b.check_handler_errors()  # reported once
    b.stderr_lines += JSON
    with pytest.raises(HandlerFailed, match="KeyError"):
        b.check_handler_errors()


def test_clean_log_and_opt_out(tmp_path):
    _exited(tmp_path, [CONSOLE[0], CONSOLE[-1]]).check_handler_errors()
    quiet = _exited(tmp_path, CONSOLE, fail_on_handler_errors=False)
    quiet.check_handler_errors()
    assert quiet.handler_failures() == []  # what was checked is not reported again


def test_stop_of_a_real_broker_checks_its_log(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    b.stop()  # a clean run: nothing raised
    b.stderr_lines.append(CONSOLE[1])  # as if the broker had logged a failure
    with pytest.raises(HandlerFailed):
        b.start().stop()
