"""franz-go's pkg/kgo integration tests against kafkalite, gated by tests/peers/kgo_expected.toml.

Each listed top-level test runs in its own process against a fresh kafkalite
(tests/peers/kgo.py), with ``KGO_TEST_RECORDS`` records (20,000 by default).
The gate runs all of them (about two minutes) but ``TestTxnEtl`` (about 50 s),
which make test already runs, with more records, as
tests/clients/test_franz_txn.py; ``KAFKALITE_PEERS=full`` runs it here too.
"""

from __future__ import annotations

import pytest

from tests.peers.gate import gate, parameters, units

# left out of make test's run: tests/clients/test_franz_txn.py runs it (50,000 records)
SLOW = {"TestTxnEtl"}


@pytest.mark.parametrize("test", parameters("kgo", set(units("kgo")) - SLOW))
def test_kgo(test, tmp_path_factory, request):
    gate("kgo", test, request, tmp_path_factory, "test")
