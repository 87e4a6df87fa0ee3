"""OffsetFetch edge cases: unknown groups, all topics, batches, require_stable, versions."""

from __future__ import annotations

from ..driver import Driver
from ..registry import scenario
from ..steps import OFFSET_FETCH, commit, fetch_offsets, fetch_summary, stable_group


def _setup(d: Driver, partitions: int = 2) -> tuple[str, str]:
    t, g = d.create_topic("t", partitions), d.group()
    commit(d, g, {t: {p: 10 * (p + 1) for p in range(partitions)}}, metadata="md")
    return t, g


@scenario("fetch")
def unknown_group_partitions(d: Driver):
    """A group that does not exist: each partition answers offset -1, no error (v1, v5, v7, v8)."""
    t = d.create_topic("t", 2)
    for v in (1, 5, 7, 8):
        d.obs(f"v{v}", out=fetch_summary(d, fetch_offsets(d, d.group("none"), {t: [0, 1]}, version=v)))


@scenario("fetch")
def unknown_group_all_topics(d: Driver):
    """All-topics mode (null topics) on a group that does not exist: an empty list (v2, v7, v8)."""
    for v in (2, 7, 8):
        d.obs(f"v{v}", out=fetch_summary(d, fetch_offsets(d, d.group("none"), None, version=v)))


@scenario("fetch")
def all_topics(d: Driver):
    """All-topics mode returns every committed partition of every topic."""
    t, g = _setup(d)
    t2 = d.create_topic("u", 1)
    commit(d, g, {t2: {0: 99}})
    for v in (2, 6, 8, 9):
        d.obs(f"v{v}", out=fetch_summary(d, fetch_offsets(d, g, None, version=v)))


@scenario("fetch")
def uncommitted_partition(d: Driver):
    """A partition without a commit answers offset -1 alongside committed ones."""
    t, g = _setup(d, 3)
    commit(d, g, {t: {0: 1}})
    d.obs("fetch", out=fetch_summary(d, fetch_offsets(d, d.group("x"), {t: [0, 1, 2]})))
    d.obs("own", out=fetch_summary(d, fetch_offsets(d, g, {t: [0, 1, 2]})))


@scenario("fetch")
def unknown_topic_and_partition(d: Driver):
    """Fetching offsets of an unknown topic or partition."""
    t, g = _setup(d, 1)
    for v in (1, 7, 9):
        d.obs(f"v{v}", out=fetch_summary(d, fetch_offsets(d, g, {t: [0, 7], d.topic("missing"): [0]}, version=v)))


@scenario("fetch")
def batched_groups(d: Driver):
    """v8 batch: a group with offsets, an unknown group and a Stable classic group, each answered on its own."""
    t, g = _setup(d)
    g3 = d.group("stable")
    stable_group(d, g3, 1)
    body = {"groups": [
        {"group_id": g, "topics": [{"name": t, "partition_indexes": [0, 1]}]},
        {"group_id": d.group("none"), "topics": [{"name": t, "partition_indexes": [0]}]},
        {"group_id": g3, "topics": None},
        {"group_id": g, "topics": None},
    ], "require_stable": False}
    d.obs("v8", out=fetch_summary(d, d.req(OFFSET_FETCH, 8, body)))
    d.obs("v9", out=fetch_summary(d, d.req(OFFSET_FETCH, 9, body)))


@scenario("fetch")
def batched_duplicate_group(d: Driver):
    """v8 batch naming the same group twice."""
    t, g = _setup(d)
    body = {"groups": [{"group_id": g, "topics": [{"name": t, "partition_indexes": [0]}]},
                       {"group_id": g, "topics": [{"name": t, "partition_indexes": [1]}]}], "require_stable": False}
    r = d.req(OFFSET_FETCH, 8, body)
    d.obs("v8", out=fetch_summary(d, r))


@scenario("fetch")
def require_stable(d: Driver):
    """require_stable (v7+) without transactions answers the committed offsets."""
    t, g = _setup(d)
    d.obs("v7", out=fetch_summary(d, fetch_offsets(d, g, {t: [0, 1]}, version=7, require_stable=True)))
    d.obs("v8", out=fetch_summary(d, fetch_offsets(d, g, {t: [0, 1]}, version=8, require_stable=True)))
    d.obs("v9-all", out=fetch_summary(d, fetch_offsets(d, g, None, version=9, require_stable=True)))


@scenario("fetch")
def empty_topic_list(d: Driver):
    """An empty (not null) topic list returns no partitions."""
    t, g = _setup(d)
    d.obs("v7", out=fetch_summary(d, fetch_offsets(d, g, {}, version=7)))
    d.obs("v8", out=fetch_summary(d, fetch_offsets(d, g, {}, version=8)))


@scenario("fetch")
def empty_group_id(d: Driver):
    """OffsetFetch for group id ""."""
    t = d.create_topic("t", 1)
    d.obs("v7", out=fetch_summary(d, fetch_offsets(d, "", {t: [0]}, version=7)))
    d.obs("v8", out=fetch_summary(d, fetch_offsets(d, "", {t: [0]}, version=8)))


@scenario("fetch")
def versions_shape(d: Driver):
    """The same offsets through every OffsetFetch version 1-9."""
    t, g = _setup(d)
    commit(d, g, {t: {0: 42}}, leader_epoch=3, metadata="e3")
    for v in range(1, 10):
        d.obs(f"v{v}", out=fetch_summary(d, fetch_offsets(d, g, {t: [0, 1]}, version=v)))


@scenario("fetch")
def classic_group_member_fields_ignored(d: Driver):
    """v9 member id / epoch are only checked for KIP-848 groups; a classic group ignores them."""
    t, g = _setup(d)
    d.obs("bogus-member", out=fetch_summary(d, fetch_offsets(d, g, {t: [0]}, member_id="nobody", member_epoch=5)))


@scenario("fetch")
def stable_group_offsets(d: Driver):
    """OffsetFetch of a Stable group's commits by anyone."""
    t = d.create_topic("t", 2)
    g = d.group()
    m = stable_group(d, g, 1)
    commit(d, g, {t: {0: 5, 1: 6}}, generation=m[0].generation, member_id=m[0].id, metadata=None)
    d.obs("fetch", out=fetch_summary(d, fetch_offsets(d, g, None)))
