"""Which ``__consumer_offsets`` partition owns a group.

Kafka places a group on partition ``Utils.abs(groupId.hashCode()) % n``.
Both halves are Java-specific and easy to get subtly wrong:

* ``String.hashCode`` runs over UTF-16 code units (a character outside the
  BMP counts as its two surrogates), computing ``h = 31 * h + unit`` with
  32-bit signed overflow, starting from 0.
* Kafka's ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 and is ``Math.abs``
  otherwise. It is *not* ``h & 0x7fffffff`` (that is ``Utils.toPositive``,
  which the producer's partitioner uses); the two disagree for every negative
  hash code.

Both live in broker/javahash.py (the Java hash semantics other modules share).
"""

from __future__ import annotations

from broker.javahash import java_abs, java_string_hash

__all__ = ["partition_for"]


def partition_for(group_id: str, partitions: int = 50) -> int:
    """The ``__consumer_offsets`` partition that coordinates ``group_id``."""
    if partitions <= 0:
        raise ValueError(f"partitions must be positive, got {partitions}")
    return java_abs(java_string_hash(group_id)) % partitions
