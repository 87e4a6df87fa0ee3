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
in the log, as ``GroupShard.replay_bytes`` does — except the few that the
next record of the same key provably makes irrelevant (``_superseded``):
those are neither decoded nor replayed, only what they leave behind that
their successor does not redo (the group's, or member's, place) is made.
To know what comes next, a shard's batches are all scanned first
(``ShardLoader.add``), then replayed (``ShardLoader.apply``).

Transactional batches (TxnOffsetCommit) are decoded record by record and
their offsets wait for their producer's marker (``add_txn``, ``add_marker``),
as ``GroupShard.replay`` and ``replay_marker`` do them live.
"""

from __future__ import annotations

from itertools import groupby, repeat
from operator import itemgetter

from protocol.compression import CorruptRecordError
from protocol.group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordType,
    decode_key,
    decode_value,
)
from protocol.group_records._codec import _cached_str, _str_cache
from protocol.group_records.runs import SINGLE, TOMBSTONES, Truncated, scan, value_of_row
from protocol.records import CONTROL_COMMIT, key_value_at, parse_control_key, records_data

from .classic_group import ClassicGroup
from .consumer_group import STABLE
from .consumer_replay import replayed_group as consumer_group

TXN, MARKER = "txn", "marker"  # ops besides runs.scan's: a transactional offset record, a transaction's marker

_names = itemgetter(0, 1)
_without_names = itemgetter(slice(2, None))
_partition = itemgetter(0)


def _str(raw: bytes) -> str:
    return _str_cache.get(raw) or _cached_str(raw)


def records_section(header, batch) -> bytes:
    """A batch's records, decompressed (``header`` is the batch's, as split_batches read it)."""
    return bytes(records_data(batch)[1])


class ShardLoader:
    """Collects a shard's batches (``add``), then replays them in log order (``apply``).

    Collecting first lets ``apply`` see what comes later: a group record that
    the next record of its kind replaces, with nothing in between that could
    see the difference, is not decoded (see ``_superseded``).
    """

    def __init__(self, shard) -> None:
        self.shard = shard
        self.ops: list[tuple] = []  # (kind, a, b) of runs.scan, SINGLE keys decoded
        self.skipped_decodes = 0

    def add(self, header, batch) -> None:
        """Scan one (non-control) batch; single records' keys are decoded now (a bad key fails the load here)."""
        ops = self.ops
        try:
            for op in scan(records_section(header, batch), header.records_count):
                if op[0] == SINGLE:
                    if op[1] is None:
                        continue  # a record without a key: nothing to replay
                    op = (SINGLE, decode_key(op[1]), op[2])
                ops.append(op)
        except Truncated as exc:
            raise CorruptRecordError(str(exc)) from exc

    def add_batch(self, header, batch) -> None:
        """Scan one batch of the log, whatever it is: plain, transactional, or a transaction's marker."""
        if header.is_control:
            if header.producer_id >= 0 and header.records_count:  # emptied by compaction: its transaction has no data left
                self.add_marker(header.producer_id, marker_is_commit(header, batch))
        elif header.is_transactional and header.producer_id >= 0:
            self.add_txn(header, batch)
        else:
            self.add(header, batch)

    def add_txn(self, header, batch) -> None:
        """A transactional batch of ``header.producer_id``: its offset records wait for the marker."""
        data = records_section(header, batch)
        pos = 0
        ops = self.ops
        pid = header.producer_id
        try:
            for _ in range(header.records_count):
                key, value, pos = key_value_at(data, pos)
                if key is None:
                    continue
                key = decode_key(key)
                ops.append((TXN, pid, (key, value)) if type(key) is OffsetCommitKey else (SINGLE, key, value))
        except (Truncated, IndexError) as exc:
            raise CorruptRecordError("record data truncated") from exc

    def add_marker(self, producer_id: int, commit: bool) -> None:
        self.ops.append((MARKER, producer_id, commit))

    def apply(self) -> None:
        """Replay everything collected, in log order, into the shard."""
        shard = self.shard
        latest = shard.offsets.latest
        groups = shard.groups
        replay = shard.replay
        skip = _superseded(self.ops)
        self.skipped_decodes = len(skip)
        offsets = shard.offsets
        for i, (kind, a, b) in enumerate(self.ops):
            if kind == TXN:
                key, value = b
                shard.replay(key, None if value is None else decode_value(key, value), producer_id=a)
                continue
            if kind == MARKER:
                shard.replay_marker(a, b)
                continue
            if kind == SINGLE:
                if i in skip:
                    _touch(groups, a, b)
                elif type(a) is UnknownRecordType:
                    shard.skipped_records += 1
                else:
                    replay(a, decode_value(a, b))
                continue
            if b is not None:  # one group and topic for the whole run: rows start with the partition
                stretches = ((b, a),)
            else:  # rows start with the group and topic bytes: split, and drop them
                stretches = ((names, list(map(_without_names, rows))) for names, rows in groupby(a, _names))
            if kind == TOMBSTONES:
                for (graw, traw), rows in stretches:
                    group = _str(graw)
                    if offsets.open_by_group and group in offsets.open_by_group:  # drops the transactions' pending offsets too
                        rows = list(rows)
                        offsets.outdate(group, [(_str(traw), row[0]) for row in rows], True)
                    current = latest.get(group)
                    if current is None:
                        continue
                    topic = _str(traw)
                    pop = current.pop
                    for partition in map(_partition, rows):
                        pop((topic, partition), None)
                    if not current:
                        del latest[group]
                continue
            for (graw, traw), rows in stretches:
                group = _str(graw)
                if offsets.open_by_group and group in offsets.open_by_group:  # a plain commit outdates a pending one
                    rows = list(rows)
                    offsets.outdate(group, [(_str(traw), row[0]) for row in rows], False)
                pairs = zip(zip(repeat(_str(traw)), map(_partition, rows), strict=False), rows, strict=False)  # as long as rows
                current = latest.get(group)
                if current is None:
                    latest[group] = dict(pairs)
                else:
                    current.update(pairs)
                if group not in groups:
                    groups[group] = ClassicGroup(group)  # a "simple" group
        self.ops = []


    def done(self) -> dict:
        """The end of a load (the coordinator runtime's ``Loader.done``): everything replayed, the
        offsets still standing decoded (``finish``); what the load log line reports."""
        self.apply()
        shard = self.shard
        values = finish(shard)
        return {"groups": len(shard.groups), "offsets": shard.offsets.count(), "values_decoded": values,
                "group_records_skipped": self.skipped_decodes, "skipped": shard.skipped_records}


def _superseded(ops: list[tuple]) -> set[int]:
    """The single records whose replay the next record of the same key makes irrelevant.

    Conservative, so that skipping them (``_touch`` instead of ``replay``)
    leaves exactly the state of replaying them:

    * a ConsumerGroupPartitionMetadata record: replay ignores it;
    * a GroupMetadata value whose group's next non-offset record is
      GroupMetadata again (that replaces the group whole, or deletes it; in
      between, offset records only ask whether the group exists);
    * a ConsumerGroupMetadata or TargetAssignmentMetadata value whose next
      record of the same key is a value, with no GroupMetadata record and no
      ConsumerGroupMetadata tombstone of the group in between (both values
      overwrite the same fields, which no other record's replay reads);
    * a CurrentMemberAssignment value whose next record of the same key is a
      value, with none of those and no MemberMetadata record of the member
      in between: the value overwrites the member's epochs, state and
      partitions. ``_touch`` releases the partitions the member held, where
      the skipped record's replay released them (another member may take
      them before the next record), and assigns none: what the skipped
      record assigned, the next one would release again, and no replay in
      between reads it (a valid log never has two members holding one
      partition; Kafka's replay refuses that). The group's count of members
      not yet stable adds up the same; target assignments in between only
      ask whether the member exists.

    Member metadata, target assignments, regular expressions and every
    tombstone are always replayed.
    """
    skip: set[int] = set()
    end = len(ops)
    next_any: dict = {}  # group -> key of its next non-offset record
    next_same: dict = {}  # key -> (index, is value) of its next record
    replaced: dict = {}  # group -> index of its next GroupMetadata record or ConsumerGroupMetadata tombstone
    member_meta: dict = {}  # (group, member) -> index of the member's next MemberMetadata record
    for i in range(end - 1, -1, -1):
        kind, key, value = ops[i]
        if kind != SINGLE:
            continue
        cls = type(key)
        if cls is OffsetCommitKey or cls is UnknownRecordType:
            continue
        if cls is ConsumerGroupPartitionMetadataKey:
            skip.add(i)
            continue
        is_value = value is not None
        if cls is GroupMetadataKey:
            g = key.group
            if is_value and next_any.get(g) == key:
                skip.add(i)
            replaced[g] = i
            next_any[g] = key
            continue
        g = key.group_id
        if is_value and (cls is ConsumerGroupCurrentMemberAssignmentKey or cls is ConsumerGroupMetadataKey
                         or cls is ConsumerGroupTargetAssignmentMetadataKey):
            nxt = next_same.get(key)
            if nxt is not None and nxt[1] and nxt[0] < replaced.get(g, end) and (
                    cls is not ConsumerGroupCurrentMemberAssignmentKey or nxt[0] < member_meta.get((g, key.member_id), end)):
                skip.add(i)
        next_same[key] = (i, is_value)
        next_any[g] = key
        if cls is ConsumerGroupMetadataKey and not is_value:
            replaced[g] = i
        elif cls is ConsumerGroupMemberMetadataKey:
            member_meta[(g, key.member_id)] = i
    return skip


def _touch(groups, key, value) -> None:
    """What a skipped record's replay leaves behind that its successor does not redo:
    the group it creates (and a current assignment's member), in its place in the groups' order."""
    cls = type(key)
    if cls is ConsumerGroupPartitionMetadataKey:
        return
    if cls is GroupMetadataKey:
        if key.group not in groups:
            groups[key.group] = ClassicGroup(key.group)  # replaced whole by the next GroupMetadata record
        return
    group = consumer_group(groups, key.group_id)
    if cls is ConsumerGroupCurrentMemberAssignmentKey:
        # the skipped assignment released the member's partitions here (others may take them before
        # the next one); what it assigned the next one releases again, so it holds nothing meanwhile
        group.set_current(group.get_or_add_member(key.member_id), 0, -1, STABLE, {}, {})


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


def marker_is_commit(header, batch) -> bool:
    """Whether a control batch is a COMMIT marker (its first record's key has type 1)."""
    try:
        key, _, _ = key_value_at(records_section(header, batch), 0)
    except (Truncated, IndexError) as exc:
        raise CorruptRecordError("control record truncated") from exc
    return parse_control_key(key)[1] == CONTROL_COMMIT


def replay_log_batch(shard, header, batch) -> None:
    """The reference: every record of the batch decoded and replayed on its own, in order
    (a transactional batch's offsets wait for their producer's marker)."""
    if header.is_control:
        if header.producer_id >= 0 and header.records_count:  # an empty one: see Loader.add_batch
            shard.replay_marker(header.producer_id, marker_is_commit(header, batch))
        return
    producer_id = header.producer_id if header.is_transactional else -1
    data = records_section(header, batch)
    pos = 0
    try:
        for _ in range(header.records_count):
            key, value, pos = key_value_at(data, pos)
            if key is not None:
                shard.replay_bytes(key, value, producer_id=producer_id)
    except (Truncated, IndexError) as exc:
        raise CorruptRecordError("record data truncated") from exc
