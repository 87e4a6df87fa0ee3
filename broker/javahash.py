"""The iteration order of the Java hash collections Kafka's coordinator writes from.

Kafka keeps a transaction's partitions in a ``HashSet<TopicPartition>`` and
writes them to ``__transaction_state`` grouped by topic with
``Collectors.groupingBy(TopicPartition::topic)``, a ``HashMap<String, List>``
(``TransactionLog.valueToBytes``). The order of topics and of partition ids in
the record is therefore the iteration order of those two tables, which
depends on the hash codes, the table's capacity and the order of insertion.
This module replays ``java.util.HashMap`` (JDK 19 and later, which Kafka 4.x
runs on: ``new HashSet<>(collection)`` is sized by
``HashMap.newHashMap(Math.max(n, 12))``) closely enough to give the same order:

* the bucket of a key is ``(h ^ (h >>> 16)) & (capacity - 1)``;
* ``put`` appends to the bucket's chain, then doubles the table once the size
  passes three quarters of the capacity; a resize keeps the relative order of
  each chain;
* ``computeIfAbsent`` (what ``groupingBy`` uses) resizes *before* inserting
  when the size already passed the threshold, and inserts at the *head* of
  the chain;
* a chain reaching the treeify threshold in a table smaller than 64 doubles
  the table.

Not replayed: the red-black tree a chain of nine or more keys becomes in a
table of 64 buckets or more (its iteration order is not the chain's). It
takes nine transaction partitions whose spread hash codes collide in the same
bucket of a table that large, which Kafka's own order then does not match.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Iterable
from functools import lru_cache

__all__ = [
    "JavaHashTable",
    "copied_set_order",
    "fresh_set_order",
    "group_by_topic",
    "java_abs",
    "java_string_hash",
    "topic_partition_hash",
]

_MASK = 0xFFFFFFFF
_SIGN = 0x80000000
_INT_MIN = -(1 << 31)
# Code units in native byte order, so array("H") can read them directly.
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
# Up to this many units the hash is accumulated as a big int and masked once
# at the end (cheaper than masking per unit); longer strings mask as they go
# so the intermediate never grows past a machine word or two.
_UNMASKED_MAX = 64
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64
_DEFAULT_CAPACITY = 16


def _int32(v: int) -> int:
    v &= _MASK
    return v - (1 << 32) if v & _SIGN else v


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
    """Java's ``String.hashCode()`` of ``s`` as a signed 32-bit int: over UTF-16 code units
    (a character outside the BMP counts as its two surrogates), ``h = 31 * h + unit`` with
    32-bit signed overflow, from 0. Cached: it runs for each FindCoordinator and group request."""
    if s.isascii():
        # ASCII: one byte per character, equal to its UTF-16 code unit.
        return _hash_units(s.encode("ascii"))
    # surrogatepass keeps lone surrogates (legal in both Java and Python
    # strings) as the single code unit Java would see.
    return _hash_units(array("H", s.encode(_UTF16_NATIVE, "surrogatepass")))


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` -> 0, else ``abs(n)`` (not ``n & 0x7fffffff``,
    ``Utils.toPositive``, which disagrees for every negative ``n``)."""
    return 0 if n == _INT_MIN else abs(n)


def topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition.hashCode()``: ``31 * (31 + partition) + topic.hashCode()`` in int32."""
    return _int32(31 * _int32(31 + partition) + java_string_hash(topic))


def _spread(h: int) -> int:
    h &= _MASK
    return h ^ (h >> 16)


def _table_size_for(c: int) -> int:
    n = 1
    while n < c:
        n <<= 1
    return n


class JavaHashTable:
    """The bucket structure of one ``java.util.HashMap`` (keys only)."""

    __slots__ = ("buckets", "capacity", "initial", "size", "threshold")

    def __init__(self, initial_capacity: int | None = None) -> None:
        # like Java: the table is allocated by the first insertion
        self.initial = _DEFAULT_CAPACITY if initial_capacity is None else _table_size_for(initial_capacity)
        self.capacity = 0
        self.threshold = 0
        self.size = 0
        self.buckets: list[list] = []

    @classmethod
    def for_mappings(cls, n: int) -> JavaHashTable:
        """``HashMap.newHashMap(n)``: a table sized for ``n`` keys."""
        return cls(math.ceil(n / 0.75))

    def _resize(self) -> None:
        new_cap = self.capacity * 2 if self.capacity else self.initial
        old = self.buckets
        self.buckets = [[] for _ in range(new_cap)]
        self.capacity = new_cap
        self.threshold = new_cap * 3 // 4  # every capacity here is 16 or more
        mask = new_cap - 1
        for chain in old:  # a new bucket's keys all come from one old chain, in its order
            for entry in chain:
                self.buckets[_spread(entry[1]) & mask].append(entry)

    def _bucket(self, h: int) -> list:
        return self.buckets[_spread(h) & (self.capacity - 1)]

    def put(self, key, h: int) -> bool:
        """``HashMap.put`` of a new key (``HashSet.add``); False if it was there."""
        if not self.capacity:
            self._resize()
        chain = self._bucket(h)
        for k, _ in chain:
            if k == key:
                return False
        before = len(chain)
        chain.append((key, h))
        if before >= _TREEIFY_THRESHOLD and self.capacity < _MIN_TREEIFY_CAPACITY:
            self._resize()
        self.size += 1
        if self.size > self.threshold:
            self._resize()
        return True

    def compute_if_absent(self, key, h: int) -> bool:
        """``HashMap.computeIfAbsent`` of a key; False if it was there."""
        if self.size > self.threshold or not self.capacity:
            self._resize()
        chain = self._bucket(h)
        for k, _ in chain:
            if k == key:
                return False
        before = len(chain)
        chain.insert(0, (key, h))
        if before >= _TREEIFY_THRESHOLD - 1 and self.capacity < _MIN_TREEIFY_CAPACITY:
            self._resize()
        self.size += 1
        return True

    def remove(self, key, h: int) -> bool:
        """``HashMap.remove`` (``HashSet.remove``, ``Iterator.remove``); False if the key was not there."""
        if not self.capacity:
            return False
        chain = self._bucket(h)
        for i, (k, _) in enumerate(chain):
            if k == key:
                del chain[i]
                self.size -= 1
                return True
        return False

    def keys(self) -> list:
        """The keys in iteration order."""
        return [k for chain in self.buckets for k, _ in chain]


def _add_all(table: JavaHashTable, partitions: Iterable[tuple[str, int]]) -> JavaHashTable:
    for tp in partitions:
        table.put(tp, topic_partition_hash(*tp))
    return table


def fresh_set_order(partitions: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """Iteration order of ``new HashSet<>()`` after adding ``partitions`` in order."""
    return _add_all(JavaHashTable(), partitions).keys()


def copied_set_order(order: list[tuple[str, int]], added: Iterable[tuple[str, int]] = ()) -> list[tuple[str, int]]:
    """Iteration order of ``new HashSet<>(set)`` (``set`` iterating in ``order``),
    then ``addAll(added)``: what ``TransactionMetadata`` does to add partitions."""
    table = JavaHashTable.for_mappings(max(len(order), 12))
    return _add_all(_add_all(table, order), added).keys()


def group_by_topic(order: Iterable[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    """``set.stream().collect(groupingBy(TopicPartition::topic))`` iterated: the
    topics in the map's order, each with its partitions in the set's order."""
    table = JavaHashTable()
    lists: dict[str, list[int]] = {}
    for topic, partition in order:
        if table.compute_if_absent(topic, java_string_hash(topic)):
            lists[topic] = []
        lists[topic].append(partition)
    return [(topic, lists[topic]) for topic in table.keys()]
