"""Crash consistency at every named write point (storage/crashpoints.py).

For each point and hit number: a copy of a prepared data directory, a broker
started on it with ``KAFKALITE_CRASH_AT=<point>:<n>``, a workload that reaches
every point (acks=all produces, offset commits, topic creation and deletion,
CreatePartitions, segment rolls, retention by size, compaction) until the broker
kills itself with SIGKILL there; then the broker is started again without the
variable on the same directory and checked:

* it starts;
* every acknowledged record is at its offset with its value (unless retention
  moved the log start past it, or compaction kept a later record of its key);
* every acknowledged commit is there (the group's offset is at least it);
* the topics keep their ids and partition counts (an unanswered CreatePartitions
  may have happened or not); an acknowledged deletion stays deleted; an
  unanswered creation or deletion left the topic whole or absent;
* a topic created again where one was deleted, and partitions added again,
  start empty (no partition directory of an old topic comes back).

    python -m bench.crashpoints --kills 20            # 20 kills per point (hits 1..20, seeds vary)
    python -m bench.crashpoints --points index.append --kills 3

The test (tests/integration/test_crash_points.py) runs hits 1 and 2 of each.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from storage.crashpoints import ENV
from tests.broker_process import BrokerProcess
from tests.raw import RawClient

# every crash point and where it is (docs/reliability.md, "Crash points")
POINTS = {
    "segment.roll.before": "storage/log.py PartitionLog._roll_locked: old segment sealed, new file not created",
    "segment.roll.after": "storage/log.py PartitionLog._roll_locked: new segment file exists, not in the segment list",
    "index.append": "storage/segment.py Segment.note_batch: batch written, its offset/time index entry not added",
    "index.save.before": "storage/segment.py Segment.save_indexes: rolled segment fsynced, no index file written",
    "index.save.mid": "storage/segment.py Segment.save_indexes: .index written, .timeindex not",
    "index.save.after": "storage/segment.py Segment.save_indexes: both index files written",
    "retention.delete.before": "storage/log.py enforce_retention: log start moved in memory, no file deleted",
    "retention.delete.mid": "storage/log.py enforce_retention: some of the expired segments deleted",
    "retention.delete.after": "storage/log.py enforce_retention: all expired segments deleted",
    "compaction.cleaned": "storage/compaction.py _clean_group: .cleaned written, not renamed to .swap",
    "compaction.swap": "storage/compaction.py _clean_group: .swap in place (commit point), old segments still there",
    "compaction.deleted": "storage/compaction.py _clean_group: old segments deleted, .swap not renamed to .log",
    "partition.dir.created": "broker/cluster.py _open_partitions: a partition directory created (CreateTopics, CreatePartitions)",
    "topic.create.saving": "broker/cluster.py _created: all partition directories exist, meta.json not written",
    "topic.create.saved": "broker/cluster.py _created: meta.json written, not answered",
    "topic.delete.saving": "broker/cluster.py delete_topic: topic gone from memory, meta.json not written",
    "topic.delete.saved": "broker/cluster.py delete_topic: meta.json written, no partition directory removed",
    "topic.delete.mid": "broker/cluster.py delete_topic: some partition directories removed",
    "partitions.add.saving": "broker/cluster.py _grown: new partition directories exist, meta.json not written",
    "partitions.add.saved": "broker/cluster.py _grown: meta.json written, not answered",
    "meta.save.renaming": "broker/cluster.py Cluster._save: meta.json.tmp written and fsynced, not renamed",
    "coordinator.append.before": "broker/coordinator_runtime/runtime.py CoordinatorRuntime._append: records encoded, not appended",
    "coordinator.append.after": "broker/coordinator_runtime/runtime.py CoordinatorRuntime._append: appended (and fsynced per policy), not answered",
}

BROKER_ARGS = (
    "--offsets-topic-num-partitions", "1",
    "--set", "maintenance_interval_ms=50",
    "--set", "log.retention.check.interval.ms=100",
    "--set", "log.initial.task.delay.ms=0",
)
# the broker that checks: no retention while it reads (a segment deleted between the
# watermarks and the read would look like a loss), the rest as the crashed one
VERIFY_ARGS = tuple("log.initial.task.delay.ms=600000" if a == "log.initial.task.delay.ms=0" else a for a in BROKER_ARGS)
SEG = 16384
FIXED = {
    "data": (3, {"segment.bytes": str(SEG)}),
    "retain": (1, {"segment.bytes": str(SEG), "retention.bytes": str(3 * SEG)}),
    "compact": (1, {"segment.bytes": str(SEG), "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                    "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}),
    "grow": (1, {}),
}
GROUP = "crash-group"
EPH_PARTITIONS = 3
COMPACT_KEYS = 20


class CrashProblem(AssertionError):
    pass


@dataclass
class Seen:
    """What the broker acknowledged before it died, and what was in flight."""

    records: list = field(default_factory=list)  # (topic, partition, offset, key, value)
    commits: dict = field(default_factory=dict)  # (topic, partition) -> last acknowledged offset
    commit_acks: int = 0  # acknowledged partition commits in all
    created: dict = field(default_factory=dict)  # ephemeral topic -> id (None if unknown)
    deleted: set = field(default_factory=set)
    grow_acked: int = 1
    grow_asked: int = 1
    inflight_create: str | None = None
    inflight_delete: str | None = None
    ops: int = 0


# ---------------------------------------------------------------------------- requests
def create_topic(c: RawClient, name: str, partitions: int, configs: dict) -> int:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()]}], "timeout": 10000, "validate_only": False}
    return c.request(19, 7, body).topics[0].error_code


def delete_topic(c: RawClient, name: str) -> int:
    return c.request(20, 5, {"topic_names": [name], "timeout": 10000}).responses[0].error_code


def add_partitions(c: RawClient, name: str, count: int) -> int:
    body = {"topics": [{"name": name, "count": count, "assignments": None}], "timeout": 10000, "validate_only": False}
    return c.request(37, 3, body).results[0].error_code


def metadata(c: RawClient) -> dict:
    """name -> (topic id, partition count) of every topic."""
    resp = c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return {t.name: (str(t.topic_id), len(t.partitions)) for t in resp.topics if t.error_code == ErrorCode.none}


def produce(c: RawClient, topic: str, partition: int, kvs: list) -> int | None:
    """Base offset of the acknowledged batch, or None if refused."""
    err, base = produce_answer(c, topic, partition, kvs)
    return base if err == ErrorCode.none else None


def produce_answer(c: RawClient, topic: str, partition: int, kvs: list) -> tuple[int, int]:
    """(error code, base offset) of one batch of ``kvs`` (key, value) produced with acks=all."""
    now = int(time.time() * 1000)
    batch = build_batch([Record(offset=i, timestamp=now, key=k, value=v, headers=[]) for i, (k, v) in enumerate(kvs)])
    body = {"transactional_id": None, "acks": -1, "timeout": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
    part = c.request(0, 9, body).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def list_offsets(c: RawClient, topics: dict, timestamp: int) -> dict:
    """ListOffsets: (topic, partition) -> offset, for ``topics`` (name -> partitions); -2 earliest, -1 latest."""
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp} for p in range(n)]}
        for t, n in topics.items()]}
    resp = c.request(2, 7, body)
    return {(t.name, p.partition_index): p.offset if p.error_code == ErrorCode.none else None for t in resp.topics for p in t.partitions}


def commit(c: RawClient, offsets: dict, group: str = GROUP, metadata: str = "") -> dict:
    """{(topic, partition): offset} -> the error code of each."""
    topics: dict = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off, "committed_leader_epoch": -1, "committed_metadata": metadata})
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    resp = c.request(8, 9, body)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def committed(c: RawClient, keys: list, group: str = GROUP) -> dict:
    topics: dict = {}
    for t, p in keys:
        topics.setdefault(t, []).append(p)
    body = {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}], "require_stable": True}
    g = c.request(9, 9, body).groups[0]
    return {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}


# ---------------------------------------------------------------------------- the workload
def prepare(template: Path) -> dict:
    """A data directory with the fixed topics (and __consumer_offsets); returns their ids."""
    b = BrokerProcess(template, *BROKER_ARGS).start()
    try:
        c = RawClient(b.bootstrap)
        for name, (parts, cfg) in FIXED.items():
            assert create_topic(c, name, parts, cfg) == ErrorCode.none
        assert commit(c, {("data", 0): 0}) == {("data", 0): ErrorCode.none}  # the group's shard is loaded
        ids = metadata(c)
        c.close()
    finally:
        b.stop()
    return {name: ids[name][0] for name in FIXED}


def _alive(b: BrokerProcess) -> bool:
    return b.proc is not None and b.proc.poll() is None


def needs_topic_ops(point: str) -> bool:
    """Whether the workload must create, delete and grow topics to reach ``point`` (the others are
    reached by produces and commits alone, many times faster: topic changes fsync meta.json)."""
    return point.startswith(("topic.", "partition", "meta."))


def produced_topics(point: str) -> tuple[str, ...]:
    """The fixed topics the workload writes to reach ``point``. Retention runs after the
    maintenance thread has fsynced and indexed every rolled segment, so for its points only
    ``retain`` is written (and slowly: a roll every dozen rounds or so): segments rolled by
    the thousand in the other topics would hold it back for seconds between passes."""
    if point.startswith("retention."):
        return ("retain",)
    if point.startswith("compaction."):
        return ("compact",)
    return ("data", "retain", "compact")


def drive(b: BrokerProcess, seen: Seen, rng: random.Random, deadline: float, *, topic_ops: bool = True,
          topics: tuple[str, ...] = ("data", "retain", "compact")) -> None:
    """Run the workload until the broker dies or ``deadline``."""
    c = RawClient(b.bootstrap)
    c.sock.settimeout(30)
    n = 0
    eph = 0
    try:
        while time.monotonic() < deadline and _alive(b):
            n += 1
            seen.ops = n
            # records: a few batches to each fixed topic
            for topic in topics:
                for _ in range(rng.randint(1, 3)):
                    p = rng.randrange(FIXED[topic][0])
                    count = rng.randint(1, 40)
                    if topic == "compact":
                        kvs = [(b"k%d" % rng.randrange(COMPACT_KEYS), b"%d-%s" % (n, uuid.uuid4().hex.encode()) * 4) for _ in range(count)]
                    elif topic == "retain":
                        kvs = [(b"k%d" % i, b"%d-%d-%s" % (n, i, uuid.uuid4().hex[:8].encode())) for i in range(count // 4 + 1)]
                    else:
                        kvs = [(b"k%d" % i, b"%d-%d-%s" % (n, i, uuid.uuid4().hex.encode()) * 8) for i in range(count)]
                    base = produce(c, topic, p, kvs)
                    if base is not None:
                        seen.records += [(topic, p, base + i, k, v) for i, (k, v) in enumerate(kvs)]
            # a commit of each data partition (increasing offsets)
            offsets = {("data", p): n * 10 + p for p in range(3)}
            for key, err in commit(c, offsets).items():
                if err == ErrorCode.none:
                    seen.commits[key] = offsets[key]
                    seen.commit_acks += 1
            if not topic_ops:
                continue
            # topics: each round, create one, write to it, delete the one before; grow "grow"
            eph += 1
            name = f"eph-{eph}"
            seen.inflight_create = name
            if create_topic(c, name, EPH_PARTITIONS, {}) == ErrorCode.none:
                seen.created[name] = None
                seen.inflight_create = None
                seen.created[name] = metadata(c).get(name, (None,))[0]
                for p in range(EPH_PARTITIONS):
                    kvs = [(b"e", b"%s-%d" % (name.encode(), p))]
                    base = produce(c, name, p, kvs)
                    if base is not None:
                        seen.records.append((name, p, base, *kvs[0]))
            old = f"eph-{eph - 1}"
            if old in seen.created:
                seen.inflight_delete = old
                if delete_topic(c, old) == ErrorCode.none:
                    seen.deleted.add(old)
                seen.inflight_delete = None
            seen.grow_asked = seen.grow_acked + 1
            if add_partitions(c, "grow", seen.grow_asked) == ErrorCode.none:
                seen.grow_acked = seen.grow_asked
    except (AssertionError, OSError):
        # the connection closed: the broker is dying (its sockets close before it can be waited for)
        if _wait_dead(b, 10) is None:
            raise
    finally:
        c.close()


def _wait_dead(b: BrokerProcess, timeout: float) -> int | None:
    try:
        return b.proc.wait(timeout)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
        return None


# ---------------------------------------------------------------------------- the check
def read_all(bootstrap: str, topics: dict) -> dict:
    """(topic, partition) -> (log start, {offset: (key, value)}) for ``topics`` (name -> partitions)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"crash-verify-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest", "logger": _Quiet()})
    out: dict = {}
    try:
        highs = {}
        for t, parts in topics.items():
            for p in range(parts):
                low, high = c.get_watermark_offsets(TopicPartition(t, p), timeout=30)
                highs[(t, p)] = high
                out[(t, p)] = (low, {})
        todo = {k for k, h in highs.items() if h > out[k][0]}
        c.assign([TopicPartition(t, p, out[(t, p)][0]) for t, p in todo])
        deadline = time.monotonic() + 120
        while todo and time.monotonic() < deadline:
            for m in c.consume(num_messages=10_000, timeout=1.0):
                key = (m.topic(), m.partition())
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(key)
                    continue
                out[key][1][m.offset()] = (m.key(), m.value())
                if m.offset() + 1 >= highs[key]:
                    todo.discard(key)
        if todo:
            raise CrashProblem(f"could not read back {sorted(todo)}")
    finally:
        c.close()
    return out


class _Quiet:
    def log(self, *args) -> None:
        pass


def check(b: BrokerProcess, seen: Seen, ids: dict, counts: dict | None = None) -> list[str]:
    """The problems found after the restart (empty: all is well); ``counts`` gets
    ``records_lost`` and ``commits_lost``."""
    problems: list[str] = []
    counts = {} if counts is None else counts
    counts.update(records_lost=0, commits_lost=0)
    c = RawClient(b.bootstrap)
    c.sock.settimeout(30)
    try:
        meta = metadata(c)
        for name, (parts, _cfg) in FIXED.items():
            if name not in meta:
                problems.append(f"topic {name} is gone")
                continue
            tid, count = meta[name]
            if tid != ids[name]:
                problems.append(f"topic {name} has id {tid}, was {ids[name]}")
            want = (seen.grow_acked, seen.grow_asked) if name == "grow" else (parts, parts)
            if not want[0] <= count <= want[1]:
                problems.append(f"topic {name} has {count} partitions, expected {want[0]}..{want[1]}")
        for name, tid in seen.created.items():
            if name in seen.deleted:
                if name in meta:
                    problems.append(f"topic {name} was deleted (acknowledged) but is back")
                continue
            if name == seen.inflight_delete:
                if name in meta and meta[name][1] != EPH_PARTITIONS:
                    problems.append(f"topic {name} (deletion unanswered) came back with {meta[name][1]} partitions")
                continue
            if name not in meta:
                problems.append(f"topic {name} (created, acknowledged) is gone")
            elif tid is not None and meta[name][0] != tid:
                problems.append(f"topic {name} has id {meta[name][0]}, was {tid}")
            elif meta[name][1] != EPH_PARTITIONS:
                problems.append(f"topic {name} has {meta[name][1]} partitions")
        if seen.inflight_create and seen.inflight_create in meta and meta[seen.inflight_create][1] != EPH_PARTITIONS:
            problems.append(f"topic {seen.inflight_create} (creation unanswered) has {meta[seen.inflight_create][1]} partitions")
        # records
        readable = {t: meta[t][1] for t in {r[0] for r in seen.records} if t in meta}
        logs = read_all(b.bootstrap, readable)
        latest_key: dict = {}
        for (t, p), (_low, recs) in logs.items():
            for off, (k, _v) in recs.items():
                if latest_key.get((t, p, k), -1) < off:
                    latest_key[(t, p, k)] = off
        lost = []
        for t, p, off, k, v in seen.records:
            if t not in readable or t in seen.deleted:
                continue
            low, recs = logs[(t, p)]
            if off < low:
                continue  # retention
            if recs.get(off) == (k, v):
                continue
            if t == "compact" and latest_key.get((t, p, k), -1) > off:
                continue  # compaction kept a later record of the key
            lost.append((t, p, off))
        counts["records_lost"] = len(lost)
        if lost:
            problems.append(f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}")
        # commits
        if seen.commits:
            got = committed(c, list(seen.commits))
            behind = {k: (got.get(k), off) for k, off in seen.commits.items() if (got.get(k) if got.get(k) is not None else -1) < off}
            counts["commits_lost"] = len(behind)
            if behind:
                problems.append(f"acknowledged commits lost (found, acknowledged): {behind}")
        # nothing of a deleted topic (or an unanswered creation) comes back under a new topic of its name
        gone = [n for n in list(seen.created) + [seen.inflight_create] if n and n not in meta]
        for name in gone:
            err = create_topic(c, name, EPH_PARTITIONS, {})
            if err != ErrorCode.none:
                problems.append(f"creating {name} again: {ErrorCode(err).name}")
        grow_now = metadata(c).get("grow", (None, 0))[1]
        if add_partitions(c, "grow", grow_now + 2) != ErrorCode.none:
            problems.append("could not add partitions to grow")
        fresh = {n: EPH_PARTITIONS for n in gone}
        fresh["grow"] = grow_now + 2
        for (t, p), end in list_offsets(c, fresh, -1).items():
            if (t != "grow" or p >= grow_now) and end != 0:
                problems.append(f"new partition {t}-{p} is not empty: log end offset {end}")
    finally:
        c.close()
    return problems


# ---------------------------------------------------------------------------- one kill
def run_one(point: str, nth: int, seed: int, template: Path, ids: dict, work: Path, *, timeout: float = 60.0) -> dict:
    data = work / f"{point}-{nth}-{seed}"
    shutil.copytree(template, data)
    rng = random.Random(seed)
    seen = Seen()
    b = BrokerProcess(data, *BROKER_ARGS, env={ENV: f"{point}:{nth}"})
    started = time.monotonic()
    result = {"point": point, "nth": nth, "seed": seed}
    try:
        try:
            b.start()
            drive(b, seen, rng, time.monotonic() + timeout, topic_ops=needs_topic_ops(point), topics=produced_topics(point))
            rc = _wait_dead(b, 10)
        except RuntimeError:  # died while starting (a point passed at start-up)
            rc = -9 if "CRASH POINT" in b.logs() else None
        if b._stderr_reader is not None:
            b._stderr_reader.join(10)  # the dead broker's stderr, to its end (its last line says where it died)
        marker = f"CRASH POINT {point} {nth}"
        if rc != -9 or marker not in b.logs():
            raise CrashProblem(f"{point}:{nth} not reached (exit {rc}) after {seen.ops} rounds\n" + b.logs()[-3000:])
        b.proc = None
        b.check_handler_errors()
        result["crash_s"] = round(time.monotonic() - started, 2)
        result["rounds"] = seen.ops
        result["acked_records"] = len(seen.records)
        result["acked_commits"] = seen.commit_acks
        after = BrokerProcess(data, *VERIFY_ARGS)
        after.start()
        try:
            result["problems"] = check(after, seen, ids, result)
        finally:
            after.kill()  # a clean shutdown would cost fsyncs; the directory is thrown away
    finally:
        if b.proc is not None:
            b._kill()
        shutil.rmtree(data, ignore_errors=True)
    result["seconds"] = round(time.monotonic() - started, 2)
    return result


def run(points: list[str], hits: list[int], *, seed: int = 1, work: Path | None = None, log=None) -> dict:
    own = work is None
    work = Path(work or tempfile.mkdtemp(prefix="kafkalite-crash-"))
    try:
        return _run(points, hits, seed, work, log)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def _run(points: list[str], hits: list[int], seed: int, work: Path, log) -> dict:
    template = work / "template"
    ids = prepare(template)
    runs = []
    # hit by hit across the points, so a run stopped early has covered every point as often
    for i, nth in enumerate(hits):
        for j, point in enumerate(points):
            run_seed = seed * 100_000 + i * 100 + j  # a workload of its own for every kill
            try:
                r = run_one(point, nth, run_seed, template, ids, work)
            except CrashProblem as exc:
                r = {"point": point, "nth": nth, "seed": run_seed, "rounds": 0, "acked_records": 0, "acked_commits": 0,
                     "records_lost": 0, "commits_lost": 0, "seconds": 0, "problems": [str(exc)[:2000]]}
            runs.append(r)
            if log is not None:
                log(f"{point}:{nth} seed {r['seed']}: {r['rounds']} rounds, {r['acked_records']} records and "
                    f"{r['acked_commits']} commits acknowledged, {r['records_lost']} records and {r['commits_lost']} commits lost, "
                    f"{len(r['problems'])} problems, {r['seconds']} s")
                for p in r["problems"]:
                    log(f"    {p}")
    return {"runs": runs, "kills": len(runs), "problems": sum(len(r["problems"]) for r in runs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", nargs="*", default=list(POINTS), help="crash points (default: all)")
    ap.add_argument("--kills", type=int, default=20, help="kills per point: hits 1..N")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1, help="points run side by side (each its own brokers)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    started = time.monotonic()
    hits = list(range(1, args.kills + 1))
    say = lambda s: print(s, flush=True)  # noqa: E731
    if args.jobs > 1:
        from concurrent.futures import ThreadPoolExecutor

        shares = [args.points[i::args.jobs] for i in range(args.jobs)]
        with ThreadPoolExecutor(args.jobs) as pool:
            parts = list(pool.map(lambda pts: run(pts, hits, seed=args.seed, log=say), shares))
        out = {"runs": [r for p in parts for r in p["runs"]]}
        out["kills"] = len(out["runs"])
        out["problems"] = sum(len(r["problems"]) for r in out["runs"])
    else:
        out = run(args.points, hits, seed=args.seed, log=say)
    per_point: dict = {}
    for r in out["runs"]:
        pp = per_point.setdefault(r["point"], {"kills": 0, "acked_records": 0, "acked_commits": 0, "records_lost": 0, "commits_lost": 0, "problems": 0})
        pp["kills"] += 1
        for k in ("acked_records", "acked_commits", "records_lost", "commits_lost"):
            pp[k] += r[k]
        pp["problems"] += len(r["problems"])
    out["per_point"] = per_point
    out["seconds"] = round(time.monotonic() - started, 1)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    print(json.dumps({"kills": out["kills"], "problems": out["problems"], "seconds": out["seconds"], "per_point": per_point}, indent=1))
    return 1 if out["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
