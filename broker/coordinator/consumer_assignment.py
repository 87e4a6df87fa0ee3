"""KIP-848 consumer groups: the target assignment and the reconciliation of each member with it.

* Target assignment (Kafka's ``GroupMetadataManager.updateTargetAssignment`` and the assignors):
  once the group epoch passed the assignment epoch (and ``group.consumer.assignment.interval.ms``
  allows it), the assignor computes every member's target; the uniform assignor's homogeneous
  case runs incrementally from what changed (``_target_changes``), anything else runs the full
  assignor (``_full_target``). Only the members whose target changed get a record.
* Reconciliation (Kafka's ``CurrentAssignmentBuilder``): a member moves towards its target one
  step per heartbeat: partitions to revoke first (UNREVOKED_PARTITIONS, under the rebalance
  timer), then the new ones as their previous owners release them (UNRELEASED_PARTITIONS).

``ConsumerAssignment`` is a part of ``ConsumerGroups`` (consumer.py), which owns the records
(``_write_target``, ``_write_current``) and the member timers (``_expire``) it calls.
"""

from __future__ import annotations

import time

from protocol.errors import ErrorCode
from protocol.group_records import ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue

from .assignors import ASSIGNORS, GroupSpec, MemberSubscription, UniformAssignor, choose_from_counts
from .assignors.uniform import rebalance_homogeneous
from .common import CoordinatorError
from .consumer_group import STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, Assignment, ConsumerGroup, ConsumerMember

__all__ = ["ConsumerAssignment", "assignment_key", "rebalance_key"]


class ConsumerAssignment:
    """The target assignment and reconciliation steps of ``ConsumerGroups`` (a base class of it)."""

    # ================================================================ target assignment
    def _assignment_wait(self, group: ConsumerGroup) -> int:
        """How long (ms) the next target assignment must wait; 0 or less: not at all (Kafka's
        canComputeNextTargetAssignment: never computed, no interval, or the interval has passed)."""
        interval = self.config.consumer_assignment_interval_ms(group.group_id)
        if not group.assignment_timestamp or not interval:
            return 0
        return group.assignment_timestamp + interval - self.now()

    def _assign_due(self, group_id: str) -> list:
        """The assignment timer: the target that waited for its interval, unless a heartbeat computed it."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.members and group.group_epoch > group.assignment_epoch:
            self._update_target(group)
        return []

    def _update_target(self, group: ConsumerGroup) -> None:
        meta = self.shard.metadata
        name = choose_from_counts(group.assignor_votes)
        t0 = time.perf_counter()
        changes = self._target_changes(group, meta) if name == UniformAssignor.name else None
        path = "incremental"
        if changes is None:
            changes, path = self._full_target(group, meta, name), "full"
        cost_ms = (time.perf_counter() - t0) * 1000
        for mid, by_id in changes.items():
            self._write_target(group, mid, by_id)
        self.timers.cancel(assignment_key(group.group_id))
        self._emit(ConsumerGroupTargetAssignmentMetadataKey(group.group_id), ConsumerGroupTargetAssignmentMetadataValue(group.group_epoch, self.now()))
        self.shard.event("target assignment computed", group.group_id, epoch=group.group_epoch, assignor=name, members=len(group.members),
                         members_changed=len(changes), assignor_ms=round(cost_ms, 2), path=path)

    def _full_target(self, group: ConsumerGroup, meta, name: str) -> dict[str, Assignment]:
        """The assignor run over the whole group: the members whose target changes, with their new target."""
        members = {}
        topic_counts: dict[str, int] = {}
        for m in group.members.values():
            names = frozenset(n for n in group.member_topics(m) if n in meta.by_name)
            members[m.member_id] = MemberSubscription(m.member_id, names, m.rack_id, m.instance_id)
            for n in names:
                topic_counts[n] = meta.by_name[n][1]
        current = {
            mid: {meta.by_id[tid]: parts for tid, parts in asg.items() if tid in meta.by_id}
            for mid, asg in group.target.items()
            if mid in members
        }
        result = ASSIGNORS[name].assign(GroupSpec(members, current), topic_counts)
        changes = {}
        for mid in members:
            by_id = {meta.by_name[t][0]: frozenset(parts) for t, parts in result.get(mid, {}).items() if parts}
            if by_id != group.target.get(mid, {}):
                changes[mid] = by_id
        return changes

    def _target_changes(self, group: ConsumerGroup, meta) -> dict[str, Assignment] | None:
        """The uniform assignor's homogeneous case from what changed (``rebalance_homogeneous``), or None when
        the group is not in that case: members subscribed differently, or a target that is not clean (a
        partition held twice, a topic deleted or unsubscribed, a member's target without the member).
        Walks no member that keeps its target; the checks that do look at every member run in C."""
        subs = group.subscriptions
        if len(subs) != 1 or len(group.members) != next(iter(subs.values())):
            return None
        index = group.target_index
        if index.doubles or index.orphans:
            return None
        names, regex = next(iter(subs))
        wanted = set(names)
        if regex is not None:
            resolved = group.regexes.get(regex)
            if resolved is not None:
                wanted.update(resolved[0])
        topic_names = sorted(t for t in wanted if t in meta.by_name)
        if not topic_names:
            return None
        ids = {meta.by_name[t][0]: t for t in topic_names}
        counts = {t: meta.by_name[t][1] for t in topic_names}
        if not index.per_topic.keys() <= ids.keys():
            return None
        claimed = 0
        for tid, t in ids.items():
            held = index.per_topic.get(tid, 0)
            if held > counts[t]:
                return None
            claimed += held
        total = sum(counts.values())
        unclaimed: list[tuple[str, int]] = []
        if claimed < total:
            claims = index.claims
            for tid, t in ids.items():
                if index.per_topic.get(tid, 0) < counts[t]:
                    unclaimed.extend((t, p) for p in range(counts[t]) if (tid, p) not in claims)
            if len(unclaimed) != total - claimed:
                return None  # some target holds a partition past its topic's end
        buckets: dict = index.buckets
        if index.untargeted:
            buckets = dict(buckets)
            buckets[0] = buckets.get(0, set()) | index.untargeted
        target = group.target

        def current_of(member_id: str) -> dict[str, frozenset[int]]:
            return {ids[tid]: parts for tid, parts in target.get(member_id, {}).items()}

        result = rebalance_homogeneous(topic_names, counts, buckets, unclaimed, current_of)
        return {mid: {meta.by_name[t][0]: frozenset(parts) for t, parts in asg.items() if parts} for mid, asg in result.items()}

    # ================================================================ reconciliation
    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> None:
        target_epoch = group.assignment_epoch
        target = group.target.get(member.member_id, {})
        state = member.state
        if state == STABLE:
            if member.member_epoch == target_epoch:
                return
            nxt = self._next_assignment(group, member, member.member_epoch, target_epoch, target, owned)
        elif state == UNREVOKED_PARTITIONS:
            if _owns_any(owned, member.pending_revocation):
                return
            # revoked: if more must go, the member revokes it at the same epoch (Kafka 4.3+; up to 4.2 at
            # memberEpoch + 1: with KIP-1251's assignment epochs the bump is no longer needed to fence commits)
            nxt = self._next_assignment(group, member, member.member_epoch, target_epoch, target, owned)
        elif state == UNRELEASED_PARTITIONS:
            nxt = self._next_assignment(group, member, member.member_epoch, target_epoch, target, owned)
        else:  # UNKNOWN
            if owned is None or any(owned.values()):
                raise CoordinatorError(ErrorCode.fenced_member_epoch, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
            nxt = self._next_assignment(group, member, target_epoch, target_epoch, target, owned)
        epoch, new_state, assigned, pending = nxt
        if (epoch, new_state, assigned, pending) == (member.member_epoch, member.state, member.assigned, member.pending_revocation):
            return
        # Kafka's updateMemberEpoch: the previous epoch is always the one before this step
        self._write_current(group, member.member_id, epoch, member.member_epoch, new_state, assigned, pending)
        # Kafka's maybeReconcile: a changed member in UNREVOKED_PARTITIONS (re)arms the rebalance
        # timer for its new epoch; any other new state cancels it. Classic members use join/sync timers.
        if member.classic is not None:
            return
        if new_state == UNREVOKED_PARTITIONS:
            self.schedule_rebalance(group, member)
        else:
            self.timers.cancel(rebalance_key(group.group_id, member.member_id))

    def schedule_rebalance(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        gid, mid, ep = group.group_id, member.member_id, member.member_epoch
        self.timers.schedule(rebalance_key(gid, mid), max(member.rebalance_timeout_ms, 0), lambda: self._expire(gid, mid, "did not revoke its partitions within the rebalance timeout", ep, rebalance_key))

    def _next_assignment(self, group: ConsumerGroup, member: ConsumerMember, member_epoch: int, target_epoch: int, target: Assignment, owned: Assignment | None):
        unreleased = False
        new_assigned: Assignment = {}
        new_pending: Assignment = {}
        new_pending_assign: Assignment = {}
        for tid in set(target) | set(member.assigned):
            want = target.get(tid, frozenset())
            have = member.assigned.get(tid, frozenset())
            kept = have & want
            revoke = have - kept
            assign = set(want - kept)
            # still held by another member; not those this member is itself revoking (Kafka 4.2+, KAFKA-19449:
            # they are free once it has revoked them, which is what this step acknowledges)
            revoking = member.pending_revocation.get(tid, ())
            blocked = {p for p in assign if group.current_partition_epoch(tid, p) != -1 and p not in revoking}
            if blocked:
                unreleased = True
                assign -= blocked
            if kept:
                new_assigned[tid] = kept
            if revoke:
                new_pending[tid] = frozenset(revoke)
            if assign:
                new_pending_assign[tid] = frozenset(assign)
        if new_pending and _owns_any(owned, new_pending):
            return member_epoch, UNREVOKED_PARTITIONS, new_assigned, new_pending
        if new_pending_assign:
            for tid, parts in new_pending_assign.items():
                new_assigned[tid] = new_assigned.get(tid, frozenset()) | parts
            return target_epoch, (UNRELEASED_PARTITIONS if unreleased else STABLE), new_assigned, {}
        return target_epoch, (UNRELEASED_PARTITIONS if unreleased else STABLE), new_assigned, {}

    def _note_member(self, group: ConsumerGroup, member: ConsumerMember, before: Assignment) -> None:
        """The "consumer member reconciled" event: the member's partitions changed, it joined, or it
        started or stopped waiting. A stable member that only moves up to the new epoch (its
        partitions untouched by the change) is not news: in a big group it was one event per member
        and heartbeat after every bump (13,085 events while 3,000 members formed a group, 9,729 now).
        Logged at debug level, as Kafka 4.4 logs a member's "new assignment state": rendering a log
        line was a fifth of a heartbeat's cost while a big group rebalanced. The event stream
        (docs/group-events.md) carries every one."""
        meta = self.shard.metadata
        revoked = _moved(meta, before, member.assigned)
        assigned = _moved(meta, member.assigned, before)
        reached = member.state == STABLE and member.member_epoch == group.assignment_epoch
        waited = None
        if reached and member.waiting_since_ms is not None:
            waited = self.now() - member.waiting_since_ms
            member.waiting_since_ms = None
        elif not reached and member.waiting_since_ms is None:
            member.waiting_since_ms = self.now()
        self.shard.event(
            "consumer member reconciled",
            group.group_id,
            debug=True,
            member=member.member_id,
            member_epoch=member.member_epoch,
            group_epoch=group.group_epoch,
            state={0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"}[member.state],
            revoked=revoked,
            assigned=assigned,
            ms_without_target=waited,
        )


def _moved(meta, a: Assignment, b: Assignment) -> list[str]:
    """The partitions of ``a`` not in ``b``, as "topic-partition" (the topic id when the topic is gone), sorted as before:
    by topic id, then partition as text."""
    out = []
    for tid in sorted(a, key=str):
        parts = a[tid] - b.get(tid, frozenset())
        if parts:
            name = meta.by_id.get(tid, str(tid))
            out += sorted((f"{name}-{p}" for p in parts), key=lambda x, n=len(name) + 1: x[n:])
    return out


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    if owned is None:
        return True
    for tid, parts in partitions.items():
        if owned.get(tid, frozenset()) & parts:
            return True
    return False


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance:{group_id}:{member_id}"


def assignment_key(group_id: str) -> str:
    return f"consumer-assignment:{group_id}"
