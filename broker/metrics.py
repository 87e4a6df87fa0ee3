"""Prometheus metrics, served with ``--metrics-port``.

Only built when metrics are on: the broker then takes the hooked dispatch path
(``KafkaConnection._dispatch_hooked``), which reports every request here.
State that already exists elsewhere (groups, members, log sizes, rebalances)
is read when Prometheus scrapes, so it costs nothing between scrapes:

- groups and members come from the coordinator's shards;
- rebalances come from the group event stream (``__kafkalite_group_events``,
  see ``broker/coordinator/events.py``), read from where the previous scrape
  stopped: classic ``rebalance completed`` events carry join and sync times,
  KIP-848 groups count ``consumer group epoch bumped``;
- log sizes and offsets come from each partition's log (partitions of
  internal topics only once something was written to them: an idle broker's
  fifty empty ``__consumer_offsets`` partitions are not 150 series of zeros);
- groups' committed offsets and lag come from the coordinator's offsets (the
  durable view OffsetFetch answers from) and each partition's high
  watermark, per group, topic and partition: nothing is counted per commit.

Counters and histograms have no ``_created`` series (prometheus_client adds
one per label set; nobody alerts on it, and it doubled the series count).

The endpoint is a small HTTP server on the broker's own event loop, so the
collectors read that state from the thread that owns it. Every metric is in
its own registry per broker (several in-process brokers do not collide).
"""

from __future__ import annotations

import asyncio
import json
import struct

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.process_collector import ProcessCollector

from protocol.errors import ErrorCode

from .coordinator.runtime import ACTIVE
from .faults import api_name, first_error
from .logs import get_logger

log = get_logger("metrics")

EVENTS_TOPIC = "__kafkalite_group_events"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
REBALANCE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_READ_CHUNK = 1 << 20
_I32 = struct.Struct(">i")
_CREATED_TYPES = ("counter", "histogram", "summary")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def batch_stats(records) -> tuple[int, int]:
    """(bytes, records) of a records blob, walking batch headers only."""
    if not records:
        return 0, 0
    n = len(records)
    pos = 0
    count = 0
    try:
        while pos + 61 <= n:
            (length,) = _I32.unpack_from(records, pos + 8)
            (count_here,) = _I32.unpack_from(records, pos + 57)
            count += max(count_here, 0)
            pos += 12 + max(length, 49)
    except struct.error:
        pass
    return n, count


class _RebalanceHistogram:
    """A histogram fed at scrape time (prometheus_client's Histogram would do, but
    this one keeps the buckets beside the collector that fills them)."""

    def __init__(self, buckets) -> None:
        self.bounds = list(buckets)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, int]]:
        out, acc = [], 0
        for bound, c in zip(self.bounds, self.counts, strict=False):
            acc += c
            out.append((repr(float(bound)), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out


class _StateCollector:
    """Reads groups, rebalances and logs when Prometheus scrapes."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.events_offset: int | None = None
        self.rebalances = {"classic": 0, "consumer": 0}
        self.phases = {phase: _RebalanceHistogram(REBALANCE_BUCKETS) for phase in ("join", "sync", "total")}

    def describe(self):
        return []

    def start(self) -> None:
        part = self._events_partition()
        self.events_offset = part.log.log_end_offset if part is not None else 0

    def _events_partition(self):
        """The group event stream's partition, if this node serves its log (a standby node's has none)."""
        topic = self.metrics.broker.cluster.topics.get(EVENTS_TOPIC)
        part = topic.partitions[0] if topic is not None and topic.partitions else None
        return part if part is not None and part.log is not None else None

    def _read_events(self) -> None:
        part = self._events_partition()
        if part is None:
            return
        from protocol.records import iter_key_values, split_batches

        plog = part.log
        offset = self.events_offset or 0
        if offset < plog.log_start_offset:
            offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            try:
                data = plog.read(offset, _READ_CHUNK)
            except Exception:  # noqa: BLE001 - retention may have moved the start; try again next scrape
                break
            if not data:
                break
            for header, batch in split_batches(data, verify_crc=False):
                if header.last_offset < offset:
                    continue
                offset = header.last_offset + 1
                for _key, value in iter_key_values(batch):
                    if value:
                        self._event(value)
        self.events_offset = offset

    def _event(self, value: bytes) -> None:
        try:
            event = json.loads(value)
        except ValueError:
            return
        name = event.get("event")
        if name == "rebalance completed":
            self.rebalances["classic"] += 1
            join_ms = float(event.get("join_ms") or 0)
            sync_ms = float(event.get("sync_ms") or 0)
            self.phases["join"].observe(join_ms / 1000)
            self.phases["sync"].observe(sync_ms / 1000)
            self.phases["total"].observe((join_ms + sync_ms) / 1000)
        elif name == "consumer group epoch bumped":
            self.rebalances["consumer"] += 1

    def collect(self):
        broker = self.metrics.broker
        groups = GaugeMetricFamily("kafkalite_groups", "Consumer groups by state and type (classic or consumer)", labels=["state", "type"])
        members = GaugeMetricFamily("kafkalite_group_members", "Members of consumer groups, by group type", labels=["type"])
        counts: dict[tuple[str, str], int] = {}
        member_counts = {"classic": 0, "consumer": 0}
        for runtime in getattr(broker.coordinator, "shards", []):
            for group in runtime.shard.groups.values():
                kind = "classic" if type(group).__name__ == "ClassicGroup" else "consumer"
                state = str(group.state)
                counts[(state, kind)] = counts.get((state, kind), 0) + 1
                member_counts[kind] += len(group.members)
        for (state, kind), n in sorted(counts.items()):
            groups.add_metric([state, kind], n)
        for kind, n in member_counts.items():
            members.add_metric([kind], n)
        yield groups
        yield members

        self._read_events()
        rebalances = CounterMetricFamily(
            "kafkalite_rebalances", "Completed rebalances: classic groups' rebalances, KIP-848 groups' epoch bumps", labels=["type"]
        )
        for kind, n in self.rebalances.items():
            rebalances.add_metric([kind], n)
        yield rebalances
        duration = HistogramMetricFamily(
            "kafkalite_rebalance_duration_seconds", "Classic rebalances: time in the join phase, the sync phase and both", labels=["phase"]
        )
        for phase, hist in self.phases.items():
            duration.add_metric([phase], hist.buckets(), hist.total)
        yield duration

        size = GaugeMetricFamily("kafkalite_log_size_bytes", "Bytes on disk of each partition's log", labels=["topic", "partition"])
        start = GaugeMetricFamily("kafkalite_log_start_offset", "First offset of each partition", labels=["topic", "partition"])
        end = GaugeMetricFamily("kafkalite_log_end_offset", "Next offset of each partition", labels=["topic", "partition"])
        for topic in list(broker.cluster.topics.values()):
            internal = topic.internal
            for part in topic.partitions:
                labels = [topic.name, str(part.index)]
                plog = part.log
                try:
                    if internal and plog.log_end_offset == 0:  # nothing was ever written to it
                        continue
                    size.add_metric(labels, plog.size_bytes)
                    start.add_metric(labels, plog.log_start_offset)
                    end.add_metric(labels, plog.log_end_offset)
                except Exception:  # noqa: BLE001 - a log closed by a topic deletion in between
                    continue
        yield size
        yield start
        yield end
        yield from group_offsets(broker)


def group_offsets(broker):
    """``kafkalite_group_committed_offset`` and ``kafkalite_group_lag`` families: each group's
    committed offsets (of shards that have loaded), and their lag behind the partition's high
    watermark (the log end offset, with one replica; what kafka-consumer-groups.sh and the
    exporters subtract from). A committed offset past the log end shows as negative lag; a
    partition that does not exist, or a negative offset, has no lag."""
    offset = GaugeMetricFamily(
        "kafkalite_group_committed_offset", "Committed offset of each group, topic and partition", labels=["group", "topic", "partition"]
    )
    lag = GaugeMetricFamily(
        "kafkalite_group_lag", "High watermark minus the committed offset, by group, topic and partition", labels=["group", "topic", "partition"]
    )
    topics = broker.cluster.topics
    for runtime in getattr(broker.coordinator, "shards", []):
        if runtime.state != ACTIVE:  # loading: offsets still stand as raw rows
            continue
        for group, committed in list(runtime.shard.offsets.committed.items()):
            for (topic, partition), value in sorted(committed.items()):
                labels = [group, topic, str(partition)]
                committed_offset = value.offset
                offset.add_metric(labels, committed_offset)
                t = topics.get(topic)
                if committed_offset < 0 or t is None or not 0 <= partition < len(t.partitions):
                    continue
                try:
                    hw = t.partitions[partition].log.log_end_offset
                except Exception:  # noqa: BLE001 - a log closed by a topic deletion in between
                    continue
                lag.add_metric(labels, hw - committed_offset)
    return offset, lag


class _WithoutCreated:
    """The registry's families without the ``_created`` samples prometheus_client gives every
    counter and histogram label set (per registry, unlike its process-wide switch)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self):
        for family in self.registry.collect():
            if family.type in _CREATED_TYPES:
                family.samples = [sample for sample in family.samples if not sample.name.endswith("_created")]
            yield family


class Metrics:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.host: str | None = None
        self.port: int | None = None
        self._server: asyncio.AbstractServer | None = None
        r = self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter("kafkalite_requests", "Requests answered, by API, version and error", ["api", "version", "error"], registry=r)
        self.latency = Histogram("kafkalite_request_duration_seconds", "Time from dispatch to response, by API", ["api"], buckets=LATENCY_BUCKETS, registry=r)
        self.received = Counter("kafkalite_network_received_bytes", "Request bytes received, by listener", ["listener"], registry=r)
        self.sent = Counter("kafkalite_network_sent_bytes", "Response bytes sent, by listener", ["listener"], registry=r)
        self.connections = Gauge("kafkalite_connections", "Open client connections, by listener", ["listener"], registry=r)
        self.accepted = Counter("kafkalite_connections_accepted", "Client connections accepted, by listener", ["listener"], registry=r)
        self.bytes_in = Counter("kafkalite_topic_bytes_in", "Record bytes appended by Produce, by topic", ["topic"], registry=r)
        self.records_in = Counter("kafkalite_topic_records_in", "Records appended by Produce, by topic", ["topic"], registry=r)
        self.bytes_out = Counter("kafkalite_topic_bytes_out", "Record bytes returned by Fetch, by topic", ["topic"], registry=r)
        self.commits = Counter("kafkalite_offset_commits", "Partition offsets committed by OffsetCommit requests", [], registry=r)
        # SASL: no user names in labels (a client could make up any number of them)
        self.auth_ok = Counter("kafkalite_sasl_authentications", "Successful SASL authentications, by listener, mechanism and kind (authentication, reauthentication)", ["listener", "mechanism", "kind"], registry=r)
        self.auth_failed = Counter(
            "kafkalite_sasl_authentication_failures",
            "SASL connections closed for failing authentication, by listener, mechanism and reason "
            "(bad_credentials, unsupported_mechanism, illegal_state, malformed, oversized, expired_session)",
            ["listener", "mechanism", "reason"], registry=r,
        )
        self.tls_failed = Counter(
            "kafkalite_tls_handshake_failures",
            "TLS connections closed because their handshake failed, by listener and reason "
            "(protocol: not TLS or nothing in common; alert: the client refused, an unknown CA for one; "
            "certificate: the client's certificate refused; closed; timeout: ssl.handshake.timeout.ms)",
            ["listener", "reason"], registry=r,
        )
        self.state = _StateCollector(self)
        r.register(self.state)
        ProcessCollector(registry=r)
        self._children: dict = {}
        self._exposed = _WithoutCreated(r)

    # -- HTTP ---------------------------------------------------------------
    async def bind(self) -> None:
        """Bind the port, not serving yet: the broker binds every port before it loads its data."""
        cfg = self.broker.config
        host = cfg.metrics_host or (self.broker.specs[0].host or "0.0.0.0")
        self._server = await asyncio.start_server(self._serve, host, cfg.metrics_port, reuse_address=True, start_serving=False)
        self.host, self.port = host, self._server.sockets[0].getsockname()[1]

    async def serve(self) -> None:
        """Start answering scrapes, once the broker has loaded its data."""
        self.state.start()
        await self._server.start_serving()
        log.info("metrics listening", host=self.host, port=self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def render(self) -> bytes:
        return generate_latest(self._exposed)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            method, _, rest = head.decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, body, ctype = "405 Method Not Allowed", b"only GET\n", "text/plain"
            elif path in ("/metrics", "/"):
                status, body, ctype = "200 OK", self.render(), CONTENT_TYPE_LATEST
            else:
                status, body, ctype = "404 Not Found", b"metrics are at /metrics\n", "text/plain"
            head_out = f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            writer.write(head_out.encode("latin-1") + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    # -- the dispatch path ----------------------------------------------------
    def connection_opened(self, conn) -> None:
        name = conn.listener.name if conn.listener is not None else ""
        self.connections.labels(name).inc()
        self.accepted.labels(name).inc()

    def authentication(self, listener: str, mechanism: str | None, failure: str | None, reauth: bool) -> None:
        mechanism = mechanism if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER") else ("other" if mechanism else "none")
        if failure is None:
            self.auth_ok.labels(listener, mechanism, "reauthentication" if reauth else "authentication").inc()
        else:
            self.auth_failed.labels(listener, mechanism, failure).inc()

    def tls_handshake_failed(self, listener: str, reason: str) -> None:
        self.tls_failed.labels(listener, reason).inc()

    def connection_closed(self, conn) -> None:
        self.connections.labels(conn.listener.name if conn.listener is not None else "").dec()

    def observe(self, conn, event, body, error, seconds: float, sent: int) -> None:
        key, version = event.api_key, event.api_version
        if error is None:
            error = first_error(body) if body is not None else 0
        error = int(error)
        children = self._children.get((key, version, error))
        if children is None:
            name = api_name(key)
            children = self._children[(key, version, error)] = (
                self.requests.labels(name, str(version), _error_name(error)),
                self.latency.labels(name),
            )
        children[0].inc()
        children[1].observe(seconds)
        listener = conn.listener.name if conn.listener is not None else ""
        net = self._children.get(listener)
        if net is None:
            net = self._children[listener] = (self.received.labels(listener), self.sent.labels(listener))
        size = getattr(event, "size", 0)
        if size:
            net[0].inc(size)
        if sent:
            net[1].inc(sent)
        if key == 0:
            self._produced(event.body, body)
        elif key == 1 and isinstance(body, dict):
            for topic in body.get("responses") or ():
                n = sum(len(p.get("records") or b"") for p in topic.get("partitions") or ())
                if n:
                    self.bytes_out.labels(topic.get("topic") or "").inc(n)
        elif key == 8 and isinstance(body, dict):
            n = sum(1 for t in body.get("topics") or () for p in t.get("partitions") or () if not p.get("error_code"))
            if n:
                self.commits.inc(n)

    def _produced(self, request, body) -> None:
        responses = body.get("responses") if isinstance(body, dict) else None
        by_id = self.broker.cluster.by_id
        for i, td in enumerate(request.topic_data):
            resp = responses[i] if responses is not None and i < len(responses) else None
            if resp is not None:
                name = resp.get("name") or ""
                errors = [p.get("error_code") for p in resp.get("partition_responses") or ()]
            else:
                name = getattr(td, "name", None)
                if not name:
                    topic = by_id.get(getattr(td, "topic_id", None))
                    name = topic.name if topic is not None else ""
                errors = []
            nbytes = nrecords = 0
            for j, pd in enumerate(td.partition_data):
                if j < len(errors) and errors[j]:
                    continue
                b, r = batch_stats(pd.records)
                nbytes += b
                nrecords += r
            if nbytes and name:
                self.bytes_in.labels(name).inc(nbytes)
                self.records_in.labels(name).inc(nrecords)
