"""Two brokers with the same secured listeners: kafkalite, and Apache Kafka (4.4 by default) as the reference.

Both get the same Kafka properties (``broker_properties``), so every test in
this directory that takes ``target`` runs against each and asserts the same
thing; the ``kafka`` case carries the ``reference`` marker and is skipped
where Java 17+ or Kafka's jars are missing. Listeners:

- PLAINTEXT; SSL (``ssl.client.auth=requested``); MTLS, an SSL listener that
  requires client certificates;
- SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
  OAUTHBEARER (unsecured JWS tokens);
- REAUTH, SASL_PLAINTEXT with PLAIN and OAUTHBEARER and a session lifetime of
  ``REAUTH_MS`` (KIP-368).

User ``alice`` has the same password for PLAIN (the JAAS line) and both SCRAM
mechanisms (made through AlterUserScramCredentials on the PLAINTEXT listener,
on both brokers alike). Certificates come from ``kafkalite certs``'s code:
one CA for both brokers, a client certificate for alice, and a second,
untrusted CA with its own "alice".
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.security.certs import Certs, generate
from broker.testing import BrokerThread, Secured
from tests import reference_kafka
from tests.wait import wait_until

PASSWORD = "alice-secret-9f3"
REAUTH_MS = 3000
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL", "REAUTH": "SASL_PLAINTEXT"}
PLAIN_JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
OAUTH_JAAS = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";'


def pytest_configure(config):
    config.addinivalue_line("markers", "reference: the same test run against a real Apache Kafka broker, 4.4 by default (tests/reference_kafka.py)")


def broker_properties(certs: Certs) -> dict[str, str]:
    """The security settings both brokers get, by Kafka's names."""
    props = {
        "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in LISTENERS.items()),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
    }
    for listener in ("sasl_plaintext", "sasl_ssl", "reauth"):
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = PLAIN_JAAS
        props[f"listener.name.{listener}.oauthbearer.sasl.jaas.config"] = OAUTH_JAAS
        if listener != "reauth":
            props[f"listener.name.{listener}.scram-sha-256.sasl.jaas.config"] = SCRAM_JAAS
            props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = SCRAM_JAAS
    props["listener.name.reauth.plain.connections.max.reauth.ms"] = str(REAUTH_MS)
    props["listener.name.reauth.oauthbearer.connections.max.reauth.ms"] = str(REAUTH_MS)
    return props


@dataclass
class Target:
    """One broker under test: its listeners (name -> host:port) and how to reach them."""

    kind: str
    listeners: dict[str, str]
    certs: Certs
    handle: object = None
    users: dict[str, str] = field(default_factory=lambda: {"alice": PASSWORD})

    def secured(self, listener: str, *, client_auth: str = "none", users: dict[str, str] | None = None) -> Secured:
        protocol = LISTENERS[listener]
        return Secured(protocol, MECHANISMS if protocol.startswith("SASL") else (), users or self.users, {}, self.certs, client_auth)

    @property
    def bootstrap(self) -> str:
        return self.listeners["PLAINTEXT"]


def add_scram_users(bootstrap: str, users: dict[str, str], mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"), iterations: int = 4096) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": bootstrap})
    ups = [
        UserScramCredentialUpsertion(u, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), iterations), p.encode())
        for u, p in users.items() for m in mechanisms
    ]
    # one alteration per user and request (Kafka refuses two for one user)
    for up in ups:
        for fut in admin.alter_user_scram_credentials([up]).values():
            fut.result(30)
    for u in users:
        wait_scram(bootstrap, u, sorted([{"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}[m], iterations] for m in mechanisms))


def wait_scram(bootstrap: str, user: str, expected: list[list[int]], timeout: float = 30.0) -> None:
    """Until DescribeUserScramCredentials shows ``user`` with ``expected`` ([[mechanism, iterations]...],
    [] for none). Kafka's broker learns of an alteration from its controller a moment after the answer."""
    from .raw import Raw

    def shown() -> bool:
        (res,) = c.request(50, 0, {"users": [{"name": user}]}).results
        return sorted([i.mechanism, i.iterations] for i in res.credential_infos) == expected

    with Raw(bootstrap) as c:
        wait_until(shown, timeout=timeout, what=f"SCRAM credentials of {user} shown as {expected}")


@pytest.fixture(scope="session")
def certs(tmp_path_factory) -> Certs:
    return generate(tmp_path_factory.mktemp("certs"), clients=["alice"])


@pytest.fixture(scope="session")
def rogue_certs(tmp_path_factory) -> Certs:
    """Another CA, which neither broker trusts, with a client certificate for alice."""
    return generate(tmp_path_factory.mktemp("rogue-certs"), clients=["alice"], ca_name="rogue CA")


@pytest.fixture(scope="module")
def kafkalite_target(certs, tmp_path_factory):
    settings = {"listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS), **broker_properties(certs), "metrics_port": 0, "metrics_host": "127.0.0.1"}
    b = BrokerThread(tmp_path_factory.mktemp("kafkalite"), settings=settings).start()
    add_scram_users(b.listeners["PLAINTEXT"], {"alice": PASSWORD})
    yield Target("kafkalite", dict(b.listeners), certs, b)
    b.close()


def _free_port() -> int:
    from tests.ports import free_port

    return free_port()


@pytest.fixture(scope="session")
def kafka_target(certs, tmp_path_factory):
    ok, reason = reference_kafka.available()
    if not ok:
        pytest.skip(reason)
    k = reference_kafka.ReferenceKafka(tmp_path_factory.mktemp("reference-kafka"))
    k.port, k.controller_port = _free_port(), _free_port()
    ports = {name: (k.port if name == "PLAINTEXT" else _free_port()) for name in LISTENERS}
    k.config.update({
        "listeners": ",".join([*(f"{n}://127.0.0.1:{p}" for n, p in ports.items()), f"CONTROLLER://127.0.0.1:{k.controller_port}"]),
        "advertised.listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        **broker_properties(certs),
    })
    k.config["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
    k.start()
    add_scram_users(k.bootstrap, {"alice": PASSWORD})
    yield Target("kafka", {n: f"127.0.0.1:{p}" for n, p in ports.items()}, certs, k)
    k.stop()


@pytest.fixture(params=["kafkalite", pytest.param("kafka", marks=pytest.mark.reference)])
def target(request) -> Target:
    return request.getfixturevalue(f"{request.param}_target")


# -- Kafka's Java client (tests/security/SecureClients.java, compiled once) --------------------------

JAVA_SRC = Path(__file__).with_name("SecureClients.java")


@pytest.fixture(scope="session")
def java_clients(tmp_path_factory):
    """A command prefix running SecureClients against the reference broker's kafka-clients jar (4.4 by default)."""
    import shutil

    ok, reason = reference_kafka.available()
    if not ok:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("secure-clients")
    cp = f"{reference_kafka.LIBS}/*"
    proc = subprocess.run([shutil.which("javac") or "javac", "-d", str(out), "-cp", cp, str(JAVA_SRC)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"javac failed:\n{proc.stdout}{proc.stderr}")
    return [shutil.which("java") or "java", "-Xmx256m", "-cp", f"{out}:{cp}", "SecureClients"]
