"""Bounded runs of the network fuzzer (tests/fuzz/network.py) against one node of a 3-node cluster.

Issue 26: hostile input still closes only its own connection, on any node. The
broker child is ``serve --nodes 3``; the fuzz connections, the fresh client and
the bystander go to node 2 (a standby: most requests are answered
NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR or NOT_CONTROLLER) in one run and to node 1
(the active node, which serves the data) in the other. Each run: up to 5,000
mutated frames over 16 concurrent connections, stopping after 10 s whatever the
count (the single broker's run, tests/fuzz/test_network_fuzz.py, is the longer one). It must end with no crash (of the controller or of any node), no hung
connection, no bystander or fresh-client failure, no "handler failed" and no
other error on the cluster's stderr.

``KAFKALITE_FUZZ_SEED``, ``KAFKALITE_FUZZ_FRAMES`` and ``KAFKALITE_FUZZ_SECONDS``
change the seed and the bounds, as for tests/fuzz/test_network_fuzz.py.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.fuzz import network
from tests.fuzz.test_network_fuzz import FAILURES, _findings


@pytest.mark.parametrize("node", [2, 1], ids=["standby-node-2", "active-node-1"])
def test_network_fuzz_cluster_bounded_run(tmp_path, node):
    fuzzer = network.Fuzzer(
        frames=int(os.environ.get("KAFKALITE_FUZZ_FRAMES", 5_000)),
        connections=16,
        seconds=float(os.environ.get("KAFKALITE_FUZZ_SECONDS", 10)),
        batch=2000,
        seed=int(os.environ.get("KAFKALITE_FUZZ_SEED", 20261123)),
        corpus_dir=tmp_path / "corpus",
        minimize=1,
        target_node=node,
    )
    result = network.run_async(fuzzer.run())
    (tmp_path / "result.json").write_text(json.dumps(result, indent=2, default=str))
    assert result["target_node"] == node and "--nodes" in result["broker_args"], result["broker_args"]
    # the run did something: batches were sent and checked, and some requests were answered
    assert result["batches"] >= 1 and result["frames_sent"] >= 1000, result
    assert result["outcomes"].get("answered", 0) > 0, result["outcomes"]
    bad = {k: result[k] for k in FAILURES if result[k]}
    assert not bad, f"network fuzzer findings against node {node} of 3 {bad}; details in {tmp_path}:\n{_findings(result)}"
