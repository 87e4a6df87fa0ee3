"""Idempotent-producer state per partition: epochs, sequences, duplicates.

Kafka's rules (ProducerStateManager / ProducerAppendInfo):
- an epoch older than the producer's current one is fenced: INVALID_PRODUCER_EPOCH;
- a new epoch must start at sequence 0, unless the producer was unknown;
- a batch that repeats one of the producer's last five batches is a duplicate:
  it is not appended again and its original offsets are returned;
- otherwise the first sequence must follow the last one (int32 wrap-around):
  OUT_OF_ORDER_SEQUENCE_NUMBER if not;
- a producer known at its epoch with no batch yet (a transaction marker bumped
  its epoch, transactions V2) must start at sequence 0. Only a producer this
  partition does not know is accepted at any sequence: otherwise a batch whose
  predecessor was refused with a retriable error (its transaction not yet
  verified) would be appended ahead of it, and the predecessor's retry would
  then be out of order.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

CACHED_BATCHES = 5
_INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    any_sequence: bool = False  # only a marker was seen for a producer unknown before: its sequence is not known

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _next_seq(seq: int) -> int:
    return 0 if seq == _INT32_MAX else seq + 1


class ProducerStateTable:
    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def check(self, pid: int, epoch: int, first_seq: int, last_seq: int) -> tuple[ErrorCode, BatchMeta | None]:
        """Validate one batch before it is appended.

        Returns (NONE, None) to append, (NONE, meta) for a duplicate of ``meta``,
        or (error, None) to refuse.
        """
        entry = self.entries.get(pid)
        if entry is None:
            return ErrorCode.none, None
        if epoch < entry.epoch:
            return ErrorCode.invalid_producer_epoch, None
        if epoch > entry.epoch:
            if first_seq != 0:
                return ErrorCode.out_of_order_sequence_number, None
            return ErrorCode.none, None
        for meta in entry.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return ErrorCode.none, meta
        if entry.any_sequence and not entry.batches:
            return ErrorCode.none, None
        if first_seq != _next_seq(entry.last_seq):  # with no batch yet, last_seq is -1: the producer starts at 0
            return ErrorCode.out_of_order_sequence_number, None
        return ErrorCode.none, None

    def update(self, pid: int, epoch: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int, timestamp: int) -> None:
        entry = self.entries.get(pid)
        if entry is None or entry.epoch != epoch:
            entry = self.entries[pid] = ProducerEntry(epoch)
        entry.batches.append(BatchMeta(first_seq, last_seq, first_offset, last_offset, timestamp))

    def end_txn(self, pid: int, epoch: int) -> None:
        """A COMMIT or ABORT marker of ``pid`` at ``epoch`` was written: a newer epoch fences the
        older one (its batches get INVALID_PRODUCER_EPOCH), and the producer starts it at sequence 0."""
        entry = self.entries.get(pid)
        if entry is None:
            self.entries[pid] = ProducerEntry(epoch, any_sequence=True)
        elif epoch > entry.epoch:
            self.entries[pid] = ProducerEntry(epoch)

    def rebuild(self, plog, segments: int = 2) -> None:
        """Replay the batch headers of the log's last segments (no record decoding).

        A producer whose last batch is older than that is unknown after a
        restart, which Kafka's rules accept at any sequence.
        """
        self.entries.clear()
        for seg in list(plog.iter_segments())[-segments:]:
            try:
                self._replay(seg.iter_headers())
            except (ValueError, struct.error) as exc:  # a header damaged on disk in a segment trusted after a clean shutdown
                from .logs import get_logger

                get_logger("producers").warning(
                    "damaged batch header: producer state rebuilt from the batches before it", segment=str(seg.log_path), error=str(exc),
                    note="the log is not truncated (a clean shutdown trusts its segments, as Kafka does); a fetch there gets "
                         "CORRUPT_MESSAGE (docs/recovery.md)",
                )

    def _replay(self, headers) -> None:
        for _, h in headers:
            if h.is_control and h.producer_id >= 0:
                self.end_txn(h.producer_id, h.producer_epoch)
            elif h.producer_id >= 0 and h.base_sequence >= 0:
                self.update(
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.last_sequence,
                    h.base_offset,
                    h.last_offset,
                    h.max_timestamp,
                )
