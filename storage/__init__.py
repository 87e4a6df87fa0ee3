"""kafkalite storage engine: segmented, Kafka-format partition logs."""

from .config import LogConfig
from .errors import (
    InvalidOffsetError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StorageError,
)
from .log import AppendResult, CompactionStats, PartitionLog
from .manager import LogManager

__all__ = [
    "LogConfig",
    "PartitionLog",
    "AppendResult",
    "CompactionStats",
    "LogManager",
    "StorageError",
    "OffsetOutOfRangeError",
    "LogClosedError",
    "RecordBatchTooLargeError",
    "InvalidOffsetError",
]
