"""Requests of group members that have arrived but are not handled yet: evidence of life.

Kafka reads requests on network threads and queues them for the coordinator's
threads, so a heartbeat that arrived before a session's deadline is in the
coordinator's queue, ahead of the expiry, even when the coordinator is busy.
kafkalite reads and handles requests on one event loop: on a machine starved
of CPU a heartbeat can be read (decoded and queued on its connection) and still
wait behind other work when the member's session timer comes due. The
connection records each such request here when it is queued (``arrived``) and
takes it out just before its handler runs (``started``) or when the connection
closes with it still queued, and keeps the time the member's last request was
read. The coordinator's expiry timers ask both (``GroupShard.defer_expiry``):
while a request of the member waits they check again shortly instead of
expiring it, and a session counts from the last request read, not from the
last one handled.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# OffsetCommit (a classic member's commit counts as a heartbeat), JoinGroup, Heartbeat,
# SyncGroup, ConsumerGroupHeartbeat, ShareGroupHeartbeat
LIVENESS_APIS = frozenset({8, 11, 12, 14, 68, 76})
_OFFSET_COMMIT = 8


def _member(event) -> tuple[str, str] | None:
    body = event.body
    group_id = getattr(body, "group_id", None)
    member_id = getattr(body, "member_id", None)
    if group_id and member_id and type(group_id) is str and type(member_id) is str:
        return group_id, member_id
    return None


class Arrivals:
    """Requests of group members read from their connections: how many of each (group id,
    member id) are queued and not yet handled, and when the last one was read.

    The second is kept for a bounded number of members (``capacity``, oldest forgotten
    first), so member ids that a client makes up cannot grow it without bound.
    """

    __slots__ = ("_waiting", "_heard", "clock", "capacity")

    def __init__(self, clock: Callable[[], float] = time.monotonic, capacity: int = 65536) -> None:
        self._waiting: dict[tuple[str, str], int] = {}
        self._heard: dict[tuple[str, str], float] = {}  # in the order last heard, oldest first
        self.clock = clock
        self.capacity = capacity

    def __len__(self) -> int:
        return len(self._waiting)

    def arrived(self, event) -> None:
        key = _member(event)
        if key is not None:
            waiting = self._waiting
            waiting[key] = waiting.get(key, 0) + 1
            if event.api_key != _OFFSET_COMMIT:  # a commit is waited for, but it is no heartbeat of a KIP-848 member
                heard = self._heard
                heard.pop(key, None)
                heard[key] = self.clock()
                if len(heard) > self.capacity:
                    del heard[next(iter(heard))]

    def started(self, event) -> None:
        """The request's handler runs now (or it never will: its connection closed)."""
        key = _member(event)
        if key is not None:
            waiting = self._waiting
            n = waiting.get(key, 0) - 1
            if n > 0:
                waiting[key] = n
            else:
                waiting.pop(key, None)

    def waiting(self, group_id: str, member_id: str) -> bool:
        """A request of the member has been read and waits to be handled."""
        return (group_id, member_id) in self._waiting

    def silent_ms(self, group_id: str, member_id: str) -> int | None:
        """Milliseconds since a request of the member other than OffsetCommit was last read
        (handled or not: a client that gave up waiting for its answer and closed the
        connection was alive when it sent it), or None."""
        at = self._heard.get((group_id, member_id))
        return None if at is None else int((self.clock() - at) * 1000)
