"""Requests of group members that have arrived but are not handled yet: evidence of life.

Kafka reads requests on network threads and queues them for the coordinator's
threads, so a heartbeat that arrived before a session's deadline is in the
coordinator's queue, ahead of the expiry, even when the coordinator is busy.
kafkalite reads and handles requests on one event loop: on a machine starved
of CPU a heartbeat can be read (decoded and queued on its connection) and still
wait behind other work when the member's session timer comes due. The
connection records each such request here when it is queued (``arrived``) and
takes it out just before its handler runs (``started``) or when the connection
closes with it still queued (``dropped``: then the time it was read is kept).
The coordinator's expiry timers ask both (``GroupShard.defer_expiry``): while
a request of the member waits they check again shortly instead of expiring it,
and a session counts from a request dropped unhandled as from one handled.
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
    member id) are queued and not yet handled, and when one was last read and then dropped
    unhandled (its connection closed first).

    A handled request is judged by the coordinator (a fenced member's heartbeats keep
    nothing alive); only one never handled is evidence by itself. The times are kept for
    a bounded number of members (``capacity``, oldest forgotten first), so member ids
    that a client makes up cannot grow them without bound.
    """

    __slots__ = ("_waiting", "_heard", "clock", "capacity")

    def __init__(self, clock: Callable[[], float] = time.monotonic, capacity: int = 65536) -> None:
        self._waiting: dict[tuple[str, str], list] = {}  # key -> [requests queued, when the last was read]
        self._heard: dict[tuple[str, str], float] = {}  # in the order last heard, oldest first
        self.clock = clock
        self.capacity = capacity

    def __len__(self) -> int:
        return len(self._waiting)

    def arrived(self, event) -> None:
        key = _member(event)
        if key is not None:
            entry = self._waiting.get(key)
            if entry is None:
                self._waiting[key] = [1, self.clock()]
            else:
                entry[0] += 1
                entry[1] = self.clock()

    def started(self, event) -> None:
        """The request's handler runs now: the coordinator judges it."""
        key = _member(event)
        if key is not None:
            self._done(key)

    def dropped(self, event) -> None:
        """The request's connection closed before its handler ran: it was sent by a live
        client all the same (one that gave up waiting for its answer, say)."""
        key = _member(event)
        if key is not None:
            at = self._done(key)
            if at is not None and event.api_key != _OFFSET_COMMIT:  # a commit is no heartbeat of a KIP-848 member
                heard = self._heard
                heard.pop(key, None)
                heard[key] = at
                if len(heard) > self.capacity:
                    del heard[next(iter(heard))]

    def _done(self, key: tuple[str, str]) -> float | None:
        entry = self._waiting.get(key)
        if entry is None:
            return None
        entry[0] -= 1
        if entry[0] <= 0:
            del self._waiting[key]
        return entry[1]

    def waiting(self, group_id: str, member_id: str) -> bool:
        """A request of the member has been read and waits to be handled."""
        return (group_id, member_id) in self._waiting

    def silent_ms(self, group_id: str, member_id: str) -> int | None:
        """Milliseconds since a request of the member (other than OffsetCommit) that was
        dropped unhandled was read, or None."""
        at = self._heard.get((group_id, member_id))
        return None if at is None else int((self.clock() - at) * 1000)
