"""List Blobs from a name on (``startFrom``), up to a name (``endBefore``), and as an Apache Arrow
stream (``Accept: application/vnd.apache.arrow.stream``), through the SDK (sync and aio) and
raw HTTP, on each store.

``startFrom`` is how the Rust ``object_store`` crate (deltalake, polars) lists a Delta log from
a version on: a server that ignores it hands deltalake versions it did not ask for, and its
vacuum fails. The Arrow stream is the Python SDK's ``response_format="arrow"``; its shape here
is the one Azure's recorded answers have.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from urllib.parse import quote
from xml.etree import ElementTree

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from azure.storage.blob import ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

NAMES = ["a/b/blob2", "a/b/blob3", "a/blob1", "bar", "baz", "baz/foo", "foo", "foo/bar", "foo/foo"]
ARROW = "application/vnd.apache.arrow.stream"


def _fill(container: ContainerClient) -> None:
    for name in NAMES:
        container.upload_blob(
            name, b"abc123", metadata={"n": name.replace("/", "_")} if "/" in name else None
        )


def test_start_from_is_inclusive_and_composes_with_the_marker(container: ContainerClient) -> None:
    _fill(container)
    assert [b.name for b in container.list_blobs(start_from="baz")] == NAMES[4:]
    assert [b.name for b in container.list_blobs(start_from="bay")] == NAMES[4:]  # no such name
    assert [b.name for b in container.list_blobs(name_starts_with="foo", start_from="foo/")] == NAMES[7:]
    assert [b.name for b in container.list_blobs(name_starts_with="foo", start_from="a")] == NAMES[6:]
    assert list(container.list_blobs(start_from="zzz")) == []
    pages = [
        [b.name for b in page]
        for page in container.list_blobs(start_from="a/blob1", results_per_page=2).by_page()
    ]
    assert pages == [NAMES[2:4], NAMES[4:6], NAMES[6:8], NAMES[8:]]
    # A hierarchy from a name on, each prefix walked with the same start (the SDK's own test).
    walked: list[str] = []

    def walk(items) -> None:  # type: ignore[no-untyped-def]
        for item in items:
            if item.get("prefix"):
                walk(item)
            else:
                walked.append(item.name)

    walk(container.walk_blobs(name_starts_with="a/", start_from="a/b/", delimiter="/"))
    assert walked == ["a/b/blob2", "a/b/blob3", "a/blob1"]
    top = sorted(item.name for item in container.walk_blobs(start_from="b", delimiter="/"))
    assert top == ["bar", "baz", "baz/", "foo", "foo/"]


def test_start_from_aio(server: ServerProcess, container: ContainerClient) -> None:
    _fill(container)

    async def run() -> list[str]:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            client = service.get_container_client(container.container_name)
            return [b.name async for b in client.list_blobs(name_starts_with="a/", start_from="a/b/blob3")]

    assert asyncio.run(run()) == ["a/b/blob3", "a/blob1"]


def test_end_before_is_exclusive(server: ServerProcess, container: ContainerClient) -> None:
    _fill(container)
    http = BlobHttp(server.blob_port)
    reply = http.request(
        "GET", f"/{container.container_name}?restype=container&comp=list&startFrom=foo&endBefore=foo/foo"
    )
    assert reply.status == 200
    assert _xml_names(reply.body) == ["foo", "foo/bar"]
    paged = http.request(
        "GET", f"/{container.container_name}?restype=container&comp=list&endBefore=b&maxresults=2"
    )
    assert _xml_names(paged.body) == ["a/b/blob2", "a/b/blob3"]
    marker = quote(_xml_text(paged.body, "NextMarker"), safe="")
    last = http.request(
        "GET", f"/{container.container_name}?restype=container&comp=list&endBefore=b&marker={marker}"
    )
    assert _xml_names(last.body) == ["a/blob1"] and _xml_text(last.body, "NextMarker") == ""
    blobs = container.list_blobs(response_format="arrow", start_from="foo", end_before="foo/foo")
    assert [b.name for b in blobs] == ["foo", "foo/bar"]


def test_arrow_listing_through_the_sdk(container: ContainerClient) -> None:
    _fill(container)
    listed = list(container.list_blobs(response_format="arrow", include=["metadata"]))
    assert [b.name for b in listed] == NAMES
    first = listed[0]
    assert first.size == 6 and first.blob_type == "BlockBlob" and first.metadata == {"n": "a_b_blob2"}
    assert first.etag.strip('"') == container.get_blob_client(first.name).get_blob_properties().etag.strip(
        '"'
    )
    assert first.last_modified.tzinfo is not None and first.content_settings.content_md5 is not None
    assert listed[3].metadata == {}  # no metadata: an empty map, not none
    pages = [
        [b.name for b in page]
        for page in container.list_blobs(response_format="arrow", results_per_page=4).by_page()
    ]
    assert pages == [NAMES[:4], NAMES[4:8], NAMES[8:]]
    walked = [item.name for item in container.walk_blobs(response_format="arrow", delimiter="/")]
    assert walked == ["a/", "bar", "baz", "baz/", "foo", "foo/"]
    assert list(container.list_blob_names(response_format="arrow", name_starts_with="baz")) == [
        "baz",
        "baz/foo",
    ]


def test_arrow_listing_aio(server: ServerProcess, container: ContainerClient) -> None:
    _fill(container)

    async def run() -> list[str]:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            client = service.get_container_client(container.container_name)
            return [b.name async for b in client.list_blobs(response_format="arrow", name_starts_with="foo")]

    assert asyncio.run(run()) == ["foo", "foo/bar", "foo/foo"]


def test_arrow_stream_has_azures_shape(server: ServerProcess, container: ContainerClient) -> None:
    """The schema, types and metadata Azure's recorded answers have, one batch, then the
    end-of-stream marker; an empty listing has no column; XML for a client that asks for it."""
    http = BlobHttp(server.blob_port)
    listing = f"/{container.container_name}?restype=container&comp=list"
    accept = {"Accept": f"{ARROW},application/xml", "x-ms-version": "2026-12-06"}
    empty = http.request("GET", listing, accept)
    assert empty.status == 200 and empty.headers["content-type"] == ARROW
    reader = ipc.open_stream(empty.body)
    assert reader.schema.names == [] and reader.schema.metadata == {
        b"NumberOfRecords": b"0",
        b"NextMarker": b"",
    }
    assert [batch.num_rows for batch in reader] == [0]
    assert empty.body.endswith(b"\xff\xff\xff\xff\x00\x00\x00\x00")

    container.upload_blob("one", b"abc123")
    container.upload_blob("two/three", b"x")
    reply = http.request("GET", listing + "&delimiter=/&maxresults=1", accept)
    reader = ipc.open_stream(reply.body)
    schema = reader.schema
    assert schema.names == [
        "Name", "Creation-Time", "Last-Modified", "BlobType", "ResourceType", "Etag", "Content-Length",
        "Content-Type", "Content-MD5", "AccessTier", "AccessTierInferred", "LeaseState", "LeaseStatus",
        "ServerEncrypted",
    ]  # fmt: skip
    assert schema.field("Name").nullable is False and schema.field("ResourceType").nullable is False
    assert schema.field("Last-Modified").type == pa.timestamp("s")
    assert schema.field("Content-Length").type == pa.uint64()
    assert schema.field("ServerEncrypted").type == pa.bool_()
    assert schema.metadata[b"NumberOfRecords"] == b"1" and schema.metadata[b"NextMarker"]
    (row,) = reader.read_all().to_pylist()
    properties = container.get_blob_client("one").get_blob_properties()
    assert row["Name"] == "one" and row["ResourceType"] == "blob" and row["Content-Length"] == 6
    assert row["Etag"] == properties.etag.strip('"')
    assert row["Last-Modified"] == properties.last_modified.astimezone(UTC).replace(tzinfo=None)
    assert isinstance(row["Creation-Time"], datetime)
    marker = quote(schema.metadata[b"NextMarker"].decode(), safe="")
    rest = ipc.open_stream(http.request("GET", listing + f"&delimiter=/&marker={marker}", accept).body)
    assert rest.read_all().to_pylist() == [{"Name": "two/", "ResourceType": "blobprefix"}]
    xml = http.request("GET", listing, {"x-ms-version": "2026-12-06"})
    assert xml.headers["content-type"].startswith("application/xml") and _xml_names(xml.body) == [
        "one",
        "two/three",
    ]


def _xml_names(body: bytes) -> list[str]:
    return [name.text or "" for name in ElementTree.fromstring(body).iter("Name")]


def _xml_text(body: bytes, tag: str) -> str:
    return ElementTree.fromstring(body).findtext(tag) or ""


@pytest.mark.parametrize("version", ["2026-12-06"])
def test_newest_service_version_is_served(
    server: ServerProcess, container: ContainerClient, version: str
) -> None:
    reply = BlobHttp(server.blob_port).request(
        "GET", f"/{container.container_name}?restype=container", {"x-ms-version": version}
    )
    assert reply.status == 200 and reply.headers["x-ms-version"] == version
