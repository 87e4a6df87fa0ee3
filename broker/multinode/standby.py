"""What a node answers while it does not serve the data (it is not the active node, or is
still loading the data directory after being made active).

Requests that need no data pass to their handlers: ApiVersions, the SASL exchange,
DescribeConfigs (the topic, group and broker configs of the image),
Metadata (from the image's topics; an unknown topic to auto-create is forwarded to the
active node and answered LEADER_NOT_AVAILABLE meanwhile, as Kafka answers a topic being
created), FindCoordinator and DescribeCluster (both name the active node). The others:

- partition requests (Produce, Fetch, ListOffsets, ...): NOT_LEADER_OR_FOLLOWER in every
  partition, with KIP-951's ``current_leader`` and ``node_endpoints`` where the version
  has them, so the client goes to the leader without another Metadata round;
- group and transaction requests: NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS on the
  node being activated); ListGroups and ListTransactions answer an empty list, as a Kafka
  broker that coordinates nothing; DescribeLogDirs the shared directory without
  partitions (the leader lists them);
- an idempotent producer's InitProducerId is answered here, with an id of this node's
  own range (``standby_producer_id``);
- admin requests (CreateTopics, ACLs, configs, ...): forwarded to the active node and
  answered with its answer (``forwarding.py``); NOT_CONTROLLER while there is no active
  node, on which clients look up the controller again (Metadata's ``controller_id``).
"""

from __future__ import annotations

import time

from protocol.errors import ErrorCode

from .forwarding import FORWARDED

PASS = object()  # "let the handler answer"
# Metadata, FindCoordinator, SASL, ApiVersions, DescribeConfigs (the image's configs), DescribeCluster
PASS_THROUGH = frozenset({3, 10, 17, 18, 32, 36, 60})
PARTITION_APIS = frozenset({0, 1, 2, 21, 23, 61, 78, 79})
COORDINATOR_APIS = frozenset({8, 9, 11, 12, 13, 14, 15, 22, 24, 25, 26, 28, 42, 47, 65, 68, 69, 76, 77, 83, 84, 85, 86, 87, 90, 91, 92})
LIST_GROUPS, LIST_TRANSACTIONS, INIT_PRODUCER_ID, PRODUCE, FETCH, DESCRIBE_LOG_DIRS = 16, 66, 22, 0, 1, 35

# producer ids handed out by a standby node: above every id of the active node's blocks
# (meta.json), this node's id in bits 47-53 and the time in ms since 2026-01-01 times 256
# below, so ids never repeat across nodes or restarts (at most 256 a millisecond)
_PID_BASE = 1 << 54
_PID_T0_MS = 1_767_225_600_000


class StandbyIds:
    def __init__(self, node_id: int) -> None:
        self.node_bits = (node_id & 0x7F) << 47
        self.last = 0

    def next(self) -> int:
        stamp = max(0, int(time.time() * 1000) - _PID_T0_MS) << 8
        self.last = max(self.last + 1, stamp)
        return _PID_BASE | self.node_bits | (self.last & ((1 << 47) - 1))


class Standby:
    """The gate a node's requests pass while it does not serve (``Broker.standby``)."""

    PASS = PASS

    def __init__(self, broker, view) -> None:
        self.broker = broker
        self.view = view
        self.ids = StandbyIds(view.node_id)
        self.forwarder = None  # broker.multinode.forwarding.Forwarder, once the node has its channel

    def answer(self, ctx, event):
        """The answer to ``event`` (a decoded request), or ``PASS`` for its handler."""
        key = event.api_key
        if key in PASS_THROUGH:
            return PASS
        from ..faults import error_response

        view = self.view
        if key in PARTITION_APIS:
            body = error_response(event, ErrorCode.not_leader_or_follower)
            if isinstance(body, dict):
                if key == FETCH and "error_code" in body:
                    body["error_code"] = ErrorCode.none  # as Kafka: the partitions carry the error, or the Java consumer ignores their leader hints
                self._hint(ctx, event, body)
            return body
        if key == LIST_GROUPS:
            return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": []}
        if key == DESCRIBE_LOG_DIRS:  # the shared directory, whose partitions the leader reports
            import os

            log_dir = os.path.abspath(self.broker.config.data_dir)
            return {"throttle_time": 0, "error_code": ErrorCode.none,
                    "results": [{"error_code": ErrorCode.none, "log_dir": log_dir, "topics": [], "total_bytes": -1, "usable_bytes": -1}]}
        if key == LIST_TRANSACTIONS:
            return {"throttle_time": 0, "error_code": ErrorCode.none, "unknown_state_filters": [], "transaction_states": []}
        if key == INIT_PRODUCER_ID and event.body.transactional_id is None and ctx.broker.authorizer is None:
            return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": self.ids.next(), "producer_epoch": 0}
        if key in COORDINATOR_APIS:
            loading = view.active == view.node_id
            return error_response(event, ErrorCode.coordinator_load_in_progress if loading else ErrorCode.not_coordinator)
        leader = view.leader()
        if self.forwarder is not None and key in FORWARDED and leader not in (-1, view.node_id):
            return self.forwarder.forward(ctx, event, leader)  # a coroutine: the dispatch awaits it
        return error_response(event, ErrorCode.not_controller)

    def _hint(self, ctx, event, body: dict) -> None:
        """KIP-951: the leader's id and epoch in each partition, its address in node_endpoints."""
        version = event.api_version
        if not ((event.api_key == PRODUCE and version >= 10) or (event.api_key == FETCH and version >= 12)):
            return
        from ..listeners import advertised_for, listener_name

        view = self.view
        leader = view.leader()
        inner = "partition_responses" if event.api_key == PRODUCE else "partitions"
        for topic in body.get("responses", ()):
            for part in topic.get(inner, ()):
                part["current_leader"] = {"leader_id": leader, "leader_epoch": 0}
        if leader >= 0 and (event.api_key == PRODUCE or version >= 16):
            listener = listener_name(ctx)
            address = view.endpoint(leader, listener, advertised_for(ctx))
            if address is not None:
                body["node_endpoints"] = [{"node_id": leader, "host": address[0], "port": address[1], "rack": None}]
