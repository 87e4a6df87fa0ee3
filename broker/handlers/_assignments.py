"""Manual replica assignments, checked alike by CreateTopics and CreatePartitions."""


def assignable_nodes(ctx) -> set[int]:
    """The broker ids a manual replica assignment may name: this broker, or every node of a cluster
    (they share one data directory: every node holds every partition, docs/multinode.md)."""
    view = ctx.broker.view
    return set(view.replica_ids()) if view is not None else {ctx.cluster.node_id}


def bad_assignment(assignments, nodes: set[int]) -> str | None:
    """Why a manual assignment (CreateTopics', CreatePartitions') is INVALID_REPLICA_ASSIGNMENT, or None."""
    bad = [b for a in assignments for b in a.broker_ids or () if b not in nodes]
    if bad or any(not a.broker_ids or len(set(a.broker_ids)) != len(a.broker_ids) for a in assignments):
        return f"Replica assignment may only name brokers {', '.join(map(str, sorted(nodes)))}, each at most once per partition"
    return None
