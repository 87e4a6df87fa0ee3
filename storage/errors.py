"""Exceptions raised by the storage engine."""

from __future__ import annotations

__all__ = [
    "StorageError",
    "OffsetOutOfRangeError",
    "LogClosedError",
    "RecordBatchTooLargeError",
    "InvalidOffsetError",
]


class StorageError(Exception):
    """Base class of storage errors."""


class OffsetOutOfRangeError(StorageError):
    """The requested offset is < log start offset or > log end offset (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class LogClosedError(StorageError):
    """Operation on a closed or deleted log."""


class RecordBatchTooLargeError(StorageError):
    """A batch is larger than max.message.bytes (MESSAGE_TOO_LARGE)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"record batch of {size} bytes exceeds max.message.bytes={limit}")
        self.size = size
        self.limit = limit


class InvalidOffsetError(StorageError):
    """Batches appended with pre-assigned offsets are not above the log end offset."""
