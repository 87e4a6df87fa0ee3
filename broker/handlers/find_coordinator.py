"""FindCoordinator (10), v0-6.

This broker coordinates every group and every transaction: the answer is
always this node, for any key of type GROUP (0), TRANSACTION (1) or SHARE (2);
the first TRANSACTION key creates ``__transaction_state``, the first SHARE key
``__share_group_state``. The address is that of the listener the client
connected through. v4+ batch keys. As Kafka 4.4: a SHARE key needs v6
(INVALID_REQUEST below) and CLUSTER_ACTION on the cluster, and must be a
share-partition key ``groupId:topicId:partition`` (INVALID_REQUEST if not).
"""

from protocol.errors import ErrorCode

from ..listeners import advertised_for, listener_name
from ..security.authorizer import Operation, ResourceType

API_KEY = 10
NAME = "FindCoordinator"
VERSIONS = (0, 6)
GROUP, TRANSACTION, SHARE = 0, 1, 2


def _elsewhere(ctx, key: str):
    """On a cluster node that does not serve the data: the active node's address, or
    COORDINATOR_NOT_AVAILABLE while there is none (or this one is still loading)."""
    view = ctx.broker.view
    if view is None or view.serving:
        return None
    leader = view.leader()
    listener = listener_name(ctx)
    address = view.endpoint(leader, listener, advertised_for(ctx)) if leader >= 0 and leader != view.node_id else None
    if address is None:
        return {"key": key, "error_code": ErrorCode.coordinator_not_available, "error_message": None, "node_id": -1, "host": "", "port": -1}
    return {"key": key, "error_code": ErrorCode.none, "error_message": None, "node_id": leader, "host": address[0], "port": address[1]}


def _answer(ctx, key: str, key_type: int) -> dict:
    host, port = advertised_for(ctx)
    if ctx.broker.authorizer is not None:  # DESCRIBE on the group or transactional id, as Kafka's getCoordinator
        if key_type == GROUP and not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, key):
            return {"key": key, "error_code": ErrorCode.group_authorization_failed, "error_message": "Group authorization failed." if ctx.version < 4 else None, "node_id": -1, "host": "", "port": -1}
        if key_type == TRANSACTION and not ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return {"key": key, "error_code": ErrorCode.transactional_id_authorization_failed,
                    "error_message": "Transactional Id authorization failed." if ctx.version < 4 else None, "node_id": -1, "host": "", "port": -1}
    elsewhere = _elsewhere(ctx, key) if key_type in (GROUP, TRANSACTION, SHARE) else None
    if elsewhere is not None:
        return elsewhere
    if key_type == SHARE:
        return _share(ctx, key, host, port)
    if key_type not in (GROUP, TRANSACTION):
        return {"key": key, "error_code": ErrorCode.invalid_request, "error_message": f"key type {key_type} is not served", "node_id": -1, "host": "", "port": -1}
    if key_type == GROUP and not key and ctx.version < 4:
        return {"key": key, "error_code": ErrorCode.invalid_request, "error_message": "empty group id", "node_id": -1, "host": "", "port": -1}
    if key_type == TRANSACTION:
        ctx.broker.transactions.ensure_started()  # __transaction_state is made on first use, as Kafka makes it
    return {"key": key, "error_code": ErrorCode.none, "error_message": None, "node_id": ctx.cluster.node_id, "host": host, "port": port}


def _share(ctx, key: str, host: str, port: int) -> dict:
    from ..share.coordinator import parse_coordinator_key

    def refused(error, message=None) -> dict:
        return {"key": key, "error_code": error, "error_message": message, "node_id": -1, "host": "", "port": -1}

    if ctx.version < 6:
        return refused(ErrorCode.invalid_request)
    if ctx.broker.authorizer is not None and not ctx.allowed_on_cluster(Operation.CLUSTER_ACTION):
        return refused(ErrorCode.cluster_authorization_failed)
    try:
        parse_coordinator_key(key)
    except ValueError:
        return refused(ErrorCode.invalid_request)
    ctx.broker.share_coordinator.ensure_started()
    return {"key": key, "error_code": ErrorCode.none, "error_message": None, "node_id": ctx.cluster.node_id, "host": host, "port": port}


async def handle(ctx, req):
    key_type = getattr(req, "key_type", GROUP)
    if ctx.version >= 4:
        return {"throttle_time": 0, "coordinators": [_answer(ctx, key, key_type) for key in req.coordinator_keys or ()]}
    answer = _answer(ctx, req.key, key_type)
    del answer["key"]  # v0-3 answer for the one key asked, without naming it
    return {"throttle_time": 0, **answer}
