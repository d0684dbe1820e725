"""``BlobStore.stream``, what downloads read, on every engine: the same bytes as ``read`` for
any range, where pieces kept in files (SQLite's) come as open ranges that read the same through
their descriptor and through ``chunks``, and stay readable after the collector deleted the file."""

from __future__ import annotations

import os

import pytest

from tabulae.storage.blobs import BlobKey, BlobStore, FileRange
from tests.storage.conftest import Backend
from tests.storage.test_blob_conformance import put, run


async def streamed(store: BlobStore, key: BlobKey, start: int, end: int) -> tuple[bytes, int]:
    """The bytes ``stream`` gives for ``[start, end)`` (file ranges read both ways) and how many
    pieces were file ranges."""
    found = await store.get_blob(key, content=True)
    assert found is not None and found[1] is not None
    out = bytearray()
    files = 0
    async for piece in store.stream(key, found[1], start, end):
        if isinstance(piece, bytes):
            out += piece
            continue
        assert isinstance(piece, FileRange)
        files += 1
        direct = os.pread(piece.fd, piece.count, piece.offset)
        assert b"".join([chunk async for chunk in piece.chunks()]) == direct
        out += direct
    return bytes(out), files


@pytest.mark.parametrize("size", [10, 64 * 1024 + 1, 3 * 1024 * 1024 + 7])
def test_stream_gives_the_bytes_read_gives(backend: Backend, size: int) -> None:
    async def body(store: BlobStore, account: str) -> None:
        key = BlobKey(account, "box", f"s{size}")
        data = os.urandom(size)
        await put(store, key, data)
        for start, end in [(0, size), (1, size - 1), (size // 3, size // 2 + 1), (size - 1, size)]:
            got, files = await streamed(store, key, start, end)
            assert got == data[start:end]
            assert files == (1 if backend.name == "sqlite" and size > 64 * 1024 else 0)

    run(backend, body)


def test_file_range_outlives_its_collected_file(backend: Backend) -> None:
    async def body(store: BlobStore, account: str) -> None:
        key = BlobKey(account, "box", "held")
        data = os.urandom(2 * 1024 * 1024)
        await put(store, key, data)
        found = await store.get_blob(key, content=True)
        assert found is not None and found[1] is not None
        pieces = store.stream(key, found[1], 0, len(data))
        first = await pieces.__anext__()
        await put(store, key, b"replaced")
        assert isinstance(first, FileRange) == (backend.name == "sqlite")  # only SQLite keeps files
        if isinstance(first, FileRange):  # the file goes, the open range still reads
            assert await store.collect_garbage(-1.0) >= 1
            assert os.pread(first.fd, first.count, first.offset) == data
        await pieces.aclose()

    run(backend, body)
