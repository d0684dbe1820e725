"""Keeping the C heap's memory between requests (glibc's ``mallopt``), so that large bodies do
not pay the kernel for fresh pages over and over.

uvloop hands every read of a request body to Python as a new ``bytes`` of up to ~250 KB. With
glibc's default settings each such object is carved from the top of the heap and given back to
the kernel as soon as it is freed (the heap shrinks whenever more than a few hundred KB lie free
at its top), so a large upload costs a heap growth, page faults that zero every page, and a heap
shrink for each read: more kernel time than the upload's own writes. Raising the trim threshold
keeps freed memory for the next read; fixing the mmap threshold above the largest piece a body
is joined into keeps those allocations in the heap too, instead of a ``mmap``/``munmap`` pair
each. The cost is bounded: at most :data:`TRIM_BYTES` of free heap stay with each worker.

Only glibc has these knobs; elsewhere (musl, macOS) nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["keep_freed_memory"]

M_TRIM_THRESHOLD = -1  # <malloc.h>
M_MMAP_THRESHOLD = -3
TRIM_BYTES = 32 * 1024 * 1024  # free heap a worker keeps rather than returning it
MMAP_BYTES = 8 * 1024 * 1024  # allocations up to this size come from the heap


def keep_freed_memory() -> bool:
    """Tune this process's allocator as the module says; False where it has no such knobs."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_BYTES))
