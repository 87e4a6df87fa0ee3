"""Classic group and member state (Kafka's ClassicGroup / ClassicGroupMember).

Plain data plus the bookkeeping every transition needs: who is awaiting a
join or sync response, protocol support counts, leader and static-member
maps, and the record that persists the group.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from protocol.group_records import GroupMetadataKey, GroupMetadataValue, MemberMetadata

from protocol.consumer_protocol import subscribed_topics

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

VALID_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {EMPTY, STABLE, COMPLETING_REBALANCE},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: {EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD},
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_version: int = 0
    sync_future: Any = None
    is_new: bool = False
    owner: Any = field(default=None, repr=False)  # the group, which counts members awaiting a join
    _join_future: Any = field(default=None, repr=False)  # see join_future

    @property
    def join_future(self):
        """The member's parked JoinGroup answer, or None; setting it keeps the group's count of them."""
        return self._join_future

    @join_future.setter
    def join_future(self, value) -> None:
        owner = self.owner
        if owner is not None:
            owner.awaiting_count += (value is not None) - (self._join_future is not None)
        self._join_future = value

    @property
    def awaiting_join(self) -> bool:
        return self._join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def vote(self, candidates: set[str]) -> str | None:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        return None


# what a member takes from its JoinGroup, or from the static member it replaces
_JOIN_FIELDS = ("group_instance_id", "client_id", "client_host", "rebalance_timeout_ms", "session_timeout_ms", "protocol_type")


def member_from(member_id: str, source, **rest) -> Member:
    """A member ``member_id`` with the join fields of ``source`` (a JoinParams, or a member) and ``rest``."""
    return Member(member_id=member_id, **{f: getattr(source, f) for f in _JOIN_FIELDS}, **rest)


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: str = EMPTY
    previous_state: str | None = None
    state_timestamp: int = -1
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    pending_sync: set[str] = field(default_factory=set)
    protocol_counts: Counter = field(default_factory=Counter)
    new_member_added: bool = False
    # Kafka's cached subscribedTopics: computed when a generation starts and at load, not live
    subscribed: frozenset[str] | None = None
    # rebalance bookkeeping for the structured rebalance event
    rebalance: dict | None = None
    awaiting_count: int = 0  # members with a parked JoinGroup, kept by Member.join_future

    # -- state ------------------------------------------------------------
    def transition(self, target: str, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state} -> {target} is not allowed")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp = now_ms

    # -- members ----------------------------------------------------------
    @property
    def num_awaiting_join(self) -> int:
        return self.awaiting_count

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        member.owner = self
        if member.join_future is not None:
            self.awaiting_count += 1
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        for name in member.protocol_names():
            self.protocol_counts[name] += 1
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.join_future is not None:
            self.awaiting_count -= 1
        member.owner = None
        for name in member.protocol_names():
            self.protocol_counts[name] -= 1
            if self.protocol_counts[name] <= 0:
                del self.protocol_counts[name]
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_protocols(self, member: Member, protocols: list[tuple[str, bytes]]) -> None:
        old = member.protocol_names()
        member.protocols = protocols
        new = member.protocol_names()
        if new == old:  # a rejoin with the same protocols (the metadata may differ): the counts stand
            return
        for name in old:
            self.protocol_counts[name] -= 1
            if self.protocol_counts[name] <= 0:
                del self.protocol_counts[name]
        for name in new:
            self.protocol_counts[name] += 1

    def replace_static(self, old_id: str, new_id: str) -> Member:
        """Move a static member to a new member id, keeping its place and data."""
        old = self.members[old_id]
        new = member_from(new_id, old, protocols=old.protocols, assignment=old.assignment)
        self.members = {(new_id if k == old_id else k): (new if k == old_id else v) for k, v in self.members.items()}
        if old.join_future is not None:
            self.awaiting_count -= 1
        old.owner = None
        new.owner = self
        self.static_members[old.group_instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.leader_id == old_id:
            self.leader_id = new_id
        return new

    # -- protocols --------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.protocol_counts.items() if count == n}

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state == EMPTY:
            return bool(protocol_type) and bool(names)
        # some name every member supports (a candidate protocol), without building the candidates' set
        counts, n = self.protocol_counts, len(self.members)
        return protocol_type == self.protocol_type and any(counts.get(name) == n for name in names)

    def select_protocol(self) -> str | None:
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes: Counter = Counter()
        order: list[str] = []
        for m in self.members.values():
            choice = m.vote(candidates)
            if choice is not None:
                if choice not in votes:
                    order.append(choice)
                votes[choice] += 1
        # most votes wins; ties go to the earliest first-choice (deterministic)
        return max(order, key=lambda name: (votes[name], -order.index(name))) if order else None

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to, or None if unknown (Kafka's computeSubscribedTopics)."""
        if self.protocol_type != "consumer":
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        # members mostly send the same subscription bytes: each distinct one is parsed once
        distinct = {m.metadata(self.protocol_name) for m in self.members.values()}
        topics: set[str] = set()
        for metadata in distinct:
            subs = subscribed_topics(metadata)
            if subs is None:
                return None
            topics |= subs
        return frozenset(topics)

    def is_subscribed(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: unknown subscriptions count as all topics for "consumer" groups."""
        if self.subscribed is not None:
            return topic in self.subscribed
        return self.protocol_type == "consumer"

    # -- persistence ------------------------------------------------------
    def record(self, assignments: dict[str, bytes] | None = None) -> tuple[GroupMetadataKey, GroupMetadataValue]:
        members = [
            MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.metadata(self.protocol_name),
                assignment=(assignments.get(m.member_id, b"") if assignments is not None else m.assignment),
            )
            for m in self.members.values()
        ]
        value = GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp,
            members=members,
        )
        return GroupMetadataKey(self.group_id), value

    def tombstone(self) -> tuple[GroupMetadataKey, None]:
        return GroupMetadataKey(self.group_id), None

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        group = cls(group_id)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp = value.current_state_timestamp
        for mm in value.members:
            member = Member(
                member_id=mm.member_id,
                group_instance_id=mm.group_instance_id,
                client_id=mm.client_id,
                client_host=mm.client_host,
                rebalance_timeout_ms=mm.rebalance_timeout if mm.rebalance_timeout >= 0 else mm.session_timeout,
                session_timeout_ms=mm.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", mm.subscription)],
                assignment=mm.assignment,
            )
            group.add(member)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.state = STABLE if group.members else EMPTY
        group.subscribed = group.subscribed_topics()
        return group
