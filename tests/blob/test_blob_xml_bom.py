"""Every XML body the Blob service sends starts with the UTF-8 byte order mark, as Azure's do.

Recorded from Azure: an error (``test_blob_access_conditions_async.py`` ``test_set_blob_props_
with_if_match_fail``: ``Content-Length: 252``, the mark's three bytes included) and a listing
(azure-storage-file-datalake ``test_file_system.py`` ``test_get_deleted_paths``, List Blobs on
the blob endpoint). Raw HTTP sees the bytes; the SDKs (sync and aio) read past the mark, which
the tests show for the same operations.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import pytest
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import AccessPolicy, BlobBlock, ContainerClient, ContainerSasPermissions
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

BOM = b"\xef\xbb\xbf"
DECLARATION = b'<?xml version="1.0" encoding="utf-8"?>'


@pytest.fixture
def http(server: ServerProcess) -> BlobHttp:
    return BlobHttp(server.blob_port)


def document(http: BlobHttp, method: str, path: str, root: str, body: bytes = b"") -> ElementTree.Element:
    """The XML answer to a request: the mark, the declaration, a document with ``root``, and a
    ``Content-Length`` that counts the mark."""
    reply = http.request(method, path, {}, body)
    assert reply.status < 300, (reply.status, reply.body[:200])
    assert reply.headers["content-type"] == "application/xml"
    assert reply.body.startswith(BOM + DECLARATION), reply.body[:60]
    assert int(reply.headers["content-length"]) == len(reply.body)
    element = ElementTree.fromstring(reply.body)
    assert element.tag == root
    return element


def test_success_bodies_start_with_the_mark(http: BlobHttp, container: ContainerClient) -> None:
    name = container.container_name
    blob = container.get_blob_client("b")
    blob.upload_blob(b"abc", tags={"k": "v"})
    blob.stage_block("MDE=", b"x")
    container.get_blob_client("p").create_page_blob(1024)
    container.set_container_access_policy({"id": AccessPolicy(ContainerSasPermissions(read=True))})
    document(http, "GET", "/?comp=list", "EnumerationResults")
    document(http, "GET", f"/{name}?restype=container&comp=list", "EnumerationResults")
    document(http, "GET", f"/{name}/b?comp=blocklist&blocklisttype=all", "BlockList")
    document(http, "GET", f"/{name}/b?comp=tags", "Tags")
    document(http, "GET", f"/{name}/p?comp=pagelist", "PageList")
    document(http, "GET", f"/{name}?restype=container&comp=acl", "SignedIdentifiers")
    document(http, "GET", "/?restype=service&comp=properties", "StorageServiceProperties")
    document(http, "GET", "/?comp=blobs&where=%22k%22%3D%27v%27", "EnumerationResults")


def test_error_bodies_start_with_the_mark(http: BlobHttp, container: ContainerClient) -> None:
    reply = http.request("GET", f"/{container.container_name}/missing")
    assert reply.status == 404 and reply.code == "BlobNotFound"
    assert reply.body.startswith(BOM + DECLARATION + b"<Error><Code>BlobNotFound</Code>")
    assert int(reply.headers["content-length"]) == len(reply.body)
    assert reply.error_fields()["Code"] == "BlobNotFound"
    head = http.request("HEAD", f"/{container.container_name}/missing")
    assert head.status == 404 and head.body == b""  # no body, so no mark


def test_sdk_reads_past_the_mark(container: ContainerClient) -> None:
    blob = container.get_blob_client("b")
    blob.upload_blob(b"abc", tags={"k": "v"})
    blob.stage_block("MDE=", b"x")
    assert [b.name for b in container.list_blobs()] == ["b"]
    committed, uncommitted = blob.get_block_list("all")
    assert [b.id for b in uncommitted] == ["MDE="] and committed == []
    assert blob.get_blob_tags() == {"k": "v"}
    with pytest.raises(ResourceExistsError) as excinfo:
        blob.upload_blob(b"again")
    assert excinfo.value.error_code == "BlobAlreadyExists"
    with pytest.raises(ResourceNotFoundError) as missing:
        container.get_blob_client("missing").download_blob()
    assert missing.value.error_code == "BlobNotFound"
    blob.commit_block_list([BlobBlock("MDE=")])
    assert blob.download_blob().readall() == b"x"


def test_sdk_aio_reads_past_the_mark(server: ServerProcess, container: ContainerClient) -> None:
    async def scenario() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            client = service.get_container_client(container.container_name)
            blob = client.get_blob_client("b")
            await blob.upload_blob(b"abc", tags={"k": "v"})
            assert [b.name async for b in client.list_blobs()] == ["b"]
            assert await blob.get_blob_tags() == {"k": "v"}
            policy = AccessPolicy(
                ContainerSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1)
            )
            await client.set_container_access_policy({"id": policy})
            identifiers = (await client.get_container_access_policy())["signed_identifiers"]
            assert [identifier.id for identifier in identifiers] == ["id"]
            with pytest.raises(ResourceExistsError) as excinfo:
                await blob.upload_blob(b"again")
            assert excinfo.value.error_code == "BlobAlreadyExists"

    asyncio.run(scenario())
