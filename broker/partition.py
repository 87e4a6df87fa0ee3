"""A partition on this node: its log, its idempotent producers, the fetches waiting on it, and
``Partition.append``, the one way into its log (a client's batches checked first, as Kafka's
LogValidator and producer state check them). ``broker/cluster.py`` holds the topics and their
partitions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from protocol.errors import ErrorCode
from protocol.records import CorruptRecordError, keyless_records, validate_produce_batch

from .producers import ProducerStateTable

LEADER_EPOCH = 0  # a single node's, for ever; a cluster node's is its Leadership's


class AppendOrigin(StrEnum):
    """Who appends to a partition; it decides what ``Partition.append`` checks (Kafka's AppendOrigin).

    Members equal their values, so ``"coordinator"`` names ``COORDINATOR``.
    """

    CLIENT = "client"  # a producer's batches (Produce): validated, sequence-checked
    COORDINATOR = "coordinator"  # the group coordinator's records (and transaction markers): built here, trusted
    INTERNAL = "internal"  # other batches the broker builds itself (the group event stream): trusted


_CLIENT = AppendOrigin.CLIENT  # (an enum member's lookup on its class is slow, and this is per Produce partition)
_TRUSTED = frozenset({AppendOrigin.COORDINATOR, AppendOrigin.INTERNAL})


class AppendError(Exception):
    """A client's batches refused by ``Partition.append``: the Produce error to answer.

    ``log_start_offset`` is -1 where Kafka leaves it out (a corrupt batch);
    ``record_errors`` is set for records a compacted topic refuses.
    """

    def __init__(self, code: ErrorCode, message: str | None = None, log_start_offset: int = -1, record_errors: list | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message
        self.log_start_offset = log_start_offset
        self.record_errors = record_errors


@dataclass(slots=True)
class Appended:
    """Where ``Partition.append`` put the batches (for a duplicate: where they were put before)."""

    base_offset: int
    log_append_time: int  # -1 unless the topic stamps LogAppendTime
    log_start_offset: int
    duplicate: bool = False


@dataclass
class Leadership:
    """The leader epoch of every partition this node leads (one node leads them all): 0 on a
    single node; on a cluster node (broker/multinode/), the controller's epoch of the election
    that made it the active node, or of the last image a standby saw. Shared by the node's partitions."""

    epoch: int = LEADER_EPOCH


@dataclass
class Partition:
    topic: str
    index: int
    log: object  # storage.log.PartitionLog
    leadership: Leadership = field(default_factory=Leadership)
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)
    waiters: set = field(default_factory=set)

    def append(self, batches: list, origin: AppendOrigin) -> Appended:
        """Append ``batches`` (``(header, bytes)`` pairs, as ``split_batches`` gives them) in one write.

        The one way into a partition's log, for every origin. ``CLIENT`` batches are
        validated first (batch rules, ``max.message.bytes``, keys on a compacted topic,
        idempotent producer sequences; a duplicate of one of the producer's last
        batches returns its original offsets and is not written again) and raise
        ``AppendError`` if refused; their producer state is updated once written.
        ``COORDINATOR`` and ``INTERNAL`` batches are built by the broker and trusted.
        Whatever the origin, the fetches parked on the partition are woken. Storage
        failures (``LogClosedError`` for a deleted topic, ``OSError``) propagate.
        """
        plog = self.log
        client = origin == _CLIENT
        if client:
            dup = self._admit(batches)
            if dup is not None:
                return Appended(dup.first_offset, -1, plog.log_start_offset, True)
        elif origin not in _TRUSTED:
            raise ValueError(f"unknown append origin {origin!r}")
        result = plog.append(batches, leader_epoch=self.leadership.epoch)
        if client:
            offset = result.base_offset
            update = self.producers.update
            for header, _ in batches:
                last = offset + header.last_offset_delta
                if header.producer_id >= 0 and header.base_sequence >= 0:
                    update(
                        header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence,
                        offset, last, header.max_timestamp,
                    )
                offset = last + 1
        self.notify()
        return Appended(result.base_offset, result.log_append_time_ms, plog.log_start_offset)

    def _admit(self, batches: list):
        """Validate a client's batches, as Kafka's LogValidator and producer state do; raises
        ``AppendError``. Returns the ``BatchMeta`` of the batch they duplicate, or None."""
        plog = self.log
        config = plog.config
        for header, _ in batches:
            problem = validate_produce_batch(header)
            if problem:
                raise AppendError(ErrorCode.invalid_record, problem, plog.log_start_offset)
            if header.size > config.max_message_bytes:
                raise AppendError(
                    ErrorCode.message_too_large,
                    f"batch of {header.size} bytes exceeds max.message.bytes={config.max_message_bytes}",
                    plog.log_start_offset,
                )
        if config.compact:
            self._refuse_keyless(batches)
        producers = self.producers
        for header, _ in batches:
            if header.producer_id >= 0 and header.base_sequence >= 0:
                code, dup = producers.check(header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence)
                if code is not ErrorCode.none:
                    raise AppendError(code, None, plog.log_start_offset)
                if dup is not None:
                    if len(batches) != 1:
                        raise AppendError(ErrorCode.duplicate_sequence_number, None, plog.log_start_offset)
                    return dup
        return None

    def _refuse_keyless(self, batches: list) -> None:
        """INVALID_RECORD for the first batch holding records without a key, as Kafka's LogValidator."""
        for _, batch in batches:
            try:
                missing = keyless_records(batch)
            except CorruptRecordError as exc:
                raise AppendError(ErrorCode.corrupt_message, str(exc)) from exc  # Kafka: no log start offset here
            if missing:
                message = f"Compacted topic cannot accept message without key in topic partition {self.topic}-{self.index}"
                shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in missing[:3])
                raise AppendError(
                    ErrorCode.invalid_record,
                    f"One or more records have been rejected due to {len(missing)} record errors in total, "
                    f"and only showing the first three errors at most: [{shown}]",
                    self.log.log_start_offset,
                    [{"batch_index": i, "batch_index_error_message": message} for i in missing],
                )

    def notify(self) -> None:
        """Wake every fetch long-poll waiting on this partition."""
        if self.waiters:
            for fut in self.waiters:
                if not fut.done():
                    fut.set_result(None)
            self.waiters.clear()
