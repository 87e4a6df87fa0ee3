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


@pytest.mark.kafkalite_security(
    "SASL_PLAINTEXT", mechanisms=["PLAIN"], users={"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw"}, plaintext=True,
    acls=[{"resource_type": "TOPIC", "name": "acl-", "pattern_type": "PREFIXED", "operation": "WRITE"},
          {"resource_type": "TOPIC", "name": "acl-orders", "operation": "READ", "principal": "User:bob"}],
    super_users=["User:admin"],
)
def test_marker_preloads_acls_and_super_users(kafkalite_secure_broker):
    """The marker's ACLs are there from the start: alice (the first user, the dicts' default principal) may
    write under the prefix only, bob may not write, admin is a super user, the PLAINTEXT listener's
    anonymous admin clients too."""
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType

    b = kafkalite_secure_broker
    sec = b.security
    assert b.config.authorizer_class_name and sec.settings["super.users"] == "User:admin;User:ANONYMOUS"
    b.create_topic("acl-orders")
    b.create_topic("other")

    def produce(user: str, topic: str) -> str:
        outcome = []
        p = Producer({"bootstrap.servers": b.bootstrap_servers, **sec.librdkafka(user=user), "message.timeout.ms": 10000})
        p.produce(topic, b"v", callback=lambda err, msg: outcome.append("delivered" if err is None else err.name()))
        p.flush(30)
        return outcome[0]

    assert produce("alice", "acl-orders") == "delivered"
    assert produce("alice", "other") == "TOPIC_AUTHORIZATION_FAILED"
    assert produce("bob", "acl-orders") == "TOPIC_AUTHORIZATION_FAILED"
    assert produce("admin", "other") == "delivered"
    admin = AdminClient({"bootstrap.servers": b.listeners["PLAINTEXT"]})
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    listed = sorted((x.name, x.principal, x.operation.name) for x in admin.describe_acls(flt).result(30))
    assert listed == [("acl-", "User:alice", "WRITE"), ("acl-orders", "User:bob", "READ")]


def test_acls_without_an_authorizer_are_refused():
    from broker.testing import BrokerThread, secured

    with pytest.raises(ValueError, match="authorizer"):
        BrokerThread(acls=[{"resource_type": "TOPIC", "name": "t", "operation": "READ"}])
    sec = secured("SASL_PLAINTEXT", super_users=["User:admin"])
    assert sec.acls == [] and sec.settings["super.users"] == "User:admin" and "authorizer.class.name" in sec.settings
