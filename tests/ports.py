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
