"""``python -m tests.peers record|run <suite> [--cluster] [test ...]``.

record: runs the suite against one reference Kafka (tests/reference_kafka.py)
        and rewrites the ``kafka`` result of each test in
        tests/peers/<suite>_expected.toml, keeping the listed kafkalite reasons
        (``make peers-reference``);
run:    runs it against kafkalite (a fresh broker per test) and prints each
        result with what the gate of ``make test`` makes of it.

Without test names every test is run: for record, the tests the suite's
discovery finds plus those already listed; for run, those listed.
``--cluster`` (or the suite name ``<suite>_cluster``) picks the suite's
3-node variant: a 3-broker reference Kafka cluster, one 3-node kafkalite
shared by the sweep's units, and tests/peers/<suite>_cluster_expected.toml.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time

from tests.clients.toolchains import Unavailable
from tests.peers import brokers, expected, suites


def _print(outcome, note: str = "") -> None:
    print(f"{outcome.result:5} {outcome.seconds:6.1f}s  {outcome.name}{'  ' + note if note else ''}", flush=True)


def record(suite: suites.Suite, names: list[str]) -> int:
    built = suite.prepare()
    plist = expected.load(suite.name)
    todo = names or sorted(set(suite.discover(built)) | {suite.unit(t) for t in plist.tests})
    began = time.monotonic()
    with brokers.reference(suite.partitions, suite.nodes) as kafka:
        for unit in todo:
            outcome = suite.run(built, unit, kafka.bootstrap)
            for name, result in suite.results(outcome).items():
                plist.tests.setdefault(name, expected.Entry()).kafka = result
            _print(outcome, " ".join(f"{n}={r}" for n, r in suite.results(outcome).items() if n != unit))
            if outcome.result == "fail":
                print("      " + outcome.detail[-600:].replace("\n", "\n      "))
    plist.header = {**plist.header, **suite.header(built), "reference": brokers.reference_name(suite.nodes),
                    "recorded": datetime.date.today().isoformat()}
    expected.save(plist)
    print(f"{len(todo)} tests against {brokers.reference_name(suite.nodes)} in {time.monotonic() - began:.0f}s; wrote {plist.path}")
    return 0


def run(suite: suites.Suite, names: list[str]) -> int:
    built = suite.prepare()
    plist = expected.load(suite.name)
    listed_units = sorted({suite.unit(t) for t in plist.tests})
    todo = names or listed_units
    failed = 0
    passed: set[str] = set()
    began = time.monotonic()
    unit_brokers = brokers.UnitBrokers(suite)
    for unit in todo:
        try:
            with unit_brokers.unit(unit) as broker:
                outcome = suite.run(built, unit, broker.bootstrap)
        except Exception as e:  # noqa: BLE001 - a handler failure (HandlerFailed) is reported, the sweep goes on
            failed += 1
            print(f"ERROR  {unit}: {e!r}"[:2000], flush=True)
            continue
        notes = []
        for name, result in suite.results(outcome).items():
            v = expected.verdict(name, plist.tests.get(name), result, outcome.detail)
            failed += v.action == "fail"
            if result == "pass":
                passed.add(name)
            notes.append(f"{name}={result}[{v.action}{', stale listing' if v.stale else ''}]")
        _print(outcome, " ".join(notes))
        if outcome.result != "pass":
            print("      " + outcome.detail[-600:].replace("\n", "\n      "))
    try:
        unit_brokers.close()
    except Exception as e:  # noqa: BLE001 - as above
        failed += 1
        print(f"ERROR  stopping the cluster: {e!r}"[:2000], flush=True)
    seconds = time.monotonic() - began
    print(f"{len(todo)} units against kafkalite in {seconds:.0f}s; {len(passed)} tests passed; {failed} unlisted failures")
    if set(todo) >= set(listed_units):  # a full sweep: its totals go into the list's header (COMPATIBILITY.md shows them)
        plist = expected.load(suite.name)
        plist.header.update({"kafkalite_pass": len(passed & set(plist.tests)), "kafkalite_seconds": round(seconds),
                             "kafkalite_checked": datetime.date.today().isoformat()})
        expected.save(plist)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("record", "run"))
    parser.add_argument("suite", choices=sorted(suites.SUITES))
    parser.add_argument("--cluster", action="store_true", help="the suite's 3-node variant (<suite>_cluster)")
    parser.add_argument("tests", nargs="*", help="test names (default: all)")
    args = parser.parse_intermixed_args(argv)
    name = f"{args.suite}_cluster" if args.cluster and not args.suite.endswith("_cluster") else args.suite
    if name not in suites.SUITES:
        parser.error(f"{args.suite} has no 3-node variant")
    suite = suites.SUITES[name]
    try:
        return (record if args.command == "record" else run)(suite, args.tests)
    except Unavailable as e:
        print(f"{suite.name}: unavailable: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
