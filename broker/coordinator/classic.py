"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Follows Kafka 4.1's GroupMetadataManager (see
shared/reference/group-coordinator.md, section 1). Every method runs on the
shard's event loop, mutates the in-memory groups directly and returns a
``Result`` whose records persist what must survive a restart. Responses to
parked JoinGroup and SyncGroup requests are futures resolved when the join or
sync phase completes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from protocol.errors import ErrorCode

from .classic_group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    Member,
    member_from,
)
from .common import Result
from protocol.consumer_protocol import assigned_partitions


@dataclass(slots=True)
class JoinParams:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    reason: str | None
    version: int
    client_id: str
    client_host: str


def _hb_key(group_id: str, member_id: str) -> str:
    return f"heartbeat:{group_id}:{member_id}"


def _join_key(group_id: str) -> str:
    return f"join:{group_id}"


def _sync_key(group_id: str) -> str:
    return f"sync:{group_id}"


def join_error(code: ErrorCode, member_id: str = "") -> dict:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


def _resolve(fut, value) -> None:
    if fut is not None and not fut.done():
        fut.set_result(value)


class ClassicGroups:
    """Classic-protocol operations over a shard's groups."""

    def __init__(self, shard) -> None:
        self.shard = shard
        self.config = shard.config
        self.timers = shard.timers

    @property
    def groups(self) -> dict:
        return self.shard.groups

    def now(self) -> int:
        return self.shard.now_ms()

    # ================================================================ events
    def _event(self, group: ClassicGroup, what: str, **fields) -> None:
        self.shard.event(what, group.group_id, generation=group.generation, state=group.state, **fields)

    def _note(self, group: ClassicGroup, kind: str, member_id: str, reason: str | None) -> None:
        if group.rebalance is not None:
            group.rebalance[kind].append({"member": member_id, "reason": reason or "not provided"})

    # ================================================================ JoinGroup
    def join(self, p: JoinParams) -> Result:
        fut = self.shard.new_future()
        records: list = []
        group = self.groups.get(p.group_id)
        if group is None:
            if p.member_id:
                _resolve(fut, join_error(ErrorCode.unknown_member_id, p.member_id))
                return Result(response=fut)
            group = ClassicGroup(p.group_id, state_timestamp=self.now())
            self.groups[p.group_id] = group
            records.append(group.record())
            self._event(group, "group created")
        elif not isinstance(group, ClassicGroup):
            _resolve(fut, join_error(ErrorCode.inconsistent_group_protocol, p.member_id))
            return Result(response=fut)
        if not self._accept_joining_member(group, p.member_id):
            # like Kafka's group.remove(memberId): no rebalance or join completion is triggered
            if group.remove(p.member_id) is not None:
                self._event(group, "member removed: group at its maximum size", member=p.member_id)
            group.pending_members.discard(p.member_id)
            _resolve(fut, join_error(ErrorCode.group_max_size_reached, ""))
            return Result(records=records, response=fut)
        if p.member_id == "":
            out = self._join_unknown_member(group, p, fut)
        else:
            out = self._join_known_member(group, p, fut)
        result = Result(records=records, response=fut)
        for item in out:
            if isinstance(item, Result):  # static replacement answers once its record is durable
                result.records += item.records
                result.on_commit, result.on_failure = item.on_commit, item.on_failure
            else:
                result.records.append(item)
        return result

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.state == PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < limit
        return member_id in group.members or len(group.members) < limit

    def _join_unknown_member(self, group: ClassicGroup, p: JoinParams, fut) -> list:
        if group.state == DEAD:
            _resolve(fut, join_error(ErrorCode.coordinator_not_available))
            return []
        if not group.supports_protocols(p.protocol_type, [n for n, _ in p.protocols]):
            _resolve(fut, join_error(ErrorCode.inconsistent_group_protocol))
            return []
        new_id = f"{p.group_instance_id or p.client_id}-{uuid.uuid4()}"
        if p.group_instance_id is not None:
            if p.group_instance_id in group.static_members:
                return self._replace_static_member(group, p, new_id, fut)
            return self._add_member_and_rebalance(group, p, new_id, fut)
        if p.version >= 4:
            # KIP-394: hand out the id and wait for the member to come back with it
            group.pending_members.add(new_id)
            self.timers.schedule(_hb_key(group.group_id, new_id), p.session_timeout_ms, lambda: self._expire_heartbeat(group.group_id, new_id))
            _resolve(fut, join_error(ErrorCode.member_id_required, new_id))
            return []
        return self._add_member_and_rebalance(group, p, new_id, fut)

    def _join_known_member(self, group: ClassicGroup, p: JoinParams, fut) -> list:
        if group.state == DEAD:
            _resolve(fut, join_error(ErrorCode.coordinator_not_available, p.member_id))
            return []
        if not group.supports_protocols(p.protocol_type, [n for n, _ in p.protocols]):
            _resolve(fut, join_error(ErrorCode.inconsistent_group_protocol, p.member_id))
            return []
        if p.member_id in group.pending_members:
            group.pending_members.discard(p.member_id)
            self.timers.cancel(_hb_key(group.group_id, p.member_id))
            return self._add_member_and_rebalance(group, p, p.member_id, fut)
        error = self.validate_member(group, p.member_id, p.group_instance_id)
        if error is not None:
            _resolve(fut, join_error(error, p.member_id))
            return []
        member = group.members[p.member_id]
        if group.state == PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, p, fut, None)  # no new rebalance: no reason
        if group.state == COMPLETING_REBALANCE:
            if member.protocols == p.protocols:
                _resolve(fut, self._join_response(group, member, with_members=member.member_id == group.leader_id))
                return []
            return self._update_member_and_rebalance(group, member, p, fut, f"Updating metadata for member {p.member_id} during {group.state}")
        if group.state == STABLE:
            if member.member_id == group.leader_id or member.protocols != p.protocols:
                why = "leader rejoining" if member.member_id == group.leader_id else "changed metadata"
                return self._update_member_and_rebalance(group, member, p, fut, f"Member {p.member_id} {why} while Stable")
            _resolve(fut, self._join_response(group, member, with_members=False))
            return []
        _resolve(fut, join_error(ErrorCode.unknown_member_id, p.member_id))  # Empty
        return []

    def validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode | None:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return ErrorCode.unknown_member_id
            if known != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        return None

    def _add_member_and_rebalance(self, group: ClassicGroup, p: JoinParams, member_id: str, fut) -> list:
        member = member_from(member_id, p, protocols=list(p.protocols), join_version=p.version, is_new=True)
        group.add(member)
        member.join_future = fut
        # the initial rebalance (entered from Empty, at any generation) may be extended
        if group.state == PREPARING_REBALANCE and group.previous_state == EMPTY:
            group.new_member_added = True
        # a parked joiner cannot heartbeat: new members get the 5-minute join timeout
        self.timers.schedule(_hb_key(group.group_id, member_id), self.config.new_member_join_timeout_ms, lambda: self._expire_heartbeat(group.group_id, member_id))
        records = self._maybe_prepare_rebalance_or_complete_join(group, f"Adding new member {member_id} with group instance id {p.group_instance_id}; client reason: {p.reason or 'not provided'}")
        if group.rebalance is not None:
            self._note(group, "joined", member_id, p.reason)
        return records

    def _update_member_and_rebalance(self, group: ClassicGroup, member: Member, p: JoinParams, fut, reason: str | None) -> list:
        """``reason``: why a rebalance starts, if the group's state makes this join start one."""
        group.update_protocols(member, list(p.protocols))
        member.rebalance_timeout_ms = p.rebalance_timeout_ms
        member.session_timeout_ms = p.session_timeout_ms
        if member.join_future is not None and member.join_future is not fut:
            _resolve(member.join_future, join_error(ErrorCode.unknown_member_id, ""))
        member.join_future = fut
        member.join_version = p.version
        if group.state == PREPARING_REBALANCE:
            return self._maybe_complete_join(group)
        if p.reason:
            reason = f"{reason}; client reason: {p.reason}"
        return self._maybe_prepare_rebalance_or_complete_join(group, reason)

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> list:
        if group.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            return self.prepare_rebalance(group, reason)
        if group.state == PREPARING_REBALANCE:
            return self._maybe_complete_join(group)
        return []

    # ================================================================ rebalance phases
    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> list:
        if group.state == COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self.timers.cancel(_sync_key(group.group_id))
        group.pending_sync.clear()
        initial = group.state == EMPTY
        before = group.state
        group.transition(PREPARING_REBALANCE, self.now())
        if group.rebalance is None:
            group.rebalance = self._new_rebalance(group, reason)
        self._event(group, "rebalance started", previous_state=before, reason=reason, members=len(group.members))
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
            return []
        if group.has_all_members_joined():
            return self.complete_join(group)
        self.timers.schedule(_join_key(group.group_id), group.rebalance_timeout_ms(), lambda: self._join_timeout(group))
        return []

    def _join_timeout(self, group: ClassicGroup, until: int | None = None) -> list | Result:
        """The rebalance timeout of the join phase: members that did not rejoin are dropped,
        unless a JoinGroup of theirs has arrived and waits to be handled."""
        late = [m.member_id for m in group.members.values() if not m.awaiting_join]
        if self.shard.defer_expiry(_join_key(group.group_id), group.group_id, late, group.rebalance_timeout_ms(), until,
                                   lambda until: self._join_timeout(group, until)):
            return []
        return self.complete_join(group)

    def _schedule_initial_join(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        gid = group.group_id

        def fire():
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                new_delay = min(delay, remaining)
                self._schedule_initial_join(group, new_delay, max(remaining - delay, 0))
                return None
            return self.complete_join(group)

        self.timers.schedule(_join_key(gid), delay, fire)

    def _maybe_complete_join(self, group: ClassicGroup, *, even_initial: bool = False) -> list:
        if (
            group.state == PREPARING_REBALANCE
            and group.has_all_members_joined()
            and (group.previous_state != EMPTY or even_initial)
        ):
            self.timers.cancel(_join_key(group.group_id))
            return self.complete_join(group)
        return []

    def complete_join(self, group: ClassicGroup) -> list | Result:
        """The join phase ends: drop dynamic members that did not rejoin, next generation."""
        if group.state != PREPARING_REBALANCE or self.groups.get(group.group_id) is not group:
            return []
        self.timers.cancel(_join_key(group.group_id))
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                group.remove(member.member_id)
                self.timers.cancel(_hb_key(group.group_id, member.member_id))
                self._note(group, "left", member.member_id, "did not rejoin before the rebalance timeout")
        if group.members and not any(m.awaiting_join for m in group.members.values()):
            # only static members that did not rejoin are left: wait another round
            self.timers.schedule(_join_key(group.group_id), group.rebalance_timeout_ms(), lambda: self._join_timeout(group))
            return []
        if group.leader_id is None or not group.members[group.leader_id].awaiting_join:
            group.leader_id = next((m.member_id for m in group.members.values() if m.awaiting_join), group.leader_id)
        group.generation += 1
        now = self.now()
        join_ms = now - group.rebalance["started_ms"] if group.rebalance else 0
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.subscribed = group.subscribed_topics()
            group.transition(EMPTY, now)
            record = group.record()
            self._finish_rebalance(group, join_ms=join_ms, sync_ms=0)
            return [record]
        group.protocol_name = group.select_protocol()
        group.subscribed = group.subscribed_topics()
        group.transition(COMPLETING_REBALANCE, now)
        if group.rebalance is not None:
            group.rebalance["join_done_ms"] = now
        self._event(
            group,
            "join phase completed",
            protocol=group.protocol_name,
            leader=group.leader_id,
            members=len(group.members),
            join_ms=join_ms,
        )
        for member in group.members.values():
            if member.join_future is not None:
                _resolve(member.join_future, self._join_response(group, member, with_members=member.member_id == group.leader_id))
                member.join_future = None
            member.is_new = False
            self._schedule_heartbeat(group, member)
        group.pending_sync = set(group.members)
        gen = group.generation
        self.timers.schedule(_sync_key(group.group_id), group.rebalance_timeout_ms(), lambda: self._expire_pending_sync(group, gen))
        return []

    def _join_response(self, group: ClassicGroup, member: Member, *, with_members: bool, leader: str | None = None, skip: bool = False) -> dict:
        members = []
        if with_members:
            members = [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata(group.protocol_name)}
                for m in group.members.values()
            ]
        return {
            "error_code": ErrorCode.none,
            "generation_id": group.generation,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": leader if leader is not None else (group.leader_id or ""),
            "skip_assignment": skip,
            "member_id": member.member_id,
            "members": members,
        }

    def _expire_pending_sync(self, group: ClassicGroup, generation: int, until: int | None = None) -> list:
        if generation != group.generation or group.state not in (COMPLETING_REBALANCE, STABLE):
            return []
        if not group.pending_sync:
            return []
        if self.shard.defer_expiry(_sync_key(group.group_id), group.group_id, list(group.pending_sync), group.rebalance_timeout_ms(), until,
                                   lambda until: self._expire_pending_sync(group, generation, until)):
            return []  # a SyncGroup has arrived and is handled next
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                _resolve(member.sync_future, {"error_code": ErrorCode.unknown_member_id, "assignment": b""})
                # noted first, so the rebalance record's "before" still has its partitions
                self._note_left(group, member_id, "did not send SyncGroup before the rebalance timeout", expired=True)
                group.remove(member_id)
                self.timers.cancel(_hb_key(group.group_id, member_id))
        group.pending_sync.clear()
        return self.prepare_rebalance(group, "Removing members that did not sync in time")

    def _new_rebalance(self, group: ClassicGroup, reason: str) -> dict:
        """The record of a rebalance that starts now, for its summary event."""
        return {
            "started_ms": self.now(),
            "generation_before": group.generation,
            "reason": reason,
            "joined": [],
            "left": [],
            "expired": [],
            "assignment_before": {mid: m.assignment for mid, m in group.members.items()},
        }

    def _note_left(self, group, member_id, reason, *, expired=False):
        if group.rebalance is None:
            group.rebalance = self._new_rebalance(group, reason)
        self._note(group, "expired" if expired else "left", member_id, reason)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_future is not None:
                _resolve(member.sync_future, {"error_code": error, "assignment": b""})
                member.sync_future = None
                self._schedule_heartbeat(group, member)

    def _finish_rebalance(self, group: ClassicGroup, *, join_ms: int, sync_ms: int) -> None:
        info = group.rebalance or {}
        moved = None
        before = info.get("assignment_before") or {}
        if group.protocol_type == "consumer":
            # only members whose assignment bytes changed can have moved a partition: a member
            # with the same bytes holds the same partitions before and after (in a 1,000-member
            # group, parsing all 2,000 assignments held every SyncGroup answer back ~10 ms)
            members = group.members
            changed = [mid for mid, raw in before.items() if mid not in members or members[mid].assignment != raw]
            changed += [mid for mid in members if mid not in before]
            owned_before: dict[tuple[str, int], str] = {}
            owned_after: dict[tuple[str, int], str] = {}
            for mid in changed:
                raw = before.get(mid)
                if raw is not None:
                    for tp in assigned_partitions(raw) or ():
                        owned_before[tp] = mid
                m = members.get(mid)
                if m is not None:
                    for tp in assigned_partitions(m.assignment) or ():
                        owned_after[tp] = mid
            moved = sorted(f"{t}-{p}" for (t, p) in set(owned_before) | set(owned_after) if owned_before.get((t, p)) != owned_after.get((t, p)))
        self.shard.event(
            "rebalance completed",
            group.group_id,
            state=group.state,
            generation_before=info.get("generation_before"),
            generation_after=group.generation,
            reason=info.get("reason"),
            members_joined=info.get("joined", []),
            members_left=info.get("left", []),
            members_expired=info.get("expired", []),
            protocol=group.protocol_name,
            members=len(group.members),
            join_ms=join_ms,
            sync_ms=sync_ms,
            partitions_moved=moved,
        )
        group.rebalance = None

    # ================================================================ static membership
    def _replace_static_member(self, group: ClassicGroup, p: JoinParams, new_id: str, fut) -> list:
        old_id = group.static_members[p.group_instance_id]
        old = group.members[old_id]
        old_leader = group.leader_id
        old_protocols = old.protocols
        old_rebalance, old_session = old.rebalance_timeout_ms, old.session_timeout_ms
        if old.join_future is not None:
            _resolve(old.join_future, join_error(ErrorCode.fenced_instance_id, old_id))
        if old.sync_future is not None:
            _resolve(old.sync_future, {"error_code": ErrorCode.fenced_instance_id, "assignment": b""})
        self.timers.cancel(_hb_key(group.group_id, old_id))
        member = group.replace_static(old_id, new_id)
        self._schedule_heartbeat(group, member)
        group.update_protocols(member, list(p.protocols))
        member.rebalance_timeout_ms = p.rebalance_timeout_ms
        member.session_timeout_ms = p.session_timeout_ms
        member.join_version = p.version
        self._event(group, "static member replaced", instance_id=p.group_instance_id, old_member=old_id, new_member=new_id)
        if group.state == STABLE:
            if group.select_protocol() == group.protocol_name:
                gen = group.generation
                member.join_future = None
                record = group.record()

                def on_commit():
                    if group.generation != gen or self.groups.get(group.group_id) is not group:
                        _resolve(fut, join_error(ErrorCode.unknown_member_id, new_id))
                        return
                    is_leader = group.leader_id == new_id
                    if p.version >= 9:
                        _resolve(fut, self._join_response(group, member, with_members=is_leader, skip=is_leader))
                    else:
                        _resolve(fut, self._join_response(group, member, with_members=False, leader=old_leader or ""))

                def on_failure(error):
                    # put the old member back as it was
                    if new_id in group.members:
                        back = group.replace_static(new_id, old_id)
                        group.update_protocols(back, old_protocols)
                        back.rebalance_timeout_ms, back.session_timeout_ms = old_rebalance, old_session
                        group.leader_id = old_leader
                        self._schedule_heartbeat(group, back)
                    _resolve(fut, join_error(error, ""))

                return [Result(records=[record], on_commit=on_commit, on_failure=on_failure)]
            return self._update_member_and_rebalance(group, member, p, fut, f"Static member {p.group_instance_id} rejoined with a protocol change")
        if group.state == COMPLETING_REBALANCE:
            return self._update_member_and_rebalance(group, member, p, fut, f"Static member {p.group_instance_id} replaced during {group.state}")
        member.join_future = fut
        return self._maybe_complete_join(group)

    # ================================================================ SyncGroup
    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes]) -> Result:
        fut = self.shard.new_future()

        def answer(code, assignment=b""):
            _resolve(fut, {"error_code": code, "assignment": assignment, "protocol_type": None, "protocol_name": None})
            return Result(response=fut)

        group = self.groups.get(group_id)
        if group is None or not isinstance(group, ClassicGroup) or group.state == EMPTY:
            return answer(ErrorCode.unknown_member_id)
        if group.state == DEAD:
            return answer(ErrorCode.coordinator_not_available)
        error = self.validate_member(group, member_id, instance_id)
        if error is not None:
            return answer(error)
        if generation != group.generation:
            return answer(ErrorCode.illegal_generation)
        if (protocol_type is not None and group.protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and group.protocol_name is not None and protocol_name != group.protocol_name
        ):
            return answer(ErrorCode.inconsistent_group_protocol)
        if group.state == PREPARING_REBALANCE:
            return answer(ErrorCode.rebalance_in_progress)
        member = group.members[member_id]
        self._remove_pending_sync(group, member_id)
        if group.state == STABLE:
            _resolve(fut, self._sync_response(group, member.assignment))
            return Result(response=fut)
        # CompletingRebalance: park; the leader's assignment completes everyone
        if member.sync_future is not None:
            _resolve(member.sync_future, {"error_code": ErrorCode.rebalance_in_progress, "assignment": b""})
        member.sync_future = fut
        if member_id != group.leader_id:
            return Result(response=fut)
        full = {mid: assignments.get(mid, b"") for mid in group.members}
        gen = group.generation
        record = group.record(full)

        def on_commit():
            if group.state != COMPLETING_REBALANCE or group.generation != gen:
                return
            for mid, m in group.members.items():
                m.assignment = full.get(mid, b"")
                if m.sync_future is not None:
                    _resolve(m.sync_future, self._sync_response(group, m.assignment))
                    m.sync_future = None
                    self._schedule_heartbeat(group, m)  # Kafka: only for the members answered
            group.transition(STABLE, self.now())
            info = group.rebalance or {}
            now = self.now()
            join_done = info.get("join_done_ms", now)
            self._finish_rebalance(group, join_ms=join_done - info.get("started_ms", join_done), sync_ms=now - join_done)

        def on_failure(err):
            if group.state == COMPLETING_REBALANCE and group.generation == gen:
                self._reset_and_propagate_assignment_error(group, err)
                self.shard.submit(lambda shard: shard.classic.prepare_rebalance(group, "Failed to persist the leader's assignment"))

        return Result(records=[record], response=fut, on_commit=on_commit, on_failure=on_failure)

    def _sync_response(self, group: ClassicGroup, assignment: bytes) -> dict:
        return {"error_code": ErrorCode.none, "assignment": assignment, "protocol_type": group.protocol_type, "protocol_name": group.protocol_name}

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(_sync_key(group.group_id))

    # ================================================================ Heartbeat
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or not isinstance(group, ClassicGroup):
            return ErrorCode.unknown_member_id
        if group.state == DEAD:
            return ErrorCode.coordinator_not_available
        error = self.validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.state == EMPTY:
            return ErrorCode.unknown_member_id
        self._schedule_heartbeat(group, group.members[member_id])
        if group.state == PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        self.timers.schedule(_hb_key(gid, mid), timeout_ms if timeout_ms is not None else member.session_timeout_ms, lambda: self._expire_heartbeat(gid, mid))

    def touch(self, group: ClassicGroup, member_id: str) -> None:
        """An OffsetCommit from a member counts as a heartbeat (Stable or PreparingRebalance)."""
        member = group.members.get(member_id)
        if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
            self._schedule_heartbeat(group, member)

    def _expire_heartbeat(self, group_id: str, member_id: str, until: int | None = None) -> list:
        group = self.groups.get(group_id)
        if group is None or not isinstance(group, ClassicGroup) or group.state == DEAD:
            return []
        member = group.members.get(member_id)
        limit = member.session_timeout_ms if member is not None else self.config.new_member_join_timeout_ms
        if self.shard.defer_expiry(_hb_key(group_id, member_id), group_id, (member_id,), limit, until,
                                   lambda until: self._expire_heartbeat(group_id, member_id, until), session=True):
            return []  # its heartbeat (or join) has arrived and is handled next
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._event(group, "pending member expired", member=member_id)
            return self._maybe_complete_join(group, even_initial=True)
        if member is None:
            return []
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            return []  # parked in Join or Sync: that satisfies the heartbeat
        why = "session timeout expired" if not member.is_new else "new member did not complete its join"
        self._event(group, "member expired", member=member_id, reason=why, timer_late_ms=self.timers.firing_late_ms)
        self._note_left(group, member_id, why, expired=True)
        return self._remove_member_and_update(group, member, f"Member {member_id} expired (session timeout)", even_initial=True)

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str, *, even_initial: bool = False) -> list:
        _resolve(member.join_future, join_error(ErrorCode.unknown_member_id, ""))
        member.join_future = None
        _resolve(member.sync_future, {"error_code": ErrorCode.unknown_member_id, "assignment": b""})
        member.sync_future = None
        group.remove(member.member_id)
        self.timers.cancel(_hb_key(group.group_id, member.member_id))
        if group.state in (STABLE, COMPLETING_REBALANCE):
            return self.prepare_rebalance(group, reason)
        if group.state == PREPARING_REBALANCE:
            return self._maybe_complete_join(group, even_initial=even_initial)
        return []

    # ================================================================ LeaveGroup
    def leave(self, group_id: str, members: list[tuple[str, str | None, str | None]]) -> tuple[ErrorCode, list[dict], list]:
        """members: (member_id, group_instance_id, reason). Returns (top error, per-member, records)."""
        group = self.groups.get(group_id)
        if group is None or not isinstance(group, ClassicGroup):
            # as Kafka 4.1: every member is unknown (v0-2 flatten this to the top level)
            return ErrorCode.none, [{"member_id": m, "group_instance_id": i, "error_code": ErrorCode.unknown_member_id} for m, i, _ in members], []
        if group.state == DEAD:
            return ErrorCode.coordinator_not_available, [], []
        results = []
        removed = []
        for member_id, instance_id, reason in members:
            entry = {"member_id": member_id, "group_instance_id": instance_id}
            if member_id == "":
                target = group.static_members.get(instance_id) if instance_id is not None else None
                if target is None:
                    results.append({**entry, "error_code": ErrorCode.unknown_member_id})
                    continue
                member_id = target
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.timers.cancel(_hb_key(group_id, member_id))
                results.append({**entry, "error_code": ErrorCode.none})
                removed.append(member_id)
                continue
            else:
                error = self.validate_member(group, member_id, instance_id)
                if error is not None:
                    results.append({**entry, "error_code": error})
                    continue
            member = group.members[member_id]
            _resolve(member.join_future, join_error(ErrorCode.unknown_member_id, ""))
            member.join_future = None
            _resolve(member.sync_future, {"error_code": ErrorCode.unknown_member_id, "assignment": b""})
            member.sync_future = None
            self._note_left(group, member_id, f"left the group; client reason: {reason or 'not provided'}")
            group.remove(member_id)
            self.timers.cancel(_hb_key(group_id, member_id))
            results.append({**entry, "error_code": ErrorCode.none})
            removed.append(member_id)
        records: list = []
        if removed:
            why = f"Removing members {removed} on LeaveGroup"
            if group.state in (STABLE, COMPLETING_REBALANCE):
                records = records + self.prepare_rebalance(group, why)
            elif group.state == PREPARING_REBALANCE:
                records = records + self._maybe_complete_join(group)
        return ErrorCode.none, results, records

    # ================================================================ loading
    def on_loaded(self, group: ClassicGroup) -> list:
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        if len(group.members) > self.config.group_max_size:
            return self.prepare_rebalance(group, "Freshly loaded group is over group.max.size")
        return []
