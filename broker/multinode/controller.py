"""The controller of a cluster on one host (``kafkalite serve --nodes N``).

It holds ``<data-dir>/.controller.lock`` (one cluster per directory), forks node 1..N
before its event loop starts (a node is ready in about a tenth of a second, as it
need not import the broker again), and then:

- keeps each node's lease: a node is live from its hello until its channel closes
  (it exited, or was killed: known at once) or its heartbeats stop for
  ``broker.session.timeout.ms``, when the controller kills it (SIGKILL), so a node
  that hangs cannot keep the data directory from the next active node;
- chooses the active node, which leads every partition and hosts every
  coordinator: the preferred one (``move-leader``) if live, else the lowest live
  id; the choice bumps the cluster epoch, kept in ``<data-dir>/cluster.json``;
- sends every node an image whenever a node comes or goes, the active node
  changes or the active node publishes its topics;
- relays a standby node's auto-created topic to the active node, and the admin requests
  a standby node forwards to it (``forwarding.py``) with their answers;
- serves the control socket (an abstract Unix socket named after the data
  directory, ``control.py``): nodes, stop-node, kill-node, start-node, move-leader.

It prints ``NODE <id> <host>:<port> <pid>`` for every node, then ``READY host:port``
(node 1's address) once the active node serves. When the controller stops (SIGTERM),
it stops every node; when it dies, the nodes see their channel close and exit.
"""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import json
import os
import re
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from storage.atomic import write_atomically
from storage.leader_epochs import latest_leader_epoch

from .. import datadir
from ..logs import get_logger
from .channel import Channel, ChannelClosed
from .control import MAX_COMMAND, control_address

log = get_logger("controller")

STATE_FILE = "cluster.json"
CONTROL_READ_S = 10.0  # a control connection sends its command within this, or is answered and closed
_PR_SET_PDEATHSIG = 1
_PORT = re.compile(r":(\d+)$")


def node_config(config, node_id: int):
    """Node ``node_id``'s configuration: every non-zero port moved up by ``node_id - 1``."""
    step = node_id - 1

    def port(value):
        return value + step if value else value

    def endpoint(text: str) -> str:
        m = _PORT.search(text)
        return text if m is None or m.group(1) == "0" else text[: m.start()] + f":{int(m.group(1)) + step}"

    return dataclasses.replace(
        config,
        node_id=node_id,
        port=port(config.port),
        advertised_port=port(config.advertised_port),
        listeners=[endpoint(x) for x in config.listeners] if config.listeners else config.listeners,
        advertised_listeners=[endpoint(x) for x in config.advertised_listeners] if config.advertised_listeners else config.advertised_listeners,
        metrics_port=port(config.metrics_port) if config.metrics_port is not None else None,
    )


def _peer_uid(sock) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED), -1 if unknown."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return -1
    return struct.unpack("3i", creds)[1]


@dataclass(eq=False)
class Slot:
    """One node, as the controller sees it."""

    node_id: int
    pid: int = 0
    channel: Channel | None = None
    sock: socket.socket | None = None
    live: bool = False
    advertised: dict | None = None
    last_beat: float = 0.0
    activated: bool = False
    applied: int = 0  # the last publication of the active node it has applied
    gone: asyncio.Event | None = None  # set once its channel has closed
    hello: asyncio.Event | None = None


class Controller:
    def __init__(self, config, lock_fd: int) -> None:
        self.config = config
        self.lock_fd = lock_fd
        self.data_dir = Path(config.data_dir)
        self.slots = {i: Slot(i) for i in range(1, config.nodes + 1)}
        self.active = -1
        self.preferred: int | None = None
        self.epoch = self._read_epoch()
        self.topics: dict = {}
        self.configs: dict = {}
        self.seq = 0  # the active node's last publication
        self.cluster_id = ""
        self.stopping = False
        self.starting = True  # no choice of the active node before every node said hello
        self.control_server = None
        self.active_ready: asyncio.Event | None = None
        self.restart_after_move: set[int] = set()

    # ------------------------------------------------------------------ processes
    def spawn(self, node_id: int) -> None:
        """Fork node ``node_id``; its end of the channel is the one descriptor it keeps of ours."""
        slot = self.slots[node_id]
        ours, theirs = socket.socketpair()
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the node
            code = 1
            try:
                self._in_child(ours, parent)
                from .node import serve

                code = serve(node_config(self.config, node_id), theirs)
            finally:
                os._exit(code)
        theirs.close()
        slot.pid = pid
        slot.sock = ours
        slot.live = False
        slot.activated = False
        slot.advertised = None
        slot.channel = None
        log.info("node started", node_id=node_id, pid=pid)

    def _in_child(self, ours: socket.socket, parent: int) -> None:
        asyncio.events._set_running_loop(None)  # a restart is forked from inside the controller's loop
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_DFL)
        ours.close()
        os.close(self.lock_fd)
        for slot in self.slots.values():
            if slot.sock is not None:
                os.close(slot.sock.fileno())
        if self.control_server is not None:
            for s in self.control_server.sockets:
                os.close(s.fileno())
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):  # pragma: no cover - not Linux: the channel's close still stops it
            pass
        if os.getppid() != parent:  # the controller died before the death signal was armed
            os._exit(1)

    def _reap(self, slot: Slot) -> None:
        if slot.pid:
            try:
                os.waitpid(slot.pid, os.WNOHANG)
            except ChildProcessError:
                pass

    def _kill(self, slot: Slot, sig=signal.SIGKILL) -> None:
        if slot.pid:
            try:
                os.kill(slot.pid, sig)
            except ProcessLookupError:
                pass

    # ------------------------------------------------------------------ state
    def _read_epoch(self) -> int:
        try:
            return int(json.loads((self.data_dir / STATE_FILE).read_bytes()).get("epoch", 0))
        except (OSError, ValueError, AttributeError):
            # lost or damaged: the partitions' leader epochs say how far the elections went, so that
            # the next one is still higher than any a client has seen
            return latest_leader_epoch(self.data_dir)

    def _write_epoch(self) -> None:
        data = json.dumps({"version": 1, "epoch": self.epoch}).encode()
        write_atomically(self.data_dir / STATE_FILE, data)

    def image(self) -> dict:
        return {
            "t": "image", "epoch": self.epoch, "active": self.active, "cluster_id": self.cluster_id, "topics": self.topics, "configs": self.configs, "seq": self.seq,
            "nodes": {str(s.node_id): {"live": s.live, "advertised": s.advertised or {}} for s in self.slots.values() if s.advertised is not None},
        }

    def broadcast(self) -> None:
        image = self.image()
        for slot in self.slots.values():
            if slot.live and slot.channel is not None:
                slot.channel.send(image)

    def elect(self) -> None:
        """Choose an active node if there is none live: the preferred one, else the lowest live id."""
        if self.stopping or self.starting:
            return
        current = self.slots.get(self.active)
        if current is not None and current.live:
            return
        live = [s for s in self.slots.values() if s.live]
        if not live:
            if self.active != -1:
                self.active = -1
                log.warning("no live node: no partition has a leader")
            return
        pick = self.slots.get(self.preferred) if self.preferred is not None else None
        if pick is None or not pick.live:
            pick = min(live, key=lambda s: s.node_id)
        self.epoch += 1
        self._write_epoch()
        self.active = pick.node_id
        pick.activated = False
        if self.active_ready is not None:
            self.active_ready.clear()
        log.info("active node chosen", node_id=pick.node_id, epoch=self.epoch)
        pick.channel.send({"t": "activate", "epoch": self.epoch, "seq": self.seq})  # its publications number on from here
        self.broadcast()

    # ------------------------------------------------------------------ channels
    async def _attach(self, slot: Slot) -> None:
        slot.gone = asyncio.Event()
        slot.hello = asyncio.Event()
        slot.channel = await Channel.open(slot.sock)
        asyncio.ensure_future(self._read(slot, slot.channel))

    async def _read(self, slot: Slot, channel: Channel) -> None:
        try:
            while True:
                message = await channel.recv()
                slot.last_beat = time.monotonic()
                self._on(slot, message)
        except ChannelClosed:
            pass
        except Exception:  # noqa: BLE001 - a node's bad message costs that node, not the controller
            log.exception("bad message from node", node_id=slot.node_id)
            self._kill(slot)
        if slot.channel is channel:
            self._gone(slot)

    def _on(self, slot: Slot, message: dict) -> None:
        kind = message["t"]
        if kind == "hello":
            slot.advertised = {str(k): [str(v[0]), int(v[1])] for k, v in dict(message["advertised"]).items()}
            slot.live = True
            slot.hello.set()
            log.info("node live", node_id=slot.node_id, pid=slot.pid, address=self.address(slot))
            self.broadcast()
            self.elect()
        elif kind == "active" and slot.node_id == self.active:
            slot.activated = True
            self.active_ready.set()
            log.info("active node serving", node_id=slot.node_id, epoch=self.epoch)
        elif kind == "topics" and slot.node_id == self.active:
            self.topics = dict(message["topics"])
            self.configs = dict(message.get("configs") or {})
            self.cluster_id = str(message.get("cluster_id") or "")
            self.seq = int(message.get("seq", 0))
            self.broadcast()
        elif kind == "applied":
            slot.applied = int(message["seq"])
            self._synced()
        elif kind == "fwd":  # a request forwarded to the active node (forwarding.py), answered back to the sender
            active = self.slots.get(self.active)
            if active is not None and active.live and active.channel is not None and active is not slot:
                active.channel.send({**message, "from": slot.node_id})
            else:
                slot.channel.send({"t": "fwd-answer", "id": message.get("id")})
        elif kind == "fwd-answer":
            to = self.slots.get(message.get("to"))
            if to is not None and to.live and to.channel is not None:
                to.channel.send(message)
        elif kind == "create":
            active = self.slots.get(self.active)
            if active is not None and active.live and active is not slot:
                active.channel.send({"t": "create", "name": message.get("name"), "partitions": message.get("partitions")})
        elif kind == "move-leader" and slot.node_id == self.active:  # ElectLeaders on the active node: the preferred replica leads again
            target = message.get("id")
            if isinstance(target, int) and target in self.slots and target != self.active and self.slots[target].live:
                asyncio.ensure_future(self._move_for_election(target))

    async def _move_for_election(self, node_id: int) -> None:
        try:
            await self.move_leader(node_id)
        except (TimeoutError, ValueError) as exc:
            log.warning("preferred leader election failed", node_id=node_id, error=str(exc) or type(exc).__name__)

    def _synced(self) -> None:
        """Tell the active node how far every live node has applied its publications."""
        active = self.slots.get(self.active)
        if active is None or not active.live or active.channel is None:
            return
        live = [s.applied for s in self.slots.values() if s.live]
        if live:
            active.channel.send({"t": "synced", "seq": min(live)})

    def _gone(self, slot: Slot) -> None:
        was_live = slot.live
        slot.live = False
        slot.activated = False
        slot.channel = None
        if slot.sock is not None:
            slot.sock.close()
            slot.sock = None
        self._reap(slot)
        slot.gone.set()
        log.warning("node gone", node_id=slot.node_id, pid=slot.pid)
        if self.stopping:
            return
        if was_live:
            self.broadcast()
            self._synced()  # a node gone is no longer waited for
        self.elect()
        if slot.node_id in self.restart_after_move or self.config.restart_nodes:
            self.restart_after_move.discard(slot.node_id)
            asyncio.ensure_future(self.start_node(slot.node_id))

    async def _leases(self) -> None:
        timeout = self.config.broker_session_timeout_ms / 1000
        while True:
            await asyncio.sleep(min(0.25, timeout / 4))
            now = time.monotonic()
            for slot in self.slots.values():
                if slot.live and now - slot.last_beat > timeout:
                    log.warning("node lease expired: fenced", node_id=slot.node_id, pid=slot.pid, silent_ms=round((now - slot.last_beat) * 1000))
                    self._kill(slot)

    # ------------------------------------------------------------------ controls
    def address(self, slot: Slot) -> str:
        if not slot.advertised:
            return ""
        host, port = next(iter(slot.advertised.values()))
        return f"{host}:{port}"

    def describe(self) -> dict:
        return {
            "active": self.active, "epoch": self.epoch,
            "nodes": [
                {"id": s.node_id, "pid": s.pid, "live": s.live, "active": s.node_id == self.active and s.activated, "address": self.address(s)}
                for s in self.slots.values()
            ],
        }

    async def start_node(self, node_id: int) -> None:
        slot = self.slots[node_id]
        if slot.live or (slot.gone is not None and not slot.gone.is_set()):
            return
        self.spawn(node_id)
        await self._attach(slot)
        await asyncio.wait_for(slot.hello.wait(), 30)

    async def stop_node(self, node_id: int, sig) -> None:
        slot = self.slots[node_id]
        if slot.gone is None or slot.gone.is_set():
            return
        if node_id == self.preferred:
            self.preferred = None
        self._kill(slot, sig)
        await asyncio.wait_for(slot.gone.wait(), 30)

    async def move_leader(self, node_id: int) -> None:
        """Make ``node_id`` the active node: the current one stops (its leadership fenced), and is
        started again as a standby."""
        target = self.slots[node_id]
        if not target.live:
            raise ValueError(f"node {node_id} is not live")
        self.preferred = node_id
        if self.active != node_id:
            old = self.slots.get(self.active)
            if old is not None and old.live:
                self.restart_after_move.add(old.node_id)
                self._kill(old, signal.SIGTERM)
                await asyncio.wait_for(old.gone.wait(), 30)
            else:
                self.elect()
        await asyncio.wait_for(self.active_ready.wait(), 30)

    async def _control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            uid = _peer_uid(writer.get_extra_info("socket"))
            if uid not in (os.getuid(), 0):  # an abstract socket has no file permissions: the peer's uid is checked
                raise PermissionError(f"uid {uid} may not control this cluster (uid {os.getuid()} and root may)")
            line = await asyncio.wait_for(reader.readline(), CONTROL_READ_S)
            if len(line) > MAX_COMMAND:
                raise ValueError("command too long")
            command = json.loads(line)
            op = command.get("op")
            node = command.get("id")
            if op != "nodes" and (not isinstance(node, int) or node not in self.slots):
                raise ValueError(f"no node {node!r}: nodes are 1..{len(self.slots)}")
            if op == "kill-node":
                await self.stop_node(node, signal.SIGKILL)
            elif op == "stop-node":
                await self.stop_node(node, signal.SIGTERM)
            elif op == "start-node":
                await self.start_node(node)
                await asyncio.wait_for(self.active_ready.wait(), 30)  # and some node serves (it may be this one)
            elif op == "move-leader":
                await self.move_leader(node)
            elif op != "nodes":
                raise ValueError(f"unknown command {op!r}")
            answer = {"ok": True, **self.describe()}
        except (TimeoutError, ValueError, TypeError, AttributeError, PermissionError) as exc:
            answer = {"ok": False, "error": str(exc) or type(exc).__name__}
        try:
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    # ------------------------------------------------------------------ the run
    async def serve(self, t0: float) -> int:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, self._dump_nodes)
        self.active_ready = asyncio.Event()
        try:
            self.control_server = await asyncio.start_unix_server(self._control, control_address(self.data_dir), limit=MAX_COMMAND + 1)
        except OSError as exc:
            log.error("cannot open the control socket", error=str(exc))
            return 1
        for slot in self.slots.values():
            await self._attach(slot)
        leases = asyncio.ensure_future(self._leases())
        hellos = asyncio.gather(*(s.hello.wait() for s in self.slots.values()))
        ready = asyncio.ensure_future(self._ready(hellos, t0))
        await stop.wait()
        ready.cancel()
        leases.cancel()
        await self.shutdown()
        return 0

    def _dump_nodes(self) -> None:
        """SIGUSR1: every node dumps its state to stderr, as a single broker does."""
        for slot in self.slots.values():
            if slot.live:
                self._kill(slot, signal.SIGUSR1)

    async def _ready(self, hellos, t0: float) -> None:
        try:
            await asyncio.wait_for(hellos, 60)
            self.starting = False
            self.elect()
            await asyncio.wait_for(self.active_ready.wait(), 120)
        except TimeoutError:
            log.error("the cluster did not start", nodes=self.describe()["nodes"])
            os.kill(os.getpid(), signal.SIGTERM)
            return
        lines = [f"NODE {s.node_id} {self.address(s)} {s.pid}" for s in self.slots.values()]
        lines.append(f"READY {self.address(self.slots[1])}")
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
        log.info("cluster ready", nodes=len(self.slots), active=self.active, startup_ms=round((time.monotonic() - t0) * 1000, 1), pid=os.getpid())

    async def shutdown(self) -> None:
        """Stop every node (the active one last, so the standby ones send it no more work), then exit."""
        self.stopping = True
        order = sorted(self.slots.values(), key=lambda s: s.node_id == self.active)
        for slot in order:
            if slot.gone is not None and not slot.gone.is_set():
                self._kill(slot, signal.SIGTERM)
                try:
                    await asyncio.wait_for(slot.gone.wait(), 30)
                except TimeoutError:
                    self._kill(slot)
        if self.control_server is not None:
            self.control_server.close()
        log.info("cluster stopped")


def run_cluster(config) -> int:
    """``kafkalite serve --nodes N``: the controller's process (nodes are forked from it)."""
    t0 = time.monotonic()
    try:
        lock_fd = datadir.cluster_lock(Path(config.data_dir), exclusive=True)
    except datadir.DataDirError as exc:
        log.error(str(exc), **exc.fields)
        return 1
    controller = Controller(config, lock_fd)
    for node_id in controller.slots:
        controller.spawn(node_id)  # before any event loop or thread exists here
    try:
        return asyncio.run(controller.serve(t0))
    finally:
        for slot in controller.slots.values():
            controller._kill(slot)
        os.close(lock_fd)
