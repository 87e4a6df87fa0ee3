"""Fault injection and request recording, for tests.

A ``Faults`` object attached to a broker (``broker.testing`` does that) is
consulted by the dispatch path for every request while it has a rule or a
recorder; without one the broker pays a single attribute check per request.

    faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)   # next 2 Produce requests
    faults.delay("Fetch", 0.5)                                  # every Fetch answered 0.5 s late
    faults.drop("OffsetCommit")                                 # close the connection instead
    faults.drop_connections(client_id="svc-a")                  # close them now
    faults.stop_heartbeats("my-group")                          # hold the group's heartbeats
    faults.resume_heartbeats("my-group")
    with faults.record("JoinGroup", "SyncGroup") as rec: ...    # rec.requests

APIs are named by key (``12``), Kafka name (``"Heartbeat"``, any case) or
snake case (``"offset_commit"``); errors by code, ``ErrorCode`` member or
name (``"not_coordinator"`` / ``"NOT_COORDINATOR"``).

A failed request is answered without reaching its handler: the response of
the request's version with every ``error_code`` set, per topic and partition
too, mirroring the topics and partitions the request named (so a failed
Produce appends nothing). Held heartbeats (Heartbeat and
ConsumerGroupHeartbeat of the group) get no answer and do not reach the
coordinator, so the members' sessions run out; as Kafka answers a connection's
requests in order, that connection waits with them. ``resume_heartbeats``
lets them through. Rules work from any thread: the broker may run on its own
loop (``broker.testing.BrokerThread``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from protocol.codec import build, drop_unknown, response_class
from protocol.errors import ErrorCode
from protocol.fast import Partial

from .handlers import HANDLERS

HEARTBEAT_APIS = (12, 68)  # Heartbeat, ConsumerGroupHeartbeat
# the answer for a request that gets none (Produce with acks=0)
NO_RESPONSE = object()
_BY_NAME = {mod.NAME.lower(): key for key, mod in HANDLERS.items()}


def api_key(api) -> int:
    """12, "Heartbeat", "heartbeat" or "offset_commit" -> the API key."""
    if isinstance(api, int):
        if api not in HANDLERS:
            raise ValueError(f"API key {api} is not served by kafkalite")
        return int(api)
    key = _BY_NAME.get(str(api).replace("_", "").replace("-", "").lower())
    if key is None:
        raise ValueError(f"unknown API {api!r}; served: {', '.join(sorted(m.NAME for m in HANDLERS.values()))}")
    return key


def api_name(key: int) -> str:
    mod = HANDLERS.get(key)
    return mod.NAME if mod is not None else str(key)


def error_code(error) -> ErrorCode:
    """36, ErrorCode.not_coordinator, "NOT_COORDINATOR" or "not_coordinator"."""
    if isinstance(error, ErrorCode):
        return error
    if isinstance(error, int):
        return ErrorCode(error)
    try:
        return ErrorCode[str(error).strip().lower()]
    except KeyError:
        raise ValueError(f"unknown error {error!r}") from None


def first_error(body) -> int:
    """The response's top-level error code, else the first non-zero nested one (0 if none)."""
    if not isinstance(body, dict):
        code = getattr(body, "error_code", 0)
        return int(code or 0)
    code = body.get("error_code")
    if code:
        return int(code)
    for value in body.values():
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    nested = first_error(item)
                    if nested:
                        return nested
    return 0


# ============================================================== error responses

_SELF = object()  # "the request element itself" (an array of strings or ints)
# response array -> (request array, {response field: request field}, nested specs)
_MIRROR: dict[int, list] = {
    0: [("responses", "topic_data", {"name": "name", "topic_id": "topic_id"}, [("partition_responses", "partition_data", {"index": "index"}, [])])],
    1: [("responses", "topics", {"topic": "topic", "topic_id": "topic_id"}, [("partitions", "partitions", {"partition_index": "partition"}, [])])],
    2: [("topics", "topics", {"name": "name"}, [("partitions", "partitions", {"partition_index": "partition_index"}, [])])],
    3: [("topics", "topics", {"name": "name", "topic_id": "topic_id"}, [])],
    8: [("topics", "topics", {"name": "name", "topic_id": "topic_id"}, [("partitions", "partitions", {"partition_index": "partition_index"}, [])])],
    9: [
        ("topics", "topics", {"name": "name"}, [("partitions", "partition_indexes", {"partition_index": _SELF}, [])]),
        ("groups", "groups", {"group_id": "group_id"}, [("topics", "topics", {"name": "name"}, [("partitions", "partition_indexes", {"partition_index": _SELF}, [])])]),
    ],
    10: [("coordinators", "coordinator_keys", {"key": _SELF}, [])],
    15: [("groups", "groups", {"group_id": _SELF}, [])],
    19: [("topics", "topics", {"name": "name"}, [])],
    20: [("responses", "topic_names", {"name": _SELF}, []), ("responses", "topics", {"name": "name", "topic_id": "topic_id"}, [])],
    23: [("topics", "topics", {"topic": "topic"}, [("partitions", "partitions", {"partition": "partition"}, [])])],
    32: [("results", "resources", {"resource_type": "resource_type", "resource_name": "resource_name"}, [])],
    37: [("results", "topics", {"name": "name"}, [])],
    42: [("results", "groups_names", {"group_id": _SELF}, [])],
    47: [("topics", "topics", {"name": "name"}, [("partitions", "partitions", {"partition_index": "partition_index"}, [])])],
}
# fields that must not read as a valid answer
_EXTRA = {"node_id": -1, "port": -1, "leader_id": -1, "committed_offset": -1, "offset": -1, "base_offset": -1, "high_watermark": -1}
_GENERIC = frozenset({"error_code", "error_message", "throttle_time", *_EXTRA})  # filled everywhere, kept where the entity has them


def _mirror(request, specs, code: int, message: str | None) -> dict:
    out: dict[str, Any] = {"error_code": code, "error_message": message, "throttle_time": 0, **_EXTRA}
    for resp_field, req_field, copy, nested in specs:
        items = getattr(request, req_field, None)
        if items is None:
            continue
        built = []
        for item in items:
            entry: dict[str, Any] = {}
            for dst, src in copy.items():
                value = item if src is _SELF else getattr(item, src, None)
                if value is not None:
                    entry[dst] = value
            if not isinstance(item, (str, int)):
                entry.update(_mirror(item, nested, code, message))
            else:
                entry.update({"error_code": code, "error_message": message, **_EXTRA})
            built.append(entry)
        out[resp_field] = built
    return out


def error_response(event, error, message: str | None = None):
    """The response to ``event`` (a decoded request) failing with ``error`` everywhere."""
    code = int(error_code(error))
    if event.api_key == 0 and getattr(event.body, "acks", 1) == 0:
        return NO_RESPONSE
    cls = response_class(event.api_key, event.api_version)
    body = Partial(drop_unknown(cls, _mirror(event.body, _MIRROR.get(event.api_key, []), code, message), _GENERIC))
    # build now, so a bad spec shows up as a fault error rather than a broker bug
    build(cls, body)
    return body  # encoded by the generic encoder, which fills in the fields left out


# ============================================================== rules


@dataclass(eq=False)
class Rule:
    """One fault. ``remaining`` None: until removed. ``fired``: how often it applied."""

    kind: str  # fail | delay | drop | hold
    api_keys: frozenset[int] | None
    remaining: int | None = None
    client_id: str | None = None
    listener: str | None = None
    group: str | None = None
    error: ErrorCode | None = None
    message: str | None = None
    seconds: float = 0.0
    fired: int = 0
    owner: Any = field(default=None, repr=False)

    @property
    def live(self) -> bool:
        return self.remaining is None or self.remaining > 0

    def matches(self, conn, event) -> bool:
        if not self.live:
            return False
        if self.api_keys is not None and event.api_key not in self.api_keys:
            return False
        if self.client_id is not None and event.client_id != self.client_id:
            return False
        if self.listener is not None and (conn.listener is None or conn.listener.name != self.listener):
            return False
        if self.group is not None and getattr(event.body, "group_id", None) != self.group:
            return False
        return True

    def remove(self) -> None:
        if self.owner is not None:
            self.owner.remove(self)


@dataclass
class Plan:
    """What the dispatch path does with one request."""

    response: Any = None  # an error response instead of the handler's
    delay: float = 0.0
    drop: bool = False
    hold: Any = None  # async callable: wait until released
    faults: list[str] = field(default_factory=list)


@dataclass
class RecordedRequest:
    api_key: int
    api: str
    version: int
    correlation_id: int
    client_id: str | None
    listener: str | None
    peer: str
    request: Any  # the decoded kio request
    response: Any  # the response body (dict) or None
    error: ErrorCode  # first error of the response (none for success)
    faults: list[str]  # the faults applied: failed, delayed, dropped, held
    time: float


class Recorder:
    """Requests seen while recording; use as a context manager or call ``stop()``."""

    def __init__(self, owner: Faults, api_keys: frozenset[int] | None, client_id: str | None) -> None:
        self.owner = owner
        self.api_keys = api_keys
        self.client_id = client_id
        self.requests: list[RecordedRequest] = []

    def matches(self, event) -> bool:
        return (self.api_keys is None or event.api_key in self.api_keys) and (self.client_id is None or event.client_id == self.client_id)

    def of(self, api) -> list[RecordedRequest]:
        key = api_key(api)
        return [r for r in self.requests if r.api_key == key]

    def apis(self) -> list[str]:
        return [r.api for r in self.requests]

    def stop(self) -> None:
        self.owner.remove(self)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __len__(self) -> int:
        return len(self.requests)

    def __iter__(self):
        return iter(list(self.requests))


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rules: list[Rule] = []
        self.recorders: list[Recorder] = []
        self.active = False
        self._broker = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._held: list[tuple[Rule, asyncio.Future]] = []

    # -- wiring -----------------------------------------------------------
    def attach(self, broker) -> None:
        """Serve ``broker`` (a broker.server.Broker); called when it is built."""
        self._broker = broker
        broker.faults = self
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        broker.update_hooks()

    def _changed(self) -> None:
        with self._lock:
            self.rules = [r for r in self.rules if r.live]
            self.active = bool(self.rules or self.recorders)
        broker = self._broker
        if broker is not None:
            broker.update_hooks()

    def _add(self, rule: Rule) -> Rule:
        rule.owner = self
        with self._lock:
            self.rules.append(rule)
        self._changed()
        return rule

    def remove(self, item) -> None:
        with self._lock:
            if isinstance(item, Rule):
                item.remaining = 0  # not live: a request it matched a moment ago is not held
            if isinstance(item, Recorder):
                self.recorders = [r for r in self.recorders if r is not item]
            else:
                self.rules = [r for r in self.rules if r is not item]
        if isinstance(item, Rule) and item.kind == "hold":
            self._release(lambda rule: rule is item)
        self._changed()

    def clear(self) -> None:
        """Remove every rule and recorder, releasing held heartbeats."""
        with self._lock:
            for rule in self.rules:
                rule.remaining = 0
            self.rules = []
            self.recorders = []
        self._release(lambda rule: True)
        self._changed()

    # -- the API ----------------------------------------------------------
    @staticmethod
    def _keys(api) -> frozenset[int] | None:
        if api is None:
            return None
        if isinstance(api, (list, tuple, set, frozenset)):
            return frozenset(api_key(a) for a in api)
        return frozenset({api_key(api)})

    def fail(self, api, error, *, count: int | None = 1, client_id: str | None = None, listener: str | None = None,
             group: str | None = None, message: str | None = None) -> Rule:
        """Answer the next ``count`` requests of ``api`` (None: every one until removed) with ``error``."""
        return self._add(Rule("fail", self._keys(api), count, client_id, _upper(listener), group, error_code(error), message))

    def delay(self, api, seconds: float, *, count: int | None = None, client_id: str | None = None,
              listener: str | None = None, group: str | None = None) -> Rule:
        """Hold the responses of ``api`` for ``seconds`` (the request is handled first)."""
        return self._add(Rule("delay", self._keys(api), count, client_id, _upper(listener), group, seconds=float(seconds)))

    def drop(self, api=None, *, count: int | None = 1, client_id: str | None = None, listener: str | None = None,
             group: str | None = None) -> Rule:
        """Close the client's connection instead of handling its next request of ``api`` (None: any)."""
        return self._add(Rule("drop", self._keys(api), count, client_id, _upper(listener), group))

    def stop_heartbeats(self, group: str, *, client_id: str | None = None) -> Rule:
        """Hold Heartbeat and ConsumerGroupHeartbeat requests of ``group`` unanswered."""
        return self._add(Rule("hold", frozenset(HEARTBEAT_APIS), None, client_id, None, group))

    def resume_heartbeats(self, group: str | None = None) -> None:
        """Undo ``stop_heartbeats`` for ``group`` (None: every group); held requests go through."""
        for rule in list(self.rules):
            if rule.kind == "hold" and (group is None or rule.group == group):
                self.remove(rule)

    def record(self, *apis, client_id: str | None = None) -> Recorder:
        """Record requests (of ``apis``, or all) and their responses."""
        keys = frozenset(api_key(a) for a in apis) if apis else None
        rec = Recorder(self, keys, client_id)
        with self._lock:
            self.recorders.append(rec)
        self._changed()
        return rec

    def drop_connections(self, *, client_id: str | None = None, listener: str | None = None) -> int:
        """Close the open connections of ``client_id`` (as its last request named it) now; returns how many."""
        broker = self._broker
        if broker is None:
            return 0

        def close() -> int:
            n = 0
            for conn in list(broker.connections):
                req = conn.ctx.request if conn.ctx is not None else None
                named = req.client_id if req is not None else conn.client_id
                if client_id is not None and named != client_id:
                    continue
                if listener is not None and (conn.listener is None or conn.listener.name != _upper(listener)):
                    continue
                conn.log.info("fault injected: connection dropped")
                conn.close()
                n += 1
            return n

        return self._on_loop(close)

    # -- the dispatch path -----------------------------------------------
    def plan(self, conn, event) -> Plan | None:
        """Called for every request while active; None when no rule applies."""
        plan = None
        changed = False
        with self._lock:
            for rule in self.rules:
                if not rule.matches(conn, event):
                    continue
                if plan is None:
                    plan = Plan()
                if rule.kind == "fail":
                    if plan.response is not None:
                        continue
                    plan.response = error_response(event, rule.error, rule.message)
                    plan.faults.append("failed")
                elif rule.kind == "delay":
                    plan.delay = max(plan.delay, rule.seconds)
                    plan.faults.append("delayed")
                elif rule.kind == "drop":
                    plan.drop = True
                    plan.faults.append("dropped")
                elif rule.kind == "hold":
                    if plan.hold is not None:
                        continue
                    plan.hold = self._holder(rule)
                    plan.faults.append("held")
                rule.fired += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                    changed = changed or rule.remaining <= 0
        if changed:
            self._changed()
        return plan

    def recorded(self, conn, event, body, plan: Plan | None) -> None:
        if not self.recorders:
            return
        for rec in self.recorders:
            if rec.matches(event):
                rec.requests.append(
                    RecordedRequest(
                        api_key=event.api_key,
                        api=api_name(event.api_key),
                        version=event.api_version,
                        correlation_id=event.correlation_id,
                        client_id=event.client_id,
                        listener=conn.listener.name if conn.listener is not None else None,
                        peer=getattr(conn, "peer", "?"),
                        request=event.body,
                        response=body,
                        error=ErrorCode(first_error(body)) if body is not None else ErrorCode.none,
                        faults=list(plan.faults) if plan is not None else [],
                        time=time.time(),
                    )
                )

    def _holder(self, rule: Rule):
        async def hold() -> None:
            fut = asyncio.get_running_loop().create_future()
            entry = (rule, fut)
            with self._lock:
                if not rule.live:  # removed between plan() and now
                    return
                self._held.append(entry)
            try:
                await fut
            finally:
                with self._lock:
                    self._held = [e for e in self._held if e is not entry]

        return hold

    def _release(self, which) -> None:
        with self._lock:
            entries = [e for e in self._held if which(e[0])]
        for _, fut in entries:
            loop = fut.get_loop()
            loop.call_soon_threadsafe(_resolve, fut)

    def release_held(self) -> None:
        """Let every held request through (the broker is stopping); the rules stay."""
        self._release(lambda rule: True)

    def _on_loop(self, fn):
        loop = self._loop
        if loop is None or loop.is_closed():
            return fn()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return fn()

        async def call():
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), loop).result(10)


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def _upper(name: str | None) -> str | None:
    return name.upper() if name is not None else None
