"""DescribeCluster (60), v0-2: this one broker, which is also the controller.

The broker is described by the advertised address of the client's listener.
"""

from protocol.errors import ErrorCode

from ..listeners import advertised_for, listener_name

from ..security.authorizer import Operation, ResourceType
from . import UNKNOWN_OPERATIONS

API_KEY = 60
NAME = "DescribeCluster"
VERSIONS = (0, 2)


def _cluster_ops(ctx) -> int:
    if not ctx.allowed_on_cluster(Operation.DESCRIBE):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster")


async def handle(ctx, req):
    endpoint_type = getattr(req, "endpoint_type", 1)
    if endpoint_type not in (1,):
        return {
            "error_code": ErrorCode.unsupported_endpoint_type,
            "error_message": f"endpoint type {endpoint_type} is not served by this broker",
            "endpoint_type": endpoint_type,
        }
    host, port = advertised_for(ctx)
    node = ctx.cluster.node_id
    view = ctx.broker.view
    brokers = [{"broker_id": node, "host": host, "port": port, "rack": None, "is_fenced": False}]
    if view is not None:  # a node of a cluster: every live node, the active one as the controller
        listener = listener_name(ctx)
        brokers = [{"broker_id": i, "host": h, "port": p, "rack": None, "is_fenced": False} for i, h, p in view.brokers(listener, (host, port))]
        node = view.leader()
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": ctx.cluster.cluster_id or (view.cluster_id if view is not None else ""),
        "controller_id": node,
        "brokers": brokers,
        "cluster_authorized_operations": _cluster_ops(ctx) if req.include_cluster_authorized_operations else UNKNOWN_OPERATIONS,
    }
