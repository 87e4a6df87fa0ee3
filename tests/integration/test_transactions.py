"""Transactions with a real client (confluent-kafka), against kafkalite and, as a
cross-check, Apache Kafka 4.1 (``group_broker``; the ``kafka`` cases carry the
``reference`` marker).

Committed transactions are read by READ_COMMITTED consumers, aborted ones are
not (READ_UNCOMMITTED sees both), a second producer with the same
transactional id fences the first, offsets sent to a transaction count only
when it commits, and a broker killed with -9 in the middle of a transaction
comes back with the committed ones whole and the open one never shown to
READ_COMMITTED consumers. No test sleeps for a result: they poll until the
expected data arrives, within a deadline.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.txn import read_all
from tests.wait import wait_until

QUIET = {"log_level": 3}


def new_topic(bootstrap: str, partitions: int = 2) -> str:
    name = "txn-" + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})  # kept alive until the answer: its futures die with it
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def producer(bootstrap: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60_000, **QUIET, **extra})
    p.init_transactions(30)
    return p


def test_committed_transactions_are_read_and_aborted_ones_are_not(group_broker):
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap)
    p = producer(bootstrap, "tx-" + uuid.uuid4().hex[:8])
    for i in range(6):
        p.begin_transaction()
        for j in range(4):
            p.produce(topic, value=b"t%d-%d" % (i, j), partition=j % 2)
        p.flush(30)  # on the broker before the end: an abort must hide written data, not data never sent
        if i % 3 == 1:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    committed = sorted(b"t%d-%d" % (i, j) for i in range(6) if i % 3 != 1 for j in range(4))
    assert sorted(read_all(bootstrap, topic, 2, "read_committed", len(committed))) == committed
    everything = read_all(bootstrap, topic, 2, "read_uncommitted", 24)
    assert len(everything) == 24 and set(committed) <= set(everything)


def test_an_open_transaction_holds_read_committed_consumers_back_until_it_commits(group_broker):
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, 1)
    plain = Producer({"bootstrap.servers": bootstrap, **QUIET})
    plain.produce(topic, value=b"before", partition=0)
    plain.flush(30)
    p = producer(bootstrap, "tx-" + uuid.uuid4().hex[:8])
    p.begin_transaction()
    p.produce(topic, value=b"inside", partition=0)
    p.flush(30)
    plain.produce(topic, value=b"after", partition=0)  # past the open transaction: not stable yet
    plain.flush(30)
    assert read_all(bootstrap, topic, 1, "read_committed", 1, timeout=5) == [b"before"]
    assert read_all(bootstrap, topic, 1, "read_uncommitted", 3) == [b"before", b"inside", b"after"]
    p.commit_transaction(30)
    assert read_all(bootstrap, topic, 1, "read_committed", 3) == [b"before", b"inside", b"after"]


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(group_broker):
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, 1)
    tid = "tx-" + uuid.uuid4().hex[:8]
    first = producer(bootstrap, tid)
    first.begin_transaction()
    first.produce(topic, value=b"zombie", partition=0)
    first.flush(30)
    second = producer(bootstrap, tid)  # aborts the first one's open transaction, bumps the epoch
    second.begin_transaction()
    second.produce(topic, value=b"live", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as err:
        first.produce(topic, value=b"late", partition=0)
        first.commit_transaction(30)
    assert err.value.args[0].fatal() or err.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    assert read_all(bootstrap, topic, 1, "read_committed", 1) == [b"live"]


def test_offsets_sent_to_a_transaction_count_only_when_it_commits(group_broker):
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, 1)
    group = "ctp-" + uuid.uuid4().hex[:8]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET})
    meta = c.consumer_group_metadata()
    p = producer(bootstrap, "tx-" + uuid.uuid4().hex[:8])
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], meta, 30)
    p.abort_transaction(30)
    assert c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset < 0
    p.begin_transaction()
    p.produce(topic, value=b"y", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], meta, 30)
    p.commit_transaction(30)
    # the marker reaches the group coordinator after the answer
    wait_until(lambda: c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 7,
               what="the transaction's offset to become the group's")
    c.close()


def test_kill_9_in_the_middle_of_a_transaction_keeps_committed_ones_and_hides_the_open_one(group_broker):
    if getattr(group_broker, "kind", "") == "kafka":
        pytest.skip("kill -9 of the shared reference broker would cost every later test a restart")
    bootstrap = group_broker.bootstrap
    topic = new_topic(bootstrap, 2)
    tid = "tx-" + uuid.uuid4().hex[:8]
    p = producer(bootstrap, tid)
    for i in range(3):
        p.begin_transaction()
        for j in range(4):
            p.produce(topic, value=b"c%d-%d" % (i, j), partition=j % 2)
        p.commit_transaction(30)
    p.begin_transaction()
    for j in range(4):
        p.produce(topic, value=b"open-%d" % j, partition=j % 2)
    p.flush(30)
    del p
    group_broker.kill()
    group_broker.start()
    committed = sorted(b"c%d-%d" % (i, j) for i in range(3) for j in range(4))
    assert sorted(read_all(bootstrap, topic, 2, "read_committed", len(committed), timeout=10)) == committed
    # the same transactional id comes back: the open transaction is aborted, the new one commits
    p2 = producer(group_broker.bootstrap, tid)
    p2.begin_transaction()
    p2.produce(topic, value=b"after", partition=0)
    p2.commit_transaction(30)
    got = read_all(group_broker.bootstrap, topic, 2, "read_committed", len(committed) + 1)
    assert sorted(got) == sorted([*committed, b"after"])


def test_a_transaction_past_its_timeout_is_aborted_and_stops_holding_consumers_back(tmp_path):
    from tests.broker_process import BrokerProcess

    b = BrokerProcess(tmp_path / "data", "--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=100").start()
    try:
        topic = new_topic(b.bootstrap, 1)
        stuck = producer(b.bootstrap, "tx-" + uuid.uuid4().hex[:8], **{"transaction.timeout.ms": 1000})
        stuck.begin_transaction()
        stuck.produce(topic, value=b"never", partition=0)
        stuck.flush(30)
        plain = Producer({"bootstrap.servers": b.bootstrap, **QUIET})
        plain.produce(topic, value=b"later", partition=0)
        plain.flush(30)
        # held back by the open transaction until the coordinator aborts it, then the rest is stable
        assert read_all(b.bootstrap, topic, 1, "read_committed", 1, timeout=30) == [b"later"]
        with pytest.raises(KafkaException):
            stuck.commit_transaction(30)
        b.check_handler_errors()
    finally:
        b.stop()


async def test_produce_refuses_a_transactional_batch_the_coordinator_does_not_know_of():
    """KIP-890 part 1: a transactional id the coordinator never saw, or a partition never added
    to the transaction, gets an error and nothing is appended; an added one is appended."""
    from broker.testing import Broker
    from protocol.errors import ErrorCode
    from protocol.records import Record, build_batch
    from tests.integration.test_backpressure import Client

    async with Broker() as broker:
        await broker.create_topic("v", 2)
        client = await Client.open(broker.port)

        def batch(pid: int, seq: int = 0) -> bytes:
            return build_batch([Record(0, int(time.time() * 1000), b"k", b"v", [])], producer_id=pid, producer_epoch=0, base_sequence=seq,
                               is_transactional=True)

        async def produce(tid, pid, partition, seq=0):
            body = {"transactional_id": tid, "acks": -1, "timeout": 5000,
                    "topic_data": [{"name": "v", "partition_data": [{"index": partition, "records": batch(pid, seq)}]}]}
            return (await client.request(0, 11, body)).responses[0].partition_responses[0].error_code

        assert await produce("nobody", 77, 0) != ErrorCode.none  # loading or unknown: refused either way
        init = {"transactional_id": "known", "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}
        answer = await client.request(22, 4, init)
        while answer.error_code == ErrorCode.coordinator_load_in_progress:
            answer = await client.request(22, 4, init)
        assert answer.error_code == ErrorCode.none
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert await produce("nobody", 77, 0) == ErrorCode.invalid_producer_id_mapping  # an unknown transactional id
        add = {"v3_and_below_transactional_id": "known", "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
               "v3_and_below_topics": [{"name": "v", "partitions": [0]}]}
        result = await client.request(24, 3, add)
        assert result.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.none
        before = broker.cluster.partition("v", 1).log.log_end_offset
        assert await produce("known", pid, 1) == ErrorCode.transaction_abortable  # partition 1 was never added
        assert broker.cluster.partition("v", 1).log.log_end_offset == before
        assert await produce("known", pid, 0) == ErrorCode.none
        assert broker.cluster.partition("v", 0).log.in_transaction(pid)
        client.close()


async def test_markers_that_fail_to_be_written_are_tried_again_until_they_are():
    """A marker append that fails (storage error, group coordinator reloading) is retried, never
    dropped: the transaction completes and its data becomes readable."""
    from broker.coordinator.common import CoordinatorError
    from broker.testing import Broker
    from protocol.errors import ErrorCode
    from tests.integration.test_backpressure import Client
    from tests.wait import async_wait_until

    async with Broker() as broker:
        await broker.create_topic("m", 1)
        coordinator = broker.server.transactions
        real = coordinator.write_marker
        failures = []

        async def flaky(marker):
            if len(failures) < 3:
                failures.append(marker)
                raise CoordinatorError(ErrorCode.not_coordinator, "injected") if len(failures) % 2 else OSError("injected disk error")
            await real(marker)

        coordinator.write_marker = flaky
        client = await Client.open(broker.port)
        init = {"transactional_id": "flaky", "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}
        answer = await client.request(22, 4, init)
        while answer.error_code == ErrorCode.coordinator_load_in_progress:
            answer = await client.request(22, 4, init)
        pid, epoch = answer.producer_id, answer.producer_epoch
        add = {"v3_and_below_transactional_id": "flaky", "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
               "v3_and_below_topics": [{"name": "m", "partitions": [0]}]}
        await client.request(24, 3, add)
        from protocol.records import Record, build_batch

        batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"v", [])], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            is_transactional=True)
        produced = await client.request(0, 11, {"transactional_id": "flaky", "acks": -1, "timeout": 5000,
                                                "topic_data": [{"name": "m", "partition_data": [{"index": 0, "records": batch}]}]})
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
        end = await client.request(26, 3, {"transactional_id": "flaky", "producer_id": pid, "producer_epoch": epoch, "committed": True})
        assert end.error_code == ErrorCode.none
        log = broker.cluster.partition("m", 0).log
        await async_wait_until(lambda: log.last_stable_offset == log.log_end_offset, what="the COMMIT marker, after the failed tries")
        assert len(failures) == 3
        await async_wait_until(lambda: coordinator.describe(["flaky"])[0].state == "CompleteCommit", what="COMPLETE_COMMIT")
        client.close()
