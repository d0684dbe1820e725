"""Successful Blob answers as Azure gave them to the .NET SDK (``Azure/azure-sdk-assets``,
``net/sdk/storage/Azure.Storage.Blobs/tests/SessionRecords/``).

* ``BlobBaseClientTests/GetSetTagsAsync.json`` (x-ms-version 2024-08-04; the JS SDK's recordings
  at 2019-12-12 agree, 162 bytes for two tags): Get Blob Tags answers the byte order mark, the
  XML declaration and a line break, then ``<Tags>``. The SDK (sync and aio) reads it. The Rust
  SDK's recording of test_blob_tags (``rust/sdk/storage/azure_storage_blob/tests/data/
  blob_client/test_blob_tags.json``, 2026-04-06): tags set as ``hello``, ``ferris`` are read in
  key order, and no tags is ``<Tags><TagSet/></Tags>`` (64 bytes).
* ``PageBlobClientTests/GetPageRangesAsync.json`` (2024-08-04; the JS SDK's recordings of Get
  Page Ranges and its diff, 2019-07-07 to 2021-04-10, agree): ``<PageList>`` after a line
  break; the last page of a paged listing ends ``<NextMarker/>``, without a space.
* Find Blobs by Tags (the JS SDK's recordings, 2019-12-12 to 2021-04-10): a line break after
  the declaration; nothing found is ``<Blobs/><NextMarker/>``.

Raw HTTP and the SDK against ``tabulae serve``.
"""

from __future__ import annotations

import asyncio

from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

DECLARED = b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n'
TAGS = {"tagKey0": "tagValue0", "tagKey1": "tagValue1"}
RECORDED = (
    b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n'
    b"<Tags><TagSet><Tag><Key>tagKey0</Key><Value>tagValue0</Value></Tag>"
    b"<Tag><Key>tagKey1</Key><Value>tagValue1</Value></Tag></TagSet></Tags>"
)


def test_get_blob_tags_has_a_line_break_after_the_declaration(
    container: ContainerClient, server: ServerProcess
) -> None:
    blob = container.get_blob_client("tagged")
    blob.upload_blob(b"x" * 1024)
    blob.set_blob_tags(TAGS)
    answer = BlobHttp(server.blob_port).request(
        "GET",
        f"/{container.container_name}/tagged?comp=tags",
        {"Accept": "application/xml", "x-ms-version": "2024-08-04"},
    )
    assert answer.status == 200, answer
    assert answer.headers["content-type"] == "application/xml"
    assert answer.body == RECORDED
    assert answer.headers["content-length"] == "178"  # as recorded
    assert blob.get_blob_tags() == TAGS

    async def read() -> dict[str, str]:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            return await service.get_blob_client(container.container_name, "tagged").get_blob_tags()

    assert asyncio.run(read()) == TAGS


def test_get_blob_tags_in_key_order_and_none_as_an_empty_element(
    container: ContainerClient, server: ServerProcess
) -> None:
    blob = container.get_blob_client("ordered")
    blob.upload_blob(b"hello rusty world")
    blob.set_blob_tags({"hello": "world", "ferris": "crab"})
    http = BlobHttp(server.blob_port)
    path = f"/{container.container_name}/ordered?comp=tags"
    headers = {"Accept": "application/xml", "x-ms-version": "2026-04-06"}
    read = http.request("GET", path, headers)
    assert read.body == DECLARED + (
        b"<Tags><TagSet><Tag><Key>ferris</Key><Value>crab</Value></Tag>"
        b"<Tag><Key>hello</Key><Value>world</Value></Tag></TagSet></Tags>"
    )
    assert read.headers["content-length"] == "166"  # as recorded
    blob.set_blob_tags({})
    empty = http.request("GET", path, headers)
    assert empty.body == DECLARED + b"<Tags><TagSet/></Tags>"
    assert empty.headers["content-length"] == "64"  # as recorded
    assert blob.get_blob_tags() == {}


def test_get_page_ranges_has_a_line_break_after_the_declaration(
    container: ContainerClient, server: ServerProcess
) -> None:
    blob = container.get_blob_client("paged")
    blob.create_page_blob(4096)
    blob.upload_page(b"p" * 1024, offset=0, length=1024)
    blob.upload_page(b"q" * 1024, offset=2048, length=1024)
    http = BlobHttp(server.blob_port)
    headers = {"Accept": "application/xml", "x-ms-version": "2024-08-04", "x-ms-range": "bytes=0-4095"}
    answer = http.request("GET", f"/{container.container_name}/paged?comp=pagelist", headers)
    assert answer.status == 200, answer
    assert answer.body == DECLARED + (
        b"<PageList><PageRange><Start>0</Start><End>1023</End></PageRange>"
        b"<PageRange><Start>2048</Start><End>3071</End></PageRange></PageList>"
    )
    last = http.request("GET", f"/{container.container_name}/paged?comp=pagelist&maxresults=5", headers)
    assert last.body.endswith(b"</PageRange><NextMarker/></PageList>"), last.body
    ranges, _ = blob.get_page_ranges()
    assert ranges == [{"start": 0, "end": 1023}, {"start": 2048, "end": 3071}]


def test_find_blobs_by_tags_has_a_line_break_after_the_declaration(
    blob_service: BlobServiceClient, server: ServerProcess
) -> None:
    http = BlobHttp(server.blob_port)
    headers = {"Accept": "application/xml", "x-ms-version": "2024-08-04"}
    answer = http.request("GET", "/?comp=blobs&where=%22nobody%22%3D%27nothing%27", headers)
    assert answer.status == 200, answer
    assert answer.body.startswith(DECLARED + b"<EnumerationResults ServiceEndpoint=")
    assert answer.body.endswith(b"<Blobs/><NextMarker/></EnumerationResults>"), answer.body
    assert list(blob_service.find_blobs_by_tags("\"nobody\"='nothing'")) == []


def test_get_blob_has_the_tier_headers_from_2026_04_06(
    container: ContainerClient, server: ServerProcess
) -> None:
    """Azure's Get Blob answers ``x-ms-access-tier`` and ``x-ms-access-tier-inferred`` at
    x-ms-version 2026-04-06 (the Rust SDK's recordings ``rust/sdk/storage/azure_storage_blob/
    tests/data/blob_client/test_download_blob.json`` and ``test_gzip_blob_with_metadata_roundtrip
    .json``: ``Hot``, ``true``), and none at 2025-11-05 (``test_blob_version_read_operations.json``,
    a version's Get Blob)."""
    blob = container.get_blob_client("tiered")
    blob.upload_blob(b"hello rusty world")
    http = BlobHttp(server.blob_port)
    path = f"/{container.container_name}/tiered"
    got = http.request("GET", path, {"x-ms-range": "bytes=0-4194303", "x-ms-version": "2026-04-06"})
    assert got.status == 206 and got.body == b"hello rusty world"
    assert (got.headers["x-ms-access-tier"], got.headers["x-ms-access-tier-inferred"]) == ("Hot", "true")
    older = http.request("GET", path, {"x-ms-version": "2025-11-05"})
    assert older.status == 200 and "x-ms-access-tier" not in older.headers
    assert blob.download_blob().properties.blob_tier == "Hot"
