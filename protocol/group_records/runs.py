"""Runs of same-layout offset-commit records in a batch's records section (the coordinator's load).

A coordinator batch is usually hundreds or thousands of OffsetCommit records
(type-1 key, value v1, v3 or v4) that differ only in their offset delta and
in their payload (group, topic, partition, offset, leader epoch, metadata,
timestamps): every length, version and varint byte is the same. ``scan``
walks a records section and cuts it into

* runs: ``k`` consecutive records with the byte layout of the first one,
  verified rather than assumed, decoded in one ``struct.iter_unpack`` call
  into rows; and
* single records that fit no run (another record type, a value version or
  shape the fast layout does not cover, a compacted batch's offset gaps),
  returned as raw (key, value) bytes for the ordinary decoder.

Verification: every byte of a run that is not payload must equal the first
record's byte at the same place, and the offset deltas must count up by one
from the first record's (so each varint has the size the layout assumes).
Both are C-speed: one strided slice (``data[j::size]``) per shared byte
position, compared with the first record's byte repeated, and one or two for
the offset deltas, compared with a table.
With the record length, key length and value length bytes all equal, every
record starts where the layout says, so the rows are exactly what decoding
each record on its own would give. The longest verified run is found by
trying the whole rest of the batch, then doubling and bisecting, so a batch
of mixed layouts costs a few passes over its bytes, not one per record. A
record's layout is usually one of the last few runs' (a batch alternates
between the one-byte and the two-byte offset delta), checked by picking its
shared bytes in one call; otherwise it is read from the record.

Rows of a value run: ``(partition, version, *value fields)`` with value
fields ``offset, epoch, [metadata bytes], commit`` (v3/v4) or ``offset,
[metadata bytes], commit, expire`` (v1); metadata bytes appear only when the
metadata is not empty. Rows of a tombstone run: ``(partition,)``. When the
records of a run do not all have the same group and topic, every row starts
with the group's and the topic's bytes instead. :func:`value_of_row` turns a
value row (without names) into the :class:`OffsetCommitValue` that
``decode_value`` gives.
"""

from __future__ import annotations

import struct
from operator import itemgetter
from typing import NamedTuple

from protocol.compression import CorruptRecordError
from protocol.records import _varint, key_value_at

from .classic import OffsetCommitValue
from ._codec import _LENIENT, _UTF8

VALUES, TOMBSTONES, SINGLE = 0, 1, 2

MIN_RUN = 8  # shorter runs go record by record: a run's fixed cost is a few dozen C calls

_OD1 = bytes(range(0, 128, 2))  # one-byte zigzag varints of deltas 0..63
_OD2_LO = bytes(((2 * d) & 0x7F) | 0x80 for d in range(8192))  # two-byte zigzag varints of deltas 64..8191
_OD2_HI = bytes((2 * d) >> 7 for d in range(8192))

_formats: dict[tuple, struct.Struct] = {}

# the non-flexible value versions: (size without metadata, metadata length's place, row format with
# the metadata's bytes (``%`` its length), row format without)
_CLASSIC_VALUES = {3: (24, 14, "hqi2x%dsq", "hqi2xq"), 1: (28, 10, "hq2x%dsqq", "hq2xqq")}


class Truncated(CorruptRecordError):
    """The records section ends inside a record."""


def _u16(data, p: int) -> int:
    return (data[p] << 8) | data[p + 1]


def _layout(data, pos: int):
    """The fast layout of the record at ``pos`` and its offset delta, or None when the record has none."""
    rec_len, p = _varint(data, pos)
    end = p + rec_len
    if end > len(data):
        return None
    const = list(range(0, p - pos + 1))  # record length, attributes
    q = _varint(data, p + 1)[1]  # timestamp delta (the same in every record of a run)
    const += range(p + 1 - pos, q - pos)
    od_at = q - pos
    delta, p = _varint(data, q)
    od_size = p - q
    if delta < 0 or od_size > 2:
        return None
    klen, kp = _varint(data, p)
    const += range(p - pos, kp - pos)
    if klen < 10 or kp + klen > end or _u16(data, kp) != 1:
        return None
    glen = _u16(data, kp + 2)
    tp = kp + 4 + glen
    if glen >= 0x8000 or tp + 2 > end:
        return None
    tlen = _u16(data, tp)
    if tlen >= 0x8000 or klen != 10 + glen + tlen:
        return None
    key_at = kp - pos
    const += range(key_at, key_at + 4)  # type, group length
    const += range(tp - pos, tp - pos + 2)  # topic length
    fmt = [f"{od_at}x", f"{od_size}x", f"{kp - p}x", "\0", "i"]  # "\0": where the group and topic are (or are skipped)
    vlen, vp = _varint(data, kp + klen)
    const += range(kp + klen - pos, vp - pos)
    fmt.append(f"{vp - kp - klen}x")
    if vlen < 0:
        kind = TOMBSTONES
        hp = vp
    else:
        kind = VALUES
        if vp + vlen > end or vlen < 2:
            return None
        version = _u16(data, vp)
        v_at = vp - pos
        const += (v_at, v_at + 1)
        if version == 4:
            if vlen < 24:
                return None
            m1 = data[vp + 14]  # the metadata's length + 1, an unsigned varint (compact string)
            if m1 < 0x80:
                msize = 1
            elif data[vp + 15] < 0x80:
                msize, m1 = 2, (m1 & 0x7F) | (data[vp + 15] << 7)
            else:
                return None
            mlen = m1 - 1
            if mlen < 0 or vlen != 23 + msize + mlen or data[vp + 22 + msize + mlen] != 0:  # no tagged fields (no topic id)
                return None
            const += range(v_at + 14, v_at + 14 + msize)
            const.append(v_at + 22 + msize + mlen)
            fmt.append(f"hqi{msize}x{mlen}sqx" if mlen else "hqixqx")
        elif version in _CLASSIC_VALUES:
            size, at, with_metadata, without = _CLASSIC_VALUES[version]
            if vlen < size:
                return None
            mlen = _u16(data, vp + at)
            if mlen >= 0x8000 or vlen != size + mlen:
                return None
            const += (v_at + at, v_at + at + 1)
            fmt.append(with_metadata % mlen if mlen else without)
        else:
            return None
        hp = vp + vlen
    if hp + 1 != end or data[hp] != 0:  # no headers, nothing after them
        return None
    const.append(hp - pos)
    fmt.append("x")
    sig = "".join(fmt)
    size = end - pos
    with_names = _struct(sig.replace("\0", f"2x2x{glen}s2x{tlen}s"))
    plain = _struct(sig.replace("\0", f"2x2x{glen}x2x{tlen}x"))
    if with_names.size != size or plain.size != size:  # pragma: no cover - the layout above is exact
        return None
    g_at = key_at + 4
    t_at = tp - pos + 2
    names = [*range(g_at, g_at + glen), *range(t_at, t_at + tlen)]  # one group's commit has the same in every record
    get = itemgetter(*const)
    lay = _Layout(size, od_at, od_size, kind, with_names, plain, const, names, (g_at, g_at + glen), (t_at, t_at + tlen), get, get(data[pos:end]))
    return lay, delta


def _struct(sig: str) -> struct.Struct:
    st = _formats.get(sig)
    if st is None:
        st = _formats[sig] = struct.Struct(">" + sig)
    return st


class _Layout(NamedTuple):
    size: int
    od_at: int  # the offset delta varint: position and size
    od_size: int
    kind: int
    with_names: struct.Struct  # rows (group bytes, topic bytes, partition, ...)
    plain: struct.Struct  # rows (partition, ...)
    const: list[int]  # positions of the bytes every record of a run shares
    names: list[int]  # positions of the group's and topic's bytes
    group_at: tuple[int, int]
    topic_at: tuple[int, int]
    get_const: itemgetter  # the shared bytes of a record ...
    const_values: tuple  # ... as the record the layout was read from has them


_recent: list[_Layout] = []  # the layouts of the latest runs, newest first (a batch's runs alternate between two)


def _delta_at(data, p: int, od_size: int) -> int | None:
    """The offset delta at ``p`` if it is a varint of ``od_size`` bytes (1 or 2), else None."""
    b = data[p]
    if od_size == 1:
        return b >> 1 if b < 0x80 and not b & 1 else None
    c = data[p + 1]
    if b < 0x80 or c >= 0x80:
        return None
    z = (b & 0x7F) | (c << 7)
    return None if z & 1 else z >> 1


def _known_layout(data, pos: int):
    """A recent layout the record at ``pos`` has (its shared bytes equal the layout's), and its delta."""
    for lay in _recent:
        rec = data[pos:pos + lay.size]
        if len(rec) == lay.size and lay.get_const(rec) == lay.const_values:
            delta = _delta_at(rec, lay.od_at, lay.od_size)
            if delta is not None:
                return lay, delta
    found = _layout(data, pos)
    if found is not None:
        _recent.insert(0, found[0])
        del _recent[4:]
    return found


def _same(region, size: int, k: int, positions: list[int]) -> bool:
    """Do the ``k`` records of ``region`` all have the first one's bytes at ``positions``?"""
    for j in positions:
        if region[j::size] != region[j:j + 1] * k:
            return False
    return True


def _verified(data, pos: int, lay: _Layout, k: int, delta: int) -> bool:
    """Do the ``k`` records from ``pos`` all have the layout of the first (see the module doc)?"""
    size = lay.size
    region = data[pos:pos + k * size]
    if not _same(region, size, k, lay.const):
        return False
    od_at = lay.od_at
    if lay.od_size == 1:
        return region[od_at::size] == _OD1[delta:delta + k]
    return region[od_at::size] == _OD2_LO[delta:delta + k] and region[od_at + 1::size] == _OD2_HI[delta:delta + k]


def scan(data, count: int):
    """Cut the first ``count`` records of a records section (bytes) into runs and single records.

    Yields ``(VALUES | TOMBSTONES, rows, names)`` for a run, where ``names`` is
    (group bytes, topic bytes) when every record of the run has the same ones
    (rows then start with the partition), else None (rows start with the group
    and topic bytes); and ``(SINGLE, key, value)`` for a record decoded on its
    own; in log order. Raises CorruptRecordError (:class:`Truncated`, or key_value_at's) when the section ends inside
    a record.
    """
    n = len(data)
    pos = 0
    idx = 0
    retry_at = 0  # after a failed attempt, the next one waits (1, 2, 4 ... 64 records)
    backoff = 1
    try:
        while idx < count:
            found = _known_layout(data, pos) if idx >= retry_at else None
            if found is not None:
                lay, delta = found
                size = lay.size
                limit = min(count - idx, (n - pos) // size, (64 if lay.od_size == 1 else 8192) - delta)
                good = 1
                if limit >= MIN_RUN and _verified(data, pos, lay, limit, delta):
                    good = limit  # the usual case: the rest of the batch (or of this varint size)
                elif limit >= MIN_RUN:
                    k = MIN_RUN
                    bad = limit
                    while k < bad:  # doubling ...
                        if not _verified(data, pos, lay, k, delta):
                            bad = k
                            break
                        good = k
                        k *= 2
                    while bad - good > 1:  # ... then bisecting
                        mid = (good + bad) // 2
                        if _verified(data, pos, lay, mid, delta):
                            good = mid
                        else:
                            bad = mid
                if good >= MIN_RUN:
                    end = pos + good * size
                    region = data[pos:end]
                    if not _same(region, size, good, lay.names):
                        yield lay.kind, list(lay.with_names.iter_unpack(region)), None
                    else:
                        g0, g1 = lay.group_at
                        t0, t1 = lay.topic_at
                        yield lay.kind, list(lay.plain.iter_unpack(region)), (bytes(region[g0:g1]), bytes(region[t0:t1]))
                    pos = end
                    idx += good
                    backoff = 1
                    continue
                retry_at = idx + max(good, backoff)
                backoff = min(backoff * 2, 64)
            key, value, pos = key_value_at(data, pos)
            yield SINGLE, key, value
            idx += 1
    except IndexError as exc:
        raise Truncated("record data truncated") from exc


def value_of_row(row: tuple) -> OffsetCommitValue:
    """The OffsetCommitValue of a value-run row without names (what ``decode_value`` gives for its record)."""
    if row[1] == 1:
        if len(row) == 5:
            return OffsetCommitValue(row[2], -1, "", row[3], row[4], None)
        return OffsetCommitValue(row[2], -1, row[3].decode(_UTF8, _LENIENT), row[4], row[5], None)
    if len(row) == 5:
        return OffsetCommitValue(row[2], row[3], "", row[4], -1, None)
    return OffsetCommitValue(row[2], row[3], row[4].decode(_UTF8, _LENIENT), row[5], -1, None)
