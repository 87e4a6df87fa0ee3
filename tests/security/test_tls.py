"""TLS listeners: certificates refused, old protocol versions refused, stalled handshakes closed,
client principals, and the key store forms (file, inline, encrypted key)."""

from __future__ import annotations

import hashlib
import logging
import socket
import ssl
import time
import warnings

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.request_header.v2.header import RequestHeader

from broker.security.certs import generate
from broker.testing import BrokerThread
from protocol.codec import build, encode, request_class
from protocol.errors import ErrorCode
from tests.conformance.driver import record_batch

from .clients import new_topic
from .raw import Closed, Raw

API_VERSIONS = (18, 3, {"client_software_name": "raw", "client_software_version": "1"})


def _refused(address: str, ctx: ssl.SSLContext) -> bool:
    """True if the broker did not answer ApiVersions over a TLS connection made with ``ctx``."""
    try:
        with Raw(address, tls=ctx) as c:
            c.send(*API_VERSIONS)
            c.recv_frame()
    except (ssl.SSLError, Closed, ConnectionError):
        return True
    return False


def _client_ctx(ca, cert=None, key=None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def test_mtls_needs_a_trusted_client_certificate(target, rogue_certs):
    certs = target.certs
    _, key, cert = certs.clients["alice"]
    assert not _refused(target.listeners["MTLS"], _client_ctx(certs.ca, cert, key))
    assert _refused(target.listeners["MTLS"], _client_ctx(certs.ca))  # no certificate
    _, rkey, rcert = rogue_certs.clients["alice"]
    assert _refused(target.listeners["MTLS"], _client_ctx(certs.ca, rcert, rkey))  # one the broker does not trust
    # ssl.client.auth=requested: no certificate is fine, an untrusted one is not
    assert not _refused(target.listeners["SSL"], _client_ctx(certs.ca))
    assert _refused(target.listeners["SSL"], _client_ctx(certs.ca, rcert, rkey))


def test_client_that_does_not_trust_the_broker_gives_up(target, rogue_certs):
    with pytest.raises(ssl.SSLCertVerificationError):
        Raw(target.listeners["SSL"], tls=_client_ctx(rogue_certs.ca))
    quiet = logging.getLogger("tests.security.quiet")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin = AdminClient({"bootstrap.servers": target.listeners["SSL"], "security.protocol": "SSL", "ssl.ca.location": str(rogue_certs.ca), "logger": quiet})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_tls_below_1_2_is_refused(target):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    except (ValueError, ssl.SSLError):
        pytest.skip("this OpenSSL cannot offer TLS 1.1")
    try:
        with Raw(target.listeners["SSL"], tls=ctx):
            pass
    except ssl.SSLError as exc:
        if "NO_PROTOCOLS_AVAILABLE" in str(exc) or "no protocols available" in str(exc):
            pytest.skip("this OpenSSL refuses TLS 1.1 on the client side already")
        return
    except (ConnectionError, Closed):
        return
    raise AssertionError("a TLS 1.1 handshake succeeded")


# -- kafkalite only -------------------------------------------------------------------------------


def test_principals(kafkalite_target):
    """A connection's principal: the certificate's subject in RFC 2253 form (what Kafka's
    default principal builder gives), User:ANONYMOUS without one, the SASL user over SASL_SSL."""
    from .conftest import PASSWORD
    from .raw import plain_token

    b = kafkalite_target.handle
    certs = kafkalite_target.certs
    _, key, cert = certs.clients["alice"]

    def principal_of(sock_name):
        (conn,) = [c for c in b.broker.server.connections if c.peer == sock_name]
        return conn.principal

    with Raw(kafkalite_target.listeners["SSL"], tls=_client_ctx(certs.ca, cert, key)) as c:
        c.request(*API_VERSIONS)
        assert principal_of("%s:%d" % c.sock.getsockname()) == "User:CN=alice,O=kafkalite"
    with Raw(kafkalite_target.listeners["SSL"], tls=_client_ctx(certs.ca)) as c:
        c.request(*API_VERSIONS)
        assert principal_of("%s:%d" % c.sock.getsockname()) == "User:ANONYMOUS"
    with Raw(kafkalite_target.listeners["SASL_SSL"], tls=_client_ctx(certs.ca, cert, key)) as c:
        c.handshake("PLAIN")
        assert c.authenticate(plain_token("alice", PASSWORD)).error_code == ErrorCode.none
        assert principal_of("%s:%d" % c.sock.getsockname()) == "User:alice"


def test_stalled_tls_handshake_is_closed(tmp_path):
    certs = generate(tmp_path / "certs")
    settings = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(certs.broker), "ssl_handshake_timeout_ms": 200}
    with BrokerThread(tmp_path / "data", settings=settings) as b:
        host, port = b.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as stalled:
            stalled.sendall(b"\x16\x03\x01\x00\xff")  # a ClientHello that never comes
            assert stalled.recv(1024) == b""  # closed by the broker
        assert not _refused(b.bootstrap_servers, _client_ctx(certs.ca))


def _metric(text: str, name: str, **labels) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()))


def test_failed_handshakes_are_logged_and_counted(kafkalite_target, rogue_certs):
    """Garbage instead of a ClientHello, a client that does not trust the broker's CA, a client
    certificate from another CA: each one log line (no bytes of the client's) and one count."""
    import structlog

    b = kafkalite_target.handle
    failures = "kafkalite_tls_handshake_failures_total"
    before = b.metrics_text()
    _, rogue_key, rogue_cert = rogue_certs.clients["alice"]
    garbage = b"GET / HTTP/1.1\r\nX-Secret: do-not-log-me\r\n\r\n"
    with structlog.testing.capture_logs() as logs:
        host, port = kafkalite_target.listeners["SSL"].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as plain:
            plain.sendall(garbage)
            assert plain.recv(1024) == b""  # closed (an alert, at most, first)
        assert _refused(kafkalite_target.listeners["SASL_SSL"], _client_ctx(rogue_certs.ca))
        assert _refused(kafkalite_target.listeners["MTLS"], _client_ctx(kafkalite_target.certs.ca, rogue_cert, rogue_key))
        b.wait_for(lambda b: _metric(b.metrics_text(), failures) - _metric(before, failures) >= 3)
    after = b.metrics_text()

    def delta(**labels):
        return _metric(after, failures, **labels) - _metric(before, failures, **labels)

    assert delta(listener="SSL", reason="protocol") == 1
    assert delta(listener="SASL_SSL", reason="alert") == 1
    assert delta(listener="MTLS", reason="certificate") == 1
    lines = [e for e in logs if e["event"] == "TLS handshake failed"]
    assert sorted((e["listener"], e["reason"]) for e in lines) == [("MTLS", "certificate"), ("SASL_SSL", "alert"), ("SSL", "protocol")]
    assert {e["log_level"] for e in lines} == {"warning"}  # as failed SASL authentications
    assert all(e["peer"].startswith("127.0.0.1:") and e["detail"] for e in lines), lines
    assert "do-not-log-me" not in repr(logs)


def test_handshakes_in_progress_count_against_max_connections(tmp_path):
    """Connections that never finish their handshake hold their places from accept: with
    max.connections of them stuck, the next connection is closed at once; one gone, one more fits."""
    certs = generate(tmp_path / "certs")
    settings = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(certs.broker), "max.connections": 3, "ssl_handshake_timeout_ms": 60000}
    with BrokerThread(tmp_path / "data", settings=settings) as b:
        server = b.broker.server
        host, port = b.bootstrap_servers.rsplit(":", 1)
        stuck = [socket.create_connection((host, int(port)), timeout=30) for _ in range(3)]
        try:
            b.wait_for(lambda b: len(server.handshaking) == 3)
            refused = server.refused
            assert _refused(b.bootstrap_servers, _client_ctx(certs.ca))
            assert server.refused == refused + 1 and len(server.connections) == 0
            stuck.pop().close()
            b.wait_for(lambda b: len(server.handshaking) == 2)
            assert not _refused(b.bootstrap_servers, _client_ctx(certs.ca))
        finally:
            for sock in stuck:
                sock.close()
        b.wait_for(lambda b: not server.handshaking)


def test_key_store_forms(tmp_path):
    """ssl.keystore.location; inline chain and key with inline trust; an encrypted key with ssl.key.password."""
    from cryptography.hazmat.primitives import serialization

    certs = generate(tmp_path / "certs", clients=["alice"])
    key = serialization.load_pem_private_key(certs.broker_key.read_bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"key-pass-1"))
    enc_path = tmp_path / "encrypted.pem"
    enc_path.write_bytes(encrypted + certs.broker_cert.read_bytes())
    forms = {
        "file": {"ssl.keystore.location": str(certs.broker)},
        "inline": {
            "ssl.keystore.certificate.chain": certs.broker_cert.read_text(),
            "ssl.keystore.key": certs.broker_key.read_text(),
            "ssl.truststore.certificates": certs.ca.read_text(),
            "ssl.client.auth": "required",
        },
        "encrypted": {"ssl.keystore.location": str(enc_path), "ssl.key.password": "key-pass-1"},
    }
    _, ckey, ccert = certs.clients["alice"]
    for name, form in forms.items():
        with BrokerThread(tmp_path / f"data-{name}", settings={"listeners": "SSL://127.0.0.1:0", **form}) as b:
            ctx = _client_ctx(certs.ca, ccert, ckey)
            assert not _refused(b.bootstrap_servers, ctx), name
            if name == "inline":
                assert _refused(b.bootstrap_servers, _client_ctx(certs.ca)), "client auth is required"


def test_large_requests_over_tls(kafkalite_target):
    """Requests of hundreds of KiB over TLS (read with SO_RCVLOWAT, broker/net/sasl_gate.py _tune_lowat), in
    pieces and back to back with small ones: every one is answered, the records come back whole."""
    certs = kafkalite_target.certs
    address = kafkalite_target.listeners["SSL"]
    conf = {"bootstrap.servers": address, "security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
    topic = new_topic("big-tls")
    values = [hashlib.sha256(b"%d" % i).digest() * (4096 + i) for i in range(24)]  # ~128 KiB to ~130 KiB each
    p = Producer({**conf, "linger.ms": 50, "batch.size": 1_000_000, "message.max.bytes": 1_000_000, "compression.type": "none"})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(60) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "fetch.max.bytes": 10_000_000})
    got = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    assert got == values
    # a large request sent in two pieces, then a small one right behind it on the same connection
    with Raw(address, tls=_client_ctx(certs.ca)) as raw:
        batch = record_batch([b"z" * 400_000])
        body = {"transactional_id": None, "acks": -1, "timeout": 10000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
        payload = encode(RequestHeader(request_api_key=0, request_api_version=9, correlation_id=7, client_id="raw")) + encode(build(request_class(0, 9), body))
        framed = len(payload).to_bytes(4, "big") + payload
        raw.sock.sendall(framed[:150_000])
        time.sleep(0.2)  # not a wait for an event: the two pieces must reach the broker apart
        raw.sock.sendall(framed[150_000:])
        raw.corr = 7
        produced = raw.recv(0, 9, 7)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert raw.request(*API_VERSIONS).error_code == ErrorCode.none


def test_large_fetches_over_tls_come_back_whole(target):
    """Fetch answers of megabytes over TLS: kafkalite sends their records from the segment files
    through the TLS transport 256 KiB at a time (broker/net/sendfile.py). librdkafka reads
    20 MB back with 8 MiB partition fetches, every record once and in order, as from Kafka."""
    from confluent_kafka import TopicPartition

    conf = {"bootstrap.servers": target.listeners["SSL"], "security.protocol": "SSL", "ssl.ca.location": str(target.certs.ca)}
    topic = new_topic("fetch-tls")
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    count = 20_000
    values = [hashlib.sha256(b"%d" % i).digest() * 32 for i in range(count)]  # 1 KiB each, all distinct
    p = Producer({**conf, "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "none"})
    for i, v in enumerate(values):
        while True:
            try:
                p.produce(topic, v, partition=i % 2)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False,
                  "fetch.max.bytes": 16 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024})
    got: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        deadline = time.monotonic() + 90
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            for m in c.consume(10_000, 0.5):
                if m.error() is None:
                    got[m.partition()].append(m.value())
    finally:
        c.close()
    assert got[0] == values[0::2] and got[1] == values[1::2]
