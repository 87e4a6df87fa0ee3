"""Cluster ids never start with "-" (Kafka's StorageTool would read one as an option)."""

from __future__ import annotations

import base64
import uuid

from broker import cluster
from tests import reference_kafka

# url-safe base64 maps a first byte of 0xf8-0xfb to "-"
DASHED = uuid.UUID(bytes=b"\xf8" + bytes(15))
PLAIN = uuid.UUID(bytes=b"\x10" + bytes(15))


def _ids(*values):
    it = iter(values)
    return lambda: next(it)


def test_dashed_uuid_really_encodes_with_a_dash():
    assert base64.urlsafe_b64encode(DASHED.bytes).decode().startswith("-")


def test_reference_kafka_draws_again_until_the_id_does_not_start_with_a_dash(monkeypatch, tmp_path):
    monkeypatch.setattr(reference_kafka.uuid, "uuid4", _ids(DASHED, DASHED, PLAIN))
    k = reference_kafka.ReferenceKafka(tmp_path)
    assert k.cluster_id == base64.urlsafe_b64encode(PLAIN.bytes).decode().rstrip("=")
    assert len(k.cluster_id) == 22


def test_kafkalite_cluster_id_never_starts_with_a_dash(monkeypatch):
    monkeypatch.setattr(cluster.uuid, "uuid4", _ids(DASHED, PLAIN))
    assert cluster._new_cluster_id() == base64.urlsafe_b64encode(PLAIN.bytes).decode().rstrip("=")


def test_many_reference_ids_are_well_formed():
    for _ in range(500):
        cid = reference_kafka.new_cluster_id()
        assert not cid.startswith("-") and len(cid) == 22
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16
