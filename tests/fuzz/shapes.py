"""Fetch answers of every shape, for the network fuzzer (tests/fuzz/network.py).

A partition's records reach the encoder as bytes, a memoryview, or a
``FileRegion`` of the segment file (broker/handlers/fetch.py): a region where
the partition's limit is at least ``FILE_REGION_MIN`` (256 KiB), and for one
of any size once the answer holds ``ANSWER_MEMORY`` (1 MiB) in memory. The
fuzzer's own topics hold a few tiny batches, so its Fetch requests never
build those answers. ``TOPIC`` holds partitions laid out to build them all:
answers of memory only, of regions only, and both, with regions under 4 KiB
(``FETCH_INLINE``), under 256 KiB and over, over 1 MiB in all. ``SHAPES``
are the partitions and limits of each answer; the fuzzer sends them as seeds
(mutated or not, every Fetch version) and, at each health check, one of them
unmutated, whose records must be exactly what was produced.
"""

from __future__ import annotations

import time

from protocol.records import Record, build_batch, iter_records, split_batches

TOPIC = "fz-shapes"
KiB = 1024

_BIG = (6, 50, 1000)  # about 307 KB: a region under a limit of 256 KiB or more
_MID = (5, 50, 1000)  # about 256 KB: four batches (205 KB) read into memory under a 250 KiB limit
_MEDIUM = (1, 50, 100)  # about 6 KB: over FETCH_INLINE
_SMALL = (1, 3, 100)  # about 400 bytes: under it
# (batches, records a batch, value size) of each partition; the last is empty
LAYOUT = (_BIG, _BIG, _MID, _MID, _MID, _MID, _MID, _MID, _SMALL, _SMALL, _MEDIUM, _MEDIUM, None)
IN_MEMORY = 250 * KiB  # under FILE_REGION_MIN: read into memory, until the answer holds ANSWER_MEMORY
FROM_FILE = 300 * KiB  # over it: a region

# each answer's (partition, limit), in request order
SHAPES = {
    "memory": [(8, IN_MEMORY), (10, IN_MEMORY), (2, IN_MEMORY), (12, IN_MEMORY)],
    "regions": [(0, FROM_FILE), (1, 1024 * KiB)],
    # memory under and over 4 KiB, a region, then six partitions read into memory (over 1 MiB):
    # the small and medium partitions after them are regions too
    "mixed": [(9, IN_MEMORY), (11, IN_MEMORY), (0, FROM_FILE)] + [(p, IN_MEMORY) for p in range(2, 8)]
    + [(8, IN_MEMORY), (10, IN_MEMORY), (12, IN_MEMORY), (1, FROM_FILE)],
}
NAMES = tuple(SHAPES)


def batches() -> list[tuple[int, bytes, list[bytes]]]:
    """(partition, batch, its values) of everything ``TOPIC`` holds, in produce order."""
    now = int(time.time() * 1000)  # recent: retention must not delete them
    out = []
    for p, shape in enumerate(LAYOUT):
        if shape is None:
            continue
        count, size = shape[1], shape[2]
        for b in range(shape[0]):
            values = [b"%d-%d-%d-" % (p, b, i) + bytes([65 + p]) * size for i in range(count)]
            out.append((p, build_batch([Record(i, now + i, None, v) for i, v in enumerate(values)]), values))
    return out


def fetch_body(topic_id, name: str) -> dict:
    """A Fetch request (any version: each takes its fields) for the answer ``name``."""
    return {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 50 * 1024 * KiB, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": TOPIC, "topic_id": topic_id, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
             "last_fetched_epoch": -1, "partition_max_bytes": limit}
            for p, limit in SHAPES[name]
        ]}],
    }


def check_answer(resp, name: str, produced: list[tuple[int, bytes, list[bytes]]]) -> str | None:
    """None if ``resp`` (a decoded Fetch answer to ``fetch_body(..., name)``) holds exactly the
    whole batches each partition's limit allows, from offset 0, as produced; else what is wrong."""
    by_partition: dict[int, list[tuple[int, list[bytes]]]] = {}
    for p, batch, values in produced:
        by_partition.setdefault(p, []).append((len(batch), values))
    if int(getattr(resp, "error_code", 0)) != 0:
        return f"{name}: error {int(resp.error_code)}"
    parts = [p for t in resp.responses for p in t.partitions]
    if [p.partition_index for p in parts] != [p for p, _ in SHAPES[name]]:
        return f"{name}: partitions {[p.partition_index for p in parts]}"
    for part, (p, limit) in zip(parts, SHAPES[name], strict=True):
        if int(part.error_code) != 0:
            return f"{name}: partition {p}: error {int(part.error_code)}"
        want, room = [], limit
        for size, values in by_partition.get(p, []):
            if size > room:
                break
            want += values
            room -= size
        records = bytes(part.records or b"")
        try:
            got = [(rec.offset, rec.value) for _, batch in split_batches(records) for rec in iter_records(batch)]
        except Exception as exc:  # noqa: BLE001 - a damaged answer is the finding
            return f"{name}: partition {p}: {len(records)} bytes of records that do not parse: {exc}"
        if got != list(enumerate(want)):
            return f"{name}: partition {p}: {len(got)} records, expected {len(want)} (or not those)"
    return None
