"""Protocol steps shared by the scenarios: classic and KIP-848 group calls, offsets, summaries.

Each ``*_summary`` turns a response into the normalised dict a scenario records;
it names member ids through the driver so they compare across brokers.
"""

from __future__ import annotations

import datetime
import struct

from kio.schema.errors import ErrorCode

from .driver import Conn, Driver

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
CG_HEARTBEAT, CG_DESCRIBE = 68, 69
PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19

SESSION_MS = 6000  # classic session timeout used unless a scenario is about timeouts
REBALANCE_MS = 10000
ms = lambda n: datetime.timedelta(milliseconds=n)  # noqa: E731


def consumer_metadata(topics: list[str], user_data: bytes = b"") -> bytes:
    """A ConsumerProtocolSubscription v0 (topics, user data)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        b = t.encode()
        out += struct.pack(">h", len(b)) + b
    return out + struct.pack(">i", len(user_data)) + user_data


def protos(*names: str, user: bytes = b"", meta: bytes | None = None) -> list[dict]:
    """Protocols with valid consumer-protocol metadata (an empty subscription carrying ``user`` as user data),
    or exactly ``meta``. Kafka parses the metadata of "consumer" groups, so it should parse."""
    m = consumer_metadata([], user) if meta is None else meta
    return [{"name": n, "metadata": m} for n in (names or ("range",))]


# --------------------------------------------------------------------------
# classic groups


def join_body(group: str, member_id: str = "", *, instance: str | None = None, protocols: list[dict] | None = None,
              protocol_type: str = "consumer", session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS, reason: str | None = None) -> dict:
    return {
        "group_id": group, "session_timeout": ms(session_ms), "rebalance_timeout": ms(rebalance_ms), "member_id": member_id,
        "group_instance_id": instance, "protocol_type": protocol_type, "protocols": protocols if protocols is not None else protos(),
        "reason": reason,
    }


def send_join(d: Driver, conn: str, group: str, member_id: str = "", *, version: int = 9, **kw) -> Conn:
    c = d.conn(conn)
    c.send(JOIN, version, join_body(group, member_id, **kw))
    return c


def join(d: Driver, conn: str, group: str, member_id: str = "", *, version: int = 9, **kw):
    return send_join(d, conn, group, member_id, version=version, **kw).recv()


def join_new(d: Driver, conn: str, group: str, *, version: int = 9, **kw):
    """A dynamic member's join: the KIP-394 round trip (v4+) then the real join. Returns (first, final) answers."""
    first = join(d, conn, group, "", version=version, **kw)
    if first.error_code == ErrorCode.member_id_required:
        return first, join(d, conn, group, first.member_id, version=version, **kw)
    return first, first


def join_summary(d: Driver, r) -> dict:
    member = d.mid(r.member_id)
    out = {
        "error": r.error_code, "generation": r.generation_id, "member": member, "leader": d.mid(r.leader),
        "role": ("leader" if r.leader and r.leader == r.member_id else "follower" if r.member_id else None),
        "protocol_name": r.protocol_name,
        "members": sorted(([d.mid(m.member_id), getattr(m, "group_instance_id", None), d.norm(m.metadata)] for m in r.members), key=str),
    }
    if hasattr(r, "protocol_type"):
        out["protocol_type"] = r.protocol_type
    if hasattr(r, "skip_assignment"):
        out["skip_assignment"] = r.skip_assignment
    return out


def sync_body(group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None, *, instance: str | None = None,
              protocol_type: str | None = "consumer", protocol_name: str | None = "range") -> dict:
    return {
        "group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance,
        "protocol_type": protocol_type, "protocol_name": protocol_name,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    }


def send_sync(d: Driver, conn: str, group: str, generation: int, member_id: str, assignments=None, *, version: int = 5, **kw) -> Conn:
    c = d.conn(conn)
    c.send(SYNC, version, sync_body(group, generation, member_id, assignments, **kw))
    return c


def sync(d: Driver, conn: str, group: str, generation: int, member_id: str, assignments=None, *, version: int = 5, **kw):
    return send_sync(d, conn, group, generation, member_id, assignments, version=version, **kw).recv()


def sync_summary(d: Driver, r) -> dict:
    out = {"error": r.error_code, "assignment": d.norm(r.assignment)}
    if hasattr(r, "protocol_type"):
        out["protocol_type"] = r.protocol_type
        out["protocol_name"] = r.protocol_name
    return out


def heartbeat(d: Driver, conn: str, group: str, generation: int, member_id: str, *, instance: str | None = None, version: int = 4):
    return d.req(HEARTBEAT, version, {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance}, conn)


def leave(d: Driver, conn: str, group: str, members: list[tuple[str, str | None]], *, version: int = 5):
    if version < 3:
        body = {"group_id": group, "member_id": members[0][0]}
    else:
        body = {"group_id": group, "members": [{"member_id": m, "group_instance_id": i, "reason": "bye"} for m, i in members]}
    return d.req(LEAVE, version, body, conn)


def leave_summary(d: Driver, r) -> dict:
    out = {"error": r.error_code}
    if hasattr(r, "members"):
        out["members"] = [[d.mid(m.member_id), m.group_instance_id, d.norm(m.error_code)] for m in r.members]
    return out


class Member:
    """A classic member: its connection name, id and generation."""

    def __init__(self, d: Driver, name: str, group: str, instance: str | None = None) -> None:
        self.d, self.name, self.group, self.instance = d, name, group, instance
        self.id = ""
        self.generation = -1
        self.leader = ""

    def absorb(self, r) -> None:
        if r.error_code == ErrorCode.none:
            self.id, self.generation, self.leader = r.member_id, r.generation_id, r.leader

    @property
    def is_leader(self) -> bool:
        return self.id != "" and self.id == self.leader


def stable_group(d: Driver, group: str, n: int, *, instances: list[str | None] | None = None, record: bool = True,
                 assign: bool = True, **join_kw) -> list[Member]:
    """Form a Stable classic group of ``n`` members, one at a time; returns the members (leader first joined).

    Member k joins while the others are Stable: it parks, the others see
    REBALANCE_IN_PROGRESS on their heartbeat and rejoin, then the leader syncs
    an assignment that gives each member its own name as bytes.
    """
    members: list[Member] = []
    instances = instances or [None] * n
    for k in range(n):
        m = Member(d, f"c{k + 1}", group, instances[k])
        if instances[k] is None:
            conn = d.conn(m.name)
            conn.send(JOIN, 9, join_body(group, "", **join_kw))
            first = conn.recv()
            mid = first.member_id if first.error_code == ErrorCode.member_id_required else ""
            conn.send(JOIN, 9, join_body(group, mid, **join_kw))
        else:
            send_join(d, m.name, group, "", instance=instances[k], **join_kw)
        if members:
            # wait until the joiner is parked, so that its join (not a rejoin) opens the rebalance
            d.until(lambda: describe_state(d, group) == "PreparingRebalance", what="rebalance after a join")
            # the others rejoin (they learn of the rebalance from their heartbeat)
            for o in members:
                heartbeat(d, o.name, group, o.generation, o.id, instance=o.instance)
            for o in members:
                send_join(d, o.name, group, o.id, instance=o.instance, **join_kw)
        members.append(m)
        answers = {o.name: d.conn(o.name).recv() for o in members}
        for o in members:
            o.absorb(answers[o.name])
            assert answers[o.name].error_code == ErrorCode.none, (o.name, answers[o.name].error_code)
        leader = next(o for o in members if o.is_leader)
        assignments = {o.id: o.name.encode() for o in members} if assign else {}
        names = {"protocol_type": join_kw.get("protocol_type", "consumer"), "protocol_name": answers[leader.name].protocol_name}
        for o in members:
            if o is not leader:
                send_sync(d, o.name, group, o.generation, o.id, instance=o.instance, **names)
        send_sync(d, leader.name, group, leader.generation, leader.id, assignments, instance=leader.instance, **names)
        for o in members:
            r = d.conn(o.name).recv()
            assert r.error_code == ErrorCode.none, (o.name, r.error_code)
    for m in members:
        d.mid(m.id)  # name members in join order
    if record:
        d.obs("formed", generation=members[0].generation, leader=members[0].leader, members=[m.id for m in members])
    return members


def describe_groups(d: Driver, groups: list[str], *, version: int = 5, conn: str = "main"):
    return d.req(DESCRIBE_GROUPS, version, {"groups": groups, "include_authorized_operations": False}, conn)


def describe_summary(d: Driver, r) -> list[dict]:
    out = []
    for g in sorted(r.groups, key=lambda g: g.group_id):  # Kafka answers in coordinator-shard order
        out.append({
            "group": g.group_id, "error": g.error_code, "state": g.group_state, "protocol_type": g.protocol_type,
            "protocol": g.protocol_data,
            "members": sorted(([d.mid(m.member_id), getattr(m, "group_instance_id", None), m.client_id, d.norm(m.member_metadata),
                                d.norm(m.member_assignment)] for m in g.members), key=str),
        })
    return out


def describe_state(d: Driver, group: str) -> str:
    return describe_groups(d, [group]).groups[0].group_state


def list_groups(d: Driver, *, version: int = 5, states: list[str] | None = None, types: list[str] | None = None) -> dict:
    r = d.req(LIST_GROUPS, version, {"states_filter": states or [], "types_filter": types or []})
    mine = sorted(
        ([d.strip(g.group_id), g.protocol_type, getattr(g, "group_state", None), getattr(g, "group_type", None)]
         for g in r.groups if g.group_id.startswith(d.prefix) and d.strip(g.group_id) != "probe"), key=str)
    return {"error": r.error_code, "groups": mine}


# --------------------------------------------------------------------------
# offsets


def commit_body(group: str, offsets: dict[str, dict[int, int]], *, generation: int = -1, member_id: str = "",
                instance: str | None = None, metadata: str | None = "", leader_epoch: int = -1) -> dict:
    return {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": instance, "retention_time": -1,
        "topics": [{"name": t, "partitions": [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": leader_epoch,
                                               "committed_metadata": metadata} for p, o in parts.items()]}
                   for t, parts in offsets.items()],
    }


def commit(d: Driver, group: str, offsets: dict[str, dict[int, int]], *, version: int = 9, conn: str = "main", **kw):
    return d.req(OFFSET_COMMIT, version, commit_body(group, offsets, **kw), conn)


def commit_summary(d: Driver, r) -> list:
    return sorted([d.strip(t.name), p.partition_index, d.norm(p.error_code)] for t in r.topics for p in t.partitions)


def fetch_offsets(d: Driver, group: str, topics: dict[str, list[int]] | None, *, version: int = 9, require_stable: bool = False,
                  member_id: str | None = None, member_epoch: int = -1, conn: str = "main"):
    tlist = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    if version >= 8:
        body = {"groups": [{"group_id": group, "member_id": member_id, "member_epoch": member_epoch, "topics": tlist}], "require_stable": require_stable}
    else:
        body = {"group_id": group, "topics": tlist, "require_stable": require_stable}
    return d.req(OFFSET_FETCH, version, body, conn)


def _partitions_summary(d: Driver, topics) -> list:
    return sorted([d.strip(t.name), p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", None),
                   p.metadata, d.norm(p.error_code)] for t in topics for p in t.partitions)


def fetch_summary(d: Driver, r) -> dict | list:
    if hasattr(r, "groups"):
        return [{"group": g.group_id, "error": g.error_code, "offsets": _partitions_summary(d, g.topics)} for g in r.groups]
    return {"error": getattr(r, "error_code", None), "offsets": _partitions_summary(d, r.topics)}


# --------------------------------------------------------------------------
# KIP-848


def cghb(d: Driver, group: str, member_id: str = "", epoch: int = 0, *, version: int = 0, conn: str = "main",
         instance: str | None = None, rack: str | None = None, rebalance_ms: int = 30000, topics: list[str] | None = None,
         regex: str | None = None, assignor: str | None = None, owned: list | None = None, full: bool = None):
    """A ConsumerGroupHeartbeat. ``owned`` is [(topic label, [partitions])], or None for "unchanged"."""
    body = {
        "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": instance, "rack_id": rack,
        "rebalance_timeout": ms(rebalance_ms), "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
        "server_assignor": assignor,
        "topic_partitions": None if owned is None else [{"topic_id": d.topic_id(t), "partitions": ps} for t, ps in owned],
    }
    return d.req(CG_HEARTBEAT, version, body, conn)


def assignment_of(d: Driver, r) -> list | None:
    if r.assignment is None:
        return None
    return sorted([d.tid(tp.topic_id), sorted(tp.partitions)] for tp in r.assignment.topic_partitions)


def owned_from(d: Driver, r) -> list:
    """The owned-partitions list to send back: the assignment the member was just given, as (label, parts)."""
    if r.assignment is None:
        return []
    return [(d.tid(tp.topic_id), list(tp.partitions)) for tp in r.assignment.topic_partitions]


def cghb_summary(d: Driver, r, *, raw: bool = False) -> dict:
    """A heartbeat answer. Error answers keep only the error code unless ``raw`` (their other fields are
    compared once, in ``kip848.error_response_fields``)."""
    if r.error_code != ErrorCode.none and not raw:
        return {"error": r.error_code}
    return {"error": r.error_code, "member": d.mid(r.member_id), "epoch": r.member_epoch, "interval": r.heartbeat_interval,
            "assignment": assignment_of(d, r)}


def cg_describe(d: Driver, groups: list[str], *, version: int = 0):
    return d.req(CG_DESCRIBE, version, {"group_ids": groups, "include_authorized_operations": False})


def _assign(d: Driver, a) -> list:
    return sorted([d.tid(tp.topic_id), d.strip(tp.topic_name), sorted(tp.partitions)] for tp in a.topic_partitions)


def cg_describe_summary(d: Driver, r, *, exact_assignment: bool = True, raw: bool = False) -> list[dict]:
    """ConsumerGroupDescribe groups, sorted by id. A group with an error keeps only the error code unless
    ``raw``; a null regex reads as "" unless ``raw`` (both compared once in dedicated scenarios)."""
    out = []
    for g in sorted(r.groups, key=lambda g: g.group_id):
        if g.error_code != ErrorCode.none and not raw:
            out.append({"group": g.group_id, "error": g.error_code})
            continue
        members = []
        for m in g.members:
            mm = {"member": d.mid(m.member_id), "instance": m.instance_id, "rack": m.rack_id, "epoch": m.member_epoch,
                  "client_id": m.client_id, "topics": sorted(d.strip(t) for t in m.subscribed_topic_names),
                  "regex": m.subscribed_topic_regex if raw or m.subscribed_topic_regex is not None else "",
                  "member_type": getattr(m, "member_type", None)}
            if exact_assignment:
                mm["assignment"] = _assign(d, m.assignment)
                mm["target"] = _assign(d, m.target_assignment)
            else:
                mm["assigned_count"] = sum(len(tp.partitions) for tp in m.assignment.topic_partitions)
                mm["target_count"] = sum(len(tp.partitions) for tp in m.target_assignment.topic_partitions)
            members.append(mm)
        out.append({"group": g.group_id, "error": g.error_code, "state": g.group_state, "group_epoch": g.group_epoch,
                    "assignment_epoch": g.assignment_epoch, "assignor": g.assignor_name, "members": sorted(members, key=lambda x: str(x["member"]))})
    return out


# --------------------------------------------------------------------------
# data plane


def produce(d: Driver, topic: str, partition: int, records: bytes | None, *, version: int = 9, acks: int = -1, conn: str = "main"):
    body = {"transactional_id": None, "acks": acks, "timeout": ms(10000),
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    if acks == 0:
        d.conn(conn).send(PRODUCE, version, body)
        d.conn(conn).inflight = None
        return None
    return d.req(PRODUCE, version, body, conn)


def produce_summary(d: Driver, r) -> list:
    return [[d.strip(t.name), p.index, d.norm(p.error_code), p.base_offset, getattr(p, "log_start_offset", None)]
            for t in r.responses for p in t.partition_responses]


def list_offsets(d: Driver, topic: str, partitions: dict[int, int], *, version: int = 7, isolation: int = 0, leader_epoch: int = -1):
    body = {"replica_id": -1, "isolation_level": isolation, "timeout": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": p, "timestamp": ts, "current_leader_epoch": leader_epoch} for p, ts in partitions.items()]}]}
    return d.req(LIST_OFFSETS, version, body)


def list_offsets_summary(d: Driver, r, *, with_timestamp: bool = False) -> list:
    out = []
    for t in r.topics:
        for p in t.partitions:
            row = [d.strip(t.name), p.partition_index, d.norm(p.error_code), getattr(p, "offset", None)]
            if with_timestamp:
                row.append(getattr(p, "timestamp", None))
            out.append(row)
    return sorted(out)
