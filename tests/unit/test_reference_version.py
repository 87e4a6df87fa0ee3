"""The reference Kafka's version setting and the per-release conformance report paths (no JVM needed)."""

import pytest

from tests import reference_kafka
from tests.conformance import known_differences, report
from tests.conformance.version_changes import CHANGES


def test_default_version_is_4_4(monkeypatch):
    monkeypatch.delenv(reference_kafka.VERSION_ENV, raising=False)
    assert reference_kafka._version_from_env() == "4.4.0"


@pytest.mark.parametrize("value", ["4.1.0", "4.2.1", " 4.3.0 "])
def test_any_4x_release_is_taken(monkeypatch, value):
    monkeypatch.setenv(reference_kafka.VERSION_ENV, value)
    assert reference_kafka._version_from_env() == value.strip()


@pytest.mark.parametrize("value", ["3.9.0", "4.1", "latest", "4.1.0; rm -rf /"])
def test_other_values_are_refused(monkeypatch, value):
    monkeypatch.setenv(reference_kafka.VERSION_ENV, value)
    with pytest.raises(ValueError, match=reference_kafka.VERSION_ENV):
        reference_kafka._version_from_env()


def test_each_release_has_its_own_page():
    assert report.docs_page("4.4").name == "compatibility.md"
    assert report.docs_page("4.1").name == "compatibility-4.1.md"


def _doc(version: str) -> dict:
    return {"generated": "now", "reference": f"Apache Kafka {version}", "scenarios_run": 1,
            "totals": {"pass": 1, "known": 0, "diff": 0, "error": 0},
            "results": {"data.x": {"area": "data", "doc": "d", "status": "pass"}}}


def test_only_the_default_page_carries_the_changes_table():
    page44 = report.render_markdown(_doc("4.4.0"))
    page41 = report.render_markdown(_doc("4.1.0"))
    assert page44.startswith("# Compatibility with Apache Kafka 4.4") and "## Changes from Apache Kafka 4.1 to 4.4" in page44
    assert all(f"| {api.replace('|', chr(92) + '|')} |" in page44 for api, *_ in CHANGES)
    assert page41.startswith("# Compatibility with Apache Kafka 4.1") and "## Changes from" not in page41
    assert "compatibility.md" in page41


def test_known_differences_are_per_release():
    k41, k44 = known_differences.known_differences("4.1"), known_differences.known_differences("4.4")
    assert set(known_differences.COMMON) <= set(k41) & set(k44)
    assert "data.api_versions_ranges" in k44 and "data.list_offsets_v11" not in k44
    assert "data.list_offsets_v11" in k41 and "kip848.commit_with_previous_epoch" in k41  # KIP-1251: 4.4 behaviour
