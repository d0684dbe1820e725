"""Uploads written around the page cache (``O_DIRECT``) by the SQLite store's content files: the
file holds exactly the bytes sent, whatever the body's chunking and however its size falls on the
disk's blocks, and the aligned buffer goes back to the pool when an upload fails half-way."""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tabulae.storage.sqlite.blob_files import WRITE_BYTES, ContentFiles
from tabulae.storage.sqlite.direct_writes import ALIGN, BufferPool, DirectWriter, enable_direct

SIZES = [
    64 * 1024 + 1,
    ALIGN * 100,
    WRITE_BYTES - 1,
    WRITE_BYTES,
    WRITE_BYTES + ALIGN + 1,
    3 * WRITE_BYTES + 7,
]


def direct_supported(directory: Path) -> bool:
    probe = directory / "probe"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        return enable_direct(fd)
    finally:
        os.close(fd)
        probe.unlink()


async def pieces(data: bytes, chunk: int, fail_after: int | None = None) -> AsyncIterator[bytes]:
    for start in range(0, len(data), chunk):
        if fail_after is not None and start >= fail_after:
            raise ConnectionResetError("the client went away")
        yield data[start : start + chunk]


@pytest.mark.parametrize("chunk", [4093, 65536, 256000])
@pytest.mark.parametrize("size", SIZES)
def test_a_file_holds_exactly_the_body(tmp_path: Path, size: int, chunk: int) -> None:
    files = ContentFiles(tmp_path, durable=True)
    data = os.urandom(size)

    async def upload() -> None:
        staged = await files.stage(pieces(data, chunk), None)
        try:
            assert staged.extent.length == size
            with open(files.path(staged.extent.ref), "rb") as written:
                assert written.read() == data
            if direct_supported(tmp_path):  # the tail, if any, went through the page cache
                still_direct = bool(fcntl.fcntl(staged.fd, fcntl.F_GETFL) & os.O_DIRECT)
                assert still_direct == (size % ALIGN == 0)
        finally:
            staged.release(remove=True)

    try:
        asyncio.run(upload())
    finally:
        files.close()


def test_a_failed_upload_gives_its_buffer_back(tmp_path: Path) -> None:
    files = ContentFiles(tmp_path, durable=True)
    data = os.urandom(3 * WRITE_BYTES)

    async def uploads() -> None:
        for _ in range(20):  # more than the pool keeps: a leak would show as a growing pool
            with pytest.raises(ConnectionResetError):
                await files.stage(pieces(data, 65536, fail_after=2 * WRITE_BYTES), None)
        staged = await files.stage(pieces(data, 65536), None)
        staged.release(remove=True)

    try:
        asyncio.run(uploads())
        assert len(files._buffers._free) <= 1
        assert not [path for path in (tmp_path / "blobs").rglob("*") if path.is_file()]
    finally:
        files.close()


@pytest.fixture
def direct_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on a file system that takes O_DIRECT: the test's own, else one beside the
    checkout or in the home directory (a tmpfs /tmp on an older kernel refuses it)."""
    for base in (tmp_path, Path.cwd(), Path.home()):
        try:
            folder = Path(tempfile.mkdtemp(prefix=".tabulae-direct-", dir=base))
        except OSError:
            continue
        if direct_supported(folder):
            yield folder
            shutil.rmtree(folder, ignore_errors=True)
            return
        shutil.rmtree(folder, ignore_errors=True)
    pytest.skip("no file system here takes O_DIRECT (probe)")


def test_a_refused_direct_write_finishes_the_file_through_the_cache(direct_dir: Path) -> None:
    """A disk whose blocks are larger than ALIGN answers EINVAL; a write at an odd offset gets the
    same answer from every disk, so it stands in for one here."""
    path = direct_dir / "odd"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    pool = BufferPool(WRITE_BYTES, keep=1)
    data = os.urandom(2 * WRITE_BYTES + 5)
    try:
        assert enable_direct(fd)
        writer = DirectWriter(fd, pool)
        writer._offset = 1  # the odd offset
        writer.write([data[: WRITE_BYTES + 3], data[WRITE_BYTES + 3 :]], None)
        writer.finish()
        assert writer.refused
    finally:
        os.close(fd)
    assert path.read_bytes() == b"\0" + data
