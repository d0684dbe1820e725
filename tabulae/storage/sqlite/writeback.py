"""Starting a file's writeback early: Linux's ``sync_file_range(SYNC_FILE_RANGE_WRITE)``.

A large upload written to the page cache and synced only at its end waits, at the end, for the
disk to take every byte, one after the other with the network's part. Asking the kernel to start
writing each piece as soon as it is written overlaps the two, so the final ``fdatasync`` (which
still decides durability: this call alone promises nothing) waits for the last pieces only.

The standard library does not wrap the call, so it is reached through ``ctypes``; where it does
not exist (not Linux) or fails, nothing happens and the final sync does all the work as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable

__all__ = ["start_writeback"]

SYNC_FILE_RANGE_WRITE = 2  # <fcntl.h>: start writing dirty pages of the range, do not wait


def _load() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call  # type: ignore[no-any-return]


_SYNC_FILE_RANGE = _load()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing ``length`` bytes of ``fd`` from ``offset`` to the disk;
    returns at once (a failure is ignored: the caller's sync still makes the data durable)."""
    if _SYNC_FILE_RANGE is not None and length > 0:
        _SYNC_FILE_RANGE(fd, offset, length, SYNC_FILE_RANGE_WRITE)
