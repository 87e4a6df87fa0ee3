"""Re-authentication by real clients (KIP-368), and what the broker logs and counts about authentication."""

from __future__ import annotations

import re
import time

import structlog
from confluent_kafka import Producer

from protocol.errors import ErrorCode

from .clients import java, java_props_file, new_topic
from .conftest import PASSWORD, REAUTH_MS
from .raw import Raw, ScramClient, plain_token


def _metric(text: str, name: str, **labels) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
    return total


def _reauths(target) -> float:
    if target.kind != "kafkalite":
        return 0.0
    return _metric(target.handle.metrics_text(), "kafkalite_sasl_authentications_total", listener="REAUTH", kind="reauthentication")


def test_librdkafka_reauthenticates(target):
    """A producer that lives through several session lifetimes keeps working; on kafkalite it
    demonstrably re-authenticated on its connections rather than being cut off."""
    sec = target.secured("REAUTH")
    before = _reauths(target)
    errors = []
    p = Producer({"bootstrap.servers": target.listeners["REAUTH"], **sec.librdkafka(mechanism="PLAIN"), "error_cb": errors.append, "linger.ms": 0})
    topic = new_topic("reauth")
    delivered = []
    deadline = time.monotonic() + 2.5 * REAUTH_MS / 1000
    while time.monotonic() < deadline or (target.kind == "kafkalite" and _reauths(target) < before + 1 and time.monotonic() < deadline + 30):
        p.produce(topic, b"x", partition=0, on_delivery=lambda err, msg: delivered.append(err))
        p.flush(30)
    assert delivered and all(err is None for err in delivered), (delivered[-3:], errors)
    if target.kind == "kafkalite":
        assert _reauths(target) >= before + 1


def test_java_client_reauthenticates(target, java_clients, tmp_path):
    sec = target.secured("REAUTH")
    before = _reauths(target)
    props = java_props_file(target.listeners["REAUTH"], sec.java(mechanism="PLAIN"), str(tmp_path))
    count = int(2.5 * REAUTH_MS / 250)
    (result,) = java(java_clients, "slow", new_topic("reauth-java"), count, 250, props)
    assert result == {"produced": count}
    if target.kind == "kafkalite":
        assert _reauths(target) >= before + 1


def test_failures_are_logged_and_counted_without_secrets(kafkalite_target):
    b = kafkalite_target.handle
    listener = kafkalite_target.listeners["SASL_PLAINTEXT"]
    secret = "Wr0ng-S3cret-Do-Not-Log"
    before = b.metrics_text()
    with structlog.testing.capture_logs() as logs:
        with Raw(listener) as c:
            c.handshake("PLAIN")
            assert c.authenticate(plain_token("alice", secret)).error_code == ErrorCode.sasl_authentication_failed
        with Raw(listener) as c:
            c.handshake("SCRAM-SHA-512")
            client = ScramClient("SCRAM-SHA-512", "alice", PASSWORD)
            first = c.authenticate(client.first())
            assert c.authenticate(client.final(first.auth_bytes, password=secret)).error_code == ErrorCode.sasl_authentication_failed
        with Raw(listener) as c:
            c.send(3, 12, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
            assert c.closed()
        with Raw(listener) as c:
            c.handshake("PLAIN")
            assert c.authenticate(plain_token("alice", PASSWORD)).error_code == ErrorCode.none
        b.wait_for(lambda b: _metric(b.metrics_text(), "kafkalite_sasl_authentications_total", listener="SASL_PLAINTEXT", mechanism="PLAIN")
                   > _metric(before, "kafkalite_sasl_authentications_total", listener="SASL_PLAINTEXT", mechanism="PLAIN"))
    after = b.metrics_text()

    def delta(**labels):
        return _metric(after, "kafkalite_sasl_authentication_failures_total", **labels) - _metric(before, "kafkalite_sasl_authentication_failures_total", **labels)

    assert delta(listener="SASL_PLAINTEXT", mechanism="PLAIN", reason="bad_credentials") == 1
    assert delta(listener="SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", reason="bad_credentials") == 1
    assert delta(listener="SASL_PLAINTEXT", mechanism="none", reason="illegal_state") == 1
    failures = [e for e in logs if e["event"] == "authentication failed"]
    assert len(failures) == 3 and {e["log_level"] for e in failures} == {"warning"}
    assert {e["reason"] for e in failures} == {"bad_credentials", "illegal_state"}
    everything = repr(logs) + after
    assert secret not in everything and PASSWORD not in everything
    assert not re.search(r"p=[A-Za-z0-9+/]{20,}", everything)  # no SCRAM proof either
