"""One module per Kafka API.

Each module declares ``API_KEY``, ``NAME``, ``VERSIONS = (min, max)`` (Kafka
4.1's range where clients use it) and ``async def handle(ctx, request)``,
which returns the response as a dict (built into the kio class of the
request's version by ``protocol.codec.build``) or ``None`` for no response.
A module may define ``unsupported(ctx, event) -> (version, body)`` to shape
the UNSUPPORTED_VERSION answer, as ApiVersions does. What is deliberately
left out is listed in ``docs/SKIPPED.md``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

_MODULES = (
    "produce",
    "fetch",
    "list_offsets",
    "metadata",
    "api_versions",
    "create_topics",
    "delete_topics",
    "init_producer_id",
    "offset_for_leader_epoch",
    "describe_configs",
    "create_partitions",
    "describe_cluster",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "offset_delete",
    "describe_groups",
    "list_groups",
    "delete_groups",
    "consumer_group_heartbeat",
    "consumer_group_describe",
)

HANDLERS: dict[int, Any] = {}
for _name in _MODULES:
    _mod = importlib.import_module(f"{__name__}.{_name}")
    HANDLERS[_mod.API_KEY] = _mod


def supported_versions() -> dict[int, tuple[int, int]]:
    return {key: mod.VERSIONS for key, mod in HANDLERS.items()}


@dataclass(slots=True)
class RequestContext:
    """What a handler may look at: the broker, its connection, the request."""

    broker: Any
    conn: Any
    log: Any
    request: Any = None
    client_software: dict | None = None

    @property
    def cluster(self):
        return self.broker.cluster

    @property
    def config(self):
        return self.broker.config

    @property
    def version(self) -> int:
        return self.request.api_version
