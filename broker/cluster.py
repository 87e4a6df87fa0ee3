"""The broker's data-plane state: topics, partitions, producer ids.

One instance lives on the event loop and is only touched from it. Topic
metadata (names, ids, partition counts, config overrides) is kept in
``<data-dir>/meta.json``, written atomically with the version before it kept
as ``meta.json.prev``; partition data lives in the log engine under
``<data-dir>/<topic>-<partition>/``, each directory with its topic id in
``partition.metadata``. ``metadata_load.py`` reads them at start and rebuilds
what is missing (docs/data-directory.md).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ErrorCode
from storage.atomic import write_atomically
from storage.config import LogConfig
from storage.crashpoints import crash_point
from storage.manager import LogManager

from .coordinator_runtime.constants import COORDINATOR_TOPICS
from .logs import get_logger
from .partition import Leadership, Partition

log = get_logger("cluster")

META_FILE = "meta.json"
META_VERSION = 1

KAFKA_INTERNAL_TOPICS = frozenset(COORDINATOR_TOPICS)
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
PRODUCER_ID_BLOCK = 1000
# Kafka's controller writes at most this many metadata records for one admin
# request (QuorumController.MAX_RECORDS_PER_USER_OP) and refuses CreateTopics
# asking for more partitions than this in total (MAX_PARTITIONS_PER_BATCH).
MAX_RECORDS_PER_REQUEST = 10_000
# partitions opened per step of an asynchronous creation (the loop serves others in between)
_OPEN_CHUNK = 128


class TopicError(Exception):
    """Carries the Kafka error code name for an invalid topic operation."""

    def __init__(self, code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_topic_name(name: str) -> str | None:
    """Kafka's rules; returns a reason or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL_TOPIC.match(name):
        return (
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    overrides: dict[str, str]
    config: LogConfig
    partitions: list[Partition]

    @property
    def internal(self) -> bool:
        """Not written to by clients (names starting with "__")."""
        return self.name.startswith("__")

    @property
    def listed(self) -> bool:
        """In all-topics Metadata and in what KIP-848 subscriptions and regexes see: every topic but
        kafkalite's own (``__kafkalite_...``); Kafka's internal topics are listed, flagged, as Kafka lists them."""
        return not self.internal or self.kafka_internal

    @property
    def kafka_internal(self) -> bool:
        """Flagged is_internal in Metadata: only the topics Kafka itself calls internal.

        Spark's Kafka source, for one, silently reads nothing from a topic flagged
        internal, so kafkalite's own __kafkalite_group_events is not flagged.
        """
        return self.name in KAFKA_INTERNAL_TOPICS


class MetadataView:
    """What the group coordinator needs to know of the topics, kept current.

    ``version`` moves on every topic creation, deletion or partition change,
    so KIP-848 groups know when to re-resolve regexes and re-assign.
    """

    def __init__(self) -> None:
        self.version = 0
        self.by_name: dict[str, tuple[uuid.UUID, int]] = {}
        self.by_id: dict[uuid.UUID, str] = {}
        self._patterns: dict = {}

    def refresh(self, topics: dict) -> None:
        self.version += 1
        listed = [t for t in topics.values() if not t.internal or t.name in KAFKA_INTERNAL_TOPICS]  # Topic.listed
        self.by_name = {t.name: (t.topic_id, len(t.partitions)) for t in listed}
        self.by_id = {t.topic_id: t.name for t in listed}

    def compile(self, regex: str):
        """An RE2 pattern (Kafka uses RE2/J); raises ValueError if invalid."""
        pattern = self._patterns.get(regex)
        if pattern is None:
            import re2

            options = re2.Options()
            options.log_errors = False
            try:
                pattern = re2.compile(regex, options)
            except re2.error as exc:
                raise ValueError(str(exc)) from exc
            if len(self._patterns) > 1000:
                self._patterns.clear()
            self._patterns[regex] = pattern
        return pattern

    def match(self, regex: str) -> list[str]:
        try:
            pattern = self.compile(regex)
        except ValueError:
            return []
        return [name for name in self.by_name if pattern.fullmatch(name) is not None]


class Cluster:
    def __init__(self, data_dir: Path, defaults: LogConfig, *, node_id: int = 1, clock=time.time, maintenance_interval_s: float = 1.0, retention_check_interval_ms: int = 300_000,
                 initial_task_delay_ms: int = 30_000) -> None:
        self.data_dir = Path(data_dir)
        self.defaults = defaults
        self.node_id = node_id
        self.clock = clock
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.on_topic_deleted: list = []  # callables of a deleted topic's id, called after its deletion
        self.cluster_id = ""
        self.leadership = Leadership()  # every partition's leader epoch: see Leadership
        self._next_pid = 0
        self._pid_limit = 0
        self.metadata = MetadataView()
        # names of topics being created off the loop (create_topic_async): taken, not yet served
        self.creating: set[str] = set()
        # AlterConfigs' other resources (broker/dynamic_config.py), kept in meta.json: group id ->
        # group configs; "" (cluster-wide default) or the node id -> dynamic broker configs
        self.group_configs: dict[str, dict[str, str]] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.static_defaults = defaults  # the configuration's log defaults; ``defaults`` adds AlterConfigs' dynamic ones
        # a cluster node (broker/multinode/): ``on_saved`` is called after each write of meta.json
        # (the active node publishes its topics); ``forward_create(name, partitions)`` is set on a
        # node that does not serve the data, which has no topic of its own to create
        self.on_saved = None
        self.forward_create = None
        # a cluster node serving the data: ``preferred_election(elect)`` runs ElectLeaders' PREFERRED
        # election ("not_needed", "unavailable" or "elect"; broker/multinode/node.py)
        self.preferred_election = None
        # serialises CreateTopics / CreatePartitions, as Kafka's controller does
        self.admin_lock = asyncio.Lock()
        self.logs = LogManager(
            self.data_dir, defaults, clock=clock, maintenance_interval_s=maintenance_interval_s, retention_check_interval_ms=retention_check_interval_ms,
            initial_task_delay_ms=initial_task_delay_ms,
        )

    # ------------------------------------------------------------------ startup
    # (read at start by ``metadata_load.load_cluster(cluster)``, a layer above this module)
    def _index(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic
        self.metadata.refresh(self.topics)

    def _unindex(self, topic: Topic) -> None:
        del self.topics[topic.name]
        del self.by_id[topic.topic_id]
        self.metadata.refresh(self.topics)

    @staticmethod
    def _save_failed(exc: OSError, what: str) -> TopicError:
        """meta.json could not be written (a full disk): the change is undone and refused."""
        log.error("metadata write failed; nothing changed", action=what, error=str(exc), errno=exc.errno)
        return TopicError(ErrorCode.kafka_storage_error, f"Could not {what}: {exc}")

    def _save(self) -> None:
        """Write ``meta.json`` (``storage.atomic.write_atomically``: temp file, fsync, rename, directory
        fsync), keeping the version it replaces as ``meta.json.prev``."""
        meta = {
            "version": META_VERSION,
            "cluster_id": self.cluster_id,
            "producer_id_limit": self._pid_limit,
            "topics": {
                t.name: {"id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.overrides}
                for t in self.topics.values()
            },
        }
        if self.group_configs:
            meta["group_configs"] = self.group_configs
        if self.broker_configs:
            meta["broker_configs"] = self.broker_configs
        meta["checksum"] = meta_checksum(meta)
        data = json.dumps(meta, indent=1, sort_keys=True).encode()
        write_atomically(self.data_dir / META_FILE, data, keep_previous=True, crash_at="meta.save.renaming")
        if self.on_saved is not None:
            self.on_saved()

    # ------------------------------------------------------------------ configs (AlterConfigs)
    def set_topic_overrides(self, topic: Topic, overrides: dict[str, str], config: LogConfig, *, save: bool = True) -> None:
        """Replace a topic's overrides; its logs take the new config at once (``max.message.bytes``
        on the next append, ``segment.*`` on the next roll, retention and ``cleanup.policy`` on the
        next maintenance pass)."""
        topic.overrides = dict(overrides)
        topic.config = config
        for part in topic.partitions:
            part.log.update_config(config)
        if save:
            self._save()
        log.info("topic configs altered", topic=topic.name, configs=topic.overrides or None)

    def set_group_configs(self, group: str, configs: dict[str, str], *, save: bool = True) -> None:
        if configs:
            self.group_configs[group] = dict(configs)
        else:
            self.group_configs.pop(group, None)
        if save:
            self._save()

    def set_broker_configs(self, name: str, configs: dict[str, str], dynamic: dict[str, str], *, save: bool = True) -> None:
        """Replace the dynamic broker configs of ``name`` ("" for the cluster-wide default); the log
        defaults among them apply to every topic at once, under its own overrides."""
        if configs:
            self.broker_configs[name] = dict(configs)
        else:
            self.broker_configs.pop(name, None)
        self.defaults = self._dynamic_defaults(dynamic)
        self.logs.default_config = self.defaults
        for topic in self.topics.values():
            try:
                cfg = LogConfig.from_kafka(topic.overrides, self.defaults)
            except ValueError:
                continue
            topic.config = cfg
            for part in topic.partitions:
                part.log.update_config(cfg)
        if save:
            self._save()

    def _dynamic_defaults(self, dynamic: dict[str, str]) -> LogConfig:
        """The static log defaults under the cluster-wide dynamic ones, under this node's (Kafka's order)."""
        values: dict[str, str] = {}
        for key in ("", str(self.node_id)):
            for name, value in self.broker_configs.get(key, {}).items():
                if name in dynamic:
                    values[dynamic[name]] = value
        try:
            return LogConfig.from_kafka(values, self.static_defaults)
        except ValueError:
            return self.static_defaults

    # ------------------------------------------------------------------ topics
    def lookup(self, by_id: bool, ident) -> tuple[Topic | None, str, ErrorCode]:
        """The topic a request names by id (``by_id``; kio reads the zero id as None) or by name:
        (the topic or None, its name, "" for an unknown id, the error a missing one gets)."""
        if by_id:
            topic = self.by_id.get(ident) if ident is not None else None
            return topic, topic.name if topic else "", ErrorCode.unknown_topic_id
        return self.topics.get(ident), ident, ErrorCode.unknown_topic_or_partition

    def check_new_topic(self, name: str, num_partitions: int, configs: dict[str, str] | None = None) -> Topic:
        """Validate a topic creation; returns the topic, without partitions, or raises TopicError."""
        reason = validate_topic_name(name)
        if reason:
            raise TopicError(ErrorCode.invalid_topic_exception, reason)
        if name in self.topics or name in self.creating:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise TopicError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        configs = dict(configs or {})
        try:
            cfg = LogConfig.from_kafka(configs, self.defaults)
        except ValueError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from exc
        return Topic(name, uuid.uuid4(), configs, cfg, [])

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str] | None = None, *,
                     validate_only: bool = False) -> Topic:
        """Create a topic on the calling thread (the loop); all or nothing."""
        topic = self.check_new_topic(name, num_partitions, configs)
        if validate_only:
            return topic
        self._forwarded(name, num_partitions)
        topic.partitions = self._open_partitions(name, topic.topic_id, topic.config, 0, num_partitions)
        return self._created(topic)

    async def create_topic_async(self, name: str, num_partitions: int, configs: dict[str, str] | None = None, *,
                                 validate_only: bool = False) -> Topic:
        """``create_topic`` with the partition logs opened on a worker thread, so the loop
        keeps serving other clients. The name is taken at once (a concurrent creation
        gets TOPIC_ALREADY_EXISTS); the topic is served only once complete."""
        topic = self.check_new_topic(name, num_partitions, configs)
        if validate_only:
            return topic
        self._forwarded(name, num_partitions)
        self.creating.add(name)
        try:
            topic.partitions = await self._open_partitions_async(name, topic.topic_id, topic.config, 0, num_partitions)
        finally:
            self.creating.discard(name)
        return self._created(topic)

    def _forwarded(self, name: str, num_partitions: int) -> None:
        """On a cluster node that does not serve the data: the creation is sent to the active node,
        and the topic is not there yet (LEADER_NOT_AVAILABLE, as Kafka answers a topic being created)."""
        if self.forward_create is not None:
            self.forward_create(name, num_partitions)
            raise TopicError(ErrorCode.leader_not_available, f"Topic '{name}' is being created.")

    def _created(self, topic: Topic) -> Topic:
        self._index(topic)
        crash_point("topic.create.saving")
        try:
            self._save()
        except OSError as exc:  # a full disk: the topic was never there
            self._unindex(topic)
            self._discard_partitions(topic.name, topic.partitions)
            raise self._save_failed(exc, f"create topic '{topic.name}'") from exc
        crash_point("topic.create.saved")
        log.info("topic created", topic=topic.name, partitions=len(topic.partitions), configs=topic.overrides or None)
        return topic

    def _open_partitions(self, name: str, topic_id: uuid.UUID, cfg: LogConfig, start: int, stop: int) -> list[Partition]:
        """Open the new logs of partitions [start, stop) of ``name``: all of them, or none.

        Each gets its ``partition.metadata`` (the topic id). A directory already there
        belongs to no topic (a topic deleted, or created, when the broker stopped): it is
        set aside first, never reused (``LogManager.set_aside``).
        A failure (too many open files, a full disk) closes and removes every log
        opened here, and the directory of the one that failed, then raises TopicError.
        """
        opened: list[Partition] = []
        failed: int | None = start
        try:
            for failed in range(start, stop):
                if self.logs.get(name, failed) is None and self.logs.path_of(name, failed).exists():
                    self._set_aside(name, failed, "a directory of the new partition was already there")
                opened.append(Partition(name, failed, self.logs.create(name, failed, cfg), self.leadership))
                crash_point("partition.dir.created")
            failed = None  # all open: what fails now is a partition.metadata file
            self.logs.write_topic_ids(name, list(range(start, stop)), topic_id)
        except OSError as exc:
            self._discard_partitions(name, opened, failed=failed)
            which = f"partition {failed}" if failed is not None else f"partitions {start}-{stop - 1}"
            log.error("partition creation failed, nothing kept", topic=name, partition=failed, opened=len(opened), error=str(exc), errno=exc.errno)
            raise TopicError(ErrorCode.unknown_server_error, f"Could not create {which} of topic '{name}': {exc}") from exc
        except BaseException:
            self._discard_partitions(name, opened, failed=failed)
            raise
        return opened

    async def _open_partitions_async(self, name: str, topic_id: uuid.UUID, cfg: LogConfig, start: int, stop: int) -> list[Partition]:
        loop = asyncio.get_running_loop()
        opened: list[Partition] = []
        try:
            for lo in range(start, stop, _OPEN_CHUNK):
                hi = min(stop, lo + _OPEN_CHUNK)
                chunk = loop.run_in_executor(None, self._open_partitions, name, topic_id, cfg, lo, hi)
                try:
                    opened += await asyncio.shield(chunk)
                except asyncio.CancelledError:
                    # the worker goes on with its chunk: wait for it, so what it opened is undone too
                    try:
                        opened += await chunk
                    except Exception:
                        pass
                    raise
        except BaseException:
            # the chunk that failed cleaned up after itself; the earlier ones are undone here
            self._discard_partitions(name, opened)
            raise
        return opened

    def _set_aside(self, name: str, p: int, why: str, **fields) -> None:
        """``LogManager.set_aside`` with a WARNING saying what became of the directory."""
        stray = self.logs.set_aside(name, p)
        if stray is None:
            log.warning("partition directory removed: it held no record", topic=name, partition=p, reason=why, **fields)
        else:
            log.warning("partition directory set aside, not used", topic=name, partition=p, reason=why, moved_to=stray.name, **fields)

    def _discard_partitions(self, name: str, parts: list[Partition], failed: int | None = None) -> None:
        for part in parts:
            try:
                self.logs.delete(name, part.index)
            except Exception:
                log.exception("could not remove the log of a partition being discarded", topic=name, partition=part.index)
        if failed is not None:
            try:
                self.logs.delete(name, failed)
            except Exception:
                log.exception("could not remove the log of a partition being discarded", topic=name, partition=failed)

    def delete_topic(self, topic: Topic) -> None:
        """Delete ``topic``; raises TopicError (nothing deleted) if meta.json cannot be written."""
        self._unindex(topic)
        crash_point("topic.delete.saving")
        try:
            self._save()
        except OSError as exc:
            self._index(topic)
            raise self._save_failed(exc, f"delete topic '{topic.name}'") from exc
        crash_point("topic.delete.saved")
        for listener in self.on_topic_deleted:  # the share coordinator drops the topic's share state
            try:
                listener(topic.topic_id)
            except Exception:  # noqa: BLE001 - the topic is gone either way
                log.exception("topic deletion listener failed", topic=topic.name)
        for i, part in enumerate(topic.partitions):
            if i:
                crash_point("topic.delete.mid")
            part.notify()
            self.logs.delete(topic.name, part.index)
        log.info("topic deleted", topic=topic.name)

    def check_add_partitions(self, topic: Topic, count: int) -> int:
        """Validate growing ``topic`` to ``count`` partitions; returns how many are added."""
        current = len(topic.partitions)
        if count <= current:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, which is higher than or equal to the requested {count}.",
            )
        return count - current

    def add_partitions(self, topic: Topic, count: int, *, validate_only: bool = False) -> None:
        current = len(topic.partitions)
        self.check_add_partitions(topic, count)
        if validate_only:
            return
        topic.partitions += self._open_partitions(topic.name, topic.topic_id, topic.config, current, count)
        self._grown(topic, current, count)

    async def add_partitions_async(self, topic: Topic, count: int, *, validate_only: bool = False) -> None:
        """``add_partitions`` with the logs opened on a worker thread; all or nothing.

        Call it holding ``admin_lock`` (nothing else grows a topic meanwhile). Should
        the topic be deleted meanwhile, the new logs are removed again."""
        current = len(topic.partitions)
        self.check_add_partitions(topic, count)
        if validate_only:
            return
        added = await self._open_partitions_async(topic.name, topic.topic_id, topic.config, current, count)
        if self.topics.get(topic.name) is not topic or len(topic.partitions) != current:
            self._discard_partitions(topic.name, added)
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"The topic '{topic.name}' was deleted while partitions were added.")
        topic.partitions += added
        self._grown(topic, current, count)

    def _grown(self, topic: Topic, current: int, count: int) -> None:
        self.metadata.refresh(self.topics)
        crash_point("partitions.add.saving")
        try:
            self._save()
        except OSError as exc:
            added = topic.partitions[current:]
            del topic.partitions[current:]
            self.metadata.refresh(self.topics)
            self._discard_partitions(topic.name, added)
            raise self._save_failed(exc, f"add partitions to '{topic.name}'") from exc
        crash_point("partitions.add.saved")
        log.info("partitions added", topic=topic.name, partitions=count)

    def partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    # ------------------------------------------------------------------ producer ids
    def allocate_producer_id(self) -> int:
        if self._next_pid >= self._pid_limit:
            self._pid_limit = self._next_pid + PRODUCER_ID_BLOCK
            self._save()
        pid = self._next_pid
        self._next_pid += 1
        return pid

    def reserve_producer_ids(self, highest: int) -> None:
        """Never hand out ``highest`` or an id below it (ids found in ``__transaction_state``)."""
        if highest >= self._next_pid:
            self._next_pid = highest + 1
            if self._next_pid >= self._pid_limit:
                self._pid_limit = self._next_pid + PRODUCER_ID_BLOCK
                self._save()

    # ------------------------------------------------------------------ fetch waits
    async def wait_for_data(self, partitions: list[Partition], timeout: float) -> bool:
        """Wait until one of ``partitions`` is appended to or deleted (True), or ``timeout`` s pass (False).

        With no partition or no time left there is nothing to wait for: it
        returns False at once, so a caller must not loop on it without checking
        that it has partitions (a loop would spin and starve every other connection).
        """
        if timeout <= 0 or not partitions:
            return False
        fut = asyncio.get_running_loop().create_future()
        for p in partitions:
            p.waiters.add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for p in partitions:
                p.waiters.discard(fut)

    # ------------------------------------------------------------------ shutdown
    def close(self) -> None:
        self.logs.stop()


def meta_checksum(meta: dict) -> str:
    """``meta.json``'s ``checksum``: CRC-32 (hex) of the rest of the document in canonical JSON,
    so that a flipped bit that still parses is refused too (metadata_load.parse_meta)."""
    import zlib

    body = {k: v for k, v in meta.items() if k != "checksum"}
    return format(zlib.crc32(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()), "08x")


def _new_cluster_id() -> str:
    """Kafka's form (url-safe base64 of a random uuid); never starting with "-", as Kafka's Uuid.randomUuid."""
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text

