"""A small synchronous Kafka client for admin work, on the project's protocol layer.

One ``Connection`` is one socket to one broker, with the API versions that
broker announced in ApiVersions. ``AdminClient`` holds one connection per
node: it bootstraps from the first reachable address, learns the cluster from
Metadata, sends group requests to the group's coordinator (FindCoordinator,
retried on NOT_COORDINATOR and friends) and partition requests to the leader.

Every request is sent at the newest version that this client, kio's schemas and
the broker all speak; callers pass a body builder that receives the chosen
version, so a request is written once for every version in its range.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2

from protocol.codec import build, decode, encode, request_class, response_class
from protocol.connection import request_header_version
from protocol.errors import ErrorCode, error_code
from protocol.framing import encode_frame

CLIENT_ID = "kafkalite-admin"

# API keys used here, and the version range this client knows how to write and read
API_VERSIONS = 18
METADATA = 3
CREATE_TOPICS = 19
DELETE_TOPICS = 20
FIND_COORDINATOR = 10
LIST_GROUPS = 16
DESCRIBE_GROUPS = 15
CONSUMER_GROUP_DESCRIBE = 69
SHARE_GROUP_DESCRIBE = 77
OFFSET_FETCH = 9
OFFSET_COMMIT = 8
LIST_OFFSETS = 2
DELETE_GROUPS = 42
FETCH = 1
DESCRIBE_CONFIGS = 32

CLIENT_RANGES: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 3),
    METADATA: (1, 12),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    FIND_COORDINATOR: (1, 6),
    LIST_GROUPS: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    CONSUMER_GROUP_DESCRIBE: (0, 1),
    SHARE_GROUP_DESCRIBE: (1, 1),
    OFFSET_FETCH: (1, 9),
    OFFSET_COMMIT: (2, 9),
    LIST_OFFSETS: (1, 8),
    DELETE_GROUPS: (0, 2),
    FETCH: (4, 12),  # 13+ name topics by id only
    DESCRIBE_CONFIGS: (1, 4),
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions (v2 adds a pattern this tool does not send)
}

# errors after which the coordinator is looked up again
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types
_COORDINATOR_ERRORS = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
}

_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")


class AdminError(Exception):
    """A request failed: a Kafka error code, or the broker could not be reached."""

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.code = code


class UnsupportedApi(AdminError):
    pass


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or a bare host."""
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    if address.count(":") == 1:
        host, port = address.split(":")
        return host, int(port)
    return address, default_port


def check(code, what: str, message: str | None = None) -> None:
    """Raise ``AdminError`` unless ``code`` is NONE."""
    code = error_code(code)
    if code != ErrorCode.none:
        raise AdminError(f"{what}: {code.name.upper()}" + (f" ({message})" if message else ""), code)


class Connection:
    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.host, self.port = host, port
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise AdminError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from exc
        self.sock.settimeout(timeout)
        self.correlation_id = 0
        self.versions: dict[int, tuple[int, int]] = {}
        self._negotiate()

    # ---------------------------------------------------------------- versions
    def _negotiate(self) -> None:
        """ApiVersions at v3; a broker that does not speak v3 answers at v0 with its list (KIP-511)."""
        frame = self._roundtrip(API_VERSIONS, 3, {"client_software_name": CLIENT_ID, "client_software_version": "1"})
        _, pos = decode(response_class(API_VERSIONS, 0).__header_schema__, frame, 0)
        (code,) = _I16.unpack_from(frame, pos)
        # a broker without v3 answers at v0, UNSUPPORTED_VERSION and its list of APIs
        version = 0 if code == ErrorCode.unsupported_version.value else 3
        body, _ = decode(response_class(API_VERSIONS, version), frame, pos)
        if version == 3:
            check(body.error_code, "ApiVersions")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}

    def supports(self, api_key: int) -> bool:
        return self.version_for(api_key, raise_=False) is not None

    def version_for(self, api_key: int, lo: int | None = None, hi: int | None = None, raise_: bool = True) -> int | None:
        """The newest version this client, kio and the broker share (optionally narrowed to lo..hi)."""
        mine = CLIENT_RANGES[api_key]
        theirs = self.versions.get(api_key)
        low = max(mine[0], lo if lo is not None else mine[0])
        high = min(mine[1], hi if hi is not None else mine[1])
        if theirs is not None:
            low, high = max(low, theirs[0]), min(high, theirs[1])
        if theirs is None or low > high:
            if raise_:
                raise UnsupportedApi(f"the broker at {self.host}:{self.port} does not support API {api_key} in versions {mine[0]}-{mine[1]}")
            return None
        return high

    # ---------------------------------------------------------------- requests
    def request(self, api_key: int, body: dict | Callable[[int], dict], *, version: int | None = None) -> tuple[int, Any]:
        """Send a request at the negotiated version; returns (version, response entity)."""
        if version is None:
            version = self.version_for(api_key)
        data = body(version) if callable(body) else body
        frame = self._roundtrip(api_key, version, data)
        cls = response_class(api_key, version)
        _, pos = decode(cls.__header_schema__, frame, 0)
        entity, _ = decode(cls, frame, pos)
        return version, entity

    def _roundtrip(self, api_key: int, version: int, data: dict) -> bytes:
        self.correlation_id += 1
        cls = request_class(api_key, version)
        header_cls = RequestHeaderV2 if request_header_version(api_key, version, cls.__flexible__) == 2 else RequestHeaderV1
        header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=self.correlation_id, client_id=CLIENT_ID)
        try:
            self.sock.sendall(encode_frame(encode(header), encode(build(cls, data))))
            size = _SIZE.unpack(self._read_exact(4))[0]
            frame = self._read_exact(size)
        except OSError as exc:
            self.close()
            raise AdminError(f"{self.host}:{self.port}: {exc.strerror or exc}") from exc
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        if correlation_id != self.correlation_id:
            raise AdminError(f"{self.host}:{self.port}: correlation id {correlation_id}, expected {self.correlation_id}")
        return frame

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionResetError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class AdminClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.bootstrap = [parse_address(a) for a in bootstrap.split(",") if a.strip()]
        if not self.bootstrap:
            raise AdminError("no bootstrap address given")
        self._nodes: dict[int, Connection] = {}
        self._addresses: dict[int, tuple[str, int]] = {}
        self._coordinators: dict[tuple[int, str], int] = {}  # (key type, key) -> node id
        self._boot: Connection | None = None

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for conn in {id(c): c for c in [*self._nodes.values(), self._boot] if c is not None}.values():
            conn.close()
        self._nodes.clear()
        self._boot = None

    # ---------------------------------------------------------------- connections
    @property
    def any(self) -> Connection:
        """A connection to some broker (the bootstrap one)."""
        if self._boot is None:
            errors = []
            for host, port in self.bootstrap:
                try:
                    self._boot = Connection(host, port, self.timeout)
                    break
                except AdminError as exc:
                    errors.append(str(exc))
            else:
                raise AdminError("; ".join(errors))
        return self._boot

    def node(self, node_id: int) -> Connection:
        conn = self._nodes.get(node_id)
        if conn is None:
            if node_id not in self._addresses:
                self.metadata([])
            if node_id not in self._addresses:
                raise AdminError(f"node {node_id} is not in the cluster metadata")
            host, port = self._addresses[node_id]
            boot = self._boot
            if boot is not None and (boot.host, boot.port) == (host, port):
                conn = boot
            else:
                conn = Connection(host, port, self.timeout)
            self._nodes[node_id] = conn
        return conn

    # ---------------------------------------------------------------- metadata
    def metadata(self, topics: list[str] | None = None) -> Any:
        """Metadata for ``topics`` (None: every topic; []: brokers only). Never creates topics."""

        def body(v: int) -> dict:
            if topics is None:
                return {"topics": None, "allow_auto_topic_creation": False}
            return {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False}

        _, md = self.any.request(METADATA, body)
        self._addresses = {b.node_id: (b.host, b.port) for b in md.brokers}
        return md

    def leaders(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The leader's node id of each (topic, partition); unknown ones are left out."""
        md = self.metadata(sorted({t for t, _ in partitions}))
        out = {}
        for t in md.topics:
            for p in t.partitions:
                if p.leader_id >= 0:
                    out[(t.name, p.partition_index)] = p.leader_id
        return {tp: out[tp] for tp in partitions if tp in out}

    # ---------------------------------------------------------------- groups
    def coordinator(self, group_id: str, refresh: bool = False, key_type: int = GROUP_KEY) -> Connection:
        """The coordinator of a group (``key_type`` GROUP_KEY) or a transactional id (TRANSACTION_KEY)."""
        cache = (key_type, group_id)
        if refresh or cache not in self._coordinators:
            deadline = time.monotonic() + self.timeout
            while True:
                node_id, code, message = self._find_coordinator(group_id, key_type)
                if code == ErrorCode.none:
                    break
                if code not in _COORDINATOR_ERRORS or time.monotonic() > deadline:
                    check(code, f"FindCoordinator({group_id})", message)
                time.sleep(0.2)
            self._coordinators[cache] = node_id
        return self.node(self._coordinators[cache])

    def coordinator_id(self, group_id: str) -> int:
        self.coordinator(group_id)
        return self._coordinators[(GROUP_KEY, group_id)]

    def _find_coordinator(self, group_id: str, key_type: int = GROUP_KEY) -> tuple[int, ErrorCode, str | None]:
        conn = self.any

        def body(v: int) -> dict:
            return {"key_type": key_type, "key": group_id, "coordinator_keys": [group_id]}

        _, resp = conn.request(FIND_COORDINATOR, body)
        if hasattr(resp, "coordinators"):
            c = resp.coordinators[0]
            node_id, host, port, code, message = c.node_id, c.host, c.port, c.error_code, c.error_message
        else:
            node_id, host, port, code, message = resp.node_id, resp.host, resp.port, resp.error_code, getattr(resp, "error_message", None)
        if error_code(code) == ErrorCode.none:
            self._addresses[node_id] = (host, port)
        return node_id, error_code(code), message

    def group_request(self, group_id: str, api_key: int, body: Callable[[int], dict], error_of: Callable[[Any], Any],
                      key_type: int = GROUP_KEY) -> tuple[int, Any]:
        """Send to the group's (or transactional id's) coordinator; look it up again while the answer says it moved or is loading."""
        deadline = time.monotonic() + self.timeout
        refresh = False
        while True:
            conn = self.coordinator(group_id, refresh=refresh, key_type=key_type)
            version, resp = conn.request(api_key, body)
            code = error_code(error_of(resp))
            if code not in _COORDINATOR_ERRORS or time.monotonic() > deadline:
                return version, resp
            refresh = True
            time.sleep(0.2)

    def describe_group(self, group_id: str, api_key: int, groups_field: str = "group_ids") -> tuple[Any, ErrorCode]:
        """The one group a describe request (``api_key``, naming it in ``groups_field``) answers, and its error code."""
        _, resp = self.group_request(
            group_id, api_key, lambda v: {groups_field: [group_id], "include_authorized_operations": False}, lambda r: r.groups[0].error_code
        )
        g = resp.groups[0]
        return g, error_code(g.error_code)

    def all_nodes(self) -> list[Connection]:
        md = self.metadata([])
        return [self.node(b.node_id) for b in md.brokers]
