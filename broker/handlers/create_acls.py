"""CreateAcls (30), v1-v3: add ACL bindings (kafka-acls --add, Admin.createAcls).

As Kafka's AclApis: ALTER on the cluster or CLUSTER_AUTHORIZATION_FAILED for
every creation; SECURITY_DISABLED when no authorizer is configured. Each
creation is checked on its own (INVALID_REQUEST: an ANY or unknown resource
type, pattern type other than LITERAL/PREFIXED, ANY or unknown operation or
permission, an empty name, a CLUSTER resource not named ``kafka-cluster``);
the valid ones are kept (durably, before the answer), an existing binding
once. A creation with ANY (or MATCH) in it cannot even be made into a binding
by Kafka's AclApis: the whole request fails, every result UNKNOWN_SERVER_ERROR
without a message, and nothing is created.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation, PatternType, Permission, ResourceType, validate_new
from ._acls import CREATION_CODES, binding, screened

API_KEY = 30
NAME = "CreateAcls"
VERSIONS = (1, 3)


def _all(req, code, message):
    return {"throttle_time": 0, "results": [{"error_code": code, "error_message": message} for _ in req.creations or ()]}


@screened("creations", CREATION_CODES, "CreatableAcls contain unknown elements", Operation.ALTER, "No Authorizer is configured.", _all)
async def handle(ctx, req):
    bindings = [binding(c) for c in req.creations or ()]
    if any(
        b.resource_type == ResourceType.ANY or b.pattern_type in (PatternType.ANY, PatternType.MATCH) or b.operation == Operation.ANY or b.permission == Permission.ANY
        for b in bindings
    ):
        return _all(req, ErrorCode.unknown_server_error, None)
    results, valid = [], []
    for b in bindings:
        why = validate_new(b)
        if why is None:
            valid.append(b)
            results.append({"error_code": ErrorCode.none, "error_message": ""})  # Kafka's default, not null
        else:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": why})
    if valid:
        await ctx.broker.acls.create(valid)
    return {"throttle_time": 0, "results": results}
