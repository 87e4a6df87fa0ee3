"""Classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their error paths."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..driver import Driver
from ..registry import scenario
from ..steps import (
    consumer_metadata,
    JOIN,
    describe_groups,
    describe_state,
    describe_summary,
    heartbeat,
    join,
    join_body,
    join_new,
    join_summary,
    leave,
    leave_summary,
    protos,
    send_join,
    send_sync,
    stable_group,
    sync,
    sync_summary,
)

PARK_S = 0.5  # an answer not there after this long counts as parked


def wait_state(d: Driver, group: str, state: str) -> None:
    d.until(lambda: describe_state(d, group) == state, what=f"{group} in {state}")


# -- JoinGroup --------------------------------------------------------------------------


@scenario("classic")
def join_v4_requires_member_id(d: Driver):
    """JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED with a fresh id, then the join with it."""
    g = d.group()
    first, final = join_new(d, "c1", g, version=4)
    d.obs("first", **join_summary(d, first))
    d.obs("second", **join_summary(d, final))


@scenario("classic")
def join_v9_requires_member_id(d: Driver):
    """JoinGroup v9: the KIP-394 round trip, then a single-member generation 1 led by the joiner."""
    g = d.group()
    first, final = join_new(d, "c1", g, version=9)
    d.obs("first", **join_summary(d, first))
    d.obs("second", **join_summary(d, final))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("classic")
def join_v3_no_member_id_round_trip(d: Driver):
    """JoinGroup v3 (before KIP-394): the member is added at once."""
    g = d.group()
    r = join(d, "c1", g, version=3)
    d.obs("join", **join_summary(d, r))


@scenario("classic")
def join_v0_session_as_rebalance_timeout(d: Driver):
    """JoinGroup v0 (no rebalance timeout field) forms a group."""
    g = d.group()
    r = join(d, "c1", g, version=0)
    d.obs("join", **join_summary(d, r))
    d.obs("sync", **sync_summary(d, sync(d, "c1", g, r.generation_id, r.member_id, {r.member_id: b"a"}, version=0)))


@scenario("classic")
def join_member_id_format(d: Driver):
    """Dynamic member ids are "<client id>-<36-char UUID>"; static ones "<instance id>-<UUID>"."""
    g = d.group()
    first = join(d, "c1", g)
    mid = first.member_id
    d.obs("dynamic", prefix_is_client_id=mid.startswith("cc-c1-"), suffix_len=len(mid) - len("cc-c1-"), dashes=mid.count("-"))
    s = join(d, "c2", g, instance="inst-a")
    d.obs("static", error=s.error_code, prefix_is_instance=s.member_id.startswith("inst-a-"), suffix_len=len(s.member_id) - len("inst-a-"))


@scenario("classic")
def join_unknown_member_id_new_group(d: Driver):
    """JoinGroup with a member id the (non-existent) group does not know: UNKNOWN_MEMBER_ID."""
    r = join(d, "c1", d.group(), "no-such-member")
    d.obs("join", **join_summary(d, r))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [d.group()])))


@scenario("classic")
def join_unknown_member_id_existing_group(d: Driver):
    """JoinGroup with an unknown member id to a Stable group: UNKNOWN_MEMBER_ID."""
    g = d.group()
    stable_group(d, g, 1)
    d.obs("join", **join_summary(d, join(d, "x", g, "no-such-member")))


@scenario("classic")
def join_empty_group_id(d: Driver):
    """JoinGroup with group id "": INVALID_GROUP_ID."""
    d.obs("join", **join_summary(d, join(d, "c1", "")))


@scenario("classic")
def join_session_timeout_below_min(d: Driver):
    """Session timeout below group.min.session.timeout.ms: INVALID_SESSION_TIMEOUT."""
    d.obs("join", **join_summary(d, join(d, "c1", d.group(), session_ms=500)))


@scenario("classic")
def join_session_timeout_above_max(d: Driver):
    """Session timeout above group.max.session.timeout.ms (30 min): INVALID_SESSION_TIMEOUT."""
    d.obs("join", **join_summary(d, join(d, "c1", d.group(), session_ms=1800001)))


@scenario("classic")
def join_empty_protocol_type(d: Driver):
    """A first joiner with an empty protocol type: INCONSISTENT_GROUP_PROTOCOL."""
    d.obs("join", **join_summary(d, join(d, "c1", d.group(), protocol_type="")))


@scenario("classic")
def join_no_protocols(d: Driver):
    """A first joiner offering no protocols: INCONSISTENT_GROUP_PROTOCOL."""
    d.obs("join", **join_summary(d, join(d, "c1", d.group(), protocols=[])))


@scenario("classic")
def join_protocol_type_mismatch(d: Driver):
    """A joiner whose protocol type differs from the group's: INCONSISTENT_GROUP_PROTOCOL."""
    g = d.group()
    stable_group(d, g, 1)
    d.obs("join", **join_summary(d, join(d, "c2", g, protocol_type="connect")))
    d.obs("join-v3", **join_summary(d, join(d, "c3", g, protocol_type="connect", version=3)))


@scenario("classic")
def join_no_common_protocol(d: Driver):
    """A joiner offering no protocol every member supports: INCONSISTENT_GROUP_PROTOCOL."""
    g = d.group()
    stable_group(d, g, 1)
    d.obs("join", **join_summary(d, join(d, "c2", g, protocols=protos("roundrobin"))))


@scenario("classic")
def join_protocol_selection(d: Driver):
    """The selected protocol is the one every member supports; the leader's list has that protocol's metadata."""
    g = d.group()
    a = join(d, "c1", g, version=3, protocols=[{"name": "range", "metadata": consumer_metadata([], b"r1")}, {"name": "sticky", "metadata": consumer_metadata([], b"s1")}])
    d.obs("j1", **join_summary(d, a))
    sync(d, "c1", g, a.generation_id, a.member_id, {a.member_id: b"x"})
    send_join(d, "c2", g, version=3, protocols=[{"name": "sticky", "metadata": consumer_metadata([], b"s2")}])
    wait_state(d, g, "PreparingRebalance")
    d.obs("hb", error=heartbeat(d, "c1", g, a.generation_id, a.member_id).error_code)
    send_join(d, "c1", g, a.member_id, version=3, protocols=[{"name": "range", "metadata": consumer_metadata([], b"r1")}, {"name": "sticky", "metadata": consumer_metadata([], b"s1")}])
    r1, r2 = d.conn("c1").recv(), d.conn("c2").recv()
    d.obs("rejoin-1", **join_summary(d, r1))
    d.obs("join-2", **join_summary(d, r2))


@scenario("classic")
def join_two_members_roles(d: Driver):
    """Two members: only the leader's JoinGroup answer lists the members; the follower's is empty."""
    g = d.group()
    first, a = join_new(d, "c1", g)
    d.obs("j1", **join_summary(d, a))
    d.obs("s1", **sync_summary(d, sync(d, "c1", g, a.generation_id, a.member_id, {a.member_id: b"all"})))
    f2 = join(d, "c2", g)
    d.obs("j2-first", **join_summary(d, f2))
    send_join(d, "c2", g, f2.member_id)
    wait_state(d, g, "PreparingRebalance")
    d.obs("parked", parked=not d.conn("c2").ready(PARK_S))
    d.obs("hb1", error=heartbeat(d, "c1", g, a.generation_id, a.member_id).error_code)
    send_join(d, "c1", g, a.member_id)
    r1, r2 = d.conn("c1").recv(), d.conn("c2").recv()
    d.obs("rejoin-1", **join_summary(d, r1))
    d.obs("join-2", **join_summary(d, r2))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("classic")
def join_third_member_during_rebalance(d: Driver):
    """A member arriving while the group is PreparingRebalance joins the same generation."""
    g = d.group()
    m = stable_group(d, g, 2)
    f3 = join(d, "c3", g)
    send_join(d, "c3", g, f3.member_id)
    wait_state(d, g, "PreparingRebalance")
    f4 = join(d, "c4", g)
    d.obs("j4-first", **join_summary(d, f4))
    send_join(d, "c4", g, f4.member_id)
    for o in m:
        send_join(d, o.name, g, o.id)
    answers = [d.conn(c).recv() for c in ("c1", "c2", "c3", "c4")]
    d.obs("answers", gens=[a.generation_id for a in answers], errors=[a.error_code for a in answers],
          leaders=sorted({d.mid(a.leader) for a in answers}), member_counts=sorted(len(a.members) for a in answers))


@scenario("classic")
def leader_rejoin_stable_triggers_rebalance(d: Driver):
    """The leader rejoining a Stable group with the same metadata starts a new generation."""
    g = d.group()
    m = stable_group(d, g, 2)
    send_join(d, "c1", g, m[0].id)
    wait_state(d, g, "PreparingRebalance")
    d.obs("hb2", error=heartbeat(d, "c2", g, m[1].generation, m[1].id).error_code)
    send_join(d, "c2", g, m[1].id)
    d.obs("j1", **join_summary(d, d.conn("c1").recv()))
    d.obs("j2", **join_summary(d, d.conn("c2").recv()))


@scenario("classic")
def follower_rejoin_same_metadata_stable(d: Driver):
    """A follower rejoining a Stable group with identical metadata gets the current generation, no rebalance."""
    g = d.group()
    m = stable_group(d, g, 2)
    d.obs("j2", **join_summary(d, join(d, "c2", g, m[1].id)))
    d.obs("state", state=describe_state(d, g))
    d.obs("hb1", error=heartbeat(d, "c1", g, m[0].generation, m[0].id).error_code)


@scenario("classic")
def follower_rejoin_changed_metadata_stable(d: Driver):
    """A follower rejoining with changed metadata triggers a rebalance."""
    g = d.group()
    m = stable_group(d, g, 2)
    send_join(d, "c2", g, m[1].id, protocols=protos("range", user=b"changed"))
    wait_state(d, g, "PreparingRebalance")
    d.obs("hb1", error=heartbeat(d, "c1", g, m[0].generation, m[0].id).error_code)
    send_join(d, "c1", g, m[0].id)
    d.obs("j1", **join_summary(d, d.conn("c1").recv()))
    d.obs("j2", **join_summary(d, d.conn("c2").recv()))


@scenario("classic")
def rejoin_completing_rebalance_same_metadata(d: Driver):
    """Rejoining with the same metadata while CompletingRebalance answers with the current generation."""
    g = d.group()
    _, a = join_new(d, "c1", g)
    wait_state(d, g, "CompletingRebalance")
    r = join(d, "c1", g, a.member_id)
    d.obs("rejoin", **join_summary(d, r))
    d.obs("state-after", state=describe_state(d, g))


@scenario("classic")
def rejoin_completing_rebalance_changed_metadata(d: Driver):
    """Rejoining with changed metadata while CompletingRebalance starts a new generation."""
    g = d.group()
    _, a = join_new(d, "c1", g)
    wait_state(d, g, "CompletingRebalance")
    r = join(d, "c1", g, a.member_id, protocols=protos("range", user=b"v2"))
    d.obs("rejoin", **join_summary(d, r))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("classic")
def join_reason_field_v8(d: Driver):
    """JoinGroup v8 with a reason (KIP-800) behaves as without."""
    g = d.group()
    first, r = join_new(d, "c1", g, version=8, reason="because")
    d.obs("join", **join_summary(d, r))


# -- SyncGroup ----------------------------------------------------------------------------


@scenario("classic")
def sync_follower_parked_until_leader(d: Driver):
    """A follower's SyncGroup is parked until the leader's arrives; then both get their assignment."""
    g = d.group()
    m = stable_group(d, g, 2, record=False)
    send_join(d, "c1", g, m[0].id)
    d.conn("c2")
    wait_state(d, g, "PreparingRebalance")
    send_join(d, "c2", g, m[1].id)
    j1, j2 = d.conn("c1").recv(), d.conn("c2").recv()
    d.obs("joined", gen=[j1.generation_id, j2.generation_id], state=describe_state(d, g))
    send_sync(d, "c2", g, j2.generation_id, j2.member_id)
    d.obs("follower-parked", parked=not d.conn("c2").ready(PARK_S))
    d.obs("hb-completing", error=heartbeat(d, "c3", g, j1.generation_id, j1.member_id).error_code)
    s1 = sync(d, "c1", g, j1.generation_id, j1.member_id, {j1.member_id: b"A", j2.member_id: b"B"})
    d.obs("leader", **sync_summary(d, s1))
    d.obs("follower", **sync_summary(d, d.conn("c2").recv()))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("classic")
def sync_member_missing_from_assignment(d: Driver):
    """A member left out of the leader's assignment gets empty bytes."""
    g = d.group()
    m = stable_group(d, g, 2, assign=False)
    d.obs("c1", **sync_summary(d, sync(d, "c1", g, m[0].generation, m[0].id)))
    d.obs("c2", **sync_summary(d, sync(d, "c2", g, m[1].generation, m[1].id)))


@scenario("classic")
def sync_unknown_group(d: Driver):
    """SyncGroup for a group that does not exist: UNKNOWN_MEMBER_ID."""
    d.obs("sync", **sync_summary(d, sync(d, "c1", d.group(), 1, "nobody")))


@scenario("classic")
def sync_unknown_member(d: Driver):
    """SyncGroup from a member the group does not know: UNKNOWN_MEMBER_ID."""
    g = d.group()
    m = stable_group(d, g, 1)
    d.obs("sync", **sync_summary(d, sync(d, "c2", g, m[0].generation, "nobody")))


@scenario("classic")
def sync_illegal_generation(d: Driver):
    """SyncGroup with the wrong generation: ILLEGAL_GENERATION."""
    g = d.group()
    m = stable_group(d, g, 1)
    d.obs("sync", **sync_summary(d, sync(d, "c1", g, m[0].generation + 5, m[0].id)))


@scenario("classic")
def sync_during_preparing_rebalance(d: Driver):
    """SyncGroup while PreparingRebalance: REBALANCE_IN_PROGRESS."""
    g = d.group()
    m = stable_group(d, g, 2)
    send_join(d, "c1", g, m[0].id)
    wait_state(d, g, "PreparingRebalance")
    d.obs("sync", **sync_summary(d, sync(d, "c2", g, m[1].generation, m[1].id)))


@scenario("classic")
def sync_inconsistent_protocol_name(d: Driver):
    """SyncGroup v5 naming a protocol other than the group's: INCONSISTENT_GROUP_PROTOCOL."""
    g = d.group()
    _, a = join_new(d, "c1", g)
    d.obs("sync", **sync_summary(d, sync(d, "c1", g, a.generation_id, a.member_id, {a.member_id: b"x"}, protocol_name="roundrobin")))
    d.obs("sync-type", **sync_summary(d, sync(d, "c1", g, a.generation_id, a.member_id, {a.member_id: b"x"}, protocol_type="connect")))


@scenario("classic")
def sync_v5_null_protocol_fields(d: Driver):
    """SyncGroup v5 without protocol type / name."""
    g = d.group()
    _, a = join_new(d, "c1", g)
    d.obs("sync", **sync_summary(d, sync(d, "c1", g, a.generation_id, a.member_id, {a.member_id: b"x"}, protocol_type=None, protocol_name=None)))


@scenario("classic")
def sync_again_when_stable(d: Driver):
    """SyncGroup again in Stable returns the stored assignment at once (the new assignment list is ignored)."""
    g = d.group()
    m = stable_group(d, g, 2)
    d.obs("c1", **sync_summary(d, sync(d, "c1", g, m[0].generation, m[0].id, {m[0].id: b"other"})))
    d.obs("c2", **sync_summary(d, sync(d, "c2", g, m[1].generation, m[1].id)))


@scenario("classic")
def sync_old_versions(d: Driver):
    """SyncGroup v0 and v3 (no protocol fields in the answer)."""
    g = d.group()
    _, a = join_new(d, "c1", g)
    d.obs("v3", **sync_summary(d, sync(d, "c1", g, a.generation_id, a.member_id, {a.member_id: b"v3"}, version=3)))
    d.obs("v0", **sync_summary(d, sync(d, "c1", g, a.generation_id, a.member_id, {}, version=0)))


@scenario("classic")
def sync_empty_group_id(d: Driver):
    """SyncGroup with group id "": INVALID_GROUP_ID."""
    d.obs("sync", **sync_summary(d, sync(d, "c1", "", 1, "m")))


# -- Heartbeat ----------------------------------------------------------------------------


@scenario("classic")
def heartbeat_stable(d: Driver):
    """Heartbeat from a Stable member, at v0 and v4: NONE."""
    g = d.group()
    m = stable_group(d, g, 1)
    d.obs("v4", error=heartbeat(d, "c1", g, m[0].generation, m[0].id).error_code)
    d.obs("v0", error=heartbeat(d, "c1", g, m[0].generation, m[0].id, version=0).error_code)


@scenario("classic")
def heartbeat_unknown_group(d: Driver):
    """Heartbeat to a group that does not exist: UNKNOWN_MEMBER_ID."""
    d.obs("hb", error=heartbeat(d, "c1", d.group(), 1, "nobody").error_code)


@scenario("classic")
def heartbeat_unknown_member(d: Driver):
    """Heartbeat from an unknown member: UNKNOWN_MEMBER_ID."""
    g = d.group()
    m = stable_group(d, g, 1)
    d.obs("hb", error=heartbeat(d, "c1", g, m[0].generation, "nobody").error_code)


@scenario("classic")
def heartbeat_illegal_generation(d: Driver):
    """Heartbeat with a stale generation: ILLEGAL_GENERATION."""
    g = d.group()
    m = stable_group(d, g, 1)
    d.obs("hb", error=heartbeat(d, "c1", g, m[0].generation - 1, m[0].id).error_code)


@scenario("classic")
def heartbeat_preparing_rebalance(d: Driver):
    """Heartbeat while PreparingRebalance: REBALANCE_IN_PROGRESS."""
    g = d.group()
    m = stable_group(d, g, 2)
    send_join(d, "c2", g, m[1].id, protocols=protos("range", user=b"new"))
    wait_state(d, g, "PreparingRebalance")
    d.obs("hb", error=heartbeat(d, "c1", g, m[0].generation, m[0].id).error_code)


@scenario("classic")
def heartbeat_completing_rebalance(d: Driver):
    """Heartbeat while CompletingRebalance: NONE."""
    g = d.group()
    _, a = join_new(d, "c1", g)
    wait_state(d, g, "CompletingRebalance")  # DescribeGroups reads committed state: wait for the new group's record
    d.obs("hb", error=heartbeat(d, "c1", g, a.generation_id, a.member_id).error_code)


@scenario("classic")
def heartbeat_empty_group(d: Driver):
    """Heartbeat to an Empty group (its last member left): UNKNOWN_MEMBER_ID."""
    g = d.group()
    m = stable_group(d, g, 1)
    leave(d, "c1", g, [(m[0].id, None)])
    d.obs("hb", error=heartbeat(d, "c1", g, m[0].generation, m[0].id).error_code)
    d.obs("hb-next-gen", error=heartbeat(d, "c1", g, m[0].generation + 1, m[0].id).error_code)


@scenario("classic")
def heartbeat_empty_group_id(d: Driver):
    """Heartbeat with group id "": INVALID_GROUP_ID."""
    d.obs("hb", error=heartbeat(d, "c1", "", 1, "m").error_code)


# -- LeaveGroup ---------------------------------------------------------------------------


@scenario("classic")
def leave_v0_last_member(d: Driver):
    """LeaveGroup v0 by the only member: NONE; the group is Empty at the next generation."""
    g = d.group()
    m = stable_group(d, g, 1)
    d.obs("leave", **leave_summary(d, leave(d, "c1", g, [(m[0].id, None)], version=0)))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))
    _, r = join_new(d, "c2", g)
    d.obs("next", **join_summary(d, r))


@scenario("classic")
def leave_v3_batch_mixed(d: Driver):
    """LeaveGroup v3 batch with a known and an unknown member: per-member errors."""
    g = d.group()
    m = stable_group(d, g, 2)
    d.obs("leave", **leave_summary(d, leave(d, "c1", g, [(m[1].id, None), ("nobody", None)], version=3)))
    d.obs("state", state=describe_state(d, g))


@scenario("classic")
def leave_v5_with_reason(d: Driver):
    """LeaveGroup v5 (reason per member) by the leader: the follower must rejoin and becomes leader."""
    g = d.group()
    m = stable_group(d, g, 2)
    d.obs("leave", **leave_summary(d, leave(d, "c1", g, [(m[0].id, None)], version=5)))
    d.obs("hb2", error=heartbeat(d, "c2", g, m[1].generation, m[1].id).error_code)
    d.obs("rejoin", **join_summary(d, join(d, "c2", g, m[1].id)))


@scenario("classic")
def leave_unknown_group(d: Driver):
    """LeaveGroup on a group that does not exist: top-level UNKNOWN_MEMBER_ID (v0 and v3)."""
    d.obs("v0", **leave_summary(d, leave(d, "c1", d.group(), [("nobody", None)], version=0)))
    d.obs("v3", **leave_summary(d, leave(d, "c1", d.group(), [("nobody", None)], version=3)))


@scenario("classic")
def leave_unknown_member_v1(d: Driver):
    """LeaveGroup v1 for an unknown member of an existing group: UNKNOWN_MEMBER_ID."""
    g = d.group()
    stable_group(d, g, 1)
    d.obs("leave", **leave_summary(d, leave(d, "c1", g, [("nobody", None)], version=1)))


@scenario("classic")
def leave_pending_member(d: Driver):
    """A KIP-394 pending member (id handed out, never joined) can leave."""
    g = d.group()
    stable_group(d, g, 1)
    first = join(d, "c2", g)
    d.obs("leave", **leave_summary(d, leave(d, "c2", g, [(first.member_id, None)], version=3)))
    d.obs("state", state=describe_state(d, g))


@scenario("classic")
def leave_parked_joiner_answered(d: Driver):
    """A member that leaves while its JoinGroup is parked gets UNKNOWN_MEMBER_ID on that join."""
    g = d.group()
    m = stable_group(d, g, 2)
    send_join(d, "c2", g, m[1].id, protocols=protos("range", user=b"x"))
    wait_state(d, g, "PreparingRebalance")
    d.obs("leave", **leave_summary(d, leave(d, "lv", g, [(m[1].id, None)], version=3)))
    d.obs("parked-join", **join_summary(d, d.conn("c2").recv()))
    d.obs("j1", **join_summary(d, join(d, "c1", g, m[0].id)))


@scenario("classic")
def leave_empty_group_id(d: Driver):
    """LeaveGroup with group id "": INVALID_GROUP_ID."""
    d.obs("leave", **leave_summary(d, leave(d, "c1", "", [("m", None)], version=3)))


@scenario("classic")
def empty_group_generation_keeps_counting(d: Driver):
    """After the last member leaves, the Empty group's next generation continues from the old one."""
    g = d.group()
    for i in range(2):
        _, r = join_new(d, f"c{i}", g)
        d.obs(f"join-{i}", **join_summary(d, r))
        sync(d, f"c{i}", g, r.generation_id, r.member_id, {r.member_id: b"x"})
        d.obs(f"leave-{i}", **leave_summary(d, leave(d, f"c{i}", g, [(r.member_id, None)])))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("classic")
def join_v1_v2_versions(d: Driver):
    """JoinGroup v1 and v2 (rebalance timeout, throttle) form and rejoin a group."""
    g = d.group()
    a = join(d, "c1", g, version=1)
    d.obs("v1", **join_summary(d, a))
    b = join(d, "c1", g, a.member_id, version=2)
    d.obs("v2-rejoin", **join_summary(d, b))


@scenario("classic")
def join_unsupported_version_closes(d: Driver):
    """JoinGroup v10 (beyond 4.1's range): the broker closes the connection."""
    c = d.conn("c1")
    c.send_raw(JOIN, 10, b"\x00" * 8, flexible_header=True)
    frame = c.recv_frame()
    d.obs("answer", closed=frame is None)


def _unused() -> None:  # keep imported helpers referenced for linters
    _ = (ErrorCode, join_body)
