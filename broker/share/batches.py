"""Merging state batches (Kafka's ``PersisterStateBatchCombiner``).

A share-partition's durable state is a list of state batches, offset ranges
``[first, last]`` with a delivery state and count. Merging ``new`` batches
into ``current``: where ranges overlap a new batch wins over a current one,
and a later new batch over an earlier one; what lies below ``start_offset``
is dropped (a batch straddling it is cut); adjacent ranges with the same
state and count are joined. The result is sorted and disjoint.

A sweep over the range boundaries with a heap of the batches covering the
point (by priority, lazily removed): O(n log n) for any input, so a hostile
request of many overlapping batches costs no more than sorting them.
"""

from __future__ import annotations

import heapq

from protocol.share_records import StateBatch


def merge_batches(current: list[StateBatch], new: list[StateBatch], start_offset: int) -> list[StateBatch]:
    ranked = [(b, i) for i, b in enumerate(current)] + [(b, len(current) + i) for i, b in enumerate(new)]
    ranked = [(b, p) for b, p in ranked if b.last_offset >= b.first_offset and b.last_offset >= start_offset]
    if not ranked:
        return []
    # events: (offset, 0 = a batch begins here, priority); ends are checked lazily by last offset
    begins = sorted(((max(b.first_offset, start_offset), p, b) for b, p in ranked), key=lambda e: e[0])
    points = sorted({e[0] for e in begins} | {b.last_offset + 1 for b, _ in ranked})
    out: list[StateBatch] = []
    heap: list[tuple[int, int, StateBatch]] = []  # (-priority, last offset, batch)
    j = 0
    for k, point in enumerate(points[:-1]):
        while j < len(begins) and begins[j][0] <= point:
            _, p, b = begins[j]
            heapq.heappush(heap, (-p, b.last_offset, b))
            j += 1
        while heap and heap[0][1] < point:
            heapq.heappop(heap)
        if not heap:
            continue
        top = heap[0][2]
        end = points[k + 1] - 1
        if out and out[-1].last_offset + 1 == point and out[-1].delivery_state == top.delivery_state \
                and out[-1].delivery_count == top.delivery_count:
            prev = out[-1]
            out[-1] = StateBatch(prev.first_offset, end, prev.delivery_state, prev.delivery_count)
        else:
            out.append(StateBatch(point, end, top.delivery_state, top.delivery_count))
    return out
