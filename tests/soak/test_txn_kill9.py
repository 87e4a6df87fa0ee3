"""Exactly-once across kill -9: a transactional producer and a consume-transform-produce
loop run while the broker is killed with SIGKILL again and again (``KAFKALITE_TXN_KILLS``
times, 20 by default; issue 13's target is 100: ``KAFKALITE_TXN_KILLS=100``).

The producer writes numbered transactions of records spread over 3 partitions
and commits or aborts each (a seeded quarter abort). After every kill the broker
restarts on the same data, and the producer comes back with the same
transactional id (which aborts or completes what was in flight, as Kafka does).
At the end a READ_COMMITTED consumer reads everything, and:

* every record of every transaction whose commit was acknowledged is there once;
* no record of a transaction that was aborted (acknowledged or not) is there;
* a transaction whose end was not acknowledged (the broker died under it) is
  there whole or not at all, never in part;
* no record is there twice.

The offsets sent with the transactions (``send_offsets_to_transaction``) must
equal, for the group, the offset of the last transaction that is there.
"""

from __future__ import annotations

import os
import random
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.broker_process import BrokerProcess
from bench.txn import read_all
from tests.integration.test_transactions import QUIET, new_topic

KILLS = int(os.environ.get("KAFKALITE_TXN_KILLS", "20"))
PARTITIONS = 3
RECORDS = 6


def _producer(bootstrap: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 10_000,
                  "message.timeout.ms": 10_000, "socket.timeout.ms": 3_000, **QUIET})
    p.init_transactions(60)
    return p


@pytest.mark.soak
def test_exactly_once_across_repeated_kill_9(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        bootstrap = broker.bootstrap
        topic = new_topic(bootstrap, PARTITIONS)
        group = "eos-" + uuid.uuid4().hex[:8]
        meta_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
        meta = meta_consumer.consumer_group_metadata()
        tid = "eos-" + uuid.uuid4().hex[:8]
        rng = random.Random(13)
        outcome: dict[int, str] = {}  # transaction number -> committed | aborted | unknown
        n = 0
        for kill in range(KILLS + 1):
            p = _producer(broker.bootstrap, tid)
            for _ in range(rng.randrange(3, 12)):  # transactions between kills
                p.begin_transaction()
                for k in range(RECORDS):
                    p.produce(topic, value=f"{n}:{k}".encode(), partition=(n + k) % PARTITIONS)
                p.send_offsets_to_transaction([TopicPartition(topic, 0, n + 1)], meta, 30)
                abort = rng.random() < 0.25
                try:
                    if abort:
                        p.flush(30)
                        p.abort_transaction(30)
                        outcome[n] = "aborted"
                    else:
                        p.commit_transaction(30)
                        outcome[n] = "committed"
                except KafkaException:
                    outcome[n] = "aborted" if abort else "unknown"
                    break
                n += 1
            if kill < KILLS:
                # a transaction in flight when the broker dies: records sent, no end
                try:
                    p.begin_transaction()
                    for k in range(RECORDS):
                        p.produce(topic, value=f"{n}:{k}".encode(), partition=(n + k) % PARTITIONS)
                    p.flush(5)
                    outcome[n] = "in flight"
                    n += 1
                except KafkaException:
                    pass
                broker.kill()
                broker.start()
            del p
        got = read_all(broker.bootstrap, topic, PARTITIONS, "read_committed", sum(RECORDS for o in outcome.values() if o == "committed"),
                       timeout=60)
        by_txn: dict[int, list[int]] = defaultdict(list)
        for v in got:
            t, k = v.decode().split(":")
            by_txn[int(t)].append(int(k))
        assert len(got) == len(set(got)), "a record was read twice"
        for t, o in outcome.items():
            parts = sorted(by_txn.get(t, []))
            if o == "committed":
                assert parts == list(range(RECORDS)), (t, o, parts)
            elif o in ("aborted", "in flight"):
                assert parts == [], (t, o, parts)
            else:
                assert parts in ([], list(range(RECORDS))), (t, o, parts)
        assert set(by_txn) <= set(outcome)
        committed_last = max((t for t in by_txn), default=-1)
        offsets = meta_consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert offsets[0].offset == committed_last + 1, (offsets, committed_last)
        meta_consumer.close()
        broker.check_handler_errors()
    finally:
        broker.stop()
