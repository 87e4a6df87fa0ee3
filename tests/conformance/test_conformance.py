"""Every scenario, played against kafkalite and Apache Kafka 4.4 at once; the observations must be identical.

    pytest tests/conformance                       all scenarios
    pytest tests/conformance -k classic            one area
    pytest tests/conformance -k "commit.unknown"   one scenario

    KAFKALITE_REFERENCE_KAFKA_VERSION=4.1.0 pytest tests/conformance   against 4.1 (make test-conformance-4.1)

Known differences (``known_differences.py``, per release) are strict xfails. The
report goes to ``build/conformance/report.json``; a full run also regenerates
``docs/compatibility.md`` (against 4.1: ``build/conformance-4.1/``,
``docs/compatibility-4.1.md``).
"""

from __future__ import annotations

import concurrent.futures
import json

import pytest

from tests.reference_kafka import KAFKA_VERSION

from .conftest import RESULTS
from .known_differences import KNOWN_DIFFERENCES
from .registry import load_all, run

SCENARIOS = load_all()


def _params():
    for name in SCENARIOS:
        marks = [pytest.mark.reference]
        if name in KNOWN_DIFFERENCES:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_DIFFERENCES[name]))
        yield pytest.param(name, id=name, marks=marks)


def first_difference(a: list[dict], b: list[dict]) -> str:
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            return (f"observation #{i} ({(x or y or {}).get('step')}):\n"
                    f"  kafkalite: {json.dumps(x, sort_keys=True)}\n"
                    f"  kafka:     {json.dumps(y, sort_keys=True)}")
    return ""


def _error_step(outcome) -> list[dict]:
    if outcome.error is None:
        return []
    last = outcome.error.strip().splitlines()[-1]
    return [{"step": "scenario-raised", "error": last.split(":", 1)[0]}]


@pytest.mark.parametrize("name", list(_params()))
def test_conformance(name, request):
    sc = SCENARIOS[name]
    login = None
    if sc.listener == "SASL_PLAINTEXT":  # a pair of brokers of its own, started only when such a scenario runs
        brokers = request.getfixturevalue("conformance_sasl_brokers")
        lite_address, kafka_address, login = brokers["kafkalite"], brokers["kafka"], brokers["login"]
    else:
        brokers = request.getfixturevalue("conformance_brokers")
        lite_address, kafka_address = brokers["kafkalite"].bootstrap, brokers["kafka"].bootstrap
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        f_lite = pool.submit(run, sc, "kafkalite", lite_address, login)
        f_kafka = pool.submit(run, sc, "kafka", kafka_address, login)
        lite, kafka = f_lite.result(), f_kafka.result()
    a = lite.observations + _error_step(lite)
    b = kafka.observations + _error_step(kafka)
    same = a == b
    if kafka.error and lite.error and same:
        status = "error"
    elif same:
        status = "pass"
    else:
        status = "known" if name in KNOWN_DIFFERENCES else "diff"
    RESULTS[name] = {
        "area": sc.area, "doc": sc.doc, "status": status, "known_reason": KNOWN_DIFFERENCES.get(name),
        "first_difference": first_difference(a, b) if not same else "",
        "kafkalite": a, "kafka": b, "kafkalite_error": lite.error, "kafka_error": kafka.error,
    }
    if kafka.error:
        # the scenario itself is wrong if real Kafka trips it
        pytest.fail(f"scenario raised against Apache Kafka:\n{kafka.error}")
    assert same, f"kafkalite differs from Apache Kafka {KAFKA_VERSION} at {first_difference(a, b)}" + (f"\nkafkalite raised:\n{lite.error}" if lite.error else "")
