"""The admin subcommands of ``kafkalite``: ``topics``, ``groups``, ``transactions`` and ``health``.

``register(subparsers)`` adds them to the main parser; ``run(args)`` executes
the parsed command. Tables go to stdout for people, ``--json`` prints the same
data for scripts. Errors go to stderr with exit status 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from typing import Any

COMMANDS = ("topics", "groups", "transactions", "health")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# Kafka's group states (org.apache.kafka.common.GroupState): classic, consumer (KIP-848) and share
# groups'; ``--state`` takes them in any case, as kafka-consumer-groups.sh does
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling", "NotReady")


class UsageError(ValueError):
    """A bad option value found after parsing: one line, exit status 2."""


def _group_states(given: list[str] | None) -> list[str] | None:
    """``--state`` values (repeatable or comma-separated) as Kafka's names, or UsageError."""
    if not given:
        return None
    by_lower = {s.lower(): s for s in GROUP_STATES}
    out = []
    for word in (w.strip() for value in given for w in value.split(",")):
        if word.lower() not in by_lower:
            raise UsageError(f"invalid group state {word!r}; valid states are: {', '.join(GROUP_STATES)}")
        out.append(by_lower[word.lower()])
    return out


def _check_connection_options(args: argparse.Namespace) -> None:
    """``--bootstrap`` and ``--timeout``, checked before any connection (UsageError)."""
    import math

    from .client import parse_address

    timeout = args.timeout
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"--timeout must be a positive number of seconds, got {timeout:g}")
    addresses = [a for a in args.bootstrap.split(",") if a.strip()]
    if not addresses:
        raise UsageError("--bootstrap names no broker")
    for address in addresses:
        try:
            host, port = parse_address(address)
        except ValueError:
            host, port = None, None
        if not host or port is None or not 0 < port < 65536:
            raise UsageError(f"--bootstrap: {address.strip()!r} is not host:port (a port from 1 to 65535)")


# ==================================================================== parser


def _common(timeout: float = 10.0) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKALITE_BOOTSTRAP") or DEFAULT_BOOTSTRAP,
        help="host:port[,host:port...] of any broker (KAFKALITE_BOOTSTRAP, default %s)" % DEFAULT_BOOTSTRAP,
    )
    p.add_argument("--timeout", type=float, default=timeout, help=f"seconds to wait for a broker (default {timeout:g})")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def _config_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected name=value, got {text!r}")
    return name, value


def register(sub) -> None:
    """Add ``topics``, ``groups`` and ``health`` to the main parser's subparsers."""
    common = _common()

    # ---------------------------------------------------------------- topics
    t = sub.add_parser("topics", help="list, describe, create and delete topics (any Kafka broker)")
    ts = t.add_subparsers(dest="action", required=True, metavar="{list,describe,create,delete}")
    x = ts.add_parser("list", parents=[common], help="topic names and partition counts")
    x.add_argument("--exclude-internal", action="store_true", help="leave out internal topics such as __consumer_offsets")
    x = ts.add_parser("describe", parents=[common], help="partitions, leaders, offsets and non-default configs")
    x.add_argument("topics", nargs="*", metavar="TOPIC", help="default: every non-internal topic")
    x = ts.add_parser("create", parents=[common], help="create a topic")
    x.add_argument("topic", metavar="TOPIC")
    x.add_argument("--partitions", type=int, help="default: the broker's num.partitions")
    x.add_argument("--replication-factor", type=int, help="default: the broker's default")
    x.add_argument("--config", type=_config_pair, action="append", default=[], metavar="NAME=VALUE", help="a topic config; repeatable")
    x.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")
    x.add_argument("--validate-only", action="store_true", help="ask the broker to validate without creating")
    x = ts.add_parser("delete", parents=[common], help="delete topics")
    x.add_argument("topics", nargs="+", metavar="TOPIC")
    x.add_argument("--if-exists", action="store_true", help="succeed if a topic does not exist")

    # ---------------------------------------------------------------- groups
    g = sub.add_parser("groups", help="consumer groups: list, describe, lag, delete, reset-offsets, history")
    gs = g.add_subparsers(dest="action", required=True, metavar="{list,describe,lag,delete,reset-offsets,history}")
    x = gs.add_parser("list", parents=[common], help="every group of every broker")
    x.add_argument("--state", action="append", metavar="STATE", help="only groups in this state (Stable, Empty, ...); repeatable")
    x = gs.add_parser("describe", parents=[common], help="state and members (classic and KIP-848 groups)")
    x.add_argument("group", metavar="GROUP")
    x = gs.add_parser("lag", parents=[common], help="committed offset, log end offset and lag per partition")
    x.add_argument("group", metavar="GROUP")
    x = gs.add_parser("delete", parents=[common], help="delete an empty group and its offsets")
    x.add_argument("group", metavar="GROUP")
    x = gs.add_parser(
        "reset-offsets",
        parents=[common],
        help="plan new committed offsets for an inactive group; --execute commits them",
        description="Prints the plan and commits nothing unless --execute is given. The group must be empty "
        "(no active members). Targets outside a partition's offsets are moved to its start or end.",
    )
    x.add_argument("group", metavar="GROUP")
    to = x.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the start of each partition")
    to.add_argument("--to-latest", action="store_true", help="the end of each partition")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N of each partition")
    to.add_argument("--to-datetime", metavar="ISO", help="the first offset at or after this time (ISO 8601; UTC when no zone)")
    x.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]", help="only this topic (or these partitions); repeatable; default: every partition with a committed offset")
    x.add_argument("--execute", action="store_true", help="commit the new offsets (default: dry run)")
    x = gs.add_parser("history", parents=[common], help="the group's events (rebalances, epochs...) from kafkalite's __kafkalite_group_events")
    x.add_argument("group", metavar="GROUP")
    x.add_argument("--limit", type=int, metavar="N", help="only the last N events")
    x.add_argument("--event", action="append", metavar="NAME", help='only events of this kind, e.g. "rebalance completed"; repeatable')

    # ---------------------------------------------------------------- transactions
    tx = sub.add_parser("transactions", help="transactions: list, describe (any Kafka broker)")
    txs = tx.add_subparsers(dest="action", required=True, metavar="{list,describe}")
    x = txs.add_parser("list", parents=[common], help="every transactional id of every broker, with its producer id and state")
    x.add_argument("--state", action="append", metavar="STATE", help="only transactions in this state (Ongoing, CompleteCommit, ...); repeatable")
    x = txs.add_parser("describe", parents=[common], help="a transaction's state, producer, timeout, start time and partitions")
    x.add_argument("transactional_id", metavar="TRANSACTIONAL_ID")

    # ---------------------------------------------------------------- health
    h = sub.add_parser("health", parents=[_common(timeout=5.0)], help="exit 0 if a broker answers ApiVersions, 1 otherwise")
    h.set_defaults(action=None)


# ==================================================================== output


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(v) for v in value) or "-"
    return str(value)


def table(headers: list[str], rows: list[list[Any]], out=None) -> None:
    """Left-aligned columns, two spaces apart; the last column is not padded."""
    out = out or sys.stdout
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    for row in [headers, *cells]:
        line = "  ".join(v.ljust(w) for v, w in zip(row[:-1], widths[:-1], strict=True))
        print((line + "  " if line else "") + row[-1], file=out)


def _partitions(pairs: list[list] | None) -> str:
    """[["t", 0], ["t", 1], ["u", 0]] as "t(0,1) u(0)"."""
    if pairs is None:
        return "?"
    by_topic: dict[str, list[int]] = {}
    for t, p in pairs:
        by_topic.setdefault(t, []).append(p)
    return " ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items())) or "-"


def _time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _show(args, data: Any, headers: list[str], rows: list[list[Any]]) -> int:
    """``data`` as JSON with --json, else ``rows`` as a table; exit code 0."""
    if args.json:
        _emit_json(data)
    else:
        table(headers, rows)
    return 0


# ==================================================================== commands


def _topics(client, args) -> int:
    from . import ops
    from .client import AdminError

    if args.action == "list":
        rows = ops.list_topics(client, include_internal=not args.exclude_internal)
        return _show(args, rows, ["TOPIC", "PARTITIONS", "INTERNAL"], [[r["topic"], r["partitions"], r["internal"]] for r in rows])
    if args.action == "describe":
        topics = ops.describe_topics(client, args.topics or None)
        failed = [t for t in topics if "error" in t]
        if args.json:
            _emit_json(topics)
        else:
            for i, t in enumerate(t for t in topics if "error" not in t):
                if i:
                    print()
                configs = ",".join(f"{k}={v}" for k, v in sorted(t["configs"].items())) or "-"
                print(f"Topic: {t['topic']}  TopicId: {t['topic_id'] or '-'}  PartitionCount: {t['partition_count']}  "
                      f"ReplicationFactor: {t['replication_factor']}  Configs: {configs}")
                table(
                    ["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "LOG-END-OFFSET"],
                    [[p["partition"], p["leader"], p["replicas"], p["isr"], p["log_start_offset"], p["log_end_offset"]] for p in t["partitions"]],
                )
        for t in failed:
            print(f"kafkalite: topic {t['topic']!r}: {t['error']}", file=sys.stderr)
        return 1 if failed else 0
    if args.action == "create":
        r = ops.create_topic(client, args.topic, args.partitions, args.replication_factor, dict(args.config), args.validate_only)
        exists = r["error"] == "TOPIC_ALREADY_EXISTS"
        if args.json:
            _emit_json(r)
        elif r["error"] is None:
            print(f"{'Validated' if args.validate_only else 'Created'} topic {r['topic']} "
                  f"({r['partitions']} partitions, replication factor {r['replication_factor']}).")
        elif exists and args.if_not_exists:
            print(f"Topic {r['topic']} already exists.")
        if r["error"] is not None and not (exists and args.if_not_exists):
            raise AdminError(f"cannot create topic {r['topic']!r}: {r['error']}" + (f" ({r['message']})" if r["message"] else ""))
        return 0
    if args.action == "delete":
        results = ops.delete_topics(client, args.topics)
        failed = [r for r in results if r["error"] is not None and not (args.if_exists and r["error"] == "UNKNOWN_TOPIC_OR_PARTITION")]
        if args.json:
            _emit_json(results)
        else:
            for r in results:
                if r["error"] is None:
                    print(f"Deleted topic {r['topic']}.")
                elif r not in failed:
                    print(f"Topic {r['topic']} does not exist.")
        for r in failed:
            print(f"kafkalite: cannot delete topic {r['topic']!r}: {r['error']}" + (f" ({r['message']})" if r["message"] else ""), file=sys.stderr)
        return 1 if failed else 0
    raise AssertionError(args.action)


def _describe_text(d: dict) -> None:
    coord = d["coordinator"]
    head = f"Group: {d['group']}  Type: {d['type']}  State: {d['state']}  Coordinator: {coord['id']} ({coord['host']}:{coord['port']})"
    if d["type"] in ("consumer", "share"):
        print(head)
        print(f"GroupEpoch: {d['group_epoch']}  AssignmentEpoch: {d['assignment_epoch']}  Assignor: {d['assignor'] or '-'}  Members: {len(d['members'])}")
        rows = []
        for m in d["members"]:
            subscription = m["subscribed_regex"] or ",".join(m["subscribed_topics"]) or "-"
            rows.append([m["member_id"], m["member_epoch"], m["instance_id"], m["client_id"], m["host"], subscription,
                         _partitions(m["assignment"]), _partitions(m["target_assignment"])])
        if rows:
            print()
            table(["MEMBER-ID", "EPOCH", "INSTANCE-ID", "CLIENT-ID", "HOST", "SUBSCRIPTION", "ASSIGNMENT", "TARGET-ASSIGNMENT"], rows)
        return
    print(head)
    print(f"ProtocolType: {d['protocol_type'] or '-'}  Protocol: {d['protocol'] or '-'}  Members: {len(d['members'])}")
    rows = [[m["member_id"], m["instance_id"], m["client_id"], m["host"], _partitions(m["assignment"])] for m in d["members"]]
    if rows:
        print()
        table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"], rows)


_HISTORY_SKIP = {"event", "ts", "group", "offset", "timestamp", "generation", "generation_before", "generation_after", "epoch", "group_epoch"}


def _detail(value: Any) -> str:
    if isinstance(value, dict):
        if "member" in value:
            return value["member"] + (f" ({value['reason']})" if value.get("reason") else "")
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, list):
        return "[" + ", ".join(_detail(v) for v in value) + "]"
    return str(value)


def history_row(e: dict) -> list[str]:
    """TIME, EVENT, GENERATION (classic) or EPOCH (KIP-848), DETAILS."""
    if "generation_before" in e or "generation_after" in e:
        gen = f"{e.get('generation_before')}->{e.get('generation_after')}"
    elif "generation" in e:
        gen = str(e["generation"])
    elif "epoch" in e:
        gen = f"epoch {e['epoch']}"
    elif "group_epoch" in e:
        gen = f"epoch {e['group_epoch']}"
    else:
        gen = "-"
    ts = e.get("ts")
    if ts is None and e.get("timestamp") is not None:
        ts = e["timestamp"] / 1000
    details = " ".join(f"{k}={_detail(v)}" for k, v in e.items() if k not in _HISTORY_SKIP and v not in (None, [], ""))
    return [_time(ts), e.get("event", "?"), gen, details or "-"]


def _groups(client, args) -> int:
    from . import ops
    from .client import AdminError

    if args.action == "list":
        rows = ops.list_groups(client, args.state)
        return _show(args, rows, ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"],
                     [[r["group"], r["type"], r["state"], r["protocol_type"] or None] for r in rows])
    if args.action == "describe":
        d = ops.describe_group(client, args.group)
        missing = d["state"] == "Dead"
        if args.json:
            _emit_json(d)
        elif not missing:
            _describe_text(d)
        if missing:
            print(f"kafkalite: consumer group '{args.group}' does not exist.", file=sys.stderr)
        return 1 if missing else 0
    if args.action == "lag":
        lag = ops.group_lag(client, args.group)
        missing = lag["state"] == "Dead" and not lag["partitions"]
        if args.json:
            _emit_json(lag)
        if missing:
            print(f"kafkalite: consumer group '{args.group}' does not exist.", file=sys.stderr)
            return 1
        if args.json:
            return 0
        if lag["state"] in ("Empty", "Dead", "empty"):
            print(f"Consumer group '{args.group}' has no active members.", file=sys.stderr)
        table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
            [[args.group, r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"], r["member_id"], r["host"], r["client_id"]]
             for r in lag["partitions"]],
        )
        for r in lag["partitions"]:
            if r["lag"] is not None and r["lag"] < 0:
                print(f"Note: {r['topic']}-{r['partition']}: the committed offset {r['current_offset']} is past the log end "
                      f"offset {r['log_end_offset']} (negative lag): records the group had consumed are no longer in the log "
                      "(see docs/reliability.md).", file=sys.stderr)
        return 0
    if args.action == "delete":
        r = ops.delete_group(client, args.group)
        if args.json:
            _emit_json(r)
        elif r["error"] is None:
            print(f"Deleted group {args.group}.")
        if r["error"] is not None:
            hint = {"NON_EMPTY_GROUP": " (it has active members)", "GROUP_ID_NOT_FOUND": " (no such group)"}.get(r["error"], "")
            raise AdminError(f"cannot delete group '{args.group}': {r['error']}{hint}")
        return 0
    if args.action == "reset-offsets":
        if args.to_earliest:
            to, value = "earliest", None
        elif args.to_latest:
            to, value = "latest", None
        elif args.to_offset is not None:
            to, value = "offset", args.to_offset
        else:
            to, value = "datetime", args.to_datetime
            ops.parse_datetime(value)  # fail before any request
        r = ops.reset_offsets(client, args.group, to, value, args.topic, args.execute)
        if args.json:
            _emit_json(r)
        else:
            table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                  [[args.group, p["topic"], p["partition"], p["current_offset"], p["new_offset"]] for p in r["partitions"]])
            if not args.execute:
                print("Dry run: nothing was committed. Add --execute to commit these offsets.", file=sys.stderr)
        return 0
    if args.action == "history":
        try:
            events = ops.group_history(client, args.group, args.limit, args.event)
        except AdminError as exc:
            if exc.code is not None and exc.code.name == "unknown_topic_or_partition":
                raise AdminError(f"this broker has no {ops.EVENTS_TOPIC} topic: group history is published by kafkalite only") from exc
            raise
        # no events: say so when the group does not exist either (a deleted group keeps its history)
        missing = not events and ops.describe_group(client, args.group)["state"] == "Dead"
        if args.json:
            _emit_json(events)
        elif not missing:
            table(["TIME", "EVENT", "GENERATION", "DETAILS"], [history_row(e) for e in events])
        if missing:
            print(f"kafkalite: consumer group '{args.group}' does not exist.", file=sys.stderr)
            return 1
        return 0
    raise AssertionError(args.action)


def _health(args) -> int:
    from .client import AdminError, Connection, parse_address

    errors = []
    for address in args.bootstrap.split(","):
        host, port = parse_address(address)
        try:
            conn = Connection(host, port, args.timeout)
        except AdminError as exc:
            errors.append(str(exc))
            continue
        except Exception as exc:  # noqa: BLE001 - an answer we cannot read is unhealthy too
            errors.append(f"{host}:{port}: {type(exc).__name__}: {exc}")
            continue
        conn.close()
        if args.json:
            _emit_json({"ok": True, "broker": f"{host}:{port}", "apis": len(conn.versions)})
        else:
            print(f"ok {host}:{port} ({len(conn.versions)} APIs)")
        return 0
    if args.json:
        _emit_json({"ok": False, "errors": errors})
    print("kafkalite: unhealthy: " + "; ".join(errors), file=sys.stderr)
    return 1


def _transactions(client, args) -> int:
    from . import ops

    if args.action == "list":
        rows = ops.list_transactions(client, args.state)
        return _show(args, rows, ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"],
                     [[r["transactional_id"], r["producer_id"], r["state"]] for r in rows])
    d = ops.describe_transaction(client, args.transactional_id)
    return _show(args, d, ["TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "START", "PARTITIONS"],
                 [[d["transactional_id"], d["state"], d["producer_id"], d["producer_epoch"], d["timeout_ms"], _time(d["start_time"]),
                   _partitions(d["partitions"])]])


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``topics``, ``groups`` or ``health`` command; returns the exit status."""
    from protocol.codec import DecodeError

    from .client import AdminClient, AdminError

    try:
        _check_connection_options(args)
        if args.command == "groups" and args.action == "list":
            args.state = _group_states(args.state)
        if args.command == "health":
            return _health(args)
        with AdminClient(args.bootstrap, timeout=args.timeout) as client:
            return {"topics": _topics, "transactions": _transactions}.get(args.command, _groups)(client, args)
    except UsageError as exc:
        print(f"kafkalite {args.command}: {exc}", file=sys.stderr)
        return 2
    except AdminError as exc:
        print(f"kafkalite: {exc}", file=sys.stderr)
        return 1
    except DecodeError as exc:
        print(f"kafkalite: unreadable answer from the broker: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `| head`
        return 0
