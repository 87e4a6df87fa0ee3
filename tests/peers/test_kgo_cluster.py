"""franz-go's pkg/kgo integration tests with ``KGO_TEST_RF=3`` against a 3-node kafkalite,
gated by tests/peers/kgo_cluster_expected.toml (recorded against a 3-broker Kafka).

One ``serve --nodes 3`` is shared by the module's units (each kgo test makes
topics and groups of its own), two units at a time; ``KGO_SEEDS`` names all
three nodes. ``make test`` leaves out the ``SLOW`` units (its budget for
this module is about 45 s); ``KAFKALITE_PEERS=full`` runs every listed test.
"""

from __future__ import annotations

import pytest

from tests.peers.gate import gate, parameters, shared_cluster_fixture, units

# left out of make test's run for time (each 10-40 s on a 3-node kafkalite, together about 120 s of the
# full sweep's 170 s): the two 10-20 s issue reproductions that wait out timeouts, the share-group ETL and
# ack-on-close runs, and TestTxnEtl (transactions on a cluster: tests/integration/test_multinode.py, and
# librdkafka's 0103 in test_librdkafka_cluster.py). What remains, TestGroupETL (about 18 s) with the
# quick tests, takes about 35 s
SLOW = {"TestIssue337", "TestIssue434", "TestIssue523", "TestShareGroupAckOnClose", "TestShareGroupETL", "TestTxnEtl"}

one_cluster = shared_cluster_fixture("kgo_cluster")


@pytest.mark.parametrize("test", parameters("kgo_cluster", set(units("kgo_cluster")) - SLOW))
def test_kgo_cluster(test, tmp_path_factory, request):
    gate("kgo_cluster", test, request, tmp_path_factory, "test")
