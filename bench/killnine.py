"""kill -9 durability: every acknowledged record and commit survives the broker being killed.

    python -m bench.killnine --restarts 50 --json out.json

A kafkalite broker runs as a child process with its default settings (so its
default ``--fsync`` policy). Two clients load it for the whole run:

* a confluent-kafka producer with ``acks=all`` produces keyed records with
  unique values to a 3-partition topic; every record whose delivery report
  says it was written is remembered as (partition, offset, value);
* a confluent-kafka consumer in a group reads the topic and, after each
  batch, commits its position synchronously; every commit the broker
  acknowledged is remembered as (partition, offset).

Meanwhile the broker is killed with SIGKILL ``--restarts`` times, each time
at a random moment after the clients made progress since the last restart
(at least one new acknowledged record and, within a bound, one new
acknowledged commit), and restarted on the same port and data directory.

At the end the clients stop and the whole topic is read back with a fresh
consumer. A record is **lost** when its acknowledged offset is missing or
holds another value. The group's committed offsets are fetched from the
broker; an acknowledged commit is **lost** when it is above what the broker
returns for its partition (the consumer only ever commits forward: it is
the group's only member and resumes from the last commit after a rebalance).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.config import BrokerConfig
from tests.broker_process import BrokerProcess

PARTITIONS = 3
PROGRESS_TIMEOUT = 30.0  # after a restart, how long to wait for the clients to make progress
COMMIT_PROGRESS_TIMEOUT = 15.0  # ... and for a new acknowledged commit (a rejoin can take a while)

# librdkafka reports every refused connection: the broker going away is the point here, so drop them
_QUIET = logging.getLogger("bench.killnine.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


@dataclass
class State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    progress: threading.Condition = None  # type: ignore[assignment]
    acked: dict = field(default_factory=dict)  # (partition, offset) -> value
    failed_deliveries: int = 0
    produced: int = 0
    commits: list = field(default_factory=list)  # (partition, offset) acknowledged
    commit_failures: int = 0
    consumed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.progress = threading.Condition(self.lock)


def _client_common(bootstrap: str) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "socket.connection.setup.timeout.ms": 5000,
        "logger": _QUIET,
    }


def producer_loop(bootstrap: str, topic: str, state: State, rate: int) -> None:
    p = Producer({
        **_client_common(bootstrap),
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 60_000,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 500,
    })

    def delivered(err, msg) -> None:
        with state.lock:
            if err is None:
                state.acked[(msg.partition(), msg.offset())] = msg.value()
                state.progress.notify_all()
            else:
                state.failed_deliveries += 1

    i = 0
    interval = 1.0 / rate if rate > 0 else 0.0
    next_at = time.monotonic()
    try:
        while not state.stop.is_set():
            key = f"key-{i % 97}".encode()
            value = f"{i}-{uuid.uuid4().hex}".encode()
            try:
                p.produce(topic, value=value, key=key, on_delivery=delivered)
                i += 1
                state.produced = i
            except BufferError:
                p.poll(0.1)
                continue
            p.poll(0)
            if interval:
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    p.poll(delay)  # serves delivery reports while pacing
                else:
                    next_at = time.monotonic()
        p.flush(60)
    except Exception as exc:  # noqa: BLE001 - reported in the result
        state.errors.append(f"producer: {type(exc).__name__}: {exc}")


def consumer_loop(bootstrap: str, topic: str, group: str, state: State) -> None:
    c = Consumer({
        **_client_common(bootstrap),
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 45_000,
        "heartbeat.interval.ms": 3000,
        "enable.partition.eof": False,
    })
    c.subscribe([topic])
    try:
        while not state.stop.is_set():
            msgs = c.consume(num_messages=500, timeout=0.5)
            msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                continue
            state.consumed += len(msgs)
            # commit exactly what was read: the next offset of each partition's last message
            last: dict[int, int] = {}
            for m in msgs:
                last[m.partition()] = max(last.get(m.partition(), -1), m.offset())
            offsets = [TopicPartition(topic, part, off + 1) for part, off in last.items()]
            try:
                result = c.commit(offsets=offsets, asynchronous=False)
            except KafkaException:
                with state.lock:
                    state.commit_failures += 1
                continue
            with state.lock:
                for tp in result or ():
                    if tp.error is None and tp.offset >= 0:
                        state.commits.append((tp.partition, tp.offset))
                    elif tp.error is not None:
                        state.commit_failures += 1
                state.progress.notify_all()
    except Exception as exc:  # noqa: BLE001
        state.errors.append(f"consumer: {type(exc).__name__}: {exc}")
    finally:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - closing during a broker outage may fail
            pass


def read_back(bootstrap: str, topic: str) -> dict:
    """(partition, offset) -> value of every record in ``topic``."""
    c = Consumer({**_client_common(bootstrap), "group.id": f"killnine-verify-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    found: dict = {}
    try:
        highs = {}
        for part in range(PARTITIONS):
            _low, high = c.get_watermark_offsets(TopicPartition(topic, part), timeout=30)
            highs[part] = high
        c.assign([TopicPartition(topic, part, OFFSET_BEGINNING) for part in range(PARTITIONS) if highs[part] > 0])
        done = {part for part, high in highs.items() if high == 0}
        deadline = time.monotonic() + 300
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        done.add(m.partition())
                    continue
                found[(m.partition(), m.offset())] = m.value()
                if m.offset() + 1 >= highs[m.partition()]:
                    done.add(m.partition())
    finally:
        c.close()
    return found


def committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    c = Consumer({**_client_common(bootstrap), "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, part) for part in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def _wait_progress(state: State, acked_before: int, commits_before: int) -> tuple[bool, bool]:
    """Wait for a new acknowledged record, then (shorter) a new acknowledged commit."""
    with state.lock:
        got_ack = state.progress.wait_for(lambda: len(state.acked) > acked_before, PROGRESS_TIMEOUT)
        got_commit = state.progress.wait_for(lambda: len(state.commits) > commits_before, COMMIT_PROGRESS_TIMEOUT)
    return got_ack, got_commit


def run(restarts: int = 50, *, rate: int = 2000, seed: int | None = None, data_dir: Path | None = None, log=None) -> dict:
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kafkalite-killnine-"))
    defaults = BrokerConfig()
    broker = BrokerProcess(data_dir / "data")
    if hasattr(broker, "fail_on_handler_errors"):
        broker.fail_on_handler_errors = False  # reported below, not raised
    broker.start()
    topic, group = "killnine", "killnine-group"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(30)
    state = State()
    threads = [
        threading.Thread(target=producer_loop, args=(broker.bootstrap, topic, state, rate), daemon=True),
        threading.Thread(target=consumer_loop, args=(broker.bootstrap, topic, group, state), daemon=True),
    ]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    kills = []
    stalled_acks = stalled_commits = 0
    try:
        for n in range(restarts):
            with state.lock:
                acked_before, commits_before = len(state.acked), len(state.commits)
            got_ack, got_commit = _wait_progress(state, acked_before, commits_before)
            stalled_acks += not got_ack
            stalled_commits += not got_commit
            # a random moment: somewhere in the next 0-1.5 s of load
            time.sleep(rng.uniform(0, 1.5))
            with state.lock:
                at = {"acked": len(state.acked), "commits": len(state.commits)}
            broker.kill()
            kill_t = time.monotonic()
            broker.start()
            at["down_s"] = round(time.monotonic() - kill_t, 3)
            kills.append(at)
            if (n + 1) % 10 == 0 or n + 1 == restarts:
                log(f"restart {n + 1}/{restarts}: {at['acked']} acked records, {at['commits']} acked commits")
        # a last stretch of load on the final broker, then stop the clients
        with state.lock:
            acked_before, commits_before = len(state.acked), len(state.commits)
        _wait_progress(state, acked_before, commits_before)
        state.stop.set()
        for t in threads:
            t.join(90)
        load_s = time.monotonic() - t0
        with state.lock:
            acked = dict(state.acked)
            commits = list(state.commits)
        stored = read_back(broker.bootstrap, topic)
        final_commits = committed(broker.bootstrap, topic, group)
    finally:
        if broker.proc is not None:
            broker.stop()
    handler_failures = [line for line in broker.stderr_lines if "handler failed" in line]
    lost = [(p, o, v) for (p, o), v in acked.items() if stored.get((p, o)) != v]
    lost_commits = [(p, o) for p, o in commits if o > final_commits.get(p, -1001)]
    result = {
        "restarts": len(kills),
        "acked_records": len(acked),
        "records_lost": len(lost),
        "records_stored": len(stored),
        "stored_not_acked": len(stored.keys() - acked.keys()),  # retried after a lost ack, or cut off by the stop
        "acked_commits": len(commits),
        "commits_lost": len(lost_commits),
        "final_committed": {str(p): o for p, o in sorted(final_commits.items())},
        "highest_acked_commit": {str(p): max((o for q, o in commits if q == p), default=None) for p in range(PARTITIONS)},
        "failed_deliveries": state.failed_deliveries,
        "commit_failures": state.commit_failures,
        "kills_without_new_ack": stalled_acks,
        "kills_without_new_commit": stalled_commits,
        "client_errors": state.errors,
        "handler_failures": len(handler_failures),
        "handler_failure_details": handler_failures[:5],
        "fsync": f"{defaults.fsync} (the default; interval {defaults.fsync_interval_ms} ms)",
        "broker_args": "defaults (no --fsync flag)",
        "produce_rate_limit_per_s": rate,
        "seed": seed,
        "load_seconds": round(load_s, 1),
        "duration_s": round(time.monotonic() - t0, 1),
        "loadavg": Path("/proc/loadavg").read_text().strip(),
        "lost_examples": [{"partition": p, "offset": o, "value": v.decode(errors="replace"), "stored": (stored.get((p, o)) or b"").decode(errors="replace")} for p, o, v in lost[:10]],
        "lost_commit_examples": [{"partition": p, "offset": o} for p, o in lost_commits[:10]],
        "kills": kills,
    }
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.killnine", description=__doc__.split("\n\n")[0])
    ap.add_argument("--restarts", type=int, default=50)
    ap.add_argument("--rate", type=int, default=2000, help="records/s the producer is paced to")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    result = run(args.restarts, rate=args.rate, seed=args.seed)
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("kills",)}, indent=2))
    return 0 if result["records_lost"] == 0 and result["commits_lost"] == 0 and not result["client_errors"] else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
