"""Loading a shard from its ``__consumer_offsets`` partition, in log order, fast.

The state after a load is exactly what ``GroupShard.replay_bytes`` of every
record in log order gives (``replay_log`` is that reference). Two things
make it fast without changing it:

* Offset commits, the bulk of the log, go by runs of same-layout records
  (``protocol.group_records.runs``): one ``struct.iter_unpack`` per run, then
  per (group, topic) stretch one dict update of ``offsets.latest`` — what
  ``OffsetStore.replay`` does record by record, and the "simple" group the
  first value of a group creates (``GroupShard.replay``). A tombstone
  stretch pops its partitions, and drops the group's entry once it is empty.
* Values are decoded lazily: a run's rows stand in ``offsets.latest`` until
  the end of the load, then only the rows still there — a later record of
  the same key replaced the others, a tombstone removed them — become
  ``OffsetCommitValue``s (``finish``). Nothing reads offset values while a
  load replays (group records do not look at offsets).

Every other record (group metadata, KIP-848 records, unknown types, odd
value versions or shapes) is decoded and replayed on its own, in its place
in the log, through ``GroupShard.replay_bytes``.
"""

from __future__ import annotations

from itertools import groupby, repeat
from operator import itemgetter

from protocol.compression import CorruptRecordError, decompress
from protocol.group_records import OffsetCommitValue
from protocol.group_records._codec import _cached_str, _str_cache
from protocol.group_records.runs import SINGLE, TOMBSTONES, Truncated, key_value_at, scan, value_of_row
from protocol.records import COMPRESSION_MASK, HEADER_SIZE

from .classic_group import ClassicGroup

_names = itemgetter(0, 1)
_without_names = itemgetter(slice(2, None))
_partition = itemgetter(0)


def _str(raw: bytes) -> str:
    return _str_cache.get(raw) or _cached_str(raw)


def records_section(header, batch) -> bytes:
    """A batch's records, decompressed."""
    payload = batch[HEADER_SIZE:header.length + 12]
    codec = header.attributes & COMPRESSION_MASK
    return decompress(codec, payload) if codec else bytes(payload)


def replay_batch(shard, header, batch) -> None:
    """Replay one (non-control) batch into ``shard`` (see the module doc)."""
    data = records_section(header, batch)
    latest = shard.offsets.latest
    groups = shard.groups
    replay_bytes = shard.replay_bytes
    try:
        for kind, a, b in scan(data, header.records_count):
            if kind == SINGLE:
                if a is not None:
                    replay_bytes(a, b)
                continue
            if b is not None:  # one group and topic for the whole run: rows start with the partition
                stretches = ((b, a),)
            else:  # rows start with the group and topic bytes: split, and drop them
                stretches = ((names, list(map(_without_names, rows))) for names, rows in groupby(a, _names))
            if kind == TOMBSTONES:
                for (graw, traw), rows in stretches:
                    group = _str(graw)
                    offsets = latest.get(group)
                    if offsets is None:
                        continue
                    topic = _str(traw)
                    pop = offsets.pop
                    for partition in map(_partition, rows):
                        pop((topic, partition), None)
                    if not offsets:
                        del latest[group]
                continue
            for (graw, traw), rows in stretches:
                group = _str(graw)
                pairs = zip(zip(repeat(_str(traw)), map(_partition, rows)), rows)
                offsets = latest.get(group)
                if offsets is None:
                    latest[group] = dict(pairs)
                else:
                    offsets.update(pairs)
                if group not in groups:
                    groups[group] = ClassicGroup(group)  # a "simple" group
    except Truncated as exc:
        raise CorruptRecordError(str(exc)) from exc


def finish(shard) -> int:
    """Turn the rows still standing in ``offsets.latest`` into values; returns how many."""
    n = 0
    value = OffsetCommitValue
    for offsets in shard.offsets.latest.values():
        # v3/v4 without metadata (what the coordinator writes for a plain commit) inline, the rest by value_of_row
        rows = [(k, value(v[2], v[3], "", v[4], -1, None) if len(v) == 5 and v[1] != 1 else value_of_row(v))
                for k, v in offsets.items() if v.__class__ is tuple]
        if rows:
            offsets.update(rows)
            n += len(rows)
    return n


def replay_log_batch(shard, header, batch) -> None:
    """The reference: every record of the batch decoded and replayed on its own, in order."""
    data = records_section(header, batch)
    pos = 0
    try:
        for _ in range(header.records_count):
            key, value, pos = key_value_at(data, pos)
            if key is not None:
                shard.replay_bytes(key, value)
    except (Truncated, IndexError) as exc:
        raise CorruptRecordError("record data truncated") from exc
