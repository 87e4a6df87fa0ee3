"""Every append wakes the fetches parked on its partition, internal topics included.

A lag monitor long-polls ``__consumer_offsets``; a dashboard long-polls
``__kafkalite_group_events``. Their Fetch waits up to ``fetch.wait.max.ms``
(here 120 s) for data, and must return as soon as a commit or a group event
is appended, as Kafka does, not when its wait runs out. The tests give the
record 20 s to arrive, far less than the wait: without the wake-up they fail.
No timing is asserted. (Produce waking a long poll: ``test_data_plane``;
idempotent duplicates: ``test_wire``.)
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.coordinator.placement import partition_for
from protocol.group_records import decode_key, decode_value
from protocol.group_records.classic import OffsetCommitKey

MAX_WAIT_MS = 120_000  # what the fetch may wait: far beyond the bound below
BOUND_S = 20.0  # how long the test waits for the record
PARKED_S = 2.0  # lets the consumer's fetch reach the broker and park on the empty partition


def _long_poller(bootstrap: str, topic: str, partition: int) -> Consumer:
    """A consumer assigned at the end of ``topic``-``partition``, its fetch parked there."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "append-path-watcher",  # assign() only: the group is never joined
            "enable.auto.commit": False,
            "fetch.wait.max.ms": MAX_WAIT_MS,
            "socket.timeout.ms": MAX_WAIT_MS + 30_000,
        }
    )
    _, end = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
    c.assign([TopicPartition(topic, partition, end)])
    deadline = time.monotonic() + PARKED_S
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        assert m is None or m.error() is not None, "nothing was appended yet"
    return c


def _first(consumer: Consumer, match) -> object:
    """The first message ``match`` accepts, or None after BOUND_S."""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None and match(m):
            return m
    return None


def test_offset_commit_wakes_a_long_poll_on_consumer_offsets(shared_broker):
    bootstrap = shared_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic("append-path-commits", 1, 1)])["append-path-commits"].result(15)
    group = "append-path-committer"
    watcher = _long_poller(bootstrap, "__consumer_offsets", partition_for(group))
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition("append-path-commits", 0, 42)], asynchronous=False)

        def is_commit(m):
            key = decode_key(m.key())
            return isinstance(key, OffsetCommitKey) and key.group == group

        m = _first(watcher, is_commit)
        assert m is not None, f"the commit did not reach a fetch parked on __consumer_offsets within {BOUND_S} s"
        key = decode_key(m.key())
        assert (key.topic, key.partition) == ("append-path-commits", 0)
        assert decode_value(key, m.value()).offset == 42
    finally:
        committer.close()
        watcher.close()


def test_group_event_wakes_a_long_poll_on_the_event_topic(shared_broker):
    bootstrap = shared_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic("append-path-events", 1, 1)])["append-path-events"].result(15)
    group = "append-path-evented"
    watcher = _long_poller(bootstrap, "__kafkalite_group_events", 0)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        member.subscribe(["append-path-events"])  # the join creates the group: an event
        member.poll(0.5)
        m = _first(watcher, lambda m: m.key() == group.encode())
        assert m is not None, f"no event of {group} reached a fetch parked on __kafkalite_group_events within {BOUND_S} s"
        assert json.loads(m.value())["group"] == group
    finally:
        member.close()
        watcher.close()
