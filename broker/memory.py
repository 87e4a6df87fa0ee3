"""The process's heap, through glibc: tuned once at start, trimmed after bursts.

``tune`` runs when the broker starts. It looks ``malloc_trim`` up then
(importing ctypes in the middle of a burst would leave its objects scattered
over the memory the burst used, and keep it from being returned), and it
sets two of glibc's thresholds. Fetch answers read up to
max.partition.fetch.bytes at a time; left to glibc, a buffer that large is
mmapped fresh for every read and unmapped when sent, so a 16 MiB fetch paid a
page fault (and a page zeroed) per 4 KiB, about a third of the broker's CPU
per MB. With the mmap threshold at 32 MiB such buffers come from the heap and
its pages are reused; with the trim threshold at 128 MiB glibc does not hand
them back after every free. ``release`` (the idle sweep's, once a burst is
over) still hands back whatever is free.

Where there is no glibc both do nothing.

``tune_gc`` (the ``serve`` process only) makes the cyclic collector run less
often. At Python's thresholds (700, 10, 10) a 3000-member KIP-848 group
forming made 856 young and 8 full collections: 1.0 s of the broker's 2.3 s
of CPU, the full ones walking every member, partition and connection each
time. At (10000, 10, 10) the same run made 26 and 1, 0.1 s in all. The
young threshold is 50,000 because requests in flight hold tracked objects
(their coroutines, decoded bodies, slots): 64 connections with 8 commits in
flight each hold about 26,000 at the peak, and at 10,000 the collector ran
every round of them, walking live requests only (about 1.5 µs per commit,
6 % of the broker's CPU, and no garbage found). What waits longer for a
collection is only cyclic garbage, at most ``GC_THRESHOLDS[0]`` objects more
between young collections.
"""

from __future__ import annotations

import gc

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_malloc_trim = None  # glibc's malloc_trim once tune() ran, False where there is none


GC_THRESHOLDS = (50_000, 10, 10)


def tune_gc() -> None:
    """Set the cyclic collector's thresholds for a serving process (see the module doc)."""
    gc.set_threshold(*GC_THRESHOLDS)


def tune() -> None:
    """Look ``malloc_trim`` up and set glibc's mmap and trim thresholds (once)."""
    global _malloc_trim
    if _malloc_trim is not None:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        _malloc_trim = libc.malloc_trim
        _malloc_trim.argtypes = [ctypes.c_size_t]
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 128 << 20)
    except (OSError, AttributeError):
        _malloc_trim = False


def release() -> bool:
    """Hand free heap memory back to the operating system (glibc ``malloc_trim``).

    Python's small-object arenas go back by themselves once empty, but freed
    blocks in the middle of the heap, and the large read buffers the heap now
    keeps (see the module doc), stay resident until trimmed. Returns False
    where there is no glibc.
    """
    tune()
    if _malloc_trim is False:
        return False
    _malloc_trim(0)
    return True
