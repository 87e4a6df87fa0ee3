"""A SIGKILL at every named write point (storage/crashpoints.py) loses nothing acknowledged.

For each point, hits 1 and 2 (``KAFKALITE_CRASH_KILLS=N`` runs hits 1..N; the
long run is ``make crashpoints``, 20 kills per point): a broker child process
on a copy of a prepared data directory runs bench/crashpoints.py's workload
with ``KAFKALITE_CRASH_AT=<point>:<hit>`` until it kills itself there (exit by
SIGKILL, and its "CRASH POINT" line on stderr), then a broker started again
without the variable on the same directory must hold every acknowledged record
and commit, keep topic ids and partition counts, keep deleted topics deleted,
and give a topic created again, or partitions added again, empty logs.
"""

from __future__ import annotations

import os

import pytest

from bench import crashpoints

HITS = range(1, int(os.environ.get("KAFKALITE_CRASH_KILLS", "2")) + 1)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("crash-template") / "data"
    return path, crashpoints.prepare(path)


@pytest.mark.parametrize("nth", HITS)
@pytest.mark.parametrize("point", sorted(crashpoints.POINTS))
def test_sigkill_at_crash_point_loses_nothing_acknowledged(point, nth, template, tmp_path):
    path, ids = template
    result = crashpoints.run_one(point, nth, 1000 * nth + len(point), path, ids, tmp_path)
    # the workload had something to lose (a start-up crash at the first metadata write excepted)
    assert result["acked_records"] > 0 or (point, nth) == ("meta.save.renaming", 1), result
    assert result["problems"] == [], result["problems"]


def test_crash_point_spec_is_parsed():
    from storage.crashpoints import parse

    assert parse("") is None
    assert parse("index.append") == ("index.append", 1)
    assert parse("index.append:7") == ("index.append", 7)
    with pytest.raises(ValueError):
        parse("index.append:0")


def test_crash_points_cost_nothing_when_off():
    """Without KAFKALITE_CRASH_AT (as in this test process) every point is one no-op function."""
    from storage import crashpoints as cp

    assert os.environ.get(cp.ENV) is None
    assert cp.crash_point is cp._noop
