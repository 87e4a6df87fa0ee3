"""An answer that is ready once a future is done, for the requests a connection pipelines.

A pipelined handler (``handlers.PIPELINED``) has a synchronous ``begin(ctx, req)``: it
does all its work at once (validation, the shard operation, queueing its records) and
returns either the answer, or a ``Pending`` whose answer is made when what it waits
on (the append of its records) is done. Each layer adds its step with ``then``; the
steps run in the future's one done-callback, so waiting costs one turn of the event
loop however many layers there are, and no task or coroutine is needed.

A step is ``fn(get)``: ``get()`` returns the previous step's value or raises its
error, so a layer handles the errors it knows (``except CoordinatorError``) as it
would around an ``await``. Steps must not look at the request's context: the
connection's context has moved on to its next request by then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


def _result(future: asyncio.Future) -> Any:
    return future.result()


class Pending:
    __slots__ = ("future", "finish")

    def __init__(self, future: asyncio.Future, finish: Callable[[asyncio.Future], Any] = _result) -> None:
        self.future = future
        self.finish = finish  # the future (done) -> the answer, or raises

    def then(self, step: Callable[[Callable[[], Any]], Any]) -> Pending:
        """A Pending whose answer is ``step(get)``, ``get`` giving this one's."""
        finish = self.finish
        return Pending(self.future, lambda future: step(lambda: finish(future)))

    def result(self) -> Any:
        """The answer, once ``future`` is done (raises what the steps raise)."""
        return self.finish(self.future)


async def settle(answer: Any) -> Any:
    """The answer of ``begin``, waited for if it is a Pending (for callers that are coroutines)."""
    if type(answer) is not Pending:
        return answer
    try:
        await answer.future
    except Exception:  # noqa: BLE001 - the steps see it, through result()
        pass
    return answer.result()
