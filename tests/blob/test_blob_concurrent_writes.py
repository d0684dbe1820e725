"""Blob writes that meet each other, through the aio SDK on each store: Put Page into overlapping
ranges of one page blob, and Put Blob of one new name, small (content inserted by the write's
own transaction) and over one chunk (content staged first, committed in a savepoint that is run
again on a conflict). Every write succeeds, and what is left is whole writes, never a mix."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

from azure.storage.blob import BlobClient, ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.serverproc import ServerProcess

KIB, MIB = 1024, 1024 * 1024
PAGE = 512
WRITERS = 8
ROUNDS = 6


def _write_data(writer: int, round_: int) -> bytes:
    """4 KiB whose every page names its write: a 2-byte tag, then filler."""
    tag = bytes((writer, round_))
    return (tag + bytes([writer * 16 + round_]) * (PAGE - 2)) * (4 * KIB // PAGE)


def test_overlapping_put_pages(server: ServerProcess, container: ContainerClient) -> None:
    name = "overlap.vhd"
    container.get_blob_client(name).create_page_blob(64 * KIB)

    async def writer(service: AsyncBlobServiceClient, n: int) -> list[tuple[int, bytes]]:
        blob = service.get_blob_client(container.container_name, name)
        done = []
        for r in range(ROUNDS):
            offset = ((n * 3 + r * 5) % 28) * 2 * KIB  # 4 KiB writes that overlap by half
            data = _write_data(n, r)
            await blob.upload_page(data, offset=offset, length=len(data))
            done.append((offset, data))
        return done

    async def run() -> list[list[tuple[int, bytes]]]:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            return await asyncio.gather(*(writer(service, n) for n in range(WRITERS)))

    writes = [w for per in asyncio.run(run()) for w in per]
    content = container.get_blob_client(name).download_blob().readall()
    written = set()
    for page in range(0, len(content), PAGE):
        covering = {
            data[page - offset : page - offset + PAGE]
            for offset, data in writes
            if offset <= page < offset + len(data)
        }
        if covering:
            assert content[page : page + PAGE] in covering  # one whole write's page
            written.add(page)
        else:
            assert content[page : page + PAGE] == bytes(PAGE)
    ranges = [(r.start, r.end) for r in container.get_blob_client(name).list_page_ranges()]
    covered = {page for start, end in ranges for page in range(start, end + 1, PAGE)}
    assert covered == written


def test_racing_creations_of_one_name(server: ServerProcess, container: ContainerClient) -> None:
    for size, name in ((4 * KIB, "small.bin"), (5 * MIB, "large.bin")):
        bodies = [os.urandom(size) for _ in range(6)]
        blob = container.get_blob_client(name)

        def put(body: bytes, blob: BlobClient = blob) -> None:
            blob.upload_blob(body, overwrite=True, max_concurrency=1)

        with ThreadPoolExecutor(len(bodies)) as pool:
            list(pool.map(put, bodies))
        assert blob.download_blob().readall() in bodies
