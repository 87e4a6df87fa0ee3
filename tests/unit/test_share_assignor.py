"""The ``simple`` share assignor (broker/coordinator/assignors/simple.py) against Kafka 4.4's own
SimpleAssignor: the same members (ids as Kafka's clients make them), topic and previous target go to
both, and every member must get the same partitions. Kafka's side is a small Java program compiled
here against the reference broker's jars (skipped without Java or those jars)."""

from __future__ import annotations

import base64
import json
import random
import shutil
import subprocess
import uuid

import pytest

from broker.coordinator.assignors.simple import assign
from tests import reference_kafka

JAVA = r"""
import java.util.*;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.*;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.apache.kafka.coordinator.group.modern.*;

public class SimpleCases {
    // one group a line: topic:partitions,... | member@topic+topic=topic:p.p/topic:p;... | HOMOGENEOUS or HETEROGENEOUS
    public static void main(String[] args) throws Exception {
        Scanner in = new Scanner(System.in);
        while (in.hasNextLine()) {
            String line = in.nextLine().trim();
            if (line.isEmpty()) continue;
            String[] f = line.split("\\|", -1);
            Map<Uuid, Integer> topics = new HashMap<>();
            for (String t : f[0].split(",")) topics.put(Uuid.fromString(t.split(":")[0]), Integer.parseInt(t.split(":")[1]));
            Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
            for (String m : f[1].split(";")) {
                String id = m.substring(0, m.indexOf('@'));
                String[] rest = m.substring(m.indexOf('@') + 1).split("=", -1);
                Set<Uuid> subs = new HashSet<>();
                for (String t : rest[0].split("\\+")) subs.add(Uuid.fromString(t));
                Map<Uuid, Set<Integer>> old = new HashMap<>();
                if (!rest[1].isEmpty()) {
                    for (String tp : rest[1].split("/")) {
                        Set<Integer> ps = new HashSet<>();
                        for (String p : tp.split(":")[1].split("\\.")) ps.add(Integer.parseInt(p));
                        old.put(Uuid.fromString(tp.split(":")[0]), ps);
                    }
                }
                members.put(id, new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(), subs, new Assignment(old)));
            }
            GroupSpec spec = new GroupSpecImpl(members, SubscriptionType.valueOf(f[2]), new HashMap<>());
            SubscribedTopicDescriber d = new SubscribedTopicDescriber() {
                public int numPartitions(Uuid id) { return topics.getOrDefault(id, -1); }
                public Set<String> racksForPartition(Uuid id, int p) { return Set.of(); }
            };
            GroupAssignment a = new SimpleAssignor().assign(spec, d);
            StringBuilder out = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<String, MemberAssignment> e : a.members().entrySet()) {
                out.append(first ? "" : ",").append('"').append(e.getKey()).append("\":{");
                boolean firstTopic = true;
                for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().partitions().entrySet()) {
                    if (t.getValue().isEmpty()) continue;
                    List<Integer> ps = new ArrayList<>(t.getValue());
                    Collections.sort(ps);
                    out.append(firstTopic ? "" : ",").append('"').append(t.getKey()).append("\":").append(ps);
                    firstTopic = false;
                }
                out.append("}");
                first = false;
            }
            System.out.println(out.append("}"));
        }
    }
}
"""


def _member_id(rng: random.Random) -> str:
    """A member id as Kafka's clients make them (Uuid.toString(): 22 characters of URL-safe base64)."""
    return base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")


def _cases() -> list[tuple[dict[uuid.UUID, int], dict[str, frozenset], dict[str, dict], bool]]:
    """Groups as (partitions per topic, subscriptions, previous target, homogeneous)."""
    rng = random.Random(932)
    out = []
    for members, partitions in [(1, 3), (3, 1), (2, 4), (3, 4), (5, 2), (4, 4), (7, 3), (10, 3), (20, 7), (3, 10), (40, 16), (17, 5)]:
        topic = uuid.UUID(int=rng.getrandbits(128))
        ids = [_member_id(rng) for _ in range(members)]
        subs = {m: frozenset([topic]) for m in ids}
        out.append(({topic: partitions}, subs, {}, True))
        # the same group again with a previous target: some members keep what they had, two are new
        first = assign(subs, {topic: partitions}, {})
        kept = {m: first[m] for m in ids[:-1]}
        again = ids[:-1] + [_member_id(rng) for _ in range(2)]
        out.append(({topic: partitions + 1}, {m: frozenset([topic]) for m in again}, kept, True))
    for members, counts in [(2, (2, 3)), (3, (1, 4)), (5, (2, 2, 3)), (8, (4, 1, 6)), (13, (3, 5))]:
        topics = [uuid.UUID(int=rng.getrandbits(128)) for _ in counts]
        ids = [_member_id(rng) for _ in range(members)]
        subs = {m: frozenset(t for t in topics if rng.random() < 0.6) or frozenset([topics[0]]) for m in ids}
        parts = dict(zip(topics, counts, strict=True))
        out.append((parts, subs, {}, False))
        first = assign(subs, parts, {}, homogeneous=False)
        again = ids[1:] + [_member_id(rng)]
        subs2 = {m: subs.get(m, frozenset(topics)) for m in again}
        out.append((parts, subs2, {m: first[m] for m in ids[1:]}, False))
    return out


def _line(parts, subs, previous, homogeneous) -> str:
    def spec(m):
        prev = "/".join(f"{_kafka_uuid(t)}:{'.'.join(map(str, sorted(ps)))}" for t, ps in previous.get(m, {}).items() if ps)
        return f"{m}@{'+'.join(_kafka_uuid(t) for t in sorted(subs[m], key=str))}={prev}"

    topics = ",".join(f"{_kafka_uuid(t)}:{n}" for t, n in parts.items())
    return f"{topics}|{';'.join(spec(m) for m in subs)}|{'HOMOGENEOUS' if homogeneous else 'HETEROGENEOUS'}"


@pytest.fixture(scope="module")
def kafka_simple(tmp_path_factory):
    ok, reason = reference_kafka.available()
    if not ok or shutil.which("javac") is None:
        pytest.skip(reason if not ok else "no javac")
    libs = reference_kafka.LIBS
    cp = ":".join(str(libs / j) for j in ("kafka-group-coordinator-4.4.0.jar", "kafka-group-coordinator-api-4.4.0.jar",
                                         "kafka-clients-4.4.0.jar", "kafka-server-common-4.4.0.jar", "kafka-coordinator-common-4.4.0.jar"))
    if reference_kafka.KAFKA_VERSION != "4.4.0":
        pytest.skip("the comparison is with Kafka 4.4.0's jars")
    cp += ":" + ":".join(str(p) for p in libs.glob("slf4j-api-*.jar"))
    work = tmp_path_factory.mktemp("simple-assignor")
    (work / "SimpleCases.java").write_text(JAVA)
    subprocess.run(["javac", "-cp", cp, "-d", str(work), str(work / "SimpleCases.java")], check=True, capture_output=True, timeout=180)

    def run(cases) -> list[dict]:
        done = subprocess.run(["java", "-cp", f"{work}:{cp}", "SimpleCases"], input="\n".join(_line(*c) for c in cases),
                              capture_output=True, text=True, timeout=180, check=True)
        return [json.loads(line) for line in done.stdout.splitlines()]

    return run


def _kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's Uuid text: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def test_simple_assignor_matches_kafka(kafka_simple):
    cases = _cases()
    want = kafka_simple(cases)
    for (parts, subs, previous, homogeneous), kafka in zip(cases, want, strict=True):
        ours = assign(subs, parts, previous, homogeneous=homogeneous)
        got = {m: {_kafka_uuid(t): sorted(ps) for t, ps in asg.items()} for m, asg in ours.items()}
        assert got == kafka, (len(subs), parts, homogeneous, bool(previous))
