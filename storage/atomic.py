"""Small files replaced whole: the one writer for the broker's metadata files.

``write_atomically(path, data)`` writes ``<path>.tmp``, fsyncs it, renames it
over ``path`` and fsyncs the directory, so after a crash ``path`` is the old
file or the new one, whole, never a torn mix. With ``keep_previous`` the file
it replaces is first renamed to ``<path>.prev`` (in the same directory fsync),
so that a file damaged later (a bad disk block, a truncation by hand, a
deletion) still leaves the version before it: ``read_with_fallback`` reads
``path`` and, if it is missing or its parser refuses it, ``<path>.prev``.

Every metadata write of the broker goes through ``write_atomically``: a hook on
metadata writes (a crash point, a counter) belongs there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from .crashpoints import crash_point

__all__ = ["FileRead", "fsync_dir", "previous_path", "read_with_fallback", "write_atomically"]

T = TypeVar("T")

PREVIOUS_SUFFIX = ".prev"
TEMP_SUFFIX = ".tmp"


def previous_path(path: Path) -> Path:
    """Where ``write_atomically(path, ..., keep_previous=True)`` keeps the version it replaced."""
    return path.with_name(path.name + PREVIOUS_SUFFIX)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, keep_previous: bool = False, fsync: bool = True, mode: int = 0o644,
                     crash_at: str | None = None) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync of the directory.

    With ``keep_previous`` the current file (if any) becomes ``<path>.prev`` just
    before the rename. ``fsync=False`` skips both fsyncs (the rename still makes
    the replacement whole for a crash of the process, not of the machine).
    Raises ``OSError``; the temp file is removed on failure. ``crash_at`` names the crash
    point (storage/crashpoints.py) between the fsynced temp file and the renames.
    """
    path = Path(path)
    tmp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if crash_at is not None:
            crash_point(crash_at)
        if keep_previous:
            try:
                os.replace(path, previous_path(path))
            except FileNotFoundError:
                pass  # nothing to keep: the previous version (if any) stays as it is
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if fsync:
        fsync_dir(path.parent)


@dataclass
class FileRead(Generic[T]):
    """What ``read_with_fallback`` found: the value and the file it came from (None: neither
    file was readable), and why each file it passed over was refused (path, reason)."""

    value: T | None = None
    source: Path | None = None
    refused: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def fell_back(self) -> bool:
        return self.source is not None and self.source.name.endswith(PREVIOUS_SUFFIX)

    @property
    def missing(self) -> bool:
        """Neither file exists (as opposed to: one exists and cannot be read)."""
        return self.source is None and all(reason == "missing" for _, reason in self.refused)


def read_with_fallback(path: Path, parse: Callable[[bytes], T]) -> FileRead[T]:
    """Read ``path`` with ``parse`` (which raises ``ValueError`` for what it refuses), and if it
    is missing, cannot be read (an I/O error) or is refused, ``<path>.prev`` likewise.
    ``PermissionError`` is raised, not passed over."""
    path = Path(path)
    out: FileRead[T] = FileRead()
    for candidate in (path, previous_path(path)):
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            out.refused.append((candidate, "missing"))
            continue
        except PermissionError:
            raise  # not damage: the file is there and may be fine; passing over it would lose it
        except OSError as exc:
            out.refused.append((candidate, f"cannot be read ({exc.strerror or exc})"))
            continue
        try:
            out.value = parse(data)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            out.refused.append((candidate, f"unreadable ({type(exc).__name__}: {exc})" if str(exc) else f"unreadable ({type(exc).__name__})"))
            continue
        out.source = candidate
        return out
    return out
