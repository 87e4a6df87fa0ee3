"""DeleteAcls (31), v1-v3: remove the ACL bindings filters match (kafka-acls --remove).

ALTER on the cluster or CLUSTER_AUTHORIZATION_FAILED; SECURITY_DISABLED
without an authorizer; a filter with an unknown field INVALID_REQUEST (Kafka's
AclControlManager.validateFilter). Each filter answers what it matched; the
removal is durable before the answer.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation
from ._acls import FILTER_CODES, acl_filter, screened

API_KEY = 31
NAME = "DeleteAcls"
VERSIONS = (1, 3)


def _all(req, code, message):
    return {"throttle_time": 0, "filter_results": [{"error_code": code, "error_message": message, "matching_acls": []} for _ in req.filters or ()]}


@screened("filters", FILTER_CODES, "Filters contain UNKNOWN elements", Operation.ALTER, "No Authorizer is configured.", _all)
async def handle(ctx, req):
    filters = [acl_filter(f) for f in req.filters or ()]
    valid = [f for f in filters if f.unknown() is None]
    matched = iter(await ctx.broker.acls.delete(valid))
    results = []
    for f in filters:
        why = f.unknown()
        if why is not None:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": why, "matching_acls": []})
            continue
        results.append({
            "error_code": ErrorCode.none, "error_message": "",
            "matching_acls": [
                {
                    "error_code": ErrorCode.none, "error_message": "", "resource_type": int(b.resource_type), "resource_name": b.name,
                    "pattern_type": int(b.pattern_type), "principal": b.principal, "host": b.host,
                    "operation": int(b.operation), "permission_type": int(b.permission),
                }
                for b in next(matched)
            ],
        })
    return {"throttle_time": 0, "filter_results": results}
