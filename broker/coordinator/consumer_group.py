"""KIP-848 consumer group state (Kafka's ConsumerGroup / ConsumerGroupMember).

All of it is rebuilt by replaying the group's records (types 3, 5, 6, 7, 8,
16): the heartbeat logic in ``consumer.py`` only ever changes state by
emitting records, which the shard replays at once and at load alike.
Assignments are ``{topic_id: frozenset(partitions)}``.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field

STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS, UNKNOWN = 0, 1, 2, 127
STATE_NAMES = {STABLE: "STABLE", UNREVOKED_PARTITIONS: "UNREVOKED_PARTITIONS", UNRELEASED_PARTITIONS: "UNRELEASED_PARTITIONS", UNKNOWN: "UNKNOWN"}

# group states as Kafka names them on the wire
EMPTY, ASSIGNING, RECONCILING, STABLE_GROUP, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: object | None = None  # ClassicMemberMetadata for classic-protocol members
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # KIP-1251: (topic id, partition) -> the epoch it was assigned to this member at, for everything in
    # ``assigned`` and ``pending_revocation``; replaced whole by replay, never changed in place
    assignment_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    has_metadata: bool = False  # a MemberMetadata record was replayed
    # since when the member has not held its full target (for the rebalance event)
    waiting_since_ms: int | None = None
    # the subscription as counted in the group's topic_users / regex_users / subscriptions
    counted: tuple | None = None
    # the server assignor as counted in the group's assignor_votes
    voted: str | None = None
    # not state (never written, not rebuilt by a load): since when an answer carried an assignment
    # the member has not yet confirmed by reporting it as owned (see ConsumerGroups._resend_assignment)
    unconfirmed_since_ms: int | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None


INITIAL_GROUP_EPOCH = 1


@dataclass(eq=False)
class EpochGroup:
    """What consumer and share groups (KIP-848, KIP-932) both keep: the group's and its target's epochs."""

    group_id: str
    # A new group is at epoch 1 with an empty target assignment of epoch 1, so the first computed
    # assignment is epoch 2 (Kafka 4.2+, KAFKA-20268; 4.1 started at 0); nothing is written for epoch 1.
    group_epoch: int = INITIAL_GROUP_EPOCH
    metadata_hash: int = 0
    assignment_epoch: int = INITIAL_GROUP_EPOCH
    assignment_timestamp: int = 0  # when the target was last computed (ms; 0: never, or before Kafka 4.4)


@dataclass(eq=False)
class ConsumerGroup(EpochGroup):
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # (topic_id, partition) -> epoch of the member holding it (assigned or pending revocation)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    regexes: dict[str, tuple[frozenset[str], int, int]] = field(default_factory=dict)  # regex -> (topics, version, timestamp)
    created: bool = False  # a ConsumerGroupMetadata record exists
    state_timestamp: int = -1
    # last cluster-metadata version the group was checked against
    checked_metadata_version: int = -1
    # subscriptions, kept up to date by replay so a heartbeat need not walk every member
    topic_users: Counter = field(default_factory=Counter)  # topic name -> members subscribed by name
    regex_users: Counter = field(default_factory=Counter)  # regex -> members using it
    subscription_version: int = 0  # moves whenever any of the above or a regex's resolution changes
    subscriptions: Counter = field(default_factory=Counter)  # (topic names, regex) -> members subscribed so
    assignor_votes: Counter = field(default_factory=Counter)  # server assignor -> members naming it
    target_index: TargetIndex = field(default_factory=lambda: TargetIndex())
    waiting: int = 0  # members whose state is not STABLE (partitions to revoke or to wait for)
    revoking: int = 0  # members in UNREVOKED_PARTITIONS (partitions to revoke)
    hash_cache: tuple = (-1, -1, 0)  # (subscription_version, metadata version, hash)
    _names_cache: tuple = (-1, frozenset())

    protocol_type = "consumer"

    # -- derived ----------------------------------------------------------
    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != STABLE:
                return RECONCILING
        return STABLE_GROUP

    def subscribed_topic_names(self) -> frozenset[str]:
        version, names = self._names_cache
        if version != self.subscription_version:
            names = set(self.topic_users)
            for regex in self.regex_users:
                resolved = self.regexes.get(regex)
                if resolved is not None:
                    names.update(resolved[0])
            names = frozenset(names)
            self._names_cache = (self.subscription_version, names)
        return names

    def set_subscription(self, member: ConsumerMember, names: list[str], regex: str | None) -> None:
        """A member's subscription as replayed: the group's counts follow it."""
        member.subscribed_topic_names, member.subscribed_topic_regex = list(names), regex
        counted = (frozenset(names), regex)
        if member.counted == counted:
            return
        self._uncount(member)
        self.topic_users.update(counted[0])
        if regex is not None:
            self.regex_users[regex] += 1
        self.subscriptions[counted] += 1
        member.counted = counted
        self.subscription_version += 1

    def _uncount(self, member: ConsumerMember) -> None:
        if member.counted is None:
            return
        names, regex = member.counted
        for name in names:
            self.topic_users[name] -= 1
            if self.topic_users[name] <= 0:
                del self.topic_users[name]
        if regex is not None:
            self.regex_users[regex] -= 1
            if self.regex_users[regex] <= 0:
                del self.regex_users[regex]
        _decrement(self.subscriptions, member.counted)
        member.counted = None

    def set_assignor(self, member: ConsumerMember, name: str | None) -> None:
        """A member's server assignor as replayed: the group's votes follow it."""
        member.server_assignor = name
        if member.voted == name:
            return
        if member.voted is not None:
            _decrement(self.assignor_votes, member.voted)
        if name is not None:
            self.assignor_votes[name] += 1
        member.voted = name

    def set_target(self, member_id: str, assignment: Assignment | None) -> None:
        """A member's target assignment as replayed (None: removed); the target index follows it."""
        index = self.target_index
        if assignment is None:
            old = self.target.pop(member_id, None)
            index.orphans.discard(member_id)
            if member_id in self.members:
                index.untargeted.add(member_id)
        else:
            old = self.target.get(member_id)
            self.target[member_id] = assignment
            index.untargeted.discard(member_id)
            if member_id not in self.members:
                index.orphans.add(member_id)
        index.update(member_id, old, assignment)

    def add_member(self, member: ConsumerMember) -> ConsumerMember:
        self.members[member.member_id] = member
        if member.member_id in self.target:
            self.target_index.orphans.discard(member.member_id)
        else:
            self.target_index.untargeted.add(member.member_id)
        return member

    def is_subscribed(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def member_topics(self, member: ConsumerMember) -> frozenset[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            resolved = self.regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                names.update(resolved[0])
        return frozenset(names)

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    # -- replay helpers -----------------------------------------------------
    def set_current(self, member: ConsumerMember, epoch: int, previous: int, state: int, assigned: Assignment, pending: Assignment,
                    assignment_epochs: dict | None = None) -> None:
        """A member's current assignment as replayed. Without ``assignment_epochs`` (a record written
        before Kafka 4.3) every partition counts as assigned at the member's epoch (0 if negative)."""
        self._drop_epochs(member)
        self.waiting += (state != STABLE) - (member.state != STABLE)
        self.revoking += (state == UNREVOKED_PARTITIONS) - (member.state == UNREVOKED_PARTITIONS)
        member.member_epoch, member.previous_member_epoch, member.state = epoch, previous, state
        member.assigned, member.pending_revocation = assigned, pending
        default = epoch if epoch > 0 else 0
        fill = assignment_epochs is None
        if fill:
            assignment_epochs = {}
        for source in (assigned, pending):
            for tid, parts in source.items():
                for p in parts:
                    self.partition_epochs[(tid, p)] = epoch
                    if fill:
                        assignment_epochs[(tid, p)] = default
        member.assignment_epochs = assignment_epochs

    def _drop_epochs(self, member: ConsumerMember) -> None:
        for source in (member.assigned, member.pending_revocation):
            for tid, parts in source.items():
                for p in parts:
                    self.partition_epochs.pop((tid, p), None)

    def remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self.target_index.untargeted.discard(member_id)
        if member_id in self.target:
            self.target_index.orphans.add(member_id)
        self._drop_epochs(member)
        self.waiting -= member.state != STABLE
        self.revoking -= member.state == UNREVOKED_PARTITIONS
        self._uncount(member)
        self.set_assignor(member, None)
        self.subscription_version += 1
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]

    def get_or_add_member(self, member_id: str) -> ConsumerMember:
        member = self.members.get(member_id)
        if member is None:
            member = self.add_member(ConsumerMember(member_id))
        return member


def _decrement(counter: Counter, key) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


_NOTHING: frozenset[int] = frozenset()


class TargetIndex:
    """The group's target assignment counted, kept up to date by replay (``ConsumerGroup.set_target``).

    ``buckets`` maps a partition count to the members whose target holds that many (members with a
    target only); ``claims`` counts the members holding each (topic id, partition) in their target,
    ``per_topic`` the distinct partitions of a topic held, and ``doubles`` the partitions held by
    more than one member (between the records of one computation, or after a bad log);
    ``untargeted`` are the members without a target, ``orphans`` the targets without a member. The uniform
    assignor's incremental path (``ConsumerAssignment._update_target``, consumer_assignment.py) reads it instead of walking
    every member.
    """

    __slots__ = ("count", "buckets", "claims", "per_topic", "doubles", "untargeted", "orphans")

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.buckets: dict[int, set[str]] = {}
        self.claims: dict[tuple[uuid.UUID, int], int] = {}
        self.per_topic: Counter = Counter()
        self.doubles = 0
        self.untargeted: set[str] = set()
        self.orphans: set[str] = set()

    def update(self, member_id: str, old: Assignment | None, new: Assignment | None) -> None:
        """``member_id``'s target went from ``old`` to ``new`` (None: it has none)."""
        before_all, after_all = old or {}, new or {}
        for tid in before_all.keys() | after_all.keys():
            before, after = before_all.get(tid, _NOTHING), after_all.get(tid, _NOTHING)
            if before is after:
                continue
            for p in before - after:
                self._release(tid, p)
            for p in after - before:
                self._claim(tid, p)
        previous = self.count.pop(member_id, None)
        if previous is not None:
            members = self.buckets[previous]
            members.discard(member_id)
            if not members:
                del self.buckets[previous]
        if new is not None:
            count = sum(len(parts) for parts in new.values())
            self.count[member_id] = count
            self.buckets.setdefault(count, set()).add(member_id)

    def _claim(self, tid: uuid.UUID, p: int) -> None:
        key = (tid, p)
        n = self.claims.get(key, 0)
        self.claims[key] = n + 1
        if n == 0:
            self.per_topic[tid] += 1
        elif n == 1:
            self.doubles += 1

    def _release(self, tid: uuid.UUID, p: int) -> None:
        key = (tid, p)
        n = self.claims[key]
        if n == 1:
            del self.claims[key]
            _decrement(self.per_topic, tid)
        else:
            self.claims[key] = n - 1
            if n == 2:
                self.doubles -= 1
