"""A cluster of broker processes on one host (``kafkalite serve --nodes N``): docs/multinode.md.

- ``controller.py``: the controller process. It forks the nodes, keeps their leases,
  chooses which node is *active* (leads every partition and hosts every coordinator),
  fences a node whose lease expired, and serves the control socket.
- ``node.py``: a node process: an ordinary ``Broker`` that starts on standby and is
  activated by the controller.
- ``standby.py``: what a node that is not active answers (NOT_LEADER_OR_FOLLOWER with
  the leader's address, NOT_COORDINATOR, NOT_CONTROLLER).
- ``forwarding.py``: admin requests a standby node forwards to the active node (KIP-590),
  and the active node's side of running them.
- ``view.py``: ``ClusterView``, a node's image of the cluster (nodes, their addresses,
  the active node, the topics), read by Metadata, FindCoordinator and DescribeCluster.
- ``channel.py``: the controller-node channel: bounded, size-prefixed JSON frames.
- ``control.py``: the client of the control socket (``kafkalite cluster ...``, the pytest plugin).

A single node (the default) imports none of this.
"""
