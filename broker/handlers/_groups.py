"""Helpers shared by the group-coordinator handlers."""

from __future__ import annotations


def ms(value) -> int:
    """kio gives durations as timedeltas; Kafka speaks milliseconds."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def coordinator(ctx):
    """The group coordinator service (broker/coordinator/service.py): the handlers' only way in."""
    return ctx.broker.coordinator


def client_host(ctx) -> str:
    return "/" + ctx.conn.peer.rsplit(":", 1)[0]
