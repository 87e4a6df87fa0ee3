"""Which segments retention deletes (``PartitionLog.enforce_retention``, "delete" policy), as Kafka's
``UnifiedLog.deleteRetentionMsBreachedSegments`` / ``deleteRetentionSizeBreachedSegments`` choose them:

* by time (``retention.ms`` >= 0): the leading segments whose largest timestamp (the file's
  modification time when it has none) is more than ``retention.ms`` old;
* then by size (``retention.bytes`` >= 0): more leading segments while the log stays at or
  above ``retention.bytes`` without them.

Never the active segment while it is empty. The deletion itself (under the log's locks) is
``enforce_retention``'s, in log.py.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import LogConfig
    from .segment import Segment

__all__ = ["expired_segments"]


def expired_segments(segs: Sequence[Segment], active_size: int, cfg: LogConfig, now: int) -> int:
    """How many of the leading segments ``segs`` (the last one active, ``active_size`` bytes when read)
    retention deletes at ``now`` (ms)."""
    k = 0
    if cfg.retention_ms >= 0:
        while k < len(segs):
            s = segs[k]
            is_active = k == len(segs) - 1
            if is_active and active_size == 0:
                break
            ts = s.max_timestamp
            if ts < 0:
                try:
                    ts = int(os.stat(s.log_path).st_mtime * 1000)
                except OSError:
                    break
            if now - ts > cfg.retention_ms:
                k += 1
            else:
                break
    if cfg.retention_bytes >= 0:
        total = sum(s.size for s in segs[:-1]) + active_size
        diff = total - cfg.retention_bytes - sum(s.size for s in segs[:k])
        while k < len(segs):
            s = segs[k]
            is_active = k == len(segs) - 1
            size = active_size if is_active else s.size
            if (is_active and size == 0) or diff - size < 0:
                break
            diff -= size
            k += 1
    return k
