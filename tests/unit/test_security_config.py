"""Security settings: Kafka's names, listener prefixes, JAAS lines, secrets kept out of sight."""

from __future__ import annotations

import pytest

from broker.config import ConfigError, load_config
from broker.listeners import build_specs
from broker.security import jaas
from broker.security.settings import handshake_order

PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" user_alice="alice-pw" user_bob="b\\"q";'


def _load(**settings):
    return load_config(environ={}, overrides={"data_dir": "/tmp/unused-kafkalite", **settings})


def test_jaas_parse():
    (m,) = jaas.parse(PLAIN)
    assert m.name == "org.apache.kafka.common.security.plain.PlainLoginModule" and m.flag == "required"
    assert m.options == {"username": "admin", "password": "admin-pw", "user_alice": "alice-pw", "user_bob": 'b"q'}
    assert [x.name for x in jaas.parse("a.B required; c.D optional x=1;")] == ["a.B", "c.D"]
    for bad in ["", "a.B", "a.B required", 'a.B required x="1', "a.B maybe;", "a.B required x=;", "a.B required x=1 x=2;"]:
        with pytest.raises(jaas.JaasError) as e:
            jaas.parse(bad)
        assert "1" not in str(e.value).replace("a.B", "")  # no option value in a message


def test_protocol_map_and_default_names():
    specs = build_specs("SSL://h:1,INTERNAL://h:2,SASL_SSL://h:3")
    assert [(s.name, s.protocol) for s in specs] == [("SSL", "SSL"), ("INTERNAL", "PLAINTEXT"), ("SASL_SSL", "SASL_SSL")]
    specs = build_specs("A://h:1,B://h:2", protocol_map="A:SASL_PLAINTEXT,b:ssl")
    assert [(s.name, s.protocol, s.tls, s.sasl) for s in specs] == [("A", "SASL_PLAINTEXT", False, True), ("B", "SSL", True, False)]


def test_listener_prefixed_settings_and_sasl(tmp_path):
    cfg = _load(**{
        "listeners": "A://127.0.0.1:0,B://127.0.0.1:0",
        "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.a.plain.sasl.jaas.config": PLAIN,
        "listener.name.b.sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.B.scram-sha-512.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required user_carol="c-pw";',
        "connections.max.reauth.ms": 5000,
        "listener.name.b.oauthbearer.connections.max.reauth.ms": 100,
    })
    a, b = cfg.security.listeners["A"], cfg.security.listeners["B"]
    assert a.mechanisms == ("PLAIN",) and set(a.plain_users) == {"alice", "bob"}
    assert b.mechanisms == ("SCRAM-SHA-512", "OAUTHBEARER")
    assert b.reauth_ms == {"SCRAM-SHA-512": 5000, "OAUTHBEARER": 100}
    cred = cfg.security.scram_users["carol"]["SCRAM-SHA-512"]
    assert cred.iterations == 4096 and len(cred.stored_key) == 64
    # nothing secret in the configuration's repr
    text = repr(cfg) + repr(cfg.security)
    assert "alice-pw" not in text and "c-pw" not in text and "admin-pw" not in text


def test_toml_tables(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text(
        'listeners = ["SASL_PLAINTEXT://127.0.0.1:0"]\n'
        'sasl.enabled.mechanisms = "PLAIN"\n'
        "[listener.name.sasl_plaintext.plain.sasl]\n"
        "jaas.config = '''org.apache.kafka.common.security.plain.PlainLoginModule required user_x=\"y\";'''\n"
    )
    cfg = load_config(config_file=path, environ={})
    assert set(cfg.security.listeners["SASL_PLAINTEXT"].plain_users) == {"x"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}, "a TLS listener needs ssl.keystore.location"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI is not served"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}, "PLAIN needs its users in listener.name.sasl_plaintext.plain.sasl.jaas.config"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required user_a="s3cr3t";'}, "PLAIN takes org.apache.kafka.common.security.plain.PlainLoginModule"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="s3cr3t"'}, "expected ';' at the end"),
        ({"listener.name.other.ssl.client.auth": "required"}, "listener OTHER is not one of the listeners"),
        ({"listener.name.plaintext.log.retention.ms": 5}, "after listener.name.<listener>. comes one of"),
        ({"ssl.client.auth": "maybe"}, "expected one of required, requested, none"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/nonexistent/broker.pem"}, "no such file: /nonexistent/broker.pem"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "JKS", "ssl.keystore.location": "/x.jks"}, "JKS stores are not read"),
    ],
)
def test_errors(settings, message):
    with pytest.raises(ConfigError) as e:
        _load(**settings)
    assert message in str(e.value)
    assert "s3cr3t" not in str(e.value)


def test_secret_values_are_not_echoed():
    with pytest.raises(ConfigError) as e:
        _load(ssl_keystore_key=12345)
    assert "12345" not in str(e.value) and "secret" in str(e.value)


def test_handshake_order_is_javas_hash_set_order():
    # what Kafka 4.1 answers for these (checked against it in tests/security/test_sasl_protocol.py)
    assert handshake_order(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]) == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER"]
    # names that share a bucket keep the configuration's order
    assert handshake_order(["OAUTHBEARER", "SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]) == ["SCRAM-SHA-512", "PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"]
