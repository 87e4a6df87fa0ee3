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
        "supported_features": _SUPPORTED,
        "finalized_features_epoch": 1,
        "finalized_features": _finalized(ctx.config.transaction_version),
    }


# group.version 1 turns on the KIP-848 consumer protocol; transaction.version 2 is transactions V2
# (KIP-890 part 2), which the Java client, franz-go and others use when it is finalized, as on a new
# Kafka 4.x cluster. share.version turns on KIP-932 share groups: a new Kafka 4.4 cluster (metadata
# version 4.4-IV0) finalizes its latest production level, 2 (ShareVersion.SV_2; SV_1 came with 4.2),
# and, as Kafka 4.4 does, lists it among the finalized features only, not the supported ones.
# A level of 0 is not listed, as Kafka leaves out features at level 0.
SHARE_VERSION = 2
_SUPPORTED = [{"name": "group.version", "min_version": 0, "max_version": 1},
              {"name": "transaction.version", "min_version": 0, "max_version": 2}]


def _finalized(transaction_version: int) -> list[dict]:
    levels = {"group.version": 1, "share.version": SHARE_VERSION, "transaction.version": transaction_version}
    return [{"name": name, "min_version_level": level, "max_version_level": level} for name, level in levels.items() if level > 0]


def unsupported(ctx, event):
    return 0, {"error_code": ErrorCode.unsupported_version, "api_keys": _api_keys(ctx)}
