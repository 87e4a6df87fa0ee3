"""The client of a cluster's control socket: ``kafkalite cluster nodes|stop-node|kill-node|start-node|move-leader``.

The controller listens on an abstract Unix socket named after the real path of the data
directory (nothing to clean up, no path-length limit). A command is one JSON line,
``{"op": ..., "id": N}``; the answer is one JSON line, sent once the command is done
(the node stopped, started, or the new active node serves), with every node's state.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

MAX_COMMAND = 4096
COMMANDS = ("nodes", "stop-node", "kill-node", "start-node", "move-leader")


def control_address(data_dir) -> str:
    digest = hashlib.sha256(os.path.realpath(Path(data_dir)).encode()).hexdigest()[:24]
    return "\0kafkalite-cluster-" + digest


class ControlError(RuntimeError):
    pass


def command(data_dir, op: str, node_id: int | None = None, *, timeout: float = 60.0) -> dict:
    """Send one command to the controller of the cluster on ``data_dir``; its answer."""
    if op not in COMMANDS:
        raise ControlError(f"unknown command {op!r}: one of {', '.join(COMMANDS)}")
    request = {"op": op} if node_id is None else {"op": op, "id": node_id}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(control_address(data_dir))
        except OSError as exc:
            raise ControlError(f"no cluster controller serves {data_dir}: {exc}") from exc
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
        except OSError:
            pass  # the controller may have answered and closed first (a refused uid): its answer is still there to read
        data = b""
        while not data.endswith(b"\n"):
            try:
                chunk = sock.recv(65536)
            except OSError as exc:
                raise ControlError(f"the controller closed the connection during {op}: {exc}") from exc
            if not chunk:
                break
            data += chunk
    try:
        answer = json.loads(data)
    except ValueError as exc:
        raise ControlError(f"the controller gave no answer to {op}") from exc
    if not answer.get("ok"):
        raise ControlError(answer.get("error") or f"{op} failed")
    return answer


def main(argv: list[str]) -> int:
    """``kafkalite cluster [--data-dir DIR] nodes|stop-node ID|kill-node ID|start-node ID|move-leader ID|elect-leaders``."""
    import argparse

    p = argparse.ArgumentParser(prog="kafkalite cluster", description="control a cluster started by `kafkalite serve --nodes N`")
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("KAFKALITE_DATA_DIR", "data")), help="the cluster's data directory (KAFKALITE_DATA_DIR, default ./data)")
    p.add_argument("--json", action="store_true", help="print the controller's answer as JSON")
    sub = p.add_subparsers(dest="op", required=True)
    sub.add_parser("nodes", help="every node: id, address, pid, live, active")
    for op, what in (("stop-node", "stop a node (a controlled shutdown: its work moves first)"), ("kill-node", "kill a node with SIGKILL"),
                     ("start-node", "start a node that stopped or was killed"), ("move-leader", "make a node the leader of every partition and coordinator")):
        sub.add_parser(op, help=what).add_argument("id", type=int)
    sub.add_parser("elect-leaders", help="preferred leader election: the lowest live node leads again")
    args = p.parse_args(argv)
    try:
        if args.op == "elect-leaders":
            live = [n["id"] for n in command(args.data_dir, "nodes")["nodes"] if n["live"]]
            if not live:
                raise ControlError("no live node")
            answer = command(args.data_dir, "move-leader", min(live))
        else:
            answer = command(args.data_dir, args.op, getattr(args, "id", None))
    except ControlError as exc:
        print(f"kafkalite cluster: {exc}", file=__import__("sys").stderr)
        return 1
    if args.json:
        print(json.dumps(answer, indent=1))
        return 0
    print(f"{'NODE':<6}{'ADDRESS':<24}{'PID':<9}{'STATE':<9}ROLE")
    for n in answer["nodes"]:
        role = "active (leader, coordinators)" if n["active"] else ("standby" if n["live"] else "")
        print(f"{n['id']:<6}{n['address'] or '-':<24}{n['pid'] or '-':<9}{'live' if n['live'] else 'down':<9}{role}")
    return 0
