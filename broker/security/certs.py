"""``kafkalite certs``: a development CA, a broker certificate and client certificates, in PEM.

    kafkalite certs --out certs --hostname kafkalite --client alice

writes into ``certs/``:

- ``ca.pem``, ``ca-key.pem``: the CA (kept and reused by later runs on the
  same directory, so more certificates can be added);
- ``broker.pem``: the broker's private key (PKCS#8, unencrypted) and
  certificate chain in one file, what ``ssl.keystore.type=PEM`` with
  ``ssl.keystore.location`` takes (Kafka's too), and the same as
  ``broker-key.pem`` and ``broker-cert.pem``; its subject alternative names
  are ``localhost``, 127.0.0.1, ::1 and every ``--hostname``;
- per ``--client NAME``: ``client-NAME.pem`` (key and chain, for Java's PEM
  key store) and ``client-NAME-key.pem``/``client-NAME-cert.pem`` (librdkafka's
  ``ssl.key.location``/``ssl.certificate.location``, Python's ``ssl``); the
  subject is ``CN=NAME,O=kafkalite``, so the principal is
  ``User:CN=NAME,O=kafkalite``.

Keys are ECDSA P-256 (``--key-type rsa`` for RSA 2048). For development and
tests only: the CA key sits next to the certificates. Needs the
``cryptography`` package (``pip install 'kafkalite[certs]'``); the broker
itself serves TLS with Python's ``ssl`` and does not.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

ORGANIZATION = "kafkalite"


def _crypto():
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        raise SystemExit("kafkalite certs needs the cryptography package: pip install 'kafkalite[certs]'") from None
    return x509, hashes, serialization, ec, rsa, ExtendedKeyUsageOID, NameOID


@dataclass
class Certs:
    """Where ``generate`` wrote the files."""

    dir: Path
    ca: Path
    ca_key: Path
    broker: Path  # key + chain (Kafka's PEM key store file)
    broker_key: Path
    broker_cert: Path
    clients: dict[str, tuple[Path, Path, Path]] = field(default_factory=dict)  # name -> (key+chain, key, cert chain)

    def read(self, path: Path) -> str:
        return Path(path).read_text()


def _write(path: Path, data: bytes, secret: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def generate(out: str | Path, *, hostnames=(), clients=(), days: int = 825, key_type: str = "ec", ca_name: str = "kafkalite development CA") -> Certs:
    """Make (or reuse) the CA in ``out`` and issue the broker's and the clients' certificates."""
    x509, hashes, serialization, ec, rsa, eku, name_oid = _crypto()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def new_key():
        return rsa.generate_private_key(65537, 2048) if key_type == "rsa" else ec.generate_private_key(ec.SECP256R1())

    def key_pem(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    def cert_pem(cert) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_path, ca_key_path = out / "ca.pem", out / "ca-key.pem"
    if ca_path.exists() and ca_key_path.exists():
        ca_cert = x509.load_pem_x509_certificate(ca_path.read_bytes())
        ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), None)
    else:
        ca_key = new_key()
        subject = x509.Name([x509.NameAttribute(name_oid.ORGANIZATION_NAME, ORGANIZATION), x509.NameAttribute(name_oid.COMMON_NAME, ca_name)])
        ca_cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        _write(ca_key_path, key_pem(ca_key), secret=True)
        _write(ca_path, cert_pem(ca_cert), secret=False)

    def issue(common_name: str, sans: list, usage) -> tuple[bytes, bytes]:
        key = new_key()
        subject = x509.Name([x509.NameAttribute(name_oid.ORGANIZATION_NAME, ORGANIZATION), x509.NameAttribute(name_oid.COMMON_NAME, common_name)])
        builder = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return key_pem(key), cert_pem(cert) + cert_pem(ca_cert)

    names = list(dict.fromkeys(["localhost", *hostnames]))
    sans = []
    for n in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            sans.append(x509.DNSName(n))
    for ip in ("127.0.0.1", "::1"):
        if ip not in names:
            sans.append(x509.IPAddress(ipaddress.ip_address(ip)))
    key, chain = issue(names[0] if names[0] != "localhost" or len(names) == 1 else names[1], sans, eku.SERVER_AUTH)
    certs = Certs(out, ca_path, ca_key_path, out / "broker.pem", out / "broker-key.pem", out / "broker-cert.pem")
    _write(certs.broker_key, key, secret=True)
    _write(certs.broker_cert, chain, secret=False)
    _write(certs.broker, key + chain, secret=True)
    for client in clients:
        key, chain = issue(client, [], eku.CLIENT_AUTH)
        paths = (out / f"client-{client}.pem", out / f"client-{client}-key.pem", out / f"client-{client}-cert.pem")
        _write(paths[0], key + chain, secret=True)
        _write(paths[1], key, secret=True)
        _write(paths[2], chain, secret=False)
        certs.clients[client] = paths
    return certs


def register(sub) -> None:
    p = sub.add_parser("certs", help="make a development CA and broker/client certificates (PEM) for TLS listeners")
    p.add_argument("--out", type=Path, default=Path("certs"), help="directory to write to (default ./certs); an existing CA there is reused")
    p.add_argument("--hostname", action="append", default=[], help="a name or address clients use to reach the broker (repeatable; localhost, 127.0.0.1 and ::1 are always in)")
    p.add_argument("--client", action="append", default=[], help="also make a client certificate with CN=NAME (repeatable)")
    p.add_argument("--days", type=int, default=825, help="validity of the broker and client certificates (default 825)")
    p.add_argument("--key-type", choices=["ec", "rsa"], default="ec", help="ECDSA P-256 (default) or RSA 2048")


def run(args) -> int:
    certs = generate(args.out, hostnames=args.hostname, clients=args.client, days=args.days, key_type=args.key_type)
    print(f"CA:       {certs.ca}")
    print(f"broker:   {certs.broker}  (key and chain; also {certs.broker_key.name}, {certs.broker_cert.name})")
    for name, (both, key, cert) in certs.clients.items():
        print(f"client {name}: {both}  (also {key.name}, {cert.name})")
    print("\nserve TLS with, for example:")
    print(f"  kafkalite serve --listener SSL://127.0.0.1:9093 --set ssl.keystore.location={certs.broker} --set ssl.truststore.location={certs.ca}")
    return 0
