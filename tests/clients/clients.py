"""One adapter per client of the matrix, all with the same two operations.

``produce(bootstrap, topic, count, partitions, prefix)`` writes record i (key
``k<i>``, value ``<prefix>-<i>``) to partition ``i % partitions``;
``consume(bootstrap, topic, group, max_records, commit)`` joins ``group``, reads
``max_records`` records, commits what it read (if ``commit``) and leaves. Both
return a ``harness.Run`` whose events are normalised to the harnesses' JSON
shapes: ``assigned`` ({"partitions": [[topic, p], ...]}), ``record`` (partition,
offset, key, value), ``committed`` ({"offsets": [[topic, p, next], ...]}, only
from clients that commit explicitly).
"""

from __future__ import annotations

import json
import re

from tests.clients import harness
from tests.clients.toolchains import Toolchain

TIMEOUT_S = 60  # bound of every client run


class GoClient:
    """franz-go or segmentio/kafka-go, through tests/clients/go/<binary>/main.go."""

    def __init__(self, toolchain: Toolchain, binary: str, name: str, protocol: str = "classic") -> None:
        self.binary = toolchain.paths[binary]
        self.name = name
        self.version = toolchain.versions[name]
        self.protocol = protocol

    def produce(self, bootstrap: str, topic: str, count: int, partitions: int, prefix: str = "v") -> harness.Run:
        return harness.run([self.binary, "produce", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count),
                            "--partitions", str(partitions), "--prefix", prefix, "--timeout", str(TIMEOUT_S)], TIMEOUT_S + 10)

    def consume(self, bootstrap: str, topic: str, group: str, max_records: int, commit: bool = True, client_id: str | None = None) -> harness.Run:
        argv = [self.binary, "consume", "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--max-records", str(max_records),
                "--timeout", str(TIMEOUT_S), "--client-id", client_id or f"matrix-{self.name.replace('/', '-')}"]
        if self.protocol != "classic":
            argv += ["--protocol", self.protocol]
        if commit:
            argv.append("--commit")
        return harness.run(argv, TIMEOUT_S + 10)


class NodeClient:
    """kafkajs, through tests/clients/node/harness.js."""

    name = "kafkajs"

    def __init__(self, toolchain: Toolchain) -> None:
        self.argv = [toolchain.paths["node"], toolchain.paths["harness"]]
        self.version = toolchain.versions["kafkajs"]

    def produce(self, bootstrap: str, topic: str, count: int, partitions: int, prefix: str = "v") -> harness.Run:
        return harness.run([*self.argv, "produce", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count),
                            "--partitions", str(partitions), "--prefix", prefix, "--timeout", str(TIMEOUT_S)], TIMEOUT_S + 10)

    def consume(self, bootstrap: str, topic: str, group: str, max_records: int, commit: bool = True, client_id: str | None = None) -> harness.Run:
        argv = [*self.argv, "consume", "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--max-records", str(max_records),
                "--timeout", str(TIMEOUT_S), "--client-id", client_id or "matrix-kafkajs"]
        if commit:
            argv.append("--commit")
        return harness.run(argv, TIMEOUT_S + 10)


_KCAT_ASSIGNED = re.compile(r"rebalanced \(memberid [^)]*\): assigned: (.*)$")


class KcatClient:
    """kcat (librdkafka) run directly: -P reads ``key:value`` lines, -C/-G print JSON (-J).

    In -G (balanced consumer) mode kcat leaves offset commits to librdkafka's
    auto-commit, which commits the offsets of the records it handed out when the
    consumer closes after ``-c N`` records.
    """

    name = "kcat"

    def __init__(self, toolchain: Toolchain) -> None:
        self.kcat = toolchain.paths["kcat"]
        self.version = toolchain.versions["kcat"]

    def produce(self, bootstrap: str, topic: str, count: int, partitions: int, prefix: str = "v") -> harness.Run:
        events: list[dict] = []
        runs = []
        for p in range(partitions):
            keys = [i for i in range(count) if i % partitions == p]
            lines = "".join(f"k{i}:{prefix}-{i}\n" for i in keys)
            r = harness.run([self.kcat, "-P", "-b", bootstrap, "-t", topic, "-p", str(p), "-K:", "-X", "acks=all",
                             "-X", "client.id=matrix-kcat"], TIMEOUT_S, stdin=lines, parse=False)
            runs.append(r)
            events += [{"event": "produced", "topic": topic, "partition": p, "key": f"k{i}"} for i in keys]
        return harness.Run(runs[0].argv, 0, events + [{"event": "done", "count": count}],
                           "".join(r.stderr for r in runs), sum(r.seconds for r in runs))

    @staticmethod
    def _records(r: harness.Run) -> list[dict]:
        out = []
        for line in r.events[0]["text"].splitlines():
            if line.strip():
                m = json.loads(line)
                out.append({"event": "record", "topic": m["topic"], "partition": m["partition"], "offset": m["offset"],
                            "key": m["key"], "value": m["payload"]})
        return out

    def read_all(self, bootstrap: str, topic: str) -> harness.Run:
        """The simple (group-less) consumer: every record from the beginning to the end of each partition."""
        r = harness.run([self.kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q"], TIMEOUT_S, parse=False)
        return harness.Run(r.argv, r.rc, self._records(r), r.stderr, r.seconds)

    def consume(self, bootstrap: str, topic: str, group: str, max_records: int, commit: bool = True, client_id: str | None = None) -> harness.Run:
        argv = [self.kcat, "-b", bootstrap, "-G", group, "-J", "-c", str(max_records), "-X", "auto.offset.reset=earliest",
                "-X", f"client.id={client_id or 'matrix-kcat'}", "-X", f"enable.auto.commit={'true' if commit else 'false'}", topic]
        r = harness.run(argv, TIMEOUT_S, parse=False)
        events = []
        for line in r.stderr.splitlines():
            m = _KCAT_ASSIGNED.search(line)
            if m:
                parts = [re.match(r"\s*(\S+) \[(\d+)\]", x) for x in m.group(1).split(",")]
                events.append({"event": "assigned", "partitions": [[x.group(1), int(x.group(2))] for x in parts if x]})
        return harness.Run(argv, r.rc, events + self._records(r), r.stderr, r.seconds)
