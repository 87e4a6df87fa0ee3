"""``partition.metadata``: the topic id a partition directory belongs to, in Kafka's format.

Kafka's ``PartitionMetadataFile`` holds two lines::

    version: 0
    topic_id: <the topic id: url-safe base64 of its 16 bytes, no padding>

and nothing else; the topic name and the partition number are the directory's
name (``<topic>-<partition>``). kafkalite writes the same file, the same way,
so a partition directory says which topic it belongs to even when the cluster
metadata (``meta.json``) is lost: the broker rebuilds its topics from them
(``broker/cluster.py``), and it never reuses a directory for a topic whose id
is not the one written here.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from .atomic import write_atomically

__all__ = ["PARTITION_METADATA", "decode", "encode", "read_topic_id", "write_topic_id"]

PARTITION_METADATA = "partition.metadata"
VERSION = 0
_MAX_BYTES = 4096  # the file is about 45 bytes; anything far larger is not one


def encode(topic_id: uuid.UUID) -> bytes:
    text = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")
    return f"version: {VERSION}\ntopic_id: {text}\n".encode("ascii")


def decode(data: bytes) -> uuid.UUID:
    """The topic id of a ``partition.metadata`` file's bytes; raises ValueError if they are not one."""
    if len(data) > _MAX_BYTES:
        raise ValueError(f"{len(data)} bytes, not a partition.metadata file")
    lines = data.decode("ascii").splitlines()
    if len(lines) < 2:
        raise ValueError("fewer than two lines")
    key, _, version = lines[0].partition(":")
    if key.strip() != "version" or version.strip() != str(VERSION):
        raise ValueError(f"unknown version line {lines[0][:40]!r}")
    key, _, text = lines[1].partition(":")
    text = text.strip()
    if key.strip() != "topic_id" or len(text) != 22:
        raise ValueError(f"unknown topic id line {lines[1][:60]!r}")
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError("topic id is not 16 bytes")
    topic_id = uuid.UUID(bytes=raw)
    if topic_id.int == 0:
        raise ValueError("topic id is the zero uuid")
    return topic_id


def read_topic_id(partition_dir: Path) -> tuple[uuid.UUID | None, str | None]:
    """(topic id, None), or (None, why not): ``"missing"`` when there is no file."""
    path = Path(partition_dir) / PARTITION_METADATA
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    try:
        return decode(data), None
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"unreadable ({exc})"


def write_topic_id(partition_dir: Path, topic_id: uuid.UUID, *, fsync: bool = True) -> None:
    """Write (or replace) the directory's ``partition.metadata``: temp file, fsync, rename, directory fsync."""
    write_atomically(Path(partition_dir) / PARTITION_METADATA, encode(topic_id), fsync=fsync)
