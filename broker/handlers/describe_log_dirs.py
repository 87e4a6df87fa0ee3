"""DescribeLogDirs (35), v1-4: the one log directory and the size of each partition in it.

As Kafka 4.x's ReplicaManager.describeLogDirs on a one-directory broker: DESCRIBE
on the cluster is needed (else the top-level CLUSTER_AUTHORIZATION_FAILED and no
result); null topics means every partition; named partitions that do not exist
are left out; the offset lag of a current log is 0 and no log is a future one. v4
adds the directory's total and usable bytes (``os.statvfs``).
"""

import os

from protocol.errors import ErrorCode

from ..security.authorizer import Operation

API_KEY = 35
NAME = "DescribeLogDirs"
VERSIONS = (1, 4)


def _wanted(cluster, topics) -> dict[str, list]:
    """Topic name -> the partitions asked for that exist, in the order asked."""
    if topics is None:
        return {name: list(t.partitions) for name, t in cluster.topics.items()}
    out: dict[str, list] = {}
    for dt in topics:
        topic = cluster.topics.get(dt.topic)
        if topic is None:
            continue
        parts = out.setdefault(dt.topic, [])
        for index in dt.partitions or ():
            if 0 <= index < len(topic.partitions) and topic.partitions[index] not in parts:
                parts.append(topic.partitions[index])
    return {name: parts for name, parts in out.items() if parts}


def _space(path) -> tuple[int, int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(ctx, req):
    if not ctx.allowed_on_cluster(Operation.DESCRIBE):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "results": []}
    cluster = ctx.cluster
    topics = [
        {"name": name, "partitions": [
            {"partition_index": p.index, "partition_size": p.log.size_bytes, "offset_lag": 0, "is_future_key": False} for p in parts
        ]}
        for name, parts in _wanted(cluster, req.topics).items()
    ]
    log_dir = os.path.abspath(cluster.data_dir)
    total, usable = _space(log_dir)
    result = {"error_code": ErrorCode.none, "log_dir": log_dir, "topics": topics, "total_bytes": total, "usable_bytes": usable}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": [result]}
