"""AlterUserScramCredentials (51), v0: add, replace or delete users' SCRAM credentials.

What ``kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=...]'
--entity-type users`` sends: the client salts and hashes the password
(PBKDF2, the costly part), the broker keeps the salt, the iteration count
and the two keys derived from the salted password (two HMACs and a hash),
never the password. Validation and results are Kafka's (ScramControlManager):
4096 to 16384 iterations, a known mechanism, a non-empty name, one
alteration per user and request. The new credentials are written to
``<data-dir>/scram-credentials.json`` (atomically, on a worker thread) before
the answer, and hold for the next login.
"""

from protocol.errors import ErrorCode

from ..security.authorizer import Operation

API_KEY = 51
NAME = "AlterUserScramCredentials"
VERSIONS = (0, 0)


async def handle(ctx, req):
    if not ctx.allowed_on_cluster(Operation.ALTER):
        users = sorted({d.name for d in req.deletions or ()} | {u.name for u in req.upsertions or ()})
        return {"throttle_time": 0, "results": [{"user": u, "error_code": ErrorCode.cluster_authorization_failed, "error_message": "Cluster authorization failed."} for u in users]}
    results = await ctx.broker.scram.alter(req.deletions, req.upsertions)
    return {"throttle_time": 0, "results": results}
