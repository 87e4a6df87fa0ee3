"""Handlers with ACLs on (broker/security/authorizer.py): Kafka's operations and error codes.

In-process brokers, requests built by kio and given to the handlers with a
principal, as tests/unit/test_codec_strict.py does; every answer is also built
and encoded at its version (the refusal shapes are hand-made).
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from broker.handlers import HANDLERS, RequestContext, supported_versions
from broker.logs import get_logger
from broker.security.authorizer import CLASS_NAME, AclBinding, Operation as Op, PatternType as PT, Permission as P, ResourceType as RT
from protocol.codec import build, request_class
from protocol.connection import Request
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from tests.unit.test_codec_strict import _check, _requests

ALICE = "User:alice"
LOG = get_logger("acl-test")


async def ask(server, api_key: int, version: int, body: dict, principal: str = ALICE) -> dict | None:
    req = build(request_class(api_key, version), body)
    conn = SimpleNamespace(peer="127.0.0.1:1", draining=False, sends_files=lambda: False, listener=None, log=LOG, identify=lambda software: None, principal=principal)
    ctx = RequestContext(server, conn, LOG, request=Request(api_key, version, 1, "acl-test", req, 0))
    answer = await asyncio.wait_for(HANDLERS[api_key].handle(ctx, req), 20)
    if answer is not None:
        _check(api_key, version, answer)
    return answer


def allow(name, op, rtype=RT.TOPIC, pattern=PT.LITERAL, perm=P.ALLOW, principal=ALICE):
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def run(coro):
    return asyncio.run(coro)


async def _broker(acls, **settings):
    from broker.testing import Broker

    b = Broker(settings={"authorizer.class.name": CLASS_NAME, "super.users": "User:admin", "group.initial.rebalance.delay.ms": 0, **settings})
    await b.start()
    await b.create_topic("app-orders", 1)
    await b.create_topic("secret", 1)
    await b.server.acls.create(acls)
    return b


def _batch() -> bytes:
    return build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=b"k", value=b"v")])


def _produce(*topics):
    return {"acks": -1, "timeout": 5000, "transactional_id": None, "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": _batch()}]} for t in topics]}


def test_every_handler_refuses_a_principal_without_acls_with_answers_that_build():
    """No ACL at all: every API at every version answers (no handler raises) and every answer builds."""

    async def go():
        b = await _broker([])
        try:
            topic_id = b.cluster.topics["app-orders"].topic_id
            asked = set()
            for api_key, (lo, hi) in sorted(supported_versions().items()):
                for version in range(lo, hi + 1):
                    body = _requests("app-orders", topic_id, f"g-{api_key}-{version}", version, _batch()).get(api_key)
                    if body is not None:
                        await ask(b.server, api_key, version, body)
                        asked.add(api_key)
            return asked
        finally:
            await b.stop()

    asked = run(go())
    assert {0, 1, 2, 3, 9, 10, 19, 20, 22, 29, 30, 31, 32, 37, 60} <= asked


def test_produce_allowed_on_a_prefix_only():
    async def go():
        b = await _broker([allow("app-", Op.WRITE, pattern=PT.PREFIXED)])
        try:
            answer = await ask(b.server, 0, 9, _produce("app-orders", "secret", "app-missing"))
            codes = {r["name"]: r["partition_responses"][0]["error_code"] for r in answer["responses"]}
            admin = await ask(b.server, 0, 9, _produce("secret"), principal="User:admin")
            return codes, admin["responses"][0]["partition_responses"][0]["error_code"], b.cluster.topics["app-orders"].partitions[0].log.log_end_offset
        finally:
            await b.stop()

    codes, admin, end = run(go())
    assert codes == {"app-orders": ErrorCode.none, "secret": ErrorCode.topic_authorization_failed, "app-missing": ErrorCode.unknown_topic_or_partition}
    assert admin == ErrorCode.none and end == 1


def test_fetch_metadata_and_list_offsets_follow_read_and_describe():
    async def go():
        b = await _broker([allow("app-orders", Op.READ)])
        try:
            fetch = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                     "topics": [{"topic": t, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1, "log_start_offset": -1}]} for t in ("app-orders", "secret")],
                     "forgotten_topics_data": [], "rack_id": ""}
            f = await ask(b.server, 1, 12, fetch)
            fetched = {r["topic"]: r["partitions"][0]["error_code"] for r in f["responses"]}
            md = await ask(b.server, 3, 12, {"topics": [{"name": "app-orders", "topic_id": None}, {"name": "secret", "topic_id": None}, {"name": "app-new", "topic_id": None}],
                                              "allow_auto_topic_creation": True, "include_topic_authorized_operations": True})
            described = {t["name"]: (t["error_code"], t.get("topic_authorized_operations")) for t in md["topics"]}
            every = await ask(b.server, 3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
            lo = await ask(b.server, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]} for t in ("app-orders", "secret")]})
            listed = {t["name"]: t["partitions"][0]["error_code"] for t in lo["topics"]}
            return fetched, described, [t["name"] for t in every["topics"]], listed, "app-new" in b.cluster.topics
        finally:
            await b.stop()

    fetched, described, every, listed, created = run(go())
    assert fetched == {"app-orders": ErrorCode.none, "secret": ErrorCode.topic_authorization_failed}
    assert described["app-orders"] == (ErrorCode.none, (1 << Op.READ) | (1 << Op.DESCRIBE))
    assert described["secret"][0] == ErrorCode.topic_authorization_failed
    assert described["app-new"][0] == ErrorCode.topic_authorization_failed and not created  # auto-creation needs CREATE
    assert every == ["app-orders"]
    assert listed == {"app-orders": ErrorCode.none, "secret": ErrorCode.topic_authorization_failed}


def test_auto_creation_with_create_on_the_cluster():
    async def go():
        b = await _broker([allow("kafka-cluster", Op.CREATE, rtype=RT.CLUSTER), allow("new-", Op.DESCRIBE, pattern=PT.PREFIXED)])
        try:
            md = await ask(b.server, 3, 12, {"topics": [{"name": "new-1", "topic_id": None}], "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
            return md["topics"][0]["error_code"], "new-1" in b.cluster.topics
        finally:
            await b.stop()

    assert run(go()) == (ErrorCode.none, True)


def test_group_apis_need_read_on_the_group_and_commits_read_on_the_topic():
    async def go():
        b = await _broker([allow("app-orders", Op.READ), allow("mine", Op.READ, rtype=RT.GROUP)])
        try:
            join = {"group_id": "theirs", "session_timeout": 10_000, "rebalance_timeout": 10_000, "member_id": "", "group_instance_id": None,
                    "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}], "reason": None}
            denied_join = (await ask(b.server, 11, 9, join))["error_code"]
            fc = await ask(b.server, 10, 4, {"key_type": 0, "coordinator_keys": ["theirs", "mine"]})
            coordinators = {c["key"]: c["error_code"] for c in fc["coordinators"]}
            commit = {"group_id": "mine", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "retention_time": -1,
                      "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]} for t in ("app-orders", "secret")]}
            committed = {t["name"]: t["partitions"][0]["error_code"] for t in (await ask(b.server, 8, 9, commit))["topics"]}
            theirs = (await ask(b.server, 8, 9, {**commit, "group_id": "theirs"}))["topics"][0]["partitions"][0]["error_code"]
            of = await ask(b.server, 9, 9, {"require_stable": False, "groups": [{"group_id": g, "member_id": None, "member_epoch": -1, "topics": [{"name": t, "partition_indexes": [0]} for t in ("app-orders", "secret")]} for g in ("mine", "theirs")]})
            fetched = {g["group_id"]: (g["error_code"], {t["name"]: t["partitions"][0]["error_code"] for t in g["topics"]}) for g in of["groups"]}
            hb = await ask(b.server, 68, 0, {"group_id": "theirs", "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None, "rebalance_timeout": 30_000,
                                              "subscribed_topic_names": ["app-orders"], "server_assignor": None, "topic_partitions": []})
            dg = await ask(b.server, 15, 5, {"groups": ["mine", "theirs"], "include_authorized_operations": True})
            described = {g["group_id"]: (g["error_code"], g["authorized_operations"]) for g in dg["groups"]}
            return denied_join, coordinators, committed, theirs, fetched, hb["error_code"], described
        finally:
            await b.stop()

    denied_join, coordinators, committed, theirs, fetched, hb, described = run(go())
    assert denied_join == ErrorCode.group_authorization_failed
    assert coordinators == {"theirs": ErrorCode.group_authorization_failed, "mine": ErrorCode.none}
    assert committed == {"app-orders": ErrorCode.none, "secret": ErrorCode.topic_authorization_failed}
    assert theirs == ErrorCode.group_authorization_failed
    assert fetched["theirs"][0] == ErrorCode.group_authorization_failed
    assert fetched["mine"] == (ErrorCode.none, {"app-orders": ErrorCode.none, "secret": ErrorCode.topic_authorization_failed})
    assert hb == ErrorCode.group_authorization_failed
    assert described["theirs"][0] == ErrorCode.group_authorization_failed
    assert described["mine"] == (ErrorCode.none, (1 << Op.READ) | (1 << Op.DESCRIBE))


def test_producer_ids_transactions_and_admin_apis():
    async def go():
        b = await _broker([allow("app-orders", Op.WRITE), allow("tx-", Op.WRITE, rtype=RT.TRANSACTIONAL_ID, pattern=PT.PREFIXED)])
        try:
            idem = (await ask(b.server, 22, 5, {"transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}))["error_code"]
            idem_bob = (await ask(b.server, 22, 5, {"transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}, principal="User:bob"))["error_code"]
            txn = (await ask(b.server, 22, 5, {"transactional_id": "other", "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}))["error_code"]
            txn_ok = (await ask(b.server, 22, 5, {"transactional_id": "tx-1", "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}))["error_code"]
            ct = await ask(b.server, 19, 7, {"topics": [{"name": "app-x", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout": 5000, "validate_only": False})
            dt = await ask(b.server, 20, 6, {"topics": [{"name": "secret", "topic_id": None}], "timeout": 5000})
            cp = await ask(b.server, 37, 3, {"topics": [{"name": "secret", "count": 3, "assignments": None}], "timeout": 5000, "validate_only": False})
            dc = await ask(b.server, 60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
            acl = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
            da = await ask(b.server, 29, 3, acl)
            da_admin = await ask(b.server, 29, 3, acl, principal="User:admin")
            return (idem, idem_bob, txn, txn_ok, ct["topics"][0]["error_code"], dt["responses"][0]["error_code"], cp["results"][0]["error_code"],
                    dc["cluster_authorized_operations"], da["error_code"], len(da_admin["resources"]))
        finally:
            await b.stop()

    idem, idem_bob, txn, txn_ok, created, deleted, grown, cluster_ops, described, listed = run(go())
    assert idem == ErrorCode.none  # WRITE on some topic is enough for an idempotent producer
    assert idem_bob == ErrorCode.cluster_authorization_failed
    assert txn == ErrorCode.transactional_id_authorization_failed
    # allowed: past the check, to the coordinator (which may still be loading its new partition)
    assert txn_ok in (ErrorCode.none, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available)
    assert created == deleted == grown == ErrorCode.topic_authorization_failed
    assert cluster_ops == 0 and described == ErrorCode.cluster_authorization_failed and listed == 2


def test_without_an_authorizer_everything_is_allowed_and_acl_apis_are_disabled():
    async def go():
        from broker.testing import Broker

        async with Broker() as b:
            await b.create_topic("secret", 1)
            produced = (await ask(b.server, 0, 9, _produce("secret")))["responses"][0]["partition_responses"][0]["error_code"]
            created = (await ask(b.server, 30, 3, {"creations": [{"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": ALICE, "host": "*", "operation": 3, "permission_type": 3}]}))
            dc = await ask(b.server, 60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
            return produced, created["results"][0]["error_code"], dc["cluster_authorized_operations"], b.server.authorizer

    produced, created, ops, authz = run(go())
    assert produced == ErrorCode.none and created == ErrorCode.security_disabled and authz is None
    assert ops == sum(1 << op for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE))


@pytest.mark.parametrize("perm", [P.DENY, P.ALLOW])
def test_acls_survive_a_restart_and_only_cluster_alter_may_create_them(tmp_path, perm):
    creation = {"resource_type": 2, "resource_name": "app-", "resource_pattern_type": 4, "principal": ALICE, "host": "*", "operation": 4, "permission_type": int(perm)}

    async def go():
        from broker.testing import Broker

        settings = {"authorizer.class.name": CLASS_NAME, "super.users": "User:admin"}
        async with Broker(settings=settings, data_dir=tmp_path) as b:
            refused = await ask(b.server, 30, 3, {"creations": [{**creation, "resource_name": "other-"}]}, principal=ALICE)
            created = await ask(b.server, 30, 3, {"creations": [creation]}, principal="User:admin")
        async with Broker(settings=settings, data_dir=tmp_path) as b:
            await b.create_topic("app-1", 1)
            produced = await ask(b.server, 0, 9, _produce("app-1"))
            return refused, created, b.server.authorizer.bindings, produced["responses"][0]["partition_responses"][0]["error_code"]

    refused, created, bindings, produced = run(go())
    assert refused["results"][0]["error_code"] == ErrorCode.cluster_authorization_failed
    assert created["results"][0]["error_code"] == ErrorCode.none
    assert bindings == {allow("app-", Op.WRITE, pattern=PT.PREFIXED, perm=perm)}
    assert produced == (ErrorCode.none if perm == P.ALLOW else ErrorCode.topic_authorization_failed)


def test_null_names_are_checked_as_empty_ones():
    from broker.security.authorizer import Authorizer

    authz = Authorizer()
    authz.replace([allow("a", Op.ALL, pattern=PT.PREFIXED), allow("", Op.READ, pattern=PT.PREFIXED, principal="User:bob")])
    conn = SimpleNamespace(peer="127.0.0.1:1", principal=ALICE)
    ctx = RequestContext(SimpleNamespace(authorizer=authz), conn, LOG)
    assert ctx.allowed(Op.READ, RT.TOPIC, None) is False  # not an AttributeError from a prefix test
    conn.principal = "User:bob"
    assert ctx.allowed(Op.READ, RT.TOPIC, None) is True


def test_transactional_records_need_write_on_their_transactional_id():
    txn_batch = build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=b"k", value=b"v")], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)

    def request(tid, batch):
        return {"acks": -1, "timeout": 5000, "transactional_id": tid, "topic_data": [{"name": "app-orders", "partition_data": [{"index": 0, "records": batch}]}]}

    async def go():
        b = await _broker([allow("app-orders", Op.WRITE), allow("tx-", Op.WRITE, rtype=RT.TRANSACTIONAL_ID, pattern=PT.PREFIXED)])
        try:
            out = []
            for tid, batch in (("other", txn_batch), (None, txn_batch), ("other", _batch()), ("tx-1", txn_batch)):
                answer = await ask(b.server, 0, 9, request(tid, batch))
                out.append(answer["responses"][0]["partition_responses"][0]["error_code"])
            return out
        finally:
            await b.stop()

    denied_id, no_id, plain_records, allowed = run(go())
    assert denied_id == no_id == ErrorCode.transactional_id_authorization_failed
    assert plain_records == ErrorCode.none  # not transactional records: the id is not checked, as Kafka
    assert allowed != ErrorCode.transactional_id_authorization_failed  # past the check (the transaction was never begun)


def test_the_audit_log_tells_denials_at_info_and_allowances_at_debug(monkeypatch):
    """Kafka's kafka.authorizer.logger: principal, host, operation, resource, request and rule; filters
    (an all-topics Metadata) do not log what they leave out."""
    import logging

    import structlog

    from broker import logs

    async def go():
        b = await _broker([allow("app-orders", Op.WRITE)])
        # test brokers log warnings only (broker.testing): let every level through to the capture
        saved = structlog.get_config()
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
        try:
            with structlog.testing.capture_logs() as captured:
                await ask(b.server, 0, 9, _produce("app-orders", "secret"))
                await ask(b.server, 3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
            return captured
        finally:
            structlog.configure(**saved)
            await b.stop()

    monkeypatch.setattr(logs, "_level", logging.INFO)
    lines = [e for e in run(go()) if e.get("logger") == "kafka.authorizer.logger"]
    assert [(e["log_level"], e["allowed"], e["resource"]) for e in lines] == [("info", False, "Topic:LITERAL:secret")]
    (denied,) = lines
    assert denied["event"] == ("Principal = User:alice is Denied operation = WRITE from host = 127.0.0.1 on resource = Topic:LITERAL:secret "
                               "for request = Produce with resourceRefCount = 1 based on rule DefaultDeny")
    assert (denied["principal"], denied["host"], denied["operation"], denied["request"]) == ("User:alice", "127.0.0.1", "WRITE", "Produce")

    monkeypatch.setattr(logs, "_level", logging.DEBUG)
    lines = [e for e in run(go()) if e.get("logger") == "kafka.authorizer.logger"]
    assert [(e["log_level"], e["allowed"], e["resource"]) for e in lines] == [("debug", True, "Topic:LITERAL:app-orders"), ("info", False, "Topic:LITERAL:secret")]
    assert lines[0]["rule"] == ("MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=app-orders, patternType=LITERAL, "
                                "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW))")
