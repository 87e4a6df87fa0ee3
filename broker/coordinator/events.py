"""The group event stream: the coordinator's group events as a topic.

Shard operations return their group events (rebalances, epoch bumps,
reconciliations, members leaving or expiring, conversions; see
docs/group-events.md) in their ``Result``, stamped by the shard's injected
clock. Once the records of the operation are durable, the runtime publishes
them here: one JSON record per event, keyed by group id, appended to the
internal topic ``__kafkalite_group_events``, so any Kafka client (or the
Spark jobs in ``pipeline/``) can read why a group stalled. The topic keeps a
week of events by time.
"""

from __future__ import annotations

import json

from protocol.records import Record, build_batch, split_batches

from ..partition import AppendOrigin

EVENTS_TOPIC = "__kafkalite_group_events"
EVENTS_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(7 * 24 * 3600 * 1000)}


class EventPublisher:
    def __init__(self, cluster) -> None:
        topic = cluster.topics.get(EVENTS_TOPIC)
        if topic is None:
            topic = cluster.create_topic(EVENTS_TOPIC, 1, EVENTS_CONFIG)
        self.partition = topic.partitions[0]
        self.published = 0

    def publish(self, events: list) -> None:
        """Append ``events`` (``common.GroupEvent``), in order, as one batch."""
        records = [
            Record(offset=i, timestamp=e.ts_ms, key=e.group.encode(), value=json.dumps(e.as_json(), default=str, separators=(",", ":")).encode())
            for i, e in enumerate(events)
        ]
        batch = build_batch(records)
        self.partition.append(split_batches(batch, verify_crc=False), AppendOrigin.INTERNAL)  # CRC just computed; wakes fetches
        self.published += len(records)
