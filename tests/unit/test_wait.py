"""tests/wait.py: the polling helper every test waits with."""

from __future__ import annotations

import pytest

from tests.wait import WaitTimeout, async_wait_until, wait_until


def counter(truthy_from: int, value="ready"):
    """A predicate falsy for its first ``truthy_from - 1`` calls, then ``value``; counts its calls."""
    calls = []

    def predicate():
        calls.append(1)
        return value if len(calls) >= truthy_from else []

    return predicate, calls


def test_returns_the_first_truthy_answer():
    predicate, calls = counter(3, value={"state": "Stable"})
    assert wait_until(predicate, interval=0) == {"state": "Stable"}
    assert len(calls) == 3


def test_a_state_already_there_is_not_polled_again():
    predicate, calls = counter(1)
    assert wait_until(predicate, timeout=0) == "ready"
    assert len(calls) == 1


def test_timeout_raises_with_what_the_last_answer_and_the_description():
    predicate, calls = counter(10**9)
    with pytest.raises(WaitTimeout) as exc:
        wait_until(predicate, timeout=0.05, interval=0.01, what="the group to be Stable", describe=lambda: "members: []")
    message = str(exc.value)
    assert "the group to be Stable" in message
    assert "(last answer: [])" in message
    assert message.endswith("\nmembers: []")
    assert len(calls) >= 2  # polled, and asked once more at the deadline
    # an assertion failure to pytest, and a TimeoutError to callers that catch that
    assert isinstance(exc.value, AssertionError) and isinstance(exc.value, TimeoutError)


def test_an_exception_from_the_predicate_ends_the_wait():
    def predicate():
        raise KeyError("gone")

    with pytest.raises(KeyError):
        wait_until(predicate, timeout=60)


async def test_async_twin_with_a_plain_predicate():
    predicate, calls = counter(4, value=7)
    assert await async_wait_until(predicate, interval=0) == 7
    assert len(calls) == 4


async def test_async_twin_with_a_coroutine_predicate():
    predicate, calls = counter(2, value=[1])

    async def probe():
        return predicate()

    assert await async_wait_until(probe, interval=0) == [1]
    assert len(calls) == 2


async def test_async_twin_times_out_with_the_last_answer():
    async def never():
        return None

    with pytest.raises(WaitTimeout, match=r"waiting for the flood to end \(last answer: None\)"):
        await async_wait_until(never, timeout=0.02, what="the flood to end")
