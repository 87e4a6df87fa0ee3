"""SASL requests where the conformance brokers can take them: their PLAINTEXT listener (where Kafka's
request handler answers SaslHandshake and SaslAuthenticate with ILLEGAL_SASL_STATE), and SCRAM
credentials through DescribeUserScramCredentials and AlterUserScramCredentials.

The scenarios marked ``listener="SASL_PLAINTEXT"`` run on a pair of brokers with a SASL_PLAINTEXT
listener (conftest's ``conformance_sasl_brokers``): they log in with SaslHandshake and
SaslAuthenticate PLAIN, then run group APIs on the authenticated connection. The SASL listeners'
own behaviour in depth (unsupported mechanism, bad credentials, the states of the exchange,
re-authentication) is compared with Kafka 4.1 in tests/security/test_sasl_protocol.py.
"""

from __future__ import annotations

from ..driver import Closed, Driver
from ..registry import scenario
from ..steps import cghb, cghb_summary, describe_groups, describe_summary, heartbeat, join_new, join_summary, leave, leave_summary, sync, sync_summary


def _log_in_observed(d: Driver, name: str) -> None:
    """The login's answers, observed: SaslHandshake v1 (PLAIN), SaslAuthenticate v2."""
    user, password = d.login
    c = d.unauthenticated(name)
    r = c.request(17, 1, {"mechanism": "PLAIN"})
    d.obs("handshake", error=r.error_code, mechanisms=list(r.mechanisms))
    r = c.request(36, 2, {"auth_bytes": b"\0" + user.encode() + b"\0" + password.encode()})
    d.obs("authenticate", error=r.error_code, message=r.error_message, auth_bytes=r.auth_bytes, session_lifetime=r.session_lifetime)


@scenario("sasl", listener="SASL_PLAINTEXT")
def login_then_classic_group(d: Driver):
    """PLAIN login, then a classic group on that connection: join (KIP-394 round trip), sync, heartbeat, describe, leave."""
    _log_in_observed(d, "main")
    g = d.group()
    first, final = join_new(d, "main", g)
    d.obs("join-first", error=first.error_code)
    d.obs("join", **join_summary(d, final))
    r = sync(d, "main", g, final.generation_id, final.member_id, {final.member_id: b"assignment"})
    d.obs("sync", **sync_summary(d, r))
    d.obs("heartbeat", error=heartbeat(d, "main", g, final.generation_id, final.member_id).error_code)
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))
    d.obs("leave", **leave_summary(d, leave(d, "main", g, [(final.member_id, None)])))


@scenario("sasl", listener="SASL_PLAINTEXT")
def login_then_consumer_group(d: Driver):
    """PLAIN login, then a KIP-848 member: ConsumerGroupHeartbeat join on a new topic's partitions, then leave."""
    _log_in_observed(d, "main")
    g = d.group()
    t = d.create_topic("t", 2)
    r = cghb(d, g, "", 0, topics=[t], owned=[])
    d.obs("join", **cghb_summary(d, r))
    r = cghb(d, g, r.member_id, -1)
    d.obs("leave", error=r.error_code, epoch=r.member_epoch)


@scenario("sasl", listener="SASL_PLAINTEXT")
def group_request_before_login(d: Driver):
    """A group request on a SASL listener before SaslHandshake: the connection is closed without an answer."""
    c = d.unauthenticated("early")
    c.send(11, 9, {"group_id": d.group(), "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "", "group_instance_id": None,
                   "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}], "reason": None})
    try:
        c.recv()
        d.obs("answered")
    except Closed:
        d.obs("closed")
    r = d.req(18, 3, {"client_software_name": "cf", "client_software_version": "1"})  # a new, logged-in connection works
    d.obs("after", error=r.error_code)


@scenario("sasl")
def handshake_on_plaintext(d: Driver):
    """SaslHandshake v0 and v1 on a PLAINTEXT listener: ILLEGAL_SASL_STATE, no mechanisms; the connection stays."""
    for v in (0, 1):
        r = d.req(17, v, {"mechanism": "PLAIN"})
        d.obs(f"v{v}", error=r.error_code, mechanisms=list(r.mechanisms))
    r = d.req(18, 3, {"client_software_name": "cf", "client_software_version": "1"})
    d.obs("still-open", error=r.error_code)


@scenario("sasl")
def authenticate_on_plaintext(d: Driver):
    """SaslAuthenticate v0-2 on a PLAINTEXT listener: ILLEGAL_SASL_STATE with Kafka's message."""
    for v in (0, 1, 2):
        r = d.req(36, v, {"auth_bytes": b"\0user\0password"})
        d.obs(f"v{v}", error=r.error_code, message=r.error_message, auth_bytes=r.auth_bytes,
              session_lifetime=getattr(r, "session_lifetime", None))


@scenario("sasl")
def scram_credentials(d: Driver):
    """AlterUserScramCredentials' validation (iterations, mechanism, empty name, duplicates, deleting
    what does not exist), then DescribeUserScramCredentials of what was made and what was not."""
    salt, salted = b"s" * 16, b"p" * 64

    def up(name, mechanism=1, iterations=4096):
        return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt, "salted_password": salted}

    r = d.req(51, 0, {
        "deletions": [{"name": d.group("gone"), "mechanism": 1}, {"name": d.group("bad-mech"), "mechanism": 0}],
        "upsertions": [up(d.group("few"), iterations=4095), up(d.group("many"), 2, 16385), up(d.group("edge"), 2, 16384),
                       up(""), up(d.group("twice")), up(d.group("twice"), 2), up(d.group("ok"))],
    })
    d.obs("alter", results=sorted(([d.strip(x.user), x.error_code.name, x.error_message] for x in r.results), key=lambda x: x[0]))
    _wait(d, {"ok": [[1, 4096]], "edge": [[2, 16384]]})  # Kafka's broker learns of them from its controller a moment later
    r = d.req(51, 0, {"deletions": [], "upsertions": [up(d.group("ok"), 2, 8192)]})
    d.obs("second-mechanism", results=[[d.strip(x.user), x.error_code.name, x.error_message] for x in r.results])
    _wait(d, {"ok": [[1, 4096], [2, 8192]]})
    r = d.req(50, 0, {"users": [{"name": d.group("ok")}, {"name": d.group("edge")}, {"name": d.group("few")}, {"name": d.group("edge")}]})
    d.obs("describe", error=r.error_code, message=r.error_message,
          results=sorted(([d.strip(x.user), x.error_code.name, x.error_message, sorted([i.mechanism, i.iterations] for i in x.credential_infos)] for x in r.results), key=lambda x: x[0]))
    r = d.req(51, 0, {"deletions": [{"name": d.group("ok"), "mechanism": 1}, {"name": d.group("edge"), "mechanism": 2}], "upsertions": []})
    d.obs("delete", results=sorted(([d.strip(x.user), x.error_code.name, x.error_message] for x in r.results), key=lambda x: x[0]))
    _wait(d, {"ok": [[2, 8192]], "edge": []})
    r = d.req(50, 0, {"users": [{"name": d.group("ok")}, {"name": d.group("edge")}]})
    d.obs("after-delete", results=sorted(([d.strip(x.user), x.error_code.name, sorted([i.mechanism, i.iterations] for i in x.credential_infos)] for x in r.results), key=lambda x: x[0]))


def _wait(d: Driver, expected: dict[str, list]) -> None:
    """Until DescribeUserScramCredentials shows ``expected`` (label -> [[mechanism, iterations]...], [] for none)."""

    def shown():
        r = d.req(50, 0, {"users": [{"name": d.group(label)} for label in expected]})
        got = {d.strip(x.user): sorted([i.mechanism, i.iterations] for i in x.credential_infos) for x in r.results}
        return got == expected

    d.until(shown, what="SCRAM credentials to show")


@scenario("sasl")
def acl_apis_without_authorizer(d: Driver):
    """CreateAcls, DescribeAcls and DeleteAcls v1-3 on a broker without an authorizer: SECURITY_DISABLED, Kafka's messages."""
    flt = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    creation = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    for v in (1, 2, 3):
        r = d.req(29, v, flt)
        d.obs(f"describe-v{v}", error=r.error_code, message=r.error_message, resources=len(r.resources))
        r = d.req(30, v, {"creations": [creation, {**creation, "resource_name": ""}]})
        d.obs(f"create-v{v}", results=[[x.error_code, x.error_message] for x in r.results])
        r = d.req(31, v, {"filters": [flt, {**flt, "resource_type_filter": 2}]})
        d.obs(f"delete-v{v}", results=[[x.error_code, x.error_message, len(x.matching_acls)] for x in r.filter_results])
