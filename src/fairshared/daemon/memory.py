"""Give the C allocator's free memory back to the system after each cycle.

A cycle at 50,000 pending jobs (push mode priority) allocates some 90 MB it frees at its end
(tracemalloc at its peak: the jobs' priorities, the planned actions, the push state and its
JSON, the metrics' formatting).  glibc keeps what is freed in its heaps; scattered between
blocks still in use, it is never at the top of a heap, where glibc would trim it by itself, so
the daemon's RSS climbed from cycle to cycle by some 30 MB before it levelled off, with no
more objects alive (``benchmarks/http_load.py`` read it as growth).  ``malloc_trim(0)``
returns every whole free page of every heap (about 10 ms here): RSS then starts each cycle
where the last one started.  ``MALLOC_ARENA_MAX=2`` did not change the climb (the memory is in
the main heap, not in per-thread arenas).  Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "release_free_memory"]


def _malloc_trim():
    try:
        fn = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


_MALLOC_TRIM = _malloc_trim()


def release_free_memory() -> bool | None:
    """Return the C heaps' free pages to the system: True if some were, None where the C library
    cannot (not glibc).  ctypes lets go of the GIL meanwhile: the HTTP threads go on."""
    if _MALLOC_TRIM is None:
        return None
    return bool(_MALLOC_TRIM(0))


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (a cycle), back on after it.

    A cycle at 50,000 jobs keeps millions of tuples, dicts and records alive until its end; each
    time they grew by a quarter the collector walked every one of them (a full collection, every
    thread of the process held meanwhile): 5 to 10 full collections a cycle, 100 to 440 ms each,
    that found nothing to collect -- ~1.5 s of a 3.5 s cycle, and a ``/-/healthy`` arriving then
    waited for them.  What a cycle frees goes by reference counting; reference cycles made
    meanwhile (by any thread) are collected once the block ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
