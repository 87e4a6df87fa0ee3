"""queued.max.request.bytes against a real broker process: a flood of partial frames.

Twenty clients each announce a frame of 100 MiB (the default
``socket.request.max.bytes``) and send half of it, then hold their
connections open. With the default pool (100 MiB) the broker's peak RSS
(``VmHWM``) stays under 300 MB, a new client's small requests are still
answered during the flood, and once the flood's clients leave the broker's
RSS falls back to within 20 % of what it was before. These are memory
bounds, read from ``/proc/<pid>/status``; nothing here measures time.
"""

from __future__ import annotations

import os
import select
import socket
import struct

import pytest

from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.raw import RawClient
from tests.wait import wait_until

MiB = 1024 * 1024
MB = 1000 * 1000
CLIENTS = 20
ANNOUNCED = 100 * MiB
SENT = 50 * MiB

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc/<pid>/status")


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of process ``pid``, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def small_requests(bootstrap: str) -> None:
    """ApiVersions and Metadata on a new connection, both answered."""
    c = RawClient(bootstrap)
    c.sock.settimeout(30)
    try:
        versions = c.request(18, 3, {"client_software_name": "pool-test", "client_software_version": "1"})
        assert versions.error_code == ErrorCode.none
        meta = c.request(3, 9, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        assert meta.brokers, meta
    finally:
        c.close()


def flood(port: int) -> list[socket.socket]:
    """The partial frames: every client sends until it has sent SENT bytes or the broker
    stops taking them (no socket writable for a while: its reading is paused)."""
    socks = []
    for _ in range(CLIENTS):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(struct.pack(">i", ANNOUNCED))
        s.setblocking(False)
        socks.append(s)
    left = {s: SENT for s in socks}
    chunk = memoryview(b"\0" * MiB)
    while left:
        _, writable, _ = select.select([], list(left), [], 3.0)
        if not writable:  # the broker reads none of them any more
            break
        for s in writable:
            try:
                left[s] -= s.send(chunk[: min(left[s], MiB)])
            except BlockingIOError:
                continue
            if left[s] <= 0:
                del left[s]
    return socks


def test_partial_frame_flood_is_bounded_answers_small_requests_and_gives_memory_back(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        pid = b.proc.pid
        small_requests(b.bootstrap)  # the first requests' imports and buffers belong to "before"
        before = memory(pid)["VmRSS"]

        socks = flood(b.port)
        try:
            # the flood is held back, not refused: small requests on a new connection are answered
            small_requests(b.bootstrap)
            peak = memory(pid)["VmHWM"]
            assert peak <= 300 * MB, f"peak RSS {peak / MB:.0f} MB during the flood (before: {before / MB:.0f} MB)"
        finally:
            for s in socks:
                s.close()

        # memory is given back once the flood's clients have gone (the sweep notices them within a second)
        wait_until(lambda: memory(pid)["VmRSS"] <= 1.2 * before, timeout=60, interval=0.1,
                   what=f"RSS back within 1.2 x the {before / MB:.0f} MB before the flood",
                   describe=lambda: f"RSS {memory(pid)['VmRSS'] / MB:.0f} MB")
        small_requests(b.bootstrap)
    finally:
        b.stop()
