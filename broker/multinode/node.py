"""A node process of a cluster: an ordinary ``Broker`` that starts on standby.

The node binds its listeners and serves at once, behind the standby gate
(``standby.py``), then says hello to the controller over its channel (its id, pid
and advertised addresses) and heartbeats every ``broker.heartbeat.interval.ms``.
Images from the controller update its ``ClusterView`` (and, while on standby, the
topics its Metadata lists). When the controller makes it active, it locks and
loads the data directory (``Broker.activate``), drops the gate, publishes its
topics, and publishes them again after every change of ``meta.json``. A node
whose channel closes (the controller died) stops and exits; SIGTERM stops it as
it stops a single broker.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
import uuid

from storage.config import LogConfig

from ..cluster import Topic, TopicError
from ..partition import Partition
from ..logs import get_logger
from .channel import Channel, ChannelClosed
from .forwarding import FORWARD_ROOM, Forwarder, handle_forwarded
from .standby import Standby
from .view import ClusterView

log = get_logger("node")


def topics_of(cluster) -> dict:
    return {t.name: {"id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.overrides} for t in cluster.topics.values()}


def mirror_topics(cluster, topics: dict, configs: dict | None = None) -> None:
    """A standby node's Metadata and DescribeConfigs answer from the image: topics without logs,
    their configs, and the group and dynamic broker configs."""
    configs = configs or {}
    cluster.group_configs = dict(configs.get("group_configs") or {})
    cluster.broker_configs = dict(configs.get("broker_configs") or {})
    cluster.topics.clear()
    cluster.by_id.clear()
    for name, spec in topics.items():
        overrides = dict(spec.get("configs") or {})
        try:
            config = LogConfig.from_kafka(overrides, cluster.defaults)
        except ValueError:
            config = cluster.defaults
        topic = Topic(name, uuid.UUID(spec["id"]), overrides, config, [])
        topic.partitions = [Partition(name, i, None) for i in range(int(spec["partitions"]))]
        cluster.topics[name] = topic
        cluster.by_id[topic.topic_id] = topic
    cluster.metadata.refresh(cluster.topics)


class Node:
    def __init__(self, config, sock) -> None:
        from ..server import Broker

        self.config = config
        self.sock = sock
        self.view = ClusterView(config.node_id)
        self.broker = Broker(config)
        self.broker.view = self.view
        self.broker.standby = Standby(self.broker, self.view)
        self.broker.update_hooks()
        self.broker.cluster.forward_create = self._forward_create
        self.channel: Channel | None = None
        self.forwarder: Forwarder | None = None
        self.stop = asyncio.Event()
        self.activating: asyncio.Task | None = None
        # metadata propagation: the active node's publications are numbered; the controller says
        # when every live node has applied one (``synced``), and admin answers wait for that
        self.published = 0
        self.synced = 0
        self.synced_changed = asyncio.Event()

    def _preferred_election(self, elect: bool) -> str:
        """ElectLeaders' PREFERRED election on this node (broker/handlers/elect_leaders.py): the preferred
        replica of every partition is the lowest node id, the first of Metadata's replicas. "not_needed"
        when it leads, "unavailable" when it is down; else "elect", and with ``elect`` the controller is
        asked to move leadership to it, once this step's answers are on their way (call_soon)."""
        view = self.view
        preferred = min(view.nodes) if view.nodes else view.node_id
        if preferred == view.leader():
            return "not_needed"
        if not view.nodes.get(preferred, {}).get("live"):
            return "unavailable"
        if elect:
            asyncio.get_running_loop().call_soon(self.channel.send, {"t": "move-leader", "id": preferred})
        return "elect"

    def _forward_create(self, name: str, partitions: int) -> None:
        if self.channel is not None:
            self.channel.send({"t": "create", "name": name, "partitions": partitions})

    def _publish(self) -> None:
        cluster = self.broker.cluster
        if self.channel is not None:
            self.published += 1
            self.channel.send({"t": "topics", "seq": self.published, "cluster_id": cluster.cluster_id, "topics": topics_of(cluster),
                               "configs": {"group_configs": cluster.group_configs, "broker_configs": cluster.broker_configs}})

    async def run(self) -> int:
        broker = self.broker
        await broker.start(serve_data=False)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop.set)
        from .. import diagnostics

        loop.add_signal_handler(signal.SIGUSR1, diagnostics.dump, broker)  # as a single broker: state to stderr
        self.channel = await Channel.open(self.sock)
        broker.standby.forwarder = self.forwarder = Forwarder(self.channel.send)
        self.channel.send({
            "t": "hello", "id": self.config.node_id, "pid": os.getpid(),
            "advertised": {li.name: list(li.advertised) for li in broker.listeners},
        })
        tasks = [asyncio.ensure_future(self._beat()), asyncio.ensure_future(self._read())]
        await self.stop.wait()
        for task in tasks:
            task.cancel()
        if self.activating is not None and not self.activating.done():
            self.activating.cancel()
        await broker.stop()
        self.channel.close()
        return 0

    async def _beat(self) -> None:
        interval = self.config.broker_heartbeat_interval_ms / 1000
        while True:
            self.channel.send({"t": "hb"})
            await asyncio.sleep(interval)

    async def _read(self) -> None:
        try:
            while True:
                self._on(await self.channel.recv())
        except ChannelClosed as exc:
            log.warning("controller gone: stopping", node_id=self.config.node_id, reason=str(exc))
            self.stop.set()

    def _on(self, message: dict) -> None:
        kind = message["t"]
        broker = self.broker
        if kind == "image":
            self.view.apply(message)
            self.forwarder.active_changed(self.view.active)
            if "seq" in message:
                self.channel.send({"t": "applied", "seq": message["seq"]})
            if broker.standby is not None and self.activating is None:
                mirror_topics(broker.cluster, self.view.topics, self.view.configs)
                broker.cluster.cluster_id = self.view.cluster_id
                broker.cluster.leadership.epoch = self.view.epoch  # the leader's, which Metadata reports
        elif kind == "activate" and self.activating is None:
            self.published = max(self.published, int(message.get("seq", 0)))
            self.activating = asyncio.ensure_future(self._activate(int(message.get("epoch", 0))))
        elif kind == "synced":
            self.synced = max(self.synced, int(message["seq"]))
            self.synced_changed.set()
            self.synced_changed = asyncio.Event()
        elif kind == "create" and self.view.serving:
            asyncio.ensure_future(self._create(message))
        elif kind == "fwd":
            asyncio.ensure_future(self._forwarded(message))
        elif kind == "fwd-answer":
            self.forwarder.answered(message)

    async def _activate(self, epoch: int) -> None:
        broker = self.broker
        cluster = broker.cluster
        cluster.leadership.epoch = epoch  # every partition's leader epoch: the election's, higher than any before
        cluster.forward_create = None
        cluster.topics.clear()  # the image's topics: the data directory's replace them
        cluster.by_id.clear()
        await broker.activate()
        cluster.on_saved = self._publish
        cluster.preferred_election = self._preferred_election
        broker.metadata_barrier = self  # .published and .propagated(): see broker/net/dispatch.py
        self.view.activated = True
        self._publish()
        self.channel.send({"t": "active"})
        log.info("active", node_id=self.config.node_id, topics=len(cluster.topics))

    async def propagated(self, timeout: float = 5.0) -> bool:
        """Wait until every live node has applied what this node last published (an admin change
        answered after it, so the client sees it at once on any node); False after ``timeout``."""
        want = self.published
        deadline = asyncio.get_running_loop().time() + timeout
        while self.synced < want:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self.synced_changed.wait(), left)
            except TimeoutError:
                return False
        return True

    async def _forwarded(self, message: dict) -> None:
        """A request another node forwarded (``forwarding.py``): run it if this node serves, and
        send the answer back (no body: the other node answers its client NOT_CONTROLLER)."""
        body = None
        if self.view.serving:
            try:
                body = await handle_forwarded(self.broker, message)
            except Exception as exc:  # noqa: BLE001 - a handler bug, as on a client's own connection
                log.error("handler failed", api=message.get("key"), version=message.get("ver"), forwarded_from=message.get("from"), exc_info=exc)
                hook = self.broker.on_handler_error
                if hook is not None:
                    hook(str(message.get("key")), message, exc)
        answer = {"t": "fwd-answer", "id": message.get("id"), "to": message.get("from")}
        if body is not None and len(body) <= FORWARD_ROOM:
            answer["body"] = base64.b64encode(body).decode()
        elif body is not None:  # too large for the channel: the client asks the active node itself
            log.info("answer too large to forward back", api=message.get("key"), bytes=len(body))
        self.channel.send(answer)

    async def _create(self, message: dict) -> None:
        """A topic a standby node was asked to auto-create (its Metadata said LEADER_NOT_AVAILABLE)."""
        cluster = self.broker.cluster
        name, partitions = message.get("name"), message.get("partitions")
        if not isinstance(name, str) or not isinstance(partitions, int) or name in cluster.topics:
            return
        try:
            await cluster.create_topic_async(name, partitions)
        except TopicError as exc:
            log.info("forwarded topic creation refused", topic=name, error=exc.code.name)


def serve(config, sock) -> int:
    """The body of a forked node process."""
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    try:
        return runner(Node(config, sock).run())
    except Exception:  # noqa: BLE001 - a node that cannot serve exits, and the controller sees it
        log.exception("node failed", node_id=config.node_id)
        return 1
    finally:
        sys.stdout.flush()
