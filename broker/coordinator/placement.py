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

The hash is computed for each FindCoordinator and group request, so the
common case (a short ASCII id) takes a lean path and results are cached.
"""

from __future__ import annotations

import sys
from array import array
from functools import lru_cache

__all__ = ["java_abs", "java_string_hash", "partition_for"]

_MASK = 0xFFFFFFFF
_SIGN = 0x80000000
_INT_MIN = -(1 << 31)
# Code units in native byte order, so array("H") can read them directly.
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
# Up to this many units the hash is accumulated as a big int and masked once
# at the end (cheaper than masking per unit); longer strings mask as they go
# so the intermediate never grows past a machine word or two.
_UNMASKED_MAX = 64


def _hash_units(units) -> int:
    h = 0
    if len(units) <= _UNMASKED_MAX:
        for u in units:
            h = 31 * h + u
        h &= _MASK
    else:
        for u in units:
            h = (31 * h + u) & _MASK
    return h - (1 << 32) if h & _SIGN else h


@lru_cache(maxsize=8192)
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` of ``s`` as a signed 32-bit int."""
    if s.isascii():
        # ASCII: one byte per character, equal to its UTF-16 code unit.
        return _hash_units(s.encode("ascii"))
    # surrogatepass keeps lone surrogates (legal in both Java and Python
    # strings) as the single code unit Java would see.
    return _hash_units(array("H", s.encode(_UTF16_NATIVE, "surrogatepass")))


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` -> 0, else ``abs(n)``."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, partitions: int = 50) -> int:
    """The ``__consumer_offsets`` partition that coordinates ``group_id``."""
    if partitions <= 0:
        raise ValueError(f"partitions must be positive, got {partitions}")
    h = java_string_hash(group_id)
    return (0 if h == _INT_MIN else abs(h)) % partitions
