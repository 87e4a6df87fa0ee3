"""Static membership (KIP-345), KIP-394 pending members, KIP-814, rebalance and session timeouts."""

from __future__ import annotations

import contextlib
import time

from kio.schema.errors import ErrorCode

from tests.wait import WaitTimeout

from ..driver import Driver
from ..registry import scenario
from ..steps import (
    commit,
    commit_summary,
    describe_groups,
    describe_state,
    describe_summary,
    heartbeat,
    join,
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

PARK_S = 0.5


def wait_state(d: Driver, group: str, state: str, timeout: float = 20) -> None:
    d.until(lambda: describe_state(d, group) == state, timeout=timeout, what=f"{group} in {state}")


def heartbeat_until(d: Driver, conn: str, group: str, generation: int, member_id: str, want: ErrorCode, timeout: float = 20,
                    instance: str | None = None) -> ErrorCode:
    """Heartbeat every 200 ms until the answer is ``want`` (or the deadline); returns the last answer."""
    answers = []

    def answered() -> bool:
        answers.append(heartbeat(d, conn, group, generation, member_id, instance=instance).error_code)
        return answers[-1] == want

    with contextlib.suppress(WaitTimeout):  # the last answer is the observation, whatever it is
        d.until(answered, timeout=timeout, interval=0.2, what=f"a heartbeat answered {want.name}")
    return answers[-1]


# -- static membership --------------------------------------------------------------------


@scenario("static")
def static_join_skips_member_id_required(d: Driver):
    """A static member (v5+) is added at once: no MEMBER_ID_REQUIRED round trip."""
    g = d.group()
    r = join(d, "c1", g, instance="i1", version=5)
    d.obs("join", **join_summary(d, r))
    d.obs("sync", **sync_summary(d, sync(d, "c1", g, r.generation_id, r.member_id, {r.member_id: b"a"}, instance="i1")))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("static")
def static_leader_replacement_v9_skip_assignment(d: Driver):
    """KIP-814: a static leader restarting into a Stable group gets the members and skip_assignment, no rebalance."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"])
    r = join(d, "new1", g, instance="i1", version=9)
    d.obs("replacement", **join_summary(d, r))
    d.obs("state", state=describe_state(d, g))
    d.obs("sync", **sync_summary(d, sync(d, "new1", g, r.generation_id, r.member_id, instance="i1")))
    d.obs("old-hb", error=heartbeat(d, "c1", g, m[0].generation, m[0].id, instance="i1").error_code)
    d.obs("follower-hb", error=heartbeat(d, "c2", g, m[1].generation, m[1].id, instance="i2").error_code)


@scenario("static")
def static_leader_replacement_v8_old_leader_id(d: Driver):
    """Before v9 a replaced static leader is answered with the old leader id, so it acts as a follower."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"])
    r = join(d, "new1", g, instance="i1", version=8)
    d.obs("replacement", **join_summary(d, r), old_leader_is_answer=r.leader == m[0].id)
    d.obs("state", state=describe_state(d, g))


@scenario("static")
def static_follower_replacement_keeps_assignment(d: Driver):
    """A static follower restarting gets the current generation and, on SyncGroup, its old assignment."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"])
    r = join(d, "new2", g, instance="i2")
    d.obs("replacement", **join_summary(d, r))
    d.obs("sync", **sync_summary(d, sync(d, "new2", g, r.generation_id, r.member_id, instance="i2")))
    d.obs("leader-hb", error=heartbeat(d, "c1", g, m[0].generation, m[0].id, instance="i1").error_code)
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("static")
def static_fenced_old_member_everywhere(d: Driver):
    """After replacement the old member id gets FENCED_INSTANCE_ID on join, sync, heartbeat, commit and leave."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"])
    r = join(d, "new2", g, instance="i2")
    old = m[1]
    d.obs("join", **join_summary(d, join(d, "c2", g, old.id, instance="i2")))
    d.obs("sync", **sync_summary(d, sync(d, "c2", g, old.generation, old.id, instance="i2")))
    d.obs("hb", error=heartbeat(d, "c2", g, old.generation, old.id, instance="i2").error_code)
    d.obs("commit", offsets=commit_summary(d, commit(d, g, {d.topic("nope"): {0: 1}}, generation=old.generation, member_id=old.id, instance="i2")))
    d.obs("leave", **leave_summary(d, leave(d, "c2", g, [(old.id, "i2")])))
    d.obs("new-hb", error=heartbeat(d, "new2", g, r.generation_id, r.member_id, instance="i2").error_code)


@scenario("static")
def static_unknown_instance_with_member_id(d: Driver):
    """JoinGroup with a member id and an instance id the group does not know: UNKNOWN_MEMBER_ID."""
    g = d.group()
    stable_group(d, g, 1, instances=["i1"])
    d.obs("join", **join_summary(d, join(d, "x", g, "some-id", instance="i9")))
    d.obs("hb", error=heartbeat(d, "x", g, 1, "some-id", instance="i9").error_code)


@scenario("static")
def static_leave_by_instance_id(d: Driver):
    """LeaveGroup v3 with an empty member id and an instance id removes that static member."""
    g = d.group()
    stable_group(d, g, 2, instances=["i1", "i2"])
    d.obs("leave", **leave_summary(d, leave(d, "x", g, [("", "i2"), ("", "i9")], version=3)))
    d.obs("state", state=describe_state(d, g))


@scenario("static")
def static_leave_wrong_member_id(d: Driver):
    """LeaveGroup naming an instance id with another member's id: FENCED_INSTANCE_ID for that member."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"])
    d.obs("leave", **leave_summary(d, leave(d, "x", g, [(m[0].id, "i2")], version=4)))
    d.obs("state", state=describe_state(d, g))


@scenario("static")
def static_replacement_while_parked(d: Driver):
    """Replacing a static member whose JoinGroup is parked answers that join FENCED_INSTANCE_ID."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"])
    send_join(d, "c2", g, m[1].id, instance="i2", protocols=protos("range", user=b"changed"))
    wait_state(d, g, "PreparingRebalance")
    send_join(d, "new2", g, "", instance="i2")
    old = d.conn("c2").recv()
    d.obs("old-parked-join", **join_summary(d, old))
    send_join(d, "c1", g, m[0].id, instance="i1")
    d.obs("leader", **join_summary(d, d.conn("c1").recv()))
    d.obs("new", **join_summary(d, d.conn("new2").recv()))


@scenario("static")
def static_replacement_completing_rebalance(d: Driver):
    """Replacing a static member while CompletingRebalance starts a new generation."""
    g = d.group()
    a = join(d, "c1", g, instance="i1")
    d.obs("first", **join_summary(d, a))
    r = join(d, "new1", g, instance="i1")
    d.obs("replacement", **join_summary(d, r))
    d.obs("old-sync", **sync_summary(d, sync(d, "c1", g, a.generation_id, a.member_id, instance="i1")))


@scenario("static")
def static_replacement_protocol_change(d: Driver):
    """A static replacement whose protocols would change the selected protocol triggers a rebalance."""
    g = d.group()
    stable_group(d, g, 1, instances=["i1"])
    r = join(d, "new1", g, instance="i1", protocols=protos("roundrobin"))
    d.obs("replacement", **join_summary(d, r))


@scenario("static")
def static_member_kept_after_rebalance_timeout(d: Driver):
    """A static member that does not rejoin within the rebalance timeout stays in the group; a dynamic one would not."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"], rebalance_ms=1500, session_ms=10000)
    send_join(d, "c1", g, m[0].id, instance="i1", rebalance_ms=1500, session_ms=10000)
    r = d.conn("c1").recv()
    d.obs("leader-rejoin", **join_summary(d, r))
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))


@scenario("static")
def dynamic_member_removed_after_rebalance_timeout(d: Driver):
    """A dynamic member that does not rejoin within the rebalance timeout is removed."""
    g = d.group()
    m = stable_group(d, g, 2, rebalance_ms=1500, session_ms=10000)
    send_join(d, "c1", g, m[0].id, rebalance_ms=1500, session_ms=10000)
    r = d.conn("c1").recv()
    d.obs("leader-rejoin", **join_summary(d, r))
    d.obs("removed-hb", error=heartbeat(d, "c2", g, m[1].generation, m[1].id).error_code)


@scenario("static")
def session_timeout_removes_silent_member(d: Driver):
    """A member that stops heartbeating is removed after its session timeout; the other must rejoin."""
    g = d.group()
    m = stable_group(d, g, 2, session_ms=1500)
    e = heartbeat_until(d, "c1", g, m[0].generation, m[0].id, ErrorCode.rebalance_in_progress)
    d.obs("hb", error=e)
    d.obs("rejoin", **join_summary(d, join(d, "c1", g, m[0].id, session_ms=1500)))
    d.obs("expired-hb", error=heartbeat(d, "c2", g, m[1].generation, m[1].id).error_code)


@scenario("static")
def session_timeout_last_member_empties_group(d: Driver):
    """The only member's session expires: the group becomes Empty at the next generation."""
    g = d.group()
    m = stable_group(d, g, 1, session_ms=1000)
    wait_state(d, g, "Empty")
    d.obs("describe", groups=describe_summary(d, describe_groups(d, [g])))
    _, r = join_new(d, "c9", g)
    d.obs("next", generation=r.generation_id, error=r.error_code)
    d.obs("old-hb", error=heartbeat(d, "c1", g, m[0].generation, m[0].id).error_code)


@scenario("static")
def static_session_timeout_removes_member(d: Driver):
    """A static member is removed when its session expires (only then)."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"], session_ms=1500)
    e = heartbeat_until(d, "c1", g, m[0].generation, m[0].id, ErrorCode.rebalance_in_progress, instance="i1")
    d.obs("hb", error=e)
    d.obs("rejoin", **join_summary(d, join(d, "c1", g, m[0].id, instance="i1", session_ms=1500)))
    d.obs("expired-join", **join_summary(d, join(d, "c2", g, m[1].id, instance="i2", session_ms=1500)))


@scenario("static")
def pending_member_blocks_then_expires(d: Driver):
    """A KIP-394 pending member delays the join phase until it expires after its session timeout."""
    g = d.group()
    m = stable_group(d, g, 1, session_ms=10000)
    first = join(d, "c2", g, session_ms=1000)
    d.obs("pending", **join_summary(d, first))
    send_join(d, "c1", g, m[0].id, session_ms=10000)
    d.obs("parked", parked=not d.conn("c1").ready(0.3))
    r = d.conn("c1").recv()
    d.obs("rejoin", **join_summary(d, r))
    d.obs("late-join", **join_summary(d, join(d, "c2", g, first.member_id, session_ms=1000)))


@scenario("static")
def pending_member_joins_in_time(d: Driver):
    """A pending member that completes its join while the group rebalances becomes part of the generation."""
    g = d.group()
    m = stable_group(d, g, 1)
    first = join(d, "c2", g)
    send_join(d, "c1", g, m[0].id)
    d.obs("parked", parked=not d.conn("c1").ready(0.3))
    send_join(d, "c2", g, first.member_id)
    r1, r2 = d.conn("c1").recv(), d.conn("c2").recv()
    d.obs("c1", **join_summary(d, r1))
    d.obs("c2", **join_summary(d, r2))


@scenario("static")
def pending_sync_timeout_removes_member(d: Driver):
    """A member that never sends SyncGroup is removed after the rebalance timeout; a new rebalance starts."""
    g = d.group()
    m = stable_group(d, g, 2, rebalance_ms=1500, session_ms=10000)
    send_join(d, "c2", g, m[1].id, rebalance_ms=1500, session_ms=10000, protocols=protos("range", user=b"new"))
    wait_state(d, g, "PreparingRebalance")
    send_join(d, "c1", g, m[0].id, rebalance_ms=1500, session_ms=10000)
    j1, j2 = d.conn("c1").recv(), d.conn("c2").recv()
    d.obs("joined", generations=[j1.generation_id, j2.generation_id])
    leader, follower = (j1, j2) if j1.leader == j1.member_id else (j2, j1)
    lconn = "c1" if leader is j1 else "c2"
    fconn = "c2" if leader is j1 else "c1"
    d.obs("leader-sync", **sync_summary(d, sync(d, lconn, g, leader.generation_id, leader.member_id, {leader.member_id: b"L", follower.member_id: b"F"})))
    e = heartbeat_until(d, lconn, g, leader.generation_id, leader.member_id, ErrorCode.rebalance_in_progress)
    d.obs("leader-hb", error=e)
    d.obs("follower-hb", error=heartbeat(d, fconn, g, follower.generation_id, follower.member_id).error_code)


@scenario("static")
def parked_member_not_expired_by_session(d: Driver):
    """A member parked in JoinGroup longer than its session timeout is not expired."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"], session_ms=1000, rebalance_ms=3000)
    send_join(d, "c2", g, m[1].id, instance="i2", session_ms=1000, rebalance_ms=3000, protocols=protos("range", user=b"x"))
    wait_state(d, g, "PreparingRebalance")
    time.sleep(1.5)  # past c2's session timeout while it is parked
    d.obs("parked", parked=not d.conn("c2").ready(0.01))
    send_join(d, "c1", g, m[0].id, instance="i1", session_ms=1000, rebalance_ms=3000)
    r1, r2 = d.conn("c1").recv(), d.conn("c2").recv()
    d.obs("answers", errors=[r1.error_code, r2.error_code], generations=[r1.generation_id, r2.generation_id],
          member_counts=sorted([len(r1.members), len(r2.members)]))


@scenario("static")
def static_rejoin_with_known_id(d: Driver):
    """A static member rejoining with its own member id behaves like any member rejoining."""
    g = d.group()
    m = stable_group(d, g, 1, instances=["i1"])
    r = join(d, "c1", g, m[0].id, instance="i1")
    d.obs("rejoin", **join_summary(d, r))
    d.obs("sync", **sync_summary(d, sync(d, "c1", g, r.generation_id, r.member_id, {r.member_id: b"z"}, instance="i1")))


@scenario("static")
def static_replacement_then_old_leader_sync(d: Driver):
    """After a leader replacement the old leader's SyncGroup is fenced and the new one syncs normally."""
    g = d.group()
    m = stable_group(d, g, 2, instances=["i1", "i2"])
    r = join(d, "new1", g, instance="i1")
    d.obs("old-sync", **sync_summary(d, sync(d, "c1", g, m[0].generation, m[0].id, {m[0].id: b"Q"}, instance="i1")))
    d.obs("new-sync", **sync_summary(d, sync(d, "new1", g, r.generation_id, r.member_id, instance="i1")))
    send_sync(d, "c2", g, m[1].generation, m[1].id, instance="i2")
    d.obs("follower-sync", **sync_summary(d, d.conn("c2").recv()))
