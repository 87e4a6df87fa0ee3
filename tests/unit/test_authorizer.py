"""broker/security/authorizer.py: StandardAuthorizer's rules, one test each, and the ACL file."""

from __future__ import annotations

import asyncio
import json

import pytest

from broker.config import ConfigError, load_config
from broker.security.authorizer import (
    CLASS_NAME,
    AclBinding,
    AclFilter,
    AclStore,
    AclStoreError,
    Authorizer,
    Operation as Op,
    PatternType as PT,
    Permission as P,
    ResourceType as RT,
    from_config,
    parse_super_users,
    validate_new,
)

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(name, op, perm=P.ALLOW, principal=ALICE, rtype=RT.TOPIC, pattern=PT.LITERAL, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authz(*bindings, supers=(), allow_if_no_acl=False) -> Authorizer:
    a = Authorizer(frozenset(supers), allow_if_no_acl)
    a.replace(bindings)
    return a


def ok(a, op, name="t", principal=ALICE, rtype=RT.TOPIC, host=HOST) -> bool:
    return a.authorize(principal, host, op, rtype, name)


def test_no_acl_denies_by_default_and_allows_with_allow_everyone():
    assert not ok(authz(), Op.READ)
    assert ok(authz(allow_if_no_acl=True), Op.READ)


def test_an_acl_for_someone_else_on_the_resource_denies_even_with_allow_everyone():
    a = authz(acl("t", Op.READ, principal=BOB), allow_if_no_acl=True)
    assert not ok(a, Op.READ)
    assert ok(a, Op.READ, principal=BOB)
    assert ok(a, Op.READ, name="other")  # no ACL concerns "other"


def test_super_users_may_do_anything_even_when_denied():
    a = authz(acl("t", Op.ALL, P.DENY, principal="User:admin"), supers={"User:admin"})
    assert ok(a, Op.DELETE, principal="User:admin")
    assert ok(a, Op.CLUSTER_ACTION, principal="User:admin", rtype=RT.CLUSTER, name="kafka-cluster")


def test_literal_matches_only_its_name_prefixed_every_name_starting_with_it():
    a = authz(acl("orders", Op.WRITE), acl("logs-", Op.WRITE, pattern=PT.PREFIXED))
    assert ok(a, Op.WRITE, "orders") and not ok(a, Op.WRITE, "orders2")
    assert ok(a, Op.WRITE, "logs-") and ok(a, Op.WRITE, "logs-app") and not ok(a, Op.WRITE, "logs")


def test_the_wildcard_literal_matches_every_resource_of_its_type_only():
    a = authz(acl("*", Op.READ))
    assert ok(a, Op.READ, "anything") and ok(a, Op.READ, "*")
    assert not ok(a, Op.READ, "anything", rtype=RT.GROUP)
    # a PREFIXED "*" is a prefix like any other
    b = authz(acl("*", Op.READ, pattern=PT.PREFIXED))
    assert not ok(b, Op.READ, "anything") and ok(b, Op.READ, "*x")


def test_deny_wins_over_allow_wherever_each_comes_from():
    a = authz(acl("*", Op.READ), acl("secret-", Op.READ, P.DENY, pattern=PT.PREFIXED))
    assert ok(a, Op.READ, "public") and not ok(a, Op.READ, "secret-1")
    b = authz(acl("t", Op.ALL), acl("*", Op.WRITE, P.DENY, principal="User:*"))
    assert ok(b, Op.READ) and not ok(b, Op.WRITE)


def test_the_wildcard_principal_and_hosts():
    a = authz(acl("t", Op.READ, principal="User:*"), acl("u", Op.READ, host=HOST))
    assert ok(a, Op.READ, principal=BOB)
    assert ok(a, Op.READ, "u") and not ok(a, Op.READ, "u", host="10.0.0.2")
    # Kafka matches User:* for every principal, whatever its type
    assert ok(a, Op.READ, principal="Group:x")
    assert not ok(a, Op.READ, principal=BOB, name="u", host="10.0.0.2")


def test_allow_implies_describe_and_describe_configs_deny_does_not():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert ok(authz(acl("t", op)), Op.DESCRIBE), op
    for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS):
        assert not ok(authz(acl("t", op)), Op.DESCRIBE), op
    assert ok(authz(acl("t", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not ok(authz(acl("t", Op.ALTER)), Op.DESCRIBE_CONFIGS)
    assert not ok(authz(acl("t", Op.READ)), Op.WRITE)
    # a DENY of READ does not deny DESCRIBE, which another ALLOW gives
    assert ok(authz(acl("t", Op.READ, P.DENY), acl("t", Op.DESCRIBE)), Op.DESCRIBE)
    assert not ok(authz(acl("t", Op.DESCRIBE, P.DENY), acl("t", Op.READ)), Op.DESCRIBE)


def test_all_allows_and_denies_every_operation():
    assert all(ok(authz(acl("t", Op.ALL)), op) for op in (Op.READ, Op.WRITE, Op.ALTER_CONFIGS, Op.DESCRIBE))
    assert not ok(authz(acl("t", Op.ALL), acl("t", Op.ALL, P.DENY, pattern=PT.PREFIXED)), Op.DESCRIBE)


def test_authorized_operations_bits():
    a = authz(acl("t", Op.READ))
    assert a.authorized_operations(ALICE, HOST, RT.TOPIC, "t") == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert a.authorized_operations(BOB, HOST, RT.TOPIC, "t") == 0
    s = authz(supers={ALICE})
    assert s.authorized_operations(ALICE, HOST, RT.GROUP, "g") == sum(1 << op for op in (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))


def test_authorize_by_resource_type():
    def by_type(a, principal=ALICE):
        return a.authorize_by_resource_type(principal, HOST, Op.WRITE, RT.TOPIC)

    assert not by_type(authz())
    assert by_type(authz(acl("a", Op.WRITE)))
    assert by_type(authz(acl("a-", Op.ALL, pattern=PT.PREFIXED)))
    assert not by_type(authz(acl("a", Op.WRITE), acl("a", Op.WRITE, P.DENY)))
    assert not by_type(authz(acl("ab", Op.WRITE), acl("a", Op.WRITE, P.DENY, pattern=PT.PREFIXED)))
    assert by_type(authz(acl("ab", Op.WRITE), acl("b", Op.WRITE, P.DENY, pattern=PT.PREFIXED)))
    assert not by_type(authz(acl("*", Op.ALL), acl("*", Op.WRITE, P.DENY)))
    assert not by_type(authz(acl("a", Op.READ)))
    assert not by_type(authz(acl("a", Op.WRITE)), principal=BOB)
    assert by_type(authz(supers={ALICE}))
    assert by_type(authz(allow_if_no_acl=True))  # Kafka asks about a resource named "hardcode" first


def test_filters_as_kafkas_acl_binding_filter():
    bindings = [acl("t", Op.READ), acl("t-", Op.WRITE, pattern=PT.PREFIXED), acl("*", Op.DESCRIBE, principal=BOB), acl("g", Op.READ, rtype=RT.GROUP)]
    a = authz(*bindings)

    def f(rtype=RT.ANY, name=None, pattern=PT.ANY, principal=None, host=None, op=Op.ANY, perm=P.ANY):
        return a.acls(AclFilter(rtype, name, pattern, principal, host, op, perm))

    assert len(f()) == 4
    assert f(RT.GROUP) == [bindings[3]]
    assert f(name="t") == [bindings[0]]  # ANY: names compared exactly
    assert set(f(RT.TOPIC, "t-1", PT.MATCH)) == {bindings[1], bindings[2]}
    assert set(f(RT.TOPIC, "t", PT.MATCH)) == {bindings[0], bindings[2]}
    assert f(pattern=PT.PREFIXED) == [bindings[1]]
    assert f(principal=BOB) == [bindings[2]] and f(op=Op.WRITE) == [bindings[1]] and f(perm=P.DENY) == []
    assert f(host="10.0.0.1") == []
    assert AclFilter(RT.UNKNOWN, None, PT.ANY, None, None, Op.ANY, P.ANY).unknown()
    assert AclFilter(RT.ANY, None, PT.ANY, None, None, Op.UNKNOWN, P.ANY).unknown()
    assert AclFilter(RT.ANY, None, PT.ANY, None, None, Op.ANY, P.ANY).unknown() is None


@pytest.mark.parametrize(
    "binding, message",
    [
        (acl("t", Op.READ, rtype=RT.ANY), "Invalid resourceType"),
        (acl("t", Op.READ, rtype=RT.UNKNOWN), "Invalid resourceType"),
        (acl("t", Op.READ, pattern=PT.MATCH), "Invalid patternType"),
        (acl("t", Op.READ, pattern=PT.ANY), "Invalid patternType"),
        (acl("t", Op.ANY), "Invalid operation"),
        (acl("t", Op.READ, P.ANY), "Invalid permissionType"),
        (acl("", Op.READ), "empty resource name"),
        (acl("c", Op.ALTER, rtype=RT.CLUSTER), "only valid name for the CLUSTER"),
    ],
)
def test_invalid_new_acls(binding, message):
    assert message in validate_new(binding)


def test_valid_new_acls():
    assert validate_new(acl("kafka-cluster", Op.ALTER, rtype=RT.CLUSTER)) is None
    assert validate_new(acl("tx", Op.WRITE, P.DENY, rtype=RT.TRANSACTIONAL_ID, pattern=PT.PREFIXED)) is None


def test_acls_are_kept_in_the_data_dir_and_read_at_start(tmp_path):
    a = authz()
    store = AclStore(a, tmp_path)
    b1, b2 = acl("t", Op.READ), acl("g-", Op.READ, rtype=RT.GROUP, pattern=PT.PREFIXED)

    async def run():
        await store.create([b1, b2, b1])
        matched = await store.delete([AclFilter(RT.GROUP, None, PT.ANY, None, None, Op.ANY, P.ANY), AclFilter(RT.ANY, None, PT.ANY, None, None, Op.READ, P.ANY)])
        return matched

    matched = asyncio.run(run())
    assert matched == [[b2], [b1, b2]] or matched == [[b2], [b2, b1]]
    assert a.bindings == set()
    asyncio.run(store.create([b1]))
    doc = json.loads((tmp_path / "acls.json").read_text())
    assert doc["acls"] == [b1.to_json()]
    again = authz()
    AclStore(again, tmp_path).load()
    assert again.bindings == {b1} and ok(again, Op.READ)
    (tmp_path / "acls.json").write_text("{not json")
    with pytest.raises(AclStoreError, match="cannot read ACLs"):
        AclStore(authz(), tmp_path).load()
    assert not (tmp_path / "acls.json.tmp").exists()


def test_configuration():
    cfg = load_config(sets=[f"authorizer.class.name={CLASS_NAME}", "super.users=User:admin; User:ops;", "allow.everyone.if.no.acl.found=true"], environ={})
    a = from_config(cfg)
    assert a.super_users == {"User:admin", "User:ops"} and a.allow_if_no_acl
    assert from_config(load_config(environ={})) is None
    assert not from_config(load_config(sets=[f"authorizer.class.name={CLASS_NAME}"], environ={})).allow_if_no_acl
    with pytest.raises(ConfigError, match="kafka.security.authorizer.AclAuthorizer.* is not served; the only authorizer is org.apache"):
        load_config(sets=["authorizer.class.name=kafka.security.authorizer.AclAuthorizer"], environ={})
    with pytest.raises(ConfigError, match="super.users: invalid principal 'admin'"):
        load_config(sets=[f"authorizer.class.name={CLASS_NAME}", "super.users=admin"], environ={})
    assert parse_super_users(None) == frozenset()


@pytest.mark.parametrize("ip, java", [
    ("127.0.0.1", "127.0.0.1"),
    ("::1", "0:0:0:0:0:0:0:1"),
    ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"),
    ("2001:db8::ab:0:12", "2001:db8:0:0:0:ab:0:12"),
    ("::ffff:10.0.0.7", "10.0.0.7"),
    ("not-an-address:x", "not-an-address:x"),
])
def test_client_hosts_are_named_as_java_names_them(ip, java):
    """Kafka matches an ACL's host against InetAddress.getHostAddress: an ACL for host
    0:0:0:0:0:0:0:1 covers a client on ::1, as on Kafka."""
    from broker.security.authorizer import java_host_address

    assert java_host_address(ip) == java
