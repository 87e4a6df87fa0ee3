"""Group administration: DescribeGroups, ListGroups, DeleteGroups, OffsetDelete and FindCoordinator."""

from __future__ import annotations

from ..driver import Driver
from ..registry import scenario
from ..steps import (
    DELETE_GROUPS,
    FIND_COORDINATOR,
    METADATA,
    OFFSET_DELETE,
    commit,
    consumer_metadata,
    describe_groups,
    describe_summary,
    fetch_offsets,
    fetch_summary,
    join_new,
    leave,
    list_groups,
    protos,
    send_join,
    stable_group,
)
from .classic import wait_state


def delete_groups(d: Driver, groups: list[str], version: int = 2) -> list:
    r = d.req(DELETE_GROUPS, version, {"groups_names": groups})
    return sorted([d.strip(x.group_id), d.norm(x.error_code)] for x in r.results)


def offset_delete(d: Driver, group: str, topics: dict[str, list[int]]) -> dict:
    r = d.req(OFFSET_DELETE, 0, {"group_id": group, "topics": [{"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in topics.items()]})
    return {"error": d.norm(r.error_code),
            "partitions": sorted([d.strip(t.name), p.partition_index, d.norm(p.error_code)] for t in r.topics for p in t.partitions)}


def consumer_group(d: Driver, g: str, topics: list[str], n: int = 1):
    """A Stable classic group using the consumer protocol with a real subscription."""

    return stable_group(d, g, n, protocols=[{"name": "range", "metadata": consumer_metadata(topics)}])


# -- DescribeGroups -------------------------------------------------------------------------


@scenario("admin")
def describe_unknown_group_versions(d: Driver):
    """An unknown group: state Dead with no error up to v5, GROUP_ID_NOT_FOUND at v6."""
    for v in (0, 3, 5, 6):
        d.obs(f"v{v}", groups=describe_summary(d, describe_groups(d, [d.group("none")], version=v)))


@scenario("admin")
def describe_stable_group(d: Driver):
    """A Stable group: protocol, members with metadata and assignment, at v0, v4 and v5."""
    g = d.group()
    stable_group(d, g, 2, instances=[None, "i2"])
    for v in (0, 4, 5):
        d.obs(f"v{v}", groups=describe_summary(d, describe_groups(d, [g], version=v)))


@scenario("admin")
def describe_preparing_rebalance(d: Driver):
    """A group in PreparingRebalance: no protocol, members without metadata."""
    g = d.group()
    m = stable_group(d, g, 2)
    send_join(d, "c1", g, m[0].id)
    wait_state(d, g, "PreparingRebalance")
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("admin")
def describe_completing_rebalance(d: Driver):
    """A group in CompletingRebalance."""
    g = d.group()
    join_new(d, "c1", g)
    wait_state(d, g, "CompletingRebalance")
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("admin")
def describe_empty_and_simple_groups(d: Driver):
    """An Empty group (members left) and a simple group (offsets only)."""
    t = d.create_topic("t", 1)
    g, s = d.group("e"), d.group("s")
    m = stable_group(d, g, 1)
    leave(d, "c1", g, [(m[0].id, None)])
    commit(d, s, {t: {0: 1}})
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g, s, d.group("none")])))


@scenario("admin")
def describe_kip848_group_via_describe_groups(d: Driver):
    """DescribeGroups on a KIP-848 group: Dead (v5) / GROUP_ID_NOT_FOUND (v6)."""
    from ..steps import cghb

    t = d.create_topic("t", 1)
    g = d.group()
    cghb(d, g, topics=[t])
    for v in (5, 6):
        d.obs(f"v{v}", groups=describe_summary(d, describe_groups(d, [g], version=v)))


@scenario("admin")
def describe_empty_group_id(d: Driver):
    """DescribeGroups for group id "" (after a commit to it created a simple group)."""
    t = d.create_topic("t", 1)
    commit(d, "", {t: {0: 1}})
    for v in (5, 6):
        d.obs(f"v{v}", groups=describe_summary(d, describe_groups(d, [""], version=v)))


# -- ListGroups -------------------------------------------------------------------------------


def _three_groups(d: Driver) -> None:
    t = d.create_topic("t", 1)
    stable_group(d, d.group("stable"), 1)
    commit(d, d.group("simple"), {t: {0: 1}})
    join_new(d, "p1", d.group("completing"))
    wait_state(d, d.group("completing"), "CompletingRebalance")


@scenario("admin")
def list_groups_versions(d: Driver):
    """ListGroups v0-v5 list Stable, CompletingRebalance and simple groups with their protocol type (state v4+, type v5+)."""
    _three_groups(d)
    for v in (0, 1, 3, 4, 5):
        d.obs(f"v{v}", **list_groups(d, version=v))


@scenario("admin")
def list_groups_state_filter(d: Driver):
    """ListGroups v4 states filter (case-insensitive)."""
    _three_groups(d)
    d.obs("stable", **list_groups(d, version=4, states=["Stable"]))
    d.obs("lower", **list_groups(d, version=4, states=["empty", "completingrebalance"]))
    d.obs("unknown-state", **list_groups(d, version=4, states=["Nope"]))


@scenario("admin")
def list_groups_type_filter(d: Driver):
    """ListGroups v5 types filter: classic vs consumer groups."""
    from ..steps import cghb

    _three_groups(d)
    t2 = d.create_topic("t2", 1)
    cghb(d, d.group("kip848"), topics=[t2])
    d.obs("classic", **list_groups(d, version=5, types=["classic"]))
    d.obs("consumer", **list_groups(d, version=5, types=["Consumer"]))
    d.obs("all", **list_groups(d, version=5))


# -- DeleteGroups -----------------------------------------------------------------------------


@scenario("admin")
def delete_groups_mixed(d: Driver):
    """DeleteGroups: an Empty group is deleted, a Stable one is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""
    t = d.create_topic("t", 1)
    e, s = d.group("empty"), d.group("stable")
    commit(d, e, {t: {0: 1}})
    stable_group(d, s, 1)
    d.obs("delete", results=delete_groups(d, [e, s, d.group("none")]))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [e])))
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, e, {t: [0]})))
    d.obs("again", results=delete_groups(d, [e], version=0))


@scenario("admin")
def delete_groups_duplicates_and_versions(d: Driver):
    """DeleteGroups with the same id twice, at v0 and v1."""
    t = d.create_topic("t", 1)
    e = d.group("e")
    commit(d, e, {t: {0: 1}})
    d.obs("v1", results=delete_groups(d, [e, e], version=1))


@scenario("admin")
def delete_group_after_members_left(d: Driver):
    """A classic group whose members all left can be deleted; a new group with the id starts at generation 1."""
    g = d.group()
    m = stable_group(d, g, 1)
    leave(d, "c1", g, [(m[0].id, None)])
    d.obs("delete", results=delete_groups(d, [g]))
    _, r = join_new(d, "c2", g)
    d.obs("rejoin", generation=r.generation_id, error=r.error_code)


@scenario("admin")
def delete_groups_completing_rebalance(d: Driver):
    """A group in CompletingRebalance is NON_EMPTY_GROUP; empty id answers."""
    g = d.group()
    join_new(d, "c1", g)
    wait_state(d, g, "CompletingRebalance")
    d.obs("delete", results=delete_groups(d, [g]))


@scenario("admin")
def delete_groups_empty_id(d: Driver):
    """DeleteGroups for group id "" after a commit created it, then again."""
    t = d.create_topic("t", 1)
    commit(d, "", {t: {0: 1}})
    d.obs("delete", results=delete_groups(d, [""]))
    d.obs("again", results=delete_groups(d, [""]))


# -- OffsetDelete -----------------------------------------------------------------------------


@scenario("admin")
def offset_delete_empty_group(d: Driver):
    """OffsetDelete on an Empty group: per-partition NONE, the offsets are gone (also for partitions never committed)."""
    t = d.create_topic("t", 2)
    g = d.group()
    commit(d, g, {t: {0: 1, 1: 2}})
    d.obs("delete", **offset_delete(d, g, {t: [0, 5]}))
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, None)))


@scenario("admin")
def offset_delete_unknown_group(d: Driver):
    """OffsetDelete on an unknown group: GROUP_ID_NOT_FOUND; an empty group id: INVALID_GROUP_ID."""
    t = d.create_topic("t", 1)
    d.obs("unknown", **offset_delete(d, d.group("none"), {t: [0]}))
    d.obs("empty-id", **offset_delete(d, "", {t: [0]}))


@scenario("admin")
def offset_delete_unknown_topic(d: Driver):
    """OffsetDelete naming an unknown topic: UNKNOWN_TOPIC_OR_PARTITION for it."""
    t = d.create_topic("t", 1)
    g = d.group()
    commit(d, g, {t: {0: 1}})
    d.obs("delete", **offset_delete(d, g, {d.topic("missing"): [0], t: [0]}))


@scenario("admin")
def offset_delete_subscribed_topic(d: Driver):
    """A Stable consumer-protocol group: subscribed topics are GROUP_SUBSCRIBED_TO_TOPIC, others deletable."""
    t, u = d.create_topic("t", 1), d.create_topic("u", 1)
    g = d.group()
    m = consumer_group(d, g, [t])
    commit(d, g, {t: {0: 1}, u: {0: 2}}, generation=m[0].generation, member_id=m[0].id)
    d.obs("delete", **offset_delete(d, g, {t: [0], u: [0]}))
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, None)))


@scenario("admin")
def offset_delete_non_consumer_group(d: Driver):
    """A non-empty group whose protocol type is not "consumer": NON_EMPTY_GROUP."""
    t = d.create_topic("t", 1)
    g = d.group()
    m = stable_group(d, g, 1, protocol_type="connect")
    commit(d, g, {t: {0: 1}}, generation=m[0].generation, member_id=m[0].id)
    d.obs("delete", **offset_delete(d, g, {t: [0]}))


@scenario("admin")
def offset_delete_unparsable_subscription(d: Driver):
    """A consumer-type group whose metadata cannot be parsed treats every topic as subscribed."""
    t = d.create_topic("t", 1)
    g = d.group()
    m = stable_group(d, g, 1, protocols=protos("range", meta=b"meta"))  # not a consumer subscription
    commit(d, g, {t: {0: 1}}, generation=m[0].generation, member_id=m[0].id)
    d.obs("delete", **offset_delete(d, g, {t: [0]}))


# -- FindCoordinator --------------------------------------------------------------------------


def _self_node(d: Driver) -> int:
    return d.req(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}).brokers[0].node_id


@scenario("admin")
def find_coordinator_versions(d: Driver):
    """FindCoordinator v0-v3 for a group: this broker, no error."""
    node = _self_node(d)
    for v in range(4):
        r = d.req(FIND_COORDINATOR, v, {"key": d.group(), "key_type": 0})
        d.obs(f"v{v}", error=r.error_code, is_self=r.node_id == node, port_ok=r.port == int(d.bootstrap.rsplit(":", 1)[1]))


@scenario("admin")
def find_coordinator_batched(d: Driver):
    """FindCoordinator v4 batch of group keys: one answer per key, in order."""
    node = _self_node(d)
    keys = [d.group("a"), d.group("b"), d.group("c"), ""]
    for v in (4, 5, 6):
        r = d.req(FIND_COORDINATOR, v, {"key_type": 0, "coordinator_keys": keys})
        d.obs(f"v{v}", answers=[[x.key, d.norm(x.error_code), x.node_id == node] for x in r.coordinators])


@scenario("admin")
def find_coordinator_transaction_key(d: Driver):
    """FindCoordinator for a transactional id (key type 1), single and batched."""
    node = _self_node(d)
    # the first transactional lookup on a broker may answer COORDINATOR_NOT_AVAILABLE while
    # __transaction_state is created: wait that out, then record
    d.until(lambda: d.req(FIND_COORDINATOR, 3, {"key": d.group("txn"), "key_type": 1}).error_code == 0, what="transaction coordinator")
    r = d.req(FIND_COORDINATOR, 3, {"key": d.group("txn"), "key_type": 1})
    d.obs("v3", error=r.error_code, is_self=r.node_id == node)
    r = d.req(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [d.group("txn")]})
    d.obs("v4", answers=[[x.key, d.norm(x.error_code), x.node_id == node] for x in r.coordinators])


@scenario("admin")
def find_coordinator_invalid_key_type(d: Driver):
    """FindCoordinator with key type 2 (share) below v6 and an unknown key type."""
    r = d.req(FIND_COORDINATOR, 3, {"key": d.group(), "key_type": 2})
    d.obs("share-v3", error=r.error_code, node=r.node_id)
    r = d.req(FIND_COORDINATOR, 4, {"key_type": 7, "coordinator_keys": [d.group()]})
    d.obs("unknown-v4", answers=[[x.key, d.norm(x.error_code), x.node_id] for x in r.coordinators])


@scenario("admin")
def find_coordinator_empty_batch(d: Driver):
    """FindCoordinator v4 with no keys."""
    r = d.req(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": []})
    d.obs("v4", answers=[[x.key, d.norm(x.error_code)] for x in r.coordinators])
