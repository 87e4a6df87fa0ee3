"""The durability of a ``PartitionLog`` (storage/log.py): what it owns.

* ``flush`` and the background ``flush_if_due``: fsync the active segment (per the
  ``fsync`` policy), and ``_process_pending_locked``: fsync the rolled segments,
  write their index files, sync the directory, then the transaction snapshots
  taken at the rolls (after the indexes they rely on are durable).
* ``close`` (a clean shutdown: everything durable, then the ``clean-shutdown``
  marker) and ``delete`` (the partition's directory removed).

``DurableLog`` is a mixin of ``PartitionLog``: it works on the log's fields
(``_pending_seal``, ``_pending_snaps``, ``_dir_dirty``, ``_last_flush_ms``, the
locks), which ``PartitionLog.__init__`` sets, under the locking rules documented there.
"""

from __future__ import annotations

import shutil

from .index import write_file_atomic
from .recovery import CLEAN_SHUTDOWN_FILE, _fsync_dir, _unlink
from .txn import encode_snapshot

__all__ = ["DurableLog"]


class DurableLog:
    """``PartitionLog``'s fsyncs, index persistence, clean shutdown and deletion (a mixin)."""

    def flush(self) -> None:
        """fsync everything written so far and persist indexes of rolled segments."""
        with self._flush_lock:
            self._process_pending_locked()
            seg = self._view.segs[-1]
            size = seg.size
            seg.fh.fsync()
            seg.flushed_size = max(seg.flushed_size, size)
            seg.sync_txn_index()
            self._last_flush_ms = self._now_ms()

    def flush_if_due(self, now_ms: int | None = None) -> None:
        """Background hook: persist rolled segments; fsync the active one per policy."""
        if self._closed:
            return
        now = self._now_ms() if now_ms is None else now_ms
        with self._flush_lock:
            if self._closed:
                return
            self._process_pending_locked()
            if self.config.fsync != "interval":
                return
            if now - self._last_flush_ms < self.config.fsync_interval_ms:
                return
            seg = self._view.segs[-1]
            size = seg.size
            if size > seg.flushed_size:
                seg.fh.fsync()
                seg.flushed_size = size
            seg.sync_txn_index()
            self._last_flush_ms = now

    def _process_pending_locked(self) -> None:
        """(flush lock held) fsync rolled segments and write their index files."""
        with self._lock:
            pending, self._pending_seal = self._pending_seal, []
            snaps, self._pending_snaps = self._pending_snaps, []
            if not pending and self._pristine():
                # a new, empty log: losing its empty segment file in a crash loses nothing (recovery
                # makes another), so its directory is synced once it holds data, not before; this
                # spares one fsync per partition when thousands are created at once
                dir_dirty = False
            else:
                dir_dirty, self._dir_dirty = self._dir_dirty, False
        sync = self.config.fsync != "never"
        done = 0
        try:
            for seg in pending:
                if not seg.deleted:
                    seg.fh.fsync()
                    seg.flushed_size = seg.size
                    seg.sync_txn_index()
                    seg.save_indexes(fsync=sync)
                    if seg.deleted:  # deleted concurrently while we wrote the index files
                        _unlink(seg.index_path)
                        _unlink(seg.timeindex_path)
                done += 1
            if (pending or dir_dirty) and sync:
                _fsync_dir(self.path)
        except OSError:
            # a full disk (the index files): the segments not done yet, and the snapshots waiting for
            # them, stay pending for the next flush rather than never being fsynced or indexed
            with self._lock:
                rolled = {id(s) for s in self._view.segs[:-1]}  # not truncated away or made active meanwhile
                self._pending_seal[:0] = [s for s in pending[done:] if not s.deleted and id(s) in rolled]
                self._pending_snaps[:0] = snaps
                self._dir_dirty = self._dir_dirty or dir_dirty or bool(pending)
            raise
        if any(seg.txn_fh is not None for seg in pending):
            # rolled: no more appends to their indexes. Closed under the lock appends hold, and
            # only if still not active (a truncation can make a rolled segment active again)
            with self._lock:
                active = self._view.segs[-1]
                for seg in pending:
                    if seg is not active:
                        seg.close_txn_index()
        if self._txn_dirty:
            self._repair_txn_indexes()
        # the rolled segments' transaction indexes are durable: now the snapshots taken at the rolls
        # (not while an index misses entries: recovery would trust it)
        if snaps and not self._txn_dirty:
            for off, data, epoch in snaps:
                self._write_snapshot(off, data, epoch, fsync=sync)

    def close(self) -> None:
        """Clean shutdown: fsync, persist all indexes, close file descriptors."""
        if self._closed:
            return
        self._closing = True
        with self._maint_lock, self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
            if self._pristine():
                # never written (or truncated back to nothing): there is nothing to make durable, and
                # opening it again is as quick without the clean-shutdown marker (an empty file to scan).
                # Skipping the fsyncs keeps closing thousands of idle partitions quick.
                self._view.segs[0].fh.close()
                return
            self._process_pending_locked()
            active = self._view.segs[-1]
            active.fh.fsync()
            active.flushed_size = active.size
            active.save_indexes(fsync=True)
            active.sync_txn_index()
            _fsync_dir(self.path)
            if self._txn.tracked and not self._txn_dirty:  # the open transactions at the log end
                self._write_snapshot(self._leo, encode_snapshot(self._leo, self._txn.open_txns()), self._epoch, fsync=True)
            for seg in self._view.segs:
                seg.fh.close()
                seg.close_txn_index()
            write_file_atomic(self.path / CLEAN_SHUTDOWN_FILE, b"", fsync=True)
            _fsync_dir(self.path)

    def delete(self) -> None:
        """Close without flushing and remove the whole partition directory."""
        self._closing = True
        with self._maint_lock, self._flush_lock:
            with self._lock:
                self._closed = True
                segs = self._view.segs
            for seg in segs:
                seg.deleted = True
                seg.fh.close()
                seg.close_txn_index()
            shutil.rmtree(self.path, ignore_errors=True)

    def process_pending(self) -> None:
        """fsync the rolled segments and write their index files now (under the flush lock)."""
        with self._flush_lock:
            self._process_pending_locked()
