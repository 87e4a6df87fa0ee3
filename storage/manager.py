"""LogManager: all partition logs under one data directory + the maintenance thread.

Layout::

    <data_dir>/<topic>-<partition>/        one PartitionLog per partition
    <data_dir>/<topic>-<partition>/partition.metadata   its topic id (partition_meta.py)
    <data_dir>/<topic>-<partition>.<hex>-delete/   being deleted (removed in background)
    <data_dir>/<topic>-<partition>.<hex>-stray/    set aside: holds records but belongs to no
                                                   topic of the metadata (never opened, never
                                                   removed: an operator's to inspect)

Topic names may contain '.', '_' and '-'; the partition is parsed from the last
'-'.  Per-topic configs are owned by the broker (it passes them in via
``open_all(configs=...)``, ``create`` and ``update_config``); nothing about
configs is persisted here.

Threading: ``open_all``/``get``/``create``/``delete``/``update_config`` are called
from the broker's event-loop thread.  ``start_background`` runs one daemon
thread that periodically calls ``run_maintenance_once``: flush_if_due,
retention (policy contains "delete") and compaction (policy contains
"compact" and ``needs_compaction``) for every open log.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from collections.abc import Callable, Mapping

from .atomic import fsync_dir
from .config import LogConfig
from .log import PartitionLog
from .partition_meta import read_topic_id, write_topic_id

__all__ = ["LogManager", "has_records", "parse_partition_dir", "partition_dir_name"]

log = logging.getLogger(__name__)

_DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or not part.isascii() or name.startswith(".") or len(part) > 10:
        return None
    return topic, int(part)


def has_records(path: Path) -> bool:
    """Whether a partition directory holds any record bytes (a non-empty segment file)."""
    try:
        with os.scandir(path) as entries:
            return any(e.name.endswith(".log") and e.is_file() and e.stat().st_size > 0 for e in entries)
    except OSError:
        return True  # cannot tell: treat it as holding data


class LogManager:
    def __init__(
        self,
        data_dir: Path,
        default_config: LogConfig,
        clock: Callable[[], float] = time.time,
        *,
        maintenance_interval_s: float = 1.0,
        retention_check_interval_ms: int = 300_000,
        initial_task_delay_ms: int = 30_000,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.default_config = default_config
        self._clock = clock
        self.maintenance_interval_s = maintenance_interval_s
        # log.retention.check.interval.ms: retention runs this often, as in Kafka (flushes and compaction every tick)
        self.retention_check_interval_ms = retention_check_interval_ms
        # log.initial.task.delay.ms: the first retention check comes this long after start, as in Kafka, so
        # records with old (or zero) timestamps written just after a start are not deleted at once
        self._next_retention_ms: int = int(clock() * 1000) + initial_task_delay_ms
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pending_dir_deletes: list[Path] = []

    # ------------------------------------------------------------------ logs
    def open_all(
        self,
        configs: Mapping[str, LogConfig] | Callable[[str], LogConfig | None] | None = None,
    ) -> dict[tuple[str, int], PartitionLog]:
        """Open every ``<topic>-<partition>`` directory; ``configs`` maps topic -> config
        (mapping or callable; missing -> default config)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for entry in sorted(os.listdir(self.data_dir)):
            p = self.data_dir / entry
            if not p.is_dir():
                continue
            if entry.endswith(_DELETE_SUFFIX):
                shutil.rmtree(p, ignore_errors=True)
                continue
            parsed = parse_partition_dir(entry)
            if parsed is None:
                continue
            key = parsed
            if key in self._logs:
                continue
            cfg = None
            if callable(configs):
                cfg = configs(key[0])
            elif configs is not None:
                cfg = configs.get(key[0])
            plog = PartitionLog.open(p, cfg or self.default_config, clock=self._clock)
            with self._lock:
                self._logs[key] = plog
        with self._lock:
            return dict(self._logs)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def create(self, topic: str, partition: int, config: LogConfig | None = None, *, topic_id: uuid.UUID | None = None) -> PartitionLog:
        """Open (creating the directory if needed) the log of a partition.

        Returns the already-open log if there is one (its config is updated when
        ``config`` is given). With ``topic_id``, the directory's ``partition.metadata``
        is written (not fsynced: see ``write_topic_ids``) if it does not hold that id; the caller checks first that
        the directory is not another topic's (``topic_id_of``, ``set_aside``)."""
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None and not existing.closed:
            if config is not None:
                existing.update_config(config)
            return existing
        path = self.data_dir / partition_dir_name(topic, partition)
        plog = PartitionLog.open(path, config or self.default_config, clock=self._clock)
        if topic_id is not None:
            try:
                if read_topic_id(path)[0] != topic_id:
                    write_topic_id(path, topic_id, fsync=False)
            except BaseException:
                plog.close()
                raise
        with self._lock:
            self._logs[key] = plog
        return plog

    def write_topic_ids(self, topic: str, partitions: list[int], topic_id: uuid.UUID) -> None:
        """Write the ``partition.metadata`` of new partitions, not fsynced: as Kafka, which
        flushes it outside the request's path. ``meta.json``, fsynced after, names the topic
        id too, and a start that finds the file missing or unreadable beside a readable
        ``meta.json`` writes it again (broker/metadata_load.py); a ``kill -9`` loses nothing
        that reached the page cache. Fsyncing them here cost a topic of 50 partitions 50 ms
        and more at every fresh start (``__consumer_offsets``). Raises the first error."""
        for p in partitions:
            write_topic_id(self.path_of(topic, p), topic_id, fsync=False)

    def path_of(self, topic: str, partition: int) -> Path:
        return self.data_dir / partition_dir_name(topic, partition)

    def topic_id_of(self, topic: str, partition: int) -> tuple[uuid.UUID | None, str | None]:
        """What the partition directory's ``partition.metadata`` says: (id, None) or (None, why
        not), ``"missing"`` for no file; ``(None, "no directory")`` when there is no directory."""
        path = self.path_of(topic, partition)
        if not path.is_dir():
            return None, "no directory"
        return read_topic_id(path)

    def partition_dirs(self) -> list[tuple[str, int]]:
        """(topic, partition) of every partition directory on disk (not those being deleted or set aside)."""
        found = []
        try:
            names = sorted(os.listdir(self.data_dir))
        except FileNotFoundError:
            return found
        for entry in names:
            parsed = parse_partition_dir(entry)
            if parsed is not None and (self.data_dir / entry).is_dir():
                found.append(parsed)
        return found

    def set_aside(self, topic: str, partition: int) -> Path | None:
        """Take a partition directory out of the way of a topic it does not belong to.

        One that holds no record is removed (returns None); one that does is renamed
        ``<topic>-<partition>.<hex>-stray`` (returned) and kept, never opened again:
        as Kafka keeps a stray log, it is for an operator to inspect or remove. The
        partition's log must not be open."""
        path = self.path_of(topic, partition)
        if not path.exists():
            return None
        if not has_records(path):
            doomed = path.with_name(f"{path.name}.{uuid.uuid4().hex}{_DELETE_SUFFIX}")
            os.rename(path, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
            fsync_dir(self.data_dir)
            return None
        stray = path.with_name(f"{path.name}.{uuid.uuid4().hex}{STRAY_SUFFIX}")
        os.rename(path, stray)
        fsync_dir(self.data_dir)
        return stray

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a new config to every open partition of ``topic``."""
        for (t, _p), plog in self.logs().items():
            if t == topic:
                plog.update_config(config)

    def delete(self, topic: str, partition: int) -> bool:
        """Close and remove a partition's log; the directory is renamed first (atomic)
        and removed right away (or by the maintenance thread if that fails)."""
        with self._lock:
            plog = self._logs.pop((topic, partition), None)
        path = self.data_dir / partition_dir_name(topic, partition)
        if plog is not None:
            plog._closing = True  # make a running compaction abort promptly
        if path.exists():
            doomed = path.with_name(f"{path.name}.{uuid.uuid4().hex}{_DELETE_SUFFIX}")
            try:
                os.rename(path, doomed)
            except OSError:
                doomed = path
        else:
            doomed = None
        if plog is not None:
            # PartitionLog.delete removes plog.path, which no longer exists after the rename
            plog.delete()
        if doomed is not None:
            shutil.rmtree(doomed, ignore_errors=True)
            if doomed.exists():
                self._pending_dir_deletes.append(doomed)
        return plog is not None or doomed is not None

    def delete_topic(self, topic: str) -> int:
        n = 0
        for (t, p) in list(self.logs()):
            if t == topic:
                self.delete(t, p)
                n += 1
        return n

    # ------------------------------------------------------------------ maintenance
    def run_maintenance_once(self, now_ms: int | None = None) -> None:
        """flush_if_due + retention + compaction for every open log (errors are logged)."""
        now = int(self._clock() * 1000) if now_ms is None else now_ms
        if now_ms is not None or now >= self._next_retention_ms:
            retention_due = True
            self._next_retention_ms = now + self.retention_check_interval_ms
        else:
            retention_due = False
        for key, plog in self.logs().items():
            if self._stop.is_set() and self._thread is not None and threading.current_thread() is self._thread:
                break
            if plog.closed:
                continue
            try:
                plog.flush_if_due(now)
                cfg = plog.config
                if cfg.delete and retention_due:
                    plog.enforce_retention(now)
                if cfg.compact and plog.needs_compaction(now):
                    plog.compact(now)
            except Exception:
                if not plog.closed:
                    log.exception("maintenance of %s-%d failed", key[0], key[1])
        if self._pending_dir_deletes:
            left = []
            for p in self._pending_dir_deletes:
                shutil.rmtree(p, ignore_errors=True)
                if p.exists():
                    left.append(p)
            self._pending_dir_deletes = left

    def start_background(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kafkalite-log-maintenance", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.maintenance_interval_s):
            try:
                self.run_maintenance_once()
            except Exception:  # pragma: no cover - defensive
                log.exception("log maintenance iteration failed")

    def stop(self) -> None:
        """Stop the maintenance thread and close every log cleanly (fsync)."""
        self._stop.set()
        for plog in self.logs().values():
            plog._closing = True  # abort a running compaction quickly
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            logs = list(self._logs.values())
            self._logs.clear()
        for plog in logs:
            try:
                plog.close()
            except Exception:
                log.exception("closing %s failed", plog.path)
