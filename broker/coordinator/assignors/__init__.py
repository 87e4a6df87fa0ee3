"""KIP-848 server-side assignors, as pure functions of (group, topics).

The coordinator calls ``ASSIGNORS[choose_assignor(...)].assign(spec, topics)``
whenever the group epoch moves, feeding the previous *target* assignment in
``GroupSpec.current`` so that ``uniform`` can be sticky.

``group.consumer.assignors`` is ``uniform,range`` in Kafka; the first entry is
the default. The assignor used is the one named in the ``ServerAssignor``
field by the most members; members that name none do not vote. Kafka breaks a
tie by ``HashMap`` iteration order, which for the two built-in names puts
``uniform`` before ``range``; here ties go to the assignor listed first in the
configuration, which gives the same answer for the built-ins and is
deterministic for any list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .range_assignor import RangeAssignor
from .spec import Assignment, Assignor, GroupSpec, MemberSubscription, TopicPartitions, UnsupportedAssignor
from .uniform import UniformAssignor

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR",
    "Assignment",
    "Assignor",
    "GroupSpec",
    "MemberSubscription",
    "RangeAssignor",
    "TopicPartitions",
    "UniformAssignor",
    "UnsupportedAssignor",
    "choose_assignor",
    "choose_from_counts",
    "get_assignor",
    "validate_assignor",
]

# Insertion order is the configured order (group.consumer.assignors).
ASSIGNORS: dict[str, Assignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
DEFAULT_ASSIGNOR = "uniform"


def validate_assignor(name: str | None, available: Mapping[str, Assignor] = ASSIGNORS) -> None:
    """Heartbeat check: ``None`` (no preference) or a configured name.

    Anything else, including ``""``, raises ``UnsupportedAssignor`` -- Kafka
    rejects every non-null ``ServerAssignor`` it does not know.
    """
    if name is not None and name not in available:
        raise UnsupportedAssignor(name, list(available))


def get_assignor(name: str, available: Mapping[str, Assignor] = ASSIGNORS) -> Assignor:
    try:
        return available[name]
    except KeyError:
        raise UnsupportedAssignor(name, list(available)) from None


def choose_assignor(
    requested: Iterable[str | None],
    available: Mapping[str, Assignor] = ASSIGNORS,
    default: str | None = None,
) -> str:
    """The assignor to run for a group, given each member's ``ServerAssignor``.

    The most requested name wins; ties go to the name configured first
    (``available``'s order); if no member names one, ``default`` (by default
    the first configured assignor). Unknown names raise ``UnsupportedAssignor``.
    """
    counts: dict[str, int] = {}
    for name in requested:
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
    return choose_from_counts(counts, available, default)


def choose_from_counts(counts: Mapping[str, int], available: Mapping[str, Assignor] = ASSIGNORS, default: str | None = None) -> str:
    """``choose_assignor`` given how many members name each assignor (a group keeps these counts)."""
    for name in counts:
        if name not in available:
            raise UnsupportedAssignor(name, list(available))
    if not any(counts.values()):
        if default is not None:
            return default
        return next(iter(available)) if available else DEFAULT_ASSIGNOR
    best = None
    best_count = 0
    for name in available:  # configured order: the first of equals wins
        c = counts.get(name, 0)
        if c > best_count:
            best, best_count = name, c
    assert best is not None
    return best
