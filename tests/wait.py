"""The test suite's one way to wait for a state: poll a predicate until it holds.

Tests await events; when there is no event to await (a broker's group settling, a metric
falling, a reference Kafka learning of a topic from its controller), they poll the state
they are about to assert on with :func:`wait_until` (or :func:`async_wait_until` on an
event loop), never ``sleep`` a fixed time and hope.

    value = wait_until(lambda: describe(group).state == "Stable", what=f"{group} to be Stable")

- the predicate's first truthy answer is returned, so a test can wait for a value and use it;
- the timeout is generous (a slow CI machine waits longer, a fast one does not) and never
  asserted on: the wait ends as soon as the state is there;
- the interval is short, so a test waits at most one interval past the moment the state
  arrives; pass a longer one only when the predicate itself is costly (a ``docker exec``);
- on timeout :class:`WaitTimeout` (an ``AssertionError``, and a ``TimeoutError`` for callers
  that catch that) says what was awaited, the predicate's last answer, and ``describe()``.

A predicate that can meet a transient error (a coordinator still loading) catches it and
returns something falsy; any other exception it raises ends the wait at once.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

TIMEOUT_S = 30.0
INTERVAL_S = 0.05
ASYNC_INTERVAL_S = 0.01


class WaitTimeout(AssertionError, TimeoutError):  # noqa: N818 - it is raised as an assertion failure
    """The awaited state did not come within the timeout."""


def _timed_out(what: str, timeout: float, last: object, describe: Callable[[], object] | None) -> WaitTimeout:
    detail = f"\n{describe()}" if describe is not None else ""
    return WaitTimeout(f"timed out after {timeout}s waiting for {what} (last answer: {last!r}){detail}")


def wait_until(predicate: Callable[[], Any], timeout: float = TIMEOUT_S, interval: float = INTERVAL_S,
               what: str = "the condition", describe: Callable[[], object] | None = None) -> Any:
    """Call ``predicate`` every ``interval`` s until it returns something truthy; return that.

    Raises :class:`WaitTimeout` naming ``what``, the last answer and ``describe()`` (when given)
    once ``timeout`` s passed. The predicate is always called at least once, and once more at the
    deadline, so a state that arrives during the last interval is still seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(what, timeout, value, describe)
        time.sleep(min(interval, left))


async def async_wait_until(predicate: Callable[[], Any], timeout: float = TIMEOUT_S, interval: float = ASYNC_INTERVAL_S,
                           what: str = "the condition", describe: Callable[[], object] | None = None) -> Any:
    """:func:`wait_until` for a test on an event loop: sleeps with ``asyncio.sleep``, so the broker or
    clients sharing the loop run meanwhile. ``predicate`` may be a plain function or return an
    awaitable (a coroutine function), whose result is then the answer."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(what, timeout, value, describe)
        await asyncio.sleep(min(interval, left))
