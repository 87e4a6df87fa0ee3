"""Fixtures shared by the unit tests."""

from __future__ import annotations

import asyncio

import pytest


@pytest.fixture
def loop():
    """An event loop of the test's own, for the coordinator harnesses' futures (never run)."""
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()
