"""Last access time tracking through the official SDK (sync and aio) on each store: with
``--last-access-tracking`` reads and properties carry ``x-ms-last-access-time`` and listings
``<LastAccessTime>``; without it, neither. The once-a-day update runs in-process with an
injected clock (a day cannot pass in a test otherwise)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tabulae.blob.protection import last_access, stale, touch
from tabulae.blob.rules.conditions import NONE
from tabulae.blob.service import BlobService, Upload
from tabulae.model.accounts import AccountFeatures
from tabulae.model.blobs import BASE, BlobKey, ContainerRecord, ContentProperties
from tabulae.storage.factory import open_stores
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def tracking(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    extra = ["--last-access-tracking", *fresh_store(request.param)]
    process = ServerProcess(tmp_path_factory.mktemp("lat"), extra_args=extra, backend=request.param).start()
    yield process
    process.stop()


def test_reads_properties_and_listings_carry_the_time(tracking: ServerProcess) -> None:
    with BlobServiceClient.from_connection_string(tracking.connection_string) as service:
        container = service.create_container("lat")
        before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        blob = container.upload_blob("b", b"hello")
        accessed = blob.get_blob_properties().last_accessed_on
        assert accessed is not None and before <= accessed <= datetime.now(UTC) + timedelta(seconds=1)
        download = blob.download_blob()
        assert download.readall() == b"hello" and download.properties.last_accessed_on is not None
        listed = list(container.list_blobs())
        assert [b.last_accessed_on for b in listed] == [accessed]
        http = BlobHttp(tracking.blob_port)
        body = http.request("GET", "/lat?restype=container&comp=list").body.decode()
        # before <BlobType>, as Azure writes it (the .NET SDK's recording
        # ImmutableStorageWithVersioningTests/SetImmutibilityPolicyAsync.json, 2026-06-06)
        assert "<Content-Disposition /><LastAccessTime>" in body and "</LastAccessTime><BlobType>" in body
        head = http.request("HEAD", "/lat/b")
        assert head.headers["x-ms-last-access-time"].endswith(" GMT")


def test_aio_reads_the_time(tracking: ServerProcess) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(tracking.connection_string) as service:
            container = await service.create_container("lataio")
            blob = await container.upload_blob("b", b"x")
            assert (await blob.get_blob_properties()).last_accessed_on is not None
            async for listed in container.list_blobs():
                assert listed.last_accessed_on is not None

    asyncio.run(run())


def test_untracked_accounts_show_no_time(container: ContainerClient) -> None:
    blob = container.upload_blob("b", b"x")
    assert blob.get_blob_properties().last_accessed_on is None
    assert [b.last_accessed_on for b in container.list_blobs()] == [None]


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC).timestamp()

    def __call__(self) -> float:
        return self.now


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


def test_a_read_stores_the_time_at_most_once_a_day(tmp_path: Path) -> None:
    async def run() -> None:
        stores = await open_stores(None, tmp_path, in_memory=True)
        try:
            clock = _Clock()
            service = BlobService(
                stores.blobs, clock=clock, features=lambda _: AccountFeatures(last_access_tracking=True)
            )
            await stores.blobs.create_container("acct", ContainerRecord("c", 1))
            key = BlobKey("acct", "c", "b")
            record, _ = await service.put_blob(
                key, "BlockBlob", Upload(_body(b"x"), 1), ContentProperties(), {}, NONE, None
            )
            written = last_access(record)
            clock.now = written + 3600  # an hour later: no update
            assert not stale(record, clock.now)
            clock.now = written + 86400 + 1  # a day later: the read stores the time, once
            assert stale(record, clock.now)
            await touch(service.store, key, clock.now)
            stored, _ = await service.get_blob(key, BASE, NONE, None, content=False)
            assert stored.last_access == clock.now and stored.ticks == record.ticks  # the ETag stays
            later = clock.now
            clock.now += 3600
            await touch(service.store, key, clock.now)  # within the day: nothing changes
            stored, _ = await service.get_blob(key, BASE, NONE, None, content=False)
            assert stored.last_access == later
        finally:
            await stores.close()

    asyncio.run(run())
