"""Input and output types shared by the server-side assignors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "Assignment",
    "Assignor",
    "GroupSpec",
    "MemberSubscription",
    "TopicPartitions",
    "UnsupportedAssignor",
    "effective_subscriptions",
]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member as an assignor sees it.

    ``topics`` are topic names, already resolved (regular expressions expanded).
    Names missing from the ``TopicPartitions`` handed to ``assign`` are ignored:
    a member may subscribe to a topic that does not exist (yet).
    """

    member_id: str
    topics: frozenset[str]
    rack: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The members and the current target assignment (the stickiness input).

    ``current`` may mention members that have left (ignored), topics that were
    deleted or unsubscribed, partitions past a topic's count and even a
    partition claimed by two members; the assignors cope with all of it.
    """

    members: dict[str, MemberSubscription]
    current: dict[str, dict[str, frozenset[int]]]


TopicPartitions = dict[str, int]
"""Topic name -> partition count, existing topics only."""

Assignment = dict[str, dict[str, frozenset[int]]]
"""Member id -> topic -> partitions. Every member is present; topics with no
partitions for that member are left out (so a member may map to ``{}``)."""


class Assignor(Protocol):
    name: str

    def assign(self, group: GroupSpec, topics: TopicPartitions) -> Assignment: ...


class UnsupportedAssignor(ValueError):
    """A member asked for a server assignor that is not configured.

    The heartbeat handler answers it with ``UNSUPPORTED_ASSIGNOR`` (112).
    """

    def __init__(self, name: str | None, supported: list[str]) -> None:
        super().__init__(f"ServerAssignor {name} is not supported. Supported assignors: {', '.join(supported)}.")
        self.assignor_name = name
        self.supported = supported


def effective_subscriptions(group: GroupSpec, topics: TopicPartitions) -> dict[str, frozenset[str]]:
    """Each member's subscription restricted to topics that exist."""
    out: dict[str, frozenset[str]] = {}
    for member_id, sub in group.members.items():
        wanted = sub.topics
        # Fast path: everything subscribed exists (the usual case).
        if all(t in topics for t in wanted):
            out[member_id] = frozenset(wanted)
        else:
            out[member_id] = frozenset(t for t in wanted if t in topics)
    return out
