"""Compaction of a transactional, compacted topic with a real client (confluent-kafka).

A transactional producer commits and aborts transactions on a ``cleanup.policy=compact``
topic and sends offsets to its transactions (``__consumer_offsets``); the partitions are
rolled and cleaned (passes at moving times, so aborted data, aborted transactions' entries
and markers all go). A READ_COMMITTED consumer reads the same latest value per key before
and after, and after a restart; the group's offset is still the committed transaction's.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from broker.testing import BrokerThread
from tests.wait import wait_until

QUIET = {"log_level": 3}
RET = 60_000


def read_committed(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[bytes, bytes]:
    """The latest value per key a READ_COMMITTED consumer reads, up to the partition's end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rd-" + uuid.uuid4().hex[:8], "isolation.level": "read_committed",
                  "enable.partition.eof": True, "enable.auto.commit": False, **QUIET})
    c.assign([TopicPartition(topic, 0, 0)])
    latest: dict[bytes, bytes] = {}
    deadline = time.monotonic() + timeout
    try:
        while True:
            assert time.monotonic() < deadline, "the consumer never reached the partition's end"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return latest
                continue
            latest[m.key()] = m.value()
    finally:
        c.close()


def settled(plog) -> bool:
    return plog.last_stable_offset == plog.log_end_offset


def test_a_compacted_transactional_topic_reads_the_same_after_cleaning(tmp_path):
    with BrokerThread(tmp_path / "data", settings={"group.initial.rebalance.delay.ms": 0}) as broker:
        bootstrap = broker.bootstrap_servers
        topic = "ctxn-" + uuid.uuid4().hex[:8]
        broker.create_topic(topic, 1, {"cleanup.policy": "compact", "delete.retention.ms": str(RET)})
        group = "g-" + uuid.uuid4().hex[:8]
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET})
        meta = c.consumer_group_metadata()
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t-" + uuid.uuid4().hex[:8], **QUIET})
        p.init_transactions(30)
        expected: dict[bytes, bytes] = {}
        for i in range(13):  # the last one commits (an aborted last batch of the producer stays, emptied)
            p.begin_transaction()
            batch = {b"k%d" % ((i + j) % 5): b"v%d-%d" % (i, j) for j in range(3)}
            for k, v in batch.items():
                p.produce(topic, key=k, value=v, partition=0)
            p.send_offsets_to_transaction([TopicPartition(topic, 0, 100 + i)], meta, 30)
            p.flush(30)
            if i % 3 == 2:
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
                expected.update(batch)
                committed_offset = 100 + i
        plog = broker.broker.cluster.partition(topic, 0).log
        offsets_log = broker.broker.cluster.partition("__consumer_offsets", 0).log
        broker.wait_for(lambda _: settled(plog) and settled(offsets_log))  # every marker written
        assert read_committed(bootstrap, topic) == expected
        size = plog.size_bytes

        now = int(time.time() * 1000)
        for log_ in (plog, offsets_log):
            log_.roll()
        stats = []
        for t in (now, now + 1, now + 1 + RET, now + 2 + 2 * RET):
            stats.append(plog.compact(t))
            offsets_log.compact(t)
        # the broker's own maintenance thread compacts this log too (every second, at the real time): what it
        # dropped before these passes is not in their stats, so the aborted data is checked on the log itself
        # (no aborted transaction left, the log smaller) rather than by who dropped it; markers outlive
        # delete.retention.ms, which only these passes' clock reaches
        assert sum(s.markers_dropped for s in stats) > 0
        assert plog.size_bytes < size
        assert plog.aborted_transactions(0, plog.log_end_offset) == []
        assert read_committed(bootstrap, topic) == expected

        broker.restart()  # the group coordinator loads the cleaned __consumer_offsets again
        assert read_committed(bootstrap, topic) == expected
        wait_until(lambda: c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == committed_offset,
                   what="the group's offset to be the last committed transaction's")
        c.close()
