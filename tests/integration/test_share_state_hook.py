"""The share-state hook (broker/coordinator/share_init.py): what the group coordinator asks of the share
coordinator, on an in-process broker with a fake hook. The hook's calls are awaited through the
coordinator's own tasks, never by sleeping."""

from __future__ import annotations

import asyncio

from broker.coordinator.share import ShareHeartbeatParams
from broker.testing import Broker
from protocol.errors import ErrorCode


class FakeShareState:
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.fail = False

    async def initialize(self, group_id: str, group_epoch: int, partitions: dict) -> None:
        self.calls.append(("initialize", group_id, group_epoch, partitions))
        if self.fail:
            raise RuntimeError("share coordinator unavailable")

    async def delete(self, group_id: str, partitions: dict) -> None:
        self.calls.append(("delete", group_id, partitions))


def params(group: str, member: str, epoch: int, topics=None) -> ShareHeartbeatParams:
    return ShareHeartbeatParams(group, member, epoch, None, topics, "client", "/127.0.0.1")


async def settled(coord) -> None:
    """Every hook call the coordinator started has returned and its outcome is written."""
    while coord._share_tasks:
        await asyncio.gather(*list(coord._share_tasks))


NO_INTERVAL = {"group.share.assignment.interval.ms": 0}  # a target at every change, not once a second


async def test_partitions_wait_for_the_hook_and_deletion_reaches_it():
    async with Broker(settings=NO_INTERVAL) as b:
        coord = b.server.coordinator
        await coord.loaded.wait()
        hook = coord.share_state = FakeShareState()
        await b.create_topic("hooked", 3)
        tid = b.cluster.topics["hooked"].topic_id
        first = await coord.share_group_heartbeat(params("hg", "m1", 0, ["hooked"]))
        assert (first["member_epoch"], first["assignment"]) == (2, {"topic_partitions": []})
        await settled(coord)
        assert hook.calls == [("initialize", "hg", 2, {tid: [0, 1, 2]})]
        again = await coord.share_group_heartbeat(params("hg", "m1", 2))
        assert again["member_epoch"] == 3
        assert again["assignment"]["topic_partitions"] == [{"topic_id": tid, "partitions": [0, 1, 2]}]
        await settled(coord)
        assert len(hook.calls) == 1  # initialized once: not asked again

        # a failed initialization: nothing assigned, asked again at the next heartbeat
        hook.fail = True
        await coord.share_group_heartbeat(params("hg2", "m2", 0, ["hooked"]))
        await settled(coord)
        group = coord.shard_for("hg2").shard.groups["hg2"]  # the share group's state itself (a describe answers plain data)
        assert (group.initializing, group.initialized) == ({}, {})
        hook.fail = False
        resp = await coord.share_group_heartbeat(params("hg2", "m2", 2))
        assert resp["assignment"] is None and resp["member_epoch"] == 2
        await settled(coord)
        assert [c[0] for c in hook.calls[1:]] == ["initialize", "initialize"]
        assert (await coord.share_group_heartbeat(params("hg2", "m2", 2)))["member_epoch"] == 3

        # DeleteGroups of the emptied group hands the hook every partition it had initialized
        await coord.share_group_heartbeat(params("hg", "m1", -1))
        assert await coord.delete_groups(["hg"]) == {"hg": ErrorCode.none}
        assert hook.calls[-1] == ("delete", "hg", {tid: [0, 1, 2]})
        assert await coord.share_group_describe("hg") is None


async def test_a_restart_keeps_initialized_partitions(tmp_path):
    async with Broker(tmp_path / "data", settings=NO_INTERVAL) as b:
        coord = b.server.coordinator
        await coord.loaded.wait()
        hook = coord.share_state = FakeShareState()
        await b.create_topic("kept", 2)
        await coord.share_group_heartbeat(params("kg", "m1", 0, ["kept"]))
        await settled(coord)
        await b.restart()
        coord = b.server.coordinator
        await coord.loaded.wait()
        coord.share_state = hook
        resp = await coord.share_group_heartbeat(params("kg", "m1", 2))
        assert resp["member_epoch"] == 3 and len(resp["assignment"]["topic_partitions"][0]["partitions"]) == 2
        await settled(coord)
        assert len(hook.calls) == 1  # the initialized state came back from the log: not asked again
