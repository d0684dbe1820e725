"""The change feed's publisher in-process, with an injected clock, and across a kill -9: events
kept with their writes are published exactly once (two publishers racing, a server killed with
events still kept), and an hour's segment is finalized once the hour is over."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
from azure.storage.blob import BlobServiceClient
from azure.storage.blob.changefeed import ChangeFeedClient

from tabulae.blob import changefeed as cf
from tabulae.blob.feed import GRACE, FeedPublisher, change_event
from tabulae.blob.rules.conditions import NONE
from tabulae.blob.service import BlobService, Upload
from tabulae.model.accounts import AccountFeatures
from tabulae.model.blobs import BlobKey, ContainerRecord, ContentProperties
from tabulae.storage.factory import open_stores
from tests.serverproc import ServerProcess

ACCOUNT = "acct"


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _content(service: BlobService, path: str) -> bytes:
    key = BlobKey(ACCOUNT, cf.CONTAINER, path)
    record, extents = await service.store.get_blob(key, content=True) or (None, None)
    assert record is not None and extents is not None
    return b"".join([chunk async for chunk in service.store.read(key, extents, 0, record.size)])


def test_racing_publishers_publish_each_event_once_and_ended_hours_are_finalized(tmp_path: Path) -> None:

    async def run() -> None:
        stores = await open_stores(None, tmp_path, in_memory=True)
        try:
            clock = _Clock()
            service = BlobService(
                stores.blobs, clock=clock, features=lambda _: AccountFeatures(blob_change_feed=True)
            )
            await stores.blobs.create_container(ACCOUNT, ContainerRecord("c", 1))
            for n in range(60):
                key = BlobKey(ACCOUNT, "c", f"b{n % 6}")
                await service.put_blob(
                    key, "BlockBlob", Upload(_body(b"x"), 1), ContentProperties(), {}, NONE, None
                )
            pending = await stores.blobs.pending_changes(1000)
            assert len(pending) == 60
            # Events are timed by the store's clock (the real one): they may straddle an hour.
            hours = sorted({cf.segment_start(change_event(c.account, c.doc).time) for c in pending})
            publishers = [FeedPublisher(stores.blobs, clock, batch=7) for _ in range(3)]
            for _ in range(20):
                await asyncio.gather(*(p.publish() for p in publishers))
            assert await stores.blobs.pending_changes(1000) == []
            records = [
                r for hour in hours for r in cf.read_chunk(await _content(service, cf.chunk_path(0, hour)))
            ]
            assert len(records) == 60 and len({r["id"] for r in records}) == 60
            manifest = orjson.loads(await _content(service, cf.segment_path(hours[-1])))
            assert manifest["status"] == "Publishing"
            clock.now = hours[-1].timestamp() + 3600 + GRACE.total_seconds() + 1  # the hour is over
            for publisher in publishers:
                await publisher.publish()
            manifest = orjson.loads(await _content(service, cf.segment_path(hours[-1])))
            assert manifest["status"] == "Finalized"
            segments = orjson.loads(await _content(service, cf.SEGMENTS_PATH))
            end = hours[-1].timestamp() + 3600
            assert segments["lastConsumable"] == datetime.fromtimestamp(end, UTC).strftime(
                "%Y-%m-%dT%H:%M:%S.000Z"
            )
        finally:
            await stores.close()

    asyncio.run(run())


def test_publisher_waits_while_paused_and_publishes_the_kept_events_after(tmp_path: Path) -> None:
    """Paused (the data volume is full, issue 36), the publisher writes nothing: a chunk grown
    then would use the room deletes need. Its events stay kept, and are published once it may."""

    async def run() -> None:
        stores = await open_stores(None, tmp_path, in_memory=True)
        try:
            service = BlobService(stores.blobs, features=lambda _: AccountFeatures(blob_change_feed=True))
            await stores.blobs.create_container(ACCOUNT, ContainerRecord("c", 1))
            for n in range(5):
                key = BlobKey(ACCOUNT, "c", f"b{n}")
                await service.put_blob(
                    key, "BlockBlob", Upload(_body(b"x"), 1), ContentProperties(), {}, NONE, None
                )
            full = True
            publisher = FeedPublisher(stores.blobs, time.time, paused=lambda: full)
            task = asyncio.get_running_loop().create_task(publisher.run(interval=0.05))
            try:
                await asyncio.sleep(0.5)  # some ten rounds
                assert len(await stores.blobs.pending_changes(1000)) == 5
                made = await stores.blobs.containers_from(cf.CONTAINER)
                assert (ACCOUNT, cf.CONTAINER) not in made  # not even the feed's container
                full = False
                for _ in range(200):
                    if not await stores.blobs.pending_changes(1000):
                        break
                    await asyncio.sleep(0.05)
                assert await stores.blobs.pending_changes(1000) == []
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        finally:
            await stores.close()

    asyncio.run(run())


def test_events_kept_when_the_server_is_killed_are_published_after_restart(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", extra_args=["--blob-change-feed"]).start()
    try:
        with BlobServiceClient.from_connection_string(server.connection_string) as service:
            container = service.create_container("crash")
            for n in range(150):
                container.upload_blob(f"b{n % 10}", b"x", overwrite=True)
        server.stop(signal.SIGKILL)  # at once: most events are still kept, not yet published
        server.start()
        feed = ChangeFeedClient.from_connection_string(server.connection_string)
        deadline = time.monotonic() + 60
        events: list[dict] = []
        while time.monotonic() < deadline:
            events = [e for e in feed.list_changes() if "/containers/crash/" in e["subject"]]
            if len(events) >= 150:
                break
            time.sleep(0.5)
        assert len(events) == 150 and len({e["id"] for e in events}) == 150
    finally:
        server.stop()
