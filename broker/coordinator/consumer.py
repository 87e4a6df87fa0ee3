"""KIP-848 ConsumerGroupHeartbeat: the records, epochs, members joining and leaving, timers, regexes.

The target assignment and the reconciliation of members with it are in consumer_assignment.py
(``ConsumerAssignment``, a base class of ``ConsumerGroups``).

Follows section 3 of shared/reference/group-coordinator.md (Kafka 4.1's
GroupMetadataManager.consumerGroupHeartbeat and CurrentAssignmentBuilder).
State changes only through records: ``_emit`` writes a record through
``GroupShard.emit``, which replays it into the shard at once (journaled, so a
heartbeat that fails part-way is rolled back and writes nothing), so the next
step of the same heartbeat already sees it, and a restart replays the same
records.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    TopicPartitions,
)

from .classic_group import EMPTY as CLASSIC_EMPTY
from .classic_group import ClassicGroup
from .common import CoordinatorError, Result, ShardPart
from .consumer_assignment import ConsumerAssignment, assignment_key, rebalance_key
from .consumer_group import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
)

LEAVE_EPOCH = -1
# the pending interval is at least this many times the event loop's longest recent stall
STALL_FACTOR = 4
PENDING_HEARTBEATS_PER_S = 2500  # a group's members that must revoke (or, with none, those waiting), together, per second
STATIC_LEAVE_EPOCH = -2


def new_member_id() -> str:
    """Kafka's Uuid.toString(): 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _subscription(m) -> dict:
    """What a member record holds of a member and a static member's successor takes over."""
    return {"instance_id": m.instance_id, "rack_id": m.rack_id, "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex, "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "server_assignor": m.server_assignor}


def _session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session:{group_id}:{member_id}"


def to_topic_partitions(assignment: Assignment, epochs: dict | None = None) -> list[TopicPartitions]:
    """Record form, topics by id text and partitions in order; with ``epochs`` ((topic id, partition)
    -> assignment epoch) each topic also lists its partitions' assignment epochs (KIP-1251)."""
    items = assignment.items() if len(assignment) < 2 else sorted(assignment.items(), key=lambda kv: str(kv[0]))
    if epochs is None:
        return [TopicPartitions(tid, sorted(parts)) for tid, parts in items if parts]
    out = []
    for tid, parts in items:
        if parts:
            ordered = sorted(parts)
            out.append(TopicPartitions(tid, ordered, [epochs[(tid, p)] for p in ordered]))
    return out


def assignment_epochs(epoch: int, assigned: Assignment, pending: Assignment, held: dict) -> dict:
    """KIP-1251: each partition keeps the epoch it was assigned at while the member holds it
    (``held``); one it did not hold is assigned at ``epoch`` (0 if negative)."""
    default = epoch if epoch > 0 else 0
    out = {}
    for source in (assigned, pending):
        for tid, parts in source.items():
            for p in parts:
                key = (tid, p)
                out[key] = held.get(key, default)
    return out


def from_topic_partitions(items) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in items if tp.partitions}


@dataclass(slots=True)
class HeartbeatParams:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Assignment | None  # None: not sent ("unchanged")
    version: int
    client_id: str
    client_host: str


class ConsumerGroups(ConsumerAssignment, ShardPart):
    # ================================================================ records
    def write_target_epoch(self, group: ConsumerGroup, epoch: int) -> None:
        self._emit(ConsumerGroupTargetAssignmentMetadataKey(group.group_id), ConsumerGroupTargetAssignmentMetadataValue(epoch))

    def _write_member_metadata(self, group: ConsumerGroup, m: ConsumerMember) -> None:
        self._emit(
            ConsumerGroupMemberMetadataKey(group.group_id, m.member_id),
            ConsumerGroupMemberMetadataValue(
                client_id=m.client_id, client_host=m.client_host, classic_member_metadata=m.classic, **_subscription(m),
            ),
        )

    def _write_group_epoch(self, group: ConsumerGroup, epoch: int, metadata_hash: int) -> None:
        self._emit(ConsumerGroupMetadataKey(group.group_id), ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash))

    def _write_current(self, group: ConsumerGroup, member_id: str, epoch: int, previous: int, state: int, assigned: Assignment, pending: Assignment,
                       held: dict | None = None) -> None:
        """The member's current assignment record; partitions it holds now (``held``: by default the
        assignment epochs of the member of that id) keep their assignment epochs (KIP-1251)."""
        if held is None:
            member = group.members.get(member_id)
            held = member.assignment_epochs if member is not None else {}
        epochs = assignment_epochs(epoch, assigned, pending, held)
        self._emit(
            ConsumerGroupCurrentMemberAssignmentKey(group.group_id, member_id),
            ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=epoch,
                previous_member_epoch=previous,
                state=state,
                assigned_partitions=to_topic_partitions(assigned, epochs),
                partitions_pending_revocation=to_topic_partitions(pending, epochs),
            ),
        )

    def _write_target(self, group: ConsumerGroup, member_id: str, assignment: Assignment) -> None:
        self._emit(ConsumerGroupTargetAssignmentMemberKey(group.group_id, member_id), ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(assignment)))

    def _remove_member_records(self, group: ConsumerGroup, member_id: str) -> None:
        gid = group.group_id
        self._emit(ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), None)
        self._emit(ConsumerGroupTargetAssignmentMemberKey(gid, member_id), None)
        self._emit(ConsumerGroupMemberMetadataKey(gid, member_id), None)

    def delete_group_records(self, group: ConsumerGroup) -> None:
        """Tombstones for a whole (empty) consumer group, in Kafka's order."""
        gid = group.group_id
        for member_id in list(group.members):
            self._remove_member_records(group, member_id)
        self._emit(ConsumerGroupTargetAssignmentMetadataKey(gid), None)
        for regex in list(group.regexes):
            self._emit(ConsumerGroupRegularExpressionKey(gid, regex), None)
        self._emit(ConsumerGroupMetadataKey(gid), None)

    # ================================================================ heartbeat
    def heartbeat(self, p: HeartbeatParams) -> Result:
        """A failure raises CoordinatorError: the shard rolls back whatever the heartbeat wrote."""
        if p.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return Result(response=self._leave(p))
        return Result(response=self._heartbeat(p))

    def _get_or_create_group(self, p: HeartbeatParams) -> ConsumerGroup:
        group = self.groups.get(p.group_id)
        if isinstance(group, ConsumerGroup):
            return group
        if group is None:
            if p.member_epoch != 0:
                raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {p.group_id} not found.")
            group = self._new_group(p.group_id)
            return group
        if isinstance(group, ClassicGroup) and group.state == CLASSIC_EMPTY and not group.members:
            if p.member_epoch != 0:
                raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {p.group_id} not found.")
            # offline conversion: the empty classic group goes, its offsets stay
            self.shard.emit(GroupMetadataKey(p.group_id), None, apply=False)
            self.shard.event("group converted", p.group_id, to="consumer", mode="offline")
            return self._new_group(p.group_id)
        if isinstance(group, ClassicGroup) and p.member_epoch == 0:
            return self.shard.migration.upgrade(group, p)
        raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {p.group_id} is not a consumer group.")

    def _new_group(self, group_id: str) -> ConsumerGroup:
        """An empty consumer group at INITIAL_GROUP_EPOCH (see ConsumerGroup)."""
        group = ConsumerGroup(group_id, state_timestamp=self.now())
        self.groups[group_id] = group
        return group

    def _heartbeat(self, p: HeartbeatParams) -> dict:
        group = self._get_or_create_group(p)
        known = p.member_id in group.members or (p.instance_id is not None and p.instance_id in group.static_members)
        if not known and len(group.members) >= self.config.group_consumer_max_size:
            raise CoordinatorError(ErrorCode.group_max_size_reached, f"The consumer group has reached its maximum capacity of {self.config.group_consumer_max_size} members.")
        member, is_new, replaced = self._get_or_create_member(group, p)
        before_epoch, before_state = member.member_epoch, member.state
        old_assigned = member.assigned
        self._update_and_reconcile(group, member, p, is_new=is_new, replaced=replaced)
        self.schedule_session(group, member)

        # 7. answer
        full = p.rebalance_timeout_ms != -1 and (p.subscribed_topic_names is not None or p.subscribed_topic_regex is not None) and p.owned is not None
        response = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "heartbeat_interval": self.heartbeat_interval(group, member),
            "assignment": None,
        }
        changed = member.assigned != old_assigned
        resend = self._resend_assignment(group.group_id, member, p, changed)  # first: it notes a changed assignment
        if p.member_epoch == 0 or full or changed or resend:
            response["assignment"] = {"topic_partitions": [{"topic_id": tid, "partitions": sorted(parts)} for tid, parts in member.assigned.items() if parts]}
        if changed or (member.member_epoch != before_epoch and not (before_state == STABLE == member.state and before_epoch > 0)):
            self._note_member(group, member, old_assigned)
        return response

    def _resend_assignment(self, group_id: str, member: ConsumerMember, p: HeartbeatParams, changed: bool) -> bool:
        """With the pending interval on, whether this answer repeats an assignment the member may not have.

        librdkafka gives a ConsumerGroupHeartbeat request no longer than the heartbeat interval,
        then drops the connection, and after a timeout it does not send a full request (the
        protocol's way of asking for the assignment again). On the short pending interval a slow
        answer is therefore a lost answer, and if it carried a revocation the member would keep its
        partitions until the rebalance timeout fenced it. So, while the lever is on, every answer
        repeats the assignment until the member confirms it (a request whose owned partitions are
        exactly its assignment: librdkafka's acknowledgement, the Java client's report after it
        reconciles) or for one session timeout at most. Clients ignore an assignment equal to the
        one they already have. With the lever off this never happens, as on Kafka."""
        config = self.config
        if config.group_consumer_pending_heartbeat_interval_ms >= config.consumer_heartbeat_interval_ms(group_id):
            return False
        now = self.now()
        if changed:
            member.unconfirmed_since_ms = now
            return False  # the answer carries it anyway
        since = member.unconfirmed_since_ms
        if since is None:
            return False
        if (p.owned is not None and _same_assignment(p.owned, member.assigned)) or now - since > config.consumer_session_timeout_ms(group_id):
            member.unconfirmed_since_ms = None
            return False
        return True

    def heartbeat_interval(self, group: ConsumerGroup, member: ConsumerMember) -> int:
        """The interval to hand ``member``: the configured one, or, while it waits for partitions or must
        revoke some, the pending interval, so that a released partition reaches its new owner without
        waiting a whole interval.

        The members that must revoke come first: together they heartbeat at most
        ``PENDING_HEARTBEATS_PER_S`` times a second. A member waiting for partitions comes back just
        after them (one pending interval later), when what it waits for is likely released; with
        nobody revoking (its partitions' owners have not yet heard of the new target), the waiting
        members share that budget instead. A big group rebalancing at once thus stays near the plain
        interval, and a whole group's newcomers waiting on a few owners do not.

        The interval is also the client's deadline for the next answer (librdkafka times a
        ConsumerGroupHeartbeat out after it, and then closes the connection with every request
        on it). So once the event loop keeps stalling (3 stalls of 100 ms or more in 30 s), the
        pending interval is never shorter than ``STALL_FACTOR`` times the longest of them: a
        broker starved of CPU hands out the plain interval, as Kafka always does, rather than
        deadlines it cannot keep."""
        plain = self.config.consumer_heartbeat_interval_ms(group.group_id)
        short = self.config.group_consumer_pending_heartbeat_interval_ms
        if short >= plain or (member.state == STABLE and group.group_epoch <= group.assignment_epoch):
            return plain  # the lever off, or a reconciled member: the common heartbeat stops here
        short = max(short, STALL_FACTOR * self.shard.recent_stall_ms())
        if short >= plain:
            return plain
        if group.group_epoch > group.assignment_epoch:
            # the target waits for the assignment interval: come back when it is due, or, holding nothing
            # (so waiting for what others must first revoke), one pending interval after those others
            wait = self._assignment_wait(group) + (0 if member.assigned else short)
            return min(plain, max(short, wait))
        if member.state == UNRELEASED_PARTITIONS and group.revoking:
            return min(plain, max(short, group.revoking * 1000 // PENDING_HEARTBEATS_PER_S) + short)
        sharing = group.revoking if member.state == UNREVOKED_PARTITIONS else group.waiting
        return min(plain, max(short, sharing * 1000 // PENDING_HEARTBEATS_PER_S))

    def _update_and_reconcile(self, group: ConsumerGroup, member: ConsumerMember, p: HeartbeatParams, *, is_new: bool, replaced: bool, classic=None) -> None:
        """Steps 4 to 6 of a heartbeat: member fields, group epoch, target, reconciliation."""
        # 4. member fields from the non-null request fields; a plain heartbeat (the common case) can change none of them
        plain = not (is_new or replaced or classic is not None or not member.has_metadata or p.client_id != member.client_id or p.client_host != member.client_host
                     or p.instance_id is not None or p.rack_id is not None or p.rebalance_timeout_ms != -1 or p.server_assignor is not None
                     or p.subscribed_topic_names is not None or p.subscribed_topic_regex is not None)
        changed_subscription = False if plain else self._update_member(group, member, p, is_new=is_new, replaced=replaced, classic=classic)
        self._update_group(group, member, is_new=is_new, changed_subscription=changed_subscription)
        # 6. reconcile
        self._reconcile(group, member, p.owned)

    def _update_member(self, group: ConsumerGroup, member: ConsumerMember, p: HeartbeatParams, *, is_new: bool, replaced: bool, classic) -> bool:
        """Step 4: the member's fields from the request's non-null ones, written if they changed; True if its subscription did."""
        # compared with what the member had (nothing, for a new one), as Kafka's hasMemberSubscriptionChanged
        # does: a new member that subscribes to nothing does not move the group epoch
        changed_subscription = False
        updated = dict(
            instance_id=p.instance_id if p.instance_id is not None else member.instance_id,
            rack_id=p.rack_id if p.rack_id is not None else member.rack_id,
            client_id=p.client_id,
            client_host=p.client_host,
            rebalance_timeout_ms=p.rebalance_timeout_ms if p.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            server_assignor=p.server_assignor if p.server_assignor is not None else member.server_assignor,
        )
        if p.subscribed_topic_names is not None and list(p.subscribed_topic_names) != member.subscribed_topic_names:
            updated["subscribed_topic_names"] = list(p.subscribed_topic_names)
            changed_subscription = True
        if p.subscribed_topic_regex is not None and (p.subscribed_topic_regex or None) != member.subscribed_topic_regex:
            updated["subscribed_topic_regex"] = p.subscribed_topic_regex or None
            changed_subscription = True
        if classic is not None and classic != member.classic:
            updated["classic"] = classic
        if is_new or replaced or any(getattr(member, k) != v for k, v in updated.items()) or not member.has_metadata:
            for k, v in updated.items():
                setattr(member, k, v)
            self._write_member_metadata(group, member)
        return changed_subscription

    def _update_group(self, group: ConsumerGroup, member: ConsumerMember, *, is_new: bool, changed_subscription: bool) -> None:
        """Step 5: regexes and topic metadata, the group epoch, the target assignment."""
        regex_changed = self._refresh_regexes(group)
        metadata_hash = self._metadata_hash(group)
        epoch = group.group_epoch
        if changed_subscription or regex_changed or metadata_hash != group.metadata_hash:
            epoch = group.group_epoch + 1
            self._write_group_epoch(group, epoch, metadata_hash)
            self.shard.event(
                "consumer group epoch bumped",
                group.group_id,
                epoch=epoch,
                reason="member joined" if is_new else ("subscription changed" if changed_subscription else ("regex resolution changed" if regex_changed else "topic metadata changed")),
                member=member.member_id,
            )

        # 5. target assignment: at most one per group.consumer.assignment.interval.ms (Kafka 4.4); a change
        # inside the interval waits for the first heartbeat after it, or for the timer armed here
        if group.group_epoch > group.assignment_epoch:
            wait = self._assignment_wait(group)
            if wait <= 0:
                self._update_target(group)
            else:
                gid = group.group_id
                self.timers.schedule(assignment_key(gid), wait, lambda: self._assign_due(gid))


    def join_classic_member(self, group: ConsumerGroup, p: HeartbeatParams, classic, session_timeout_ms: int) -> ConsumerMember:
        """A classic JoinGroup inside a consumer group (see migration.py)."""
        member = group.members.get(p.member_id)
        is_new = replaced = False
        if member is None:
            existing_id = group.static_members.get(p.instance_id) if p.instance_id is not None else None
            if existing_id is not None:
                old = group.members[existing_id]
                if old.classic is None and old.member_epoch != STATIC_LEAVE_EPOCH:
                    raise CoordinatorError(ErrorCode.unreleased_instance_id)
                member, replaced = self._replace_static(group, old, p.member_id), True
            else:
                member = self._add_member(group, ConsumerMember(p.member_id, instance_id=p.instance_id, member_epoch=0, previous_member_epoch=-1))
                is_new = True
        self._update_and_reconcile(group, member, p, is_new=is_new, replaced=replaced, classic=classic)
        self.schedule_session(group, member, session_timeout_ms)
        gid, mid = group.group_id, member.member_id
        self.timers.schedule(_join_key(gid, mid), max(member.rebalance_timeout_ms, 0), lambda: self._expire(gid, mid, "did not send SyncGroup within the rebalance timeout", key=_join_key))
        return member

    def cancel_join_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self.timers.cancel(_join_key(group.group_id, member.member_id))

    def cancel_member_timers(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        for key in (_session_key, rebalance_key, _join_key):
            self.timers.cancel(key(group.group_id, member.member_id))

    def _get_or_create_member(self, group: ConsumerGroup, p: HeartbeatParams) -> tuple[ConsumerMember, bool, bool]:
        """(member, is_new, replaced_static)."""
        if p.instance_id is None:
            member = group.members.get(p.member_id)
            if member is None:
                if p.member_epoch != 0:
                    raise CoordinatorError(ErrorCode.unknown_member_id, f"Member {p.member_id} is not a member of group {group.group_id}.")
                member_id = p.member_id or new_member_id()
                member = ConsumerMember(member_id, member_epoch=0, previous_member_epoch=-1)
                return self._add_member(group, member), True, False
            self._check_epoch(member, p)
            return member, False, False
        existing_id = group.static_members.get(p.instance_id)
        if p.member_epoch == 0:
            if existing_id is None:
                member_id = p.member_id or new_member_id()
                member = ConsumerMember(member_id, instance_id=p.instance_id, member_epoch=0, previous_member_epoch=-1)
                return self._add_member(group, member), True, False
            old = group.members[existing_id]
            if old.member_epoch != STATIC_LEAVE_EPOCH and not old.uses_classic_protocol:
                raise CoordinatorError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {p.member_id} with instance id {p.instance_id} cannot join the group because the instance id is owned by member {existing_id}.",
                )
            return self._replace_static(group, old, p.member_id or new_member_id()), False, True
        if existing_id is None:
            raise CoordinatorError(ErrorCode.unknown_member_id, f"Instance id {p.instance_id} is unknown.")
        if existing_id != p.member_id:
            raise CoordinatorError(ErrorCode.fenced_instance_id, f"Static member {p.member_id} with instance id {p.instance_id} was fenced by member {existing_id}.")
        member = group.members[existing_id]
        self._check_epoch(member, p)
        return member, False, False

    def _add_member(self, group: ConsumerGroup, member: ConsumerMember) -> ConsumerMember:
        group.add_member(member)
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        member.waiting_since_ms = self.now()
        return member

    def _check_epoch(self, member: ConsumerMember, p: HeartbeatParams) -> None:
        received = p.member_epoch
        if received == 0:
            # a member rejoining under its own id after it was fenced (it has dropped its partitions):
            # accepted, as Kafka 4.3+ does (KAFKA-19233); 4.1 refused it until the session ran out
            return
        if received > member.member_epoch:
            raise CoordinatorError(ErrorCode.fenced_member_epoch, f"The consumer group member has a greater epoch ({received}) than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        if received < member.member_epoch:
            if received != member.previous_member_epoch or not _is_subset(p.owned, member.assigned):
                raise CoordinatorError(ErrorCode.fenced_member_epoch, f"The consumer group member has a smaller epoch ({received}) than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")

    def _replace_static(self, group: ConsumerGroup, old: ConsumerMember, new_id: str) -> ConsumerMember:
        """A static member back from a temporary leave (-2) under a new member id."""
        target = group.target.get(old.member_id, {})
        assigned, pending, state, held = dict(old.assigned), dict(old.pending_revocation), old.state, old.assignment_epochs
        self.timers.cancel(_session_key(group.group_id, old.member_id))
        self.timers.cancel(rebalance_key(group.group_id, old.member_id))
        self._remove_member_records(group, old.member_id)
        member = ConsumerMember(new_id, **_subscription(old))
        self._add_member(group, member)
        self._write_member_metadata(group, member)
        self._write_target(group, new_id, target)
        # Kafka copies the member with epoch 0 and previous epoch 0, keeping its state
        self._write_current(group, new_id, 0, 0, state, assigned, pending, held=held)
        self.shard.event("static member replaced", group.group_id, instance_id=old.instance_id, old_member=old.member_id, new_member=new_id)
        return member

    # ================================================================ leave
    def _leave(self, p: HeartbeatParams) -> dict:
        group = self.groups.get(p.group_id)
        if not isinstance(group, ConsumerGroup):
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {p.group_id} not found.")
        if p.instance_id is not None:
            member_id = group.static_members.get(p.instance_id)
            if member_id is None:
                raise CoordinatorError(ErrorCode.unknown_member_id, f"Instance id {p.instance_id} is unknown.")
            if member_id != p.member_id:
                raise CoordinatorError(ErrorCode.fenced_instance_id, f"Static member {p.member_id} with instance id {p.instance_id} was fenced by member {member_id}.")
        else:
            member_id = p.member_id
        member = group.members.get(member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {p.group_id}.")
        if p.member_epoch == STATIC_LEAVE_EPOCH:
            if member.instance_id is None:
                raise CoordinatorError(ErrorCode.invalid_request, "Only static members can leave with epoch -2.")
            # keep the member and its partitions; its session timer decides
            self.timers.cancel(rebalance_key(group.group_id, member_id))
            # Kafka sets the epoch without updateMemberEpoch: the previous epoch is kept
            self._write_current(group, member_id, STATIC_LEAVE_EPOCH, member.previous_member_epoch, member.state, dict(member.assigned), {})
            self.shard.event("static member left temporarily", group.group_id, member=member_id, instance_id=member.instance_id)
            return {"error_code": ErrorCode.none, "error_message": None, "member_id": member_id, "member_epoch": STATIC_LEAVE_EPOCH, "heartbeat_interval": 0, "assignment": None}
        if self.shard.migration.can_downgrade_without(group, member_id):
            self.shard.migration.downgrade(group, member_id)  # instead of fencing, as Kafka does
        else:
            self.fence(group, member, "left the group")
        return {"error_code": ErrorCode.none, "error_message": None, "member_id": member_id, "member_epoch": LEAVE_EPOCH, "heartbeat_interval": 0, "assignment": None}

    def fence(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        """Remove a member and bump the group epoch (leave, session or rebalance timeout)."""
        self.cancel_member_timers(group, member)
        revoked = _count(member.assigned) + _count(member.pending_revocation)
        self._remove_member_records(group, member.member_id)
        self._write_group_epoch(group, group.group_epoch + 1, self._metadata_hash(group))
        if not group.members:
            # the last member gone: Kafka 4.2+ moves the (now empty) target assignment to the new epoch at
            # once, where 4.1 left it at the old one until a member joined
            self.write_target_epoch(group, group.group_epoch)
        late = self.timers.firing_late_ms
        self.shard.event(
            "consumer group member removed", group.group_id, member=member.member_id, reason=reason, epoch=group.group_epoch, partitions_released=revoked,
            **({"timer_late_ms": late} if late else {}),
        )

    # ================================================================ timers
    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember, timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        if timeout_ms is None:
            timeout_ms = member.classic.session_timeout_ms if member.classic is not None else self.config.consumer_session_timeout_ms(gid)
        self.timers.schedule(_session_key(gid, mid), timeout_ms, lambda: self._expire(gid, mid, "session timeout expired"))

    def _expire(self, group_id: str, member_id: str, reason: str, epoch: int | None = None, key=None, until: int | None = None) -> list:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return []
        member = group.members.get(member_id)
        if member is None or (epoch is not None and (member.member_epoch != epoch or member.state != UNREVOKED_PARTITIONS)):
            return []
        key = key or _session_key
        if key is not _session_key:
            limit = max(member.rebalance_timeout_ms, 0)
        elif member.classic is not None:
            limit = member.classic.session_timeout_ms
        else:
            limit = self.config.consumer_session_timeout_ms(group_id)
        if self.shard.defer_expiry(key(group_id, member_id), group_id, (member_id,), limit, until,
                                   lambda until: self._expire(group_id, member_id, reason, epoch, key, until), session=key is _session_key):
            return []  # a heartbeat of it has arrived and is handled next
        if self.shard.migration.can_downgrade_without(group, member_id):
            self.shard.migration.downgrade(group, member_id)  # instead of fencing, as Kafka does
            return []
        self.fence(group, member, reason)
        return []

    # ================================================================ metadata, regexes
    def _refresh_regexes(self, group: ConsumerGroup) -> bool:
        meta = self.shard.metadata
        if not group.regex_users and not group.regexes:
            group.checked_metadata_version = meta.version
            return False
        used = set(group.regex_users)
        changed = False
        for regex in list(group.regexes):
            if regex not in used:
                self._emit(ConsumerGroupRegularExpressionKey(group.group_id, regex), None)
        stale = group.checked_metadata_version != meta.version
        for regex in used:
            if regex in group.regexes and not stale:
                continue
            topics = frozenset(meta.match(regex))
            previous = group.regexes.get(regex)
            if previous is None or previous[0] != topics:
                version = meta.version
                self._emit(ConsumerGroupRegularExpressionKey(group.group_id, regex), ConsumerGroupRegularExpressionValue(sorted(topics), version, self.now()))
                changed = True
        group.checked_metadata_version = meta.version
        return changed

    def _metadata_hash(self, group: ConsumerGroup) -> int:
        meta = self.shard.metadata
        cached_sub, cached_meta, cached = group.hash_cache
        if cached_sub == group.subscription_version and cached_meta == meta.version:
            return cached if group.members else 0
        import hashlib  # here, not at the top: a start need not load OpenSSL's hashes

        h = hashlib.blake2b(digest_size=8)
        for name in sorted(group.subscribed_topic_names()):
            info = meta.by_name.get(name)
            h.update(f"{name}\0{info[0] if info else ''}\0{info[1] if info else 0}\n".encode())
        value = int.from_bytes(h.digest(), "big", signed=True) if group.subscribed_topic_names() else 0
        group.hash_cache = (group.subscription_version, meta.version, value)
        return value if group.members else 0

    # ================================================================ loading
    def on_loaded(self, group: ConsumerGroup) -> None:
        """After a load: session timers for every member, rebalance timers for members mid-revocation."""
        for member in group.members.values():
            self.schedule_session(group, member)
            if member.classic is None and member.state == UNREVOKED_PARTITIONS:
                self.schedule_rebalance(group, member)


def _count(asg: Assignment) -> int:
    return sum(len(v) for v in asg.values())


def _same_assignment(owned: Assignment, assigned: Assignment) -> bool:
    """``owned`` (as a request reports it, maybe with empty topics) names exactly ``assigned``."""
    return {t: p for t, p in owned.items() if p} == {t: p for t, p in assigned.items() if p}


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(parts <= assigned.get(tid, frozenset()) for tid, parts in owned.items())


def _join_key(group_id: str, member_id: str) -> str:
    return f"consumer-join:{group_id}:{member_id}"


ConsumerGroups.write_member_metadata = ConsumerGroups._write_member_metadata
ConsumerGroups.write_group_epoch = ConsumerGroups._write_group_epoch
ConsumerGroups.write_target = ConsumerGroups._write_target
ConsumerGroups.write_current = ConsumerGroups._write_current
ConsumerGroups.add_member = ConsumerGroups._add_member
ConsumerGroups.metadata_hash = ConsumerGroups._metadata_hash
