"""Admission: what the broker lets in and how much it holds for requests.

``Admission`` is a part of ``broker.server.Broker`` (a mixin: the connections
read and write these counters on every request, as attributes of the broker):

- the connection limits (``max.connections``, ``max.connections.per.ip`` and
  its overrides): ``admit`` counts a new connection in or refuses it;
- the request pool (``queued.max.request.bytes``): the bytes all connections
  hold for requests, and which connections are not read from while it is full
  (``_pool_over``, ``pool_released``, the exempt connection);
- the periodic sweep: idle connections, connections whose client has gone
  while they were paused, the exempt connection's turn, returning freed memory
  to the operating system;
- the budget of descriptors held by answers waiting to be sent from files
  (``waiting_fds``);
- putting a listener's socket in the listening state (``listen_now``).

See the package docstring (broker/net/__init__.py) for how they bound memory.
"""

from __future__ import annotations

import asyncio
import gc
import select
import socket
import sys
from typing import TYPE_CHECKING

from .. import memory
from ..config import INT_MAX, BrokerConfig, per_ip_overrides
from .common import _HUNG_UP, _LINGER, _POLLRDHUP, _POOL, _SMALL_RESERVE, _TRIM_BYTES, _WRITE_HIGH, _now, log

if TYPE_CHECKING:
    from .connection import KafkaConnection

_BACKLOG = 100  # asyncio's and uvloop's default for create_server


class Admission:
    """The broker's connection limits, request pool and sweep (a mixin of ``Broker``)."""

    def _init_admission(self, config: BrokerConfig) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        # answers: the write buffer limits; requests: what one connection may queue
        self.write_high = min(_WRITE_HIGH, config.max_frame_bytes)
        self.write_low = self.write_high // 4
        self.conn_queue_bytes = config.max_frame_bytes
        # requests, broker-wide (queued.max.request.bytes; see broker/net/__init__.py)
        self.request_bytes = 0
        limit = config.queued_max_request_bytes
        self.request_bytes_limit = limit if limit > 0 else sys.maxsize
        self.request_bytes_resume = self.request_bytes_limit - self.request_bytes_limit // 4
        # past the limit one connection may finish its frame, but nothing may take the total past this
        self.request_bytes_cap = self.request_bytes_limit + config.max_frame_bytes
        # and the others' small requests have this much more before nothing is read at all
        reserve = max(self.request_bytes_limit // 8, _SMALL_RESERVE)
        self.request_bytes_hard = self.request_bytes_cap + reserve
        self.request_bytes_unhard = self.request_bytes_hard - reserve // 2
        self.pool_full = False
        self.pool_capped = False
        self.pool_exempt: KafkaConnection | None = None
        self.pool_episodes = 0
        self._exempt_mark = -1
        self._exempt_skip: set[KafkaConnection] = set()
        # connection limits
        self.max_connections = config.max_connections
        self.per_ip_limit = config.max_connections_per_ip
        self.per_ip_overrides = per_ip_overrides(config.max_connections_per_ip_overrides or ())
        # connections by IP address, kept only when there is a limit per address
        self.per_ip: dict[str, int] | None = {} if self.per_ip_limit < INT_MAX or self.per_ip_overrides else None
        self.refused = 0
        # the sweep: idle connections, the pool's exempt connection, memory trimming
        idle = config.connections_max_idle_ms
        self.idle_s = idle / 1000 if idle >= 0 else None
        self.sweep_s = min(1.0, max(0.01, idle / 4000)) if idle >= 0 else 1.0
        self._sweep_handle: asyncio.TimerHandle | None = None
        self.trim_due = 0
        self._trim_seen = 0
        # descriptors held by Fetch answers waiting for their client's socket ("sending from
        # files"): at most a quarter of the process's, so that clients that do not read cannot
        # take the descriptors segments, connections and new topics need; past it, answers
        # are read into memory as on TLS
        self.waiting_fds = 0
        self.waiting_fds_max = max(64, _open_files_limit() // 4)


    def _reap_hung_up(self, paused: list[KafkaConnection]) -> None:
        """Close the connections not being read from whose clients have gone.

        Reading is how a transport learns that its peer closed; one paused
        (full pool, unread answers) would hold its memory until the idle sweep.
        One poll(2) for all of them asks the kernel instead.
        """
        by_fd: dict[int, KafkaConnection] = {}
        for c in paused:
            if not c.closing:  # not just closed as idle
                sock = c.transport.get_extra_info("socket")
                if sock is not None:
                    by_fd[sock.fileno()] = c
        if not by_fd:
            return
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, _POLLRDHUP)
        for fd, events in poller.poll(0):
            if events & _HUNG_UP:
                by_fd[fd].abort()

    # -- connection limits ------------------------------------------------
    def admit(self, conn, transport) -> bool:
        """Count a new connection in, or say no (max.connections, max.connections.per.ip).

        ``conn`` is a KafkaConnection, or on a TLS listener the TlsAccept of a
        connection just accepted: those still in their handshake count too."""
        if len(self.connections) + len(self.handshaking) >= self.max_connections:
            self.refused += 1
            return False
        per_ip = self.per_ip
        if per_ip is not None:
            peer = transport.get_extra_info("peername")
            ip = peer[0] if peer else ""
            n = per_ip.get(ip, 0)
            if n >= self.per_ip_overrides.get(ip, self.per_ip_limit):
                self.refused += 1
                return False
            per_ip[ip] = n + 1
            conn.ip = ip
        return True

    def _forget_ip(self, ip: str) -> None:
        n = self.per_ip[ip] - 1
        if n:
            self.per_ip[ip] = n
        else:
            del self.per_ip[ip]

    # -- request memory (queued.max.request.bytes) ---------------------------
    def _pool_over(self, conn: KafkaConnection, completed: bool) -> None:
        """``conn`` took the broker to or past the limit: hold back the connections in the
        middle of a large frame, but one; past ``request_bytes_hard``, every connection."""
        large = conn.in_large_frame
        if not self.pool_full:
            self.pool_full = True
            self.pool_episodes += 1
            for c in self.connections:
                if c.in_large_frame:
                    c._pause(_POOL)
            self._pick_exempt()
        elif conn is self.pool_exempt:
            if completed or self.request_bytes >= self.request_bytes_cap:  # its frame is in, or it holds too much
                self.pool_exempt = None
                if large:
                    conn._pause(_POOL)
                self._pick_exempt()
        elif large:
            conn._pause(_POOL)
        if self.request_bytes >= self.request_bytes_hard and not self.pool_capped:
            self.pool_capped = True
            self.pool_exempt = None
            for c in self.connections:
                c._pause(_POOL)

    def _pool_uncap(self) -> None:
        """Half a reserve below ``request_bytes_hard`` again: read small requests again."""
        self.pool_capped = False
        for c in self.connections:
            if not c.in_large_frame:
                c._resume(_POOL)
        if self.pool_exempt is None:
            self._pick_exempt()

    def pool_released(self) -> None:
        """Request bytes were given back while the pool is full."""
        total = self.request_bytes
        if total < self.request_bytes_resume:
            self._pool_clear()
        elif self.pool_capped and total < self.request_bytes_unhard:
            self._pool_uncap()

    def _pick_exempt(self) -> None:
        """Let the connection furthest into a frame (and held back by nothing else) finish it."""
        best = None
        most = -1
        skip = self._exempt_skip
        if self.request_bytes >= self.request_bytes_cap:
            return  # the sweep looks again once requests have been handled
        for attempt in (0, 1):
            for c in self.connections:
                if c.paused == _POOL and c.proto is not None and c not in skip:
                    proto = c.proto
                    if proto.in_large_frame and proto.buffered > most:
                        best, most = c, proto.buffered
            if best is not None or not skip or attempt:
                break
            skip.clear()  # every candidate stalled once: go round again
        self.pool_exempt = best
        if best is not None:
            self._exempt_mark = best.held
            best._resume(_POOL)

    def _pool_clear(self) -> None:
        """Back under the resume mark: read from everyone again."""
        self.pool_full = False
        self.pool_capped = False
        self.pool_exempt = None
        self._exempt_skip.clear()
        for c in self.connections:
            c._resume(_POOL)

    # -- the sweep --------------------------------------------------------
    def _sweep(self) -> None:
        self._sweep_handle = self.loop.call_later(self.sweep_s, self._sweep)
        now = _now()
        cutoff = now - self.idle_s if self.idle_s is not None else -1.0
        linger = now - _LINGER
        idle: list[KafkaConnection] = []
        paused: list[KafkaConnection] = []
        for c in self.connections:  # one pass over them all
            if c.seen < cutoff and (c.task is None or c.waiter is not None):
                idle.append(c)  # with a request in hand (a task not waiting) it is not idle
            elif c.waiter is not None and c.seen < linger:
                c.wake()  # quiet for a while: its task ends, an idle connection keeps none
            if c.paused and not c.closing:
                paused.append(c)
        for c in idle:
            c.abort()
        if idle:
            log.debug("closed idle connections", count=len(idle), idle_ms=round(self.idle_s * 1000))
        if paused and _POLLRDHUP:
            self._reap_hung_up(paused)
        if self.refused:
            log.warning(
                "refused connections over the limit",
                count=self.refused,
                max_connections=self.max_connections,
                max_connections_per_ip=self.per_ip_limit,
            )
            self.refused = 0
        if self.pool_episodes:
            log.info(
                "reading paused: queued.max.request.bytes reached",
                times=self.pool_episodes,
                limit=self.request_bytes_limit,
                held=self.request_bytes,
            )
            self.pool_episodes = 0
        exempt = self.pool_exempt
        if exempt is not None:
            if exempt.held == self._exempt_mark:  # no byte since the last sweep: give another a turn
                self._exempt_skip.add(exempt)
                self.pool_exempt = None
                exempt._pause(_POOL)
                self._pick_exempt()
            else:
                self._exempt_mark = exempt.held
        elif self.pool_full:
            self._pick_exempt()
        due = self.trim_due
        if due >= _TRIM_BYTES and due == self._trim_seen:  # after the burst, not during it
            self.trim_due = self._trim_seen = 0
            # a full collection also empties the interpreter's free lists, whose
            # leftovers would keep the burst's small-object arenas from being freed
            gc.collect()
            memory.release()
        else:
            self._trim_seen = due



def _open_files_limit() -> int:
    try:
        import resource
    except ImportError:  # pragma: no cover - not a Unix
        return 1024
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20



def listen_now(server) -> None:
    """Put a server made with ``start_serving=False`` in the listening state now. Bound but not
    listening, its port could still be bound by another process (SO_REUSEADDR), which would
    then find out only after loading its data directory; accepting waits for start_serving()."""
    for transport_socket in server.sockets:
        sock = socket.socket(fileno=transport_socket.fileno())
        try:
            sock.listen(_BACKLOG)
        finally:
            sock.detach()  # the server owns the descriptor
