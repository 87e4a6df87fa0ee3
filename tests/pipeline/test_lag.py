"""The lag job (python -m pipeline.lag) against offsets the test commits itself."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[test]')")
import pandas as pd  # noqa: E402 - with pyspark's sql extra
from confluent_kafka.admin import AdminClient

from pipeline import lag
from tests import reference_kafka
from tests.pipeline.helpers import commit, create_topic, produce

pytestmark = pytest.mark.slow


def _scenario(bootstrap: str) -> dict:
    """Produce and commit; returns the expected lag rows and the commit time windows."""
    create_topic(bootstrap, "orders", 3)
    create_topic(bootstrap, "audit", 1)
    produce(bootstrap, "orders", [(0, None, b"o", None)] * 10 + [(1, None, b"o", None)] * 7)
    produce(bootstrap, "audit", [(0, None, b"a", None)] * 5)
    windows = {}
    t = time.time()
    commit(bootstrap, "alpha", {("orders", 0): 2})
    time.sleep(0.3)
    commit(bootstrap, "alpha", {("orders", 0): 4, ("orders", 1): 7})
    commit(bootstrap, "alpha", {("audit", 0): 1}, metadata="checkpoint-1")
    windows["alpha"] = (t, time.time())
    t = time.time()
    commit(bootstrap, "beta", {("orders", 0): 10, ("orders", 2): 0})
    windows["beta"] = (t, time.time())
    # a group whose offsets are deleted again: tombstones, so no row
    commit(bootstrap, "gone", {("orders", 1): 3})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_consumer_groups(["gone"], request_timeout=30).values():
        f.result(30)
    expected = pd.DataFrame(
        [
            ("alpha", "audit", 0, 1, 5, 4, 1),
            ("alpha", "orders", 0, 4, 10, 6, 2),
            ("alpha", "orders", 1, 7, 7, 0, 1),
            ("beta", "orders", 0, 10, 10, 0, 1),
            ("beta", "orders", 2, 0, 0, 0, 1),
        ],
        columns=["group", "topic", "partition", "committed_offset", "end_offset", "lag", "commits"],
    )
    return {"expected": expected, "windows": windows}


def _figures(pdf: pd.DataFrame) -> pd.DataFrame:
    cols = ["group", "topic", "partition", "committed_offset", "end_offset", "lag", "commits"]
    out = pdf[cols].sort_values(cols[:3]).reset_index(drop=True)
    return out.astype({c: "int64" for c in cols[2:]})


def test_lag_matches_committed_offsets(spark, kafkalite, tmp_path, capsys):
    scenario = _scenario(kafkalite.bootstrap)
    out = tmp_path / "out"
    pdf = lag.run(spark, kafkalite.bootstrap, str(out))
    pdf = pdf[pdf["group"].isin(["alpha", "beta", "gone"])]
    pd.testing.assert_frame_equal(_figures(pdf), scenario["expected"])

    # commit times fall inside the windows the commits were made in (ms precision)
    for group, (t0, t1) in scenario["windows"].items():
        times = pdf.loc[pdf["group"] == group, "last_commit_time"]
        assert times.notna().all()
        seconds = times.map(lambda ts: ts.tz_localize("UTC").timestamp() if ts.tzinfo is None else ts.timestamp())
        assert ((seconds >= t0 - 0.002) & (seconds <= t1 + 0.002)).all(), (group, t0, t1, list(times))
    row = pdf[(pdf["group"] == "alpha") & (pdf["topic"] == "orders") & (pdf["partition"] == 0)].iloc[0]
    # two commits at least 0.3 s apart, within the window: 1 commit per (span) minutes
    window = scenario["windows"]["alpha"][1] - scenario["windows"]["alpha"][0]
    assert 60.0 / window <= row["commit_rate_per_min"] <= 60.0 / 0.3
    assert pdf.loc[pdf["commits"] == 1, "commit_rate_per_min"].isna().all()
    # confluent-kafka (librdkafka) sends commit metadata with its C string's NUL terminator
    assert [m.rstrip("\x00") for m in pdf.loc[(pdf["group"] == "alpha") & (pdf["topic"] == "audit"), "commit_metadata"]] == ["checkpoint-1"]

    # outputs: Parquet with the same rows, a PNG, the console table
    written = pd.read_parquet(out / "lag")
    pd.testing.assert_frame_equal(_figures(written[written["group"].isin(["alpha", "beta"])]), scenario["expected"])
    png = out / "lag.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "consumer lag (5 rows)" in printed and "alpha" in printed


@pytest.mark.reference
def test_lag_same_on_reference_kafka(spark, kafkalite, tmp_path):
    """The same commits against Apache Kafka 4.1 give the same lag figures."""
    ok, why = reference_kafka.available()
    if not ok:
        pytest.skip(why)
    ref = reference_kafka.ReferenceKafka(tmp_path / "kafka").start()
    try:
        expected_ref = _scenario(ref.bootstrap)["expected"]
        on_kafka = lag.compute(spark, ref.bootstrap).toPandas()
    finally:
        ref.stop()
    _scenario(kafkalite.bootstrap)
    on_kafkalite = lag.compute(spark, kafkalite.bootstrap).toPandas()
    pd.testing.assert_frame_equal(_figures(on_kafka), expected_ref)
    pd.testing.assert_frame_equal(_figures(on_kafkalite), _figures(on_kafka))


def test_decoder_handles_every_record_kind():
    """The UDF's row function on records made by the project's own encoder."""
    from pipeline.offsets import decode_frame
    from protocol import group_records as gr

    k1 = gr.encode_key(gr.OffsetCommitKey("g", "t", 3))
    v1 = gr.encode_value(gr.OffsetCommitValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1234))
    k2 = gr.encode_key(gr.GroupMetadataKey("g"))
    v2 = gr.encode_value(gr.GroupMetadataValue(protocol_type="consumer", generation=7, protocol="range", leader="x"))
    frame = decode_frame(pd.Series([k1, k1, k2, b"\x00\x7f\x00", b"\x00"]), pd.Series([v1, None, v2, b"", b""]))
    assert frame["kind"].tolist() == ["offset_commit", "offset_commit", "group_metadata", "unknown", "malformed"]
    assert frame.loc[0, ["group", "topic", "partition", "committed_offset", "leader_epoch", "commit_metadata", "commit_timestamp_ms"]].tolist() == \
        ["g", "t", 3, 42, 5, "m", 1234]
    assert bool(frame.loc[1, "tombstone"]) and pd.isna(frame.loc[1, "committed_offset"])
    assert frame.loc[2, ["protocol_type", "generation", "protocol", "leader", "members"]].tolist() == ["consumer", 7, "range", "x", 0]


def test_lag_writes_only_under_output(spark, kafkalite, tmp_path):
    produce(kafkalite.bootstrap, "solo", [(0, None, b"x", None)] * 3)
    commit(kafkalite.bootstrap, "solo-group", {("solo", 0): 1})
    out = tmp_path / "nested" / "out"
    before = set(Path(tmp_path).rglob("*"))
    lag.run(spark, kafkalite.bootstrap, str(out), quiet=True)
    created = {p for p in set(Path(tmp_path).rglob("*")) - before if "data" not in p.relative_to(tmp_path).parts[:1]}
    assert created and all(p == out.parent or out in p.parents or p == out for p in created), sorted(map(str, created))
