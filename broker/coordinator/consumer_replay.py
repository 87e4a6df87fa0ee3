"""Replay of the KIP-848 records (types 3, 4, 5, 6, 7, 8, 16) into a shard's groups."""

from __future__ import annotations

from protocol.group_records import consumer as cg

from .classic_group import ClassicGroup
from .consumer import from_topic_partitions, to_topic_partitions
from .consumer_group import INITIAL_GROUP_EPOCH, ConsumerGroup

CONSUMER_KEYS = tuple(record.key.cls for record in cg.RECORDS)  # types 3-8 and 16


def replayed_group(groups: dict, group_id: str, cls=ConsumerGroup):
    """The group of ``cls`` a record of ``group_id`` replays into. A missing group, or an empty classic
    one (offsets replayed before the group's own records), is replaced by a new one; any other kind of
    group means a corrupt log."""
    group = groups.get(group_id)
    if isinstance(group, cls):
        return group
    if group is not None and not (isinstance(group, ClassicGroup) and not group.members):
        raise ValueError(f"group {group_id} is not a {cls.protocol_type} group")
    group = groups[group_id] = cls(group_id)
    return group



def replay_consumer(groups: dict, key, value) -> None:
    gid = key.group_id
    if isinstance(key, cg.ConsumerGroupPartitionMetadataKey):
        return  # superseded by the metadata hash in 4.1
    if value is None:
        group = groups.get(gid)
        if not isinstance(group, ConsumerGroup):
            return
        if isinstance(key, cg.ConsumerGroupMetadataKey):
            del groups[gid]
        elif isinstance(key, cg.ConsumerGroupMemberMetadataKey):
            group.remove_member(key.member_id)
        elif isinstance(key, cg.ConsumerGroupTargetAssignmentMemberKey):
            group.set_target(key.member_id, None)
        elif isinstance(key, cg.ConsumerGroupCurrentMemberAssignmentKey):
            member = group.members.get(key.member_id)
            if member is not None:
                group.set_current(member, 0, -1, 0, {}, {})
        elif isinstance(key, cg.ConsumerGroupRegularExpressionKey):
            group.regexes.pop(key.regular_expression, None)
            group.subscription_version += 1
        elif isinstance(key, cg.ConsumerGroupTargetAssignmentMetadataKey):
            group.assignment_epoch = INITIAL_GROUP_EPOCH
            group.assignment_timestamp = 0
        return
    group = replayed_group(groups, gid)
    if isinstance(key, cg.ConsumerGroupMetadataKey):
        group.group_epoch = value.epoch
        group.metadata_hash = value.metadata_hash
        group.created = True
    elif isinstance(key, cg.ConsumerGroupMemberMetadataKey):
        m = group.get_or_add_member(key.member_id)
        if m.instance_id is not None and value.instance_id != m.instance_id and group.static_members.get(m.instance_id) == m.member_id:
            del group.static_members[m.instance_id]
        m.instance_id = value.instance_id
        m.rack_id = value.rack_id
        m.client_id = value.client_id
        m.client_host = value.client_host
        group.set_subscription(m, list(value.subscribed_topic_names), value.subscribed_topic_regex)
        m.rebalance_timeout_ms = value.rebalance_timeout_ms
        group.set_assignor(m, value.server_assignor)
        m.classic = value.classic_member_metadata
        m.has_metadata = True
        if m.instance_id is not None:
            group.static_members[m.instance_id] = m.member_id
    elif isinstance(key, cg.ConsumerGroupTargetAssignmentMetadataKey):
        group.assignment_epoch = value.assignment_epoch
        group.assignment_timestamp = value.assignment_timestamp
    elif isinstance(key, cg.ConsumerGroupTargetAssignmentMemberKey):
        group.set_target(key.member_id, from_topic_partitions(value.topic_partitions))
    elif isinstance(key, cg.ConsumerGroupCurrentMemberAssignmentKey):
        m = group.get_or_add_member(key.member_id)
        group.set_current(
            m,
            value.member_epoch,
            value.previous_member_epoch,
            value.state,
            from_topic_partitions(value.assigned_partitions),
            from_topic_partitions(value.partitions_pending_revocation),
            _assignment_epochs(value),
        )
    elif isinstance(key, cg.ConsumerGroupRegularExpressionKey):
        group.regexes[key.regular_expression] = (frozenset(value.topics), value.version, value.timestamp)
        group.subscription_version += 1


def _assignment_epochs(value: cg.ConsumerGroupCurrentMemberAssignmentValue) -> dict | None:
    """KIP-1251 epochs of a current assignment record; None if it has none (written before Kafka 4.3):
    ``set_current`` then takes the member's epoch. A topic without them takes it too."""
    out = None
    default = value.member_epoch if value.member_epoch > 0 else 0
    for tp in (*value.assigned_partitions, *value.partitions_pending_revocation):
        if tp.assignment_epochs:
            if out is None:
                out = {}
            tid = tp.topic_id
            for p, e in zip(tp.partitions, tp.assignment_epochs, strict=True):
                out[(tid, p)] = e
    if out is None:
        return None
    for tp in (*value.assigned_partitions, *value.partitions_pending_revocation):
        if not tp.assignment_epochs:
            for p in tp.partitions:
                out[(tp.topic_id, p)] = default
    return out


def _target_value(target):
    return None if target is None else cg.ConsumerGroupTargetAssignmentMemberValue(topic_partitions=to_topic_partitions(target))


def _current_value(fields):
    if fields is None:
        return None
    epoch, previous, state, assigned, pending, epochs = fields
    return cg.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=epoch, previous_member_epoch=previous, state=state,
        assigned_partitions=to_topic_partitions(assigned, epochs), partitions_pending_revocation=to_topic_partitions(pending, epochs),
    )


def consumer_undo(groups: dict, key) -> tuple:
    """``(build, arg)``: ``build(arg)`` is ``consumer_value(groups, key)`` as it is now, for a rollback.

    The two records a rebalance writes most (a member's target and its current assignment) keep
    only references to the state they replace (replay swaps those objects, never changes them in
    place), so the sorted partition lists are built only if an operation is rolled back."""
    cls = type(key)
    if cls is cg.ConsumerGroupTargetAssignmentMemberKey or cls is cg.ConsumerGroupCurrentMemberAssignmentKey:
        group = groups.get(key.group_id)
        if not isinstance(group, ConsumerGroup):
            return _none, None
        if cls is cg.ConsumerGroupTargetAssignmentMemberKey:
            return _target_value, group.target.get(key.member_id)
        m = group.members.get(key.member_id)
        return _current_value, None if m is None else (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation, m.assignment_epochs)
    return _same, consumer_value(groups, key)


def _none(_):
    return None


def _same(value):
    return value


def consumer_value(groups: dict, key):
    """The value of ``key`` that replaying would turn into the state as it stands now:
    replay's inverse, which undoes a record of a failed operation."""
    group = groups.get(key.group_id)
    if not isinstance(group, ConsumerGroup):
        return None
    if isinstance(key, cg.ConsumerGroupMetadataKey):
        return cg.ConsumerGroupMetadataValue(epoch=group.group_epoch, metadata_hash=group.metadata_hash) if group.created else None
    if isinstance(key, cg.ConsumerGroupMemberMetadataKey):
        m = group.members.get(key.member_id)
        if m is None or not m.has_metadata:
            return None
        return cg.ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor, classic_member_metadata=m.classic,
        )
    if isinstance(key, cg.ConsumerGroupTargetAssignmentMetadataKey):
        return cg.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group.assignment_epoch, assignment_timestamp=group.assignment_timestamp)
    if isinstance(key, cg.ConsumerGroupTargetAssignmentMemberKey):
        return _target_value(group.target.get(key.member_id))
    if isinstance(key, cg.ConsumerGroupCurrentMemberAssignmentKey):
        m = group.members.get(key.member_id)
        return _current_value(None if m is None else (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation, m.assignment_epochs))
    if isinstance(key, cg.ConsumerGroupRegularExpressionKey):
        entry = group.regexes.get(key.regular_expression)
        if entry is None:
            return None
        topics, version, timestamp = entry
        return cg.ConsumerGroupRegularExpressionValue(topics=sorted(topics), version=version, timestamp=timestamp)
    return None
