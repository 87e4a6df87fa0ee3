"""The conformance suite's view of one broker: raw connections, helpers and normalised observations.

A ``Driver`` belongs to one scenario run against one broker. The scenario sends
raw requests (kio bodies at chosen versions) over one or more TCP connections
and calls ``obs(label, **values)`` for everything it wants compared. Values are
normalised as they are recorded, so the lists from kafkalite and Kafka compare
equal when the brokers behave the same:

* error codes become their names (``"UNKNOWN_MEMBER_ID"``), messages are not kept;
* member ids become ``m1``, ``m2``... in order of first appearance;
* topic ids become the topic's label in the scenario (or ``t1``... if unknown);
* the run's unique prefix is stripped from group and topic names;
* durations (``timedelta``) become milliseconds; bytes become text.

Timestamps, throttle times, cluster ids, hosts and ports are simply never
recorded by the scenarios.
"""

from __future__ import annotations

import datetime
import enum
import select
import socket
import struct
import threading
import time
import uuid
import zlib
from dataclasses import fields, is_dataclass
from typing import Any

import crc32c
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

from protocol.codec import build, decode, encode, request_class, response_class
from tests.wait import wait_until

WAIT_S = 20.0  # upper bound of every polling loop in a scenario


class Closed(Exception):
    """The broker closed the connection instead of answering."""


class Conn:
    """One TCP connection; at most one request in flight (a broker answers a connection in order)."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
        self.client_id = client_id
        self.corr = 0
        self.inflight: tuple[int, int, int] | None = None  # (api key, response version, correlation id)

    # -- sending -----------------------------------------------------------

    def send(self, api_key: int, version: int, body: dict | Any) -> None:
        assert self.inflight is None, "one request at a time per connection"
        cls = request_class(api_key, version)
        header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
        self.corr += 1
        header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=self.corr, client_id=self.client_id)
        self._frame(encode(header) + encode(build(cls, body)))
        self.inflight = (api_key, version, self.corr)

    def send_raw(self, api_key: int, version: int, body: bytes = b"", *, flexible_header: bool = False) -> None:
        """A hand-built request: a header for (api_key, version) followed by ``body`` verbatim."""
        assert self.inflight is None
        self.corr += 1
        header_cls = HeaderV2 if flexible_header else HeaderV1
        header = header_cls(request_api_key=api_key, request_api_version=version, correlation_id=self.corr, client_id=self.client_id)
        self._frame(encode(header) + body)
        self.inflight = (api_key, version, self.corr)

    def _frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    # -- receiving ---------------------------------------------------------

    def ready(self, timeout: float) -> bool:
        """True if the answer (or a close) arrived within ``timeout`` seconds."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        return bool(r)

    def recv(self, timeout: float = WAIT_S, *, response_version: int | None = None):
        assert self.inflight is not None, "nothing in flight"
        api_key, version, corr = self.inflight
        if not self.ready(timeout):
            raise TimeoutError(f"no answer to api {api_key} v{version} within {timeout}s")
        frame = self._read_frame()
        self.inflight = None
        if frame is None:
            raise Closed(f"connection closed instead of answering api {api_key} v{version}")
        resp_cls = response_class(api_key, version if response_version is None else response_version)
        header, pos = decode(resp_cls.__header_schema__, frame, 0)
        assert header.correlation_id == corr, (header.correlation_id, corr)
        body, _ = decode(resp_cls, frame, pos)
        return body

    def recv_frame(self, timeout: float = WAIT_S) -> bytes | None:
        """The raw answer frame (None if the connection was closed)."""
        if not self.ready(timeout):
            raise TimeoutError("no answer")
        self.inflight = None
        return self._read_frame()

    def request(self, api_key: int, version: int, body: dict | Any, timeout: float = WAIT_S):
        self.send(api_key, version, body)
        return self.recv(timeout)

    def _read_frame(self) -> bytes | None:
        size = self._read_exact(4)
        if size is None:
            return None
        return self._read_exact(struct.unpack(">i", size)[0])

    def _read_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, TimeoutError, OSError):
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------
# record batches (magic 2), built here so the suite does not lean on the broker's encoder


def _zigzag(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _bytes_field(b: bytes | None) -> bytes:
    return _zigzag(-1) if b is None else _zigzag(len(b)) + b


def record_batch(values: list[bytes], *, base_ts: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, attributes: int = 0, magic: int = 2, corrupt_crc: bool = False) -> bytes:
    """One uncompressed v2 batch of records with null keys."""
    ts = int(time.time() * 1000) if base_ts is None else base_ts
    recs = b""
    for i, v in enumerate(values):
        body = b"\x00" + _zigzag(0) + _zigzag(i) + _bytes_field(None) + _bytes_field(v) + _zigzag(0)
        recs += _zigzag(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", attributes, len(values) - 1, ts, ts, producer_id, producer_epoch, base_sequence, len(values)) + recs
    crc = crc32c.crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xFFFF
    head = struct.pack(">ibI", 0, magic, crc)  # partition leader epoch, magic, crc
    batch_len = len(head) + len(after_crc)
    return struct.pack(">qi", 0, batch_len) + head + after_crc


def legacy_message_set(values: list[bytes], magic: int = 1) -> bytes:
    """An old-format (magic 0/1) message set, which Kafka 4 no longer accepts on produce."""
    out = b""
    for i, v in enumerate(values):
        body = struct.pack(">bb", magic, 0) + (struct.pack(">q", 0) if magic == 1 else b"") + struct.pack(">i", -1) + struct.pack(">i", len(v)) + v
        crc = zlib.crc32(body) & 0xFFFFFFFF
        msg = struct.pack(">I", crc) + body
        out += struct.pack(">qi", i, len(msg)) + msg
    return out


# --------------------------------------------------------------------------
# the driver


class Driver:
    """One scenario's connections to one broker, and what it observed."""

    def __init__(self, kind: str, bootstrap: str, prefix: str, login: tuple[str, str] | None = None) -> None:
        self.kind = kind
        self.bootstrap = bootstrap
        self.login = login  # (user, password) on a SASL listener: connections log in with PLAIN first
        self.prefix = prefix  # unique per scenario and broker; stripped from names
        self.observations: list[dict] = []
        self._conns: dict[str, Conn] = {}
        self._members: dict[str, str] = {}
        self._topic_ids: dict[uuid.UUID, str] = {}
        self._unknown_topic_ids: dict[uuid.UUID, str] = {}
        self._lock = threading.Lock()

    # -- names ---------------------------------------------------------------

    def group(self, label: str = "g") -> str:
        return f"{self.prefix}{label}"

    def topic(self, label: str = "t") -> str:
        return f"{self.prefix}{label}"

    def mid(self, member_id: str | None) -> str | None:
        """The normalised name of a member id (registering it on first sight)."""
        if member_id is None or member_id == "":
            return member_id
        with self._lock:
            if member_id not in self._members:
                self._members[member_id] = f"m{len(self._members) + 1}"
            return self._members[member_id]

    def tid(self, topic_id: uuid.UUID | None) -> str | None:
        if topic_id is None:
            return None
        if topic_id.int == 0:
            return "zero-uuid"
        if topic_id in self._topic_ids:
            return self._topic_ids[topic_id]
        if topic_id not in self._unknown_topic_ids:
            self._unknown_topic_ids[topic_id] = f"t{len(self._unknown_topic_ids) + 1}"
        return self._unknown_topic_ids[topic_id]

    def topic_id(self, label: str) -> uuid.UUID:
        name = self.topic(label)
        for tid, n in self._topic_ids.items():
            if n == self.strip(name):
                return tid
        raise KeyError(label)

    def strip(self, s: str) -> str:
        return s.replace(self.prefix, "") if self.prefix in s else s

    # -- connections -----------------------------------------------------------

    def conn(self, name: str = "main") -> Conn:
        if name not in self._conns:
            c = Conn(self.bootstrap, client_id=f"cc-{name}")
            if self.login is not None:
                self._log_in(c)
            self._conns[name] = c
        return self._conns[name]

    def unauthenticated(self, name: str) -> Conn:
        """A connection under ``name`` that has not logged in (on a SASL listener: for the exchange itself)."""
        old = self._conns.pop(name, None)
        if old is not None:
            old.close()
        c = self._conns[name] = Conn(self.bootstrap, client_id=f"cc-{name}")
        return c

    def _log_in(self, c: Conn) -> None:
        """SaslHandshake v1 (PLAIN), then SaslAuthenticate v2 with the user's token; raises if refused."""
        user, password = self.login
        r = c.request(17, 1, {"mechanism": "PLAIN"})
        if r.error_code != 0:
            raise RuntimeError(f"SaslHandshake refused: {r.error_code}")
        r = c.request(36, 2, {"auth_bytes": b"\0" + user.encode() + b"\0" + password.encode()})
        if r.error_code != 0:
            raise RuntimeError(f"SaslAuthenticate refused: {r.error_code} {r.error_message}")

    def fresh(self, name: str) -> Conn:
        """A new connection under ``name`` (closing the old one)."""
        old = self._conns.pop(name, None)
        if old is not None:
            old.close()
        return self.conn(name)

    def req(self, api_key: int, version: int, body: dict, conn: str = "main", timeout: float = WAIT_S):
        return self.conn(conn).request(api_key, version, body, timeout)

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    # -- observations ------------------------------------------------------------

    def obs(self, label: str, **values: Any) -> None:
        self.observations.append({"step": label, **{k: self.norm(v) for k, v in values.items()}})

    def norm(self, v: Any) -> Any:
        if isinstance(v, ErrorCode):
            return v.name.upper()
        if isinstance(v, enum.Enum):
            return v.name
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, int):
            return int(v)
        if isinstance(v, str):
            if v in self._members:
                return self._members[v]
            return self.strip(v)
        if isinstance(v, uuid.UUID):
            return self.tid(v)
        if isinstance(v, datetime.timedelta):
            return int(v.total_seconds() * 1000)
        if isinstance(v, bytes | bytearray | memoryview):
            b = bytes(v)
            try:
                return "b:" + b.decode("ascii") if all(32 <= c < 127 for c in b) else "x:" + b.hex()
            except UnicodeDecodeError:
                return "x:" + b.hex()
        if isinstance(v, dict):
            return {str(k): self.norm(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [self.norm(x) for x in v]
        if isinstance(v, frozenset | set):
            return sorted(self.norm(x) for x in v)
        if is_dataclass(v):
            return {f.name: self.norm(getattr(v, f.name)) for f in fields(v)}
        return repr(v)

    # -- waiting -----------------------------------------------------------------

    @staticmethod
    def until(predicate, timeout: float = WAIT_S, interval: float = 0.05, what: str = "condition"):
        """``tests.wait.wait_until`` under the name the scenarios use, bounded by a scenario's ``WAIT_S``:
        the predicate's first truthy answer, or ``WaitTimeout`` (a ``TimeoutError``) after ``timeout``."""
        return wait_until(predicate, timeout=timeout, interval=interval, what=what)

    # -- topics ------------------------------------------------------------------

    def create_topic(self, label: str = "t", partitions: int = 1) -> str:
        """Create a topic and wait until Metadata shows it with a leader for each partition."""
        name = self.topic(label)
        r = self.req(19, 5, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}], "timeout": datetime.timedelta(seconds=30)})
        err = r.topics[0].error_code
        if err not in (ErrorCode.none, ErrorCode.topic_already_exists):
            raise RuntimeError(f"CreateTopics {name}: {err!r}")

        def ready():
            m = self.req(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
            t = m.topics[0]
            if t.error_code == ErrorCode.none and len(t.partitions) == partitions and all(p.leader_id >= 0 for p in t.partitions):
                return t
            return None

        t = self.until(ready, what=f"metadata of {name}")

        def hosted():  # Metadata can name the leader a moment before the partition takes requests
            body = {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": name, "partitions": [{"partition_index": p, "timestamp": -1, "current_leader_epoch": -1} for p in range(partitions)]}]}
            r = self.req(2, 7, body)
            return all(p.error_code == ErrorCode.none for x in r.topics for p in x.partitions)

        self.until(hosted, what=f"{name} taking requests")
        self._topic_ids[t.topic_id] = self.strip(name)
        return name
