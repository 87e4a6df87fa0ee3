"""KIP-848 against classic eager and classic cooperative rebalancing: one member joins a big group.

Used by ``python -m bench.groups`` (phase ``kip848``). For a group size N, one
broker holds a topic of N partitions and, one after the other, three groups of
N - 1 simulated members subscribed to it:

* ``kip848``: ConsumerGroupHeartbeat v1 with the broker's server-side assignor
  (``uniform``, the default);
* ``eager``: classic JoinGroup/SyncGroup/Heartbeat, protocol ``range``; on a
  rebalance every member gives up all its partitions, rejoins, and the leader
  computes a range assignment;
* ``cooperative``: classic, protocol ``cooperative-sticky``: members keep
  their partitions through the rebalance and list them in the subscription's
  owned_partitions; the leader computes a sticky assignment and withholds
  partitions that change owner, which their old owners revoke and then rejoin
  at once, so a second rebalance hands them to the new owner.

Once the group is settled (N - 1 partitions held by one member each, the
N-th by one of them too), the N-th member joins and the group settles again
with N members on N partitions. That join is measured (``JoinSample``); then
the joiner leaves, the group settles, and the next repetition begins.

Every simulated member behaves like an ideal real client: it heartbeats every
``interval`` seconds (KIP-848: the interval the broker hands out; classic: the
same interval, client-side), reacts to every answer at once (revokes in zero
time, heartbeats again straight after a changed assignment, rejoins straight
after REBALANCE_IN_PROGRESS) and only ever learns about a rebalance from an
answer to one of its own requests. Before every join the members' heartbeat
phases are re-drawn uniformly over one interval (the phases of a long-lived
group are spread out).

Timings are taken in this process when an answer is handled (``perf_counter``).
A partition's *gap* runs from the moment its owner gave it up (eager: when the
owner learned of the rebalance; otherwise when it was told to revoke it) to the
moment a member was handed it again; for eager members that get their own
partition back this is exactly their rejoin -> SyncGroup-answer pause.
"""

from __future__ import annotations

import asyncio
import base64
import random
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription

from protocol.codec import build, decode, encode
from protocol.errors import ErrorCode

from .group_client import Conn, Template, decode_response, encode_request
from .procstat import oncpu_seconds, self_cpu_seconds

CGH, CGH_V = 68, 1
JOIN, SYNC, HEARTBEAT, LEAVE, CREATE_TOPICS = 11, 14, 12, 13, 19
JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V = 9, 5, 4, 5
SESSION_MS = 30_000
REBALANCE_MS = 60_000
EPOCH_SENTINEL = 0x5A5A5A5A
PROTOCOLS = ("kip848", "eager", "cooperative")
LABELS = {"kip848": "KIP-848 (uniform)", "eager": "classic eager (range)", "cooperative": "classic cooperative (cooperative-sticky)"}
MAX_ATTEMPTS = 100


def perf() -> float:
    return time.perf_counter()


def new_uuid_id() -> str:
    """A client-generated KIP-848 member id (v1): Kafka's Uuid.toString(), 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


busy_seconds = oncpu_seconds  # CPU time of a process, from its threads' schedstat (bench.procstat)


# =========================================================================== bookkeeping
@dataclass
class JoinSample:
    protocol: str
    size: int
    joiner_wait_ms: float  # joiner's first request -> the answer that hands it its first partition
    revokers: int  # existing members that gave up anything
    moved: int  # existing members whose partitions after the join differ from before
    max_gap_ms: float  # longest time a partition was held by nobody
    gaps: int  # partitions that were held by nobody for a while
    settle_ms: float  # joiner's first request -> the group settled (every member done)
    assignor_ms: float  # KIP-848: the broker's assignor_ms; classic: the leader's assignment computation (CPU)
    assign_total_ms: float  # classic: with parsing the subscriptions and encoding the assignments (CPU); KIP-848: same as assignor_ms
    rebalances: int  # classic: generations during the join; KIP-848: group epochs
    epoch: int = 0  # KIP-848: the group epoch the join created
    joiner_requests: int = 0  # requests the joiner sent until it got its first partition
    first_answer_ms: float = 0.0  # joiner's first request -> its answer


@dataclass
class Steady:
    heartbeats: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float
    members: int

    @property
    def rps(self) -> float:
        return self.heartbeats / self.seconds if self.seconds else 0.0

    @property
    def us_per_hb(self) -> float:
        return self.broker_cpu_s / self.heartbeats * 1e6 if self.heartbeats else float("nan")


@dataclass
class ProtocolResult:
    protocol: str
    size: int
    interval_ms: int
    form_s: float
    joins: list[JoinSample] = field(default_factory=list)
    steady: Steady | None = None
    errors: Counter = field(default_factory=Counter)
    double_owned: int = 0  # a partition handed to a member while another still owned it
    form_errors: Counter = field(default_factory=Counter)  # errors counted while the group formed (``form()``, settling included)
    form_double_owned: int = 0  # double_owned while the group formed
    leave_settle_ms: list[float] = field(default_factory=list)
    broker_log: list = field(default_factory=list)  # (epoch, assignor_ms, members) of the group's target computations


class Tracker:
    """Who owns which partition, seen from the members; partition gaps and revokers of the current join."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.owner: dict[int, object] = {}
        self.released: dict[int, float] = {}
        self.gaps: list[float] = []
        self.revokers: set = set()
        self.double_owned = 0
        self.errors: Counter = Counter()
        self.assign_ms: list[tuple[float, float]] = []  # classic leader: (compute, total) per assignment
        self.recording_joiner = None

    def start(self, joiner) -> None:
        self.gaps = []
        self.revokers = set()
        self.assign_ms = []
        self.recording_joiner = joiner

    def revoke(self, m, parts, t: float) -> None:
        if not parts:
            return
        for p in parts:
            if self.owner.get(p) is m:
                del self.owner[p]
                self.released[p] = t
        if m is not self.recording_joiner:
            self.revokers.add(m)

    def assign(self, m, parts, t: float) -> None:
        for p in parts:
            held = self.owner.get(p)
            if held is not None and held is not m:
                self.double_owned += 1
            self.owner[p] = m
            r = self.released.pop(p, None)
            if r is not None:
                self.gaps.append(t - r)

    def complete(self) -> bool:
        return len(self.owner) == self.partitions and not self.released


# =========================================================================== KIP-848 member
class K848Member:
    __slots__ = ("sim", "conn", "member_id", "epoch", "owned", "sent_owned", "pending_owned", "inflight", "timer", "tpl",
                 "last_tail", "active", "t_first", "t_join", "left", "rejoins", "sent", "t_answer", "given")

    def __init__(self, sim: K848Sim, conn: Conn) -> None:
        self.sim = sim
        self.conn = conn
        self.member_id = new_uuid_id()
        self.epoch = 0
        self.owned: frozenset[int] = frozenset()
        self.sent_owned: frozenset[int] | None = None  # last owned list the broker acknowledged
        self.pending_owned: frozenset[int] | None = None
        self.inflight = False
        self.timer: asyncio.TimerHandle | None = None
        self.tpl: Template | None = None
        self.last_tail: bytes | None = None
        self.active = True
        self.t_first: float | None = None
        self.t_join = 0.0
        self.left: asyncio.Future | None = None
        self.rejoins = 0
        self.sent = 0
        self.t_answer: float | None = None
        self.given: float | None = None  # the heartbeat interval of the broker's last answer (s)

    @property
    def interval(self) -> float:
        """The broker's interval, as real clients adopt it, except while the group forms (see ``K848Sim.form``)."""
        sim = self.sim
        return sim.interval if sim.forming or self.given is None else self.given

    def schedule(self, delay: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.sim.loop.call_later(delay, self.heartbeat)

    def heartbeat(self) -> None:
        self.timer = None
        if not self.active or self.inflight:
            return
        sim = self.sim
        conn = self.conn
        corr = conn.next_corr()
        owned = self.owned
        if self.epoch == 0:
            body = {"group_id": sim.group, "member_id": self.member_id, "member_epoch": 0, "instance_id": None, "rack_id": None,
                    "rebalance_timeout": REBALANCE_MS, "subscribed_topic_names": [sim.topic], "subscribed_topic_regex": None,
                    "server_assignor": None, "topic_partitions": []}
            frame = encode_request(CGH, CGH_V, body, corr)
            owned = frozenset()
        elif owned != self.sent_owned:
            body = {"group_id": sim.group, "member_id": self.member_id, "member_epoch": self.epoch, "instance_id": None, "rack_id": None,
                    "rebalance_timeout": -1, "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
                    "topic_partitions": [{"topic_id": sim.topic_id, "partitions": sorted(owned)}] if owned else []}
            frame = encode_request(CGH, CGH_V, body, corr)
        else:
            if self.tpl is None:
                self.tpl = Template(CGH, CGH_V, {
                    "group_id": sim.group, "member_id": self.member_id, "member_epoch": EPOCH_SENTINEL, "instance_id": None, "rack_id": None,
                    "rebalance_timeout": -1, "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
                    "topic_partitions": None}, marks=((">i", EPOCH_SENTINEL),))
            frame = self.tpl.frame(corr, self.epoch)
        self.pending_owned = owned
        self.inflight = True
        if self.t_first is None:
            self.sent += 1
        conn.send(frame, corr, self.on_response)

    def on_response(self, payload: bytes | None) -> None:
        self.inflight = False
        sim = self.sim
        sim.heartbeats += 1
        if self.t_answer is None:
            self.t_answer = perf()
        if payload is None:
            if not sim.stopped:
                sim.tracker.errors["connection closed"] += 1
            self.active = False
            return
        tail = payload[4:]
        if tail == self.last_tail:
            if self.active:
                self.schedule(self.interval)
            return
        resp = decode_response(CGH, CGH_V, payload)
        now = perf()
        if resp.heartbeat_interval is not None:
            given = resp.heartbeat_interval
            given = given.total_seconds() if hasattr(given, "total_seconds") else given / 1000
            if given > 0:
                self.given = given
        if resp.error_code != ErrorCode.none:
            sim.tracker.errors[f"ConsumerGroupHeartbeat {resp.error_code.name}"] += 1
            self.last_tail = None
            if resp.error_code in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
                sim.tracker.revoke(self, self.owned, now)  # partitions lost; rejoin with epoch 0
                self.owned = frozenset()
                self.epoch = 0
                self.sent_owned = None
                self.rejoins += 1
                if self.active:
                    self.heartbeat()
            elif self.active:
                self.schedule(self.interval)
            return
        self.sent_owned = self.pending_owned
        self.epoch = resp.member_epoch
        sim.max_epoch = max(sim.max_epoch, self.epoch)
        act = False
        if resp.assignment is not None:
            new = frozenset(p for tp in resp.assignment.topic_partitions if tp.topic_id == sim.topic_id for p in tp.partitions)
            revoked, added = self.owned - new, new - self.owned
            sim.tracker.revoke(self, revoked, now)
            sim.tracker.assign(self, added, now)
            self.owned = new
            if added and self.t_first is None:
                self.t_first = now
            act = bool(revoked or added)
            self.last_tail = None
        else:
            self.last_tail = bytes(tail)
        if not self.active:
            return
        if act:
            self.heartbeat()  # acknowledge at once: the owned list changed
        elif sim.first_phase.pop(self, False):
            self.schedule(random.uniform(0, self.interval))
        else:
            self.schedule(self.interval)

    async def leave(self) -> None:
        self.active = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        while self.inflight:
            await asyncio.sleep(0.001)
        sim = self.sim
        # a leaving consumer gives its partitions up before it says so: once the broker has the leave
        # it may hand them on, and that answer can reach this process before the leave's own answer
        sim.tracker.revoke(self, self.owned, perf())
        resp = await self.conn.request(CGH, CGH_V, {"group_id": sim.group, "member_id": self.member_id, "member_epoch": -1, "instance_id": None,
                                                   "rack_id": None, "rebalance_timeout": -1, "subscribed_topic_names": None,
                                                   "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None})
        if resp.error_code != ErrorCode.none:
            sim.tracker.errors[f"ConsumerGroupHeartbeat leave {resp.error_code.name}"] += 1
        self.owned = frozenset()


class K848Sim:
    kind = "kip848"

    def __init__(self, conns: list[Conn], group: str, topic: str, topic_id: uuid.UUID, partitions: int, interval: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.conns = conns
        self.group = group
        self.topic = topic
        self.topic_id = topic_id
        self.tracker = Tracker(partitions)
        self.interval = interval
        self.members: list[K848Member] = []
        self.heartbeats = 0
        self.max_epoch = 0
        self.first_phase: dict = {}
        self.stopped = False
        self.forming = False
        self.joins_s = 0.0  # form(): until every member's join was answered (the rest is settling)

    async def form(self, n: int, wave: int = 25, interval: float = 600.0) -> None:
        """Members join ``wave`` at a time, each wave once the previous one's joins are answered.

        (All at once, the shard gathers the records of hundreds of joins into one
        batch larger than max.message.bytes, its append fails and every request in
        it gets UNKNOWN_SERVER_ERROR: see the notes.) While the group forms, members
        only heartbeat when they have something to act on (``interval`` is long;
        the broker's session timeout must be longer still): every join bumps the
        group epoch, every member's next heartbeat then moves it to the new epoch,
        and each heartbeat costs the broker time proportional to the group's size,
        so with regular heartbeats a 3000-member group takes minutes to form.
        Afterwards every member heartbeats at the benchmark's interval.
        """
        short, self.interval = self.interval, interval
        self.forming = True
        t_form = perf()
        self.members = [K848Member(self, c) for c in self.conns[:n]]
        for i in range(0, n, wave):
            batch = self.members[i : i + wave]
            for m in batch:
                self.first_phase[m] = True
                m.heartbeat()
            deadline = perf() + 120
            while any(m.epoch == 0 for m in batch):
                if perf() > deadline:
                    raise RuntimeError(f"{self.group}: joins unanswered after 120 s; errors {dict(self.tracker.errors)}")
                await asyncio.sleep(0.002)
        self.interval = short
        self.forming = False
        self.joins_s = perf() - t_form
        self.rephase()
        await self.settled()

    def is_settled(self) -> bool:
        """Every partition owned, every member at the newest epoch seen and, as there are no more members than
        partitions, holding one at least: a coordinator that holds its target assignment back (Kafka 4.4's
        group.consumer.assignment.interval.ms) leaves the newest members at the old epoch with nothing, which
        the first two conditions alone would take for settled."""
        live = [m for m in self.members if m.active]
        return (self.tracker.complete() and all(m.epoch == self.max_epoch for m in live)
                and (len(live) > self.tracker.partitions or all(m.owned for m in live)))

    async def settled(self, timeout: float = 120.0) -> None:
        deadline = perf() + timeout
        while not self.is_settled():
            if perf() > deadline:
                raise RuntimeError(f"{self.group}: the group did not settle in {timeout:.0f} s; errors {dict(self.tracker.errors)}, "
                                   f"{len(self.tracker.owner)} partitions owned, {len(self.tracker.released)} released, max epoch {self.max_epoch}, "
                                   f"epochs {Counter(m.epoch for m in self.members if m.active)}, in flight {sum(m.inflight for m in self.members)}")
            await asyncio.sleep(0.005)

    def rephase(self) -> None:
        for m in self.members:
            if m.active and not m.inflight:
                m.schedule(random.uniform(0, self.interval))

    async def join(self, conn: Conn) -> tuple[K848Member, float]:
        j = K848Member(self, conn)
        self.members.append(j)
        self.tracker.start(j)
        t0 = j.t_join = perf()
        j.heartbeat()
        while j.t_first is None:
            await asyncio.sleep(0.001)
            if perf() - t0 > 120:
                raise RuntimeError(f"{self.group}: the joiner got no partition in 120 s; errors {dict(self.tracker.errors)}")
        return j, t0

    async def leave(self, j: K848Member) -> None:
        await j.leave()
        self.members.remove(j)

    async def stop(self) -> None:
        self.stopped = True
        for m in self.members:
            m.active = False
            if m.timer is not None:
                m.timer.cancel()


# =========================================================================== classic members
def subscription_bytes(topic: str, owned: frozenset[int]) -> bytes:
    sub = build(ConsumerProtocolSubscription, {"topics": [topic], "user_data": None,
                                               "owned_partitions": [{"topic": topic, "partitions": sorted(owned)}] if owned else []})
    return b"\x00\x01" + encode(sub)


def parse_subscription(data: bytes) -> ConsumerProtocolSubscription:
    return decode(ConsumerProtocolSubscription, data, 2)[0]


def assignment_bytes(topic: str, partitions) -> bytes:
    asg = build(ConsumerProtocolAssignment, {"assigned_partitions": [{"topic": topic, "partitions": sorted(partitions)}] if partitions else [],
                                             "user_data": None})
    return b"\x00\x01" + encode(asg)


def parse_assignment(topic: str, data: bytes) -> frozenset[int]:
    if not data:
        return frozenset()
    asg = decode(ConsumerProtocolAssignment, data, 2)[0]
    return frozenset(p for tp in asg.assigned_partitions if tp.topic == topic for p in tp.partitions)


def range_assign(member_ids: list[str], partitions: int) -> dict[str, list[int]]:
    """Kafka's RangeAssignor for one topic: members sorted by id, the first P % n get one extra."""
    ids = sorted(member_ids)
    n = len(ids)
    per, extra = divmod(partitions, n)
    out = {}
    start = 0
    for i, m in enumerate(ids):
        k = per + (1 if i < extra else 0)
        out[m] = list(range(start, start + k))
        start += k
    return out


def sticky_assign(owned: dict[str, frozenset[int]], partitions: int) -> dict[str, set[int]]:
    """A balanced sticky assignment for one topic (the shape of Kafka's cooperative-sticky with one topic).

    Every member gets P // n or P // n + 1 partitions; members keep as many of
    their owned partitions as that allows (members owning the most are the
    first to get the + 1 places); the rest go to the members with the fewest.
    """
    ids = sorted(owned, key=lambda m: (-len(owned[m]), m))
    n = len(ids)
    per, extra = divmod(partitions, n)
    quota = {m: per + (1 if i < extra else 0) for i, m in enumerate(ids)}
    taken: set[int] = set()
    out: dict[str, set[int]] = {}
    for m in ids:
        keep = []
        for p in sorted(owned[m]):
            if len(keep) >= quota[m]:
                break
            if 0 <= p < partitions and p not in taken:
                keep.append(p)
                taken.add(p)
        out[m] = set(keep)
    free = [p for p in range(partitions) if p not in taken]
    need = sorted((m for m in ids if len(out[m]) < quota[m]), key=lambda m: (len(out[m]), m))
    i = 0
    for m in need:
        while len(out[m]) < quota[m] and i < len(free):
            out[m].add(free[i])
            i += 1
    return out


class ClassicMember:
    __slots__ = ("sim", "conn", "member_id", "generation", "owned", "state", "timer", "hb_tpl", "active", "t_first", "task", "sent", "t_answer")

    def __init__(self, sim: ClassicSim, conn: Conn) -> None:
        self.sim = sim
        self.conn = conn
        self.member_id = ""
        self.generation = -1
        self.owned: frozenset[int] = frozenset()
        self.state = "idle"  # idle, joining, stable
        self.timer: asyncio.TimerHandle | None = None
        self.hb_tpl: Template | None = None
        self.active = True
        self.t_first: float | None = None
        self.task: asyncio.Task | None = None
        self.sent = 0
        self.t_answer: float | None = None

    def schedule(self, delay: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.sim.loop.call_later(delay, self.heartbeat)

    def heartbeat(self) -> None:
        self.timer = None
        if not self.active or self.state != "stable":
            return
        if self.hb_tpl is None:
            self.hb_tpl = Template(HEARTBEAT, HEARTBEAT_V, {"group_id": self.sim.group, "generation_id": EPOCH_SENTINEL, "member_id": self.member_id,
                                                            "group_instance_id": None}, marks=((">i", EPOCH_SENTINEL),))
        corr = self.conn.next_corr()
        if self.t_first is None:
            self.sent += 1
        self.conn.send(self.hb_tpl.frame(corr, self.generation), corr, self.on_heartbeat)

    def on_heartbeat(self, payload: bytes | None) -> None:
        sim = self.sim
        sim.heartbeats += 1
        if payload is None:
            if not sim.stopped:
                sim.tracker.errors["connection closed"] += 1
            self.active = False
            return
        if not self.active or self.state != "stable":
            return
        code = self.hb_tpl.check(payload)
        if code is None:
            self.schedule(sim.interval)
            return
        if code != ErrorCode.rebalance_in_progress:
            sim.tracker.errors[f"Heartbeat {code.name}"] += 1
            if code == ErrorCode.unknown_member_id:
                self.forget()
        self.rejoin()

    def forget(self) -> None:
        self.member_id = ""
        self.hb_tpl = None

    def rejoin(self) -> None:
        if self.state == "joining":
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.state = "joining"
        if not self.sim.cooperative:
            self.sim.tracker.revoke(self, self.owned, perf())  # eager: everything goes before the JoinGroup
            self.owned = frozenset()
        self.task = asyncio.ensure_future(self.join_loop())

    async def join_loop(self) -> None:
        sim = self.sim
        tracker = sim.tracker
        try:
            for _ in range(MAX_ATTEMPTS):
                if not self.active:
                    return
                body = {"group_id": sim.group, "session_timeout": SESSION_MS, "rebalance_timeout": REBALANCE_MS, "member_id": self.member_id,
                        "group_instance_id": None, "protocol_type": "consumer",
                        "protocols": [{"name": sim.protocol_name, "metadata": subscription_bytes(sim.topic, self.owned if sim.cooperative else frozenset())}],
                        "reason": None}
                if self.t_first is None:
                    self.sent += 1
                resp = await self.conn.request(JOIN, JOIN_V, body)
                if self.t_answer is None:
                    self.t_answer = perf()
                if resp.error_code == ErrorCode.member_id_required:
                    self.member_id = resp.member_id
                    self.hb_tpl = None
                    continue
                if resp.error_code != ErrorCode.none:
                    tracker.errors[f"JoinGroup {resp.error_code.name}"] += 1
                    if resp.error_code == ErrorCode.unknown_member_id:
                        self.forget()
                    await asyncio.sleep(0.05)
                    continue
                self.generation = resp.generation_id
                sim.generations.add(self.generation)
                assignments = sim.leader_assign(resp) if resp.leader == self.member_id else []
                if self.t_first is None:
                    self.sent += 1
                sresp = await self.conn.request(SYNC, SYNC_V, {"group_id": sim.group, "generation_id": self.generation, "member_id": self.member_id,
                                                               "group_instance_id": None, "protocol_type": "consumer", "protocol_name": sim.protocol_name,
                                                               "assignments": assignments})
                if sresp.error_code == ErrorCode.rebalance_in_progress:
                    continue
                if sresp.error_code != ErrorCode.none:
                    tracker.errors[f"SyncGroup {sresp.error_code.name}"] += 1
                    if sresp.error_code == ErrorCode.unknown_member_id:
                        self.forget()
                    continue
                new = parse_assignment(sim.topic, sresp.assignment)
                now = perf()
                revoked, added = self.owned - new, new - self.owned
                tracker.revoke(self, revoked, now)
                tracker.assign(self, added, now)
                self.owned = new
                if added and self.t_first is None:
                    self.t_first = now
                if revoked:  # cooperative: give them up, then rejoin at once for the second rebalance
                    continue
                self.state = "stable"
                if self.active:
                    self.schedule(random.uniform(0, sim.interval) if sim.first_phase.pop(self, False) else sim.interval)
                return
            raise RuntimeError(f"classic member {self.member_id!r} did not settle after {MAX_ATTEMPTS} attempts: {dict(tracker.errors)}")
        except ConnectionError:
            tracker.errors["connection closed"] += 1
            self.active = False


class ClassicSim:
    def __init__(self, kind: str, conns: list[Conn], group: str, topic: str, partitions: int, interval: float) -> None:
        self.kind = kind
        self.loop = asyncio.get_running_loop()
        self.cooperative = kind == "cooperative"
        self.protocol_name = "cooperative-sticky" if self.cooperative else "range"
        self.conns = conns
        self.group = group
        self.topic = topic
        self.partitions = partitions
        self.tracker = Tracker(partitions)
        self.interval = interval
        self.members: list[ClassicMember] = []
        self.heartbeats = 0
        self.generations: set[int] = set()
        self.first_phase: dict = {}
        self.stopped = False

    def leader_assign(self, resp) -> list[dict]:
        """The leader's assignment; its CPU time (compute, and with parsing and encoding) goes to the tracker."""
        c0 = time.thread_time()
        if self.cooperative:
            owned = {}
            for m in resp.members:
                sub = parse_subscription(m.metadata)
                owned[m.member_id] = frozenset(p for tp in sub.owned_partitions if tp.topic == self.topic for p in tp.partitions)
            c1 = time.thread_time()
            target = sticky_assign(owned, self.partitions)
            # withhold partitions whose owner changes: their old owner revokes them first
            previous = {p: m for m, parts in owned.items() for p in parts}
            final = {m: [p for p in parts if previous.get(p, m) == m] for m, parts in target.items()}
        else:
            for m in resp.members:
                parse_subscription(m.metadata)
            c1 = time.thread_time()
            final = range_assign([m.member_id for m in resp.members], self.partitions)
        c2 = time.thread_time()
        out = [{"member_id": m, "assignment": assignment_bytes(self.topic, parts)} for m, parts in final.items()]
        c3 = time.thread_time()
        self.tracker.assign_ms.append(((c2 - c1) * 1000, (c3 - c0) * 1000))
        return out

    async def form(self, n: int) -> None:
        self.members = [ClassicMember(self, c) for c in self.conns[:n]]
        for m in self.members:
            self.first_phase[m] = True
            m.rejoin()
        await self.settled()

    def is_settled(self) -> bool:
        live = [m for m in self.members if m.active]
        if not self.tracker.complete():
            return False
        gen = max(self.generations)
        return all(m.state == "stable" and m.generation == gen for m in live)

    async def settled(self, timeout: float = 120.0) -> None:
        deadline = perf() + timeout
        while not self.is_settled():
            if perf() > deadline:
                raise RuntimeError(f"{self.group}: the group did not settle in {timeout:.0f} s; errors {dict(self.tracker.errors)}, "
                                   f"states {Counter(m.state for m in self.members if m.active)}, {len(self.tracker.owner)} partitions owned")
            await asyncio.sleep(0.005)

    def rephase(self) -> None:
        for m in self.members:
            if m.active and m.state == "stable":
                m.schedule(random.uniform(0, self.interval))

    async def join(self, conn: Conn) -> tuple[ClassicMember, float]:
        j = ClassicMember(self, conn)
        self.members.append(j)
        self.tracker.start(j)
        t0 = perf()
        j.rejoin()
        while j.t_first is None:
            await asyncio.sleep(0.001)
            if j.task.done() and j.task.exception():
                raise j.task.exception()
            if perf() - t0 > 120:
                raise RuntimeError(f"{self.group}: the joiner got no partition in 120 s; errors {dict(self.tracker.errors)}")
        return j, t0

    async def leave(self, j: ClassicMember) -> None:
        j.active = False
        if j.timer is not None:
            j.timer.cancel()
        resp = await j.conn.request(LEAVE, LEAVE_V, {"group_id": self.group, "members": [{"member_id": j.member_id, "group_instance_id": None, "reason": "bench"}]})
        if resp.error_code != ErrorCode.none:
            self.tracker.errors[f"LeaveGroup {resp.error_code.name}"] += 1
        self.tracker.revoke(j, j.owned, perf())
        j.owned = frozenset()
        self.members.remove(j)

    async def stop(self, admin: Conn) -> None:
        self.stopped = True
        for m in self.members:
            m.active = False
            if m.timer is not None:
                m.timer.cancel()
        ids = [m.member_id for m in self.members if m.member_id]
        resp = await admin.request(LEAVE, LEAVE_V, {"group_id": self.group, "members": [{"member_id": i, "group_instance_id": None, "reason": "bench done"} for i in ids]})
        if resp.error_code != ErrorCode.none:
            self.tracker.errors[f"LeaveGroup {resp.error_code.name}"] += 1


# =========================================================================== the scenario
async def create_topic(conn: Conn, name: str, partitions: int) -> uuid.UUID:
    resp = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}], "timeout": 30_000})
    t = resp.topics[0]
    if t.error_code != ErrorCode.none:
        raise RuntimeError(f"CreateTopics {name}: {t.error_code.name}")
    return t.topic_id


async def steady_window(sim, pid: int, seconds: float, members: int) -> Steady:
    """Heartbeats of a settled group over at least one interval, every member's next one re-drawn uniformly over the interval first
    (after a classic rebalance they all fall at the same moment, one interval after the SyncGroup answers)."""
    sim.rephase()
    n0, b0, c0, t0 = sim.heartbeats, busy_seconds(pid), self_cpu_seconds(), perf()
    await asyncio.sleep(max(seconds, sim.interval))
    n1, b1, c1, t1 = sim.heartbeats, busy_seconds(pid), self_cpu_seconds(), perf()
    return Steady(n1 - n0, t1 - t0, b1 - b0, c1 - c0, members)


async def run_protocol(kind: str, conns: list[Conn], admin: Conn, pid: int, size: int, reps: int, topic: str, topic_id: uuid.UUID,
                       interval: float, window: float, say: Callable[[str], None]) -> ProtocolResult:
    group = f"{kind}-{size}"
    if kind == "kip848":
        sim = K848Sim(conns, group, topic, topic_id, size, interval)
    else:
        sim = ClassicSim(kind, conns, group, topic, size, interval)
    res = ProtocolResult(kind, size, round(interval * 1000), 0.0)
    t = perf()
    await sim.form(size - 1)
    res.form_s = perf() - t
    res.form_errors, res.form_double_owned = Counter(sim.tracker.errors), sim.tracker.double_owned
    say(f"    {kind}: {size - 1} members settled in {res.form_s:.1f} s" + (f" (joins answered after {sim.joins_s:.1f} s)" if kind == "kip848" else ""))
    for rep in range(reps):
        sim.rephase()  # every member's next heartbeat falls anywhere in the coming interval
        before = {m: m.owned for m in sim.members}
        gens0 = set(sim.generations) if kind != "kip848" else None
        epoch0 = sim.max_epoch if kind == "kip848" else 0
        j, t0 = await sim.join(conns[size - 1])
        wait = (j.t_first - t0) * 1000
        await sim.settled()
        settle = (perf() - t0) * 1000
        tr = sim.tracker
        moved = sum(1 for m, o in before.items() if m.owned != o)
        if kind == "kip848":
            rebalances = sim.max_epoch - epoch0
            a_ms = tot_ms = float("nan")  # filled in from the broker log
        else:
            rebalances = len(sim.generations - gens0)
            a_ms = sum(a for a, _ in tr.assign_ms)
            tot_ms = sum(b for _, b in tr.assign_ms)
        sample = JoinSample(kind, size, wait, len(tr.revokers), moved, max(tr.gaps, default=0.0) * 1000, len(tr.gaps), settle, a_ms, tot_ms,
                            rebalances, j.epoch if kind == "kip848" else 0, j.sent, (j.t_answer - t0) * 1000)
        res.joins.append(sample)
        say(f"    {kind} join {rep + 1}/{reps}: joiner waited {wait:,.0f} ms, {sample.revokers} revoked, longest gap {sample.max_gap_ms:,.0f} ms, "
            f"settled {settle:,.0f} ms, rebalances {rebalances}, joiner sent {j.sent} requests (first answered after {sample.first_answer_ms:,.0f} ms)" + ("" if kind == "kip848" else f", leader assignor {a_ms:.1f} ms ({tot_ms:.1f} ms with parse/encode)"))
        if rep == 0:
            res.steady = await steady_window(sim, pid, window, size)
            say(f"    {kind} steady: {res.steady.rps:,.0f} heartbeats/s, broker {res.steady.us_per_hb:.1f} µs each")
        if rep == reps - 1:
            break
        t = perf()
        await sim.leave(j)
        await sim.settled()
        res.leave_settle_ms.append((perf() - t) * 1000)
    if kind == "kip848":
        await sim.stop()
    else:
        await sim.stop(admin)
    res.errors = sim.tracker.errors
    res.double_owned = sim.tracker.double_owned
    return res


def fill_broker_assignor(res: ProtocolResult, events: list[dict]) -> None:
    """KIP-848 joins: the broker's ``target assignment computed`` event for the epoch each join created."""
    got = {}
    for ev in events:
        if ev.get("event") == "target assignment computed" and ev.get("group") == f"kip848-{res.size}":
            got[int(ev.get("epoch", -1))] = (float(ev.get("assignor_ms", "nan")), int(ev.get("members", 0)))
            res.broker_log.append((int(ev.get("epoch", -1)), float(ev.get("assignor_ms", "nan")), int(ev.get("members", 0))))
    for s in res.joins:
        ms = got.get(s.epoch, (float("nan"), 0))[0]
        s.assignor_ms = s.assign_total_ms = ms


def median(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")
