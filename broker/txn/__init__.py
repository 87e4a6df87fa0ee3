"""The transaction coordinator: the state of one ``__transaction_state`` partition and the
operations on it (``shard``, no I/O), and the runtime that serves them (``service``).
See docs/transactions.md."""

