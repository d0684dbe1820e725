"""The change feed live, on each store: a server with ``--blob-change-feed`` keeps an event with
every blob write and publishes them into ``$blobchangefeed``, and Microsoft's change feed client
(``azure-storage-blob-changefeed``), pointed at the server unchanged, reads them: all of them,
in order per blob, with time windows and continuation tokens. An account without the feed keeps
nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient, ContentSettings
from azure.storage.blob.changefeed import ChangeFeedClient

from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

BLOBS = 100
#: The writes each blob goes through, and the api its event names.
STEPS = (
    "PutBlob", "SetBlobMetadata", "SetBlobProperties", "SnapshotBlob", "SetBlobTier",
    "PutBlob", "DeleteBlob", "PutBlob", "SetBlobMetadata", "PutBlockList",
)  # fmt: skip


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def feeding(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    extra = ["--blob-change-feed", *fresh_store(request.param)]
    process = ServerProcess(tmp_path_factory.mktemp("feed"), extra_args=extra, backend=request.param).start()
    yield process
    process.stop()


def _step(container: ContainerClient, name: str, step: int) -> None:
    blob = container.get_blob_client(name)
    if step in (0, 5, 7):
        blob.upload_blob(f"{name}:{step}".encode(), overwrite=True)
    elif step in (1, 8):
        blob.set_blob_metadata({"step": str(step)})
    elif step == 2:
        blob.set_http_headers(ContentSettings(content_type="text/plain"))
    elif step == 3:
        blob.create_snapshot()
    elif step == 4:
        blob.set_standard_blob_tier("Cool")
    elif step == 6:
        blob.delete_blob(delete_snapshots="include")
    else:
        blob.stage_block("YQ==", b"a")  # staging a block makes no event; committing does
        blob.commit_block_list(["YQ=="])


def _read_all(feed: ChangeFeedClient, expected: int, **kwargs: object) -> list[dict]:
    """The feed's events, once the server has published at least ``expected`` of them."""
    deadline = time.monotonic() + 90
    while True:
        try:
            events = list(feed.list_changes(**kwargs))  # type: ignore[arg-type]
        except ResourceNotFoundError:
            events = []  # nothing published yet: no $blobchangefeed
        if len(events) >= expected or time.monotonic() > deadline:
            return events
        time.sleep(0.5)


def test_the_client_reads_every_change_in_order_per_blob(feeding: ServerProcess) -> None:
    started = datetime.now(UTC)
    with BlobServiceClient.from_connection_string(feeding.connection_string) as service:
        container = service.create_container("feed")
        for step in range(len(STEPS)):  # every blob's step n before any blob's step n + 1
            for n in range(BLOBS):
                _step(container, f"b{n:03d}", step)
    operations = BLOBS * len(STEPS)
    feed = ChangeFeedClient.from_connection_string(feeding.connection_string)
    events = [
        e
        for e in _read_all(feed, operations)
        if e["subject"].startswith("/blobServices/default/containers/feed/")
    ]
    assert len(events) == operations
    by_blob: dict[str, list[dict]] = {}
    for event in events:
        by_blob.setdefault(event["subject"].rsplit("/", 1)[1], []).append(event)
    assert len(by_blob) == BLOBS
    for name, seen in by_blob.items():
        assert [e["data"]["api"] for e in seen] == list(STEPS), name
        sequencers = [e["data"]["sequencer"] for e in seen]
        assert sequencers == sorted(sequencers) and len(set(sequencers)) == len(sequencers)
    first = by_blob["b000"]
    assert [e["eventType"] for e in first] == [
        "BlobCreated", "BlobPropertiesUpdated", "BlobPropertiesUpdated", "BlobSnapshotCreated",
        "BlobTierChanged", "BlobCreated", "BlobDeleted", "BlobCreated", "BlobPropertiesUpdated",
        "BlobCreated",
    ]  # fmt: skip
    assert first[0]["data"]["contentLength"] == len(b"b000:0") and first[0]["data"]["blobType"] == "BlockBlob"
    assert first[0]["topic"].endswith("/storageAccounts/devstoreaccount1")

    # A window of time: the hour the changes were made in holds them all; an hour before, none.
    hour = started.replace(minute=0, second=0, microsecond=0)
    windowed = list(feed.list_changes(start_time=hour, end_time=hour + timedelta(hours=1)))
    assert len([e for e in windowed if "/containers/feed/" in e["subject"]]) == operations
    assert (
        list(feed.list_changes(start_time=hour - timedelta(hours=3), end_time=hour - timedelta(hours=2)))
        == []
    )

    # Continuation: page by page, resuming from each page's token, the same events in order.
    pages = feed.list_changes(results_per_page=300).by_page()
    resumed = list(next(pages))
    for _ in range(operations // 300 + 2):  # the token stays set at the end: stop at an empty page
        token = pages.continuation_token
        pages = feed.list_changes(results_per_page=300).by_page(continuation_token=token)
        page = list(next(pages, []))
        if not page:
            break
        resumed.extend(page)
    assert [e["id"] for e in resumed] == [e["id"] for e in _read_all(feed, operations)]


def test_an_account_without_the_feed_keeps_none(container: ContainerClient, server: ServerProcess) -> None:
    container.upload_blob("quiet", b"x")
    with BlobServiceClient.from_connection_string(server.connection_string) as service:
        assert "$blobchangefeed" not in [c.name for c in service.list_containers(include_system=True)]
