"""Share sessions (KIP-932): which partitions a share consumer fetches, and its session epoch.

Kafka 4.4's ``SharePartitionManager.newContext`` / ``acknowledgeSessionUpdate``
rules, keyed by (group id, member id):

* ShareFetch with epoch 0 opens a session (replacing the member's previous
  one); acknowledgements in it are INVALID_REQUEST; when
  ``group.share.max.share.sessions`` sessions exist, SHARE_SESSION_LIMIT_REACHED;
* epoch -1 closes the session (SHARE_SESSION_NOT_FOUND if there is none);
* any other epoch needs the session (SHARE_SESSION_NOT_FOUND) at exactly that
  epoch (INVALID_SHARE_SESSION_EPOCH), which then moves to the next
  (wrapping from 2^31-1 to 1); the request's topics are added to the session,
  its forgotten topics removed;
* ShareAcknowledge with epoch 0 is INVALID_SHARE_SESSION_EPOCH.

Memory is bounded: at most ``max_sessions`` sessions, each of at most
``MAX_SESSION_PARTITIONS`` partitions (more is INVALID_REQUEST).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_SESSION_PARTITIONS = 10_000
_INT_MAX = 2**31 - 1


class SessionError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1
    partitions: dict[tuple[uuid.UUID, int], None] = field(default_factory=dict)  # in insertion order
    conn: object = None


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _INT_MAX else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.by_conn: dict[int, set[tuple[str, str]]] = {}  # id(connection) -> its sessions' keys

    def __len__(self) -> int:
        return len(self.sessions)

    def fetch_context(self, group_id: str, member_id: str, epoch: int, add: list, forget: list, has_acks: bool,
                      conn=None) -> tuple[ShareSession | None, ShareSession | None]:
        """For a ShareFetch: ``(session to fetch for or None for a final fetch, session closed or replaced)``."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            session = self._pop(key)
            if session is None:
                raise SessionError(ErrorCode.share_session_not_found)
            return None, session
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise SessionError(ErrorCode.invalid_request)
            if len(self.sessions) - (key in self.sessions) >= self.max_sessions:
                raise SessionError(ErrorCode.share_session_limit_reached)
            if len(add) > MAX_SESSION_PARTITIONS:
                raise SessionError(ErrorCode.invalid_request, "too many partitions in one share session")
            old = self._pop(key)
            session = ShareSession(group_id, member_id, 1, dict.fromkeys(add), conn)
            self.sessions[key] = session
            if conn is not None:
                self.by_conn.setdefault(id(conn), set()).add(key)
            return session, old
        session = self._subsequent(key, epoch)
        for tp in forget:
            session.partitions.pop(tp, None)
        if len(session.partitions) + len(add) > MAX_SESSION_PARTITIONS and any(tp not in session.partitions for tp in add):
            raise SessionError(ErrorCode.invalid_request, "too many partitions in one share session")
        for tp in add:
            session.partitions.setdefault(tp, None)
        session.epoch = next_epoch(session.epoch)
        return session, None

    def acknowledge_context(self, group_id: str, member_id: str, epoch: int) -> tuple[ShareSession, bool]:
        """For a ShareAcknowledge: the session, and whether the request closes it (epoch -1)."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            raise SessionError(ErrorCode.invalid_share_session_epoch)
        if epoch == FINAL_EPOCH:
            session = self._pop(key)
            if session is None:
                raise SessionError(ErrorCode.share_session_not_found)
            return session, True
        session = self._subsequent(key, epoch)
        session.epoch = next_epoch(session.epoch)
        return session, False

    def _subsequent(self, key, epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(ErrorCode.share_session_not_found)
        if session.epoch != epoch:
            raise SessionError(ErrorCode.invalid_share_session_epoch)
        return session

    def _pop(self, key) -> ShareSession | None:
        session = self.sessions.pop(key, None)
        if session is not None and session.conn is not None:
            keys = self.by_conn.get(id(session.conn))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.by_conn[id(session.conn)]
        return session

    def remove_connection(self, conn) -> list[ShareSession]:
        """The sessions opened on a connection that closed (Kafka 4.4 ends them with it)."""
        keys = self.by_conn.pop(id(conn), ())
        return [self.sessions.pop(k) for k in keys if k in self.sessions and self.sessions[k].conn is conn]
