"""Helpers shared by the cluster tests (tests/integration/test_multinode.py against kafkalite's
``serve --nodes N``, tests/integration/test_multinode_reference.py against it and a 3-broker Kafka)."""

from __future__ import annotations


def create_topic(bootstrap: str, name: str, partitions: int, rf: int = 3, config: dict | None = None) -> None:
    """Create ``name`` through ``bootstrap`` and wait for the answer."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=config or {})])[name].result(30)


class Recorder:
    """A producer's delivery reports: what was acknowledged, per partition in order."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []

    def __call__(self, err, msg) -> None:
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.errors.append(err.name())
