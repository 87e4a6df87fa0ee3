"""KIP-932 ShareGroupHeartbeat on a shard (Kafka 4.4's GroupMetadataManager.shareGroupHeartbeat).

A share member takes its target assignment whole (no revocation handshake:
several members may hold one partition). One heartbeat:

1. finds or creates the group (epoch 0 creates it; an id held by a consumer
   or classic group is GROUP_ID_NOT_FOUND "Group g is not a share group.");
2. checks ``group.share.max.size`` and the member epoch (0 always joins; a
   larger one, or a smaller one other than the previous, is FENCED_MEMBER_EPOCH);
3. writes the member's metadata when it changed; bumps the group epoch when
   its subscription changed, when the subscribed topics' metadata changed,
   or when initialized share partitions are not in the target yet;
4. recomputes the target with the ``simple`` assignor (at most once per
   ``group.share.assignment.interval.ms``) over the *initialized* partitions;
5. moves the member to the target epoch and assignment;
6. asks for the share-partition state of newly subscribed partitions to be
   initialized (``ShareGroupStatePartitionMetadata``: see ``share_init.py``).

State changes only through records (``GroupShard.emit`` replays each at once).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.group_records import share as rec

from .assignors import simple
from .common import CoordinatorError, Result, ShardPart
from .share_group import MEMBER_STABLE, Assignment, ShareGroup, ShareMember, to_share_partitions
from .share_init import ShareInit

LEAVE_EPOCH = -1


def _session_key(group_id: str, member_id: str) -> str:
    return f"share-session:{group_id}:{member_id}"


@dataclass(slots=True)
class ShareHeartbeatParams:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: list[str] | None  # None: unchanged
    client_id: str
    client_host: str


class ShareGroups(ShardPart):
    def __init__(self, shard) -> None:
        super().__init__(shard)
        self.init = ShareInit(shard)

    # ================================================================ heartbeat
    def heartbeat(self, p: ShareHeartbeatParams) -> Result:
        """Result.response: ``(answer, initialize)``; ``initialize`` is None or ``(group id, group
        epoch, {topic id: [partitions]})`` to hand to the share-state hook. Errors raise
        CoordinatorError (the shard rolls back whatever was written)."""
        if p.member_epoch == LEAVE_EPOCH:
            return Result(response=(self._leave(p), None))
        return Result(response=self._heartbeat(p))

    def _group(self, p: ShareHeartbeatParams) -> ShareGroup:
        group = self.groups.get(p.group_id)
        if group is None:
            if p.member_epoch != 0:
                raise CoordinatorError(ErrorCode.group_id_not_found, f"Share group {p.group_id} not found.")
            group = self.groups[p.group_id] = ShareGroup(p.group_id, state_timestamp=self.now())
            return group
        if not isinstance(group, ShareGroup):
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {p.group_id} is not a share group.")
        return group

    def _member(self, group: ShareGroup, p: ShareHeartbeatParams) -> ShareMember:
        member = group.members.get(p.member_id)
        if member is None:
            if p.member_epoch != 0:
                raise CoordinatorError(ErrorCode.unknown_member_id, f"Member {p.member_id} is not a member of group {group.group_id}.")
            return ShareMember(p.member_id)
        received = p.member_epoch
        if received == 0:
            return member
        if received > member.member_epoch:
            raise CoordinatorError(ErrorCode.fenced_member_epoch, f"The share group member has a greater member epoch ({received}) than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        if received < member.member_epoch and received != member.previous_member_epoch:
            raise CoordinatorError(ErrorCode.fenced_member_epoch, f"The share group member has a smaller member epoch ({received}) than the one known by the group coordinator ({member.member_epoch}), and it does not match the previous member epoch ({member.previous_member_epoch}). The member must abandon all its partitions and rejoin.")
        return member

    def _heartbeat(self, p: ShareHeartbeatParams) -> tuple[dict, tuple | None]:
        group = self._group(p)
        max_size = self.config.group_share_max_size
        if p.member_id not in group.members and len(group.members) >= max_size:
            raise CoordinatorError(ErrorCode.group_max_size_reached, f"The share group has reached its maximum capacity of {max_size} members.")
        member = self._member(group, p)
        is_new = p.member_id not in group.members
        old_assigned = member.assigned

        # 3. member metadata, group epoch
        names = member.subscribed_topic_names if p.subscribed_topic_names is None else tuple(dict.fromkeys(p.subscribed_topic_names))
        rack = member.rack_id if p.rack_id is None else p.rack_id
        subscription_changed = set(names) != set(member.subscribed_topic_names)
        if is_new or subscription_changed or rack != member.rack_id or p.client_id != member.client_id or p.client_host != member.client_host:
            self._emit(rec.ShareGroupMemberMetadataKey(group.group_id, member.member_id),
                       rec.ShareGroupMemberMetadataValue(rack, p.client_id, p.client_host, list(names)))
            member = group.members[member.member_id]
        if is_new:
            self.shard.event("share group member joined", group.group_id, member=member.member_id, topics=len(names))
        bump = subscription_changed
        if group.assignment_epoch >= group.group_epoch:
            bump = bump or self.init.assignment_pending(group)
        meta = self.shard.metadata
        metadata_hash = group.metadata_hash
        if bump or group.checked_metadata_version != meta.version:
            group.checked_metadata_version = meta.version  # not state: a cache of the check below
            metadata_hash = self._metadata_hash(group)
            if metadata_hash != group.metadata_hash:
                bump = True
        if bump:
            self._emit(rec.ShareGroupMetadataKey(group.group_id), rec.ShareGroupMetadataValue(group.group_epoch + 1, metadata_hash))

        # 4. target assignment
        if group.assignment_epoch < group.group_epoch and self._can_assign(group):
            self._update_target(group)

        # 5. reconcile
        target_epoch = group.assignment_epoch
        if subscription_changed or member.member_epoch != target_epoch:
            target = self._filtered(group.target.get(member.member_id, {}), member.subscribed_topic_names)
            epoch, previous = (target_epoch, member.member_epoch) if member.member_epoch != target_epoch else (member.member_epoch, member.previous_member_epoch)
            if (epoch, previous, target) != (member.member_epoch, member.previous_member_epoch, member.assigned):
                self._emit(rec.ShareGroupCurrentMemberAssignmentKey(group.group_id, member.member_id),
                           rec.ShareGroupCurrentMemberAssignmentValue(epoch, previous, MEMBER_STABLE, to_share_partitions(target)))
        self.schedule_session(group, member)

        answer = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "heartbeat_interval": self.config.share_heartbeat_interval_ms(group.group_id),
            "assignment": None,
        }
        if p.member_epoch == 0 or p.subscribed_topic_names is not None or member.assigned != old_assigned:
            answer["assignment"] = {"topic_partitions": [{"topic_id": tp.topic_id, "partitions": tp.partitions} for tp in to_share_partitions(member.assigned)]}
        return answer, self.init.maybe_initialize(group)

    def _filtered(self, target: Assignment, names) -> Assignment:
        """The target's topics the member subscribes to (Kafka's filterAssignedPartitions)."""
        by_name = self.shard.metadata.by_name
        ids = {by_name[n][0] for n in names if n in by_name}
        return {tid: parts for tid, parts in target.items() if tid in ids}

    def _can_assign(self, group: ShareGroup) -> bool:
        """Kafka's canComputeNextTargetAssignment: no assignment yet, no interval, or the interval passed."""
        interval = self.config.share_assignment_interval_ms(group.group_id)
        last = group.assignment_timestamp
        return last == 0 or interval == 0 or self.now() >= last + interval

    def _metadata_hash(self, group: ShareGroup) -> int:
        names = sorted(group.subscribed_topic_names())
        if not names or not group.members:
            return 0
        by_name = self.shard.metadata.by_name
        h = hashlib.blake2b(digest_size=8)
        for name in names:
            info = by_name.get(name)
            h.update(f"{name}\0{info[0] if info else ''}\0{info[1] if info else 0}\n".encode())
        return int.from_bytes(h.digest(), "big", signed=True)

    def _update_target(self, group: ShareGroup) -> None:
        by_name = self.shard.metadata.by_name
        assignable = self.init.assignable(group)
        subscriptions = {mid: frozenset(by_name[n][0] for n in m.subscribed_topic_names if n in by_name) for mid, m in group.members.items()}
        homogeneous = len({frozenset(m.subscribed_topic_names) for m in group.members.values()}) <= 1
        result = simple.assign(subscriptions, assignable, group.target, homogeneous=homogeneous)
        changed = 0
        for mid in group.members:
            new = result.get(mid, {})
            if new != group.target.get(mid):
                changed += 1
                self._emit(rec.ShareGroupTargetAssignmentMemberKey(group.group_id, mid), rec.ShareGroupTargetAssignmentMemberValue(to_share_partitions(new)))
        now = self.now()
        self._emit(rec.ShareGroupTargetAssignmentMetadataKey(group.group_id), rec.ShareGroupTargetAssignmentMetadataValue(group.group_epoch, now))
        self.shard.event("target assignment computed", group.group_id, epoch=group.group_epoch, assignor=simple.NAME, members=len(group.members),
                         members_changed=changed)

    # ================================================================ leave, fencing
    def _leave(self, p: ShareHeartbeatParams) -> dict:
        group = self.groups.get(p.group_id)
        if not isinstance(group, ShareGroup):
            if group is None:
                raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {p.group_id} not found.")
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {p.group_id} is not a share group.")
        member = group.members.get(p.member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.unknown_member_id, f"Member {p.member_id} is not a member of group {group.group_id}.")
        self.fence(group, member, "left the group")
        return {"error_code": ErrorCode.none, "error_message": None, "member_id": p.member_id, "member_epoch": LEAVE_EPOCH,
                "heartbeat_interval": 0, "assignment": None}

    def remove_member_records(self, group: ShareGroup, member_id: str) -> None:
        gid = group.group_id
        self._emit(rec.ShareGroupCurrentMemberAssignmentKey(gid, member_id), None)
        self._emit(rec.ShareGroupTargetAssignmentMemberKey(gid, member_id), None)
        self._emit(rec.ShareGroupMemberMetadataKey(gid, member_id), None)

    def fence(self, group: ShareGroup, member: ShareMember, reason: str) -> None:
        """Remove a member and bump the group epoch (leave, session timeout)."""
        self.timers.cancel(_session_key(group.group_id, member.member_id))
        self.remove_member_records(group, member.member_id)
        self._emit(rec.ShareGroupMetadataKey(group.group_id), rec.ShareGroupMetadataValue(group.group_epoch + 1, self._metadata_hash(group)))
        if not group.members:
            self._emit(rec.ShareGroupTargetAssignmentMetadataKey(group.group_id),
                       rec.ShareGroupTargetAssignmentMetadataValue(group.group_epoch, self.now()))
        self.shard.event("share group member removed", group.group_id, member=member.member_id, reason=reason, epoch=group.group_epoch)

    def schedule_session(self, group: ShareGroup, member: ShareMember) -> None:
        gid, mid = group.group_id, member.member_id
        self.timers.schedule(_session_key(gid, mid), self.config.share_session_timeout_ms(gid), lambda: self._expire(gid, mid))

    def _expire(self, group_id: str, member_id: str, until: int | None = None) -> list:
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            member = group.members.get(member_id)
            if member is not None and not self.shard.defer_expiry(
                _session_key(group_id, member_id), group_id, (member_id,), self.config.share_session_timeout_ms(group_id), until,
                lambda until: self._expire(group_id, member_id, until), session=True,
            ):
                self.fence(group, member, "session timeout expired")
        return []

    def on_loaded(self, group: ShareGroup) -> None:
        """After a load: every member's session starts over (as Kafka does)."""
        for member in group.members.values():
            self.schedule_session(group, member)

    def delete_group_records(self, group: ShareGroup) -> None:
        """Tombstones for a whole (empty) share group, in Kafka's order."""
        gid = group.group_id
        for member_id in list(group.members):
            self.remove_member_records(group, member_id)
        self._emit(rec.ShareGroupTargetAssignmentMetadataKey(gid), None)
        if group.has_state_metadata():
            self._emit(rec.ShareGroupStatePartitionMetadataKey(gid), None)
        self._emit(rec.ShareGroupMetadataKey(gid), None)
