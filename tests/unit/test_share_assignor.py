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
    public static void main(String[] args) throws Exception {
        Scanner in = new Scanner(System.in);
        while (in.hasNextLine()) {
            String line = in.nextLine().trim();
            if (line.isEmpty()) continue;
            // topicId numPartitions | member=p,p;member=;...
            String[] halves = line.split("\\|", -1);
            String[] head = halves[0].trim().split(" ");
            Uuid topic = Uuid.fromString(head[0]);
            int partitions = Integer.parseInt(head[1]);
            Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
            for (String m : halves[1].split(";")) {
                String[] kv = m.split("=", -1);
                Map<Uuid, Set<Integer>> old = new HashMap<>();
                if (!kv[1].isEmpty()) {
                    Set<Integer> ps = new HashSet<>();
                    for (String p : kv[1].split(",")) ps.add(Integer.parseInt(p));
                    old.put(topic, ps);
                }
                members.put(kv[0], new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(), Set.of(topic), new Assignment(old)));
            }
            GroupSpec spec = new GroupSpecImpl(members, SubscriptionType.HOMOGENEOUS, new HashMap<>());
            SubscribedTopicDescriber d = new SubscribedTopicDescriber() {
                public int numPartitions(Uuid id) { return id.equals(topic) ? partitions : -1; }
                public Set<String> racksForPartition(Uuid id, int p) { return Set.of(); }
            };
            GroupAssignment a = new SimpleAssignor().assign(spec, d);
            StringBuilder out = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<String, MemberAssignment> e : a.members().entrySet()) {
                List<Integer> ps = new ArrayList<>(e.getValue().partitions().getOrDefault(topic, Set.of()));
                Collections.sort(ps);
                out.append(first ? "" : ",").append('"').append(e.getKey()).append("\":").append(ps);
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


def _cases() -> list[tuple[uuid.UUID, int, list[str], dict[str, list[int]]]]:
    rng = random.Random(932)
    out = []
    for members, partitions in [(1, 3), (3, 1), (2, 4), (3, 4), (5, 2), (4, 4), (7, 3), (10, 3), (20, 7), (3, 10), (40, 16), (17, 5)]:
        topic = uuid.UUID(int=rng.getrandbits(128))
        ids = [_member_id(rng) for _ in range(members)]
        out.append((topic, partitions, ids, {}))
        # the same group again with a previous target: some members keep what they had, one is new
        first = assign({m: frozenset([topic]) for m in ids}, {topic: partitions}, {})
        previous = {m: sorted(first[m].get(topic, ())) for m in ids[:-1]}
        newcomers = [_member_id(rng) for _ in range(2)]
        out.append((topic, partitions + 1, ids[:-1] + newcomers, previous))
    return out


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
        lines = [f"{topic} {parts}|" + ";".join(f"{m}={','.join(map(str, prev.get(m, [])))}" for m in ids) for topic, parts, ids, prev in cases]
        java_topic = [_kafka_uuid(c[0]) for c in cases]
        lines = [line.replace(str(c[0]), java_topic[i], 1) for i, (line, c) in enumerate(zip(lines, cases, strict=True))]
        done = subprocess.run(["java", "-cp", f"{work}:{cp}", "SimpleCases"], input="\n".join(lines), capture_output=True, text=True, timeout=180, check=True)
        return [json.loads(line) for line in done.stdout.splitlines()]

    return run


def _kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's Uuid text: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def test_simple_assignor_matches_kafka(kafka_simple):
    cases = _cases()
    want = kafka_simple(cases)
    for (topic, partitions, ids, previous), kafka in zip(cases, want, strict=True):
        prev = {m: {topic: frozenset(ps)} for m, ps in previous.items() if ps}
        ours = assign({m: frozenset([topic]) for m in ids}, {topic: partitions}, prev)
        got = {m: sorted(ours[m].get(topic, ())) for m in ids}
        assert got == kafka, (len(ids), partitions, previous)
