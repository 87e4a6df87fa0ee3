"""Helpers shared by the group-coordinator handlers."""

from __future__ import annotations

from types import SimpleNamespace

from protocol.errors import ErrorCode

from ..coordinator.service import CommitPartition


def ms(value) -> int:
    """kio gives durations as timedeltas; Kafka speaks milliseconds."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def coordinator(ctx):
    """The group coordinator service (broker/coordinator/service.py): the handlers' only way in."""
    return ctx.broker.coordinator


def client_host(ctx) -> str:
    return "/" + ctx.conn.peer.rsplit(":", 1)[0]


def group_denied(ctx, group_id, op=None) -> bool:
    """With ACLs on: may this request's principal not do ``op`` (READ by default) on the group?"""
    if ctx.broker.authorizer is None:
        return False
    from ..security.authorizer import Operation, ResourceType

    return not ctx.allowed(op or Operation.READ, ResourceType.GROUP, group_id or "")


def topic_reader(ctx):
    """``name -> bool``: may this request's principal READ the topic (None without ACLs)."""
    if ctx.broker.authorizer is None:
        return None
    from ..security.authorizer import Operation, ResourceType

    return lambda name: ctx.allowed(Operation.READ, ResourceType.TOPIC, name)


def commit_partitions(cluster, topics, readable=None) -> tuple[dict, list]:
    """OffsetCommit's and TxnOffsetCommit's partitions: TOPIC_AUTHORIZATION_FAILED for topics
    ``readable`` refuses, UNKNOWN_TOPIC_OR_PARTITION (by topic and partition) for those the
    cluster lacks, and a ``CommitPartition`` for each of the others."""
    errors: dict = {}
    wanted: list = []
    for t in topics or ():
        topic = cluster.topics.get(t.name)
        if readable is not None and not readable(t.name):
            for p in t.partitions or ():
                errors[(t.name, p.partition_index)] = ErrorCode.topic_authorization_failed
            continue
        for p in t.partitions or ():
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                errors[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
            else:
                wanted.append(CommitPartition(t.name, p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                              p.committed_metadata))
    return errors, wanted


def commit_answer(topics, errors: dict) -> list[dict]:
    """The answer's topics: each partition of the request with its error."""
    return [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": errors[(t.name, p.partition_index)]}
                                            for p in t.partitions or ()]} for t in topics or ()]


def named_topics(cluster, topics, items: str) -> list:
    """Topics of a v10+ OffsetCommit or OffsetFetch, which name them by id, with the name of each
    (None for an id the cluster does not know), so the by-name paths serve them."""
    out = []
    for t in topics or ():
        topic = cluster.by_id.get(t.topic_id)
        out.append(SimpleNamespace(name=None if topic is None else topic.name, topic_id=t.topic_id, **{items: getattr(t, items)}))
    return out


def assignment_answer(topics) -> dict:
    """A described member's assignment (``TopicAssignment``s) as ConsumerGroupDescribe and ShareGroupDescribe answer it."""
    return {"topic_partitions": [{"topic_id": t.topic_id, "topic_name": t.topic_name, "partitions": list(t.partitions)} for t in topics]}


def commit_answer_by_id(topics, errors: dict) -> list[dict]:
    """``commit_answer`` for v10+: topics by id; an unknown id is UNKNOWN_TOPIC_ID for each of its partitions."""
    return [{"topic_id": t.topic_id, "partitions": [
        {"partition_index": p.partition_index,
         "error_code": ErrorCode.unknown_topic_id if t.name is None else errors[(t.name, p.partition_index)]}
        for p in t.partitions or ()]} for t in topics or ()]
