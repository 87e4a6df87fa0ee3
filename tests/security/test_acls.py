"""ACLs with real clients, against kafkalite and the reference Apache Kafka (4.4) alike (issue 15, item 4).

Both brokers get the same properties: StandardAuthorizer, a PLAINTEXT listener
whose anonymous clients are super users (Kafka's own controller connection is
anonymous, so it must be one), and a SASL_PLAINTEXT listener with PLAIN users
alice, bob and admin (``super.users`` names User:admin). ACLs are made with
confluent-kafka's admin client on the PLAINTEXT listener, and with Kafka's own
``kafka-acls`` (org.apache.kafka.tools.AclCommand, among the reference broker's
jars from Maven Central). Every test
asserts the same outcome on both brokers (``acl_target`` and ``open_target``
are parametrised).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest

from broker.testing import BrokerThread
from tests import reference_kafka
from tests.wait import wait_until


USERS = {"alice": "alice-pw-1", "bob": "bob-pw-2", "admin": "admin-pw-3"}
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";"


def _free_port() -> int:
    from tests.ports import free_port

    return free_port()


def properties(allow_everyone: bool) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "allow.everyone.if.no.acl.found": "true" if allow_everyone else "false",
    }


class AclTarget:
    def __init__(self, kind: str, plaintext: str, sasl: str, handle) -> None:
        self.kind, self.plaintext, self.sasl, self.handle = kind, plaintext, sasl, handle

    def client(self, user: str) -> dict:
        return {"bootstrap.servers": self.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}

    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.plaintext})

    def create_topics(self, *names: str) -> None:
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # kept while its futures are waited on
        for fut in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
            fut.result(30)

    def add_acls(self, *bindings) -> None:
        """Create the bindings, then wait until the broker's authorizer shows them (Kafka's broker learns
        of them from its controller a moment after the answer)."""
        admin = self.admin()
        for fut in admin.create_acls(list(bindings)).values():
            fut.result(30)
        from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

        flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
        wait_until(lambda: set(bindings) <= set(admin.describe_acls(flt).result(30)), what=f"the ACLs shown by {self.kind}")


def _kafkalite(tmp_path_factory, allow_everyone: bool):
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **properties(allow_everyone)}
    b = BrokerThread(tmp_path_factory.mktemp("kafkalite-acls"), settings=settings).start()
    return AclTarget("kafkalite", b.listeners["PLAINTEXT"], b.listeners["SASL_PLAINTEXT"], b), b.close


def _kafka(tmp_path_factory, allow_everyone: bool):
    ok, reason = reference_kafka.available()
    if not ok:
        pytest.skip(reason)
    k = reference_kafka.ReferenceKafka(tmp_path_factory.mktemp("reference-kafka-acls"))
    k.port, k.controller_port, sasl = _free_port(), _free_port(), _free_port()
    k.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{k.port},SASL_PLAINTEXT://127.0.0.1:{sasl},CONTROLLER://127.0.0.1:{k.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{k.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        **properties(allow_everyone),
    })
    k.config["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
    k.start()
    return AclTarget("kafka", k.bootstrap, f"127.0.0.1:{sasl}", k), k.stop


@pytest.fixture(scope="module", params=["kafkalite", pytest.param("kafka", marks=pytest.mark.reference)])
def acl_target(request, tmp_path_factory):
    target, stop = (_kafkalite if request.param == "kafkalite" else _kafka)(tmp_path_factory, False)
    yield target
    stop()


@pytest.fixture(scope="module", params=["kafkalite", pytest.param("kafka", marks=pytest.mark.reference)])
def open_target(request, tmp_path_factory):
    target, stop = (_kafkalite if request.param == "kafkalite" else _kafka)(tmp_path_factory, True)
    yield target
    stop()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _acl(name, op, rtype="TOPIC", pattern="LITERAL", principal="User:alice", allow=True):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return AclBinding(getattr(ResourceType, rtype), name, getattr(ResourcePatternType, pattern), principal, "*", getattr(AclOperation, op),
                      AclPermissionType.ALLOW if allow else AclPermissionType.DENY)


def produce(target: AclTarget, user: str, topic: str) -> str:
    """Produce one record as ``user``: "delivered" or the error's name."""
    from confluent_kafka import Producer

    outcome = []
    p = Producer({**target.client(user), "message.timeout.ms": 20000, "topic.metadata.propagation.max.ms": 2000})
    p.produce(topic, b"v", callback=lambda err, msg: outcome.append("delivered" if err is None else err.name()))
    p.flush(30)
    assert outcome, "no delivery report"
    return outcome[0]


def consume(target: AclTarget, user: str, topic: str, group: str, want: int) -> tuple[int, str | None]:
    """(records read, first error's name) of a consumer in ``group``: until ``want`` records or an error."""
    from confluent_kafka import Consumer

    c = Consumer({**target.client(user), "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got, error = 0, None
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while got < want and error is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is None:
                got += 1
            elif not m.error().name().startswith("_"):  # librdkafka's own events (partition EOF) are not the broker's
                error = m.error().name()
    finally:
        c.close()
    return got, error


def test_producer_allowed_only_on_a_prefix(acl_target):
    prefix = _name("app") + "-"
    allowed, other = prefix + "orders", _name("other")
    acl_target.create_topics(allowed, other)
    acl_target.add_acls(_acl(prefix, "WRITE", pattern="PREFIXED"))
    assert produce(acl_target, "alice", allowed) == "delivered"
    assert produce(acl_target, "alice", other) == "TOPIC_AUTHORIZATION_FAILED"
    assert produce(acl_target, "bob", allowed) == "TOPIC_AUTHORIZATION_FAILED"


def test_a_consumer_denied_on_its_group_then_allowed(acl_target):
    topic, group = _name("reads"), _name("group")
    acl_target.create_topics(topic)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": acl_target.plaintext})  # anonymous: a super user
    for i in range(3):
        p.produce(topic, b"%d" % i)
    assert p.flush(30) == 0
    acl_target.add_acls(_acl(topic, "READ"))
    assert consume(acl_target, "alice", topic, group, 3) == (0, "GROUP_AUTHORIZATION_FAILED")
    acl_target.add_acls(_acl(group, "READ", rtype="GROUP"))
    assert consume(acl_target, "alice", topic, group, 3) == (3, None)


def test_a_deny_on_the_group_wins_over_an_allow_for_everyone(acl_target):
    topic, group = _name("denied"), _name("group")
    acl_target.create_topics(topic)
    acl_target.add_acls(_acl(topic, "READ"), _acl("*", "READ", rtype="GROUP", principal="User:*"), _acl(group, "READ", rtype="GROUP", allow=False))
    assert consume(acl_target, "alice", topic, group, 1) == (0, "GROUP_AUTHORIZATION_FAILED")


def test_a_super_user_needs_no_acl(acl_target):
    topic = _name("super")
    acl_target.create_topics(topic)
    assert produce(acl_target, "admin", topic) == "delivered"
    assert produce(acl_target, "bob", topic) == "TOPIC_AUTHORIZATION_FAILED"


def test_allow_everyone_if_no_acl_found(open_target):
    topic = _name("open")
    open_target.create_topics(topic)
    assert produce(open_target, "bob", topic) == "delivered"
    # once an ACL concerns the topic, only what it allows is allowed
    open_target.add_acls(_acl(topic, "WRITE"))
    assert produce(open_target, "alice", topic) == "delivered"
    assert produce(open_target, "bob", topic) == "TOPIC_AUTHORIZATION_FAILED"


def _kafka_acls(target: AclTarget, *args: str) -> str:
    # kafka-tools is among the reference broker's jars (tests/java/kafka-broker/pom.xml), at its version
    if not reference_kafka.available()[0] or not list(reference_kafka.LIBS.glob("kafka-tools-*.jar")):
        pytest.skip("kafka-acls needs Java and the reference broker's jars (kafka-tools)")
    java = shutil.which("java") or "java"
    proc = subprocess.run([java, "-Xmx256m", "-cp", f"{reference_kafka.LIBS}/*", "org.apache.kafka.tools.AclCommand",
                           "--bootstrap-server", target.plaintext, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_kafka_acls_adds_lists_and_removes(acl_target):
    prefix = _name("tool") + "-"
    resource = ["--topic", prefix, "--resource-pattern-type", "prefixed"]
    _kafka_acls(acl_target, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe", *resource)
    listed = _kafka_acls(acl_target, "--list", *resource)
    assert f"ResourcePattern(resourceType=TOPIC, name={prefix}, patternType=PREFIXED)" in listed
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    acl_target.create_topics(prefix + "x")
    # what kafka-acls made is what the broker enforces (Kafka's broker may learn of it a moment later)
    deadline = time.monotonic() + 30
    while (outcome := produce(acl_target, "alice", prefix + "x")) != "delivered" and time.monotonic() < deadline:
        pass
    assert outcome == "delivered"
    _kafka_acls(acl_target, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", *resource)
    listed = _kafka_acls(acl_target, "--list", *resource)
    assert "operation=WRITE" not in listed and "operation=DESCRIBE" in listed
    _kafka_acls(acl_target, "--remove", "--force", *resource)
    assert "User:alice" not in _kafka_acls(acl_target, "--list", *resource)


def test_acl_apis_answer_as_kafka(acl_target):
    """CreateAcls' validation, DescribeAcls' grouping, DeleteAcls' matches, and the cluster checks, by raw requests."""
    from protocol.errors import ErrorCode

    from .raw import Raw, plain_token

    name = _name("raw")
    acl = {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    creations = [
        {"resource_type": 2, "resource_name": name, "resource_pattern_type": 4, **acl},
        {"resource_type": 2, "resource_name": name, "resource_pattern_type": 4, **acl},  # the same again: kept once
        {"resource_type": 3, "resource_name": name, "resource_pattern_type": 3, **acl, "permission_type": 2},
        {"resource_type": 2, "resource_name": "", "resource_pattern_type": 3, **acl},
        {"resource_type": 4, "resource_name": "cluster", "resource_pattern_type": 3, **acl},
    ]
    valid_first = {"resource_type": 5, "resource_name": name, "resource_pattern_type": 3, **acl, "operation": 4}
    with Raw(acl_target.plaintext) as c:
        r = c.request(30, 3, {"creations": creations})
        assert [(x.error_code, x.error_message) for x in r.results] == [(ErrorCode.none, "")] * 3 + [
            (ErrorCode.invalid_request, "Invalid empty resource name"),
            (ErrorCode.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
        ]
        # ANY or MATCH where a binding needs a value: the whole request fails, and nothing is created
        for bad in ({"resource_type": 1}, {"resource_pattern_type": 2}, {"resource_pattern_type": 1}, {"operation": 1}, {"permission_type": 1}):
            r = c.request(30, 3, {"creations": [valid_first, {**creations[0], **bad}]})
            assert [(x.error_code, x.error_message) for x in r.results] == [(ErrorCode.unknown_server_error, None)] * 2, bad
        flt = {"resource_type_filter": 1, "resource_name_filter": name, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
        d = wait_until(lambda: r if len((r := c.request(29, 3, flt)).resources) >= 2 else None, what="the two bindings described")
        assert d.error_code == ErrorCode.none  # and no TRANSACTIONAL_ID binding: those requests failed whole
        assert sorted((x.resource_type, x.resource_name, x.pattern_type, [(a.principal, a.host, a.operation, a.permission_type) for a in x.acls]) for x in d.resources) == [
            (2, name, 4, [("User:alice", "*", 3, 3)]),
            (3, name, 3, [("User:alice", "*", 3, 2)]),
        ]
        # MATCH: the prefixed binding applies to a longer name; the group's does not
        d = c.request(29, 3, {**flt, "resource_type_filter": 2, "resource_name_filter": name + "-x", "pattern_type_filter": 2})
        assert [(x.resource_name, x.pattern_type) for x in d.resources] == [(name, 4)]
        # (an UNKNOWN field, code 0, closes the connection: test_an_unknown_code_closes_the_connection)
        gone = c.request(31, 3, {"filters": [{**flt, "resource_type_filter": 3}, {**flt, "resource_type_filter": 3}]})
        assert [[(m.resource_type, m.resource_name, m.permission_type) for m in f.matching_acls] for f in gone.filter_results] == [[(3, name, 2)]] * 2
    with Raw(acl_target.sasl) as c:  # alice: no ALTER or DESCRIBE on the cluster
        c.handshake("PLAIN")
        assert c.authenticate(plain_token("alice", USERS["alice"])).error_code == ErrorCode.none
        assert c.request(29, 3, flt).error_code == ErrorCode.cluster_authorization_failed
        assert [x.error_code for x in c.request(30, 3, {"creations": creations[:1]}).results] == [ErrorCode.cluster_authorization_failed]
        assert [x.error_code for x in c.request(31, 3, {"filters": [flt]}).filter_results] == [ErrorCode.cluster_authorization_failed]


def test_metadata_lists_topics_refused_describe_last(acl_target):
    """A Metadata request by name: the topics described first, then those refused CREATE (auto-creation
    asked for, an invalid name too), then those refused DESCRIBE, whatever the order asked (four topics:
    Kafka's Scala sets keep the request's order within each group up to four)."""
    import uuid as _uuid

    from protocol.errors import ErrorCode

    from .raw import Raw, plain_token

    prefix = _name("md") + "-"
    hidden, shown, missing, invalid = _name("hidden"), prefix + "shown", prefix + "missing", prefix + "not valid!"
    acl_target.create_topics(hidden, shown)
    acl_target.add_acls(_acl(prefix, "DESCRIBE", pattern="PREFIXED"))
    zero = _uuid.UUID(int=0)
    with Raw(acl_target.sasl) as c:
        c.handshake("PLAIN")
        assert c.authenticate(plain_token("alice", USERS["alice"])).error_code == ErrorCode.none
        r = c.request(3, 12, {"topics": [{"topic_id": zero, "name": n} for n in (hidden, missing, shown, invalid)],
                              "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
        # (the codec reads the zero id as None): no id for a topic the client may not see
        assert [(t.name, t.error_code, t.topic_id in (None, zero), len(t.partitions)) for t in r.topics] == [
            (shown, ErrorCode.none, False, 1),
            (missing, ErrorCode.topic_authorization_failed, True, 0),
            (invalid, ErrorCode.topic_authorization_failed, True, 0),
            (hidden, ErrorCode.topic_authorization_failed, True, 0),
        ]
        # without auto-creation: the topics that exist, then those that do not (unknown, invalid), then the refused
        r = c.request(3, 12, {"topics": [{"topic_id": zero, "name": n} for n in (hidden, missing, shown, invalid)],
                              "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        # Kafka 4.4 gathers the topics that do not exist in a hash set: their order between themselves follows
        # the (random) names' hashes, so only the groups' order is compared
        got = [(t.name, t.error_code) for t in r.topics]
        assert got[0] == (shown, ErrorCode.none) and got[3] == (hidden, ErrorCode.topic_authorization_failed)
        assert sorted(got[1:3]) == sorted([(missing, ErrorCode.unknown_topic_or_partition),
                                           (invalid, ErrorCode.invalid_topic_exception)])


_UNKNOWN_CASES = [
    # (api, the request's body with one field set to code 0, UNKNOWN)
    *((30, field) for field in ("resource_type", "resource_pattern_type", "operation", "permission_type")),
    *((29, field) for field in ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")),
    *((31, field) for field in ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")),
]


def _acl_request(api: int, **fields) -> dict:
    creation = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    flt = {"resource_type_filter": 2, "resource_name_filter": "t", "pattern_type_filter": 3, "principal_filter": None, "host_filter": None, "operation": 3, "permission_type": 3}
    if api == 30:
        return {"creations": [{**creation, **fields}]}
    if api == 29:
        return {**flt, **fields}
    return {"filters": [{**flt, **fields}]}


@pytest.mark.parametrize(("api", "field"), _UNKNOWN_CASES, ids=[f"{a}-{f}" for a, f in _UNKNOWN_CASES])
def test_an_unknown_code_closes_the_connection(acl_target, api, field):
    """UNKNOWN (0) as a resource type, pattern type, operation or permission: Kafka's request classes
    refuse it while parsing, and the broker closes the connection without an answer (before any
    authorization: alice, who may not touch ACLs at all, is not told so)."""
    from protocol.errors import ErrorCode

    from .raw import Raw, plain_token

    with Raw(acl_target.plaintext) as c:
        c.send(api, 3, _acl_request(api, **{field: 0}))
        assert c.closed()
    with Raw(acl_target.sasl) as c:
        c.handshake("PLAIN")
        assert c.authenticate(plain_token("alice", USERS["alice"])).error_code == ErrorCode.none
        c.send(api, 3, _acl_request(api, **{field: 0}))
        assert c.closed()


def test_a_code_out_of_range_is_unknown_to_the_handler(acl_target):
    """A code Kafka has no name for (99) passes the parser's check, which compares with 0, and
    becomes UNKNOWN in the handler: INVALID_REQUEST with the handler's message."""
    from protocol.errors import ErrorCode

    from .raw import Raw

    with Raw(acl_target.plaintext) as c:
        d = c.request(29, 3, _acl_request(29, resource_type_filter=99))
        e = c.request(29, 3, _acl_request(29, operation=99))
        f = c.request(31, 3, _acl_request(31, pattern_type_filter=99))
        g = c.request(30, 3, _acl_request(30, permission_type=99))
    assert (d.error_code, d.error_message, list(d.resources)) == (ErrorCode.none, "", [])  # matches nothing
    assert (e.error_code, e.error_message, list(e.resources)) == (ErrorCode.none, "", [])
    assert [(x.error_code, x.error_message) for x in f.filter_results] == [(ErrorCode.invalid_request, "Unknown patternFilter.")]
    assert [(x.error_code, x.error_message) for x in g.results] == [(ErrorCode.invalid_request, "Invalid permissionType UNKNOWN")]
