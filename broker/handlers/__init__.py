"""One module per Kafka API.

Each module declares ``API_KEY``, ``NAME``, ``VERSIONS = (min, max)`` (Kafka
4.4's range where clients use it) and ``async def handle(ctx, request)``,
which returns the response as a dict (built into the kio class of the
request's version by ``protocol.codec.build``) or ``None`` for no response.
A module may define ``unsupported(ctx, event) -> (version, body)`` to shape
the UNSUPPORTED_VERSION answer, as ApiVersions does. What is deliberately
left out is listed in ``docs/SKIPPED.md``.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Any

from .. import logs

# the authorizer's audit log, under the name of Kafka's (RequestContext.allowed)
# (a lazy proxy: bound at first use, after the broker configured logging; the name is in each line)
AUDIT_LOG = logs.get_logger("kafka.authorizer.logger")

# (module, API_KEY, NAME, VERSIONS): what each module declares, so that a broker can
# answer ApiVersions, and route, without importing the modules before it listens;
# each one is imported when its API is first asked for. tests/unit/test_startup_imports.py
# checks this table against the modules.
_TABLE = (
    ("produce", 0, "Produce", (3, 13)),
    ("fetch", 1, "Fetch", (4, 18)),
    ("list_offsets", 2, "ListOffsets", (1, 11)),
    ("metadata", 3, "Metadata", (0, 13)),
    ("api_versions", 18, "ApiVersions", (0, 4)),
    ("create_topics", 19, "CreateTopics", (2, 7)),
    ("delete_topics", 20, "DeleteTopics", (1, 6)),
    ("init_producer_id", 22, "InitProducerId", (0, 5)),
    ("offset_for_leader_epoch", 23, "OffsetForLeaderEpoch", (2, 4)),
    ("describe_configs", 32, "DescribeConfigs", (1, 4)),
    ("create_partitions", 37, "CreatePartitions", (0, 3)),
    ("describe_cluster", 60, "DescribeCluster", (0, 2)),
    ("find_coordinator", 10, "FindCoordinator", (0, 6)),
    ("join_group", 11, "JoinGroup", (0, 9)),
    ("sync_group", 14, "SyncGroup", (0, 5)),
    ("heartbeat", 12, "Heartbeat", (0, 4)),
    ("leave_group", 13, "LeaveGroup", (0, 5)),
    ("offset_commit", 8, "OffsetCommit", (2, 10)),
    ("offset_fetch", 9, "OffsetFetch", (1, 10)),
    ("offset_delete", 47, "OffsetDelete", (0, 0)),
    ("describe_groups", 15, "DescribeGroups", (0, 6)),
    ("list_groups", 16, "ListGroups", (0, 5)),
    ("delete_groups", 42, "DeleteGroups", (0, 2)),
    ("consumer_group_heartbeat", 68, "ConsumerGroupHeartbeat", (0, 1)),
    ("consumer_group_describe", 69, "ConsumerGroupDescribe", (0, 1)),
    ("share_group_heartbeat", 76, "ShareGroupHeartbeat", (1, 1)),
    ("share_group_describe", 77, "ShareGroupDescribe", (1, 1)),
    ("add_partitions_to_txn", 24, "AddPartitionsToTxn", (0, 5)),
    ("add_offsets_to_txn", 25, "AddOffsetsToTxn", (0, 4)),
    ("end_txn", 26, "EndTxn", (0, 5)),
    ("txn_offset_commit", 28, "TxnOffsetCommit", (0, 5)),
    ("describe_producers", 61, "DescribeProducers", (0, 0)),
    ("describe_transactions", 65, "DescribeTransactions", (0, 0)),
    ("list_transactions", 66, "ListTransactions", (0, 2)),
    ("sasl_handshake", 17, "SaslHandshake", (0, 1)),
    ("sasl_authenticate", 36, "SaslAuthenticate", (0, 2)),
    ("describe_user_scram_credentials", 50, "DescribeUserScramCredentials", (0, 0)),
    ("alter_user_scram_credentials", 51, "AlterUserScramCredentials", (0, 0)),
    ("describe_acls", 29, "DescribeAcls", (1, 3)),
    ("create_acls", 30, "CreateAcls", (1, 3)),
    ("delete_acls", 31, "DeleteAcls", (1, 3)),
    ("delete_records", 21, "DeleteRecords", (0, 2)),
    ("alter_configs", 33, "AlterConfigs", (0, 2)),
    ("incremental_alter_configs", 44, "IncrementalAlterConfigs", (0, 1)),
    ("describe_log_dirs", 35, "DescribeLogDirs", (1, 4)),
    ("elect_leaders", 43, "ElectLeaders", (0, 2)),
    ("alter_partition_reassignments", 45, "AlterPartitionReassignments", (0, 1)),
    ("list_partition_reassignments", 46, "ListPartitionReassignments", (0, 0)),
    ("share_fetch", 78, "ShareFetch", (1, 2)),
    ("share_acknowledge", 79, "ShareAcknowledge", (1, 2)),
    ("initialize_share_group_state", 83, "InitializeShareGroupState", (0, 0)),
    ("read_share_group_state", 84, "ReadShareGroupState", (0, 0)),
    ("write_share_group_state", 85, "WriteShareGroupState", (0, 1)),
    ("delete_share_group_state", 86, "DeleteShareGroupState", (0, 0)),
    ("read_share_group_state_summary", 87, "ReadShareGroupStateSummary", (0, 1)),
    ("describe_share_group_offsets", 90, "DescribeShareGroupOffsets", (0, 1)),
    ("alter_share_group_offsets", 91, "AlterShareGroupOffsets", (0, 0)),
    ("delete_share_group_offsets", 92, "DeleteShareGroupOffsets", (0, 0)),
)
_MODULES = tuple(row[0] for row in _TABLE)

# APIs whose requests a connection starts while its earlier requests still wait for their
# records to be durable (KafkaConnection._run in broker/net/connection.py): a pipelining client's
# commits and heartbeats then ride in one append and their answers leave in one write.
# Each of these modules has, next to ``handle``, a synchronous ``begin(ctx, request)`` that
# does the request's work at once and returns the answer, or a ``Pending`` of it
# (broker/pending.py) when it waits for its records; ``ctx`` is read only inside ``begin``
# (the connection's context moves on to the next request). What a request does to a group
# happens in ``begin``, so requests still take effect in the order they were sent.
PIPELINED = frozenset({8, 12, 68})  # OffsetCommit, Heartbeat, ConsumerGroupHeartbeat
_MODULE_OF = {key: name for name, key, _, _ in _TABLE}


class _Handlers(dict):
    """API key -> handler module, each imported on first use.

    A plain dict once a module is in it (``HANDLERS[key]`` on the request path is
    a dict lookup); a key not yet looked up is imported by ``__missing__``. The
    rest of the mapping interface answers for every API, loaded or not.
    """

    def __missing__(self, key: int):
        name = _MODULE_OF[key]  # KeyError for an API not served, as a dict
        mod = importlib.import_module(f"{__name__}.{name}")
        self[key] = mod
        return mod

    def _all(self) -> None:
        for key in _MODULE_OF:
            if not dict.__contains__(self, key):
                self.__missing__(key)

    def get(self, key, default=None):
        return self[key] if key in _MODULE_OF else default

    def __contains__(self, key) -> bool:
        return key in _MODULE_OF

    def __len__(self) -> int:
        return len(_MODULE_OF)

    def __iter__(self):
        return iter(_MODULE_OF)

    def keys(self):
        return _MODULE_OF.keys()

    def items(self):
        self._all()
        return dict.items(self)

    def values(self):
        self._all()
        return dict.values(self)

    def __eq__(self, other):
        self._all()
        return dict.__eq__(self, other)

    __hash__ = None  # as dict


HANDLERS: dict[int, Any] = _Handlers()


def supported_versions() -> dict[int, tuple[int, int]]:
    return {key: versions for _, key, _, versions in _TABLE}


# an answer's authorized-operations field when the request did not ask for it (Kafka's Integer.MIN_VALUE);
# what it holds when asked: RequestContext.authorized_operations
UNKNOWN_OPERATIONS = -(2**31)


@dataclass(slots=True)
class RequestContext:
    """What a handler may look at: the broker, its connection, the request."""

    broker: Any
    conn: Any
    log: Any
    request: Any = None
    client_software: dict | None = None

    @property
    def cluster(self):
        return self.broker.cluster

    @property
    def config(self):
        return self.broker.config

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def principal(self) -> str:
        """Who sent the request: ``User:<name>`` (SASL), ``User:<subject>`` (an SSL client
        certificate) or ``User:ANONYMOUS`` (broker/security/__init__.py)."""
        return getattr(self.conn, "principal", "User:ANONYMOUS")

    def close_invalid(self, reason: str) -> None:
        """A request Kafka's request classes refuse while parsing it: Kafka closes the connection
        without an answer (SocketServer: "Closing socket ... because of error"). The handler
        returns None after this."""
        self.log.info("closing connection: invalid request", api=self.request.api_key, version=self.request.api_version, reason=reason)
        self.conn.close()

    # -- ACLs (broker/security/authorizer.py) --------------------------------------
    # ``ctx.broker.authorizer`` is None when no authorizer is configured: handlers test it
    # once and skip every check (``if ctx.broker.authorizer is not None``).
    @property
    def host(self) -> str:
        """The client's IP address, as ACL hosts name it (Java's text form: ``java_host_address``)."""
        from ..security.authorizer import java_host_address  # only with an authorizer, loaded by then

        peer = self.conn.peer
        return java_host_address(peer.rsplit(":", 1)[0] if ":" in peer else peer)

    def allowed(self, op, rtype, name: str, audit: bool = True) -> bool:
        """May this request's principal do ``op`` on resource ``rtype``/``name``? (True without an authorizer.)

        Each decision goes to the audit log (``kafka.authorizer.logger``, as Kafka's): a denial at
        info, an allowance at debug. ``audit=False`` for checks that only filter what is shown
        (all-topics Metadata, ListGroups...), which Kafka logs at trace only."""
        authz = self.broker.authorizer
        if authz is None:
            return True
        # a null name (a hostile request's) is checked as the empty one, never raised on
        name = name if name is not None else ""
        ok = authz.authorize(self.principal, self.host, op, rtype, name)
        if audit and logs.enabled(logging.DEBUG if ok else logging.INFO):
            self._audit(authz, op, rtype, name)
        return ok

    def _audit(self, authz, op, rtype, name: str) -> None:
        """One line of Kafka's audit log (StandardAuthorizerData.buildAuditMessage's words)."""
        from ..security.authorizer import audit_resource

        principal, host = self.principal, self.host
        ok, rule = authz.rule(principal, host, op, rtype, name)
        resource = audit_resource(rtype, name)
        api = HANDLERS[self.request.api_key].NAME if self.request is not None else "?"
        message = (f"Principal = {principal} is {'Allowed' if ok else 'Denied'} operation = {op.name} from host = {host} "
                   f"on resource = {resource} for request = {api} with resourceRefCount = 1 based on rule {rule}")
        (AUDIT_LOG.debug if ok else AUDIT_LOG.info)(
            message, logger="kafka.authorizer.logger", principal=principal, host=host, operation=op.name, resource=resource,
            request=api, allowed=ok, rule=rule,
        )

    def allowed_on_cluster(self, op) -> bool:
        from ..security.authorizer import CLUSTER_NAME, ResourceType

        return self.allowed(op, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_operations(self, rtype, name: str) -> int:
        """An authorized-operations bit field (every supported operation without an authorizer)."""
        from ..security.authorizer import SUPPORTED_OPERATIONS

        authz = self.broker.authorizer
        if authz is None:
            return sum(1 << op for op in SUPPORTED_OPERATIONS[rtype])
        return authz.authorized_operations(self.principal, self.host, rtype, name)
