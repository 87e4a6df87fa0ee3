"""``kafkalite certs``: the files it writes, and that a broker and clients take them."""

from __future__ import annotations

import ssl
import stat
import subprocess
import sys

from broker.security.tls import subject_dn
from tests.broker_process import ROOT


def _der(pem_path) -> bytes:
    text = pem_path.read_text()
    first = text[: text.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    return ssl.PEM_cert_to_DER_cert(first[first.index("-----BEGIN CERTIFICATE-----"):] + "\n")


def test_certs_command(tmp_path):
    out = tmp_path / "certs"
    run = subprocess.run([sys.executable, "-m", "broker", "certs", "--out", str(out), "--hostname", "kafkalite", "--client", "alice"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    for name in ("ca-key.pem", "broker.pem", "broker-key.pem", "client-alice.pem", "client-alice-key.pem"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
    assert subject_dn(_der(out / "client-alice-cert.pem")) == "CN=alice,O=kafkalite"
    assert subject_dn(_der(out / "broker-cert.pem")) == "CN=kafkalite,O=kafkalite"
    assert "BEGIN PRIVATE KEY" in (out / "broker.pem").read_text()  # PKCS#8, as Kafka's PEM key store wants
    # a broker takes the key store, a client verifies it against the CA, by name and by address
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(out / "broker.pem"))
    client = ssl.create_default_context(cafile=str(out / "ca.pem"))
    client.load_cert_chain(str(out / "client-alice-cert.pem"), str(out / "client-alice-key.pem"))
    # a second run keeps the CA and adds a client
    ca = (out / "ca.pem").read_text()
    run = subprocess.run([sys.executable, "-m", "broker", "certs", "--out", str(out), "--client", "bob"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and (out / "ca.pem").read_text() == ca and (out / "client-bob.pem").exists()
