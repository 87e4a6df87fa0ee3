"""Helpers shared by the group-coordinator handlers."""

from __future__ import annotations

from protocol.errors import ErrorCode

from ..coordinator.common import CoordinatorError


def ms(value) -> int:
    """kio gives durations as timedeltas; Kafka speaks milliseconds."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def coordinator(ctx):
    return ctx.broker.coordinator


async def on_shard(ctx, group_id: str, method: str, op):
    """Run ``op(shard)`` as a write (or read) on the group's shard.

    Returns (error, value): error is NONE and value the op's response, or the
    coordinator error (loading, not coordinator, failed append) and None.
    """
    try:
        shard = coordinator(ctx).shard_for(group_id)
        value = await getattr(shard, method)(op)
    except CoordinatorError as exc:
        return exc.code, None
    if value is None and method == "write":
        return ErrorCode.not_coordinator, None  # the shard was reset under a parked request
    return ErrorCode.none, value


def client_host(ctx) -> str:
    return "/" + ctx.conn.peer.rsplit(":", 1)[0]
