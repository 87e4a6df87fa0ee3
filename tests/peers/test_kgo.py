"""franz-go's pkg/kgo integration tests against kafkalite, gated by tests/peers/kgo_expected.toml.

Each listed top-level test runs in its own process against a fresh kafkalite
(tests/peers/kgo.py), with ``KGO_TEST_RECORDS`` records (20,000 by default).
The gate runs all of them (about three minutes): the transactional
``TestTxnEtl`` and the group ``TestGroupETL`` included.
"""

from __future__ import annotations

import pytest

from tests.peers.gate import check_unit, units


@pytest.mark.parametrize("test", units("kgo") or ["(no pass list)"])
def test_kgo(test, tmp_path):
    if test == "(no pass list)":
        pytest.skip("tests/peers/kgo_expected.toml lists no test: run python -m tests.peers record kgo")
    check_unit("kgo", test, tmp_path)
