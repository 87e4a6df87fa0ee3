"""The pytest plugin's secured broker: generated credentials, clients connect with the settings it gives."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer

from protocol.errors import ErrorCode

from .raw import Raw, plain_token


def _roundtrip(bootstrap: str, conf: dict) -> bytes | None:
    topic = f"plugin-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": bootstrap, **conf})
    p.produce(topic, b"secured", partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, **conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        for _ in range(80):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                return m.value()
    finally:
        c.close()
    return None


def test_default_is_sasl_ssl_with_every_mechanism(kafkalite_secure_broker):
    b = kafkalite_secure_broker
    sec = b.security
    assert list(b.listeners) == ["SASL_SSL"] and sec.protocol == "SASL_SSL"
    for mechanism in sec.mechanisms:
        assert _roundtrip(b.bootstrap_servers, sec.librdkafka(mechanism=mechanism)) == b"secured", mechanism
    with Raw(b.bootstrap_servers, tls=sec.ssl_context()) as c:
        c.handshake("PLAIN")
        assert c.authenticate(plain_token(sec.user, "not-" + sec.users[sec.user])).error_code == ErrorCode.sasl_authentication_failed


@pytest.mark.kafkalite_security("SASL_PLAINTEXT", mechanisms=["SCRAM-SHA-512"], users={"svc": "svc-pw"}, plaintext=True)
@pytest.mark.kafkalite(num_partitions=3)
def test_marker_chooses_protocol_mechanisms_users(kafkalite_secure_broker):
    b = kafkalite_secure_broker
    assert list(b.listeners) == ["SASL_PLAINTEXT", "PLAINTEXT"]
    assert b.config.num_partitions == 3
    assert _roundtrip(b.bootstrap_servers, b.security.librdkafka()) == b"secured"
    assert b.security.librdkafka()["sasl.username"] == "svc"


@pytest.mark.kafkalite_security("SSL", client_auth="required")
def test_mutual_tls(kafkalite_secure_broker):
    b = kafkalite_secure_broker
    assert _roundtrip(b.bootstrap_servers, b.security.librdkafka()) == b"secured"
    with Raw(b.bootstrap_servers, tls=b.security.ssl_context()) as c:
        c.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        principals = {c.principal for c in b.broker.server.connections}
    assert f"User:CN={b.security.user},O=kafkalite" in principals
