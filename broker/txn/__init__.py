"""The transaction coordinator's core: the state of one ``__transaction_state``
partition and the operations on it (``shard``), no I/O. See docs/transactions.md."""

from .shard import (
    Completion,
    Marker,
    ProducerIdResponse,
    TxnConfig,
    TxnDescription,
    TxnListing,
    TxnMetadata,
    TxnResult,
    TxnShard,
    client_version_for_add_partitions,
    client_version_for_end_txn,
    fenced_error_for,
    txn_partition_for,
)

__all__ = [
    "Completion",
    "Marker",
    "ProducerIdResponse",
    "TxnConfig",
    "TxnDescription",
    "TxnListing",
    "TxnMetadata",
    "TxnResult",
    "TxnShard",
    "client_version_for_add_partitions",
    "client_version_for_end_txn",
    "fenced_error_for",
    "txn_partition_for",
]
