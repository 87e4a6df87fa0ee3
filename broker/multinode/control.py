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
        sock.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
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
