"""KIP-932 share groups in the group coordinator: ShareGroupHeartbeat v1, ShareGroupDescribe v1,
and the group surface a share group id meets (ListGroups, DescribeGroups, the consumer and
classic APIs, offsets, DeleteGroups).

Kafka initializes a share partition's state through its share coordinator before it hands the
partition out, so the first heartbeat's assignment is empty and the partitions arrive once the
state is written (kafkalite without a share-state hook: at the next heartbeat). The scenarios
wait for the assignment rather than count heartbeats.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..driver import Driver
from ..registry import scenario
from ..steps import commit, commit_summary, describe_groups, describe_summary, fetch_offsets, join, list_groups
from .kip848 import M, new_id

SHARE_HEARTBEAT, SHARE_DESCRIBE, DELETE_GROUPS = 76, 77, 42


def shb(d: Driver, group: str, member_id: str, epoch: int, topics: list[str] | None = None, rack: str | None = None, conn: str = "main"):
    return d.req(SHARE_HEARTBEAT, 1, {"group_id": group, "member_id": member_id, "member_epoch": epoch, "rack_id": rack,
                                      "subscribed_topic_names": topics}, conn)


def _message(d: Driver, text: str | None) -> str | None:
    """An error message with the scenario's prefix and the member ids it names normalised."""
    if text is None:
        return None
    for word in text.replace(".", " ").split():
        if len(word) == 22 and d.mid(word) != word:
            text = text.replace(word, d.mid(word))
    return d.strip(text)


def shb_summary(d: Driver, r, *, raw: bool = False) -> dict:
    if r.error_code != ErrorCode.none and not raw:
        return {"error": r.error_code, "message": _message(d, r.error_message)}
    return {"error": r.error_code, "message": _message(d, r.error_message), "member": d.mid(r.member_id), "epoch": r.member_epoch,
            "interval": r.heartbeat_interval, "assignment": None if r.assignment is None else sorted(
                [d.tid(tp.topic_id), sorted(tp.partitions)] for tp in r.assignment.topic_partitions)}


def sdescribe(d: Driver, *groups: str, ops: bool = False, epochs: bool = True) -> list:
    """ShareGroupDescribe, groups by name (Kafka answers in coordinator-shard order). Without ``epochs``
    the epochs are reduced to whether every member is at the group's epoch (how many times the epoch
    moved depends on when Kafka's share coordinator finished initializing the partitions)."""
    r = d.req(SHARE_DESCRIBE, 1, {"group_ids": list(groups), "include_authorized_operations": ops})
    out = [{
        "group": d.strip(g.group_id), "error": g.error_code, "message": g.error_message and d.strip(g.error_message), "state": g.group_state,
        "epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch, "assignor": g.assignor_name, "ops": g.authorized_operations,
        "members": sorted([[d.mid(m.member_id), m.rack_id, m.member_epoch, m.client_id, sorted(d.strip(t) for t in m.subscribed_topic_names),
                            sorted([d.tid(tp.topic_id), d.strip(tp.topic_name), sorted(tp.partitions)] for tp in m.assignment.topic_partitions)]
                           for m in g.members], key=str),
    } for g in sorted(r.groups, key=lambda g: g.group_id)]
    if not epochs:
        for entry in out:
            entry["epoch"] = entry["assignment_epoch"] = entry["epoch"] == entry["assignment_epoch"] and all(
                m[2] == entry["epoch"] for m in entry["members"])
            for m in entry["members"]:
                m[2] = None
    return out


class S:
    """A share member driven by hand: its own id, its epoch and what it was last given."""

    def __init__(self, d: Driver, g: str, topics: list[str], conn: str = "main") -> None:
        self.d, self.g, self.topics, self.conn = d, g, topics, conn
        self.id = new_id()
        self.epoch = 0
        self.assigned: list = []

    def join(self):
        self.d.mid(self.id)
        return self._absorb(shb(self.d, self.g, self.id, 0, self.topics, conn=self.conn))

    def hb(self, topics: list[str] | None = None):
        return self._absorb(shb(self.d, self.g, self.id, self.epoch, topics, conn=self.conn))

    def leave(self):
        return shb(self.d, self.g, self.id, -1, conn=self.conn)

    def _absorb(self, r):
        if r.error_code == ErrorCode.none:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.assigned = sorted([self.d.tid(tp.topic_id), sorted(tp.partitions)] for tp in r.assignment.topic_partitions)
        return r

    def until_holding(self, count: int):
        """Heartbeat until the member holds ``count`` partitions (their state initialized, the target computed)."""
        def held():
            self.hb()
            return sum(len(p) for _, p in self.assigned) == count
        self.d.until(held, interval=0.1, what=f"{count} partitions assigned")


@scenario("share")
def share_join_then_assigned(d: Driver):
    """A member joins with its own id at epoch 0: the group moves to epoch 2 with nothing to hand out until
    the partitions' share state is initialized; then the epoch moves again and it holds every partition."""
    t = d.create_topic("t", 3)
    g = d.group()
    m = S(d, g, [t])
    d.obs("join", **shb_summary(d, m.join()))
    m.until_holding(3)
    d.obs("assigned", epoch=m.epoch, assigned=m.assigned)
    d.obs("steady", **shb_summary(d, m.hb()))
    d.obs("describe", groups=sdescribe(d, g))
    d.obs("list", **list_groups(d, types=["share"]))
    d.obs("list-stable", **list_groups(d, states=["stable"], types=["share", "consumer"]))
    d.obs("leave", **shb_summary(d, m.leave()))
    d.obs("describe-empty", groups=sdescribe(d, g))
    d.obs("list-empty", **list_groups(d, types=["Share"]))


@scenario("share")
def share_members_share_a_partition(d: Driver):
    """Three members and one partition: the simple assignor gives it to all three."""
    t = d.create_topic("t", 1)
    g = d.group()
    members = [S(d, g, [t], conn=f"c{i}") for i in range(3)]
    for m in members:
        m.join()
    for m in members:
        m.until_holding(1)
    d.obs("assigned", assigned=[m.assigned for m in members])
    d.obs("describe", groups=sdescribe(d, g, epochs=False))


@scenario("share")
def share_validation_errors(d: Driver):
    """Requests Kafka refuses before the coordinator: INVALID_REQUEST with its message."""
    t = d.create_topic("t", 1)
    g = d.group()
    d.obs("empty-member", **shb_summary(d, shb(d, g, "", 0, [t]), raw=True))
    d.obs("empty-group", **shb_summary(d, shb(d, "", new_id(), 0, [t]), raw=True))
    d.obs("no-topics", **shb_summary(d, shb(d, g, new_id(), 0, None), raw=True))
    d.obs("empty-topics", **shb_summary(d, shb(d, g, new_id(), 0, []), raw=True))
    d.obs("empty-rack", **shb_summary(d, shb(d, g, new_id(), 0, [t], rack=""), raw=True))
    d.obs("epoch-minus-2", **shb_summary(d, shb(d, g, new_id(), -2), raw=True))


@scenario("share")
def share_unknown_members_and_epochs(d: Driver):
    """Unknown groups and members, epochs ahead of or behind the coordinator's, leaving twice."""
    t = d.create_topic("t", 2)
    g = d.group()
    d.obs("no-group", **shb_summary(d, shb(d, g, new_id(), 3)))
    d.obs("no-group-leave", **shb_summary(d, shb(d, g, new_id(), -1)))
    m = S(d, g, [t])
    m.join()
    m.until_holding(2)
    d.obs("unknown-member", **shb_summary(d, shb(d, g, new_id(), m.epoch)))
    d.obs("unknown-member-leave", **shb_summary(d, shb(d, g, new_id(), -1)))
    d.obs("epoch-ahead", **shb_summary(d, shb(d, g, m.id, m.epoch + 1)))
    d.obs("epoch-behind", **shb_summary(d, shb(d, g, m.id, 1)))
    d.obs("rejoin", **shb_summary(d, shb(d, g, m.id, 0, [t])))
    d.obs("leave", **shb_summary(d, m.leave()))
    d.obs("leave-again", **shb_summary(d, m.leave()))


@scenario("share")
def share_subscription_change(d: Driver):
    """A member adds a topic to its subscription: the epoch moves, then it holds both topics."""
    t, u = d.create_topic("t", 1), d.create_topic("u", 2)
    g = d.group()
    m = S(d, g, [t])
    m.join()
    m.until_holding(1)
    before = m.epoch
    d.obs("change", **{k: v for k, v in shb_summary(d, m.hb([t, u])).items() if k != "assignment"}, before=before)
    m.until_holding(3)
    d.obs("after", assigned=m.assigned)
    d.obs("describe", groups=sdescribe(d, g))


@scenario("share")
def share_group_id_namespace(d: Driver):
    """A share group's id answers the consumer and classic APIs as Kafka 4.4 does, and the other way round."""
    t = d.create_topic("t", 1)
    sg, cg = d.group("share"), d.group("consumer")
    S(d, sg, [t]).join()
    M(d, cg, [t]).join()
    r = d.req(68, 1, {"group_id": sg, "member_id": new_id(), "member_epoch": 0, "rebalance_timeout": 30000, "subscribed_topic_names": [t],
                      "topic_partitions": []})
    d.obs("consumer-heartbeat", error=r.error_code, message=r.error_message and d.strip(r.error_message))
    r = shb(d, cg, new_id(), 0, [t])
    d.obs("share-heartbeat-on-consumer", error=r.error_code, message=r.error_message and d.strip(r.error_message))
    jr = join(d, "main", sg, "")
    d.obs("join-group", error=jr.error_code, member=jr.member_id)
    d.obs("commit", offsets=commit_summary(d, commit(d, sg, {t: {0: 1}})))
    for label, member, epoch in (("fetch", None, -1), ("fetch-member", new_id(), 1)):
        fr = fetch_offsets(d, sg, {t: [0]}, member_id=member, member_epoch=epoch).groups[0]
        d.obs(label, error=fr.error_code, partitions=sorted([d.strip(x.name), p.partition_index, p.committed_offset, p.error_code]
                                                             for x in fr.topics for p in x.partitions))
    dr = fetch_offsets(d, sg, None).groups[0]
    d.obs("fetch-all", error=dr.error_code, topics=len(dr.topics))
    d.obs("describe-groups", groups=describe_summary(d, describe_groups(d, [sg])))
    d.obs("share-describe-consumer", groups=sdescribe(d, cg, d.group("missing")))
    d.obs("list-all", **list_groups(d))


@scenario("share")
def share_delete_group(d: Driver):
    """DeleteGroups of a share group: NON_EMPTY_GROUP while it has a member, then deleted."""
    t = d.create_topic("t", 1)
    g = d.group()
    m = S(d, g, [t])
    m.join()
    r = d.req(DELETE_GROUPS, 2, {"groups_names": [g]})
    d.obs("non-empty", results=[(d.strip(x.group_id), x.error_code) for x in r.results])
    m.leave()
    r = d.req(DELETE_GROUPS, 2, {"groups_names": [g]})
    d.obs("deleted", results=[(d.strip(x.group_id), x.error_code) for x in r.results])
    d.obs("describe", groups=sdescribe(d, g))


@scenario("share")
def share_api_versions(d: Driver):
    """ApiVersions v3: the share-group APIs' ranges and the share.version feature."""
    r = d.req(18, 3, {"client_software_name": "conformance", "client_software_version": "1"})
    keys = {k.api_key: [k.min_version, k.max_version] for k in r.api_keys}
    d.obs("ranges", apis={str(k): keys.get(k) for k in (76, 77)})
    d.obs("supported", share=[[f.min_version, f.max_version] for f in r.supported_features if f.name == "share.version"])
    d.obs("finalized", share=[[f.min_version_level, f.max_version_level] for f in r.finalized_features if f.name == "share.version"])


SHARE_KEYS = ["share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms", "share.delivery.count.limit",
              "share.partition.max.record.locks", "share.auto.offset.reset", "share.isolation.level", "share.renew.acknowledge.enable",
              "share.assignment.interval.ms"]
# share.assignor.offload.enable is left out of the descriptions: the suite sets it false on Kafka (kafkalite
# always assigns in the heartbeat), where kafkalite reports the config's own default (true)


@scenario("share")
def share_group_configs(d: Driver):
    """The share-group configs Kafka 4.4 accepts on a GROUP resource: defaults, SET, the range checks, and the
    session timeout and heartbeat interval a share group then uses."""
    from .configs import GROUP, SET, _codes, _describe, _describe_until, _incremental

    t = d.create_topic("t", 1)
    g = d.group()
    d.obs("defaults", describe=_describe(d, GROUP, g, SHARE_KEYS))
    d.obs("all-names", names=sorted(n for n in _describe(d, GROUP, g, None)["configs"] if n.startswith("share.") and "offload" not in n))
    for label, ops in {
        "delivery-count-low": [("share.delivery.count.limit", "1", SET)],
        "delivery-count-high": [("share.delivery.count.limit", "11", SET)],
        "record-locks-low": [("share.partition.max.record.locks", "99", SET)],
        "record-locks-high": [("share.partition.max.record.locks", "4001", SET)],
        "assignment-interval-negative": [("share.assignment.interval.ms", "-1", SET)],
        "assignment-interval-high": [("share.assignment.interval.ms", "15001", SET)],
        "renew-not-boolean": [("share.renew.acknowledge.enable", "maybe", SET)],
        "reset-bad-duration": [("share.auto.offset.reset", "by_duration:soon", SET)],
        "lock-duration-low": [("share.record.lock.duration.ms", "999", SET)],
        "isolation-bad": [("share.isolation.level", "serializable", SET)],
        "offload": [("share.assignor.offload.enable", "false", SET)],
    }.items():
        d.obs(label, r=_codes(d, [(GROUP, g, ops)]))
    d.obs("set", r=_incremental(d, [(GROUP, g, [("share.delivery.count.limit", "7", SET), ("share.partition.max.record.locks", "3000", SET),
                                                ("share.renew.acknowledge.enable", "false", SET), ("share.auto.offset.reset", "by_duration:PT1H", SET),
                                                ("share.isolation.level", "read_committed", SET), ("share.heartbeat.interval.ms", "700", SET)])]),
          describe=_describe_until(d, GROUP, g, SHARE_KEYS, {"share.delivery.count.limit": "7"}))
    r = shb(d, g, new_id(), 0, [t])
    d.obs("heartbeat-interval", error=r.error_code, interval=r.heartbeat_interval)


@scenario("share")
def share_session_timeout_fences(d: Driver):
    """A member that stops heartbeating is fenced after the session timeout (3 s here); the other one
    then holds every partition, and the group epoch has moved past the fencing."""
    t = d.create_topic("t", 2)
    g = d.group()
    a, b = S(d, g, [t], conn="a"), S(d, g, [t], conn="b")
    a.join()
    b.join()
    a.until_holding(1)
    b.until_holding(1)
    before = sdescribe(d, g)[0]["epoch"]
    d.until(lambda: a.hb() and len(sdescribe(d, g)[0]["members"]) == 1, timeout=20, interval=0.2, what="b fenced")
    a.until_holding(2)
    after = sdescribe(d, g, epochs=False)[0]
    d.obs("after", members=after["members"], consistent=after["epoch"], moved=a.epoch > before)
    d.obs("fenced-heartbeat", **shb_summary(d, b.hb()))
