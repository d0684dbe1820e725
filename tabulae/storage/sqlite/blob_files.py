"""Blob content on disk for the SQLite store: one immutable file per extent under
``<data dir>/blobs/`` (named by a random id, in 256 sub-directories), or, up to
``INLINE_BYTES``, bytes kept for the database row the commit inserts.

A file is written by a helper thread one piece behind the network, synced (its directory entry
while the body arrives, its data at the end) before :meth:`ContentFiles.stage` returns, and
held under an exclusive ``flock`` from its creation until the write naming it commits or
fails. So a file that is unlocked and unreferenced is an orphan (a crash between the sync and
the commit), and the collector may delete it; a file deleted between its creation and its lock
is noticed by its link count and replaced. This module knows files, never SQL: what references
a file is asked of a function its caller passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import secrets
import shutil
import sqlite3
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import Digest, Extent, Staged
from tabulae.storage.sqlite.direct_writes import BufferPool, DirectWriter, enable_direct
from tabulae.storage.sqlite.writeback import start_writeback

INLINE_BYTES = 64 * 1024  # extents up to this size are rows, larger ones files
WRITE_BYTES = 1024 * 1024  # an upload is written to its file in pieces of this size
READ_BYTES = 1024 * 1024  # and read back in pieces of this size
MAX_VECTOR = 512  # a piece of more chunks than this is joined before its write (IOV_MAX is 1024)
CONTENT_DIR = "blobs"
_FILE_NAME = re.compile(r"[0-9a-f]{32}")


def is_inline(ref: str) -> bool:
    """Inline refs start with ``i``, file refs with ``f`` followed by the file's name."""
    return ref.startswith("i")


class SqliteStaged(Staged):
    """An extent's bytes: inline (``data``, inserted by the write that names it) or a file held
    locked (``fd``) until that write commits."""

    __slots__ = ("data", "extent", "fd", "path")

    def __init__(self, extent: Extent, data: bytes | None = None, fd: int = -1, path: str = "") -> None:
        self.extent = extent
        self.data = data
        self.fd = fd
        self.path = path

    def release(self, *, remove: bool) -> None:
        if remove and self.path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        if self.fd >= 0:
            os.close(self.fd)  # drops the lock: the collector may look at the file again
            self.fd = -1


class ContentFiles:
    """The content directory of one store."""

    def __init__(self, directory: Path, *, durable: bool) -> None:
        self.root = directory / CONTENT_DIR
        self.root.mkdir(parents=True, exist_ok=True)
        self._root = str(self.root)  # paths are joined as strings: pathlib is slow per download
        self._durable = durable
        self._io = ThreadPoolExecutor(4, thread_name_prefix="tabulae-blob-io")
        self._made_dirs: set[str] = set()
        # A durable store writes uploads around the page cache while the file system allows it
        # (the first refusal turns it off); a store that never syncs gains nothing from it.
        self._direct = durable
        self._buffers = BufferPool(WRITE_BYTES, keep=8)

    def close(self) -> None:
        self._io.shutdown(wait=True)

    def path(self, ref: str) -> str:
        name = ref[1:]
        return f"{self._root}/{name[:2]}/{name}"

    # ------------------------------------------------------------------ writing

    async def stage(self, chunks: AsyncIterable[bytes], digest: Digest | None) -> SqliteStaged:
        """Small content stays in memory until its write inserts it; larger content goes to a
        new file, written one piece behind the network (at most two pieces in memory) while
        other threads feed the same piece to the digest's updaters, and synced before this
        returns. Pieces are lists of the chunks as received: nothing is copied to join them."""
        iterator = chunks.__aiter__()
        head: list[bytes] = []
        size = 0
        finished = False
        while size <= INLINE_BYTES:
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                finished = True
                break
            head.append(chunk)
            size += len(chunk)
        if finished:
            data = b"".join(head)
            if digest is not None:
                digest.update(data)
            return SqliteStaged(Extent("i" + secrets.token_hex(16), len(data)), data=data)
        staged = await asyncio.get_running_loop().run_in_executor(self._io, self._create_file)
        try:
            length = await self._fill(staged, head, size, iterator, digest)
        except BaseException:
            staged.release(remove=True)
            raise
        staged.extent = Extent(staged.extent.ref, length)
        return staged

    def _create_file(self) -> SqliteStaged:
        """A new, empty, locked file whose directory exists."""
        while True:
            name = secrets.token_hex(16)
            folder = str(self.root / name[:2])
            if folder not in self._made_dirs:
                os.makedirs(folder, exist_ok=True)
                self._made_dirs.add(folder)
            path = os.path.join(folder, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink == 0:  # the collector took it between creation and lock
                os.close(fd)
                continue
            if self._direct and not enable_direct(fd):
                self._direct = False
            return SqliteStaged(Extent("f" + name, 0), fd=fd, path=path)

    async def _fill(
        self,
        staged: SqliteStaged,
        piece: list[bytes],
        size: int,
        iterator: AsyncIterator[bytes],
        digest: Digest | None,
    ) -> int:
        """Write the body one piece behind the network while other threads feed the digest's
        updaters and sync the new name's directory: so the end of the body waits for the last
        piece's data only, not for a second sync of the directory after it."""
        loop = asyncio.get_running_loop()
        updaters = digest.updaters() if digest is not None else ()
        light = digest.light() if digest is not None else None
        named = loop.run_in_executor(self._io, _sync_directory, staged.path) if self._durable else None
        direct = DirectWriter(staged.fd, self._buffers) if self._is_direct(staged.fd) else None
        pending: asyncio.Future[list[None]] | None = None
        length = 0
        done = False
        try:
            while not done:
                while size < WRITE_BYTES:
                    try:
                        chunk = await iterator.__anext__()
                    except StopAsyncIteration:
                        done = True
                        break
                    piece.append(chunk)
                    size += len(chunk)
                if pending is not None:
                    await pending
                if size and direct is not None:
                    pending = asyncio.gather(
                        loop.run_in_executor(self._io, direct.write, piece, light),
                        *(loop.run_in_executor(self._io, _update_all, update, piece) for update in updaters),
                    )
                elif size:
                    pending = asyncio.gather(
                        loop.run_in_executor(
                            self._io, _write_piece, staged.fd, piece, length, self._durable, light
                        ),
                        *(loop.run_in_executor(self._io, _update_all, update, piece) for update in updaters),
                    )
                length += size
                piece, size = [], 0
            if pending is not None:
                await pending
            if direct is not None:
                await loop.run_in_executor(self._io, direct.finish)
                if direct.refused:
                    self._direct = False
            if self._durable:
                await loop.run_in_executor(self._io, os.fdatasync, staged.fd)
        except BaseException:
            # the caller closes and unlinks the file next: no helper may still be using it
            running = [future for future in (pending, named) if future is not None]
            if running:
                await asyncio.wait(running)
            if direct is not None:
                direct.close()
            raise
        if named is not None:
            await named
        return length

    def _is_direct(self, fd: int) -> bool:
        """Whether ``fd`` was opened for direct writes (it was, unless the file system refused)."""
        return self._direct and bool(fcntl.fcntl(fd, fcntl.F_GETFL) & getattr(os, "O_DIRECT", 0))

    # ------------------------------------------------------------------ reading

    async def read(self, ref: str, low: int, high: int) -> AsyncIterator[bytes]:
        """Bytes ``low`` to ``high`` of a file, in pieces read by a helper thread."""
        fd = self.open(ref)
        try:
            async for piece in self.read_open(fd, low, high):
                yield piece
        finally:
            os.close(fd)

    def open(self, ref: str) -> int:
        """The file of ``ref``, open for reading (the caller closes it)."""
        try:
            return os.open(self.path(ref), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ServiceError("InternalError", detail="blob content is gone") from None

    async def read_open(self, fd: int, low: int, high: int) -> AsyncIterator[bytes]:
        """Bytes ``low`` to ``high`` of an open file, in pieces read by a helper thread."""
        loop = asyncio.get_running_loop()
        position = low
        while position < high:
            size = min(READ_BYTES, high - position)
            data = await loop.run_in_executor(self._io, os.pread, fd, size, position)
            if not data:
                raise ServiceError("InternalError", detail="blob content is short")
            position += len(data)
            yield data

    # ------------------------------------------------------------------ collecting

    @contextlib.contextmanager
    def collecting(self) -> Iterator[bool]:
        """The collector's lock, if free (one collector at a time, and none during a backup)."""
        lock_fd = os.open(str(self.root / "gc.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(lock_fd)

    async def unlink(self, refs: Iterable[str]) -> int:
        return await asyncio.get_running_loop().run_in_executor(self._io, self._unlink_all, list(refs))

    def _unlink_all(self, refs: list[str]) -> int:
        removed = 0
        for ref in refs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(ref))
                removed += 1
        return removed

    async def collect_orphans(
        self, database: str, unreferenced: Callable[[sqlite3.Connection, str], bool]
    ) -> int:
        """Delete files no upload holds locked and ``unreferenced`` says nothing names."""
        return await asyncio.get_running_loop().run_in_executor(
            self._io, self._collect_orphans, database, unreferenced
        )

    def _collect_orphans(self, database: str, unreferenced: Callable[[sqlite3.Connection, str], bool]) -> int:
        conn = sqlite3.connect(database, timeout=30)  # its own: this runs on a helper thread
        removed = 0
        try:
            for folder in os.scandir(self.root):
                if not folder.is_dir():
                    continue
                for entry in os.scandir(folder.path):
                    if _FILE_NAME.fullmatch(entry.name):
                        removed += _remove_if_orphan(conn, entry.path, "f" + entry.name, unreferenced)
        finally:
            conn.close()
        return removed


def _remove_if_orphan(
    conn: sqlite3.Connection, path: str, ref: str, unreferenced: Callable[[sqlite3.Connection, str], bool]
) -> int:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # an upload in progress
        if not unreferenced(conn, ref):  # asked under the lock: its upload has committed or failed
            return 0
        os.unlink(path)
        return 1
    finally:
        os.close(fd)


@contextlib.contextmanager
def collector_paused(root: Path) -> Iterator[None]:
    """Hold the collector's lock (waiting for it): no content file is deleted until this ends."""
    root.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(str(root / "gc.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock_fd)


def copy_files(root: Path, destination: Path, refs: Iterable[str]) -> None:
    """Copy the files of ``refs`` from ``root`` into ``destination``'s content directory, synced."""
    target_root = destination / CONTENT_DIR
    target_root.mkdir(parents=True, exist_ok=True)
    for ref in refs:
        if is_inline(ref):
            continue
        name = ref[1:]
        folder = target_root / name[:2]
        folder.mkdir(exist_ok=True)
        shutil.copyfile(root / name[:2] / name, folder / name)
        fd = os.open(str(folder / name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _sync_directory(path: str) -> None:
    """Make the new name ``path`` durable (a crash must not lose a synced file's name)."""
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the new name must survive a crash too
    finally:
        os.close(dir_fd)


def _write_piece(
    fd: int, chunks: list[bytes], offset: int, durable: bool, light: Callable[[bytes], None] | None
) -> None:
    """Write ``chunks`` at ``offset`` (the file's end) in one vectored call where the kernel
    takes it all; on a durable store, start writing them to the disk at once, so the sync at
    the end of the upload waits for the last pieces only rather than for the whole file. The
    digest's light updater sees them here too: a job of its own would cost more than it does."""
    size = sum(len(chunk) for chunk in chunks)
    if len(chunks) > MAX_VECTOR:  # a body that came in many tiny messages
        chunks = [b"".join(chunks)]
    written = os.writev(fd, chunks)
    if written < size:  # the kernel took part of it: write the rest piece by piece
        view = memoryview(b"".join(chunks))[written:]
        while view:
            view = view[os.write(fd, view) :]
    if durable:
        start_writeback(fd, offset, size)
    if light is not None:
        for chunk in chunks:
            light(chunk)


def _update_all(update: Callable[[bytes], None], chunks: list[bytes]) -> None:
    for chunk in chunks:
        update(chunk)
