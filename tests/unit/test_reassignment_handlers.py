"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): authorization, and a cluster
node's rule that a target names every node (the one-broker answers are compared with Kafka's in
tests/conformance/scenarios/configs.py)."""

from __future__ import annotations

import asyncio

from broker.multinode.view import ClusterView
from broker.security.authorizer import CLASS_NAME, Operation as Op, ResourceType as RT
from protocol.errors import ErrorCode
from tests.unit.test_acl_handlers import allow, ask


def _alter(partitions: list[tuple[int, list[int] | None]], topic: str = "t", allow_rf: bool = True) -> dict:
    return {"timeout": 1000, "allow_replication_factor_change": allow_rf,
            "topics": [{"name": topic, "partitions": [{"partition_index": p, "replicas": r} for p, r in partitions]}]}


def _codes(answer: dict) -> list:
    return [(p["partition_index"], p["error_code"]) for t in answer["responses"] for p in t["partitions"]]


def test_both_need_their_cluster_operation():
    async def go():
        from broker.testing import Broker

        b = Broker(settings={"authorizer.class.name": CLASS_NAME, "super.users": "User:admin"})
        await b.start()
        try:
            await b.create_topic("t", 2)
            s = b.server
            out = {"alter": await ask(s, 45, 1, _alter([(0, [1]), (1, None)])),
                   "list": await ask(s, 46, 0, {"timeout": 1000, "topics": [{"name": "t", "partition_indexes": [0, 1]}]})}
            await s.acls.create([allow("kafka-cluster", Op.DESCRIBE, RT.CLUSTER)])
            out["list_allowed"] = await ask(s, 46, 0, {"timeout": 1000, "topics": None})
            out["alter_still_denied"] = await ask(s, 45, 0, _alter([(0, [1])]))
            out["admin"] = await ask(s, 45, 1, _alter([(0, [1])]), principal="User:admin")
            return out
        finally:
            await b.close()

    out = asyncio.run(go())
    denied = ErrorCode.cluster_authorization_failed
    assert out["alter"]["error_code"] == denied and _codes(out["alter"]) == [(0, denied), (1, denied)]
    assert out["list"]["error_code"] == denied
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in out["list"]["topics"]] == [("t", [0, 1])]
    assert out["list_allowed"]["error_code"] == ErrorCode.none and out["list_allowed"]["topics"] == []
    assert out["alter_still_denied"]["error_code"] == denied
    assert out["admin"]["error_code"] == ErrorCode.none and _codes(out["admin"]) == [(0, ErrorCode.none)]


def test_a_cluster_node_accepts_only_every_node():
    async def go():
        from broker.testing import Broker

        async with Broker() as b:
            await b.create_topic("t", 1)
            s = b.server
            view = ClusterView(1, active=1, nodes={i: {"live": i != 3, "advertised": {}} for i in (1, 2, 3)})
            s.view = view
            try:
                return {
                    "every": await ask(s, 45, 1, _alter([(0, [3, 1, 2])])),
                    "subset": await ask(s, 45, 1, _alter([(0, [1, 2])])),
                    "subset_no_rf_change": await ask(s, 45, 1, _alter([(0, [1, 2])], allow_rf=False)),
                    "unknown": await ask(s, 45, 1, _alter([(0, [1, 2, 4])])),
                }
            finally:
                s.view = None

    out = asyncio.run(go())
    assert _codes(out["every"]) == [(0, ErrorCode.none)]  # node 3 is down but registered, as a fenced Kafka broker
    [subset] = out["subset"]["responses"][0]["partitions"]
    assert subset["error_code"] == ErrorCode.invalid_replica_assignment and "(1, 2, 3)" in subset["error_message"]
    assert _codes(out["subset_no_rf_change"]) == [(0, ErrorCode.invalid_replication_factor)]
    assert out["subset_no_rf_change"]["allow_replication_factor_change"] is False
    assert _codes(out["unknown"]) == [(0, ErrorCode.invalid_replica_assignment)]
