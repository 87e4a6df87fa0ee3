"""DescribeAcls (29), v1-v3: the ACL bindings a filter matches (kafka-acls --list).

DESCRIBE on the cluster or CLUSTER_AUTHORIZATION_FAILED; SECURITY_DISABLED
without an authorizer; a filter with an unknown field INVALID_REQUEST (Kafka
refuses such a request while parsing it). Bindings are answered grouped by
resource pattern.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation
from ._acls import acl_filter, refused

API_KEY = 29
NAME = "DescribeAcls"
VERSIONS = (1, 3)


def _error(code, message):
    return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": []}


async def handle(ctx, req):
    refusal = refused(ctx, Operation.DESCRIBE, "No Authorizer is configured on the broker")
    if refusal is not None:
        return _error(*refusal)
    authz = ctx.broker.authorizer
    flt = acl_filter(req)
    why = flt.unknown()
    if why is not None:
        return _error(ErrorCode.invalid_request, why)
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
