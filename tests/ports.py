"""Free TCP ports on 127.0.0.1 for brokers the tests configure with fixed ports.

The kernel may hand the same ephemeral port to two ``bind(0)`` calls once the
first socket is closed, and a broker given that port for two listeners
refuses to start ("two listeners on the same port"). ``free_port`` never
returns a port it returned before in this process.
"""

from __future__ import annotations

import socket

_handed: set[int] = set()


def free_port() -> int:
    """A port nobody listens on now, different from every port this function returned before."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed:
            _handed.add(port)
            return port
    raise RuntimeError("no fresh ephemeral port in 1000 tries")


def free_ports_in_a_row(count: int) -> int:
    """The first of ``count`` consecutive ports nobody listens on now, none of them returned
    before (a cluster's fixed ports: node i on the base port + i - 1)."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        ports = range(base, base + count)
        if ports[-1] > 65535 or any(p in _handed for p in ports) or not all(_bindable(p) for p in ports[1:]):
            continue
        _handed.update(ports)
        return base
    raise RuntimeError(f"no {count} fresh consecutive ports in 1000 tries")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
