"""Reading the cluster metadata at start, and rebuilding it from the partition directories.

``meta.json`` holds the topics (names, ids, partition counts, configs), the
group and dynamic broker configs, the cluster id and the producer-id block;
``meta.json.prev`` is the version before the last write (``Cluster._save``).
Each partition directory holds its topic id in ``partition.metadata``.

``load_cluster`` reads ``meta.json``, or, if it is missing or unreadable,
``meta.json.prev`` (WARNING), or, if neither can be read, rebuilds every topic
from the partition directories (WARNING naming what it rebuilt and what it
could not). Then every partition directory is checked against the metadata:

- a directory of a topic's partition whose ``partition.metadata`` names another
  topic id is never used for it: it is set aside (``<dir>.<hex>-stray``, or
  removed if it holds no record) and the partition starts empty, as Kafka
  refuses a log with an inconsistent topic id;
- a directory without ``partition.metadata`` gets it (data directories written
  before it existed);
- a directory of no topic of ``meta.json`` is a topic deleted or created while the
  broker stopped: set aside. After a fall back to ``meta.json.prev`` (which
  may be one write behind) or a rebuild, such directories are adopted instead:
  each becomes (a partition of) its topic again, so no record is ever left out.

Only when the metadata is unreadable and there is no partition directory does
the start fail, with one line (``MetadataError``) naming the file and what to do.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from pathlib import Path

from storage.atomic import previous_path, read_with_fallback
from storage.config import LogConfig
from storage.partition_meta import PARTITION_METADATA

from .cluster import META_FILE, PRODUCER_ID_BLOCK, Topic, _new_cluster_id, log, meta_checksum, validate_topic_name
from .partition import Partition
from .dynamic_config import broker_dynamic_settings

MAX_PARTITIONS = 1_000_000  # a count above this in meta.json is damage, not a topic
# after a rebuild the producer-id block restarts this far above the highest id found in the logs, so an
# id handed out before (by a producer that has not written since the last segments) is not handed out again
REBUILD_PID_MARGIN = 1_000 * PRODUCER_ID_BLOCK
NOT_REBUILT = (
    "topic configs (user topics get the broker defaults; internal topics their usual configs), "
    "group configs, dynamic broker configs, the cluster id (a new one is made); "
    "ACLs and SCRAM users are kept in their own files and are not affected"
)


class MetadataError(RuntimeError):
    """The cluster metadata cannot be read and cannot be rebuilt: the broker does not start."""


def _str_map(value, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{what} is not a map of strings")
    return value


def _int(value, what: str, lo: int, hi: int) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise ValueError(f"{what} is not an integer in [{lo}, {hi}]")
    return value


def parse_meta(data: bytes) -> dict:
    """``meta.json``'s content, checked field by field; raises ValueError for anything else."""
    import json

    meta = json.loads(data)
    if not isinstance(meta, dict):
        raise ValueError("not a JSON object")
    if "checksum" in meta and meta["checksum"] != meta_checksum(meta):  # (files written before it have none)
        raise ValueError("checksum mismatch")
    if not isinstance(meta.get("cluster_id", ""), str):
        raise ValueError("cluster_id is not a string")
    _int(meta.get("producer_id_limit", 0), "producer_id_limit", 0, 2**63 - 1)
    topics = meta.get("topics", {})
    if not isinstance(topics, dict):
        raise ValueError("topics is not a map")
    ids = set()
    for name, t in topics.items():
        reason = validate_topic_name(name)
        if reason:
            raise ValueError(f"topic {name[:60]!r}: {reason}")
        if not isinstance(t, dict) or not isinstance(t.get("id"), str):
            raise ValueError(f"topic {name!r} has no id")
        topic_id = uuid.UUID(t["id"])
        if topic_id in ids or topic_id.int == 0:
            raise ValueError(f"topic {name!r}: id {topic_id} is zero or taken")
        ids.add(topic_id)
        _int(t.get("partitions"), f"partitions of topic {name!r}", 1, MAX_PARTITIONS)
        _str_map(t.get("configs", {}), f"configs of topic {name!r}")
    for key in ("group_configs", "broker_configs"):
        groups = meta.get(key, {})
        if not isinstance(groups, dict):
            raise ValueError(f"{key} is not a map")
        for k, v in groups.items():
            _str_map(v, f"{key}[{k[:60]!r}]")
    return meta


def _looks_like_partition(path: Path) -> bool:
    """A directory a kafkalite (or Kafka) log lives in: a partition.metadata or a segment file."""
    if (path / PARTITION_METADATA).exists():
        return True
    try:
        return any(p.suffix == ".log" for p in path.iterdir())
    except OSError:
        return False


class _Loader:
    def __init__(self, cluster, internal_configs) -> None:
        self.cluster = cluster
        self.logs = cluster.logs
        self.internal_configs = internal_configs
        self.claimed: set[tuple[str, int]] = set()
        self.migrated = 0  # partition.metadata files written for directories that had none
        self.created_empty: list[str] = []  # partitions of the metadata without a directory

    # ------------------------------------------------------------------ topics of the metadata
    def topic_config(self, name: str, overrides: dict[str, str]) -> LogConfig:
        try:
            return LogConfig.from_kafka(overrides, self.cluster.defaults)
        except ValueError as exc:
            log.warning("topic configs not valid, the defaults apply", topic=name, configs=overrides, error=str(exc))
            return self.cluster.defaults

    def open_partition(self, topic: Topic, p: int) -> None:
        name, logs = topic.name, self.logs
        if logs.get(name, p) is None:
            found, why = logs.topic_id_of(name, p)
            if found is not None and found != topic.topic_id:
                self.cluster._set_aside(
                    name, p, "its partition.metadata names another topic id (inconsistent topic id)",
                    directory_topic_id=str(found), topic_id=str(topic.topic_id),
                )
                self.created_empty.append(f"{name}-{p}")
            elif why == "missing":
                self.migrated += 1
            elif why == "no directory":
                self.created_empty.append(f"{name}-{p}")
            elif why is not None:
                log.warning("partition.metadata unreadable, written again", topic=name, partition=p, reason=why)
        plog = logs.create(name, p, topic.config, topic_id=topic.topic_id)
        part = Partition(name, p, plog, self.cluster.leadership)
        part.producers.rebuild(plog)
        topic.partitions.append(part)
        self.claimed.add((name, p))

    def load_topics(self, meta: dict) -> None:
        for name, t in meta.get("topics", {}).items():
            overrides = dict(t.get("configs", {}))
            topic = Topic(name, uuid.UUID(t["id"]), overrides, self.topic_config(name, overrides), [])
            for p in range(t["partitions"]):
                self.open_partition(topic, p)
            self.cluster._index(topic)

    # ------------------------------------------------------------------ directories of no topic
    def unclaimed(self) -> dict[str, dict[int, Path]]:
        out: dict[str, dict[int, Path]] = {}
        for name, p in self.logs.partition_dirs():
            if (name, p) in self.claimed:
                continue
            path = self.logs.path_of(name, p)
            if _looks_like_partition(path):
                out.setdefault(name, {})[p] = path
        return out

    def set_aside_strays(self) -> None:
        for name, parts in self.unclaimed().items():
            for p in sorted(parts):
                self.cluster._set_aside(name, p, "no topic of the cluster metadata has this partition (a topic deleted or created while the broker stopped)")

    def adopt(self) -> list[str]:
        """Make topics (or partitions) again of the directories no topic claims; returns what was rebuilt."""
        rebuilt = []
        for name, parts in sorted(self.unclaimed().items()):
            reason = validate_topic_name(name)
            if reason:
                log.warning("directory left as it is: not a topic's", directory=str(next(iter(parts.values())).name), reason=reason)
                continue
            ids = {p: self.logs.topic_id_of(name, p)[0] for p in parts}
            topic = self.cluster.topics.get(name)
            if topic is None:
                counts = Counter(i for i in ids.values() if i is not None)
                if counts:
                    best = max(counts.values())
                    topic_id = next(ids[p] for p in sorted(ids) if ids[p] is not None and counts[ids[p]] == best)
                    id_source = "partition.metadata"
                else:
                    topic_id = uuid.uuid4()
                    id_source = "new (no partition.metadata)"
                if topic_id in self.cluster.by_id:
                    for p in sorted(parts):
                        self.cluster._set_aside(name, p, "its topic id is another topic's", topic_id=str(topic_id))
                    continue
                overrides = dict((self.internal_configs(name) if self.internal_configs and name.startswith("__") else None) or {})
                topic = Topic(name, topic_id, overrides, self.topic_config(name, overrides), [])
            else:
                id_source = "grown"
            keep = []
            for p in sorted(parts):
                if ids[p] is not None and ids[p] != topic.topic_id:
                    self.cluster._set_aside(name, p, "its partition.metadata names another topic id than the other partitions'",
                                            directory_topic_id=str(ids[p]), topic_id=str(topic.topic_id))
                else:
                    keep.append(p)
            if not keep:
                continue
            before = len(topic.partitions)
            for p in range(before, max(keep) + 1):
                self.open_partition(topic, p)  # a number missing in between (or set aside) starts empty
            if before == 0:
                self.cluster._index(topic)
            else:
                self.cluster.metadata.refresh(self.cluster.topics)
            rebuilt.append(f"{name} ({len(topic.partitions)} partitions, id {topic.topic_id}, from {id_source})")
        return rebuilt

    def highest_producer_id(self) -> int:
        highest = -1
        for topic in self.cluster.topics.values():
            for part in topic.partitions:
                if part.producers.entries:
                    highest = max(highest, max(part.producers.entries))
        return highest


def _set_unreadable_aside(path: Path) -> Path | None:
    """Keep a damaged metadata file for inspection, out of the way of the next write's rotation."""
    if not path.exists():
        return None
    target = path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}")
    try:
        path.rename(target)
    except OSError:
        return None
    return target


def load_cluster(cluster, internal_configs=None) -> None:
    """Read the cluster metadata into ``cluster`` and open every partition (the module's
    docstring says how a missing or damaged ``meta.json`` is recovered). ``internal_configs(name)``
    gives the configs an internal topic is created with, for one rebuilt from its directories.
    Raises ``MetadataError`` when the metadata is unreadable and nothing can rebuild it."""
    data_dir = cluster.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / META_FILE
    try:
        read = read_with_fallback(path, parse_meta)
    except PermissionError as exc:
        raise MetadataError(f"cannot read the cluster metadata {exc.filename}: permission denied: make it readable by uid {os.getuid()}") from None
    loader = _Loader(cluster, internal_configs)
    refused = "; ".join(f"{p.name}: {why}" for p, why in read.refused)
    if read.source is None and not read.missing and not loader.unclaimed():
        raise MetadataError(
            f"cannot read the cluster metadata ({refused}) and no partition directory in {data_dir} to rebuild it from: "
            f"restore {path} from a backup, or move it and {previous_path(path).name} away to start with an empty cluster"
        )
    meta = read.value or {}
    if read.fell_back:
        kept = _set_unreadable_aside(path)
        log.warning(
            "cluster metadata unreadable, its previous version is used", file=str(path), reason=refused,
            used=str(read.source), damaged_file_kept_as=kept.name if kept else None,
            note="the last metadata change may be missing; partition directories it made are adopted",
        )
    elif read.source is None and not read.missing:
        for p, _ in read.refused:
            _set_unreadable_aside(p)

    cluster.cluster_id = meta.get("cluster_id") or _new_cluster_id()
    limit = meta.get("producer_id_limit", 0)
    cluster.group_configs.clear()  # updated in place: the coordinator's GroupConfig holds this dict
    cluster.group_configs.update({g: dict(c) for g, c in meta.get("group_configs", {}).items()})
    cluster.broker_configs = {b: dict(c) for b, c in meta.get("broker_configs", {}).items()}
    if cluster.broker_configs:
        cluster.defaults = cluster._dynamic_defaults(broker_dynamic_settings())
        cluster.logs.default_config = cluster.defaults
    loader.load_topics(meta)

    if read.source is not None and not read.fell_back:
        loader.set_aside_strays()
    else:
        rebuilt = loader.adopt()
        if read.source is None and rebuilt:
            log.warning(
                "cluster metadata rebuilt from the partition directories", file=str(path), reason=refused or "missing",
                topics=rebuilt, not_rebuilt=NOT_REBUILT, cluster_id=cluster.cluster_id,
            )
        elif rebuilt:
            log.warning("topics adopted from partition directories missing from the previous metadata", topics=rebuilt)
    if loader.created_empty:
        log.warning("partitions without a usable directory start empty", partitions=loader.created_empty[:50], count=len(loader.created_empty))
    if loader.migrated:
        log.info("partition.metadata written for directories that had none", count=loader.migrated)

    # every start skips to a fresh block, so a pid is never handed out twice: past the highest id the
    # logs know, and past one more block after a fall back (the lost write may have taken one)
    highest = loader.highest_producer_id()
    if read.source is None and loader.claimed:
        limit = max(limit, highest + 1 + REBUILD_PID_MARGIN)
    elif read.fell_back:
        limit += PRODUCER_ID_BLOCK
    cluster._next_pid = cluster._pid_limit = max(limit, highest + 1)
    cluster._save()
