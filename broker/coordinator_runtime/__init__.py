"""The one coordinator runtime: the group, transaction and share coordinators' shards run in it.

``runtime.py`` ``CoordinatorRuntime`` owns one coordinator partition: loading its
shard from the log, the LOADING/ACTIVE/FAILED/UNLOADED states, batching writes,
appending them through ``Partition.append``, releasing answers once durable,
timers, and unloading on demand. ``owner.py`` ``RuntimeOwner`` is what a
coordinator (``GroupCoordinator``, ``TransactionCoordinator``, ``ShareCoordinator``)
has of it: every partition's runtime, ``load(index)`` and ``unload(index)``.
``constants.py``: the topics, their load buffers, the clock. See
docs/architecture.md, "The coordinator runtime". Nothing here imports a coordinator.
"""
