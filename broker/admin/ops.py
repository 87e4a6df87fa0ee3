"""Admin operations as plain data: each function returns dicts and lists ready for ``--json``.

All of them work against any Kafka-protocol broker; ``group_history`` needs
kafkalite's group event stream (``__kafkalite_group_events``).
"""

from __future__ import annotations

import datetime
import json
from collections import defaultdict
from typing import Any

from protocol.errors import ErrorCode, error_code
from protocol.records import iter_records, scan_valid_prefix

from protocol.consumer_protocol import parse_assignment
from .share_ops import describe_share_group, modern_group
from .client import (
    CONSUMER_GROUP_DESCRIBE,
    CREATE_TOPICS,
    DELETE_GROUPS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    FETCH,
    LIST_GROUPS,
    LIST_OFFSETS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    TRANSACTION_KEY,
    AdminClient,
    AdminError,
    check,
)

EARLIEST, LATEST = -2, -1
EVENTS_TOPIC = "__kafkalite_group_events"
_TOPIC_RESOURCE = 2
_DEFAULT_CONFIG = 5  # DescribeConfigs config_source DEFAULT_CONFIG
_TIMEOUT_MS = 30_000

TP = tuple[str, int]


def _name(code) -> str:
    return error_code(code).name.upper()


def _str_uuid(value) -> str | None:
    return None if value is None or value.int == 0 else str(value)


# ==================================================================== topics


def list_topics(client: AdminClient, include_internal: bool = True) -> list[dict]:
    md = client.metadata(None)
    out = [
        {"topic": t.name, "partitions": len(t.partitions), "internal": bool(t.is_internal), "topic_id": _str_uuid(getattr(t, "topic_id", None))}
        for t in md.topics
        if error_code(t.error_code) == ErrorCode.none and (include_internal or not t.is_internal)
    ]
    return sorted(out, key=lambda r: r["topic"])


def list_offsets(client: AdminClient, specs: dict[TP, int]) -> dict[TP, int | None]:
    """ListOffsets at each partition's leader. ``specs`` maps (topic, partition) to
    EARLIEST, LATEST or a timestamp in ms; the answer is the offset, or None
    where the broker found none (a timestamp past the last record) or the
    partition is unknown."""
    out: dict[TP, int | None] = {tp: None for tp in specs}
    by_leader: dict[int, list[TP]] = defaultdict(list)
    for tp, node_id in client.leaders(list(specs)).items():
        by_leader[node_id].append(tp)
    for node_id, tps in by_leader.items():
        topics: dict[str, list[dict]] = defaultdict(list)
        for t, p in tps:
            topics[t].append({"partition_index": p, "current_leader_epoch": -1, "timestamp": specs[(t, p)]})
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        _, resp = client.node(node_id).request(LIST_OFFSETS, body)
        for t in resp.topics:
            for p in t.partitions:
                if error_code(p.error_code) == ErrorCode.none and p.offset >= 0:
                    out[(t.name, p.partition_index)] = p.offset
    return out


def _configs(client: AdminClient, topics: list[str]) -> dict[str, dict[str, str | None]]:
    if not topics or not client.any.supports(DESCRIBE_CONFIGS):
        return {}
    body = {
        "resources": [{"resource_type": _TOPIC_RESOURCE, "resource_name": t, "configuration_keys": None} for t in topics],
        "include_synonyms": False,
        "include_documentation": False,
    }
    _, resp = client.any.request(DESCRIBE_CONFIGS, body)
    out = {}
    for r in resp.results:
        if error_code(r.error_code) != ErrorCode.none:
            continue
        out[r.resource_name] = {c.name: c.value for c in r.configs if getattr(c, "config_source", _DEFAULT_CONFIG) != _DEFAULT_CONFIG}
    return out


def describe_topics(client: AdminClient, topics: list[str] | None) -> list[dict]:
    md = client.metadata(topics or None)
    found = []
    missing = []
    for t in md.topics:
        if error_code(t.error_code) != ErrorCode.none:
            missing.append({"topic": t.name, "error": _name(t.error_code)})
            continue
        if topics is None and t.is_internal:
            continue
        found.append(t)
    specs = {}
    for t in found:
        for p in t.partitions:
            specs[(t.name, p.partition_index)] = EARLIEST
    starts = list_offsets(client, specs)
    ends = list_offsets(client, {tp: LATEST for tp in specs})
    configs = _configs(client, [t.name for t in found])
    out = []
    for t in sorted(found, key=lambda t: t.name):
        partitions = []
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            tp = (t.name, p.partition_index)
            partitions.append(
                {
                    "partition": p.partition_index,
                    "leader": p.leader_id,
                    "leader_epoch": getattr(p, "leader_epoch", -1),
                    "replicas": list(p.replica_nodes),
                    "isr": list(p.isr_nodes),
                    "log_start_offset": starts.get(tp),
                    "log_end_offset": ends.get(tp),
                    "error": None if error_code(p.error_code) == ErrorCode.none else _name(p.error_code),
                }
            )
        out.append(
            {
                "topic": t.name,
                "topic_id": _str_uuid(getattr(t, "topic_id", None)),
                "internal": bool(t.is_internal),
                "partition_count": len(partitions),
                "replication_factor": max((len(p["replicas"]) for p in partitions), default=0),
                "configs": configs.get(t.name, {}),
                "partitions": partitions,
            }
        )
    return out + missing


def _controller(client: AdminClient):
    md = client.metadata([])
    cid = getattr(md, "controller_id", -1)
    return client.node(cid) if cid is not None and cid >= 0 else client.any


def create_topic(
    client: AdminClient, topic: str, partitions: int | None, replication_factor: int | None, configs: dict[str, str], validate_only: bool = False
) -> dict:
    conn = _controller(client)

    def body(v: int) -> dict:
        # -1 (the broker's default) needs v4+
        default = -1 if v >= 4 else 1
        return {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": partitions if partitions is not None else default,
                    "replication_factor": replication_factor if replication_factor is not None else default,
                    "assignments": [],
                    "configs": [{"name": k, "value": v_} for k, v_ in configs.items()],
                }
            ],
            "timeout": _TIMEOUT_MS,
            "validate_only": validate_only,
        }

    _, resp = conn.request(CREATE_TOPICS, body)
    r = resp.topics[0]
    return {
        "topic": r.name,
        "error": None if error_code(r.error_code) == ErrorCode.none else _name(r.error_code),
        "message": getattr(r, "error_message", None),
        "topic_id": _str_uuid(getattr(r, "topic_id", None)),
        "partitions": getattr(r, "num_partitions", partitions),
        "replication_factor": getattr(r, "replication_factor", replication_factor),
        "validate_only": validate_only,
    }


def delete_topics(client: AdminClient, topics: list[str]) -> list[dict]:
    conn = _controller(client)

    def body(v: int) -> dict:
        return {"topic_names": topics, "topics": [{"name": t, "topic_id": None} for t in topics], "timeout": _TIMEOUT_MS}

    _, resp = conn.request(DELETE_TOPICS, body)
    return [
        {
            "topic": r.name,
            "error": None if error_code(r.error_code) == ErrorCode.none else _name(r.error_code),
            "message": getattr(r, "error_message", None),
        }
        for r in resp.responses
    ]


# ==================================================================== groups


def list_groups(client: AdminClient, states: list[str] | None = None) -> list[dict]:
    """ListGroups at every broker (each lists the groups it coordinates)."""
    seen: dict[str, dict] = {}
    for conn in client.all_nodes():

        def body(v: int) -> dict:
            return {"states_filter": states or [], "types_filter": []}

        version, resp = conn.request(LIST_GROUPS, body)
        check(resp.error_code, "ListGroups")
        for g in resp.groups:
            seen[g.group_id] = {
                "group": g.group_id,
                "protocol_type": g.protocol_type,
                "state": getattr(g, "group_state", None),
                "type": getattr(g, "group_type", None),
            }
    out = sorted(seen.values(), key=lambda r: r["group"])
    if states:  # below v4 the broker does not filter
        wanted = {s.lower() for s in states}
        out = [g for g in out if g["state"] is None or g["state"].lower() in wanted]
    return out


def _tps(pairs) -> list[list]:
    return [[t, p] for t, p in sorted(pairs)]


def _classic_assignment(protocol_type: str, raw: bytes | None) -> list[list] | None:
    if protocol_type != "consumer" or not raw:
        return [] if protocol_type == "consumer" else None
    asg = parse_assignment(raw)
    if asg is None:
        return None
    return _tps((tp.topic, p) for tp in asg.assigned_partitions for p in tp.partitions)


def _consumer_assignment(asg) -> list[list]:
    if asg is None:
        return []
    return _tps((tp.topic_name, p) for tp in asg.topic_partitions for p in tp.partitions)


def describe_group(client: AdminClient, group: str) -> dict:
    """A group through ConsumerGroupDescribe (KIP-848), ShareGroupDescribe (KIP-932) or DescribeGroups (classic).

    ``state`` is ``Dead`` for a group the coordinator does not know.
    """
    conn = client.coordinator(group)
    coordinator = {"id": client.coordinator_id(group), "host": conn.host, "port": conn.port}
    if conn.supports(CONSUMER_GROUP_DESCRIBE):
        g, code = client.describe_group(group, CONSUMER_GROUP_DESCRIBE)
        if code == ErrorCode.none:
            return {
                **modern_group(group, "consumer", g, coordinator),
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "subscribed_topics": list(m.subscribed_topic_names),
                        "subscribed_regex": m.subscribed_topic_regex,
                        "assignment": _consumer_assignment(m.assignment),
                        "target_assignment": _consumer_assignment(m.target_assignment),
                        "classic_protocol": getattr(m, "member_type", 1) == 0,
                    }
                    for m in g.members
                ],
            }
        if code not in (ErrorCode.group_id_not_found,):
            check(code, f"ConsumerGroupDescribe({group})", g.error_message)
    if (share := describe_share_group(client, group, coordinator)) is not None:
        return share
    g, code = client.describe_group(group, DESCRIBE_GROUPS, "groups")
    if code == ErrorCode.group_id_not_found:
        return {"group": group, "type": None, "state": "Dead", "coordinator": coordinator, "members": []}
    check(code, f"DescribeGroups({group})", getattr(g, "error_message", None))
    return {
        "group": group,
        "type": "classic" if g.group_state != "Dead" else None,
        "state": g.group_state,
        "coordinator": coordinator,
        "protocol_type": g.protocol_type,
        "protocol": g.protocol_data,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": getattr(m, "group_instance_id", None),
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": _classic_assignment(g.protocol_type, m.member_assignment),
            }
            for m in g.members
        ],
    }


def committed_offsets(client: AdminClient, group: str) -> dict[TP, dict]:
    """Every committed offset of the group: (topic, partition) -> {"offset", "metadata"}."""

    def body(v: int) -> dict:
        if v >= 8:
            return {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}], "require_stable": False}
        return {"group_id": group, "topics": None, "require_stable": False}

    def error_of(resp):
        return resp.groups[0].error_code if hasattr(resp, "groups") else getattr(resp, "error_code", 0)

    version, resp = client.group_request(group, OFFSET_FETCH, body, error_of)
    check(error_of(resp), f"OffsetFetch({group})")
    topics = resp.groups[0].topics if hasattr(resp, "groups") else resp.topics
    out = {}
    for t in topics:
        for p in t.partitions:
            if error_code(p.error_code) == ErrorCode.none and p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = {"offset": p.committed_offset, "metadata": p.metadata}
    return out


def _owners(desc: dict) -> dict[TP, dict]:
    owners = {}
    for m in desc["members"]:
        for t, p in m.get("assignment") or []:
            owners[(t, p)] = m
    return owners


def group_lag(client: AdminClient, group: str) -> dict:
    desc = describe_group(client, group)
    committed = committed_offsets(client, group)
    owners = _owners(desc)
    tps = sorted(set(committed) | set(owners))
    ends = list_offsets(client, {tp: LATEST for tp in tps})
    rows = []
    for tp in tps:
        current = committed.get(tp, {}).get("offset")
        end = ends.get(tp)
        member = owners.get(tp)
        rows.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "current_offset": current,
                "log_end_offset": end,
                # Kafka's kafka-consumer-groups.sh: end - committed, negative when the committed
                # offset is past the log end (the log was truncated under it, docs/reliability.md)
                "lag": None if current is None or end is None else end - current,
                "member_id": member["member_id"] if member else None,
                "host": member["host"] if member else None,
                "client_id": member["client_id"] if member else None,
            }
        )
    total = sum(r["lag"] for r in rows if r["lag"] is not None and r["lag"] > 0)
    past_end = [r for r in rows if r["lag"] is not None and r["lag"] < 0]
    return {"group": group, "state": desc["state"], "type": desc["type"], "total_lag": total,
            "past_log_end": len(past_end), "partitions": rows}


def delete_group(client: AdminClient, group: str) -> dict:
    _, resp = client.group_request(group, DELETE_GROUPS, lambda v: {"groups_names": [group]}, lambda r: r.results[0].error_code)
    r = resp.results[0]
    return {"group": r.group_id, "error": None if error_code(r.error_code) == ErrorCode.none else _name(r.error_code)}


# ---------------------------------------------------------------- reset-offsets


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2`` (Kafka's tool's syntax)."""
    topic, sep, parts = spec.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError as exc:
        raise AdminError(f"bad partition list in {spec!r}: expected topic:0,1,2") from exc


def parse_datetime(text: str) -> int:
    """ISO 8601 to epoch ms; a time without a zone is taken as UTC."""
    try:
        dt = datetime.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError as exc:
        raise AdminError(f"not an ISO 8601 date and time: {text!r}") from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return int(dt.timestamp() * 1000)


def reset_offsets(
    client: AdminClient, group: str, to: str, value: Any = None, topics: list[str] | None = None, execute: bool = False
) -> dict:
    """Plan (and with ``execute`` commit) new offsets for an inactive group.

    ``to`` is ``earliest``, ``latest``, ``offset`` (value: int) or ``datetime``
    (value: ISO 8601). Without ``topics`` every partition with a committed
    offset is reset. Targets are clamped to the partition's [start, end] as
    Kafka's tool does.
    """
    desc = describe_group(client, group)
    state = desc["state"] or ""
    if state.lower() not in ("empty", "dead"):
        raise AdminError(f"Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.")
    committed = committed_offsets(client, group)
    if topics:
        wanted: list[TP] = []
        specs = [parse_topic_spec(s) for s in topics]
        md = client.metadata(sorted({t for t, _ in specs}))
        known = {t.name: [p.partition_index for p in t.partitions] for t in md.topics if error_code(t.error_code) == ErrorCode.none}
        for t, parts in specs:
            if t not in known:
                raise AdminError(f"topic {t!r} does not exist")
            for p in parts if parts is not None else sorted(known[t]):
                if p not in known[t]:
                    raise AdminError(f"topic {t!r} has no partition {p}")
                wanted.append((t, p))
    else:
        wanted = sorted(committed)
        if not wanted and state.lower() == "dead":
            raise AdminError(f"consumer group '{group}' does not exist; name the partitions to give it offsets with --topic")
        if not wanted:
            raise AdminError(f"group '{group}' has no committed offsets; name the partitions to reset with --topic")
    starts = list_offsets(client, {tp: EARLIEST for tp in wanted})
    ends = list_offsets(client, {tp: LATEST for tp in wanted})
    if to == "datetime":
        ts = parse_datetime(value)
        at = list_offsets(client, {tp: ts for tp in wanted})
    rows = []
    for tp in wanted:
        start, end = starts.get(tp), ends.get(tp)
        if start is None or end is None:
            raise AdminError(f"no offsets for {tp[0]}-{tp[1]} (is its leader available?)")
        if to == "earliest":
            new = start
        elif to == "latest":
            new = end
        elif to == "offset":
            new = min(max(int(value), start), end)
        elif to == "datetime":
            new = at.get(tp)
            new = end if new is None else new
        else:
            raise ValueError(to)
        rows.append({"topic": tp[0], "partition": tp[1], "current_offset": committed.get(tp, {}).get("offset"), "new_offset": new})
    if execute and rows:
        by_topic: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            by_topic[r["topic"]].append({"partition_index": r["partition"], "committed_offset": r["new_offset"], "committed_leader_epoch": -1, "committed_metadata": ""})

        def body(v: int) -> dict:
            return {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "retention_time": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }

        def error_of(resp):
            codes = [p.error_code for t in resp.topics for p in t.partitions]
            return next((c for c in codes if error_code(c) != ErrorCode.none), ErrorCode.none)

        _, resp = client.group_request(group, OFFSET_COMMIT, body, error_of)
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, f"OffsetCommit({group}, {t.name}-{p.partition_index})")
    return {"group": group, "state": state, "executed": bool(execute), "partitions": rows}


# ---------------------------------------------------------------- history


def read_partition(client: AdminClient, topic: str, partition: int, start: int | None = None):
    """Yield (offset, timestamp, key, value) from ``start`` (default: the log start) to the high watermark."""
    tp = (topic, partition)
    leader = client.leaders([tp]).get(tp)
    if leader is None:
        raise AdminError(f"topic {topic!r} does not exist", ErrorCode.unknown_topic_or_partition)
    conn = client.node(leader)
    offset = start if start is not None else list_offsets(client, {tp: EARLIEST})[tp] or 0
    end = list_offsets(client, {tp: LATEST})[tp] or 0
    while offset < end:

        def body(v: int, offset=offset) -> dict:
            return {
                "replica_id": -1,
                "max_wait": 100,
                "min_bytes": 1,
                "max_bytes": 16 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 8 << 20}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }

        _, resp = conn.request(FETCH, body)
        check(getattr(resp, "error_code", 0), "Fetch")
        part = resp.responses[0].partitions[0]
        check(part.error_code, f"Fetch({topic}-{partition})")
        data = part.records or b""
        batches, _ = scan_valid_prefix(data, verify_crc=True)
        if not batches:
            break
        for pos, header in batches:
            if not header.is_control:
                for r in iter_records(memoryview(data)[pos : pos + header.size]):
                    if r.offset >= offset and r.offset < end:
                        yield r.offset, r.timestamp, r.key, r.value
        offset = max(offset, batches[-1][1].next_offset)


def group_history(client: AdminClient, group: str, limit: int | None = None, events: list[str] | None = None) -> list[dict]:
    """The group's events from ``__kafkalite_group_events``, oldest first."""
    key = group.encode()
    out = []
    for offset, timestamp, k, value in read_partition(client, EVENTS_TOPIC, 0):
        if k != key or value is None:
            continue
        try:
            event = json.loads(value)
        except ValueError:
            continue
        if events and event.get("event") not in events:
            continue
        out.append({"offset": offset, "timestamp": timestamp, **event})
    return out[-limit:] if limit else out


# ==================================================================== transactions
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66


def list_transactions(client: AdminClient, states: list[str] | None = None) -> list[dict]:
    """ListTransactions at every broker (each lists the transactions it coordinates)."""
    out: dict[str, dict] = {}
    for conn in client.all_nodes():

        def body(v: int) -> dict:
            return {"state_filters": states or [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None}

        _, resp = conn.request(LIST_TRANSACTIONS, body)
        check(resp.error_code, "ListTransactions")
        for t in resp.transaction_states:
            out[t.transactional_id] = {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "state": t.transaction_state}
    return sorted(out.values(), key=lambda r: r["transactional_id"])


def describe_transaction(client: AdminClient, transactional_id: str) -> dict:
    """DescribeTransactions for one id, asked of its coordinator (FindCoordinator, as Kafka's admin
    client: which makes ``__transaction_state`` on a broker that has none yet). An unknown id:
    AdminError TRANSACTIONAL_ID_NOT_FOUND."""
    _, resp = client.group_request(
        transactional_id, DESCRIBE_TRANSACTIONS, lambda v: {"transactional_ids": [transactional_id]},
        lambda r: r.transaction_states[0].error_code, key_type=TRANSACTION_KEY,
    )
    last = resp.transaction_states[0]
    check(last.error_code, f"DescribeTransactions {transactional_id}")
    start = last.transaction_start_time
    return {
        "transactional_id": last.transactional_id,
        "state": last.transaction_state,
        "producer_id": last.producer_id,
        "producer_epoch": last.producer_epoch,
        "timeout_ms": int(last.transaction_timeout.total_seconds() * 1000) if hasattr(last.transaction_timeout, "total_seconds") else last.transaction_timeout,
        "start_time": start.timestamp() if hasattr(start, "timestamp") and start.timestamp() > 0 else None,
        "partitions": [[t.topic, p] for t in last.topics for p in sorted(t.partitions)],
    }
