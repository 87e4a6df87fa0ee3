"""The coordinators' topics, their load buffers, and the one clock (no imports: a start reads these cheaply)."""

from __future__ import annotations

import time

OFFSETS_TOPIC = "__consumer_offsets"  # the group coordinator's
TXN_TOPIC = "__transaction_state"  # the transaction coordinator's
SHARE_STATE_TOPIC = "__share_group_state"  # the share coordinator's
COORDINATOR_TOPICS = (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC)

# how much of the log one step of a load reads before it lets the event loop run
OFFSETS_LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # offsets.load.buffer.size
TXN_LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # transaction.state.log.load.buffer.size
SHARE_LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # share.coordinator.load.buffer.size


def now_ms() -> int:
    """The coordinators' clock (wall time in ms); each takes it as an injected ``clock_ms``."""
    return int(time.time() * 1000)
