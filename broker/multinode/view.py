"""``ClusterView``: what a node knows of its cluster, from the controller's images.

The controller sends an image whenever something changes: every node with its
advertised addresses (one per listener name) and whether its lease is live, the
active node (the leader of every partition and the host of every coordinator,
-1 while there is none), and the topics the active node last published. Metadata,
FindCoordinator and DescribeCluster answer from it; a standby node also fills its
``Cluster`` with the image's topics (without logs) so that Metadata can list them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ClusterView:
    node_id: int
    active: int = -1
    epoch: int = 0
    nodes: dict[int, dict] = field(default_factory=dict)  # id -> {"live": bool, "advertised": {listener: [host, port]}}
    topics: dict[str, dict] = field(default_factory=dict)  # name -> {"id", "partitions", "configs"}
    configs: dict = field(default_factory=dict)  # {"group_configs": ..., "broker_configs": ...} of meta.json
    cluster_id: str = ""
    activated: bool = False  # this node has loaded the data directory and serves as the active node

    def apply(self, image: dict) -> None:
        self.active = int(image.get("active", -1))
        self.epoch = int(image.get("epoch", 0))
        self.nodes = {int(k): v for k, v in image.get("nodes", {}).items()}
        if "topics" in image:
            self.topics = image["topics"]
        if "configs" in image:
            self.configs = image["configs"]
        self.cluster_id = image.get("cluster_id", self.cluster_id)

    @property
    def serving(self) -> bool:
        """Whether this node serves the data and the coordinators now."""
        return self.activated and self.active == self.node_id

    def live_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if n.get("live"))

    def replica_ids(self) -> list[int]:
        """Every partition is replicated on every node (they share one data directory)."""
        return sorted(self.nodes) or [self.node_id]

    def offline_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if not n.get("live"))

    def leader(self) -> int:
        """The leader of every partition: the active node, or -1 while none is live."""
        node = self.nodes.get(self.active)
        return self.active if node is not None and node.get("live") else -1

    def endpoint(self, node_id: int, listener: str | None, own: tuple[str, int]) -> tuple[str, int] | None:
        """The address of ``node_id`` on the listener named ``listener`` (this node's own address
        is ``own``, the client's listener's advertised one); None if it has no such listener."""
        if node_id == self.node_id:
            return own
        node = self.nodes.get(node_id)
        if node is None:
            return None
        addresses = node.get("advertised", {})
        address = addresses.get(listener) if listener is not None else None
        if address is None and addresses:
            address = next(iter(addresses.values()))
        return (address[0], int(address[1])) if address is not None else None

    def brokers(self, listener: str | None, own: tuple[str, int]) -> list[tuple[int, str, int]]:
        """(id, host, port) of every live node on ``listener``, this one first if live."""
        out = []
        for node_id in self.live_ids():
            address = self.endpoint(node_id, listener, own)
            if address is not None:
                out.append((node_id, address[0], address[1]))
        return out
