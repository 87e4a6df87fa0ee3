"""bench.compare / bench.compare_report: the parts that need no broker (log parsing, the summary table, rendering)."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from bench import compare, compare_report
from bench.kip848_scenarios import JoinSample, ProtocolResult

KAFKA_LOG = """\
[2026-11-25 04:20:00,100] INFO [GroupCoordinator id=1] Scheduling loading of metadata from __consumer_offsets-0 with epoch 1 (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)
[2026-11-25 04:20:00,110] INFO [GroupCoordinator id=1] Scheduling loading of metadata from __consumer_offsets-1 with epoch 1 (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)
[2026-11-25 04:20:00,400] INFO [GroupCoordinator id=1] Finished loading of metadata from __consumer_offsets-0 with epoch 1 in 290ms where 10ms was spent in the scheduler. Loaded 1000 records which total to 64000 bytes. (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)
[2026-11-25 04:20:00,600] INFO [GroupCoordinator id=1] Finished loading of metadata from __consumer_offsets-1 with epoch 1 in 480ms where 200ms was spent in the scheduler. Loaded 500 records which total to 32000 bytes. (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)
[2026-11-25 04:20:00,700] INFO [TransactionCoordinator id=1] Finished loading of metadata from __transaction_state-0 with epoch 1 in 1ms (x)
"""


def test_kafka_load_lines():
    got = compare.kafka_load_lines(KAFKA_LOG)
    assert got["partitions"] == 2
    assert got["records"] == 1500
    assert got["sum_ms"] == 770
    assert got["sum_sched_ms"] == 210
    assert got["max_ms"] == 480
    assert round(got["span_ms"]) == 500  # first Scheduling (…,100) to last Finished (…,600)


def _results(kfake: bool) -> compare.Results:
    args = compare.parse_args(["--quick", "--k848-sizes", "100"])
    res = compare.Results(dt.datetime(2026, 11, 25, tzinfo=dt.UTC), {"cores": 2}, args)
    if kfake:
        res.sides[compare.KFAKE] = compare.Side()
    res.versions = {"kafka": "4.1.0", "kfake": "v0.0.0-x"}
    res.phases["start-up"] = compare.Phase("start-up", "1.00 1.00 1.00", "2.00 1.00 1.00")
    res.phases["KIP-848 100 members"] = compare.Phase("KIP-848 100 members", "3.00 1.00 1.00", "4.00 1.00 1.00")
    for k, side in res.sides.items():
        side.startup_api_ms = [100.0 if k == compare.KAFKALITE else 1000.0]
        r = ProtocolResult("kip848", 100, 500, 2.0)
        r.joins.append(JoinSample("kip848", 100, 500.0, 1, 1, 40.0, 1, 510.0, 1.0, 1.0, 1))
        r.form_errors = Counter({"ConsumerGroupHeartbeat unknown_member_id": 3 if k == compare.KAFKALITE else 0})
        r.form_double_owned = 0
        side.k848.append(r)
        side.load = {"records": 1000, "ms": 10.0, "records_per_s": 100_000.0, "how": "test", "problems": []}
    res.sides[compare.KAFKA].load = {}
    return res


def test_summary_rows_ratio_and_counts():
    res = _results(kfake=True)
    rows = {r.label: r for r in compare_report.summary_rows(res)}
    start = rows["Process start → first ApiVersions answered"]
    assert (start.kl, start.kf, start.kk) == (100.0, 1000.0, 1000.0)
    assert start.better() == "kafkalite, 10.0×"
    assert compare_report.phase_load(res)(start.phase) == "1.00 → 2.00"
    unknown = rows["KIP-848, forming 99 members: ConsumerGroupHeartbeat answered UNKNOWN_MEMBER_ID (count)"]
    assert (unknown.kl, unknown.kf, unknown.kk) == (3, 0, 0)
    assert unknown.better() == "Kafka (none)"
    load = rows["Coordinator load of distinct keys (offset commits), records/s"]
    assert load.kf_na == compare_report.KAFKA_PUBLISHED_LOAD  # Kafka not measured: its published figure is named instead


def test_render_with_and_without_kfake(tmp_path):
    for kfake in (True, False):
        res = _results(kfake)
        text = compare_report.render(res, [])
        head = next(line for line in text.splitlines() if line.startswith("| Figure"))
        assert (" kfake |" in head) == kfake
        assert "### Summary" in text and "### Notes" in text
        out = tmp_path / f"out-{kfake}.md"
        compare_report.write_section(text, out)
        compare_report.write_section(text, out)  # replaced, not added twice
        assert out.read_text().count(compare_report.SECTION) == 1


def test_parse_args_only():
    a = compare.parse_args(["--only", "startup,load", "--quick"])
    assert a.only == ["startup", "load"]


def test_tls_rows_only_when_measured_and_kfake_has_none():
    res = _results(kfake=True)
    assert not any(r.phase == "TLS" for r in compare_report.summary_rows(res))
    hs = {"PLAINTEXT": (0.4, 0.5, 0.1), "SASL_SSL/PLAIN": (1.7, 2.0, 0.9), "SASL_SSL/SCRAM-SHA-512": (2.0, 2.4, 1.0)}
    res.sides[compare.KAFKALITE].tls = {"plain_ms_per_mb": 1.0, "tls_ms_per_mb": 2.5, "ratio": 2.5, "handshakes": hs}
    res.sides[compare.KAFKA].tls = {"plain_ms_per_mb": 5.0, "tls_ms_per_mb": 10.0, "ratio": 2.0,
                                    "handshakes": {k: (v[0] * 2, v[1], v[2]) for k, v in hs.items()}}
    rows = [r for r in compare_report.summary_rows(res) if r.phase == "TLS"]
    assert [round(r.kl, 2) for r in rows] == [2.5, 1.3, 1.6]
    assert [round(r.kf, 2) for r in rows] == [2.0, 2.6, 3.2]
    assert rows[0].better() == "Kafka, 1.2×" and rows[1].better() == "kafkalite, 2.0×"
    assert all(r.kk_na == "n/a (no TLS listener)" for r in rows)
