"""KIP-848: ConsumerGroupHeartbeat v0/v1 (joins, reconciliation, fencing, leaving, timeouts) and ConsumerGroupDescribe."""

from __future__ import annotations

import contextlib
import uuid

from kio.schema.errors import ErrorCode

from tests.wait import WaitTimeout

from ..driver import Driver
from ..registry import scenario
from ..steps import (
    cg_describe,
    cg_describe_summary,
    cghb,
    commit,
    commit_summary,
    consumer_metadata,
    describe_groups,
    describe_summary,
    fetch_offsets,
    fetch_summary,
    join,
    join_new,
    list_groups,
    protos,
    stable_group,
    sync,
    sync_summary,
)


def new_id() -> str:
    """A client-generated member id (KIP-1082), 22 characters like Kafka's Uuid.toString()."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def shape(d: Driver, r) -> dict:
    """A heartbeat answer with the assignment reduced to its size (which partitions depends on the assignor)."""
    if r.error_code != ErrorCode.none:
        return {"error": r.error_code}
    return {"error": r.error_code, "member": d.mid(r.member_id), "epoch": r.member_epoch, "interval": r.heartbeat_interval,
            "assigned": None if r.assignment is None else sum(len(tp.partitions) for tp in r.assignment.topic_partitions)}


def exact(d: Driver, r) -> dict:
    from ..steps import cghb_summary

    return cghb_summary(d, r)


def topics(d: Driver, *specs: tuple[str, int]) -> list[str]:
    """Create topics and wait until the group coordinator sees them (Kafka's coordinator learns of new topics
    a little after Metadata does): a throwaway member must be assigned every partition."""
    names = [d.create_topic(label, n) for label, n in specs]
    total = sum(n for _, n in specs)
    probe = M(d, d.group("probe"), names, conn="probe")
    probe.join()
    d.until(lambda: sum(len(p) for _, p in (probe.hb() and probe.owned)) == total, interval=0.05, what="coordinator sees the topics")
    probe.leave()
    return names


def owned(d: Driver, r, label: str = "t") -> list:
    if r.assignment is None:
        return []
    return [(d.tid(tp.topic_id), list(tp.partitions)) for tp in r.assignment.topic_partitions]


class M:
    """A KIP-848 member driven by hand: remembers id, epoch and owned partitions."""

    def __init__(self, d: Driver, g: str, topics: list[str] | None, *, version: int = 1, conn: str = "main",
                 instance: str | None = None, rebalance_ms: int = 30000, assignor: str | None = None) -> None:
        self.d, self.g, self.topics, self.version, self.conn = d, g, topics, version, conn
        self.instance, self.rebalance_ms, self.assignor = instance, rebalance_ms, assignor
        self.id = new_id() if version >= 1 else ""
        self.epoch = 0
        self.owned: list = []

    def join(self):
        self.d.mid(self.id)  # members are named in the order they join
        r = cghb(self.d, self.g, self.id, 0, version=self.version, conn=self.conn, instance=self.instance, rebalance_ms=self.rebalance_ms,
                 topics=self.topics, assignor=self.assignor, owned=[])
        return self._absorb(r)

    def hb(self, owned: list | None = "current", **kw):
        o = self.owned if owned == "current" else owned
        kw.setdefault("rebalance_ms", self.rebalance_ms)  # every heartbeat carries the member's rebalance timeout
        r = cghb(self.d, self.g, self.id, self.epoch, version=self.version, conn=self.conn, instance=self.instance, owned=o, **kw)
        return self._absorb(r)

    def leave(self, epoch: int = -1):
        return cghb(self.d, self.g, self.id, epoch, version=self.version, conn=self.conn, instance=self.instance)

    def _absorb(self, r):
        if r.error_code == ErrorCode.none:
            if r.member_id:
                self.id = r.member_id
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = owned(self.d, r)
        return r


def converge(members: list[M], rounds: int = 12) -> None:
    """Heartbeat every member (reporting what it owns) until a round changes nothing."""
    for _ in range(rounds):
        before = [(m.epoch, sorted(map(str, m.owned))) for m in members]
        for m in members:
            m.hb()
        if [(m.epoch, sorted(map(str, m.owned))) for m in members] == before:
            return


def describe(d: Driver, g: str, *, exact_assignment: bool = True, version: int = 1) -> list:
    return cg_describe_summary(d, cg_describe(d, [g], version=version), exact_assignment=exact_assignment)


# -- joining --------------------------------------------------------------------------------


@scenario("kip848")
def join_v0_server_generated_id(d: Driver):
    """v0 join with an empty member id: the broker generates a 22-char id; epoch 1, all partitions."""
    (t,) = topics(d, ("t", 3))
    g = d.group()
    r = cghb(d, g, "", 0, version=0, topics=[t], owned=[])
    d.obs("join", **exact(d, r), id_len=len(r.member_id or ""))
    d.obs("describe", groups=describe(d, g, version=0))


@scenario("kip848")
def join_v1_client_id(d: Driver):
    """v1 join with a client-generated id: echoed back; epoch 1; describe v1 shows member type 1."""
    (t,) = topics(d, ("t", 2))
    g = d.group()
    m = M(d, g, [t])
    r = m.join()
    d.obs("join", **exact(d, r), echoed=r.member_id == m.id)
    d.obs("describe", groups=describe(d, g))


@scenario("kip848")
def join_v1_empty_member_id(d: Driver):
    """v1 join without a member id: INVALID_REQUEST."""
    (t,) = topics(d, ("t", 1))
    d.obs("join", **exact(d, cghb(d, d.group(), "", 0, version=1, topics=[t], owned=[])))


@scenario("kip848")
def join_validation_errors(d: Driver):
    """Join requests missing required fields: INVALID_REQUEST each."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    d.obs("no-subscription", **exact(d, cghb(d, g, new_id(), 0, version=1, topics=None, owned=[])))
    d.obs("no-rebalance-timeout", **exact(d, cghb(d, g, new_id(), 0, version=1, topics=[t], owned=[], rebalance_ms=-1)))
    d.obs("null-owned", **exact(d, cghb(d, g, new_id(), 0, version=1, topics=[t], owned=None)))
    d.obs("non-empty-owned", **exact(d, cghb(d, g, new_id(), 0, version=1, topics=[t], owned=[("t", [0])])))
    d.obs("empty-group", **exact(d, cghb(d, "", new_id(), 0, version=1, topics=[t], owned=[])))
    d.obs("empty-instance", **exact(d, cghb(d, g, new_id(), 0, version=1, topics=[t], owned=[], instance="")))
    d.obs("empty-rack", **exact(d, cghb(d, g, new_id(), 0, version=1, topics=[t], owned=[], rack="")))
    d.obs("epoch-minus-3", **exact(d, cghb(d, g, new_id(), -3, version=1)))
    d.obs("epoch-minus-2-dynamic", **exact(d, cghb(d, g, new_id(), -2, version=1)))
    d.obs("v0-positive-epoch-no-id", **exact(d, cghb(d, g, "", 3, version=0)))


@scenario("kip848")
def join_empty_subscription(d: Driver):
    """A member subscribed to nothing joins with an empty assignment."""
    g = d.group()
    m = M(d, g, [])
    d.obs("join", **exact(d, m.join()))
    d.obs("describe", groups=describe(d, g))


@scenario("kip848")
def join_unknown_topic_then_created(d: Driver):
    """Subscribing to a topic that does not exist yields nothing until it is created."""
    g = d.group()
    name = d.topic("later")
    m = M(d, g, [name])
    d.obs("join", **exact(d, m.join()))
    d.create_topic("later", 2)
    d.until(lambda: m.hb().assignment is not None, what="assignment after topic creation")
    d.obs("after-create", epoch=m.epoch, owned=sorted([t, sorted(p)] for t, p in m.owned))
    d.obs("describe", groups=describe(d, g))


@scenario("kip848")
def unsupported_assignor(d: Driver):
    """A server assignor the broker does not have: UNSUPPORTED_ASSIGNOR; "range" is accepted."""
    (t,) = topics(d, ("t", 2))
    g = d.group()
    d.obs("bogus", **exact(d, M(d, g, [t], assignor="bogus").join()))
    d.obs("range", **exact(d, M(d, g, [t], assignor="range").join()))
    d.obs("describe", groups=describe(d, g))


@scenario("kip848")
def rack_and_instance_in_describe(d: Driver):
    """Rack id and instance id show in ConsumerGroupDescribe (v0 and v1)."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    r = cghb(d, g, new_id(), 0, version=1, topics=[t], owned=[], rack="rack-a", instance="inst-1")
    d.obs("join", **exact(d, r))
    d.obs("v0", groups=describe(d, g, version=0))
    d.obs("v1", groups=describe(d, g, version=1))


# -- steady-state heartbeats ------------------------------------------------------------------


@scenario("kip848")
def steady_heartbeat_no_assignment(d: Driver):
    """A heartbeat with nothing new carries no assignment; a full one (subscription + owned) does."""
    (t,) = topics(d, ("t", 2))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    d.obs("delta", **exact(d, m.hb()))
    d.obs("delta-null-owned", **exact(d, m.hb(owned=None)))
    d.obs("full", **exact(d, cghb(d, g, m.id, m.epoch, version=1, topics=[t], owned=m.owned, rebalance_ms=30000)))


@scenario("kip848")
def unknown_group_and_member(d: Driver):
    """Heartbeat with epoch > 0 for an unknown group: GROUP_ID_NOT_FOUND; unknown member of a known group: UNKNOWN_MEMBER_ID."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    d.obs("unknown-group", **exact(d, cghb(d, d.group("none"), new_id(), 3, version=1, owned=[])))
    M(d, g, [t]).join()
    d.obs("unknown-member", **exact(d, cghb(d, g, new_id(), 1, version=1, owned=[])))
    d.obs("unknown-member-leave", **exact(d, cghb(d, g, new_id(), -1, version=1)))
    d.obs("unknown-group-leave", **exact(d, cghb(d, d.group("none2"), new_id(), -1, version=1)))


@scenario("kip848")
def fenced_member_epoch(d: Driver):
    """An epoch ahead of the member's, or behind but not its previous one: FENCED_MEMBER_EPOCH."""
    (t,) = topics(d, ("t", 2))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    d.obs("ahead", **exact(d, cghb(d, g, m.id, m.epoch + 5, version=1, owned=m.owned)))
    d.obs("zero-rejoin", **exact(d, cghb(d, g, m.id, 0, version=1, topics=[t], owned=[])))


@scenario("kip848")
def fenced_member_rejoins_with_epoch_zero(d: Driver):
    """A member fenced for an epoch two behind rejoins under its own id with epoch 0 (KAFKA-19233):
    accepted at once, with its epoch and assignment."""
    g, a, b = _two_converged(d)
    d.obs("epochs", a=a.epoch, b=b.epoch)
    d.obs("stale", **exact(d, cghb(d, g, a.id, a.epoch - 2, version=1, conn="a")))
    d.obs("rejoin", **shape(d, cghb(d, g, a.id, 0, version=1, topics=a.topics, owned=[], conn="a")))
    d.obs("describe", groups=describe(d, g))


def _two_converged(d: Driver, partitions: int = 4):
    """Two members of a new group on topic "t", reconciled: (group, a, b)."""
    (t,) = topics(d, ("t", partitions))
    g = d.group()
    a, b = M(d, g, [t], conn="a"), M(d, g, [t], conn="b")
    a.join()
    b.join()
    converge([a, b])
    return g, a, b


@scenario("kip848")
def previous_epoch_tolerated(d: Driver):
    """A member whose answer was lost may heartbeat with its previous epoch if it owns a subset of its assignment."""
    g, a, b = _two_converged(d, 2)
    d.obs("epochs", a=a.epoch, b=b.epoch, a_owned=sum(len(p) for _, p in a.owned), b_owned=sum(len(p) for _, p in b.owned))
    prev = a.epoch - 1
    d.obs("previous-subset", **shape(d, cghb(d, g, a.id, prev, version=1, owned=a.owned, conn="a")))
    d.obs("previous-superset", **shape(d, cghb(d, g, a.id, prev, version=1, owned=[("t", [0, 1])], conn="a")))


@scenario("kip848")
def commit_with_previous_epoch(d: Driver):
    """OffsetCommit v9 one member epoch behind (KIP-1251): for partitions the member has held since before the
    bump, for partitions another member got at the current epoch, and one epoch ahead."""
    g, a, b = _two_converged(d)
    (t,) = a.topics
    a_parts = {p: 5 for _, ps in a.owned for p in ps}
    b_parts = {p: 5 for _, ps in b.owned for p in ps}
    d.obs("epochs", a=a.epoch, b=b.epoch, a_owned=len(a_parts), b_owned=len(b_parts))
    for label, m, parts, epoch in (("a-current", a, a_parts, a.epoch), ("a-previous", a, a_parts, a.epoch - 1),
                                   ("b-previous", b, b_parts, b.epoch - 1), ("a-previous-b-parts", a, b_parts, a.epoch - 1),
                                   ("a-ahead", a, a_parts, a.epoch + 1)):
        d.obs(label, out=commit_summary(d, commit(d, g, {t: parts}, generation=epoch, member_id=m.id)))


@scenario("kip848")
def leave_group(d: Driver):
    """Epoch -1 leaves: echoes the member id and -1; the group epoch moves; the group is Empty."""
    (t,) = topics(d, ("t", 2))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    r = m.leave()
    d.obs("leave", **exact(d, r))
    d.obs("describe", groups=describe(d, g))
    d.obs("list", **list_groups(d))
    d.obs("after-leave-hb", **exact(d, cghb(d, g, m.id, m.epoch, version=1, owned=[])))


@scenario("kip848")
def rejoin_after_leave_same_id(d: Driver):
    """A member that left can join again with the same id."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    m.leave()
    d.obs("rejoin", **exact(d, cghb(d, g, m.id, 0, version=1, topics=[t], owned=[])))


# -- reconciliation -------------------------------------------------------------------------


@scenario("kip848")
def reconcile_second_member(d: Driver):
    """A second member: the first revokes before the second is assigned; both end Stable at epoch 2 with 2 partitions each."""
    (t,) = topics(d, ("t", 4))
    g = d.group()
    a = M(d, g, [t], conn="a")
    d.obs("a-join", **shape(d, a.join()))
    b = M(d, g, [t], conn="b")
    d.obs("b-join", **shape(d, b.join()))
    all4 = list(a.owned)
    d.obs("a-revoke", **shape(d, a.hb(owned=all4)))
    d.obs("a-still-owns-all", **shape(d, a.hb(owned=all4)))
    d.obs("a-revoked", **shape(d, a.hb()))
    d.obs("b-gets", **shape(d, b.hb()))
    d.obs("describe", groups=describe(d, g, exact_assignment=False))
    d.obs("disjoint", union=sorted(p for _, ps in a.owned + b.owned for p in ps))


@scenario("kip848")
def reconcile_member_leaves(d: Driver):
    """When one of two members leaves, the other is handed the freed partitions on its next heartbeat."""
    g, a, b = _two_converged(d)
    d.obs("before", a=a.epoch, b=b.epoch)
    d.obs("b-leaves", **shape(d, b.leave()))
    d.obs("a-hb", **shape(d, a.hb()))
    d.obs("describe", groups=describe(d, g, exact_assignment=False))


@scenario("kip848")
def member_leaves_describe_before_heartbeat(d: Driver):
    """Right after one of two members leaves, before anyone heartbeats: the group and assignment epochs and the state."""
    g, _, b = _two_converged(d)
    b.leave()
    d.obs("describe", groups=describe(d, g, exact_assignment=False))


@scenario("kip848")
def reconcile_subscription_change(d: Driver):
    """Changing the subscription bumps the group epoch and adds the new topic's partitions."""
    t, u = topics(d, ("t", 1), ("u", 2))
    g = d.group()
    m = M(d, g, [t])
    d.obs("join", **exact(d, m.join()))
    d.obs("change", **exact(d, m.hb(topics=[t, u])))
    d.obs("drop-t", **exact(d, m.hb(topics=[u])))
    d.obs("after-revoke", **exact(d, m.hb()))
    d.obs("describe", groups=describe(d, g))


@scenario("kip848")
def reconcile_three_members_uniform(d: Driver):
    """Three members over six partitions converge to two partitions each."""
    (t,) = topics(d, ("t", 6))
    g = d.group()
    ms = [M(d, g, [t], conn=f"c{i}") for i in range(3)]
    for m in ms:
        m.join()
    converge(ms)
    d.obs("sizes", sizes=sorted(sum(len(p) for _, p in m.owned) for m in ms), epochs=sorted({m.epoch for m in ms}))
    d.obs("describe", groups=describe(d, g, exact_assignment=False))


@scenario("kip848")
def range_assignor_two_topics(d: Driver):
    """The range assignor over two co-partitioned topics, one member: everything."""
    t, u = topics(d, ("t", 2), ("u", 2))
    g = d.group()
    m = M(d, g, [t, u], assignor="range")
    d.obs("join", **exact(d, m.join()))
    d.obs("describe", groups=describe(d, g))


@scenario("kip848")
def partitions_added_to_topic(d: Driver):
    """Adding partitions to a subscribed topic bumps the group epoch and assigns them."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    m = M(d, g, [t])
    d.obs("join", **exact(d, m.join()))
    r = d.req(37, 3, {"topics": [{"name": t, "count": 3, "assignments": None}], "timeout": __import__("datetime").timedelta(seconds=30), "validate_only": False})
    d.obs("create-partitions", errors=[x.error_code for x in r.results])
    d.until(lambda: m.hb().assignment is not None, what="new partitions assigned")
    d.obs("after", epoch=m.epoch, owned=sorted([x, sorted(p)] for x, p in m.owned))


# -- timeouts ----------------------------------------------------------------------------------


@scenario("kip848")
def session_timeout_fences_member(d: Driver):
    """A member that stops heartbeating is fenced after the session timeout (3 s here); the group becomes Empty."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    d.until(lambda: cg_describe(d, [g]).groups[0].group_state == "Empty", timeout=15, interval=0.2, what="session expiry")
    d.obs("describe", groups=describe(d, g))
    d.obs("late-hb", **exact(d, cghb(d, g, m.id, m.epoch, version=1, owned=m.owned)))


@scenario("kip848")
def rebalance_timeout_fences_unrevoking_member(d: Driver):
    """A member that does not revoke within its rebalance timeout is fenced; the other gets everything."""
    (t,) = topics(d, ("t", 2))
    g = d.group()
    a = M(d, g, [t], conn="a", rebalance_ms=1000)
    a.join()
    converge([a])  # a owns both partitions (the join's answer may come before the assignment)
    all2 = list(a.owned)
    d.obs("a-owns", owned=sum(len(p) for _, p in all2))
    b = M(d, g, [t], conn="b")
    b.join()
    d.obs("a-revoke", **shape(d, a.hb(owned=all2)))
    answers = []

    def fenced() -> bool:  # a keeps heartbeating with both partitions, b heartbeats too
        answers.append(cghb(d, g, a.id, a.epoch, version=1, owned=all2, conn="a"))
        if answers[-1].error_code != ErrorCode.none:
            return True
        b.hb()
        return False

    with contextlib.suppress(WaitTimeout):  # the last answer is the observation, whatever it is
        d.until(fenced, timeout=10, interval=0.2, what="a to be fenced")
    d.obs("a-fenced", **shape(d, answers[-1]))
    d.until(lambda: sum(len(p) for _, p in (b.hb() and b.owned)) == 2, what="b owns both")
    d.obs("b", epoch_positive=b.epoch > 0, owned=sum(len(p) for _, p in b.owned))


# -- static members -----------------------------------------------------------------------------


@scenario("kip848")
def static_unreleased_instance(d: Driver):
    """A second member claiming an active static member's instance id: UNRELEASED_INSTANCE_ID."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    a = M(d, g, [t], instance="i1")
    d.obs("a", **exact(d, a.join()))
    d.obs("b", **exact(d, M(d, g, [t], instance="i1", conn="b").join()))


@scenario("kip848")
def static_temporary_leave_and_return(d: Driver):
    """Epoch -2 keeps a static member's partitions; a new member id with the same instance inherits them."""
    (t,) = topics(d, ("t", 2))
    g = d.group()
    a = M(d, g, [t], instance="i1")
    a.join()
    d.obs("leave-2", **exact(d, a.leave(-2)))
    d.obs("describe", groups=describe(d, g))
    b = M(d, g, [t], instance="i1", conn="b")
    d.obs("return", **exact(d, b.join()))
    d.obs("describe-after", groups=describe(d, g))
    d.obs("old-id", **exact(d, cghb(d, g, a.id, a.epoch, version=1, instance="i1", owned=[])))


@scenario("kip848")
def static_fenced_instance(d: Driver):
    """A heartbeat naming a static member's instance id with another member id: FENCED_INSTANCE_ID."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    a = M(d, g, [t], instance="i1")
    a.join()
    d.obs("hb", **exact(d, cghb(d, g, new_id(), a.epoch, version=1, instance="i1", owned=[])))
    d.obs("unknown-instance", **exact(d, cghb(d, g, new_id(), 1, version=1, instance="i9", owned=[])))


@scenario("kip848")
def static_leave_for_good(d: Driver):
    """A static member leaving with epoch -1 is removed."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    a = M(d, g, [t], instance="i1")
    a.join()
    d.obs("leave", **exact(d, a.leave(-1)))
    d.obs("describe", groups=describe(d, g))


# -- regular expressions ------------------------------------------------------------------------


@scenario("kip848")
def regex_subscription(d: Driver):
    """v1 regex subscription: matching topics are assigned once the regex is resolved."""
    d.create_topic("ra", 1)
    d.create_topic("rb", 2)
    d.create_topic("x", 1)
    g = d.group()
    m = M(d, g, None)
    r = cghb(d, g, m.id, 0, version=1, regex=f"{d.prefix}r.*", owned=[])
    m._absorb(r)
    d.obs("join", error=r.error_code)
    d.until(lambda: sum(len(p) for _, p in (m.hb() and m.owned)) == 3, timeout=20, interval=0.2, what="regex resolved")
    d.obs("resolved", owned=sorted([x, sorted(p)] for x, p in m.owned))
    desc = cg_describe(d, [g], version=1).groups[0]
    d.obs("describe", regex=d.strip(desc.members[0].subscribed_topic_regex or ""), state=desc.group_state)


@scenario("kip848")
def regex_invalid(d: Driver):
    """An invalid regex: INVALID_REGULAR_EXPRESSION."""
    g = d.group()
    d.obs("join", **exact(d, cghb(d, g, new_id(), 0, version=1, regex="[unclosed", owned=[])))


@scenario("kip848")
def error_response_fields(d: Driver):
    """The member id, epoch and interval fields of heartbeat error answers (fenced, unknown member, invalid request)."""
    from ..steps import cghb_summary

    (t,) = topics(d, ("t", 1))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    d.obs("fenced", **cghb_summary(d, cghb(d, g, m.id, m.epoch + 5, version=1, owned=m.owned), raw=True))
    d.obs("unknown-member", **cghb_summary(d, cghb(d, g, new_id(), 1, version=1, owned=[]), raw=True))
    d.obs("invalid", **cghb_summary(d, cghb(d, g, new_id(), 0, version=1, topics=None, owned=[]), raw=True))


@scenario("kip848")
def describe_regex_field_without_regex(d: Driver):
    """ConsumerGroupDescribe's SubscribedTopicRegex for a member subscribed by name (v0 and v1)."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    M(d, g, [t]).join()
    for v in (0, 1):
        desc = cg_describe(d, [g], version=v).groups[0]
        d.obs(f"v{v}", regex=desc.members[0].subscribed_topic_regex)


# -- ConsumerGroupDescribe ----------------------------------------------------------------------


@scenario("kip848")
def describe_unknown_and_classic(d: Driver):
    """ConsumerGroupDescribe of an unknown group and of a classic group: GROUP_ID_NOT_FOUND."""
    g = d.group("classic")
    stable_group(d, g, 1)
    for v in (0, 1):
        d.obs(f"v{v}", groups=cg_describe_summary(d, cg_describe(d, [d.group("none"), g], version=v), raw=True))


@scenario("kip848")
def describe_batch_and_states(d: Driver):
    """A batch of two consumer groups, one Stable and one reconciling."""
    (t,) = topics(d, ("t", 2))
    g1, g2 = d.group("one"), d.group("two")
    M(d, g1, [t]).join()
    a = M(d, g2, [t], conn="a")
    a.join()
    M(d, g2, [t], conn="b").join()
    d.obs("describe", groups=cg_describe_summary(d, cg_describe(d, [g1, g2], version=1), exact_assignment=False))


# -- offsets with KIP-848 groups ------------------------------------------------------------------


@scenario("kip848")
def commit_member_epoch(d: Driver):
    """OffsetCommit v9 from a member: its epoch commits, a stale one is STALE_MEMBER_EPOCH, an unknown id UNKNOWN_MEMBER_ID."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    d.obs("ok", offsets=commit_summary(d, commit(d, g, {t: {0: 5}}, generation=m.epoch, member_id=m.id)))
    d.obs("stale", offsets=commit_summary(d, commit(d, g, {t: {0: 6}}, generation=m.epoch + 1, member_id=m.id)))
    d.obs("unknown", offsets=commit_summary(d, commit(d, g, {t: {0: 6}}, generation=m.epoch, member_id="nobody")))
    d.obs("admin-with-members", offsets=commit_summary(d, commit(d, g, {t: {0: 6}})))
    d.obs("v8", offsets=commit_summary(d, commit(d, g, {t: {0: 7}}, generation=m.epoch, member_id=m.id, version=8)))
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]})))


@scenario("kip848")
def commit_empty_consumer_group(d: Driver):
    """An admin commit (epoch -1) to a consumer group with no members is accepted."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    m.leave()
    d.obs("commit", offsets=commit_summary(d, commit(d, g, {t: {0: 5}})))


@scenario("kip848")
def fetch_member_epoch(d: Driver):
    """OffsetFetch v9 with a member id: current epoch ok, stale epoch STALE_MEMBER_EPOCH, unknown member UNKNOWN_MEMBER_ID."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    commit(d, g, {t: {0: 3}}, generation=m.epoch, member_id=m.id)
    d.obs("ok", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]}, member_id=m.id, member_epoch=m.epoch)))
    d.obs("stale", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]}, member_id=m.id, member_epoch=m.epoch + 3)))
    d.obs("unknown", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]}, member_id="nobody", member_epoch=1)))
    d.obs("admin", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]})))


@scenario("kip848")
def delete_consumer_group(d: Driver):
    """DeleteGroups: a consumer group with members is NON_EMPTY_GROUP; after its member leaves it can be deleted."""
    from .admin import delete_groups

    (t,) = topics(d, ("t", 1))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    d.obs("non-empty", results=delete_groups(d, [g]))
    m.leave()
    d.obs("empty", results=delete_groups(d, [g]))
    d.obs("describe", groups=describe(d, g))


@scenario("kip848")
def offset_delete_consumer_group(d: Driver):
    """OffsetDelete on a consumer group: its subscribed topic is GROUP_SUBSCRIBED_TO_TOPIC, another topic is deletable."""
    from .admin import offset_delete

    t, u = topics(d, ("t", 1), ("u", 1))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    commit(d, g, {t: {0: 1}, u: {0: 2}}, generation=m.epoch, member_id=m.id)
    d.obs("delete", **offset_delete(d, g, {t: [0], u: [0]}))


# -- classic <-> consumer ---------------------------------------------------------------------


@scenario("kip848")
def offline_upgrade_empty_classic_group(d: Driver):
    """A heartbeat to an Empty classic group (offsets only) converts it; its offsets survive."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    commit(d, g, {t: {0: 8}})
    d.obs("join", **exact(d, M(d, g, [t]).join()))
    d.obs("list", **list_groups(d))
    d.obs("fetch", groups=fetch_summary(d, fetch_offsets(d, g, {t: [0]})))


@scenario("kip848")
def offline_downgrade_empty_consumer_group(d: Driver):
    """A classic JoinGroup to an empty consumer group converts it back to a classic group."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    m.leave()
    first, r = join_new(d, "c1", g, protocols=protos("range", meta=consumer_metadata([t])))
    d.obs("join", error=r.error_code, generation=r.generation_id)
    # ListGroups reads committed state and the join answer does not wait for the conversion's records
    d.until(lambda: ["g", "consumer", "CompletingRebalance", "classic"] in list_groups(d)["groups"], what="classic group listed")
    d.obs("list", **list_groups(d))


@scenario("kip848")
def heartbeat_to_non_empty_classic_group(d: Driver):
    """A heartbeat to a Stable classic group whose members do not use the consumer protocol: GROUP_ID_NOT_FOUND."""
    (t,) = topics(d, ("t", 1))
    g = d.group()
    stable_group(d, g, 1, protocol_type="connect")
    d.obs("join", **exact(d, M(d, g, [t]).join()))


@scenario("kip848")
def classic_join_to_consumer_group(d: Driver):
    """A classic member joining a non-empty consumer group is handled inside it (interop)."""
    (t,) = topics(d, ("t", 2))
    g = d.group()
    m = M(d, g, [t])
    m.join()
    first = join(d, "c1", g, protocols=protos("range", meta=consumer_metadata([t])))
    d.obs("first", error=first.error_code, has_id=bool(first.member_id))
    r = join(d, "c1", g, first.member_id, protocols=protos("range", meta=consumer_metadata([t])))
    d.obs("join", **{k: v for k, v in _classic(d, r).items()})
    desc = cg_describe(d, [g], version=1).groups[0]
    d.obs("describe", state=desc.group_state, members=len(desc.members), types=sorted(x.member_type for x in desc.members))


def _classic(d: Driver, r) -> dict:
    from ..steps import join_summary

    return join_summary(d, r)


def _unused() -> None:
    _ = (describe_groups, describe_summary, sync, sync_summary)
