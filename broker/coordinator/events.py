"""The group event stream: the coordinator's rebalance events as a topic.

Every structured event the coordinator logs about a group (rebalances, epoch
bumps, reconciliations, members leaving or expiring, conversions) is also
appended as a JSON record to the internal topic ``__kafkalite_group_events``,
keyed by group id, so any Kafka client (or the Spark jobs in ``pipeline/``)
can read why a group stalled. The topic keeps a week of events by time.
"""

from __future__ import annotations

import json
import time

from protocol.records import Record, build_batch, split_batches

EVENTS_TOPIC = "__kafkalite_group_events"
EVENTS_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(7 * 24 * 3600 * 1000)}

PUBLISHED = frozenset(
    {
        "group created",
        "group deleted",
        "group converted",
        "rebalance started",
        "join phase completed",
        "rebalance completed",
        "static member replaced",
        "pending member expired",
        "offsets expired",
        "consumer group epoch bumped",
        "target assignment computed",
        "consumer member reconciled",
        "consumer group member removed",
        "static member left temporarily",
    }
)


class EventPublisher:
    def __init__(self, cluster) -> None:
        topic = cluster.topics.get(EVENTS_TOPIC)
        if topic is None:
            topic = cluster.create_topic(EVENTS_TOPIC, 1, EVENTS_CONFIG)
        self.partition = topic.partitions[0]
        self.published = 0

    def publish(self, group_id: str, event: dict) -> None:
        now = int(time.time() * 1000)
        value = json.dumps(event, default=str, separators=(",", ":")).encode()
        batch = build_batch([Record(offset=0, timestamp=now, key=group_id.encode(), value=value)])
        self.partition.log.append(split_batches(batch), leader_epoch=0)
        self.partition.notify()
        self.published += 1


class EventLog:
    """A structlog logger that also publishes group events to the event topic."""

    def __init__(self, log, publisher: EventPublisher | None, context: dict | None = None) -> None:
        self._log = log
        self._publisher = publisher
        self._context = context or {}

    def bind(self, **kw) -> EventLog:
        return EventLog(self._log.bind(**kw), self._publisher, {**self._context, **kw})

    def info(self, event: str, **kw) -> None:
        self._log.info(event, **kw)
        group = kw.get("group")
        if self._publisher is not None and group is not None and event in PUBLISHED:
            try:
                self._publisher.publish(group, {"event": event, "ts": time.time(), **self._context, **kw})
            except Exception:  # noqa: BLE001 - the event stream must never break the coordinator
                self._log.exception("could not publish group event", event=event)

    def __getattr__(self, name):
        return getattr(self._log, name)
