"""The change feed's files stored in a real Tabulae server, read by Microsoft's change feed
client over HTTP: segment manifests as block blobs, chunks as append blobs grown by Append
Block, exactly as the store will write them.

Tabulae refuses to create ``$blobchangefeed`` (a system container in Azure too), so the files go
into an ordinary container and the client's container client is pointed at it; everything else,
listing by prefix, ranged downloads, the Avro parsing and the continuation tokens, is the SDK
against the server.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from azure.storage.blob import ContainerClient, ContentSettings
from azure.storage.blob.changefeed import ChangeFeedClient

from tabulae.blob import changefeed as cf

T0 = datetime(2026, 3, 1, 10, 15, 0, tzinfo=UTC)


def _event(n: int) -> cf.ChangeEvent:
    name = f"hot{n % 7}.txt"
    return cf.ChangeEvent(
        event_type="BlobCreated" if n % 5 else "BlobDeleted",
        api="PutBlob" if n % 5 else "DeleteBlob",
        account="devstoreaccount1",
        container="photos",
        blob=name,
        time=T0 + timedelta(seconds=13 * n),
        id=str(uuid.UUID(int=n + 1)),
        request_id=str(uuid.UUID(int=(n + 1) << 64)),
        url=f"http://127.0.0.1/devstoreaccount1/photos/{name}",
        sequencer=cf.sequencer(n + 1),
        content_length=n,
    )


def _store(container: ContainerClient, events: list[cf.ChangeEvent], batch: int, started: set[str]) -> None:
    """Write the feed the way the store will: each batch of an hour is one Append Block to that
    hour's chunk, created with the header and the hour's manifest on first use."""
    json = ContentSettings(content_type=cf.MANIFEST_CONTENT_TYPE)
    avro = ContentSettings(content_type=cf.CHUNK_CONTENT_TYPE)
    for i in range(0, len(events), batch):
        by_hour: dict[datetime, list[cf.ChangeEvent]] = {}
        for e in events[i : i + batch]:
            by_hour.setdefault(cf.segment_start(e.time), []).append(e)
        for hour, group in by_hour.items():
            path = cf.chunk_path(0, hour)
            chunk = container.get_blob_client(path)
            if path not in started:
                chunk.create_append_blob(content_settings=avro)
                chunk.append_block(cf.render_chunk(path, group))
                manifest = cf.render_segment(hour, finalized=False, modified=group[0].time)
                container.upload_blob(cf.segment_path(hour), manifest, content_settings=json)
                started.add(path)
            else:
                chunk.append_block(cf.append_to_chunk(path, group))


def _client(container: ContainerClient) -> ChangeFeedClient:
    client = ChangeFeedClient(container.url.rsplit("/", 1)[0])
    client._blob_service_client = SimpleNamespace(get_container_client=lambda name: container)  # type: ignore[assignment]
    return client


def test_the_change_feed_client_reads_a_feed_stored_in_tabulae(container: ContainerClient) -> None:
    events = [_event(n) for n in range(1000)]
    started: set[str] = set()
    _store(container, events[:600], batch=250, started=started)
    # Later events arrive one Append Block each, as a running store would write them.
    _store(container, events[600:], batch=1, started=started)
    read = list(_client(container).list_changes())
    assert [r["id"] for r in read] == [e.id for e in events]
    assert read[-1] == events[-1].record()

    window = list(
        _client(container).list_changes(start_time=T0 + timedelta(hours=1), end_time=T0 + timedelta(hours=2))
    )
    hours = {cf.segment_start(T0 + timedelta(hours=1)), cf.segment_start(T0 + timedelta(hours=2))}
    assert [r["id"] for r in window] == [e.id for e in events if cf.segment_start(e.time) in hours]

    seen: list[str] = []
    token = None
    for _ in range(20):
        pages = _client(container).list_changes(results_per_page=97).by_page(continuation_token=token)
        seen.extend(r["id"] for r in next(pages))
        token = pages.continuation_token
        if len(seen) == len(events):
            break
    assert seen == [e.id for e in events]
