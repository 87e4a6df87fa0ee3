"""The transactions of a ``PartitionLog`` (storage/log.py): what it owns.

* The queries on them: the last stable offset, the aborted transactions a fetch
  overlaps, the open ones.
* Applying the transactional batches an append wrote (``TxnState``, txn.py): the
  first one starts the partition's transaction files; an ABORT marker appends its
  entry to the segment's ``.txnindex``; an index an append failed to extend is
  rewritten whole later (``_txn_dirty``, ``_repair_txn_indexes``).
* The ``.txnsnapshot`` files (written, pruned), the state rebuilt after a
  truncation, and the indexes of segments compaction replaced, folded into the
  segments that now cover their offsets.

``TxnLog`` is a mixin of ``PartitionLog``: it works on the log's fields (``_txn``,
``_txn_dirty``, ``_txn_prune_below``, ``_pending_snaps``, ``_epoch``, the locks),
which ``PartitionLog.__init__`` sets, under the locking rules documented there.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from typing import TYPE_CHECKING

from protocol.records import CONTROL_MASK

from .index import write_file_atomic
from .recovery import _fsync_dir, _txn_files, _unlink, load_snapshot
from .txn import TxnState, control_kind, encode_entries, encode_snapshot, replay, snapshot_name

if TYPE_CHECKING:
    from .segment import Segment

__all__ = ["TxnLog"]

log = logging.getLogger("storage.log")


class TxnLog:
    """``PartitionLog``'s transaction state, transaction indexes and snapshots (a mixin)."""

    # ------------------------------------------------------------------ queries
    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction (at least the log start
        offset), or the log end offset when none is open (Kafka's LSO; the log end
        offset is the high watermark with one replica)."""
        firsts = self._txn.firsts
        if not firsts:
            return self._leo
        first = firsts[0]
        start = self._view.log_start
        return first if first > start else start

    def aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction overlapping
        [start_offset, upper_bound_offset) (exclusive bound), in marker order."""
        return self._txn.collect(start_offset, upper_bound_offset)

    def has_aborted_after(self, offset: int) -> bool:
        """True if an aborted transaction's marker is at or after ``offset`` (cheap: lets a
        fetch skip finding the last offset it returns when nothing could overlap)."""
        return self._txn.has_aborted_from(offset)

    def in_transaction(self, producer_id: int) -> bool:
        """Whether ``producer_id`` has an open transaction in this partition."""
        return producer_id in self._txn.open

    def open_transactions(self) -> list[tuple[int, int]]:
        """(producer id, first offset) of the open transactions, by first offset."""
        return self._txn.open_txns()

    # ------------------------------------------------------------------ applying appends, files
    def _start_tracking_locked(self, offset: int) -> None:
        """The partition's first transactional batch goes at ``offset``: from now on its
        transaction files exist, starting with a snapshot at ``offset`` (nothing open before)."""
        self._txn.tracked = True
        sync = self.config.fsync != "never"
        try:
            write_file_atomic(self.path / snapshot_name(offset), encode_snapshot(offset, self._txn.open_txns()), fsync=sync)
            if sync:
                _fsync_dir(self.path)
        except OSError as exc:
            log.error("could not write a transaction snapshot in %s: %s", self.path, exc)

    def _apply_txn_locked(self, seg: Segment, txn: list) -> bool:
        """Apply the transactional batches just written to ``seg``; True if its .txnindex was created."""
        st = self._txn
        prune = self._txn_prune_below
        if prune and st.lasts and st.lasts[0] < prune:
            st.drop_aborted_below(prune)
        created = False
        for hdr, base, view in txn:
            pid = hdr.producer_id
            if pid < 0:
                continue
            if hdr.attributes & CONTROL_MASK:
                kind = control_kind(view)
                if kind is None:
                    continue
                entry = st.on_marker(pid, base, kind)
                if entry is not None and seg.base_offset not in self._txn_dirty:
                    try:
                        created = seg.append_txn_entry(encode_entries((entry,))) or created
                    except OSError as exc:
                        log.error("could not append to %s (%s); it will be rewritten", seg.txnindex_path, exc)
                        self._txn_dirty.add(seg.base_offset)
            else:
                st.on_data(pid, base)
        if created:
            self._dir_dirty = True
        return created

    def _rewrite_txn_index_locked(self, seg: Segment, entries: list) -> None:
        """Replace ``seg``'s .txnindex with ``entries`` (none: remove it)."""
        seg.close_txn_index()
        try:
            if entries:
                write_file_atomic(seg.txnindex_path, encode_entries(entries), fsync=self.config.fsync != "never")
            else:
                _unlink(seg.txnindex_path)
        except OSError as exc:
            log.error("could not rewrite %s: %s", seg.txnindex_path, exc)
            self._txn_dirty.add(seg.base_offset)
            return
        self._txn_dirty.discard(seg.base_offset)
        self._dir_dirty = True

    def _repair_txn_indexes(self) -> None:
        """Rewrite the .txnindex files an append failed to extend."""
        with self._lock:
            segs = self._view.segs
            bases = [s.base_offset for s in segs]
            for b in sorted(self._txn_dirty):
                i = bisect_right(bases, b) - 1
                if i < 0 or bases[i] != b:
                    self._txn_dirty.discard(b)
                    continue
                nxt = bases[i + 1] if i + 1 < len(bases) else None
                self._rewrite_txn_index_locked(segs[i], self._txn.entries_between(b, nxt))

    def _write_snapshot(self, offset: int, data: bytes, epoch: int, *, fsync: bool) -> None:
        if epoch != self._epoch:
            return
        path = self.path / snapshot_name(offset)
        try:
            write_file_atomic(path, data, fsync=fsync)
        except OSError as exc:
            log.warning("could not write %s: %s", path, exc)
            return
        if epoch != self._epoch:  # truncated meanwhile: the snapshot may be past the new end
            _unlink(path)

    def _prune_snapshots(self, *, below: int | None = None, above: int | None = None, keep: set[int] | None = None) -> None:
        """Remove the snapshots below ``below`` or not in ``keep`` (but never the newest: it says
        that the partition has seen transactions), and those above ``above``."""
        try:
            snaps = sorted(_txn_files(self.path)[1])
        except OSError:
            return
        newest = snaps[-1] if snaps else None
        for off in snaps:
            old = (below is not None and off < below) or (keep is not None and off not in keep)
            if (old and off != newest) or (above is not None and off > above):
                _unlink(self.path / snapshot_name(off))

    def _merge_txn_orphans(self) -> None:
        """Fold the .txnindex files of segments compaction replaced into the files of the
        segments that now cover their offsets (rewritten from memory), then remove them."""
        with self._maint_lock:
            if self._closing or self._closed:
                return
            try:
                indexes = _txn_files(self.path)[0]
            except OSError:
                return
            with self._lock:
                segs = self._view.segs
                bases = [s.base_offset for s in segs]
                epoch = self._epoch
                base_set = set(bases)
                orphans = [name for b, name in indexes.items() if b not in base_set]
                floors = {bisect_right(bases, b) - 1 for b in indexes if b not in base_set}
                writes = [
                    (segs[i], self._txn.entries_between(bases[i], bases[i + 1] if i + 1 < len(bases) else None))
                    for i in sorted(floors)
                    if 0 <= i < len(segs) - 1  # never the active segment's file: appends own it
                ]
            if not orphans:
                return
            sync = self.config.fsync != "never"
            # under the lock: a truncation meanwhile could make one of these segments the active one
            with self._lock:
                if self._epoch != epoch:
                    return  # truncated meanwhile: the next pass, or recovery, sorts it out
                for seg, entries in writes:
                    if not seg.deleted and seg is not self._view.segs[-1]:
                        self._rewrite_txn_index_locked(seg, entries)
            if sync:
                _fsync_dir(self.path)
            for name in orphans:
                _unlink(self.path / name)
            if sync:
                _fsync_dir(self.path)

    def _truncate_txn_locked(self, new_leo: int, segs: list[Segment], *, fresh: bool) -> None:
        """The transaction state after a truncation to ``new_leo``: rebuilt from the newest
        snapshot at or below it (the whole log without one), as recovery does."""
        sync = self.config.fsync != "never"
        self._pending_snaps = [p for p in self._pending_snaps if p[0] <= new_leo]
        old = self._txn
        last = segs[-1]
        if fresh:  # nothing left: nothing open, nothing aborted
            self._prune_snapshots(above=new_leo - 1)
            st = TxnState(tracked=True)
        else:
            self._prune_snapshots(above=new_leo)
            try:
                snap = load_snapshot(self.path, _txn_files(self.path)[1], segs[0].base_offset, new_leo)
            except OSError:
                snap = None
            start = snap[0] if snap is not None else segs[0].base_offset
            st = TxnState(snap[1] if snap is not None else (), tracked=True)
            for entry in old.entries_between(0, start):
                st.add_aborted(entry)
            replay(st, segs, start)
        self._txn = st
        if old.entries_between(last.base_offset) != st.entries_between(last.base_offset) or last.base_offset in self._txn_dirty:
            self._rewrite_txn_index_locked(last, st.entries_between(last.base_offset))
        self._write_snapshot(new_leo, encode_snapshot(new_leo, st.open_txns()), self._epoch, fsync=sync)
