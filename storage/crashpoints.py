"""Named crash points on the write path, for crash-consistency tests.

A broker started with ``KAFKALITE_CRASH_AT=<name>[:<n>]`` kills itself with
SIGKILL the ``n``-th time (default: the first) the code passes
``crash_point("<name>")``: a real SIGKILL, so nothing is flushed, closed or
renamed afterwards, as in a power-less crash of the process. Just before, it
writes ``CRASH POINT <name> <n>`` to stderr (file descriptor 2, unbuffered) so
a test can tell where the process died.

The variable is read once, at import. Without it ``crash_point`` is a function
that does nothing (one call per point passed, no lookup). The points and where
they are: docs/reliability.md, "Crash points"; the harness:
tests/integration/test_crash_points.py.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["crash_point", "ENV", "parse"]

ENV = "KAFKALITE_CRASH_AT"


def parse(spec: str) -> tuple[str, int] | None:
    """``"name"`` or ``"name:n"`` -> (name, n); None for an empty spec. n >= 1."""
    spec = spec.strip()
    if not spec:
        return None
    name, sep, nth = spec.rpartition(":")
    if not sep or not nth.isdigit():
        name, nth = spec, "1"
    n = int(nth)
    if not name or n < 1:
        raise ValueError(f"{ENV}={spec!r}: expected <name>[:<n>] with n >= 1")
    return name, n


def _noop(name: str) -> None:
    return None


def _armed(target: str, nth: int):
    hits = 0
    lock = threading.Lock()  # points are passed from the event loop and the maintenance thread

    def crash_point(name: str) -> None:
        nonlocal hits
        if name != target:
            return
        with lock:
            hits += 1
            if hits != nth:
                return
            os.write(2, f"CRASH POINT {name} {hits}\n".encode())
            os.kill(os.getpid(), signal.SIGKILL)

    return crash_point


try:
    _spec = parse(os.environ.get(ENV, ""))
except ValueError as exc:  # a harness's typo: one line and a stop, before anything is served
    raise SystemExit(f"kafkalite: {exc}") from None
crash_point = _noop if _spec is None else _armed(*_spec)
