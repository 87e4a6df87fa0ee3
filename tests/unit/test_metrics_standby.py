"""The metrics of a cluster's standby node, whose partitions have no logs (broker/multinode/)."""

from types import SimpleNamespace

from broker.partition import Partition
from broker.metrics import EVENTS_TOPIC, _StateCollector


def test_a_standby_node_reads_no_group_events_and_does_not_fail_the_scrape():
    topic = SimpleNamespace(partitions=[Partition(EVENTS_TOPIC, 0, None)])
    broker = SimpleNamespace(cluster=SimpleNamespace(topics={EVENTS_TOPIC: topic}))
    collector = _StateCollector.__new__(_StateCollector)
    collector.metrics = SimpleNamespace(broker=broker)
    collector.events_offset = 0
    assert collector._events_partition() is None
    collector._read_events()  # raised AttributeError on 'NoneType'.log_start_offset before
    assert collector.events_offset == 0
