"""The peer suites behind one interface: prepare, discover, run one unit, describe.

A *unit* is what one run of the suite's runner covers, against one fresh
broker: a top-level test for kgo, a test number (all its tests) for
librdkafka. The pass lists hold *tests*; ``results`` maps a unit's outcome
onto them.

A *cluster suite* (``nodes`` > 1; ``kgo_cluster``, ``librdkafka_cluster``)
runs against 3 brokers, one cluster shared by its units, with a pass list of
its own (``<name>_expected.toml``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
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
    nodes: int = 1  # brokers of each side: > 1, one cluster shared by the units (each uses its own topics)


def _kgo_header(built: kgo.Built) -> dict:
    return {"suite": "franz-go pkg/kgo integration tests", "version": f"franz-go {built.version}", "records": kgo.RECORDS}


def _rdk_header(built: librdkafka.Built) -> dict:
    return {"suite": "librdkafka tests/ (test-runner -L -Q)", "version": f"librdkafka {built.version} (Debian source package)",
            "timeout_multiplier": librdkafka.TIMEOUT_MULTIPLIER}


def _on_cluster(suite: Suite, nodes: int = 3, header: dict | None = None, **changes) -> Suite:
    """``suite`` against ``nodes`` brokers on each side, with a pass list of its own (``header``: more of its header)."""
    def cluster_header(built) -> dict:
        base = suite.header(built)
        return {**base, "suite": f"{base['suite']}, {nodes} brokers", "nodes": nodes, **(header or {})}
    return replace(suite, name=f"{suite.name}_cluster", title=f"{suite.title} ({nodes} nodes)", nodes=nodes,
                   header=cluster_header, **changes)


KGO = Suite("kgo", "franz-go kgo", kgo.prepare, kgo.discover, kgo.run, _kgo_header,
            unit=lambda name: name, results=lambda o: {o.name: o.result})
LIBRDKAFKA = Suite("librdkafka", "librdkafka", librdkafka.prepare, librdkafka.discover, librdkafka.run, _rdk_header,
                   unit=lambda name: name[:4], results=lambda o: dict(o.subtests),
                   # librdkafka's default test scenario (tests/scenarios/default.json): 4 partitions
                   partitions=4)
SUITES = {s.name: s for s in (
    KGO, LIBRDKAFKA,
    # franz-go's topics with replication factor 3 (KGO_TEST_RF, whose default is 3: its tests are written for a cluster)
    _on_cluster(KGO, header={"replication_factor": 3}, run=functools.partial(kgo.run, rf=3)),
    _on_cluster(LIBRDKAFKA, discover=librdkafka.discover_cluster),
)}
