"""The measurements of ``bench.groups``: rebalances, OffsetCommit, Heartbeat, offsets load.

Each coroutine runs against an already started broker (``bench.spawn.Broker``)
and returns plain dataclasses; ``bench.groups`` prints and documents them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription

from broker.coordinator.placement import partition_for
from protocol.codec import build, encode
from protocol.errors import ErrorCode

from .group_client import Conn, Pump, PumpStats, Template, connect
from .procstat import cpu_seconds, cpu_split, self_cpu_seconds

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH, CREATE_TOPICS = 11, 14, 12, 13, 8, 9, 19
JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V, COMMIT_V, FETCH_V = 9, 5, 4, 5, 9, 7

SESSION_MS = 30_000
REBALANCE_MS = 60_000
SUB_TOPIC = "bench-rebalance"  # only named in subscriptions and assignments; never created
ASSIGNED_PARTITIONS = 1000  # partitions of SUB_TOPIC the leader's range assignment hands out
GEN_SENTINEL = 0x5A5A5A5A
OFFSET_SENTINEL = 0x0123456789ABCDEF
OFFSETS_SHARDS = 50


def perf() -> float:
    return time.perf_counter()


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU time the whole machine spent busy (all cores, all processes), from /proc/stat."""
    with open("/proc/stat") as f:
        cpu = f.readline().split()
    # user nice system idle iowait irq softirq steal ...
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in cpu[1:9])
    return (user + nice + system + irq + softirq + steal) / _CLK_TCK


def subscription_bytes() -> bytes:
    sub = build(ConsumerProtocolSubscription, {"topics": [SUB_TOPIC], "user_data": None, "owned_partitions": []})
    return b"\x00\x01" + encode(sub)


def assignment_bytes(partitions: list[int]) -> bytes:
    asg = build(ConsumerProtocolAssignment, {"assigned_partitions": [{"topic": SUB_TOPIC, "partitions": partitions}], "user_data": None})
    return b"\x00\x01" + encode(asg)


SUBSCRIPTION = subscription_bytes()
_assignment_cache: dict[tuple[str, ...], list[dict]] = {}


def range_assignment(member_ids: list[str]) -> list[dict]:
    """The "range" assignor over ASSIGNED_PARTITIONS partitions of one topic.

    Cached by member list: the client's assignor cost is not what is measured
    (``prepare_assignment`` fills the cache before a timed window).
    """
    key = tuple(sorted(member_ids))
    got = _assignment_cache.get(key)
    if got is None:
        n, p = len(key), ASSIGNED_PARTITIONS
        got = [{"member_id": m, "assignment": assignment_bytes(list(range(i * p // n, (i + 1) * p // n)))} for i, m in enumerate(key)]
        _assignment_cache.clear()
        _assignment_cache[key] = got
    return got


async def create_topic(conn: Conn, name: str, partitions: int) -> None:
    resp = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}], "timeout": 30_000})
    code = resp.topics[0].error_code
    if code not in (ErrorCode.none, ErrorCode.topic_already_exists):
        raise RuntimeError(f"CreateTopics {name}: {code.name}")


# =========================================================================== rebalances
class Member:
    __slots__ = ("conn", "group", "member_id", "generation", "join_tpl", "sync_tpl")

    def __init__(self, conn: Conn, group: str) -> None:
        self.conn = conn
        self.group = group
        self.member_id = ""
        self.generation = -1
        self.join_tpl: Template | None = None
        self.sync_tpl: Template | None = None

    def join_template(self) -> Template:
        if self.join_tpl is None:
            self.join_tpl = Template(JOIN, JOIN_V, {
                "group_id": self.group, "session_timeout": SESSION_MS, "rebalance_timeout": REBALANCE_MS,
                "member_id": self.member_id, "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": SUBSCRIPTION}], "reason": None,
            })
        return self.join_tpl

    def sync_template(self) -> Template:
        if self.sync_tpl is None:
            self.sync_tpl = Template(SYNC, SYNC_V, {
                "group_id": self.group, "generation_id": GEN_SENTINEL, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range", "assignments": [],
            }, marks=((">i", GEN_SENTINEL),))
        return self.sync_tpl

    def forget_id(self) -> None:
        self.member_id = ""
        self.join_tpl = self.sync_tpl = None


@dataclass
class Round:
    """What happened during one join+sync round of a group, seen by the client."""

    last_join_sent: float = 0.0
    joins_sent: int = 0
    join_done: dict = field(default_factory=dict)  # member_id -> (time, generation)
    sync_done: dict = field(default_factory=dict)
    leaders: dict = field(default_factory=dict)  # generation -> leader's member id
    sync_retries: int = 0  # SyncGroup answered REBALANCE_IN_PROGRESS: rejoin
    errors: Counter = field(default_factory=Counter)

    def finish(self, t0: float) -> dict:
        final = max(g for _, g in self.sync_done.values())
        join_all = max(t for t, g in self.join_done.values() if g == final)
        sync_all = max(t for t, _ in self.sync_done.values())
        return {
            "generation": final,
            "leader": self.leaders.get(final, ""),
            "join_ms": (join_all - self.last_join_sent) * 1000,
            "sync_ms": (sync_all - self.last_join_sent) * 1000,
            "burst_ms": (self.last_join_sent - t0) * 1000,  # how long the client took to send the joins
            "joins_sent": self.joins_sent,
            "sync_retries": self.sync_retries,
            "errors": dict(self.errors),
        }


MAX_ATTEMPTS = 50


async def join_and_sync(m: Member, rnd: Round) -> None:
    """One member's JoinGroup/SyncGroup loop until it holds an assignment."""
    for _ in range(MAX_ATTEMPTS):
        tpl = m.join_template()
        rnd.last_join_sent = perf()
        rnd.joins_sent += 1
        resp = await m.conn.request_template(tpl)
        code = resp.error_code
        if code == ErrorCode.member_id_required:
            m.member_id = resp.member_id
            m.join_tpl = m.sync_tpl = None
            continue
        if code != ErrorCode.none:
            rnd.errors[f"JoinGroup {code.name}"] += 1
            if code == ErrorCode.unknown_member_id:
                m.forget_id()
            elif code in (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available, ErrorCode.not_coordinator):
                await asyncio.sleep(0.05)
            continue
        m.generation = resp.generation_id
        rnd.join_done[m.member_id] = (perf(), m.generation)
        if resp.leader == m.member_id:
            rnd.leaders[m.generation] = m.member_id
            body = {
                "group_id": m.group, "generation_id": m.generation, "member_id": m.member_id, "group_instance_id": None,
                "protocol_type": "consumer", "protocol_name": "range",
                "assignments": range_assignment([x.member_id for x in resp.members]),
            }
            sresp = await m.conn.request(SYNC, SYNC_V, body)
        else:
            sresp = await m.conn.request_template(m.sync_template(), m.generation)
        code = sresp.error_code
        if code == ErrorCode.none:
            rnd.sync_done[m.member_id] = (perf(), m.generation)
            return
        if code == ErrorCode.rebalance_in_progress:
            rnd.sync_retries += 1
        else:
            rnd.errors[f"SyncGroup {code.name}"] += 1
            if code == ErrorCode.unknown_member_id:
                m.forget_id()
    raise RuntimeError(f"member {m.member_id!r} of {m.group} did not settle after {MAX_ATTEMPTS} attempts: {dict(rnd.errors)}")


@dataclass
class RebalanceSample:
    kind: str  # "new group" or "stable group"
    size: int
    join_ms: float
    sync_ms: float
    burst_ms: float
    broker_cpu_s: float
    client_cpu_s: float
    generations: int  # generations the round took (1 = one clean rebalance)
    joins_sent: int
    sync_retries: int
    errors: dict
    leader: str = ""
    other_cpu_s: float = 0.0


async def form_group(conns: list[Conn], group: str, pid: int, timeout: float) -> tuple[list[Member], RebalanceSample]:
    """A new group of len(conns) members: KIP-394 ids first, then everyone rejoins at once."""
    members = [Member(c, group) for c in conns]
    first = await asyncio.gather(*(m.conn.request_template(m.join_template()) for m in members))
    for m, r in zip(members, first, strict=True):
        if r.error_code != ErrorCode.member_id_required:
            raise RuntimeError(f"first JoinGroup of {group}: expected MEMBER_ID_REQUIRED, got {r.error_code.name}")
        m.member_id = r.member_id
        m.join_tpl = None
    for m in members:  # encode outside the timed window
        m.join_template()
        m.sync_template()
    range_assignment([m.member_id for m in members])
    rnd = Round()
    b0, c0, m0, t0 = cpu_seconds(pid), self_cpu_seconds(), machine_busy_seconds(), perf()
    await asyncio.wait_for(asyncio.gather(*(join_and_sync(m, rnd) for m in members)), timeout)
    b1, c1, m1 = cpu_seconds(pid), self_cpu_seconds(), machine_busy_seconds()
    f = rnd.finish(t0)
    gens = f["generation"]  # a new group starts at generation 0
    return members, RebalanceSample("new group", len(members), f["join_ms"], f["sync_ms"], f["burst_ms"], b1 - b0, c1 - c0,
                                    gens, f["joins_sent"], f["sync_retries"], f["errors"], f["leader"],
                                    max(m1 - m0 - (b1 - b0) - (c1 - c0), 0.0))


async def rebalance_stable(members: list[Member], leader_id: str, pid: int, timeout: float) -> RebalanceSample:
    """The leader rejoins a Stable group; once the group is rebalancing every follower rejoins at once."""
    gen_before = members[0].generation
    leader = next(m for m in members if m.member_id == leader_id)
    followers = [m for m in members if m is not leader]
    range_assignment([m.member_id for m in members])
    rnd = Round()
    b0, c0, m0, t0 = cpu_seconds(pid), self_cpu_seconds(), machine_busy_seconds(), perf()
    lead_task = asyncio.ensure_future(join_and_sync(leader, rnd))
    if followers:
        probe = followers[0]
        for _ in range(2000):  # a follower's heartbeat tells when the leader's rejoin has started the rebalance
            hb = await probe.conn.request(HEARTBEAT, HEARTBEAT_V, {"group_id": probe.group, "generation_id": probe.generation, "member_id": probe.member_id, "group_instance_id": None})
            if hb.error_code == ErrorCode.rebalance_in_progress:
                break
            if hb.error_code != ErrorCode.none:
                raise RuntimeError(f"probe heartbeat: {hb.error_code.name}")
            await asyncio.sleep(0.001)
        else:
            raise RuntimeError("the leader's rejoin never started a rebalance")
    t0 = perf()
    await asyncio.wait_for(asyncio.gather(lead_task, *(join_and_sync(m, rnd) for m in followers)), timeout)
    b1, c1, m1 = cpu_seconds(pid), self_cpu_seconds(), machine_busy_seconds()
    f = rnd.finish(t0)
    return RebalanceSample("stable group", len(members), f["join_ms"], f["sync_ms"], f["burst_ms"], b1 - b0, c1 - c0,
                           f["generation"] - gen_before, f["joins_sent"], f["sync_retries"], f["errors"], f["leader"],
                           max(m1 - m0 - (b1 - b0) - (c1 - c0), 0.0))


async def leave_all(conn: Conn, members: list[Member]) -> None:
    body = {"group_id": members[0].group, "members": [{"member_id": m.member_id, "group_instance_id": None, "reason": "bench done"} for m in members]}
    resp = await conn.request(LEAVE, LEAVE_V, body)
    bad = [r.error_code.name for r in resp.members if r.error_code != ErrorCode.none]
    if resp.error_code != ErrorCode.none or bad:
        raise RuntimeError(f"LeaveGroup: {resp.error_code.name} {Counter(bad)}")


@dataclass
class RebalanceResult:
    size: int
    new: list[RebalanceSample]
    stable: list[RebalanceSample]


async def rebalances(host: str, port: int, pid: int, sizes_reps: list[tuple[int, int]], keep_last: bool, timeout: float = 120.0):
    """Groups of each size, ``reps`` times: form a new group, rebalance it once Stable, leave.

    Returns the results and, if ``keep_last``, the members (and connections)
    of the last, largest group, still Stable, for the Heartbeat measurement.
    """
    results = []
    kept: list[Member] = []
    conns = await connect(host, port, max(n for n, _ in sizes_reps))
    admin = (await connect(host, port, 1))[0]
    for size, reps in sizes_reps:
        res = RebalanceResult(size, [], [])
        for rep in range(reps):
            group = f"rb-{size}-{rep}"
            members, sample = await form_group(conns[:size], group, pid, timeout)
            res.new.append(sample)
            res.stable.append(await rebalance_stable(members, sample.leader, pid, timeout))
            last = keep_last and size == sizes_reps[-1][0] and rep == reps - 1
            if last:
                kept = members
            else:
                await leave_all(admin, members)
        results.append(res)
    admin.close()
    if not kept:
        for c in conns:
            c.close()
    return results, kept, conns


# =========================================================================== throughput pumps
@dataclass
class Throughput:
    label: str
    connections: int
    depth: int
    seconds: float
    requests: int
    broker_cpu_s: float
    client_cpu_s: float
    errors: dict
    other_cpu_s: float = 0.0  # busy CPU of every other process on the machine meanwhile
    broker_sys_s: float = 0.0  # the kernel's share of broker_cpu_s
    extra: dict = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def broker_us_per_req(self) -> float:
        return self.broker_cpu_s / self.requests * 1e6 if self.requests else float("nan")

    @property
    def broker_core(self) -> float:
        return self.broker_cpu_s / self.seconds

    @property
    def client_core(self) -> float:
        return self.client_cpu_s / self.seconds

    @property
    def other_core(self) -> float:
        return self.other_cpu_s / self.seconds


@dataclass
class Window:
    wall: float
    requests: int
    broker_cpu_s: float
    broker_sys_s: float
    client_cpu_s: float
    other_cpu_s: float


async def run_pumps(pumps: list[Pump], stats: PumpStats, pid: int, warmup: float, seconds: float) -> Window:
    """Run the pumps and measure ``seconds`` of them after ``warmup``."""
    for p in pumps:
        p.start()
    await asyncio.sleep(warmup)
    n0, (bu0, bs0), c0, m0, t0 = stats.count, cpu_split(pid), self_cpu_seconds(), machine_busy_seconds(), perf()
    await asyncio.sleep(seconds)
    n1, (bu1, bs1), c1, m1, t1 = stats.count, cpu_split(pid), self_cpu_seconds(), machine_busy_seconds(), perf()
    for p in pumps:
        p.stop()
    await asyncio.wait_for(asyncio.gather(*(p.done for p in pumps)), 60)
    broker = (bu1 - bu0) + (bs1 - bs0)
    other = max((m1 - m0) - broker - (c1 - c0), 0.0)
    return Window(t1 - t0, n1 - n0, broker, bs1 - bs0, c1 - c0, other)


async def heartbeats(members: list[Member], pid: int, depth: int, warmup: float, seconds: float) -> Throughput:
    stats = PumpStats()
    pumps = []
    for m in members:
        tpl = Template(HEARTBEAT, HEARTBEAT_V, {"group_id": m.group, "generation_id": m.generation, "member_id": m.member_id, "group_instance_id": None})
        item = (tpl, ())
        pumps.append(Pump(m.conn, lambda item=item: item, depth, stats))
    w = await run_pumps(pumps, stats, pid, warmup, seconds)
    errors = {k.name: v for k, v in stats.errors.items()}
    if stats.closed:
        errors["connection closed"] = stats.closed
    return Throughput(f"Heartbeat, {len(members)}-member Stable group", len(members), depth, w.wall, w.requests, w.broker_cpu_s,
                      w.client_cpu_s, errors, w.other_cpu_s, w.broker_sys_s)


def commit_template(group: str, topic: str, partitions: list[int], offset: int | None = None) -> Template:
    """OffsetCommit v9 of a "simple" group (generation -1, no member id)."""
    body = {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": OFFSET_SENTINEL if offset is None else offset + p, "committed_leader_epoch": -1, "committed_metadata": ""}
            for p in partitions
        ]}],
    }
    return Template(COMMIT, COMMIT_V, body, marks=((">q", OFFSET_SENTINEL),) if offset is None else ())


async def commits(host: str, port: int, pid: int, topic: str, topic_partitions: int, *, label: str, groups: int, n_conns: int,
                  depth: int, warmup: float, seconds: float, run_id: str) -> Throughput:
    """Single-partition OffsetCommits, each connection cycling over its share of ``groups`` groups."""
    group_ids = [f"{run_id}-{i:06d}" for i in range(groups)]
    base = [commit_template(group_ids[0], topic, [p]) for p in range(topic_partitions)]
    tpls = [base[i % topic_partitions].retarget(group_ids[0].encode(), g.encode()) if i else base[0] for i, g in enumerate(group_ids)]
    conns = await connect(host, port, n_conns)
    stats = PumpStats()
    offsets = itertools.count(1)
    pumps = []
    for c, conn in enumerate(conns):
        if groups == 1:
            mine = [base[c % topic_partitions].retarget(group_ids[0].encode(), group_ids[0].encode())]
        else:
            mine = tpls[c::n_conns] or [tpls[c % groups]]
        cycle = itertools.cycle(mine)
        pumps.append(Pump(conn, lambda cycle=cycle: (next(cycle), (next(offsets),)), depth, stats))
    w = await run_pumps(pumps, stats, pid, warmup, seconds)
    for conn in conns:
        conn.close()
    errors = {k.name: v for k, v in stats.errors.items()}
    if stats.closed:
        errors["connection closed"] = stats.closed
    shards = len({partition_for(g, OFFSETS_SHARDS) for g in group_ids})
    return Throughput(label, n_conns, depth, w.wall, w.requests, w.broker_cpu_s, w.client_cpu_s, errors, w.other_cpu_s, w.broker_sys_s,
                      {"groups": groups, "shards": shards})


# =========================================================================== load
@dataclass
class WriteResult:
    groups: int
    partitions: int
    records: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float
    errors: dict
    other_cpu_s: float = 0.0


LOAD_OFFSET_BASE = 1000


async def write_offsets(host: str, port: int, pid: int, topic: str, partitions: int, groups: int, n_conns: int = 16, depth: int = 4) -> WriteResult:
    """``groups`` simple groups each commit every partition of ``topic`` in one request."""
    base = commit_template("ld-000000", topic, list(range(partitions)), offset=LOAD_OFFSET_BASE)
    ids = iter(range(groups))

    def source():
        i = next(ids, None)
        if i is None:
            return None
        return (base.retarget(b"ld-000000", f"ld-{i:06d}".encode()) if i else base, ())

    conns = await connect(host, port, n_conns)
    stats = PumpStats()
    pumps = [Pump(c, source, depth, stats) for c in conns]
    b0, c0, m0, t0 = cpu_seconds(pid), self_cpu_seconds(), machine_busy_seconds(), perf()
    for p in pumps:
        p.start()
    await asyncio.wait_for(asyncio.gather(*(p.done for p in pumps)), 600)
    b1, c1, m1, t1 = cpu_seconds(pid), self_cpu_seconds(), machine_busy_seconds(), perf()
    for c in conns:
        c.close()
    errors = {k.name: v for k, v in stats.errors.items()}
    if stats.closed:
        errors["connection closed"] = stats.closed
    other = max((m1 - m0) - (b1 - b0) - (c1 - c0), 0.0)
    return WriteResult(groups, partitions, stats.count * partitions, t1 - t0, b1 - b0, c1 - c0, errors, other)


async def check_offsets(host: str, port: int, topic: str, partitions: int, group_ids: list[str]) -> list[str]:
    """OffsetFetch a few groups: every partition must hold LOAD_OFFSET_BASE + partition."""
    conn = (await connect(host, port, 1))[0]
    problems = []
    for g in group_ids:
        resp = await conn.request(FETCH, FETCH_V, {"group_id": g, "topics": None, "require_stable": True})
        if resp.error_code != ErrorCode.none:
            problems.append(f"{g}: OffsetFetch {resp.error_code.name}")
            continue
        got = {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions if p.error_code == ErrorCode.none}
        want = {(topic, p): LOAD_OFFSET_BASE + p for p in range(partitions)}
        if got != want:
            missing = len(set(want) - set(got))
            wrong = sum(1 for k in want if k in got and got[k] != want[k])
            problems.append(f"{g}: {missing} partitions missing, {wrong} wrong offsets, {len(got)} returned")
    conn.close()
    return problems


# =========================================================================== logs
def log_events(text: str) -> list[dict]:
    """The broker's JSON log lines; a run of other lines (a traceback printed by the event loop) becomes one
    ``{"level": "raw"}`` entry named by its first and last lines."""
    out: list[dict] = []
    raw: list[str] = []

    def flush() -> None:
        if raw:
            first, last = (re.sub(r" at 0x[0-9a-f]+", "", x) for x in (raw[0], raw[-1]))
            name = first[:120] if len(raw) == 1 else f"{first[:120]} … {last[:200]}"
            out.append({"event": name, "level": "raw"})
            raw.clear()

    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                ev = json.loads(line)
            except ValueError:
                raw.append(line)
                continue
            flush()
            out.append(ev)
        else:
            raw.append(line)
    flush()
    return out


def problems_in_log(text: str) -> Counter:
    """warning/error/critical events (and non-JSON output) by level and event name."""
    found: Counter = Counter()
    for ev in log_events(text):
        level = ev.get("level", "")
        if level in ("warning", "error", "critical", "exception", "raw"):
            found[f"{level}: {ev.get('event')}"] += 1
    return found


def median(xs):
    return statistics.median(xs) if xs else float("nan")


async def floor_heartbeats(port: int, pid: int, n_conns: int, depth: int, warmup: float, seconds: float) -> Throughput:
    """The same Heartbeat load against ``bench.group_floor`` (a canned-answer server): the I/O floor."""
    conns = await connect("127.0.0.1", port, n_conns)
    stats = PumpStats()
    tpl = Template(HEARTBEAT, HEARTBEAT_V, {"group_id": "floor", "generation_id": 1, "member_id": "floor-member", "group_instance_id": None})
    item = (tpl, ())
    pumps = [Pump(c, lambda: item, depth, stats) for c in conns]
    w = await run_pumps(pumps, stats, pid, warmup, seconds)
    for c in conns:
        c.close()
    errors = {k.name: v for k, v in stats.errors.items()}
    return Throughput("Heartbeat, canned-answer server (I/O floor)", n_conns, depth, w.wall, w.requests, w.broker_cpu_s,
                      w.client_cpu_s, errors, w.other_cpu_s, w.broker_sys_s)
