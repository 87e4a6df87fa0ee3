"""DescribeAcls (29), v1-v3: the ACL bindings a filter matches (kafka-acls --list).

A field that is UNKNOWN (0) closes the connection before anything else (Kafka
refuses such a request while parsing it); then DESCRIBE on the cluster or
CLUSTER_AUTHORIZATION_FAILED; SECURITY_DISABLED without an authorizer. A code
Kafka has no name for (99) is UNKNOWN and matches nothing, without an error.
Bindings are answered grouped by resource pattern.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation
from ._acls import FILTER_CODES, acl_filter, refused, unknown_code

API_KEY = 29
NAME = "DescribeAcls"
VERSIONS = (1, 3)


def _error(code, message):
    return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": []}


async def handle(ctx, req):
    if unknown_code((req,), FILTER_CODES):
        ctx.close_invalid("DescribeAclsRequest contains UNKNOWN elements")
        return None
    refusal = refused(ctx, Operation.DESCRIBE, "No Authorizer is configured on the broker")
    if refusal is not None:
        return _error(*refusal)
    authz = ctx.broker.authorizer
    flt = acl_filter(req)  # a code Kafka has no name for is UNKNOWN, and matches nothing (no error: Kafka's too)
    resources: dict[tuple, list] = {}
    for b in authz.acls(flt):
        resources.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
            {"principal": b.principal, "host": b.host, "operation": int(b.operation), "permission_type": int(b.permission)}
        )
    return {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": "",
        "resources": [
            {"resource_type": int(rt), "resource_name": name, "pattern_type": int(pt), "acls": acls}
            for (rt, name, pt), acls in resources.items()
        ],
    }
