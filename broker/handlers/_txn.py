"""Helpers shared by the transaction handlers (broker/txn/service.py is their way in)."""

from __future__ import annotations

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError


def transactions(ctx):
    """The transaction coordinator (made on first use; ``__transaction_state`` when a transaction first needs it)."""
    return ctx.broker.transactions


def call(fn, *args, **kwargs):
    """(response, None), or (None, error code) when the coordinator refused (loading, not coordinator)."""
    try:
        return fn(*args, **kwargs), None
    except CoordinatorError as exc:
        return None, exc.code


def unknown_partitions(ctx, topics: list[tuple[str, list[int]]]) -> dict[tuple[str, int], ErrorCode]:
    """UNKNOWN_TOPIC_OR_PARTITION for the partitions the cluster does not have (KafkaApis checks these first)."""
    cluster = ctx.cluster
    out = {}
    for name, parts in topics:
        topic = cluster.topics.get(name)
        for p in parts:
            if topic is None or not 0 <= p < len(topic.partitions):
                out[(name, p)] = ErrorCode.unknown_topic_or_partition
    return out
