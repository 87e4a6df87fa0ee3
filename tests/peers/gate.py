"""The gate of ``make test``: each unit of a peer suite is a test here, against a fresh kafkalite.

A test of the suite that passes on the reference Kafka (its pass list says
so) and does not pass on kafkalite fails the gate unless the list names it
with a reason; a listed test that passes is reported (a ``StaleListing``
warning, in pytest's summary) so the list shrinks, without failing. Where a
suite's toolchain is missing (no Go; no compiler, network or Debian mirror)
its tests are skipped with the reason, or fail with
``KAFKALITE_REQUIRE_CLIENTS=1`` (CI).

``KAFKALITE_PEERS=off`` skips both suites; ``KAFKALITE_PEERS=full`` runs every
listed unit instead of the subset ``make test`` runs (see each test module).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import pytest

from tests.clients.toolchains import Unavailable
from tests.peers import brokers, expected
from tests.peers.suites import SUITES, Suite

REQUIRE = bool(os.environ.get("KAFKALITE_REQUIRE_CLIENTS"))
MODE = os.environ.get("KAFKALITE_PEERS", "gate")
# units run this many at a time (each against its own broker): most of a unit's time is the runner
# waiting on timeouts, so two at once take about half the time of one after the other
PARALLEL = max(1, int(os.environ.get("KAFKALITE_PEERS_PARALLEL", "2")))
_prepared: dict[str, object] = {}
_runs: dict[tuple[str, str], Future] = {}
_pool: ThreadPoolExecutor | None = None


class StaleListing(UserWarning):
    """A test listed as failing on kafkalite passed: take it off the list."""


class RacyRetried(UserWarning):
    """A test the pass list marks ``racy`` failed and was run once more (its first output in the message)."""


def prepared(suite: Suite):
    """The suite's build (once per session); skips (or fails, in CI) when it cannot be had."""
    if MODE == "off":
        pytest.skip("peer suites turned off by KAFKALITE_PEERS=off")
    if suite.name not in _prepared:
        try:
            _prepared[suite.name] = suite.prepare()
        except Unavailable as e:
            _prepared[suite.name] = e
    built = _prepared[suite.name]
    if isinstance(built, Unavailable):
        (pytest.fail if REQUIRE else pytest.skip)(f"{suite.title} suite unavailable: {built}")
    return built


_unit_brokers: dict[str, brokers.UnitBrokers] = {}  # of the cluster suites now under way (``shared_cluster``)


@contextlib.contextmanager
def shared_cluster(suite_name: str):
    """While in it, the units of the cluster suite ``suite_name`` share one cluster (stopped on exit):
    a test module's module-scoped fixture."""
    with brokers.UnitBrokers(SUITES[suite_name]) as unit_brokers:
        _unit_brokers[suite_name] = unit_brokers
        try:
            yield unit_brokers
        finally:
            del _unit_brokers[suite_name]


def _run_unit(suite: Suite, built, unit: str, data_dir) -> object:
    shared = _unit_brokers.get(suite.name)
    with contextlib.ExitStack() as stack:  # without a shared cluster, the unit's own broker (or cluster)
        unit_brokers = shared or stack.enter_context(brokers.UnitBrokers(suite))
        broker = stack.enter_context(unit_brokers.unit(unit, data_dir))
        return suite.run(built, unit, broker.bootstrap)


def upcoming(request, argname: str) -> list[str]:
    """The ``argname`` values of the selected tests of this test function after this one, in the
    session's order: the units to start, as runners free up, while this one runs."""
    items = request.session.items
    try:
        at = items.index(request.node)
    except ValueError:
        return []
    return [item.callspec.params[argname] for item in items[at + 1:]
            if getattr(item, "function", None) is request.node.function]


def _outcome(suite: Suite, built, unit: str, ahead: list[str], tmp_path_factory):
    """The unit's outcome, started now unless already under way; while it runs, the ``ahead`` units
    start in their order whenever fewer than ``PARALLEL`` run (so a long unit does not hold back the
    short ones after it, and no more than ``PARALLEL`` ever run at once)."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(PARALLEL, thread_name_prefix="peer-unit")

    def start(name: str) -> None:
        if (suite.name, name) not in _runs:
            data_dir = tmp_path_factory.mktemp(f"{suite.name}-{name}") / "data"
            _runs[(suite.name, name)] = _pool.submit(_run_unit, suite, built, name, data_dir)

    start(unit)
    mine, queue = _runs[(suite.name, unit)], list(ahead)
    while True:
        running = [f for f in _runs.values() if not f.done()]
        while queue and len(running) < PARALLEL:
            name = queue.pop(0)
            if (suite.name, name) not in _runs:
                start(name)
                running.append(_runs[(suite.name, name)])
        if mine.done():
            break
        wait(running, return_when=FIRST_COMPLETED)
    return _runs.pop((suite.name, unit)).result()


def check_unit(suite_name: str, unit: str, tmp_path_factory, ahead: list[str] = ()) -> None:
    """Run ``unit`` of the suite against a fresh kafkalite (unless it was started ahead) and apply
    the pass list to its tests; ``ahead`` (``upcoming``) are the units to start beside it, in turn."""
    suite = SUITES[suite_name]
    built = prepared(suite)
    plist = expected.load(suite_name)
    outcome = _outcome(suite, built, unit, list(ahead), tmp_path_factory)
    verdicts = _verdicts(suite, plist, outcome)
    racy = [n for n, v in verdicts.items() if v.action == "fail" and plist.tests.get(n, expected.Entry()).racy]
    if racy and all(v.action != "fail" or n in racy for n, v in verdicts.items()):
        # the suite's own test raced (the list says how): once more, on a fresh broker
        warnings.warn(RacyRetried(f"{suite.title} {unit}: {', '.join(racy)} failed; run again "
                                  f"({plist.tests[racy[0]].racy}):\n{outcome.detail[-1500:]}"), stacklevel=1)
        outcome = _run_unit(suite, built, unit, tmp_path_factory.mktemp(f"{suite.name}-{unit}-again") / "data")
        verdicts = _verdicts(suite, plist, outcome)
    for v in verdicts.values():
        if v.stale:
            warnings.warn(StaleListing(f"{suite.title}: {v.message}"), stacklevel=1)
    failures = [v.message for v in verdicts.values() if v.action == "fail"]
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
    if not verdicts:
        pytest.fail(f"{suite.title} {unit}: the runner reported no test\n{outcome.detail}", pytrace=False)
    known = [f"{n}: {v.message}" for n, v in verdicts.items() if v.action == "xfail"]
    if known:
        pytest.xfail("; ".join(known))
    if all(v.action == "skip" for v in verdicts.values()):
        pytest.skip("; ".join(v.message for v in verdicts.values()))


def _verdicts(suite: Suite, plist, outcome) -> dict:
    return {name: expected.verdict(name, plist.tests.get(name), result, outcome.detail) for name, result in suite.results(outcome).items()}


def units(suite_name: str, subset: set[str] | None = None) -> list[str]:
    """The units the gate runs: those of the listed tests (all with KAFKALITE_PEERS=full, else ``subset``)."""
    suite = SUITES[suite_name]
    listed = sorted({suite.unit(name) for name in expected.load(suite_name).tests})
    if subset is None or MODE == "full":
        return listed
    return [u for u in listed if u in subset]


NO_LIST = "(no pass list)"


def parameters(suite_name: str, subset: set[str] | None = None) -> list[str]:
    """A test module's parameters: ``units(suite_name, subset)``, or ``NO_LIST`` when the list is empty."""
    return units(suite_name, subset) or [NO_LIST]


def gate(suite_name: str, unit: str, request, tmp_path_factory, argname: str) -> None:
    """The body of a test module's one test: ``check_unit`` with the units ahead started beside it."""
    if unit == NO_LIST:
        suite = SUITES[suite_name]
        command = f"{suite.name.removesuffix('_cluster')}{' --cluster' if suite.nodes > 1 else ''}"
        pytest.skip(f"tests/peers/{suite_name}_expected.toml lists no test: run python -m tests.peers record {command}")
    check_unit(suite_name, unit, tmp_path_factory, upcoming(request, argname))


def shared_cluster_fixture(suite_name: str):
    """A module-scoped autouse fixture under which the cluster suite's units share one cluster."""
    @pytest.fixture(scope="module", autouse=True)
    def one_cluster():
        with shared_cluster(suite_name):
            yield
    return one_cluster
