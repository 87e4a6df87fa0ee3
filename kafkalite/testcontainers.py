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
"""

from __future__ import annotations

import io
import socket
import struct
import tarfile
import time

from testcontainers.core.container import DockerContainer

DEFAULT_IMAGE = "kafkalite:latest"
BROKER_PORT = 9092  # the image's listener, which its health check (KAFKALITE_BOOTSTRAP) uses
_SETTINGS = "/tmp/kafkalite-advertised"
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
        advertised = f"PLAINTEXT://{host}:{port},BROKER://{self._network_address()}:{BROKER_PORT}"
        self._copy_in(_SETTINGS, advertised.encode())
        self._copy_in(f"{_SETTINGS}.done", b"")  # after the settings are whole
        self._wait_until_ready(host, port, deadline, timeout)
        return self

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

    def _copy_in(self, path: str, content: bytes) -> None:
        directory, _, name = path.rpartition("/")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(content))
        self.get_wrapped_container().put_archive(directory or "/", buffer.getvalue())

    def _wait_until_ready(self, host: str, port: int, deadline: float, timeout: float) -> None:
        container = self.get_wrapped_container()
        error = "no answer yet"
        while True:
            try:
                if _api_versions(host, port, min(1.0, max(deadline - time.monotonic(), 0.05))):
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


def _api_versions(host: str, port: int, timeout: float) -> bool:
    """One ApiVersions v0 round trip; True when the broker answers with no error."""
    client_id = b"kafkalite-testcontainers"
    request = struct.pack(">hhih", _API_VERSIONS, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
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
