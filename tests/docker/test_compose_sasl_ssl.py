"""The SASL_SSL example of docs/security.md, as docker-compose.yml holds it (commented out), with
a real engine.

The blocks between ``# >>> SASL_SSL`` and ``# <<< SASL_SSL`` are uncommented into a copy of the
compose file in a temporary directory (its build contexts pointed back at the repository); the
certificates and ``kafkalite-security.toml`` are made there by the shell and TOML blocks of
docs/security.md's "Docker Compose" section, as written. ``docker compose config`` must accept
it; then the broker service is started and confluent-kafka produces and consumes through the
EXTERNAL listener over SASL_SSL, as the docs tell a client on the host to.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid

import pytest

from .harness import BASE_IMAGE, ROOT, free_port

DOC = ROOT / "docs" / "security.md"
USER, PASSWORD = "alice", "alice-secret"  # the docs' TOML block


def uncommented(text: str) -> str:
    """docker-compose.yml with its SASL_SSL blocks uncommented (one ``# `` off each line inside)."""
    out, inside, blocks = [], False, 0
    for line in text.splitlines():
        marker = line.strip()
        if marker.startswith("# >>> SASL_SSL"):
            inside, blocks = True, blocks + 1
            continue
        if marker.startswith("# <<< SASL_SSL"):
            inside = False
            continue
        if inside and marker.startswith("# "):
            indent = line[: len(line) - len(line.lstrip())]
            body = marker[2:]
            if not (body.startswith("KAFKALITE_") or body.startswith("- ")):
                continue  # the block's own explanation
            line = indent + body
        out.append(line)
    assert blocks == 2 and not inside, "docker-compose.yml should hold two SASL_SSL blocks"
    return "\n".join(out) + "\n"


def doc_blocks(kind: str) -> list[str]:
    section = DOC.read_text().split("## Docker Compose", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{kind}\n(.*?)```", section, re.S)


@pytest.fixture
def example(docker, kafkalite_image, tmp_path):
    # the docs' shell block, with this checkout's CLI for `kafkalite`
    (shell,) = doc_blocks("sh")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for line in shell.splitlines():
        command = line.split("#", 1)[0].strip()
        if command:
            command = re.sub(r"^kafkalite ", f"{sys.executable} -m broker ", command)
            subprocess.run(command, shell=True, cwd=tmp_path, env=env, check=True, timeout=120)
    (toml,) = doc_blocks("toml")
    (tmp_path / "kafkalite-security.toml").write_text(toml)
    text = uncommented((ROOT / "docker-compose.yml").read_text())
    text = text.replace("context: ./examples", f"context: {ROOT / 'examples'}").replace("context: .\n", f"context: {ROOT}\n")
    (tmp_path / "docker-compose.yml").write_text(text)
    port = free_port()
    project = f"kl-sasl-{uuid.uuid4().hex[:8]}"

    def compose(*args: str, **kw):
        return docker.run("compose", "-p", project, "-f", str(tmp_path / "docker-compose.yml"), *args,
                          env={"PYTHON_IMAGE": BASE_IMAGE, "KAFKALITE_EXTERNAL_PORT": str(port)}, **kw)

    try:
        yield compose, port, tmp_path
    finally:
        compose("down", "--volumes", "--remove-orphans", "--timeout", "20", check=False, timeout=120)


def test_the_sasl_ssl_example_uncommented_serves_sasl_ssl(example):
    from confluent_kafka import Consumer, KafkaError, Producer

    compose, port, directory = example
    config = json.loads(compose("config", "--format", "json").stdout)
    svc = config["services"]["kafkalite"]
    assert svc["environment"]["KAFKALITE_LISTENER_SECURITY_PROTOCOL_MAP"] == "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL"
    assert {v["target"] for v in svc["volumes"]} == {"/var/lib/kafkalite", "/etc/kafkalite/certs", "/etc/kafkalite/security.toml"}
    compose("up", "--detach", "--wait", "--wait-timeout", "120", "kafkalite", timeout=1800)
    conf = {"bootstrap.servers": f"localhost:{port}", "security.protocol": "SASL_SSL", "ssl.ca.location": str(directory / "certs" / "ca.pem"),
            "sasl.username": USER, "sasl.password": PASSWORD}
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        topic = f"compose-{mechanism.lower()}"
        p = Producer({**conf, "sasl.mechanism": mechanism})
        p.produce(topic, mechanism.encode(), partition=0)
        assert p.flush(30) == 0
        c = Consumer({**conf, "sasl.mechanism": mechanism, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
        got = None
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + 30
            while got is None and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got = m.value()
        finally:
            c.close()
        assert got == mechanism.encode()
    # a wrong password is refused
    errors: list = []
    p = Producer({**conf, "sasl.mechanism": "PLAIN", "sasl.password": "wrong", "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
