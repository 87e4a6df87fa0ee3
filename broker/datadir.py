"""The data directory's lock: one broker per directory, as Kafka's ``.lock`` file.

``lock(data_dir)`` is the first thing a start does to the directory: it creates the
directory if need be, opens ``<data_dir>/.lock`` and takes an exclusive ``flock`` on it,
then writes this process's id into it. A second broker on the same directory (another
process, or another in-process broker in this one) finds the lock taken and stops with
``DataDirError`` having created, truncated and rewritten nothing: opening an existing
``.lock`` changes neither it nor the directory. The lock lasts as long as the open file:
``DataDirLock.release()`` on a clean stop, or the kernel when the process dies, so a
crashed broker never leaves a stale lock behind. The file itself stays, as Kafka's does.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"
CLUSTER_LOCK_FILE = ".controller.lock"  # held by a cluster's controller (broker/multinode/controller.py)


class DataDirError(RuntimeError):
    """The broker cannot use its data directory. ``fields`` are the log line's fields."""

    def __init__(self, message: str, **fields) -> None:
        super().__init__(message)
        self.fields = fields


class DataDirLock:
    """The held lock; ``release()`` is idempotent."""

    def __init__(self, data_dir: Path, fd: int, cluster_fd: int | None = None) -> None:
        self.data_dir = data_dir
        self._fd: int | None = fd
        self._cluster_fd = cluster_fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        cluster_fd, self._cluster_fd = self._cluster_fd, None
        for held in (fd, cluster_fd):
            if held is not None:
                os.close(held)  # closing the only descriptor of the open file drops the flock


def lock(data_dir: Path, *, alone: bool = False) -> DataDirLock:
    """Create ``data_dir`` if missing and lock it, or raise DataDirError.

    ``alone``: a single broker (not a node of a cluster) also holds a shared lock on
    ``.controller.lock`` for as long as it runs, so a cluster (``serve --nodes``, whose
    controller holds that file exclusively) and a single broker never share a directory, not
    even in the moment between one active node's death and the next one's lock."""
    path = Path(data_dir)
    if path.exists() and not path.is_dir():
        raise DataDirError("data directory is not a directory", data_dir=str(path))
    fd = _open(path, LOCK_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        fields = {"data_dir": str(path.resolve())}
        if holder is not None:
            fields["pid"] = holder
        raise DataDirError("data directory in use by another broker", **fields) from None
    except OSError as exc:  # ENOLCK: a file system without locks
        os.close(fd)
        raise DataDirError("cannot lock data directory", data_dir=str(path), error=exc.strerror or str(exc)) from None
    cluster_fd = _outside_any_cluster(path, fd) if alone else None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        DataDirLock(path, fd, cluster_fd).release()
        raise DataDirError("cannot write to data directory", data_dir=str(path), error=exc.strerror or str(exc)) from None
    return DataDirLock(path, fd, cluster_fd)


def _outside_any_cluster(path: Path, fd: int) -> int:
    """The shared lock on ``.controller.lock`` (held: no cluster runs on ``path``), or raise
    DataDirError having closed ``fd`` (the directory lock just taken)."""
    try:
        return cluster_lock(path, exclusive=False)
    except DataDirError:
        os.close(fd)
        raise


def cluster_lock(path: Path, *, exclusive: bool) -> int:
    """The descriptor holding ``<path>/.controller.lock``: exclusively (a cluster's controller,
    for as long as it runs) or shared (a single broker), or raise DataDirError."""
    path = Path(path)
    fd = _open(path, CLUSTER_LOCK_FILE)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if isinstance(exc, BlockingIOError):
            message = "data directory in use by another cluster or broker" if exclusive else "data directory in use by a cluster (serve --nodes)"
            raise DataDirError(message, data_dir=str(path.resolve())) from None
        raise DataDirError("cannot lock data directory", data_dir=str(path), error=exc.strerror or str(exc)) from None
    return fd


def _open(path: Path, name: str) -> int:
    """``<path>/<name>`` opened for a lock (the directory created if need be), or DataDirError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        return os.open(path / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise DataDirError("cannot open data directory", data_dir=str(path), error=f"{exc.strerror or exc}: {exc.filename or path}") from None


def _holder(fd: int) -> int | None:
    """The pid the holder wrote, or None (not written yet, or not a number)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
