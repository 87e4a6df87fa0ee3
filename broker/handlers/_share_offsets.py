"""The share-group offset admin APIs (90-92) over the share coordinator's state.

Kafka 4.4 answers them from the group coordinator's share group (its members
and the share partitions it initialized, a ShareGroupStatePartitionMetadata
record) and the share coordinator's state. Here the group comes from the
group coordinator's ``share_group_describe`` (its members: "the group is not
empty"; another kind of group: GROUP_ID_NOT_FOUND); its share partitions are
those with share state. Without a group coordinator that knows share groups,
a group's members are the members holding a share session on this broker.

* Describe (90): each partition's start offset and leader epoch from the
  state summary, -1 when it has none; v1 adds the lag, the log end offset
  less the start offset less the delivery complete count (-1 when either is
  unknown). ``topics`` null: every share partition of the group with state.
* Alter (91): the group must have no members (NON_EMPTY_GROUP, for the whole
  request); each partition's state is initialized again at the offset asked,
  with the next state epoch, which fences the share partition's old writes.
* Delete (92): the group must have no members; each topic's states are
  deleted (UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to
  delete.", for a topic with none).
"""

from __future__ import annotations

from protocol.errors import ErrorCode

from ..coordinator.errors import CoordinatorError
from ..coordinator.service import ShareGroupDescription
from ..security.authorizer import Operation, ResourceType
from ..share.state import ShareStateError

E = ErrorCode
NO_OFFSETS = "There is no offset information to delete."


async def share_group(ctx, group_id: str):
    """(the group coordinator's description or None, error): a ShareGroupDescription, the listing of another kind of group, or None."""
    describe = getattr(ctx.broker.coordinator, "share_group_describe", None)
    if describe is None:
        return None, None
    try:
        return await describe(group_id), None
    except CoordinatorError as exc:
        return None, exc.code


def is_share_group(group) -> bool:
    return isinstance(group, ShareGroupDescription)


def group_has_members(ctx, group_id: str, group) -> bool:
    if is_share_group(group):
        return bool(group.members)
    return any(g == group_id for g, _ in ctx.broker.share_partitions.sessions.sessions)


def group_denied(ctx, op, group_id: str) -> bool:
    return ctx.broker.authorizer is not None and not ctx.allowed(op, ResourceType.GROUP, group_id)


def topic_denied(ctx, op, name: str) -> bool:
    return ctx.broker.authorizer is not None and not ctx.allowed(op, ResourceType.TOPIC, name)


def group_keys(ctx, group_id: str) -> dict:
    """{topic id: [partitions]} of the group's share state."""
    out: dict = {}
    co = ctx.broker.share_coordinator
    for rt in co.runtimes:
        for _, tid, p in rt.shard.keys_of_group(group_id):
            out.setdefault(tid, []).append(p)
    return {tid: sorted(ps) for tid, ps in out.items()}


def describe_partition(ctx, group_id: str, topic, index: int, version: int) -> dict:
    answer = {"partition_index": index, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": E.none, "error_message": None}
    if not 0 <= index < len(topic.partitions):
        return {**answer, "error_code": E.unknown_topic_or_partition}
    try:
        co = ctx.broker.share_coordinator
        state = co.summary(group_id, topic.topic_id, index) if co.runtimes else None
    except ShareStateError as exc:
        return {**answer, "error_code": exc.code, "error_message": exc.message}
    if state is None:
        return answer
    lag = -1
    if state.start_offset != -1 and state.delivery_complete_count != -1:
        lag = topic.partitions[index].log.log_end_offset - state.start_offset - state.delivery_complete_count
    return {**answer, "start_offset": state.start_offset, "leader_epoch": state.leader_epoch, "lag": lag}


def describe_group(ctx, group, version: int) -> dict:
    group_id = group.group_id
    if group_denied(ctx, Operation.DESCRIBE, group_id):
        return {"group_id": group_id, "topics": [], "error_code": E.group_authorization_failed, "error_message": None}
    cluster = ctx.cluster
    if group.topics is None:
        asked = [(cluster.by_id[tid].name, ps) for tid, ps in group_keys(ctx, group_id).items() if tid in cluster.by_id]
    else:
        asked = [(t.topic_name, list(t.partitions or ())) for t in group.topics]
    topics = []
    for name, parts in asked:
        topic = cluster.topics.get(name)
        if topic is None or topic_denied(ctx, Operation.DESCRIBE, name):
            code = E.unknown_topic_or_partition if topic is None else E.topic_authorization_failed
            topics.append({"topic_name": name, "topic_id": None, "partitions": [
                {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": code, "error_message": None}
                for p in parts]})
            continue
        topics.append({"topic_name": name, "topic_id": topic.topic_id,
                       "partitions": [describe_partition(ctx, group_id, topic, p, version) for p in parts]})
    return {"group_id": group_id, "topics": topics, "error_code": E.none, "error_message": None}


def _refused(code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "responses": []}


async def _precheck(ctx, group_id: str, op):
    """(group, None) or (None, refusal): the group id, the ACL, the group coordinator's answer."""
    if not group_id:
        return None, _refused(E.invalid_group_id)
    if group_denied(ctx, op, group_id):
        return None, _refused(E.group_authorization_failed)
    group, error = await share_group(ctx, group_id)
    return group, (_refused(error) if error is not None else None)


async def alter(ctx, req) -> dict:
    group_id = req.group_id
    group, refused = await _precheck(ctx, group_id, Operation.READ)
    if refused is not None:
        return refused
    if group is not None and not is_share_group(group):
        return _refused(E.group_id_not_found, f"Group {group_id} is not a share group.")
    if group_has_members(ctx, group_id, group):
        return _refused(E.non_empty_group)
    co, manager = ctx.broker.share_coordinator, ctx.broker.share_partitions
    co.ensure_started()
    responses = []
    for t in req.topics or ():
        topic = ctx.cluster.topics.get(t.topic_name)
        parts = []
        for p in t.partitions or ():
            code, message = E.none, None
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                code = E.unknown_topic_or_partition
            elif topic_denied(ctx, Operation.READ, t.topic_name):
                code = E.topic_authorization_failed
            else:
                try:
                    current = co.peek(group_id, topic.topic_id, p.partition_index)
                    co.initialize(group_id, topic.topic_id, p.partition_index, 0 if current is None else current.state_epoch + 1,
                                  p.start_offset)
                    manager.forget(group_id, topic.topic_id, p.partition_index)
                except ShareStateError as exc:
                    code, message = exc.code, exc.message
            parts.append({"partition_index": p.partition_index, "error_code": code, "error_message": message})
        responses.append({"topic_name": t.topic_name, "topic_id": topic.topic_id if topic else None, "partitions": parts})
    return {"throttle_time": 0, "error_code": E.none, "error_message": None, "responses": responses}


async def delete(ctx, req) -> dict:
    group_id = req.group_id
    group, refused = await _precheck(ctx, group_id, Operation.DELETE)
    if refused is not None:
        return refused
    keys = group_keys(ctx, group_id) if ctx.broker.share_coordinator.runtimes else {}
    if not is_share_group(group) and (group is not None or not keys):
        return _refused(E.group_id_not_found)
    if group_has_members(ctx, group_id, group):
        return _refused(E.non_empty_group)
    co, manager = ctx.broker.share_coordinator, ctx.broker.share_partitions
    responses = []
    for t in req.topics or ():
        topic = ctx.cluster.topics.get(t.topic_name)
        code, message = E.none, None
        if topic is None:
            code = E.unknown_topic_or_partition
        elif topic_denied(ctx, Operation.READ, t.topic_name):
            code = E.topic_authorization_failed
        elif topic.topic_id not in keys:
            code, message = E.unknown_topic_or_partition, NO_OFFSETS
        else:
            try:
                for p in keys[topic.topic_id]:
                    co.delete(group_id, topic.topic_id, p)
                    manager.forget(group_id, topic.topic_id, p)
            except ShareStateError as exc:
                code, message = exc.code, exc.message
        responses.append({"topic_name": t.topic_name, "topic_id": topic.topic_id if topic else None, "error_code": code,
                          "error_message": message})
    return {"throttle_time": 0, "error_code": E.none, "error_message": None, "responses": responses}
