"""The peer suites' pass lists: the gate's verdicts, the TOML round trip, and the lists in the repository."""

from __future__ import annotations

import contextlib
import tempfile
import tomllib
from pathlib import Path

import pytest

from tests.peers import expected
from tests.peers.expected import Entry, PassList, verdict


def test_a_test_passing_on_kafka_and_failing_unlisted_fails_the_gate():
    v = verdict("T", Entry(kafka="pass"), "fail", "boom")
    assert v.action == "fail" and "boom" in v.message and not v.stale


def test_a_test_passing_on_kafka_and_skipped_unlisted_fails_the_gate():
    assert verdict("T", Entry(kafka="pass"), "skip").action == "fail"


def test_a_listed_failure_is_expected():
    v = verdict("T", Entry(kafka="pass", kafkalite="fail", reason="no API"), "fail")
    assert v.action == "xfail" and "no API" in v.message and not v.stale


def test_a_listed_test_that_passes_is_stale_but_not_a_failure():
    v = verdict("T", Entry(kafka="pass", kafkalite="fail", reason="no API"), "pass")
    assert v.action == "pass" and v.stale


def test_a_listed_test_with_another_result_is_still_expected_but_stale():
    v = verdict("T", Entry(kafka="pass", kafkalite="skip", reason="r"), "fail")
    assert v.action == "xfail" and v.stale


def test_a_test_that_fails_on_kafka_too_is_not_gated():
    assert verdict("T", Entry(kafka="fail"), "fail").action == "xfail"
    assert verdict("T", Entry(kafka="skip"), "skip").action == "skip"
    assert verdict("T", None, "fail").action == "xfail"


def test_dump_round_trips_through_tomllib():
    plist = PassList("x", {"suite": 'a "quoted" suite', "records": 5},
                     {"0011_produce": Entry("pass", "fail", "needs \\ IncrementalAlterConfigs", "note"),
                      "TestA/b": Entry("skip")})
    data = tomllib.loads(expected.dump(plist))
    assert data["suite"] == 'a "quoted" suite' and data["records"] == 5
    assert data["tests"]["0011_produce"] == {"kafka": "pass", "kafkalite": "fail",
                                             "reason": "needs \\ IncrementalAlterConfigs", "note": "note"}
    assert data["tests"]["TestA/b"] == {"kafka": "skip"}


@pytest.mark.parametrize("suite", ["kgo", "librdkafka", "kgo_cluster", "librdkafka_cluster"])
def test_the_committed_lists_are_well_formed(suite):
    plist = expected.load(suite)
    assert plist.tests, f"tests/peers/{suite}_expected.toml lists no test"
    for name, e in plist.tests.items():
        assert e.kafka in (*expected.RESULTS, "unknown"), name
        assert e.kafkalite in (None, *expected.RESULTS), name
        assert bool(e.kafkalite) == bool(e.reason), f"{name}: a listed difference needs a reason, and only it"


class _Outcome:
    def __init__(self, result: str) -> None:
        self.result, self.detail, self.name = result, f"the {result} run", "T"


class _Suite:
    name, title = "fake", "fake suite"

    def results(self, outcome) -> dict:
        return {"T": outcome.result}


def _gate_with(monkeypatch, entry: Entry, second: str) -> list:
    """check_unit with a first run that fails and a second one of result ``second``; the runs made."""
    from tests.peers import gate

    runs = []
    monkeypatch.setitem(gate.SUITES, "fake", _Suite())
    monkeypatch.setattr(gate, "prepared", lambda suite: object())
    monkeypatch.setattr(gate.expected, "load", lambda name: PassList("fake", {}, {"T": entry}))
    monkeypatch.setattr(gate, "_outcome", lambda *a: (runs.append("first"), _Outcome("fail"))[1])
    monkeypatch.setattr(gate, "_run_unit", lambda *a: (runs.append("again"), _Outcome(second))[1])

    class _Tmp:
        def mktemp(self, name):
            return Path(tempfile.mkdtemp())

    with pytest.warns(gate.RacyRetried) if entry.racy else contextlib.nullcontext():
        try:
            gate.check_unit("fake", "T", _Tmp())
            runs.append("passed")
        except pytest.fail.Exception:
            runs.append("failed")
    return runs


def test_a_racy_test_that_fails_runs_once_more_and_its_second_result_counts(monkeypatch):
    racy = Entry(kafka="pass", racy="its loop counts a topic it does not want")
    assert _gate_with(monkeypatch, racy, "pass") == ["first", "again", "passed"]
    assert _gate_with(monkeypatch, racy, "fail") == ["first", "again", "failed"]  # twice in a row fails the gate


def test_a_test_not_marked_racy_is_not_run_again(monkeypatch):
    assert _gate_with(monkeypatch, Entry(kafka="pass"), "pass") == ["first", "failed"]
