"""What TLS and SASL cost: broker CPU per MB over SSL against PLAINTEXT, and the time a SASL_SSL
handshake adds to a client's connection (issue 15's targets: at most 1.5x the broker CPU of
PLAINTEXT per MB produced and consumed; at most 5 ms more per connection).

    python -m bench.tls_cost --mb 100 --value-size 1024 --rounds 3 [--kafka]

One broker process with three listeners (PLAINTEXT, SSL, SASL_SSL with PLAIN and SCRAM-SHA-512),
certificates from ``broker.security.certs`` (ECDSA P-256). Per round and protocol, confluent-kafka
produces ``--mb`` MB of ``--value-size`` byte records to a new 3-partition topic and reads them
all back (assigned partitions, no group), with bench.workload's client settings; the broker's
on-CPU time (/proc/<pid>/task/*/schedstat) is read around each phase. PLAINTEXT and SSL alternate
within a round, so both see the same machine load.

Handshakes: ``--connections`` sequential raw-socket connections per kind, each timed from
``connect()`` to the answer of its first Metadata request: PLAINTEXT (ApiVersions, Metadata), SSL
(TLS 1.3 first), SASL_SSL with PLAIN and with SCRAM-SHA-512 (ApiVersions, SaslHandshake,
SaslAuthenticate...). The SCRAM client computes PBKDF2 once and reuses it (a client-side cost
that is the client's to cache; Java and librdkafka recompute it per connection). Reported:
median and 90th percentile, the median's excess over PLAINTEXT, and the broker's CPU per
connection. ``--kafka`` runs the same against the reference Apache Kafka 4.1
(tests/reference_kafka.py) with the same listeners and certificates.
"""

from __future__ import annotations

from protocol.varint import uvarint_rest

import argparse
import base64
import hashlib
import hmac
import os
import shutil
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.fast import uvarint

from .procstat import oncpu_seconds
from .workload import CONSUMER_CONFIG, PARTITIONS, PRODUCER_CONFIG

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench-secret"
PLAIN_JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="{PASSWORD}";'
SCRAM_JAAS_KAFKALITE = f'org.apache.kafka.common.security.scram.ScramLoginModule required user_bench="{PASSWORD}";'
SCRAM_JAAS_KAFKA = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def _props(certs, scram_jaas: str) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas,
    }


class Kafkalite:
    label = "kafkalite"

    def __init__(self, work: Path, certs) -> None:
        args = [sys.executable, "-m", "broker", "serve", "--data-dir", str(work / "kafkalite-data"), "--log-level", "warning"]
        for name in ("PLAINTEXT", "SSL", "SASL_SSL"):
            args += ["--listener", f"{name}://127.0.0.1:0"]
        for k, v in _props(certs, SCRAM_JAAS_KAFKALITE).items():
            args += ["--set", f"{k}={v}"]
        self.log = open(work / "kafkalite.stderr.log", "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, cwd=ROOT, text=True,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        lines = [self.proc.stdout.readline() for _ in range(4)]
        if not lines[0].startswith("READY"):
            raise RuntimeError(f"kafkalite did not start: {lines}")
        self.listeners = {line.split()[1]: line.split()[2] for line in lines[1:]}
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()


class Kafka:
    label = "kafka"

    def __init__(self, work: Path, certs) -> None:
        sys.path.insert(0, str(ROOT))
        from tests import reference_kafka

        ok, why = reference_kafka.available()
        if not ok:
            raise RuntimeError(why)

        def free() -> int:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return s.getsockname()[1]

        k = self.k = reference_kafka.ReferenceKafka(work / "kafka", heap="1g")
        k.port, k.controller_port = free(), free()
        ports = {"PLAINTEXT": k.port, "SSL": free(), "SASL_SSL": free()}
        k.config.update({
            "listeners": ",".join([*(f"{n}://127.0.0.1:{p}" for n, p in ports.items()), f"CONTROLLER://127.0.0.1:{k.controller_port}"]),
            "advertised.listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            **_props(certs, SCRAM_JAAS_KAFKA),
        })
        k.start()
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        admin = AdminClient({"bootstrap.servers": k.bootstrap})
        up = UserScramCredentialUpsertion("bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())
        admin.alter_user_scram_credentials([up])["bench"].result(30)
        self.listeners = {n: f"127.0.0.1:{p}" for n, p in ports.items()}
        self.pid = k.proc.pid

    def stop(self) -> None:
        self.k.stop()


def client_conf(protocol: str, certs) -> dict:
    if protocol == "PLAINTEXT":
        return {}
    conf = {"security.protocol": protocol, "ssl.ca.location": str(certs.ca)}
    if protocol == "SASL_SSL":
        conf.update({"sasl.mechanism": "PLAIN", "sasl.username": "bench", "sasl.password": PASSWORD})
    return conf


def _topic(bootstrap: str, conf: dict, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == PARTITIONS:
            return
        time.sleep(0.05)


def produce_consume(bootstrap: str, conf: dict, pid: int, topic: str, value_size: int, count: int) -> tuple[float, float, float, float]:
    """(produce wall s, produce broker CPU s, consume wall s, consume broker CPU s)."""
    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, **conf, **PRODUCER_CONFIG, "on_delivery": lambda err, msg: err and errors.append(err)})
    producer.list_topics(topic, timeout=10)
    value = bytes((i * 7 + 13) & 0xFF for i in range(value_size))
    c0, t0 = oncpu_seconds(pid), time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.005)
        if not i & 0x3FFF:
            producer.poll(0)
    if producer.flush(600) or errors:
        raise RuntimeError(f"produce failed: {errors[:1]}")
    c1, t1 = oncpu_seconds(pid), time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, **conf, **CONSUMER_CONFIG})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    c2, t2 = oncpu_seconds(pid), time.perf_counter()
    while got < count:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
        if time.perf_counter() - t2 > 600:
            raise RuntimeError(f"consumed {got} of {count}")
    c3, t3 = oncpu_seconds(pid), time.perf_counter()
    consumer.close()
    return t1 - t0, c1 - c0, t3 - t2, c3 - c2


# -- handshakes, over raw sockets ---------------------------------------------------------------

_API_VERSIONS = struct.pack(">hhih", 18, 3, 0, 2) + b"hs" + b"\x00" + b"\x03hs\x021\x00"  # v3, flexible body
_METADATA = struct.pack(">hhih", 3, 12, 0, 2) + b"hs" + b"\x00" + b"\x01" + b"\x00\x00" + b"\x00"  # v12: no topics


def _frame(sock, payload: bytes) -> bytes:
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = b""
    while len(size) < 4:
        chunk = sock.recv(4 - len(size))
        if not chunk:
            raise ConnectionError("closed")
        size += chunk
    (n,) = struct.unpack(">i", size)
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            raise ConnectionError("closed")
        body += chunk
    return body


def _sasl_handshake(mechanism: str) -> bytes:
    m = mechanism.encode()
    return struct.pack(">hhih", 17, 1, 0, 2) + b"hs" + struct.pack(">h", len(m)) + m


def _sasl_authenticate(token: bytes) -> bytes:
    # v2, flexible: compact bytes (length + 1), empty tagged fields; header v2
    return struct.pack(">hhih", 36, 2, 0, 2) + b"hs" + b"\x00" + uvarint(len(token) + 1) + token + b"\x00"


def _auth_bytes(resp: bytes) -> bytes:
    """SaslAuthenticate v2 answer (header v1: correlation id + tagged fields): the error code and the token."""
    pos = 4 + 1  # correlation id, empty header tags
    (err,) = struct.unpack_from(">h", resp, pos)
    pos += 2
    n, pos = _read_uvarint(resp, pos)  # compact nullable string: the error message
    pos += max(n - 1, 0)
    if err:
        raise RuntimeError(f"SaslAuthenticate failed: {err}")
    n, pos = _read_uvarint(resp, pos)
    return resp[pos : pos + n - 1]


def _read_uvarint(b: bytes, pos: int) -> tuple[int, int]:
    x = b[pos]
    if x < 0x80:
        return x, pos + 1
    return uvarint_rest(b, pos + 1, x & 0x7F, 63, ValueError, "varint longer than 64 bits")


class _ScramCache:
    salted: dict[tuple[bytes, int], bytes] = {}


def _scram(sock) -> None:
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n=bench,r={nonce}"
    server_first = _auth_bytes(_frame(sock, _sasl_authenticate(("n,," + bare).encode())))
    attrs = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
    salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
    salted = _ScramCache.salted.get((salt, iterations))
    if salted is None:
        salted = _ScramCache.salted[(salt, iterations)] = hashlib.pbkdf2_hmac("sha512", PASSWORD.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    stored = hashlib.sha512(client_key).digest()
    without = f"c=biws,r={attrs['r']}"
    auth = f"{bare},{server_first.decode()},{without}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, hmac.new(stored, auth, "sha512").digest(), strict=True))
    _auth_bytes(_frame(sock, _sasl_authenticate(f"{without},p={base64.b64encode(proof).decode()}".encode())))


def connect_once(address: str, kind: str, ctx: ssl.SSLContext | None) -> float:
    host, port = address.rsplit(":", 1)
    t0 = time.perf_counter()
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        if ctx is not None:
            sock = ctx.wrap_socket(sock, server_hostname=host)
        _frame(sock, _API_VERSIONS)
        if kind.startswith("SASL_SSL"):
            mechanism = kind.split("/", 1)[1]
            _frame(sock, _sasl_handshake(mechanism))
            if mechanism == "PLAIN":
                _auth_bytes(_frame(sock, _sasl_authenticate(f"\0bench\0{PASSWORD}".encode())))
            else:
                _scram(sock)
        _frame(sock, _METADATA)
        return time.perf_counter() - t0
    finally:
        sock.close()


def handshakes(broker, certs, n: int) -> dict[str, tuple[float, float, float]]:
    """kind -> (median ms, p90 ms, broker CPU ms per connection)."""
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    kinds = {"PLAINTEXT": ("PLAINTEXT", None), "SSL": ("SSL", ctx), "SASL_SSL/PLAIN": ("SASL_SSL", ctx), "SASL_SSL/SCRAM-SHA-512": ("SASL_SSL", ctx)}
    for kind, (listener, c) in kinds.items():  # warm up (and fill the SCRAM client's cache)
        for _ in range(5):
            connect_once(broker.listeners[listener], kind, c)
    out = {}
    for kind, (listener, c) in kinds.items():
        c0 = oncpu_seconds(broker.pid)
        times = sorted(connect_once(broker.listeners[listener], kind, c) for _ in range(n))
        cpu = oncpu_seconds(broker.pid) - c0
        out[kind] = (statistics.median(times) * 1000, times[int(len(times) * 0.9)] * 1000, cpu * 1000 / n)
    return out


def measure_broker(b, certs, mb: float, value_size: int, rounds: int, connections: int, say=print) -> dict:
    """Broker CPU per MB produced and consumed over PLAINTEXT and SSL (median of ``rounds``, alternating
    which goes first), and the connection times of ``handshakes``: {plain_ms_per_mb, tls_ms_per_mb, ratio, handshakes}."""
    count = int(mb * 1_000_000 / value_size)
    mb = count * value_size / 1e6
    per: dict[str, list[float]] = {"PLAINTEXT": [], "SSL": []}
    for r in range(rounds):
        for proto in ("PLAINTEXT", "SSL") if r % 2 == 0 else ("SSL", "PLAINTEXT"):
            conf = client_conf(proto, certs)
            topic = f"tls-{proto.lower()}-{r}-{os.getpid()}"
            _topic(b.listeners[proto], conf, topic)
            pw, pc, cw, cc = produce_consume(b.listeners[proto], conf, b.pid, topic, value_size, count)
            per[proto].append((pc + cc) * 1000 / mb)
            say(f"{b.label:9} round {r} {proto:9} produce {mb / pw:7.1f} MB/s {pc * 1000 / mb:6.2f} ms CPU/MB | "
                f"consume {mb / cw:7.1f} MB/s {cc * 1000 / mb:6.2f} ms CPU/MB | total {(pc + cc) * 1000 / mb:6.2f} ms CPU/MB")
    plain, tls = statistics.median(per["PLAINTEXT"]), statistics.median(per["SSL"])
    say(f"{b.label:9} broker CPU per MB produced+consumed (median of {rounds}): PLAINTEXT {plain:.2f} ms, SSL {tls:.2f} ms, "
        f"ratio {tls / plain:.2f} (target <= 1.5)")
    hs = handshakes(b, certs, connections)
    base = hs["PLAINTEXT"][0]
    for kind, (med, p90, cpu) in hs.items():
        say(f"{b.label:9} connection {kind:24} median {med:6.2f} ms  p90 {p90:6.2f} ms  (+{med - base:5.2f} ms over PLAINTEXT)  broker CPU {cpu:5.2f} ms")
    return {"plain_ms_per_mb": plain, "tls_ms_per_mb": tls, "ratio": tls / plain, "handshakes": hs}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=100.0)
    p.add_argument("--value-size", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--connections", type=int, default=200)
    p.add_argument("--kafka", action="store_true", help="also measure the reference Apache Kafka 4.1")
    args = p.parse_args(argv)
    from broker.security.certs import generate

    work = Path(tempfile.mkdtemp(prefix="tls-cost-"))
    certs = generate(work / "certs")
    brokers = [Kafkalite(work, certs)]
    try:
        if args.kafka:
            brokers.append(Kafka(work, certs))
        print(f"loadavg before: {Path('/proc/loadavg').read_text().strip()}")
        for b in brokers:
            measure_broker(b, certs, args.mb, args.value_size, args.rounds, args.connections)
        print(f"loadavg after: {Path('/proc/loadavg').read_text().strip()}")
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
