"""Membership churn against one consumer group, on kafkalite or on Apache Kafka (4.4 by default: tests/reference_kafka.py).

    python -m bench.churn --broker kafkalite|kafka --protocol classic|consumer \\
        --members 50 --seconds 600 --json out.json

One topic (``--partitions``, 60 by default) gets a steady flow of records from
a producer in this process. ``--members`` consumers, each a child process
running confluent-kafka (classic protocol with ``cooperative-sticky``, or
``group.protocol=consumer``), consume it in one group and commit synchronously
after every batch they process (auto commit off), and in ``on_revoke`` before
giving a partition up. While the churn lasts, this process keeps the population
around ``--members`` by drawing, with a fixed seed, one action at a time:
a new member joins, a member leaves (``close()``), or a member crashes
(``kill -9``).

Children report to this process over their stdout, one JSON line per event,
with ``time.monotonic()`` (CLOCK_MONOTONIC, the same clock in every process)
taken where the event happened: partitions assigned / revoked / lost (in the
rebalance callbacks) and every commit (partition, offset, error name). Kills
are timestamped here, just before the signal.

When the churn stops, the group is given ``--settle`` seconds to settle, then
every member closes, and the group's committed offsets are read back with
AdminClient. Invariants, checked over all events in timestamp order:

a. overlaps: a partition assigned to a member while another live member holds
   it (assigned and not yet revoked or lost; a killed member holds nothing from
   the instant it is killed, a closed one from the moment ``close()`` returned);
b. unowned (or doubly owned) partitions once the group has settled;
c. backwards commits: a successful commit of a partition below the last
   successful one, and partitions whose committed offset read back at the end
   is below the last successful commit a member reported.

The report (printed, and written with ``--json``) also counts joins, leaves,
crashes, rebalance callbacks, commits and commit errors by name, and what the
broker's own log says about rebalances and member epochs.

``--hog N`` runs N busy-loop processes (same nice level) while the churn runs,
to see what CPU starvation does; ``--loop-stall MS:EVERY_MS`` (kafkalite only)
blocks the broker's event loop for MS milliseconds every EVERY_MS.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# client-side settings shared by both brokers
CLASSIC_SESSION_MS = 10_000
CLASSIC_HEARTBEAT_MS = 1_000
MAX_POLL_INTERVAL_MS = 30_000  # also the rebalance timeout both protocols send


@dataclass
class ChurnConfig:
    broker: str = "kafkalite"  # kafkalite | kafka
    protocol: str = "classic"  # classic | consumer
    members: int = 50
    seconds: float = 600.0
    partitions: int = 60
    seed: int = 1
    action_interval: float = 1.0  # mean seconds between churn actions (exponential)
    min_life: float = 3.0  # a member is not picked to leave or crash before this age
    leave_share: float = 0.6  # of the departures, the share that leave cleanly (the rest crash)
    produce_rate: float = 200.0  # records per second, over all partitions
    settle: float = 90.0  # upper bound of the wait for the group to settle after the churn
    settle_quiet: float = 5.0  # the group counts as settled after this long without a change
    consumer_heartbeat_ms: int = 1_000  # group.consumer.heartbeat.interval.ms (broker side)
    consumer_session_ms: int = 10_000  # group.consumer.session.timeout.ms (broker side)
    classic_session_ms: int = CLASSIC_SESSION_MS  # session.timeout.ms of the classic members (client side)
    hog: int = 0  # busy-loop processes during the churn
    hog_through_settle: bool = False
    loop_stall: str | None = None  # "MS:EVERY_MS", kafkalite only
    pause: str | None = None  # "MS:EVERY_MS": SIGSTOP the broker process for MS, every EVERY_MS (either broker)
    loop_monitor: bool = False  # kafkalite logs its event loop's lag (LOOPLAG lines)
    trace: bool = False  # kafkalite writes trace.jsonl (requests, heartbeats, commits) in the work dir
    # with loop_monitor: a thread samples the loop thread's stack during stalls (STALLSTACK lines). Off by
    # default: each sample takes the GIL from the loop, and when the sampler waits for a CPU the loop waits
    # with it; under four hogs that made the longest stall 1.5-2x what the broker alone shows
    stall_stacks: bool = False
    no_loop_watch: bool = False  # kafkalite without its stall compensation (LoopWatch reports nothing): for before/after runs
    bootstrap: str | None = None  # use a running broker instead of starting one
    work_dir: str | None = None
    kafka_debug_log: bool = False  # GroupMetadataManager at DEBUG on the reference broker (member epochs)


# ============================================================================ child


def _child_main(spec: dict) -> int:
    """One group member: consume, commit, report events as JSON lines on stdout."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    out = sys.stdout
    lock = threading.Lock()
    topic = spec["topic"]

    def emit(kind: str, **fields) -> None:
        fields["e"] = kind
        fields.setdefault("t", time.monotonic())
        line = json.dumps(fields, separators=(",", ":"))
        with lock:
            try:
                out.write(line + "\n")
                out.flush()
            except (BrokenPipeError, ValueError):
                os._exit(0)

    stop = threading.Event()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "leave":
                break
        stop.set()  # "leave", or the parent went away

    threading.Thread(target=read_stdin, daemon=True).start()

    conf = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": spec["group"],
        "client.id": f"churn-{spec['id']}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
        "error_cb": lambda err: emit("client_error", name=err.name(), fatal=err.fatal()),
    }
    if spec["protocol"] == "classic":
        conf.update({
            "group.protocol": "classic",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": spec.get("classic_session_ms", CLASSIC_SESSION_MS),
            "heartbeat.interval.ms": CLASSIC_HEARTBEAT_MS,
        })
    else:
        conf["group.protocol"] = "consumer"
    consumer = Consumer(conf)
    owned: set[int] = set()
    position: dict[int, int] = {}  # next offset to consume, per owned partition
    committed: dict[int, int] = {}  # last offset this member committed successfully

    def commit(parts) -> None:
        offsets = [TopicPartition(topic, p, position[p]) for p in sorted(parts) if p in position and position[p] > committed.get(p, -1)]
        if not offsets:
            return
        t0 = time.monotonic()
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0]
            t1 = time.monotonic()
            for tp in offsets:
                emit("commit", t=t1, t0=t0, p=tp.partition, o=tp.offset, err=err.name())
            return
        t1 = time.monotonic()
        for tp in result or []:
            name = tp.error.name() if tp.error is not None else None
            if name is None:
                committed[tp.partition] = tp.offset
            emit("commit", t=t1, t0=t0, p=tp.partition, o=tp.offset, err=name)

    def on_assign(c, partitions) -> None:
        parts = [tp.partition for tp in partitions]
        emit("assign", p=parts, m=c.memberid())
        owned.update(parts)

    def on_revoke(c, partitions) -> None:
        parts = [tp.partition for tp in partitions]
        commit([p for p in parts if p in owned])
        for p in parts:
            owned.discard(p)
            position.pop(p, None)
        emit("revoke", p=parts)

    def on_lost(c, partitions) -> None:
        parts = [tp.partition for tp in partitions]
        for p in parts:
            owned.discard(p)
            position.pop(p, None)
        emit("lost", p=parts)

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    emit("ready", pid=os.getpid())
    while not stop.is_set():
        msgs = consumer.consume(num_messages=200, timeout=0.3)
        touched = set()
        for m in msgs:
            if m.error() is not None:
                continue
            p = m.partition()
            if p not in owned:
                continue
            position[p] = m.offset() + 1
            touched.add(p)
        if touched:
            commit(touched)
    emit("closing")
    consumer.close()  # revokes (on_revoke commits), then leaves the group
    emit("closed")
    return 0


# ============================================================================ brokers


def _reference_kafka(data_dir: Path, config: dict, debug: bool):
    from tests.reference_kafka import ReferenceKafka

    class DebugReferenceKafka(ReferenceKafka):
        def _write_config(self):
            path = super()._write_config()
            if debug:
                with open(self.data_dir / "log4j2.properties", "a") as f:
                    f.write(
                        "logger.gmm.name = org.apache.kafka.coordinator.group.GroupMetadataManager\n"
                        "logger.gmm.level = DEBUG\n"
                    )
            return path

    return DebugReferenceKafka(data_dir, config=config)


class BrokerHandle:
    """kafkalite (bench.spawn.Broker, optionally with a stalling loop) or reference Kafka."""

    def __init__(self, cfg: ChurnConfig, work: Path) -> None:
        self.cfg = cfg
        self.work = work
        self.impl = None
        self.external = cfg.bootstrap is not None

    def start(self) -> str:
        cfg = self.cfg
        if self.external:
            return cfg.bootstrap
        if cfg.broker == "kafka":
            config = {
                "group.consumer.heartbeat.interval.ms": cfg.consumer_heartbeat_ms,
                "group.consumer.min.heartbeat.interval.ms": min(100, cfg.consumer_heartbeat_ms),
                "group.consumer.session.timeout.ms": cfg.consumer_session_ms,
                "group.consumer.min.session.timeout.ms": min(1000, cfg.consumer_session_ms),
            }
            self.impl = _reference_kafka(self.work / "kafka", config, cfg.kafka_debug_log).start()
        else:
            from bench.spawn import Broker

            python_args = []
            if cfg.loop_stall or cfg.loop_monitor or cfg.trace or cfg.no_loop_watch:
                python_args = ["-m", "bench.churn", "--stall-launch", cfg.loop_stall or "0:0", "monitor" if cfg.loop_monitor else "-"]
            args = [
                "--group-consumer-heartbeat-interval-ms", str(cfg.consumer_heartbeat_ms),
                "--group-consumer-session-timeout-ms", str(cfg.consumer_session_ms),
            ]
            if cfg.trace:
                os.environ["CHURN_TRACE"] = str(self.work / "trace.jsonl")
            if cfg.no_loop_watch:
                os.environ["CHURN_NO_LOOP_WATCH"] = "1"
            if cfg.stall_stacks:
                os.environ["CHURN_STALL_STACKS"] = "1"
            try:
                self.impl = Broker(self.work / "kafkalite-data", *args, python_args=python_args, log_path=self.work / "kafkalite.log").start()
            finally:
                os.environ.pop("CHURN_TRACE", None)
                os.environ.pop("CHURN_NO_LOOP_WATCH", None)
                os.environ.pop("CHURN_STALL_STACKS", None)
        return self.impl.bootstrap

    @property
    def pid(self) -> int | None:
        if self.impl is None or self.impl.proc is None:
            return None
        return self.impl.proc.pid

    def logs(self) -> str:
        if self.impl is None:
            return ""
        if self.cfg.broker == "kafka":
            return self.impl.logs()
        return self.impl.logs()

    def stop(self) -> None:
        if self.impl is not None and self.impl.proc is not None:
            self.impl.stop()


def _stall_launch(argv: list[str]) -> int:
    """``python -m bench.churn --stall-launch MS:EVERY -m broker serve ...``: kafkalite with a loop that blocks."""
    stall_ms, every_ms = (int(x) for x in argv[0].split(":"))
    monitor = argv[1] == "monitor"
    rest = argv[2:]
    if rest[:2] == ["-m", "broker"]:
        rest = rest[2:]
    import asyncio

    import broker.server as server

    real_run = server.run

    async def run_with_stall(config):
        async def stall():
            while True:
                await asyncio.sleep(every_ms / 1000)
                time.sleep(stall_ms / 1000)  # blocks the whole loop, as a starved or paused process would

        ticked = [time.monotonic()]
        main_tid = threading.main_thread().ident
        main_native = threading.get_native_id()
        stacks: collections.Counter = collections.Counter()

        def schedstat() -> tuple[int, int]:
            """The loop thread's time on a CPU and waiting for one (ns), from /proc."""
            try:
                with open(f"/proc/self/task/{main_native}/schedstat") as f:
                    run_ns, wait_ns, _ = f.read().split()
                return int(run_ns), int(wait_ns)
            except (OSError, ValueError):
                return 0, 0

        def sample_stalls() -> None:
            # what the loop's thread is doing while the loop is late by more than 200 ms: a block
            # (the same stack sample after sample) or a share of the CPU too small (anywhere)
            while True:
                time.sleep(0.02)
                if time.monotonic() - ticked[0] > 0.2:
                    frame = sys._current_frames().get(main_tid)
                    if frame is not None:
                        import traceback

                        stack = traceback.extract_stack(frame)[-8:]
                        stacks[" < ".join(f"{Path(f.filename).name}:{f.lineno}:{f.name}" for f in reversed(stack))] += 1

        async def watch():
            # how late a 50 ms sleep wakes up: the loop's lag, summarised every 5 s on stderr, with the
            # loop thread's CPU time and run-queue wait, and the stacks sampled during stalls
            lags: list[float] = []
            last = time.monotonic()
            if os.environ.get("CHURN_STALL_STACKS"):
                threading.Thread(target=sample_stalls, daemon=True).start()
            run0, wait0 = schedstat()
            while True:
                t0, c0 = time.monotonic(), time.thread_time()
                await asyncio.sleep(0.05)
                ticked[0] = time.monotonic()
                lags.append((ticked[0] - t0 - 0.05) * 1000)
                if lags[-1] > 100:  # the loop thread's CPU time in a late tick: near the lag, the loop was busy; far below, it waited for a CPU
                    print(f"SLOWTICK lag={lags[-1]:.0f}ms cpu={(time.thread_time() - c0) * 1000:.0f}ms", file=sys.stderr, flush=True)
                if t0 - last >= 5:
                    lags.sort()
                    run1, wait1 = schedstat()
                    print(f"LOOPLAG n={len(lags)} p50={lags[len(lags) // 2]:.0f}ms p99={lags[int(len(lags) * 0.99)]:.0f}ms max={lags[-1]:.0f}ms "
                          f"cpu={(run1 - run0) / 1e6:.0f}ms runq_wait={(wait1 - wait0) / 1e6:.0f}ms over={(ticked[0] - last) * 1000:.0f}ms",
                          file=sys.stderr, flush=True)
                    for stack, n in stacks.most_common(3):
                        print(f"STALLSTACK samples={n} {stack}", file=sys.stderr, flush=True)
                    stacks.clear()
                    lags, last = [], t0
                    run0, wait0 = run1, wait1

        loop = asyncio.get_running_loop()
        tasks = []
        if stall_ms:
            tasks.append(loop.create_task(stall()))
        if monitor:
            tasks.append(loop.create_task(watch()))
        try:
            return await real_run(config)
        finally:
            for task in tasks:
                task.cancel()

    server.run = run_with_stall
    if os.environ.get("CHURN_NO_LOOP_WATCH"):
        import broker.coordinator.runtime as runtime

        runtime.LoopWatch.lost_ms = lambda self: 0
    trace_path = os.environ.get("CHURN_TRACE")
    if trace_path:
        _install_trace(trace_path)
    from broker.cli import main as cli_main

    return cli_main(rest)


def _install_trace(path: str) -> None:
    """Diagnostics for a kafkalite run: requests' arrival, dispatch and drop times, heartbeats and commits.

    One JSON line per event in ``path``; ``mono`` is time.monotonic(), the clock the children use.
    """
    import broker.coordinator.classic as classic
    import broker.coordinator.consumer as consumer
    import broker.coordinator.shard as shard
    import broker.server as server

    f = open(path, "w", buffering=1 << 16)
    arrived: dict[int, float] = {}

    def w(**d) -> None:
        d["mono"] = round(time.monotonic(), 4)
        f.write(json.dumps(d, separators=(",", ":"), default=str) + "\n")

    conn_cls = server.KafkaConnection
    real_rx, real_dispatch, real_lost = conn_cls.data_received, conn_cls._dispatch, conn_cls.connection_lost

    def data_received(self, data):
        before = len(self.queue) if self.queue else 0
        real_rx(self, data)
        if self.queue and len(self.queue) > before:
            now = time.monotonic()
            for ev in list(self.queue)[before:]:
                arrived[id(ev)] = now
                if getattr(ev, "api_key", None) in (8, 11, 12, 13, 14, 68):
                    w(ev="rx", conn=id(self), api=ev.api_key, client=ev.client_id, corr=ev.correlation_id)

    async def dispatch(self, event):
        t0 = time.monotonic()
        t_rx = arrived.pop(id(event), None)
        api = getattr(event, "api_key", None)
        try:
            return await real_dispatch(self, event)
        finally:
            if api in (8, 11, 12, 13, 14, 68):
                w(ev="req", conn=id(self), api=api, client=event.client_id, corr=event.correlation_id,
                  queued_ms=None if t_rx is None else round((t0 - t_rx) * 1000, 1), took_ms=round((time.monotonic() - t0) * 1000, 1))

    def connection_lost(self, exc):
        dropped = [(getattr(e, "api_key", None), getattr(e, "client_id", None)) for e in (self.queue or ())]
        for e in self.queue or ():
            arrived.pop(id(e), None)
        busy = self.task is not None and not self.task.done()
        if dropped or busy:
            w(ev="conn_lost", conn=id(self), dropped=dropped, busy=busy)
        return real_lost(self, exc)

    conn_cls.data_received, conn_cls._dispatch, conn_cls.connection_lost = data_received, dispatch, connection_lost

    import broker.handlers.consumer_group_heartbeat as cgh_handler

    real_invalid = cgh_handler._invalid

    def cgh_invalid(req, code, message):
        # every ConsumerGroupHeartbeat error answer, those refused before the coordinator included
        w(ev="cgh_error", client=None, member=req.member_id, epoch=req.member_epoch, err=int(code), msg=message,
          owned=None if req.topic_partitions is None else sum(len(tp.partitions) for tp in req.topic_partitions))
        return real_invalid(req, code, message)

    cgh_handler._invalid = cgh_invalid

    real_hb = consumer.ConsumerGroups.heartbeat

    def cg_heartbeat(self, p):
        result = real_hb(self, p)
        r = result.response
        w(ev="cghb", client=p.client_id, member=p.member_id or r.get("member_id"), epoch=p.member_epoch, owned=None if p.owned is None else sum(len(v) for v in p.owned.values()),
          resp_epoch=r.get("member_epoch"), err=int(r.get("error_code", 0)), assignment=r.get("assignment") is not None, iv=r.get("heartbeat_interval"))
        return result

    consumer.ConsumerGroups.heartbeat = cg_heartbeat

    real_fence = consumer.ConsumerGroups.fence

    def fence(self, group, member, reason):
        w(ev="fence", member=member.member_id, client=member.client_id, reason=reason, late_ms=self.timers.firing_late_ms)
        return real_fence(self, group, member, reason)

    consumer.ConsumerGroups.fence = fence

    import broker.coordinator.consumer_group as consumer_group

    # when each partition was assigned to its member (KIP-1251's "assignment epoch"): (group, member, topic id, p) -> epoch
    assigned_at: dict = {}
    real_set_current = consumer_group.ConsumerGroup.set_current

    def set_current(self, member, epoch, previous, state, assigned, pending, *rest):
        before = {(t, p) for t, ps in member.assigned.items() for p in ps}
        after = {(t, p) for t, ps in assigned.items() for p in ps}
        for t, p in before - after:
            assigned_at.pop((self.group_id, member.member_id, t, p), None)
        for t, p in after - before:
            assigned_at[(self.group_id, member.member_id, t, p)] = epoch
        return real_set_current(self, member, epoch, previous, state, assigned, pending, *rest)

    consumer_group.ConsumerGroup.set_current = set_current
    real_remove = consumer_group.ConsumerGroup.remove_member

    def remove_member(self, member_id):
        for k in [k for k in assigned_at if k[0] == self.group_id and k[1] == member_id]:
            del assigned_at[k]
        return real_remove(self, member_id)

    consumer_group.ConsumerGroup.remove_member = remove_member

    real_commit = shard.GroupShard.offset_commit

    def offset_commit(self, group_id, member_id, generation, instance_id, version, retention_ms, partitions):
        group = self.groups.get(group_id)
        m = getattr(group, "members", {}).get(member_id) if group is not None else None
        current = getattr(m, "member_epoch", None)
        result = real_commit(self, group_id, member_id, generation, instance_id, version, retention_ms, partitions)
        errs = sorted({int(code) for _, _, code in result.response})
        since = None
        if m is not None and errs == [113]:
            # per partition: the epoch it was assigned to this member at (None: not assigned to it now)
            by_name = self.metadata.by_name
            since = [assigned_at.get((group_id, member_id, by_name[c.topic][0], c.partition)) if c.topic in by_name else None for c in partitions]
        w(ev="commit", member=member_id, epoch=generation, member_epoch=current, errs=errs, parts=[c.partition for c in partitions], assigned_at=since)
        return result

    shard.GroupShard.offset_commit = offset_commit

    real_classic_hb = classic.ClassicGroups.heartbeat

    def classic_heartbeat(self, group_id, generation, member_id, instance_id):
        code = real_classic_hb(self, group_id, generation, member_id, instance_id)
        w(ev="hb", member=member_id, gen=generation, err=int(code))
        return code

    classic.ClassicGroups.heartbeat = classic_heartbeat

    real_expire = classic.ClassicGroups._expire_heartbeat

    def expire_heartbeat(self, group_id, member_id):
        group = self.groups.get(group_id)
        present = group is not None and member_id in getattr(group, "members", {})
        out = real_expire(self, group_id, member_id)
        gone = group is not None and member_id not in getattr(group, "members", {})
        if present and gone:
            w(ev="expire", member=member_id, late_ms=self.timers.firing_late_ms, state=group.state)
        return out

    classic.ClassicGroups._expire_heartbeat = expire_heartbeat

    import atexit

    atexit.register(f.close)


# ============================================================================ parent


@dataclass
class Member:
    id: int
    proc: subprocess.Popen
    started: float
    buf: bytes = b""
    state: str = "running"  # running | leaving | gone
    leave_sent: float | None = None
    closed: bool = False
    ready: bool = False


@dataclass
class Event:
    t: float
    member: int
    kind: str  # assign revoke lost commit kill closed exit ready closing client_error
    data: dict = field(default_factory=dict)


class Churn:
    def __init__(self, cfg: ChurnConfig, bootstrap: str, work: Path, broker_pid: int | None = None) -> None:
        self.cfg = cfg
        self.bootstrap = bootstrap
        self.work = work
        self.broker_pid = broker_pid
        self.rng = random.Random(cfg.seed)
        suffix = uuid.uuid4().hex[:8]
        self.topic = f"churn-{suffix}"
        self.group = f"churn-group-{suffix}"
        self.members: dict[int, Member] = {}
        self.next_id = 0
        self.events: list[Event] = []
        self.sel = selectors.DefaultSelector()
        self.counts = collections.Counter()
        self.child_log = open(work / "children.log", "ab")
        self.last_change = time.monotonic()
        self.live_owned: dict[int, set[int]] = collections.defaultdict(set)  # member -> partitions, as events arrive
        self.hogs: list[subprocess.Popen] = []
        self.produced = 0
        self._stop_producer = threading.Event()
        self._stop_pauses = threading.Event()
        self.pauses: list[tuple[float, float]] = []

    # -- setup ----------------------------------------------------------------
    def create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fut = admin.create_topics([NewTopic(self.topic, self.cfg.partitions, 1)])[self.topic]
        fut.result(60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            md = admin.list_topics(self.topic, timeout=5)
            t = md.topics.get(self.topic)
            if t is not None and t.error is None and len(t.partitions) == self.cfg.partitions:
                return
            time.sleep(0.2)
        raise RuntimeError(f"topic {self.topic} did not show up with {self.cfg.partitions} partitions")

    def _producer(self) -> None:
        from confluent_kafka import Producer

        prod = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, "acks": 1})
        n = 0
        interval = 1.0 / self.cfg.produce_rate if self.cfg.produce_rate > 0 else 1.0
        next_t = time.monotonic()
        while not self._stop_producer.is_set():
            prod.produce(self.topic, value=b"x" * 64, partition=n % self.cfg.partitions)
            n += 1
            prod.poll(0)
            next_t += interval
            delay = next_t - time.monotonic()
            if delay > 0:
                self._stop_producer.wait(delay)
            elif delay < -1.0:
                next_t = time.monotonic()  # fell behind (starved): do not burst to catch up
        prod.flush(10)
        self.produced = n

    # -- members --------------------------------------------------------------
    def spawn(self) -> Member:
        i = self.next_id
        self.next_id += 1
        spec = {"bootstrap": self.bootstrap, "topic": self.topic, "group": self.group, "protocol": self.cfg.protocol, "id": i,
                "classic_session_ms": self.cfg.classic_session_ms}
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.churn", "--child", json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.child_log,
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        os.set_blocking(proc.stdout.fileno(), False)
        m = Member(i, proc, time.monotonic())
        self.members[i] = m
        self.sel.register(proc.stdout, selectors.EVENT_READ, m)
        self.counts["joins"] += 1
        return m

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.state == "running"]

    def leave(self, m: Member, *, counted: bool = True) -> None:
        m.state = "leaving"
        m.leave_sent = time.monotonic()
        if counted:
            self.counts["leaves"] += 1
        with contextlib.suppress(OSError):
            m.proc.stdin.write(b"leave\n")
            m.proc.stdin.flush()

    def crash(self, m: Member, *, counted: bool = True) -> None:
        t = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            m.proc.send_signal(signal.SIGKILL)
        self.events.append(Event(t, m.id, "kill"))
        self.live_owned.pop(m.id, None)
        if counted:
            self.counts["crashes"] += 1
        self._gone(m, eof=False)

    def _gone(self, m: Member, *, eof: bool) -> None:
        if m.state == "gone":
            return
        if eof and not m.closed:
            # stdout closed without "closed": it died on its own (or was killed by us just before)
            self.events.append(Event(time.monotonic(), m.id, "exit"))
            self.counts["unexpected_exits"] += 1
        m.state = "gone"
        self.live_owned.pop(m.id, None)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(m.proc.stdout)
        with contextlib.suppress(OSError):
            m.proc.stdin.close()
        m.proc.wait()
        with contextlib.suppress(OSError):
            m.proc.stdout.close()

    # -- events ---------------------------------------------------------------
    def pump(self, timeout: float) -> None:
        for key, _ in self.sel.select(timeout):
            m: Member = key.data
            try:
                chunk = os.read(m.proc.stdout.fileno(), 65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._drain_lines(m, final=True)
                self._gone(m, eof=True)
                continue
            m.buf += chunk
            self._drain_lines(m, final=False)

    def _drain_lines(self, m: Member, *, final: bool) -> None:
        *lines, m.buf = m.buf.split(b"\n")
        if final and m.buf:
            lines.append(m.buf)
            m.buf = b""
        for line in lines:
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except ValueError:
                continue
            kind = d.pop("e")
            t = d.pop("t")
            ev = Event(t, m.id, kind, d)
            self.events.append(ev)
            if kind in ("assign", "revoke", "lost"):
                self.last_change = time.monotonic()
                owned = self.live_owned[m.id]
                if kind == "assign":
                    owned.update(d["p"])
                else:
                    owned.difference_update(d["p"])
            elif kind == "closed":
                m.closed = True
                self.live_owned.pop(m.id, None)
            elif kind == "ready":
                m.ready = True

    # -- phases ---------------------------------------------------------------
    def _start_hogs(self) -> None:
        for _ in range(self.cfg.hog):
            self.hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        if self.cfg.pause and self.broker_pid is not None:
            threading.Thread(target=self._pauser, daemon=True).start()

    def _pauser(self) -> None:
        """Stop the whole broker process now and then (as a long GC pause or a descheduled VM would)."""
        ms, every = (int(x) for x in self.cfg.pause.split(":"))
        while not self._stop_pauses.wait(every / 1000):
            t0 = time.monotonic()
            try:
                os.kill(self.broker_pid, signal.SIGSTOP)
                self._stop_pauses.wait(ms / 1000)
            finally:
                os.kill(self.broker_pid, signal.SIGCONT)
            self.pauses.append((t0, time.monotonic()))
            self.events.append(Event(t0, -1, "pause", {"until": self.pauses[-1][1]}))

    def _stop_hogs(self) -> None:
        self._stop_pauses.set()
        for h in self.hogs:
            h.kill()
            h.wait()
        self.hogs = []

    def run(self) -> dict:
        cfg = self.cfg
        self.create_topic()
        producer = threading.Thread(target=self._producer, daemon=True)
        producer.start()
        t_start = time.monotonic()
        load_start = _loadavg()
        broker_cpu0 = _cpu(self.broker_pid)
        # the initial population, spread over a few seconds
        for _ in range(cfg.members):
            self.spawn()
            self.pump(0.1)
        t_populated = time.monotonic()
        self._start_hogs()
        churn_end = t_start + cfg.seconds
        next_action = time.monotonic() + self.rng.expovariate(1.0 / cfg.action_interval)
        load_samples = []
        next_load = time.monotonic() + 10
        while time.monotonic() < churn_end:
            now = time.monotonic()
            if now >= next_action:
                self._act(now)
                next_action = now + self.rng.expovariate(1.0 / cfg.action_interval)
            if now >= next_load:
                load_samples.append(_loadavg())
                next_load = now + 10
            self._reap_leavers(now)
            self.pump(max(0.0, min(next_action, churn_end) - time.monotonic()))
        t_churn_end = time.monotonic()
        if not cfg.hog_through_settle:
            self._stop_hogs()
        # settle: no new actions; wait until every partition has exactly one live owner, stable for a while
        settled_at = None
        deadline = t_churn_end + cfg.settle
        while time.monotonic() < deadline:
            now = time.monotonic()
            self._reap_leavers(now)
            if self._exactly_once() and now - self.last_change >= cfg.settle_quiet:
                settled_at = now
                break
            self.pump(0.2)
        t_settle_end = time.monotonic()
        self._stop_hogs()
        load_end = _loadavg()
        broker_cpu1 = _cpu(self.broker_pid)
        # stop producing, close every member (their on_revoke commits), read the committed offsets
        self._stop_producer.set()
        producer.join(30)
        for m in self.live():
            self.leave(m, counted=False)
        close_deadline = time.monotonic() + 60
        while any(m.state != "gone" for m in self.members.values()) and time.monotonic() < close_deadline:
            self.pump(0.2)
        for m in list(self.members.values()):
            if m.state != "gone":
                self.counts["close_timeouts"] += 1
                self.crash(m, counted=False)
        final_offsets = self._committed_offsets()
        report = analyse(self.events, cfg.partitions, settle_at=t_settle_end, final_offsets=final_offsets)
        report.update(
            broker=cfg.broker,
            protocol=cfg.protocol,
            members=cfg.members,
            partitions=cfg.partitions,
            seed=cfg.seed,
            churn_seconds=round(t_churn_end - t_start, 1),
            populated_s=round(t_populated - t_start, 1),  # every initial member's process started
            # when the last partition owned twice was handed out, in seconds from the first member's start
            last_overlap_s=None if report["last_overlap_t"] is None else round(report["last_overlap_t"] - t_start, 1),
            settled=settled_at is not None,
            settle_seconds=round((settled_at or t_settle_end) - t_churn_end, 1),
            joins=self.counts["joins"],
            leaves=self.counts["leaves"],
            crashes=self.counts["crashes"],
            unexpected_exits=self.counts["unexpected_exits"],
            leave_timeouts=self.counts["leave_timeouts"],
            close_timeouts=self.counts["close_timeouts"],
            records_produced=self.produced,
            loadavg_start=load_start,
            loadavg_end=load_end,
            loadavg_samples=load_samples,
            broker_cpu_seconds=None if broker_cpu0 is None or broker_cpu1 is None else round(broker_cpu1 - broker_cpu0, 1),
            hog=cfg.hog,
            loop_stall=cfg.loop_stall,
            pauses=len(self.pauses),
            config=asdict(cfg),
        )
        return report

    def _act(self, now: float) -> None:
        cfg = self.cfg
        live = self.live()
        n = len(live)
        lo, hi = cfg.members - 2, cfg.members + 2
        if n < lo:
            action = "join"
        elif n > hi:
            action = "depart"
        else:
            action = self.rng.choices(["join", "depart"], weights=[1, 1])[0]
        if action == "join":
            self.spawn()
            return
        old = [m for m in live if now - m.started >= cfg.min_life] or live
        if not old:
            return
        m = self.rng.choice(old)
        if self.rng.random() < cfg.leave_share:
            self.leave(m)
        else:
            self.crash(m)

    def _reap_leavers(self, now: float) -> None:
        for m in self.members.values():
            if m.state == "leaving" and m.leave_sent is not None and now - m.leave_sent > 30:
                self.counts["leave_timeouts"] += 1
                self.crash(m, counted=False)

    def _exactly_once(self) -> bool:
        seen = collections.Counter()
        for mid, parts in self.live_owned.items():
            m = self.members.get(mid)
            if m is None or m.state == "gone":
                continue
            seen.update(parts)
        return len(seen) == self.cfg.partitions and all(v == 1 for v in seen.values())

    def _committed_offsets(self) -> dict[int, int] | None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        req = ConsumerGroupTopicPartitions(self.group, [TopicPartition(self.topic, p) for p in range(self.cfg.partitions)])
        for _ in range(5):
            try:
                res = admin.list_consumer_group_offsets([req])[self.group].result(30)
                return {tp.partition: tp.offset for tp in res.topic_partitions if tp.error is None}
            except Exception:  # noqa: BLE001 - retried, then reported as missing
                time.sleep(1)
        return None

    def close(self) -> None:
        self._stop_producer.set()
        self._stop_hogs()
        for m in list(self.members.values()):
            if m.state != "gone":
                self.crash(m, counted=False)
        self.child_log.close()


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return ""


def _cpu(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        from bench.procstat import cpu_seconds

        return cpu_seconds(pid)
    except OSError:
        return None


# ============================================================================ analysis


def analyse(events: list[Event], partitions: int, *, settle_at: float | None = None, final_offsets: dict[int, int] | None = None) -> dict:
    """The invariants over every event, in timestamp order (see the module docstring)."""
    order = {"kill": 0, "exit": 0, "closed": 0, "revoke": 1, "lost": 1, "commit": 2, "assign": 3}
    evs = sorted(events, key=lambda e: (e.t, order.get(e.kind, 4)))
    owners: dict[int, set[int]] = collections.defaultdict(set)  # partition -> members holding it
    holding: dict[int, set[int]] = collections.defaultdict(set)  # member -> partitions
    overlaps = []
    last_commit: dict[int, tuple[int, float, int]] = {}  # partition -> (offset, t, member)
    backwards = []
    commit_errors = collections.Counter()
    commits_ok = 0
    callbacks = collections.Counter()
    snapshot = None
    for ev in evs:
        if settle_at is not None and snapshot is None and ev.t > settle_at:
            snapshot = {p: set(ms) for p, ms in owners.items()}
        if ev.kind == "assign":
            if ev.data["p"]:
                callbacks["assign"] += 1
            for p in ev.data["p"]:
                others = owners[p] - {ev.member}
                if others:
                    overlaps.append({"t": ev.t, "partition": p, "new_owner": ev.member, "held_by": sorted(others)})
                owners[p].add(ev.member)
                holding[ev.member].add(p)
        elif ev.kind in ("revoke", "lost"):
            if ev.data["p"]:
                callbacks[ev.kind] += 1
            for p in ev.data["p"]:
                owners[p].discard(ev.member)
                holding[ev.member].discard(p)
        elif ev.kind in ("kill", "exit", "closed"):
            for p in holding.pop(ev.member, set()):
                owners[p].discard(ev.member)
        elif ev.kind == "commit":
            err = ev.data.get("err")
            p, off = ev.data["p"], ev.data["o"]
            if err:
                commit_errors[err] += 1
                continue
            commits_ok += 1
            prev = last_commit.get(p)
            if prev is not None and off < prev[0]:
                backwards.append({"t": ev.t, "partition": p, "offset": off, "member": ev.member, "previous": prev[0], "previous_member": prev[2]})
            last_commit[p] = (off, ev.t, ev.member)
    if snapshot is None:
        snapshot = {p: set(ms) for p, ms in owners.items()}
    unowned = sorted(p for p in range(partitions) if not snapshot.get(p))
    doubly = sorted(p for p in range(partitions) if len(snapshot.get(p, ())) > 1)
    final_backwards = []
    unreported = []
    if final_offsets is not None:
        for p, (off, _, member) in sorted(last_commit.items()):
            got = final_offsets.get(p)
            if got is None or got < off:
                final_backwards.append({"partition": p, "committed": got, "last_successful_commit": off, "member": member})
            elif got > off:
                unreported.append(p)
    return {
        "overlaps": len(overlaps),
        "overlap_examples": overlaps[:10],
        "last_overlap_t": overlaps[-1]["t"] if overlaps else None,  # overlaps are found in time order
        "unowned_after_settle": len(unowned),
        "unowned_partitions": unowned,
        "doubly_owned_after_settle": len(doubly),
        "backwards_commits": len(backwards) + len(final_backwards),
        "backwards_examples": (backwards + final_backwards)[:10],
        "final_offsets_read": final_offsets is not None,
        "final_offsets_ahead_of_reports": len(unreported),
        "commits_ok": commits_ok,
        "commit_errors": dict(commit_errors.most_common()),
        "rebalance_callbacks": dict(callbacks),
        "client_errors": dict(collections.Counter(e.data.get("name") for e in evs if e.kind == "client_error").most_common()),
    }


# ============================================================================ broker logs


_KV = re.compile(r"(\w+)=(\S+)")


def broker_log_stats(kind: str, protocol: str, text: str, group: str) -> dict:
    """Rebalances and member-epoch movements, as each broker logs them (best effort)."""
    out: dict = {}
    if kind == "kafkalite":
        lines = [line for line in text.splitlines() if group in line]
        if protocol == "classic":
            out["rebalances"] = sum(1 for line in lines if "rebalance completed" in line)
            out["rebalances_started"] = sum(1 for line in lines if "rebalance started" in line)
            out["members_expired"] = sum(line.count("session timeout expired") for line in lines if "rebalance completed" in line)
        else:
            out["group_epoch_bumps"] = sum(1 for line in lines if "consumer group epoch bumped" in line or "consumer group member removed" in line)
            out["target_assignments"] = sum(1 for line in lines if "target assignment computed" in line)
            reasons = collections.Counter()
            for line in lines:
                if "consumer group member removed" in line:
                    m = re.search(r"reason=('[^']*'|\"[^\"]*\"|\S+)", line)
                    reasons[m.group(1).strip("'\"") if m else "?"] += 1
            out["members_removed"] = dict(reasons)
            epochs = collections.Counter()
            for line in lines:
                if "consumer member reconciled" in line:
                    kv = dict(_KV.findall(line))
                    epochs[kv.get("member", "?")] += 1
            out["member_reconciliations"] = sum(epochs.values())
        lags = [dict(_KV.findall(line)) for line in text.splitlines() if line.startswith("LOOPLAG")]
        if lags:
            out["loop_lag_max_ms"] = max(int(d["max"].rstrip("ms")) for d in lags)
            out["loop_lag_worst_p99_ms"] = max(int(d["p99"].rstrip("ms")) for d in lags)
            out["loop_lag_median_p50_ms"] = sorted(int(d["p50"].rstrip("ms")) for d in lags)[len(lags) // 2]
            if all("cpu" in d for d in lags):  # the loop thread's CPU time and run-queue wait (schedstat)
                out["loop_cpu_ms"] = sum(int(d["cpu"].rstrip("ms")) for d in lags)
                out["loop_runq_wait_ms"] = sum(int(d["runq_wait"].rstrip("ms")) for d in lags)
            slow = [dict(_KV.findall(line)) for line in text.splitlines() if line.startswith("SLOWTICK ")]
            if slow:  # the longest stall, and the loop thread's CPU time in it: far below it, the thread waited for a CPU
                worst = max(slow, key=lambda d: int(d["lag"].rstrip("ms")))
                out["loop_worst_stall_cpu_ms"] = int(worst["cpu"].rstrip("ms"))
                out["loop_stalls_over_100ms"] = len(slow)
            stall_stacks = collections.Counter()
            for line in text.splitlines():
                if line.startswith("STALLSTACK "):
                    n, _, stack = line[len("STALLSTACK samples="):].partition(" ")
                    stall_stacks[stack] += int(n)
            out["stall_stacks"] = [{"samples": n, "stack": st} for st, n in stall_stacks.most_common(8)]
    else:
        lines = [line for line in text.splitlines() if group in line]
        if protocol == "classic":
            out["rebalances"] = sum(1 for line in lines if "Stabilized group" in line)
            out["rebalances_started"] = sum(1 for line in lines if "Preparing to rebalance group" in line)
            out["members_expired"] = sum(1 for line in lines if "expired" in line.lower() and "member" in line.lower())
        else:
            out["group_epoch_bumps"] = sum(1 for line in lines if "Bumped group epoch" in line)
            out["target_assignments"] = sum(1 for line in lines if "Computed a new target assignment" in line)
            reasons = collections.Counter()
            for line in lines:
                m = re.search(r"fenced from the group because (.*?)\.? \(", line)
                if m:
                    reasons[m.group(1)] += 1
                elif "left the consumer group" in line:
                    reasons["left the group"] += 1
            out["members_removed"] = dict(reasons)
            out["member_reconciliations"] = sum(1 for line in lines if "new assignment state" in line)
    return out


# ============================================================================ main


def run(cfg: ChurnConfig) -> dict:
    work = Path(cfg.work_dir) if cfg.work_dir else Path(tempfile.mkdtemp(prefix=f"churn-{cfg.broker}-{cfg.protocol}-"))
    work.mkdir(parents=True, exist_ok=True)
    broker = BrokerHandle(cfg, work)
    churn = None
    try:
        bootstrap = broker.start()
        churn = Churn(cfg, bootstrap, work, broker_pid=broker.pid)
        report = churn.run()
        report["broker_log"] = broker_log_stats(cfg.broker, cfg.protocol, broker.logs(), churn.group)
        report["work_dir"] = str(work)
        with open(work / "events.jsonl", "w") as f:
            for ev in churn.events:
                f.write(json.dumps({"t": ev.t, "member": ev.member, "kind": ev.kind, **ev.data}) + "\n")
        return report
    finally:
        if churn is not None:
            churn.close()
        broker.stop()
        if not cfg.work_dir:
            keep = os.environ.get("KAFKALITE_CHURN_KEEP")
            if not keep:
                shutil.rmtree(work, ignore_errors=True)


def summary_line(r: dict) -> str:
    return (
        f"{r['broker']:9s} {r['protocol']:8s} {r['churn_seconds']:6.0f}s  joins={r['joins']} leaves={r['leaves']} crashes={r['crashes']}  "
        f"overlaps={r['overlaps']} unowned={r['unowned_after_settle']} backwards={r['backwards_commits']}  "
        f"commits_ok={r['commits_ok']} errors={r['commit_errors']}  settle={r['settle_seconds']}s  load={r['loadavg_end']}"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return _child_main(json.loads(argv[1]))
    if argv and argv[0] == "--stall-launch":
        return _stall_launch(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench.churn", description=__doc__.split("\n\n")[0])
    d = ChurnConfig()
    ap.add_argument("--broker", choices=["kafkalite", "kafka"], default=d.broker)
    ap.add_argument("--protocol", choices=["classic", "consumer"], default=d.protocol)
    ap.add_argument("--members", type=int, default=d.members)
    ap.add_argument("--seconds", type=float, default=d.seconds)
    ap.add_argument("--partitions", type=int, default=d.partitions)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--action-interval", type=float, default=d.action_interval)
    ap.add_argument("--produce-rate", type=float, default=d.produce_rate)
    ap.add_argument("--settle", type=float, default=d.settle)
    ap.add_argument("--consumer-heartbeat-ms", type=int, default=d.consumer_heartbeat_ms)
    ap.add_argument("--consumer-session-ms", type=int, default=d.consumer_session_ms)
    ap.add_argument("--classic-session-ms", type=int, default=d.classic_session_ms, help="session.timeout.ms of the classic members")
    ap.add_argument("--hog", type=int, default=0, help="busy-loop processes while the churn runs")
    ap.add_argument("--hog-through-settle", action="store_true")
    ap.add_argument("--stall-stacks", action="store_true", help="with --loop-monitor: sample the loop's stack during stalls (costs the loop GIL hand-offs)")
    ap.add_argument("--loop-stall", help="MS:EVERY_MS: block kafkalite's event loop (kafkalite only)")
    ap.add_argument("--pause", help="MS:EVERY_MS: SIGSTOP the broker for MS every EVERY_MS while the churn runs")
    ap.add_argument("--loop-monitor", action="store_true", help="kafkalite logs its event loop's lag every 5 s")
    ap.add_argument("--trace", action="store_true", help="kafkalite writes trace.jsonl in the work dir (diagnostics)")
    ap.add_argument("--no-loop-watch", action="store_true", help="kafkalite without its stall compensation (before/after comparisons)")
    ap.add_argument("--bootstrap", help="use this running broker (--broker then only names it)")
    ap.add_argument("--work-dir")
    ap.add_argument("--kafka-debug-log", action="store_true", help="reference Kafka logs member epochs (GroupMetadataManager DEBUG)")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--check", action="store_true", help="exit 1 if an invariant failed (overlaps, unowned partitions, backwards commits)")
    a = ap.parse_args(argv)
    cfg = ChurnConfig(
        broker=a.broker, protocol=a.protocol, members=a.members, seconds=a.seconds, partitions=a.partitions,
        seed=a.seed, action_interval=a.action_interval, produce_rate=a.produce_rate, settle=a.settle,
        consumer_heartbeat_ms=a.consumer_heartbeat_ms, consumer_session_ms=a.consumer_session_ms, classic_session_ms=a.classic_session_ms,
        hog=a.hog, pause=a.pause, hog_through_settle=a.hog_through_settle, loop_stall=a.loop_stall, loop_monitor=a.loop_monitor, stall_stacks=a.stall_stacks, trace=a.trace, no_loop_watch=a.no_loop_watch, bootstrap=a.bootstrap,
        work_dir=a.work_dir, kafka_debug_log=a.kafka_debug_log,
    )
    if cfg.loop_stall and cfg.broker != "kafkalite":
        ap.error("--loop-stall is for kafkalite")
    if cfg.broker == "kafka" and cfg.bootstrap is None:
        from tests import reference_kafka

        ok, why = reference_kafka.available()
        if not ok:
            print(f"skipped: {why}")
            return 0
    report = run(cfg)
    print(summary_line(report))
    print(json.dumps({k: v for k, v in report.items() if k != "config"}, indent=1, default=str))
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(report, indent=1, default=str))
    if a.check:
        failed = report["overlaps"] or report["unowned_after_settle"] or report["doubly_owned_after_settle"] or report["backwards_commits"] or not report["settled"]
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
