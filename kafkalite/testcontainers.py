"""kafkalite in a container, for tests written with the ``testcontainers`` package.

A drop-in for ``testcontainers.kafka.KafkaContainer`` (``testcontainers.community.kafka``)::

    from kafkalite.testcontainers import KafkaliteContainer

    with KafkaliteContainer("kafkalite:latest") as kafka:
        producer = Producer({"bootstrap.servers": kafka.get_bootstrap_server()})

``start()`` returns once the broker answers an ApiVersions request through the published
port, the address that ``get_bootstrap_server()`` gives; it does not read the logs. If the
container exits first, or the broker does not answer within ``timeout`` seconds, it raises
with the container's last log lines.

Listeners: ``PLAINTEXT`` on ``port`` (9093 by default, published on an ephemeral host port
and advertised as that host address and port, for clients on the host) and ``BROKER`` on
9092 (advertised as the container's first network alias or its IP address, for containers
on the same Docker network; the image's health check uses it). The host port is only
known once the container exists, so the container's command waits for the advertised
addresses, which ``start()`` copies in before waiting for the broker.

A secured broker, with credentials generated on the host (``broker.security.certs``, so
the host needs the ``cryptography`` package, ``pip install 'kafkalite[certs]'``; the
image needs nothing more)::

    with KafkaliteContainer("kafkalite:latest").with_sasl_ssl() as kafka:
        producer = Producer(kafka.get_client_config())

``with_sasl_ssl()`` turns the published listener into ``SASL_SSL`` (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512 and OAUTHBEARER's unsecured tokens unless ``mechanisms`` says otherwise;
one user ``alice`` with a random password unless ``users`` says otherwise). ``start()``
makes a development CA and a broker certificate for localhost, 127.0.0.1 and the
container's host address, and copies the broker's key and certificate and a TOML file with
the JAAS lines into the container before the broker starts. ``get_client_config()`` gives
confluent-kafka's settings (``bootstrap.servers``, ``security.protocol``, ``sasl.*``,
``ssl.ca.location``), ``ca_file`` the CA's PEM file on the host, and ``security`` the
``broker.testing.Secured`` with the users and the settings for kafka-python, aiokafka and
the Java client. The ``BROKER`` listener, for containers on the same network and the
health check, stays PLAINTEXT. For tests and development only: the CA key and the
passwords sit in a temporary directory on the host, removed by ``stop()``.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import ssl
import struct
import tarfile
import tempfile
import time
from pathlib import Path

from testcontainers.core.container import DockerContainer

DEFAULT_IMAGE = "kafkalite:latest"
BROKER_PORT = 9092  # the image's listener, which its health check (KAFKALITE_BOOTSTRAP) uses
_SETTINGS = "/tmp/kafkalite-advertised"
_SECURITY_DIR = "/tmp/kafkalite-security"  # the broker's key and certificate, and security.toml
_API_VERSIONS = 18


class KafkaliteContainer(DockerContainer):
    """The kafkalite image as a testcontainers container; see the module's docstring."""

    def __init__(self, image: str = DEFAULT_IMAGE, port: int = 9093, **kwargs) -> None:
        if port == BROKER_PORT:
            raise ValueError(f"port {BROKER_PORT} is the container network's listener; choose another")
        super().__init__(image, **kwargs)
        self.port = port
        self.with_exposed_ports(port)
        self.with_env("KAFKALITE_LISTENERS", f"BROKER://0.0.0.0:{BROKER_PORT},PLAINTEXT://0.0.0.0:{port}")
        self.with_env("KAFKALITE_BOOTSTRAP", f"127.0.0.1:{BROKER_PORT}")
        self.with_env("KAFKALITE_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
        self.with_env("KAFKALITE_OFFSETS_TOPIC_NUM_PARTITIONS", "1")
        self.listener = "PLAINTEXT"  # the published listener's name, its protocol too
        self.security = None  # broker.testing.Secured once start() made the credentials of with_sasl_ssl()
        self._secured: dict | None = None
        self._security_dir: Path | None = None

    def with_sasl_ssl(self, mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"), users: dict[str, str] | None = None) -> KafkaliteContainer:
        """Serve the published port as SASL_SSL with generated credentials; see the module's docstring."""
        self.listener = "SASL_SSL"
        self._secured = {"mechanisms": tuple(mechanisms), "users": dict(users) if users else None}
        self.with_env("KAFKALITE_LISTENERS", f"BROKER://0.0.0.0:{BROKER_PORT},SASL_SSL://0.0.0.0:{self.port}")
        self.with_env("KAFKALITE_CONFIG", f"{_SECURITY_DIR}/security.toml")
        return self

    def get_client_config(self, user: str | None = None, mechanism: str | None = None) -> dict:
        """confluent-kafka (librdkafka) settings for clients on the host, credentials included."""
        conf: dict = {"bootstrap.servers": self.get_bootstrap_server()}
        if self.security is not None:
            conf.update(self.security.librdkafka(user, mechanism))
        return conf

    @property
    def ca_file(self) -> Path | None:
        """The CA certificate (PEM) that signed the broker's, on the host; None without with_sasl_ssl()."""
        return None if self.security is None else Path(self.security.certs.ca)

    def with_kraft(self) -> KafkaliteContainer:
        """Accepted for KafkaContainer compatibility: kafkalite has no ZooKeeper mode."""
        return self

    def get_bootstrap_server(self) -> str:
        return f"{self.get_container_host_ip()}:{self.get_exposed_port(self.port)}"

    def start(self, timeout: float = 30) -> KafkaliteContainer:
        wait = f"while [ ! -e {_SETTINGS}.done ]; do sleep 0.05; done"
        serve = f'KAFKALITE_ADVERTISED_LISTENERS="$(cat {_SETTINGS})" exec kafkalite serve'
        self._kwargs = {**self._kwargs, "entrypoint": ["sh", "-c"]}
        self.with_command([f"{wait}; {serve}"])
        super().start()
        deadline = time.monotonic() + timeout
        host, port = self.get_container_host_ip(), int(self.get_exposed_port(self.port))
        tls = None
        if self._secured is not None:
            tls = self._install_credentials(host)
        advertised = f"{self.listener}://{host}:{port},BROKER://{self._network_address()}:{BROKER_PORT}"
        self._copy_in(_SETTINGS, advertised.encode())
        self._copy_in(f"{_SETTINGS}.done", b"")  # after the settings are whole
        self._wait_until_ready(host, port, deadline, timeout, tls)
        return self

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        try:
            super().stop(force, delete_volume)
        finally:
            if self._security_dir is not None:
                shutil.rmtree(self._security_dir, ignore_errors=True)
                self._security_dir = None

    # ------------------------------------------------------------------ internals

    def _network_address(self) -> str:
        if self._network_aliases:
            return self._network_aliases[0]
        container = self.get_wrapped_container()
        container.reload()
        networks = container.attrs.get("NetworkSettings", {}).get("Networks", {}) or {}
        for network in networks.values():
            if network.get("IPAddress"):
                return network["IPAddress"]
        return "localhost"

    def _install_credentials(self, host: str) -> ssl.SSLContext:
        """Make the CA, certificate and users on the host, copy the broker's part in; a TLS context for the readiness check."""
        from broker.security.testkit import secured

        self._security_dir = Path(tempfile.mkdtemp(prefix="kafkalite-tc-"))
        hostnames = [h for h in (host, *(self._network_aliases or ())) if h not in ("localhost", "127.0.0.1", "::1")]
        self.security = secured("SASL_SSL", tmp_dir=self._security_dir, hostnames=hostnames, **self._secured)
        settings = {k: v for k, v in self.security.settings.items() if k != "listeners"}
        settings["ssl.keystore.location"] = f"{_SECURITY_DIR}/broker.pem"
        settings["ssl.truststore.location"] = f"{_SECURITY_DIR}/ca.pem"
        # quoted keys: the setting names hold dots; JSON strings are TOML basic strings
        toml = "".join(f"{json.dumps(k)} = {json.dumps(str(v), ensure_ascii=False)}\n" for k, v in settings.items())
        certs = self.security.certs
        self._copy_in(_SECURITY_DIR, None, {
            "broker.pem": certs.broker.read_bytes(),
            "ca.pem": certs.ca.read_bytes(),
            "security.toml": toml.encode(),
        })
        return ssl.create_default_context(cafile=str(certs.ca))

    def _copy_in(self, path: str, content: bytes | None, files: dict[str, bytes] | None = None) -> None:
        """Write ``path`` (a file of ``content``, or a directory of ``files``) into the container, readable by its user."""
        directory, _, name = path.rpartition("/")
        buffer = io.BytesIO()
        now = int(time.time())
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            if files is None:
                entries = {name: content or b""}
            else:
                info = tarfile.TarInfo(name)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
                tar.addfile(info)
                entries = {f"{name}/{n}": data for n, data in files.items()}
            for entry, data in entries.items():
                info = tarfile.TarInfo(entry)
                info.size, info.mode, info.mtime = len(data), 0o644, now
                tar.addfile(info, io.BytesIO(data))
        self.get_wrapped_container().put_archive(directory or "/", buffer.getvalue())

    def _wait_until_ready(self, host: str, port: int, deadline: float, timeout: float, tls: ssl.SSLContext | None = None) -> None:
        container = self.get_wrapped_container()
        error = "no answer yet"
        while True:
            try:
                if _api_versions(host, port, min(1.0, max(deadline - time.monotonic(), 0.05)), tls):
                    return
                error = "ApiVersions answered with an error"
            except OSError as exc:
                error = f"{type(exc).__name__}: {exc}"
            container.reload()
            if container.status in ("exited", "dead"):
                raise RuntimeError(f"kafkalite container exited ({container.attrs['State'].get('ExitCode')}):\n{_tail(container)}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"kafkalite did not answer ApiVersions at {host}:{port} within {timeout} s ({error}):\n{_tail(container)}")
            time.sleep(0.05)


def _api_versions(host: str, port: int, timeout: float, tls: ssl.SSLContext | None = None) -> bool:
    """One ApiVersions v0 round trip (over TLS with ``tls``; it needs no SASL); True when the broker answers with no error."""
    client_id = b"kafkalite-testcontainers"
    request = struct.pack(">hhih", _API_VERSIONS, 0, 1, len(client_id)) + client_id
    raw = socket.create_connection((host, port), timeout=timeout)
    with tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw as s:  # closes raw if the handshake fails
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(s, 4))[0]
        body = _read(s, size)
    correlation_id, error_code = struct.unpack(">ih", body[:6])
    return correlation_id == 1 and error_code == 0


def _read(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


def _tail(container, lines: int = 40) -> str:
    try:
        return container.logs(tail=lines).decode(errors="replace")
    except Exception as exc:  # noqa: BLE001 - the logs only decorate the error
        return f"(no logs: {exc})"
