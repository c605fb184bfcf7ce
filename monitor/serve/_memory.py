"""Process tuning of the long-running service: garbage collection, glibc's malloc and pymalloc's arenas.

`tune_process()` is called once `toolwatch serve` has started (its start-up objects exist); the environment variable
TOOLWATCH_GC_TUNING=0 leaves the interpreter's defaults.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
from types import ModuleType

TUNING_ENV = "TOOLWATCH_GC_TUNING"
# Freed pymalloc arenas kept for reuse at most (see _carena.c): the bound on memory the service keeps resident
# after a burst, beyond what it uses. 256 MiB took the page faults of bench_serve's bursts of 800 requests of 512
# spans from ~80,000 a burst (~0.4-0.9 s of system CPU for ~2.6 s of user CPU) to a few thousand.
ARENA_CACHE_BYTES = 256 << 20


def tuning_enabled() -> bool:
    return os.environ.get(TUNING_ENV, "1") != "0"


def tune_process() -> bool:
    """Tune this process for serving, unless TOOLWATCH_GC_TUNING=0; returns whether it did."""
    if not tuning_enabled():
        return False
    # Keep the start-up objects out of every collection, and collect less often. Records live for the grace period
    # (2 s by default): with the middle generation collected only every 100 young collections (~5 s at 50,000 spans/s)
    # most of them die there instead of reaching the old generation, whose full collections scan every pending
    # record. The hot path's objects are acyclic and freed by reference counting; the young generation only holds
    # cyclic garbage longer. (Records built by the C extensions are not tracked at all: see
    # monitor/_cext/records.h.)
    gc.freeze()
    gc.set_threshold(200_000, 100, 100)
    pin_malloc_thresholds()
    cache_arenas(ARENA_CACHE_BYTES)
    return True


def pin_malloc_thresholds() -> None:
    """Pin glibc's mmap and trim thresholds high and fixed.

    Left alone, glibc raises its mmap threshold after large frees and request-sized buffers (hundreds of KiB)
    fragment the heap; pinned low (128 KiB), every body and socket read is mapped and unmapped again, which
    measured ~3 µs of system time per tool span. Pinned at 16 MiB / 64 MiB, buffers are reused from the heap:
    system time ~0.3 µs per tool span, and resident memory held flat (+3.4% from minute one to minute five at
    10,000 spans/s in bench_serve)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 16 << 20)
        libc.mallopt(m_trim_threshold, 64 << 20)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


def arena_module() -> ModuleType | None:
    """The C arena cache (_carena.c); None when it was not built (no C compiler at install time)."""
    try:
        return importlib.import_module("monitor.serve._carena")
    except ImportError:
        return None


def cache_arenas(max_bytes: int) -> bool:
    """Keep freed pymalloc arenas for reuse, up to `max_bytes`, instead of unmapping each one when its last object is
    freed (a burst's records are all freed a grace period later, and the next burst would fault every page in
    again). False when the C module is not built."""
    mod = arena_module()
    if mod is None:
        return False
    mod.install(max_bytes)
    return True


def arena_stats() -> tuple[int, int, int, int] | None:
    """(bytes cached, arenas reused, arenas mapped, arenas unmapped) since the cache was installed; None without it."""
    mod = arena_module()
    if mod is None:
        return None
    cached, reused, mapped, unmapped = mod.stats()
    return int(cached), int(reused), int(mapped), int(unmapped)
