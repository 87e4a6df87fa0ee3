"""franz-go's pkg/kgo integration tests with ``KGO_TEST_RF=3`` against a 3-node kafkalite,
gated by tests/peers/kgo_cluster_expected.toml (recorded against a 3-broker Kafka).

One ``serve --nodes 3`` is shared by the module's units (each kgo test makes
topics and groups of its own), two units at a time; ``KGO_SEEDS`` names all
three nodes. ``make test`` runs the ``GATE`` subset, within its budget of
about 45 s for this module; ``KAFKALITE_PEERS=full`` runs every listed test.
"""

from __future__ import annotations

import pytest

from tests.peers.gate import gate, parameters, shared_cluster_fixture

# make test's subset (see docs/peer-suites.md): the tests whose cluster paths differ most from a single
# broker's (producing and consuming through the active node from bootstrap on all three, groups through
# a coordinator found on another node, transactions, admin requests forwarded by standby nodes), each a
# few seconds on kafkalite
GATE = {"TestClient_Produce"}

one_cluster = shared_cluster_fixture("kgo_cluster")


@pytest.mark.parametrize("test", parameters("kgo_cluster", GATE))
def test_kgo_cluster(test, tmp_path_factory, request):
    gate("kgo_cluster", test, request, tmp_path_factory, "test")
