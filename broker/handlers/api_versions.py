"""ApiVersions (18), v0-4.

Lists every API this broker serves with its version range. An unsupported
ApiVersions version is answered at v0 with UNSUPPORTED_VERSION and the list,
so the client can retry with a version we speak (KIP-511). v3+ carries the
client's software name and version, which go into the connection's log
context.
"""

from logging import DEBUG

from protocol.errors import ErrorCode

from ..logs import enabled

API_KEY = 18
NAME = "ApiVersions"
VERSIONS = (0, 4)


def _api_keys(ctx):
    return [
        {"api_key": key, "min_version": lo, "max_version": hi}
        for key, (lo, hi) in sorted(ctx.broker.supported.items())
    ]


async def handle(ctx, req):
    name = getattr(req, "client_software_name", None)
    if name:
        sw_version = getattr(req, "client_software_version", None)
        ctx.client_software = {"name": name, "version": sw_version}
        ctx.conn.identify(f"{name}/{sw_version}")
        if enabled(DEBUG):  # binding a logger costs memory on every connection: only when it prints
            ctx.log.debug("client identified", client_id=ctx.request.client_id)
    return {
        "error_code": ErrorCode.none,
        "api_keys": _api_keys(ctx),
        "throttle_time": 0,
        # group.version 1 turns on the KIP-848 consumer protocol, as in Kafka 4.x
        "supported_features": [{"name": "group.version", "min_version": 0, "max_version": 1}],
        "finalized_features_epoch": 1,
        "finalized_features": [{"name": "group.version", "min_version_level": 1, "max_version_level": 1}],
    }


def unsupported(ctx, event):
    return 0, {"error_code": ErrorCode.unsupported_version, "api_keys": _api_keys(ctx)}
