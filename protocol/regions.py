"""Records that are not in memory: a region of a file, sent by the connection itself.

A Fetch answer's ``records`` may be a ``Region`` instead of bytes: whole batches of
a segment file (``storage.segment.FileRegion`` is the one kind; protocol/ does not
import storage/, storage/ subclasses this). It has a length (``len()``, its bytes)
and ``read()`` (those bytes, from the file: fewer if the file was cut short
meanwhile). ``protocol/fast.py``'s Fetch encoder hands a region over as a buffer of
its own, whatever its size, and the connection sends it from the file
(``KafkaConnection._send_files``); kio's path (``codec.build``) reads it into the
frame.
"""

from __future__ import annotations

__all__ = ["Region"]


class Region:
    """The interface of records left in a file (see the module doc)."""

    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def read(self, n: int | None = None) -> bytes:
        raise NotImplementedError
