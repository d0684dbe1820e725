"""Writing an upload's file around the page cache (Linux ``O_DIRECT``), from a reused aligned buffer.

A buffered write copies every byte into freshly allocated page-cache pages, and on a machine that
also runs the client that copy is the largest single cost of a large upload; the final sync then
waits for the kernel to write those pages out. A direct write hands the disk the buffer itself: the
only copy left is the one from the received pieces into a buffer that stays warm from upload to
upload, and the data is on its way to the disk as soon as each write returns.

Direct writes need the file offset, the length and the buffer aligned to the disk's block: the
buffer is an anonymous ``mmap`` (page aligned), every write but the last is a whole number of
:data:`ALIGN` blocks, and the tail is written after ``O_DIRECT`` is switched off again. Where the
file system refuses ``O_DIRECT`` (``fcntl`` fails), nothing changes: the caller keeps writing
through the page cache.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
from collections.abc import Callable

__all__ = ["ALIGN", "BufferPool", "DirectWriter", "enable_direct"]

ALIGN = 4096  # every disk's logical block divides this
_O_DIRECT = getattr(os, "O_DIRECT", 0)


def enable_direct(fd: int) -> bool:
    """Switch ``fd`` to direct writes; False (and ``fd`` unchanged) where that is not possible."""
    if not _O_DIRECT:
        return False
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | _O_DIRECT)
    except OSError:
        return False
    return True


def _disable_direct(fd: int) -> None:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~_O_DIRECT)


class BufferPool:
    """Aligned buffers kept for the next upload, so that no upload pays to fault fresh pages in.
    Taken and given back from helper threads: ``list.pop`` and ``append`` are atomic."""

    def __init__(self, size: int, keep: int) -> None:
        self.size = size
        self._keep = keep
        self._free: list[mmap.mmap] = []

    def take(self) -> mmap.mmap:
        try:
            return self._free.pop()
        except IndexError:
            return mmap.mmap(-1, self.size)

    def give(self, buffer: mmap.mmap) -> None:
        if len(self._free) < self._keep:
            self._free.append(buffer)
        else:
            buffer.close()


class DirectWriter:
    """One upload's sequential direct writes: whole blocks go out as pieces arrive, and the part
    of a block not yet complete waits at the buffer's front for the next piece (or the end)."""

    __slots__ = ("_buffer", "_fd", "_fill", "_offset", "_pool", "_view", "refused")

    def __init__(self, fd: int, pool: BufferPool) -> None:
        self.refused = False  # the disk refused a direct write: the rest went through the cache
        self._fd = fd
        self._pool = pool
        self._buffer: mmap.mmap | None = pool.take()
        self._view = memoryview(self._buffer)
        self._fill = 0  # bytes in the buffer, not yet written
        self._offset = 0  # where the buffer's first byte goes in the file

    def write(self, chunks: list[bytes], light: Callable[[bytes], None] | None) -> None:
        """Copy ``chunks`` in, writing every full buffer; then write the whole blocks held."""
        view, capacity = self._view, len(self._view)
        for chunk in chunks:
            if light is not None:
                light(chunk)
            start, size = 0, len(chunk)
            while start < size:
                taken = min(capacity - self._fill, size - start)
                view[self._fill : self._fill + taken] = chunk[start : start + taken]
                self._fill += taken
                start += taken
                if self._fill == capacity:
                    self._flush(capacity)
        self._flush(self._fill - self._fill % ALIGN)

    def finish(self) -> None:
        """Write the last partial block through the page cache (the caller syncs after this)."""
        if self._fill:
            if not self.refused:
                _disable_direct(self._fd)
            self._write_all(self._view[: self._fill])
            self._offset += self._fill
            self._fill = 0
        self.close()

    def close(self) -> None:
        """Give the buffer back (after :meth:`finish`, or when the upload failed)."""
        if self._buffer is not None:
            self._view.release()
            self._pool.give(self._buffer)
            self._buffer = None

    def _flush(self, length: int) -> None:
        if not length:
            return
        self._write_all(self._view[:length])
        self._offset += length
        rest = self._fill - length
        if rest:  # the incomplete block moves to the front (less than ALIGN bytes)
            self._view[:rest] = self._view[length : self._fill]
        self._fill = rest

    def _write_all(self, data: memoryview) -> None:
        offset = self._offset
        while data:
            try:
                written = os.pwrite(self._fd, data, offset)
            except OSError as exc:
                # A disk whose blocks are larger than ALIGN: finish this file through the cache.
                if exc.errno != errno.EINVAL or self.refused:
                    raise
                _disable_direct(self._fd)
                self.refused = True
                continue
            data, offset = data[written:], offset + written
