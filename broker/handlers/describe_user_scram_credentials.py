"""DescribeUserScramCredentials (50), v0: the SCRAM mechanisms and iteration counts of users.

Null or empty ``users``: every user with a credential, from the configuration
(SCRAM ``user_<name>`` JAAS options) or from AlterUserScramCredentials. A
user named twice gets DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND,
as Kafka's ScramImage answers. Salts and keys are never answered.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation

API_KEY = 50
NAME = "DescribeUserScramCredentials"
VERSIONS = (0, 0)


async def handle(ctx, req):
    if not ctx.allowed_on_cluster(Operation.DESCRIBE):
        code, message = ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
        return {"throttle_time": 0, "error_code": code, "error_message": message,
                "results": [{"user": "", "error_code": code, "error_message": message, "credential_infos": []} for _ in req.users or ()]}
    names = [u.name for u in req.users] if req.users else None
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": "", "results": ctx.broker.scram.describe(names)}
