"""Large blocks go back to the operating system when they are freed (glibc's `mallopt`).

glibc serves a block of at least its mmap threshold (128 KiB at start) with its own `mmap`,
which `free` unmaps at once. But the threshold is dynamic: each freed mapped block raises it
to that block's size, so after the first 1 MiB request body every later one comes from a
heap arena instead, and each thread that touched one (the loop, the store pool's threads,
the committer) keeps its own arena grown to its peak. A server that took a burst of large
bodies would then hold memory it no longer uses, which LIVE-6 says is released. Setting the
threshold once fixes it at 128 KiB and turns off the dynamic adjustment; requests of
ordinary size allocate nothing that large, so they do not pay an `mmap` each.

Elsewhere than glibc (musl's `mallopt` does nothing and says so, other systems have none)
this changes nothing.
"""

from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3
"""glibc's `mallopt` parameter number for the mmap threshold (malloc.h)."""
MMAP_THRESHOLD_BYTES = 128 * 1024


def return_large_blocks() -> bool:
    """Fix the allocator's mmap threshold at 128 KiB; True when the allocator took it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
