"""A cluster of kafkalite processes for tests: ``ClusterProcess`` (the pytest plugin's ``kafkalite_cluster``).

    cluster = ClusterProcess(tmp_path / "data", nodes=3).start()
    Producer({"bootstrap.servers": cluster.bootstrap_servers})
    cluster.kill_node(cluster.active)        # SIGKILL; another node takes over
    cluster.start_node(1)
    cluster.move_leader("orders", 0, 2)      # node 2 leads every partition from now on
    cluster.close()

It runs ``python -m broker serve --nodes N`` on ephemeral ports of 127.0.0.1 and waits for
its READY line; the controls go through the control socket (``control.py``) and return
once done. One node leads every partition and hosts every coordinator (docs/multinode.md),
so ``move_leader`` and ``move_coordinator`` move all of them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from . import control


class ClusterProcess:
    def __init__(self, data_dir, nodes: int = 3, settings: dict | None = None, *, extra_args: list[str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.node_count = nodes
        self.settings = dict(settings or {})
        self.extra_args = list(extra_args or [])
        self.proc: subprocess.Popen | None = None
        self.nodes: dict[int, tuple[str, int]] = {}  # id -> (host:port, pid) as the NODE lines gave them
        self.ready_address = ""
        self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")

    def command_line(self) -> list[str]:
        args = [sys.executable, "-m", "broker", "serve", "--nodes", str(self.node_count), "--port", "0", "--data-dir", str(self.data_dir)]
        for name, value in self.settings.items():
            args += ["--set", f"{name}={value}"]
        return args + self.extra_args

    def start(self, timeout: float = 60.0) -> ClusterProcess:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen(self.command_line(), stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        log.close()
        lines: list[str] = []
        reader = threading.Thread(target=self._read_ready, args=(lines,), daemon=True)
        reader.start()
        reader.join(timeout)
        if not self.ready_address:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the cluster did not start: {lines!r}; see {self.log_path}")
        return self

    def _read_ready(self, lines: list[str]) -> None:
        for line in self.proc.stdout:
            lines.append(line)
            words = line.split()
            if words[:1] == ["NODE"]:
                self.nodes[int(words[1])] = (words[2], int(words[3]))
            elif words[:1] == ["READY"]:
                self.ready_address = words[1]
                return

    # ------------------------------------------------------------------ what clients need
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(address for address, _ in self.describe_addresses())

    def describe_addresses(self):
        return [self.nodes[i] for i in sorted(self.nodes)]

    def address(self, node_id: int) -> str:
        return self.nodes[node_id][0]

    def describe(self) -> dict:
        return control.command(self.data_dir, "nodes")

    @property
    def active(self) -> int:
        """The node that leads every partition and hosts every coordinator now."""
        return self.describe()["active"]

    def pid(self, node_id: int) -> int:
        return next(n["pid"] for n in self.describe()["nodes"] if n["id"] == node_id)

    # ------------------------------------------------------------------ controls
    def stop_node(self, node_id: int) -> dict:
        return control.command(self.data_dir, "stop-node", node_id)

    def kill_node(self, node_id: int) -> dict:
        return control.command(self.data_dir, "kill-node", node_id)

    def start_node(self, node_id: int) -> dict:
        answer = control.command(self.data_dir, "start-node", node_id)
        for n in answer["nodes"]:
            if n["id"] == node_id:
                self.nodes[node_id] = (n["address"], n["pid"])
        return answer

    def move_leader(self, topic: str, partition: int, node_id: int) -> dict:
        """Make ``node_id`` the leader of ``topic``-``partition`` (and, one node leading all, of every partition)."""
        return control.command(self.data_dir, "move-leader", node_id)

    def move_coordinator(self, group: str, node_id: int) -> dict:
        """Make ``node_id`` the coordinator of ``group`` (and of every group and transactional id)."""
        return control.command(self.data_dir, "move-leader", node_id)

    # ------------------------------------------------------------------ the controller
    def kill(self) -> None:
        """SIGKILL the controller (its nodes then exit)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def close(self, timeout: float = 60.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def __enter__(self) -> ClusterProcess:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.close()
