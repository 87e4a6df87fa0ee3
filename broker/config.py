"""Broker configuration: defaults, ``KAFKALITE_*`` environment variables, CLI flags."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from storage.config import LogConfig


def _env_name(name: str) -> str:
    return "KAFKALITE_" + name.upper()


@dataclass
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    data_dir: Path = Path("./data")
    advertised_host: str | None = None
    advertised_port: int | None = None
    log_format: str = "console"  # json | console
    log_level: str = "info"
    fsync: str = "interval"  # always | interval | never
    fsync_interval_ms: int = 1000
    node_id: int = 1
    auto_create_topics: bool = True
    num_partitions: int = 1
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    maintenance_interval_ms: int = 1000
    # group coordinator (Kafka names: the same with dots)
    offsets_topic_num_partitions: int = 50
    group_initial_rebalance_delay_ms: int = 0
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    group_coordinator_append_linger_ms: int = 5
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_migration_policy: str = "bidirectional"
    log_defaults: LogConfig = field(default_factory=LogConfig)

    # ----------------------------------------------------------------
    @property
    def advertised(self) -> tuple[str, int]:
        """Host and port put in Metadata; resolved after bind for ``--port 0``."""
        host = self.advertised_host or self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return host, self.advertised_port or self.port

    def group_config(self):
        from .coordinator.common import GroupConfig

        return GroupConfig(
            offsets_topic_num_partitions=self.offsets_topic_num_partitions,
            offsets_retention_ms=self.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms=self.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes=self.offset_metadata_max_bytes,
            group_min_session_timeout_ms=self.group_min_session_timeout_ms,
            group_max_session_timeout_ms=self.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            group_max_size=self.group_max_size,
            append_linger_ms=self.group_coordinator_append_linger_ms,
            group_consumer_session_timeout_ms=self.group_consumer_session_timeout_ms,
            group_consumer_heartbeat_interval_ms=self.group_consumer_heartbeat_interval_ms,
            group_consumer_max_size=self.group_consumer_max_size,
            group_consumer_migration_policy=self.group_consumer_migration_policy.lower(),
        )

    def effective_log_defaults(self) -> LogConfig:
        cfg = LogConfig(**{f.name: getattr(self.log_defaults, f.name) for f in fields(LogConfig)})
        cfg.fsync = self.fsync
        cfg.fsync_interval_ms = self.fsync_interval_ms
        return cfg

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> BrokerConfig:
        """Defaults overridden by any ``KAFKALITE_<FIELD>`` variable."""
        environ = os.environ if environ is None else environ
        cfg = cls()
        for f in fields(cls):
            if f.name == "log_defaults":
                continue
            raw = environ.get(_env_name(f.name))
            if raw is None or raw == "":
                continue
            setattr(cfg, f.name, _parse(f.name, raw, getattr(cfg, f.name)))
        return cfg


def _parse(name: str, raw: str, current):
    if name == "data_dir":
        return Path(raw)
    if name in ("advertised_port",):
        return int(raw)
    if isinstance(current, bool):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{_env_name(name)}: expected a boolean, got {raw!r}")
    if isinstance(current, int):
        return int(raw)
    return raw
