"""A bounded run of the network fuzzer (tests/fuzz/network.py), and its saved cases replayed.

The run: up to 20,000 mutated frames over 16 concurrent connections against a
broker child process, stopping after 30 s whatever the count. It must end
with no crash, no hung connection, no bystander or fresh-client failure, no
"handler failed" and no other error on the broker's stderr. Findings are
saved under the test's tmp directory and summarised in the assertion.

``KAFKALITE_FUZZ_SEED`` picks another seed (the default is fixed, so a
failure can be rerun); ``KAFKALITE_FUZZ_FRAMES`` / ``KAFKALITE_FUZZ_SECONDS``
change the bounds.

Each ``tests/fuzz/corpus/network-*.streams`` is a case the fuzzer once found
(its ``.json`` says what it did); replaying it must now be harmless. The
protocol fuzzer's cases (``tests/fuzz/corpus/*.bin``, raw bytes) are also
sent over real connections, all to one broker.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.fuzz import network

FAILURES = ("crashes", "hangs", "bystander_failures", "fresh_client_failures", "handler_failures", "broker_errors")


def _findings(result: dict) -> str:
    keep = {
        "seed": result.get("seed"),
        "counts": {k: result[k] for k in FAILURES},
        "crashes": result.get("crash_details", [])[:3],
        "hangs": result.get("hang_details", [])[:5],
        "handler_failures": result.get("handler_failure_details", [])[:5],
        "broker_errors": [e.get("error") or e.get("event") for e in result.get("broker_error_details", [])][:5],
        "bystander": result.get("bystander_failure_details", [])[:3],
        "fresh_client": result.get("fresh_client_failure_details", [])[:3],
    }
    return json.dumps(keep, indent=1, default=str)[:20_000]


def test_network_fuzz_bounded_run(tmp_path):
    fuzzer = network.Fuzzer(
        frames=int(os.environ.get("KAFKALITE_FUZZ_FRAMES", 20_000)),
        connections=16,
        seconds=float(os.environ.get("KAFKALITE_FUZZ_SECONDS", 30)),
        batch=2000,
        seed=int(os.environ.get("KAFKALITE_FUZZ_SEED", 20261123)),
        corpus_dir=tmp_path / "corpus",
        minimize=1,
    )
    result = network.run_async(fuzzer.run())
    (tmp_path / "result.json").write_text(json.dumps(result, indent=2, default=str))
    # the run did something: batches were sent and checked, and some requests were answered
    assert result["batches"] >= 1 and result["frames_sent"] >= 1000, result
    assert result["outcomes"].get("answered", 0) > 0, result["outcomes"]
    bad = {k: result[k] for k in FAILURES if result[k]}
    assert not bad, f"network fuzzer findings {bad}; details in {tmp_path}:\n{_findings(result)}"


@pytest.mark.parametrize("path", network.corpus_files(), ids=lambda p: p.name)
def test_saved_case_is_harmless(path):
    result = network.run_async(network.replay([path]))
    entry = result["files"][0]
    assert entry["streams"] >= 1
    bad = {k: result[k] for k in ("crashes", "hangs", "handler_failures", "broker_errors", "fresh_client_failures") if result[k]}
    assert not bad, f"{path.name} ({json.loads(path.with_suffix('.json').read_text()).get('what', '')}): {bad}\n" + json.dumps(
        entry, indent=1, default=str
    )[:8000]


def test_protocol_fuzzer_cases_over_the_network(tmp_path):
    raw = sorted(network.CORPUS_DIR.glob("*.bin"))
    if not raw:
        pytest.skip("no tests/fuzz/corpus/*.bin cases")
    combined = tmp_path / "protocol-cases.streams"
    network.write_corpus(combined, [s for p in raw for s in network.read_corpus(p)], {"kind": "protocol fuzzer cases"})
    result = network.run_async(network.replay([combined]))
    entry = result["files"][0]
    assert entry["streams"] == len(raw)
    bad = {k: result[k] for k in ("crashes", "hangs", "handler_failures", "broker_errors", "fresh_client_failures") if result[k]}
    assert not bad, json.dumps(entry, indent=1, default=str)[:8000]
