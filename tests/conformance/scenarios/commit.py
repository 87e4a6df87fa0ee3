"""The OffsetCommit validation matrix (classic and KIP-848 groups)."""

from __future__ import annotations

import time
import uuid

from ..driver import Closed, Driver
from ..registry import scenario
from ..steps import (
    commit,
    commit_summary,
    describe_groups,
    describe_summary,
    fetch_offsets,
    fetch_summary,
    heartbeat,
    join_new,
    leave,
    list_groups,
    send_join,
    stable_group,
)
from ..steps import OFFSET_COMMIT, OFFSET_FETCH
from .classic import wait_state


def _topic(d: Driver, partitions: int = 2) -> str:
    return d.create_topic("t", partitions)


def _commit_obs(d: Driver, label: str, r) -> None:
    d.obs(label, offsets=commit_summary(d, r))


@scenario("commit")
def simple_group_generation_minus_one(d: Driver):
    """A commit with generation -1 to a group that does not exist creates a "simple" Empty group."""
    t, g = _topic(d), d.group()
    _commit_obs(d, "commit", commit(d, g, {t: {0: 5, 1: 7}}))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))
    d.obs("list", **list_groups(d))
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0, 1]})))


@scenario("commit")
def unknown_group_positive_generation_v9(d: Driver):
    """v9: generation >= 0 for a group that does not exist: GROUP_ID_NOT_FOUND."""
    t = _topic(d)
    _commit_obs(d, "commit", commit(d, d.group(), {t: {0: 1}}, generation=1, member_id="m", version=9))


@scenario("commit")
def unknown_group_positive_generation_v8(d: Driver):
    """v8 and v2: generation >= 0 for a group that does not exist: ILLEGAL_GENERATION."""
    t = _topic(d)
    _commit_obs(d, "v8", commit(d, d.group(), {t: {0: 1}}, generation=1, member_id="m", version=8))
    _commit_obs(d, "v2", commit(d, d.group("g2"), {t: {0: 1}}, generation=1, member_id="m", version=2))


@scenario("commit")
def empty_group_generation_minus_one(d: Driver):
    """An Empty classic group (all members left) accepts an admin commit with generation -1."""
    t, g = _topic(d), d.group()
    m = stable_group(d, g, 1)
    leave(d, "c1", g, [(m[0].id, None)])
    _commit_obs(d, "commit", commit(d, g, {t: {0: 3}}))
    _commit_obs(d, "commit-old-member", commit(d, g, {t: {0: 4}}, generation=m[0].generation, member_id=m[0].id))


@scenario("commit")
def stable_member_commit(d: Driver):
    """A member of a Stable group commits with its generation: NONE, visible to OffsetFetch."""
    t, g = _topic(d), d.group()
    m = stable_group(d, g, 2)
    _commit_obs(d, "c1", commit(d, g, {t: {0: 10}}, generation=m[0].generation, member_id=m[0].id, metadata="md"))
    _commit_obs(d, "c2", commit(d, g, {t: {1: 20}}, generation=m[1].generation, member_id=m[1].id, version=2))
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0, 1]})))


@scenario("commit")
def stable_wrong_generation(d: Driver):
    """A Stable member committing with another generation: ILLEGAL_GENERATION."""
    t, g = _topic(d), d.group()
    m = stable_group(d, g, 1)
    _commit_obs(d, "commit", commit(d, g, {t: {0: 1}}, generation=m[0].generation + 1, member_id=m[0].id))
    _commit_obs(d, "commit-v7", commit(d, g, {t: {0: 1}}, generation=m[0].generation - 1, member_id=m[0].id, version=7))


@scenario("commit")
def stable_unknown_member(d: Driver):
    """An unknown member id committing to a Stable group: UNKNOWN_MEMBER_ID."""
    t, g = _topic(d), d.group()
    m = stable_group(d, g, 1)
    _commit_obs(d, "commit", commit(d, g, {t: {0: 1}}, generation=m[0].generation, member_id="nobody"))


@scenario("commit")
def stable_admin_commit_rejected(d: Driver):
    """Generation -1 without a member id while the group has members: UNKNOWN_MEMBER_ID."""
    t, g = _topic(d), d.group()
    stable_group(d, g, 1)
    _commit_obs(d, "commit", commit(d, g, {t: {0: 1}}))
    _commit_obs(d, "commit-v2", commit(d, g, {t: {0: 1}}, version=2))


@scenario("commit")
def completing_rebalance_commit(d: Driver):
    """A member committing while CompletingRebalance: REBALANCE_IN_PROGRESS."""
    t, g = _topic(d), d.group()
    _, a = join_new(d, "c1", g)
    wait_state(d, g, "CompletingRebalance")
    _commit_obs(d, "commit", commit(d, g, {t: {0: 1}}, generation=a.generation_id, member_id=a.member_id))


@scenario("commit")
def preparing_rebalance_current_generation(d: Driver):
    """During PreparingRebalance a member of the current generation may still commit."""
    t, g = _topic(d), d.group()
    m = stable_group(d, g, 2)
    send_join(d, "c2", g, m[1].id)  # a rejoin by the follower with the same metadata... leader rejoin instead:
    d.conn("c2").recv()
    send_join(d, "c1", g, m[0].id)
    wait_state(d, g, "PreparingRebalance")
    _commit_obs(d, "current-gen", commit(d, g, {t: {0: 9}}, generation=m[1].generation, member_id=m[1].id))
    _commit_obs(d, "next-gen", commit(d, g, {t: {0: 9}}, generation=m[1].generation + 1, member_id=m[1].id))


@scenario("commit")
def static_member_commit(d: Driver):
    """Static members: the right instance id commits; an unknown instance id gets UNKNOWN_MEMBER_ID."""
    t, g = _topic(d), d.group()
    m = stable_group(d, g, 1, instances=["i1"])
    _commit_obs(d, "ok", commit(d, g, {t: {0: 1}}, generation=m[0].generation, member_id=m[0].id, instance="i1"))
    _commit_obs(d, "unknown-instance", commit(d, g, {t: {0: 1}}, generation=m[0].generation, member_id=m[0].id, instance="i9"))
    _commit_obs(d, "instance-only", commit(d, g, {t: {0: 1}}, generation=-1, member_id="", instance="i1"))


@scenario("commit")
def metadata_too_large(d: Driver):
    """Metadata longer than offset.metadata.max.bytes (4096) fails that partition only."""
    t, g = _topic(d), d.group()
    body_ok = commit(d, g, {t: {0: 1}}, metadata="x" * 4096)
    _commit_obs(d, "at-limit", body_ok)
    r = d.req(8, 9, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
        {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 2, "committed_metadata": "y" * 4097},
                                   {"partition_index": 1, "committed_offset": 3, "committed_metadata": "ok"}]}]})
    _commit_obs(d, "over-limit", r)
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0, 1]})))


@scenario("commit")
def unknown_topic_and_partition(d: Driver):
    """Commits to an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; the topic is not auto-created."""
    t, g = _topic(d, 1), d.group()
    _commit_obs(d, "commit", commit(d, g, {t: {0: 1, 5: 1}, d.topic("missing"): {0: 1}}))
    m = d.req(3, 12, {"topics": [{"name": d.topic("missing")}], "allow_auto_topic_creation": False})
    d.obs("metadata", error=m.topics[0].error_code)
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, None)))


@scenario("commit")
def empty_group_id(d: Driver):
    """OffsetCommit with group id "" (accepted for backward compatibility)."""
    t = _topic(d)
    _commit_obs(d, "commit", commit(d, "", {t: {0: 1}}))


@scenario("commit")
def leader_epoch_round_trip(d: Driver):
    """The committed leader epoch (v6+) comes back from OffsetFetch v5+; v5 commits store -1."""
    t, g = _topic(d), d.group()
    _commit_obs(d, "v9", commit(d, g, {t: {0: 11}}, leader_epoch=7, metadata="m7"))
    _commit_obs(d, "v5", commit(d, g, {t: {1: 12}}, leader_epoch=8, metadata="m8", version=5))
    d.obs("fetch-v5", **fetch_summary(d, fetch_offsets(d, g, {t: [0, 1]}, version=5)))
    d.obs("fetch-v4", **fetch_summary(d, fetch_offsets(d, g, {t: [0, 1]}, version=4)))


@scenario("commit")
def old_versions_with_retention(d: Driver):
    """OffsetCommit v2-v4 (retention time) and v3, v4, v6, v7, v8 commits."""
    t, g = _topic(d), d.group()
    for v in (2, 3, 4, 6, 7, 8):
        _commit_obs(d, f"v{v}", commit(d, g, {t: {0: 100 + v}}, version=v))
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]})))


@scenario("commit")
def null_metadata_and_negative_offset(d: Driver):
    """Null metadata, offset -1 and a huge offset are stored as given."""
    t, g = _topic(d), d.group()
    _commit_obs(d, "null-md", commit(d, g, {t: {0: 5}}, metadata=None))
    _commit_obs(d, "negative", commit(d, g, {t: {1: -1}}))
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0, 1]})))
    _commit_obs(d, "huge", commit(d, g, {t: {0: 2**62}}))
    d.obs("fetch2", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]})))


@scenario("commit")
def empty_topic_list(d: Driver):
    """OffsetCommit with no topics: an empty answer."""
    _commit_obs(d, "commit", commit(d, d.group(), {}))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [d.group()])))


@scenario("commit")
def commit_keeps_member_alive(d: Driver):
    """OffsetCommit re-arms a Stable member's session: committing without heartbeats keeps it in the group."""
    t, g = _topic(d), d.group()
    m = stable_group(d, g, 1, session_ms=1500)
    errors = []
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        errors.append(commit_summary(d, commit(d, g, {t: {0: 1}}, generation=m[0].generation, member_id=m[0].id))[0][2])
        time.sleep(0.3)
    d.obs("commits", distinct=sorted(set(errors)))
    d.obs("hb", error=heartbeat(d, "c1", g, m[0].generation, m[0].id).error_code)


@scenario("commit")
def commit_overwrites(d: Driver):
    """A second commit of the same partition replaces the first (metadata too)."""
    t, g = _topic(d), d.group()
    commit(d, g, {t: {0: 5}}, metadata="first")
    commit(d, g, {t: {0: 3}}, metadata="second")
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]})))


@scenario("commit")
def topic_ids_v10(d: Driver):
    """OffsetCommit and OffsetFetch v10 (topics by id, advertised since Kafka 4.2): a known topic with a partition
    it lacks, an unknown topic id, then fetches of the topic, of the unknown id and of every topic; a broker
    without v10 closes the connection."""
    t = _topic(d, 2)
    tid, ghost = d.topic_id("t"), uuid.uuid4()
    g = d.group()

    def parts(*ps):
        return [{"partition_index": p, "committed_offset": 10 + p, "committed_leader_epoch": -1, "committed_metadata": "m"} for p in ps]

    body = {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"topic_id": tid, "partitions": parts(0, 1, 5)}, {"topic_id": ghost, "partitions": parts(0)}]}
    try:
        r = d.req(OFFSET_COMMIT, 10, body)
    except Closed:
        d.obs("commit", closed=True)
        return
    d.obs("commit", out=sorted([d.tid(x.topic_id), p.partition_index, d.norm(p.error_code)] for x in r.topics for p in x.partitions))
    for label, topics in (("fetch", [{"topic_id": tid, "partition_indexes": [0, 1, 5]}]),
                          ("fetch-unknown-id", [{"topic_id": ghost, "partition_indexes": [0]}]), ("fetch-all", None)):
        r = d.req(OFFSET_FETCH, 10, {"groups": [{"group_id": g, "member_id": None, "member_epoch": -1, "topics": topics}],
                                     "require_stable": False})
        d.obs(label, groups=[{"error": x.error_code, "offsets": sorted(
            [d.tid(tp.topic_id), p.partition_index, p.committed_offset, p.metadata, d.norm(p.error_code)] for tp in x.topics for p in tp.partitions)}
            for x in r.groups])
    _ = t
