"""Real clients over SSL, SASL_PLAINTEXT and SASL_SSL, each mechanism, against kafkalite and Apache Kafka 4.1.

confluent-kafka (librdkafka), kafka-python and aiokafka each produce five
records and read them back over every listener and mechanism; Kafka's Java
client does the whole matrix in one JVM per broker; kcat a few rows. The same assertions hold
for both brokers (``target`` is parametrised, conftest.py).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from .clients import COUNT, PYTHON_CLIENTS, client_settings, java, java_props_file, new_topic

ROWS = [
    ("SSL", None),
    ("MTLS", None),
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_PLAINTEXT", "OAUTHBEARER"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-256"),
    ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_SSL", "OAUTHBEARER"),
]


@pytest.mark.parametrize("client", list(PYTHON_CLIENTS))
@pytest.mark.parametrize(("listener", "mechanism"), ROWS, ids=[f"{li}-{m or 'cert'}" for li, m in ROWS])
def test_python_client_roundtrip(target, client, listener, mechanism):
    sec = target.secured(listener, client_auth="required" if listener == "MTLS" else "none")
    conf = client_settings(sec, client, mechanism)
    topic = new_topic(f"{client}-{listener}")
    assert PYTHON_CLIENTS[client](target.listeners[listener], conf, topic) == COUNT


def test_java_client_matrix(target, java_clients, tmp_path):
    files = []
    for listener, mechanism in ROWS:
        sec = target.secured(listener, client_auth="required" if listener == "MTLS" else "none")
        files.append(java_props_file(target.listeners[listener], sec.java(mechanism=mechanism), str(tmp_path)))
    results = java(java_clients, "roundtrip", new_topic("java"), COUNT, *files)
    assert [r.get("consumed", r.get("error")) for r in results] == [COUNT] * len(ROWS), list(zip(ROWS, results, strict=False))


# no SCRAM row: the kcat of Debian 12 links librdkafka 2.0.2, whose SCRAM client repeats its nonce in
# the final message (confluent-kafka's newer librdkafka does not), which Kafka 4.1 refuses as kafkalite does
@pytest.mark.parametrize(("listener", "mechanism"), [("SASL_SSL", "PLAIN"), ("SASL_PLAINTEXT", "PLAIN"), ("MTLS", None)])
def test_kcat(target, listener, mechanism):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    sec = target.secured(listener, client_auth="required" if listener == "MTLS" else "none")
    conf = sec.librdkafka(mechanism=mechanism)
    args = [kcat, "-b", target.listeners[listener]]
    for k, v in conf.items():
        args += ["-X", f"{k}={v}"]
    topic = new_topic("kcat")
    lines = [f"line-{i}" for i in range(COUNT)]
    subprocess.run([*args, "-P", "-t", topic, "-p", "0"], input="\n".join(lines) + "\n", text=True, check=True, timeout=60, capture_output=True)
    out = subprocess.run([*args, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"], text=True, check=True, timeout=60, capture_output=True)
    assert out.stdout.split() == lines
