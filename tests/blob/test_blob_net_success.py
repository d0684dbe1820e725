"""Successful Blob answers as Azure gave them to the .NET SDK (``Azure/azure-sdk-assets``,
``net/sdk/storage/Azure.Storage.Blobs/tests/SessionRecords/``).

* ``BlobBaseClientTests/GetSetTagsAsync.json`` (x-ms-version 2024-08-04; the JS SDK's recordings
  at 2019-12-12 agree, 162 bytes for two tags): Get Blob Tags answers the byte order mark, the
  XML declaration and a line break, then ``<Tags>``. The SDK (sync and aio) reads it.

Raw HTTP and the SDK against ``tabulae serve``.
"""

from __future__ import annotations

import asyncio

from azure.storage.blob import ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

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
