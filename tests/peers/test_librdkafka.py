"""librdkafka's own broker tests against kafkalite, gated by tests/peers/librdkafka_expected.toml.

Each test number (all its listed tests) runs in its own ``test-runner``
process against a fresh kafkalite with 4 partitions per auto-created topic
(librdkafka's default test scenario); see tests/peers/librdkafka.py for the
build and the selection. ``make test`` runs every listed number except
``SLOW`` ones (``KAFKALITE_PEERS=full`` runs them too).
"""

from __future__ import annotations

import pytest

from tests.peers.gate import gate, parameters, units

# numbers left out of make test's run for time: each takes 20-65 s on kafkalite (max.poll.interval
# timeouts, produce retries through sockem, head-of-line blocking, idempotence message timeouts,
# metadata timeouts, sticky partitioning), together about 200 s of the full run's 680 s
SLOW = {"0076", "0088", "0091", "0093", "0094", "0114"}


@pytest.mark.parametrize("number", parameters("librdkafka", set(units("librdkafka")) - SLOW))
def test_librdkafka(number, tmp_path_factory, request):
    gate("librdkafka", number, request, tmp_path_factory, "number")
