"""Classic and KIP-848 groups living together (section 3.11 of the reference).

- Classic members inside a consumer group: JoinGroup, SyncGroup, Heartbeat
  and LeaveGroup from a classic client are answered from the server-side
  assignment. The client's subscription comes from its consumer-protocol
  metadata; its assignment goes back serialised in the same format.
- Online upgrade: the first KIP-848 member turns a live classic group into a
  consumer group, keeping every member's partitions.
- Online downgrade: when the last KIP-848 member leaves and only classic
  members remain, the group goes back to classic and rebalances.
- Offline conversion (the group is empty) happens where the group is looked
  up, in ``consumer.py`` and ``classic.py``.
"""

from __future__ import annotations

import uuid

from protocol.errors import ErrorCode
from protocol.group_records import ClassicMemberMetadata, ClassicProtocol, GroupMetadataKey

from .classic_group import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE, ClassicGroup, Member
from .common import CoordinatorError, Result
from .consumer import HeartbeatParams, new_member_id
from .consumer_group import UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, ConsumerGroup, ConsumerMember
from protocol.consumer_protocol import encode_assignment, parse_assignment, parse_subscription


def _join_answer(code: ErrorCode, member_id: str = "", generation: int = -1, protocol_name: str | None = None) -> dict:
    return {
        "error_code": code,
        "generation_id": generation,
        "protocol_type": "consumer",
        "protocol_name": protocol_name,
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


class Migration:
    def __init__(self, shard) -> None:
        self.shard = shard

    @property
    def consumer(self):
        return self.shard.consumer

    @property
    def config(self):
        return self.shard.config

    def _policy_allows(self, direction: str) -> bool:
        policy = self.config.group_consumer_migration_policy
        return policy == "bidirectional" or policy == direction

    # ================================================================ classic requests to a consumer group
    def classic_join(self, group: ConsumerGroup, p, fut) -> Result:
        """A classic JoinGroup for a consumer group (interop)."""
        consumer = self.consumer
        first = p.protocols[0][0] if p.protocols else None
        if p.protocol_type != "consumer" or not p.protocols:
            fut.set_result(_join_answer(ErrorCode.inconsistent_group_protocol, p.member_id))
            return Result(response=fut)
        parsed = parse_subscription(p.protocols[0][1])
        if parsed is None:
            fut.set_result(_join_answer(ErrorCode.inconsistent_group_protocol, p.member_id))
            return Result(response=fut)
        _, sub = parsed
        if not p.member_id and p.group_instance_id is None and p.version >= 4:
            fut.set_result(_join_answer(ErrorCode.member_id_required, new_member_id()))
            return Result(response=fut)
        meta = self.shard.metadata
        owned: dict = {}
        for tp in getattr(sub, "owned_partitions", ()):
            info = meta.by_name.get(tp.topic)
            if info is not None and tp.partitions:
                owned[info[0]] = frozenset(tp.partitions)
        member_id = p.member_id or new_member_id()
        member = group.members.get(member_id)
        params = HeartbeatParams(
            group_id=group.group_id,
            member_id=member_id,
            member_epoch=member.member_epoch if member is not None else 0,
            instance_id=p.group_instance_id,
            rack_id=getattr(sub, "rack_id", None) or None,
            rebalance_timeout_ms=p.rebalance_timeout_ms,
            subscribed_topic_names=sorted(sub.topics),
            subscribed_topic_regex=None,
            server_assignor=None,
            owned=owned,
            version=1,
            client_id=p.client_id,
            client_host=p.client_host,
        )
        classic_meta = ClassicMemberMetadata(p.session_timeout_ms, [ClassicProtocol(n, m) for n, m in p.protocols])
        try:
            if member is not None and member.classic is None:
                raise CoordinatorError(ErrorCode.unknown_member_id)
            member = consumer.join_classic_member(group, params, classic_meta, p.session_timeout_ms)
        except CoordinatorError as exc:
            fut.set_result(_join_answer(exc.code, p.member_id))
            return Result(response=fut)
        answer = _join_answer(ErrorCode.none, member.member_id, member.member_epoch, first)

        def on_commit():
            if not fut.done():
                fut.set_result(answer)

        return Result(response=fut, on_commit=on_commit, on_failure=lambda err: fut.done() or fut.set_result(_join_answer(err, p.member_id)))

    def _validate_classic(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int) -> ConsumerMember:
        member = group.members.get(member_id)
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                raise CoordinatorError(ErrorCode.unknown_member_id)
            if known != member_id:
                raise CoordinatorError(ErrorCode.fenced_instance_id)
        if member is None or member.classic is None:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if generation != member.member_epoch:
            raise CoordinatorError(ErrorCode.illegal_generation)
        return member

    def classic_sync(self, group: ConsumerGroup, member_id: str, instance_id, generation: int, protocol_type, protocol_name) -> dict:
        try:
            member = self._validate_classic(group, member_id, instance_id, generation)
        except CoordinatorError as exc:
            return {"error_code": exc.code, "assignment": b""}
        names = [pr.name for pr in member.classic.supported_protocols]
        if (protocol_type is not None and protocol_type != "consumer") or (protocol_name is not None and protocol_name not in names):
            return {"error_code": ErrorCode.inconsistent_group_protocol, "assignment": b""}
        if group.group_epoch > member.member_epoch and member.state != UNREVOKED_PARTITIONS:
            return {"error_code": ErrorCode.rebalance_in_progress, "assignment": b""}
        self.consumer.cancel_join_timeout(group, member)
        self.consumer.schedule_session(group, member, member.classic.session_timeout_ms)
        meta = self.shard.metadata
        version = 0
        if member.classic.supported_protocols:
            parsed = parse_subscription(member.classic.supported_protocols[0].metadata)
            version = parsed[0] if parsed else 0
        partitions = {meta.by_id[tid]: sorted(parts) for tid, parts in member.assigned.items() if tid in meta.by_id}
        return {
            "error_code": ErrorCode.none,
            "assignment": encode_assignment(partitions, version),
            "protocol_type": "consumer",
            "protocol_name": protocol_name or (names[0] if names else None),
        }

    def classic_heartbeat(self, group: ConsumerGroup, member_id: str, instance_id, generation: int) -> ErrorCode:
        try:
            member = self._validate_classic(group, member_id, instance_id, generation)
        except CoordinatorError as exc:
            return exc.code
        self.consumer.schedule_session(group, member, member.classic.session_timeout_ms)
        if member.state == UNREVOKED_PARTITIONS or group.group_epoch > member.member_epoch:
            return ErrorCode.rebalance_in_progress
        if member.state == UNRELEASED_PARTITIONS:
            target = group.target.get(member.member_id, {})
            for tid, parts in target.items():
                for p in parts - member.assigned.get(tid, frozenset()):
                    if group.current_partition_epoch(tid, p) == -1:
                        return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def classic_leave(self, group: ConsumerGroup, members: list) -> tuple[ErrorCode, list[dict], list]:
        consumer = self.consumer
        results = []
        for member_id, instance_id, reason in members:
            entry = {"member_id": member_id, "group_instance_id": instance_id}
            target_id = member_id
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    results.append({**entry, "error_code": ErrorCode.unknown_member_id})
                    continue
                if member_id and known != member_id:
                    results.append({**entry, "error_code": ErrorCode.fenced_instance_id})
                    continue
                target_id = known
            member = group.members.get(target_id)
            if member is None:
                results.append({**entry, "error_code": ErrorCode.unknown_member_id})
                continue
            consumer.fence(group, member, f"left the group; client reason: {reason or 'not provided'}")
            results.append({**entry, "error_code": ErrorCode.none})
        self.maybe_downgrade(group)
        return ErrorCode.none, results, []

    def drop_empty(self, group: ConsumerGroup) -> None:
        """Offline conversion: an empty consumer group goes before a classic JoinGroup."""
        consumer = self.consumer
        consumer.delete_group_records(group)
        self.shard.groups.pop(group.group_id, None)
        self.shard.event("group converted", group.group_id, to="classic", mode="offline")

    # ================================================================ upgrade
    def upgrade(self, classic: ClassicGroup, p: HeartbeatParams) -> ConsumerGroup:
        """Online upgrade of a live classic group by its first KIP-848 member."""
        gid = classic.group_id
        why = None
        if not self._policy_allows("upgrade"):
            why = "the migration policy does not allow upgrades"
        elif classic.protocol_type != "consumer":
            why = f"its protocol type is {classic.protocol_type!r}, not 'consumer'"
        elif len(classic.members) > self.config.group_consumer_max_size:
            why = "it is larger than group.consumer.max.size"
        elif classic.state not in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE):
            why = f"it is {classic.state}"
        else:
            for m in classic.members.values():
                asg = parse_assignment(m.assignment) if m.assignment else None
                if m.assignment and (asg is None or asg.user_data):
                    why = f"member {m.member_id}'s assignment has custom user data or cannot be parsed"
                    break
        if why is not None:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Cannot upgrade classic group {gid} to consumer group because {why}.")
        if len(classic.members) >= self.config.group_consumer_max_size:
            # Kafka converts a group of exactly the maximum size, then rejects the joiner, which
            # discards the conversion: answer as it does, before touching the classic group
            raise CoordinatorError(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {self.config.group_consumer_max_size} members.",
            )
        meta = self.shard.metadata
        consumer = self.consumer
        # parked classic requests must rejoin
        for m in classic.members.values():
            for fut, answer in ((m.join_future, _join_answer(ErrorCode.rebalance_in_progress, m.member_id)), (m.sync_future, {"error_code": ErrorCode.rebalance_in_progress, "assignment": b""})):
                if fut is not None and not fut.done():
                    fut.set_result(answer)
            self.shard.timers.cancel(f"heartbeat:{gid}:{m.member_id}")
        for key in (f"join:{gid}", f"sync:{gid}"):
            self.shard.timers.cancel(key)
        generation = classic.generation
        self.shard.emit(GroupMetadataKey(gid), None, apply=False)
        group = ConsumerGroup(gid, state_timestamp=self.shard.now_ms())
        self.shard.groups[gid] = group
        members = []
        for m in classic.members.values():
            sub = parse_subscription(m.metadata(classic.protocol_name))
            topics = sorted(sub[1].topics) if sub else []
            asg = parse_assignment(m.assignment) if m.assignment else None
            assigned = {}
            for tp in (asg.assigned_partitions if asg else ()):
                info = meta.by_name.get(tp.topic)
                if info is not None and tp.partitions:
                    assigned[info[0]] = frozenset(tp.partitions)
            cm = ConsumerMember(
                m.member_id,
                instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=topics,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic=ClassicMemberMetadata(m.session_timeout_ms, [ClassicProtocol(n, b) for n, b in m.protocols]),
            )
            members.append((cm, assigned))
        metadata_hash = 0
        consumer.write_group_epoch(group, generation, metadata_hash)
        for cm, assigned in members:
            consumer.add_member(group, cm)
            consumer.write_member_metadata(group, cm)
            consumer.write_target(group, cm.member_id, assigned)
        consumer.write_target_epoch(group, generation)
        for cm, assigned in members:
            consumer.write_current(group, cm.member_id, generation, -1, 0, assigned, {})
            consumer.schedule_session(group, cm, cm.classic.session_timeout_ms)
        group.metadata_hash = consumer.metadata_hash(group)
        self.shard.event("group converted", gid, to="consumer", mode="online", members=len(members), epoch=generation)
        return group

    # ================================================================ downgrade
    def can_downgrade_without(self, group: ConsumerGroup, leaving_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember: would removing this member downgrade the group?"""
        others = [m for mid, m in group.members.items() if mid != leaving_id]
        if not others or any(m.classic is None for m in others):
            return False
        return self._policy_allows("downgrade") and len(others) <= self.config.group_max_size

    def maybe_downgrade(self, group: ConsumerGroup) -> None:
        """After a member left: back to classic if only classic members remain."""
        if group.members and self.can_downgrade_without(group, ""):
            self.downgrade(group)

    def downgrade(self, group: ConsumerGroup, leaving_id: str | None = None) -> None:
        """Kafka's convertToClassicGroup for a leaving or fenced member (which is not fenced first):
        generation = the group epoch, each remaining member's assignment = its target assignment,
        consumer-group tombstones then the classic group record, then a classic rebalance."""
        consumer = self.consumer
        meta = self.shard.metadata
        gid = group.group_id
        if leaving_id is not None and leaving_id in group.members:
            consumer.cancel_member_timers(group, group.members[leaving_id])
        classic = ClassicGroup(gid, state=STABLE, generation=group.group_epoch, protocol_type="consumer", state_timestamp=self.shard.now_ms())
        for cm in group.members.values():
            if cm.member_id == leaving_id:
                continue
            protocols = [(pr.name, pr.metadata) for pr in cm.classic.supported_protocols]
            target = group.target.get(cm.member_id, {})
            partitions = {meta.by_id[tid]: sorted(parts) for tid, parts in target.items() if tid in meta.by_id}
            version = parse_subscription(protocols[0][1])[0] if protocols and parse_subscription(protocols[0][1]) else 0
            member = Member(
                member_id=cm.member_id, group_instance_id=cm.instance_id, client_id=cm.client_id, client_host=cm.client_host,
                rebalance_timeout_ms=cm.rebalance_timeout_ms, session_timeout_ms=cm.classic.session_timeout_ms,
                protocol_type="consumer",
                protocols=protocols,
                assignment=encode_assignment(partitions, version),
            )
            classic.add(member)
            consumer.cancel_member_timers(group, cm)
        classic.protocol_name = classic.select_protocol()
        classic.subscribed = classic.subscribed_topics()
        consumer.delete_group_records(group)
        self.shard.groups[gid] = classic
        self.shard.emit(*classic.record(), apply=False)
        self.shard.event("group converted", gid, to="classic", mode="online", members=len(classic.members), generation=classic.generation)
        for m in classic.members.values():
            self.shard.classic._schedule_heartbeat(classic, m)
        self.shard.write(self.shard.classic.prepare_rebalance(classic, "Group converted back to classic: the last consumer-protocol member left"))


__all__ = ["Migration", "uuid"]
