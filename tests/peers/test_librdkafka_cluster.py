"""librdkafka's tests that need or use several brokers against a 3-node kafkalite, gated by
tests/peers/librdkafka_cluster_expected.toml (recorded against a 3-broker Kafka).

The numbers are ``librdkafka.discover_cluster``'s: those whose source creates
topics with replication factor 3 (or the brokers' default, 3 on both
clusters) or says it needs, or counts, several brokers. One ``serve --nodes 3``
is shared by the module's numbers (each makes topics of its own), two at a
time. ``make test`` runs the ``GATE`` subset, within its budget of about 45 s
for this module; ``KAFKALITE_PEERS=full`` runs every listed number.
"""

from __future__ import annotations

import pytest

from tests.peers.gate import gate, parameters, shared_cluster_fixture

# make test's subset (see docs/peer-suites.md)
GATE = {"0008"}

one_cluster = shared_cluster_fixture("librdkafka_cluster")


@pytest.mark.parametrize("number", parameters("librdkafka_cluster", GATE))
def test_librdkafka_cluster(number, tmp_path_factory, request):
    gate("librdkafka_cluster", number, request, tmp_path_factory, "number")
