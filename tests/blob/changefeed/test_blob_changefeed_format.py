"""The change feed's files, read back by Microsoft's own change feed client.

``ChangeFeedClient`` reads ``$blobchangefeed`` through a container client: list blobs by
prefix, download a blob (whole or from an offset), read its size. Those calls are served here
from a dict of the bytes ``tabulae.blob.changefeed`` renders, so everything the client parses
(the segment manifests, the Avro chunks, its continuation tokens) is Microsoft's parsing of our
bytes. Tabulae refuses to create ``$blobchangefeed`` (a system container, as in Azure), so an
end-to-end test through a server waits for the store to write the feed itself.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob.changefeed import ChangeFeedClient

from tabulae.blob import changefeed as cf
from tabulae.blob.changefeed.schema import SCHEMA, SCHEMA_VERSION

ACCOUNT = "devstoreaccount1"
#: The first bytes of a chunk real Azure wrote (recording named in ``changefeed/schema.py``): the
#: magic, two metadata entries, ``avro.codec`` = ``null``, then ``avro.schema`` and its length.
RECORDED_HEADER_START = bytes.fromhex(
    "4f626a0104146176726f2e636f646563086e756c6c166176726f2e736368656d61d629"
)
T0 = datetime(2026, 3, 1, 10, 15, 0, tzinfo=UTC)


class _Blob:
    """One stored blob, downloadable the way the change feed client asks for it."""

    def __init__(self, data: bytes, chunk_size: int) -> None:
        self.data = data
        self.chunk_size = chunk_size

    def get_blob_properties(self) -> SimpleNamespace:
        return SimpleNamespace(size=len(self.data))

    def download_blob(self, offset: int | None = None, length: int | None = None) -> SimpleNamespace:
        start = offset or 0
        end = len(self.data) if length is None else start + length
        part = self.data[start:end]
        size = self.chunk_size
        return SimpleNamespace(
            readall=lambda: part,
            chunks=lambda: iter([part[i : i + size] for i in range(0, len(part), size)]),
        )


class FakeFeedContainer:
    """The ``$blobchangefeed`` container: names listed in order, as Azure lists them."""

    primary_hostname = f"{ACCOUNT}.blob.core.windows.net"

    def __init__(self, blobs: dict[str, bytes], chunk_size: int = 4096) -> None:
        self.blobs = blobs
        self.chunk_size = chunk_size

    def list_blobs(self, name_starts_with: str = "") -> list[SimpleNamespace]:
        return [SimpleNamespace(name=n) for n in sorted(self.blobs) if n.startswith(name_starts_with)]

    def get_blob_client(self, name: str) -> _Blob:
        return _Blob(self.blobs[name], self.chunk_size)


def feed_client(blobs: dict[str, bytes], chunk_size: int = 4096) -> ChangeFeedClient:
    client = ChangeFeedClient(f"https://{ACCOUNT}.blob.core.windows.net")
    container = FakeFeedContainer(blobs, chunk_size)
    client._blob_service_client = SimpleNamespace(get_container_client=lambda name: container)  # type: ignore[assignment]
    return client


def event(n: int, when: datetime, blob: str | None = None, kind: str = "BlobCreated") -> cf.ChangeEvent:
    name = blob or f"blob{n:05d}.txt"
    return cf.ChangeEvent(
        event_type=kind,
        api="PutBlob" if kind == "BlobCreated" else "DeleteBlob",
        account=ACCOUNT,
        container="photos",
        blob=name,
        time=when,
        id=str(uuid.UUID(int=n + 1)),
        request_id=str(uuid.UUID(int=(n + 1) << 64)),
        url=f"https://{ACCOUNT}.blob.core.windows.net/photos/{name}",
        sequencer=cf.sequencer(n + 1),
        etag=f"0x8DE050D{n:09X}",
        content_type="text/plain",
        content_length=n,
        container_version="01DC36F49F23DCB2",
        diagnostics={"bid": "tabulae"},
    )


class FeedWriter:
    """What the store will do: route each event to its hour's segment, append to its chunk."""

    def __init__(self, shards: int = 1) -> None:
        self.shards = shards
        self.blobs: dict[str, bytes] = {}

    def write(self, events: list[cf.ChangeEvent]) -> None:
        for e in events:
            path = cf.chunk_path(cf.shard_for(e.container, e.blob, self.shards), e.time)
            if path in self.blobs:
                self.blobs[path] += cf.append_to_chunk(path, [e])
            else:
                self.blobs[path] = cf.render_chunk(path, [e])
            self.blobs[cf.segment_path(e.time)] = cf.render_segment(
                e.time, shards=self.shards, finalized=False, modified=e.time
            )


def write_feed(events: list[cf.ChangeEvent], batch: int = 7, shards: int = 1) -> dict[str, bytes]:
    writer = FeedWriter(shards)
    for i in range(0, len(events), batch):
        writer.write(events[i : i + batch])
    return writer.blobs


def test_schema_is_the_one_real_azure_writes() -> None:
    """The header carries Microsoft.Storage.BlobChangeEvent, codec null, the path's marker."""
    path = cf.chunk_path(0, T0)
    data = cf.render_chunk(path, [event(0, T0)])
    assert data[:4] == b"Obj\x01"
    assert data.startswith(RECORDED_HEADER_START)
    text = json.dumps(SCHEMA, separators=(",", ":")).encode()
    assert data[len(RECORDED_HEADER_START) : len(RECORDED_HEADER_START) + len(text)] == text
    header_end = len(RECORDED_HEADER_START) + len(text) + 1
    assert data[header_end : header_end + 16] == cf.sync_marker(path)
    assert data.endswith(cf.sync_marker(path))


def test_record_round_trips_through_fastavro() -> None:
    e = event(3, T0)
    (record,) = cf.read_chunk(cf.render_chunk("x", [e]))
    assert record == e.record()
    assert record["schemaVersion"] == SCHEMA_VERSION
    assert record["subject"] == "/blobServices/default/containers/photos/blobs/blob00003.txt"
    assert record["eventTime"] == "2026-03-01T10:15:00.0000000Z"
    assert record["topic"].endswith("/providers/Microsoft.Storage/storageAccounts/devstoreaccount1")


def test_appends_make_one_readable_file() -> None:
    path = cf.chunk_path(0, T0)
    data = cf.render_chunk(path, [event(0, T0)])
    for n in range(1, 30):
        data += cf.append_to_chunk(path, [event(n, T0), event(n + 100, T0)][: 1 + n % 2])
    assert cf.append_to_chunk(path, []) == b""
    assert [r["data"]["contentLength"] for r in cf.read_chunk(data)][:5] == [0, 1, 101, 2, 3]
    many = [event(n, T0) for n in range(250)]  # three blocks in one append
    data += cf.append_to_chunk(path, many)
    assert [r["id"] for r in cf.read_chunk(data)][-250:] == [e.id for e in many]


def test_paths_and_manifests() -> None:
    when = datetime(2025, 10, 6, 19, 20, 41, 329000, tzinfo=UTC)
    assert cf.segment_path(when) == "idx/segments/2025/10/06/1900/meta.json"
    assert cf.chunk_path(0, when) == "log/00/2025/10/06/1900/00000.avro"
    assert len(cf.chunk_path(3, when, 17).rsplit("/", 1)[1]) == 10
    manifest = json.loads(cf.render_segment(when, shards=2, finalized=False, modified=when))
    assert manifest["begin"] == "2025-10-06T19:00:00.000Z"
    assert manifest["intervalSecs"] == 3600 and manifest["status"] == "Publishing"
    assert manifest["chunkFilePaths"] == [
        "$blobchangefeed/log/00/2025/10/06/1900/",
        "$blobchangefeed/log/01/2025/10/06/1900/",
    ]
    assert manifest["storageDiagnostics"]["lastModifiedTime"] == "2025-10-06T19:20:41.329Z"
    assert json.loads(cf.render_segment(when, finalized=True, modified=when))["status"] == "Finalized"
    top = json.loads(cf.segments_manifest(cf.segment_start(when), modified=when))
    assert top["lastConsumable"] == "2025-10-06T19:00:00.000Z" and top["version"] == 0


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError):
        event(0, T0, kind="BlobExploded")
    with pytest.raises(ValueError):
        event(0, datetime(2026, 1, 1))  # naive
    with pytest.raises(ValueError):
        cf.chunk_path(0, T0, 100_000)
    with pytest.raises(ValueError):
        cf.shard_for("c", "b", 0)
    assert cf.sequencer(1) < cf.sequencer(16) < cf.sequencer(2**64)


def thousand_events() -> list[cf.ChangeEvent]:
    """1,000 events over three hours from 10:15, so four segments; ten blobs written 100 times each."""
    out = []
    for n in range(1000):
        blob = f"hot{n % 10}.txt" if n % 10 == 0 else None
        out.append(event(n, T0 + timedelta(seconds=11 * n), blob))
    return out


def test_microsofts_client_reads_a_thousand_events_in_order() -> None:
    events = thousand_events()
    assert len({cf.segment_path(e.time) for e in events}) == 4
    read = list(feed_client(write_feed(events)).list_changes())
    assert [r["id"] for r in read] == [e.id for e in events]
    assert read[0] == events[0].record()


def test_microsofts_client_keeps_per_blob_order_across_shards() -> None:
    events = thousand_events()
    read = list(feed_client(write_feed(events, shards=3)).list_changes())
    assert sorted(r["id"] for r in read) == sorted(e.id for e in events)
    by_blob: dict[str, list[str]] = {}
    for r in read:
        by_blob.setdefault(r["subject"], []).append(r["data"]["sequencer"])
    assert all(seqs == sorted(seqs) for seqs in by_blob.values())
    assert max(len(s) for s in by_blob.values()) > 1


def test_start_and_end_times_select_whole_hours() -> None:
    events = thousand_events()
    client = feed_client(write_feed(events))
    start, end = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    read = list(client.list_changes(start_time=start, end_time=end))
    hours = {cf.segment_start(start), cf.segment_start(end)}
    expected = [e.id for e in events if cf.segment_start(e.time) in hours]
    assert [r["id"] for r in read] == expected and 0 < len(expected) < len(events)


@pytest.mark.parametrize(("page", "chunk_size"), [(1, 4096), (37, 512), (250, 65536)])
def test_continuation_tokens_resume_where_the_last_page_ended(page: int, chunk_size: int) -> None:
    events = thousand_events()
    blobs = write_feed(events, batch=13)
    seen: list[str] = []
    token = None
    for _ in range(len(events) + 2):
        pages = (
            feed_client(blobs, chunk_size)
            .list_changes(results_per_page=page)
            .by_page(continuation_token=token)
        )
        records: list[dict[str, Any]] = list(next(pages))
        seen.extend(r["id"] for r in records)
        token = pages.continuation_token
        if len(seen) >= len(events):
            break
    assert seen == [e.id for e in events]
    # A token from the last page resumes with nothing new, until new events arrive.
    more = event(5000, events[-1].time + timedelta(seconds=1))
    writer = FeedWriter()
    writer.blobs = blobs
    writer.write([more])
    pages = (
        feed_client(blobs, chunk_size).list_changes(results_per_page=page).by_page(continuation_token=token)
    )
    assert [r["id"] for p in pages for r in p] == [more.id]


def test_resumes_inside_a_chunk_that_grew_after_the_token() -> None:
    """A reader that stopped mid-chunk sees the blocks appended to that chunk later."""
    events = [event(n, T0 + timedelta(seconds=n)) for n in range(40)]
    writer = FeedWriter()
    writer.write(events[:25])
    pages = feed_client(writer.blobs).list_changes(results_per_page=10).by_page()
    first = [r["id"] for r in next(pages)]
    token = pages.continuation_token
    writer.write(events[25:])
    pages = feed_client(writer.blobs).list_changes(results_per_page=10).by_page(continuation_token=token)
    rest = [r["id"] for p in pages for r in p]
    assert first + rest == [e.id for e in events]
