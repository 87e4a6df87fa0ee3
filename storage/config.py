"""Per-log configuration.

`LogConfig` holds the topic-level settings the storage engine enforces, using
Kafka's topic config names mapped to snake_case and Kafka 4.1 defaults.

Kafka topic configs that kafkalite accepts but does not enforce (for example
``min.insync.replicas`` or ``compression.type``) are validated and kept in
``LogConfig.extra`` so that CreateTopics / AlterConfigs accept what a real
broker accepts and DescribeConfigs can echo them back.  Names that are not
Kafka topic configs raise ``ValueError`` (the broker answers INVALID_CONFIG).

Two kafkalite-specific settings control durability:

* ``kafkalite.fsync``              -> ``fsync``  ("always" | "interval" | "never")
* ``kafkalite.fsync.interval.ms``  -> ``fsync_interval_ms``

They are accepted by ``from_kafka`` and reported by ``to_kafka`` only when
``include_extensions=True``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Callable, Mapping

__all__ = ["LogConfig", "KAFKA_TOPIC_DEFAULTS", "CLEANUP_POLICIES", "FSYNC_POLICIES"]

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647

CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
FSYNC_POLICIES = ("always", "interval", "never")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


# --------------------------------------------------------------------------- parsers
def _parse_long(lo: int | None = None, hi: int | None = None, bits: int = 64) -> Callable[[str], int]:
    lim = (1 << (bits - 1)) - 1

    def parse(s: str) -> int:
        s = s.strip()
        try:
            v = int(s, 10)
        except ValueError:
            raise ValueError(f"not an integer: {s!r}") from None
        if not -lim - 1 <= v <= lim:
            raise ValueError(f"value {v} out of range for a {bits}-bit integer")
        if lo is not None and v < lo:
            raise ValueError(f"value {v} must be at least {lo}")
        if hi is not None and v > hi:
            raise ValueError(f"value {v} must be at most {hi}")
        return v

    return parse


def _parse_int(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    return _parse_long(lo, hi, bits=32)


def _parse_ratio(s: str) -> float:
    s = s.strip()
    try:
        v = float(s)
    except ValueError:
        raise ValueError(f"not a number: {s!r}") from None
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"value {v} must be between 0 and 1")
    return v


def _parse_bool(s: str) -> bool:
    t = s.strip().lower()
    if t == "true":
        return True
    if t == "false":
        return False
    raise ValueError(f"not a boolean: {s!r}")


def _parse_choice(choices: tuple[str, ...], *, case_insensitive: bool = False) -> Callable[[str], str]:
    def parse(s: str) -> str:
        t = s.strip()
        for c in choices:
            if t == c or (case_insensitive and t.lower() == c.lower()):
                return c
        raise ValueError(f"invalid value {s!r}; valid values: {', '.join(choices)}")

    return parse


def _parse_cleanup_policy(s: str) -> str:
    parts = {p.strip().lower() for p in s.split(",") if p.strip()}
    if not parts or not parts <= {"delete", "compact"}:
        raise ValueError(f"invalid cleanup.policy {s!r}; valid values: compact, delete")
    if parts == {"delete", "compact"}:
        return "compact,delete"
    return parts.pop()


def _parse_any_string(s: str) -> str:
    return s.strip()


def _checked(parse: Callable[[str], object], check: Callable[[object], bool], msg: str) -> Callable[[str], object]:
    def p(s: str) -> object:
        v = parse(s)
        if not check(v):
            raise ValueError(msg.format(v=v))
        return v

    return p


# --------------------------------------------------------------------------- tables
# Kafka config name -> (LogConfig field, parser, formatter)
_FIELDS: dict[str, tuple[str, Callable[[str], object]]] = {
    # kafka 4.x requires >= 1 MiB for segment.bytes; kafkalite is lenient (>= 14 bytes,
    # the size of the smallest legacy record) so that tests can use tiny segments.
    "segment.bytes": ("segment_bytes", _parse_int(14)),
    "segment.ms": ("segment_ms", _parse_long(1)),
    "retention.bytes": ("retention_bytes", _parse_long()),
    "retention.ms": ("retention_ms", _parse_long(-1)),
    "cleanup.policy": ("cleanup_policy", _parse_cleanup_policy),
    "delete.retention.ms": ("delete_retention_ms", _parse_long(0)),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _parse_long(0)),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _parse_ratio),
    "segment.index.bytes": ("segment_index_bytes", _parse_int(4)),
    "index.interval.bytes": ("index_interval_bytes", _parse_int(0)),
    "file.delete.delay.ms": ("file_delete_delay_ms", _parse_long(0)),
    "max.message.bytes": ("max_message_bytes", _parse_int(0)),
    "message.timestamp.type": ("message_timestamp_type", _parse_choice(TIMESTAMP_TYPES)),
}

_EXTENSIONS: dict[str, tuple[str, Callable[[str], object]]] = {
    "kafkalite.fsync": ("fsync", _parse_choice(FSYNC_POLICIES, case_insensitive=True)),
    "kafkalite.fsync.interval.ms": ("fsync_interval_ms", _parse_long(1)),
}

# Kafka topic configs accepted (validated) but not enforced by the storage engine.
# name -> (default as reported by DescribeConfigs, parser)
_PASSTHROUGH: dict[str, tuple[str, Callable[[str], object]]] = {
    "compression.type": ("producer", _parse_choice(COMPRESSION_TYPES, case_insensitive=True)),
    "compression.gzip.level": (
        "-1",
        _checked(_parse_int(), lambda v: v == -1 or 1 <= v <= 9, "gzip level {v} must be -1 or in [1, 9]"),
    ),
    "compression.lz4.level": ("9", _parse_int(1, 17)),
    "compression.zstd.level": ("3", _parse_int(-131072, 22)),
    "flush.messages": (str(LONG_MAX), _parse_long(1)),
    "flush.ms": (str(LONG_MAX), _parse_long(0)),
    "follower.replication.throttled.replicas": ("", _parse_any_string),
    "leader.replication.throttled.replicas": ("", _parse_any_string),
    "local.retention.bytes": ("-2", _parse_long(-2)),
    "local.retention.ms": ("-2", _parse_long(-2)),
    "max.compaction.lag.ms": (str(LONG_MAX), _parse_long(1)),
    "message.timestamp.after.max.ms": ("3600000", _parse_long(0)),
    "message.timestamp.before.max.ms": (str(LONG_MAX), _parse_long(0)),
    "min.insync.replicas": ("1", _parse_int(1)),
    "preallocate": ("false", _parse_bool),
    "remote.storage.enable": ("false", _parse_bool),
    "remote.log.copy.disable": ("false", _parse_bool),
    "remote.log.delete.on.disable": ("false", _parse_bool),
    "segment.jitter.ms": ("0", _parse_long(0)),
    "unclean.leader.election.enable": ("false", _parse_bool),
}


def _fmt(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _canonical_passthrough(name: str, v: object, raw: str) -> str:
    if isinstance(v, bool):
        return _fmt(v)
    if isinstance(v, (int, float)):
        return str(v)
    if name == "compression.type":
        return str(v)
    return raw.strip()


@dataclass(slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_bytes: int = -1
    retention_ms: int = 604800000
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    file_delete_delay_ms: int = 60000
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    fsync: str = "interval"
    fsync_interval_ms: int = 1000
    # validated, unenforced Kafka topic configs that were explicitly set
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    # -------------------------------------------------------------- derived
    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    # -------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raise ValueError if a field holds an invalid value."""
        for name, (attr, parse) in (_FIELDS | _EXTENSIONS).items():
            v = getattr(self, attr)
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise ValueError(f"{name}: invalid value {v!r}")
            try:
                parsed = parse(str(v))
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None
            if attr == "cleanup_policy":
                self.cleanup_policy = parsed  # normalise e.g. "delete,compact"
        for k, v in self.extra.items():
            if k not in _PASSTHROUGH:
                raise ValueError(f"unknown topic config {k!r}")
            try:
                _PASSTHROUGH[k][1](v)
            except ValueError as e:
                raise ValueError(f"{k}: {e}") from None

    # -------------------------------------------------------------- kafka names
    @classmethod
    def from_kafka(cls, configs: Mapping[str, str | None], base: LogConfig | None = None) -> LogConfig:
        """Return ``base`` (default: Kafka defaults) overridden by Kafka-named ``configs``.

        A ``None`` value resets the entry to ``base``'s value (IncrementalAlterConfigs
        DELETE semantics).  Raises ValueError naming the offending key for unknown
        names or invalid values.
        """
        if base is None:
            base = cls()
        changes: dict[str, object] = {}
        extra = dict(base.extra)
        for name, raw in configs.items():
            if name in _FIELDS or name in _EXTENSIONS:
                attr, parse = _FIELDS.get(name) or _EXTENSIONS[name]
                if raw is None:
                    changes.pop(attr, None)
                    continue
                if not isinstance(raw, str):
                    raise ValueError(f"{name}: value must be a string")
                try:
                    changes[attr] = parse(raw)
                except ValueError as e:
                    raise ValueError(f"{name}: {e}") from None
            elif name in _PASSTHROUGH:
                if raw is None:
                    extra.pop(name, None)
                    continue
                if not isinstance(raw, str):
                    raise ValueError(f"{name}: value must be a string")
                try:
                    v = _PASSTHROUGH[name][1](raw)
                except ValueError as e:
                    raise ValueError(f"{name}: {e}") from None
                extra[name] = _canonical_passthrough(name, v, raw)
            else:
                raise ValueError(f"unknown topic config {name!r}")
        return dataclasses.replace(base, extra=extra, **changes)

    def to_kafka(self, *, include_extensions: bool = False) -> dict[str, str]:
        """All topic configs under their Kafka names, as strings (for DescribeConfigs)."""
        out: dict[str, str] = {}
        for name, (attr, _) in _FIELDS.items():
            out[name] = _fmt(getattr(self, attr))
        for name, (default, _) in _PASSTHROUGH.items():
            out[name] = self.extra.get(name, default)
        if include_extensions:
            for name, (attr, _) in _EXTENSIONS.items():
                out[name] = _fmt(getattr(self, attr))
        return dict(sorted(out.items()))

    @staticmethod
    def is_known(name: str) -> bool:
        return name in _FIELDS or name in _PASSTHROUGH or name in _EXTENSIONS


KAFKA_TOPIC_DEFAULTS: dict[str, str] = LogConfig().to_kafka()
