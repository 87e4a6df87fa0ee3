"""The peer suites behind one interface: prepare, discover, run one unit, describe.

A *unit* is what one run of the suite's runner covers, against one fresh
broker: a top-level test for kgo, a test number (all its tests) for
librdkafka. The pass lists hold *tests*; ``results`` maps a unit's outcome
onto them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from tests.peers import kgo, librdkafka


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    prepare: Callable[[], Any]  # raises tests.clients.toolchains.Unavailable
    discover: Callable[[Any], list[str]]  # the units
    run: Callable[[Any, str, str], Any]  # (built, unit, bootstrap) -> Outcome
    header: Callable[[Any], dict]
    unit: Callable[[str], str]  # test name -> its unit
    results: Callable[[Any], dict[str, str]]  # outcome -> {test name: pass/fail/skip}
    partitions: int = 1  # of auto-created topics, on both brokers


def _kgo_header(built: kgo.Built) -> dict:
    return {"suite": "franz-go pkg/kgo integration tests", "version": f"franz-go {built.version}", "records": kgo.RECORDS}


def _rdk_header(built: librdkafka.Built) -> dict:
    return {"suite": "librdkafka tests/ (test-runner -L -Q)", "version": f"librdkafka {built.version} (Debian source package)",
            "timeout_multiplier": librdkafka.TIMEOUT_MULTIPLIER}


SUITES = {
    "kgo": Suite("kgo", "franz-go kgo", kgo.prepare, kgo.discover, kgo.run, _kgo_header,
                 unit=lambda name: name, results=lambda o: {o.name: o.result}),
    "librdkafka": Suite("librdkafka", "librdkafka", librdkafka.prepare, librdkafka.discover, librdkafka.run, _rdk_header,
                        unit=lambda name: name[:4], results=lambda o: dict(o.subtests),
                        # librdkafka's default test scenario (tests/scenarios/default.json): 4 partitions
                        partitions=4),
}
