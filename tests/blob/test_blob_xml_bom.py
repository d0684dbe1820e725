"""Every XML body the Blob service sends starts with the UTF-8 byte order mark, as Azure's do;
the refusal of an unknown service version is written as Azure's front-end writes it.

Recorded from Azure: an error (``test_blob_access_conditions_async.py`` ``test_set_blob_props_
with_if_match_fail``: ``Content-Length: 252``, the mark's three bytes included) and a listing
(azure-storage-file-datalake ``test_file_system.py`` ``test_get_deleted_paths``, List Blobs on
the blob endpoint). Raw HTTP sees the bytes; the SDKs (sync and aio) read past the mark, which
the tests show for the same operations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.core.pipeline import PipelineRequest
from azure.storage.blob import (
    AccessPolicy,
    BlobBlock,
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

BOM = b"\xef\xbb\xbf"
DECLARATION = b'<?xml version="1.0" encoding="utf-8"?>'


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


def _version_hook(value: str) -> Callable[[PipelineRequest], None]:
    """Make the SDK send ``x-ms-version: value`` (it refuses to be built with a version it does
    not know)."""

    def hook(request: PipelineRequest) -> None:
        request.http_request.headers["x-ms-version"] = value

    return hook


def test_unknown_version_as_the_front_end_answers(http: BlobHttp) -> None:
    """Recorded (``test_blob_api_version.py`` ``test_invalid_service_version_message``): 400, the
    mark, a line break after the declaration, the code in the body only, no ``x-ms-version``."""
    reply = http.request("PUT", "/v?restype=container", {"x-ms-version": "2099-11-05"})
    assert reply.status == 400
    assert "x-ms-error-code" not in reply.headers and "x-ms-version" not in reply.headers
    assert reply.body.startswith(BOM + DECLARATION + b"\n<Error><Code>InvalidHeaderValue</Code>")
    assert int(reply.headers["content-length"]) == len(reply.body)
    fields = reply.error_fields()
    assert (fields["HeaderName"], fields["HeaderValue"]) == ("x-ms-version", "2099-11-05")
    head = http.request("HEAD", "/v?restype=container", {"x-ms-version": "2099-11-05"})
    assert (head.status, head.body, head.code) == (400, b"", None)


def test_sdk_reads_the_unknown_version_answer(server: ServerProcess) -> None:
    hook = _version_hook("2099-11-05")
    with (
        BlobServiceClient.from_connection_string(
            server.connection_string, retry_total=0, raw_request_hook=hook
        ) as service,
        pytest.raises(HttpResponseError) as error,
    ):
        service.create_container("unknownversion")
    assert (error.value.status_code, error.value.error_code) == (400, "InvalidHeaderValue")
    assert "The provided service version is not enabled on this storage account." in error.value.message

    async def scenario() -> HttpResponseError:
        async with AsyncBlobServiceClient.from_connection_string(
            server.connection_string, retry_total=0, raw_request_hook=hook
        ) as aservice:
            with pytest.raises(HttpResponseError) as aerror:
                await aservice.create_container("unknownversion")
            return aerror.value

    async_error = asyncio.run(scenario())
    assert (async_error.status_code, async_error.error_code) == (400, "InvalidHeaderValue")
    assert "The provided service version is not enabled on this storage account." in async_error.message


def test_invalid_snapshot_as_the_front_end_answers(http: BlobHttp, container: ContainerClient) -> None:
    """An unreadable ``snapshot`` is refused by Azure's front-end (recorded for the .NET SDK's
    GetBlockListAsync_Error, x-ms-version 2024-08-04): 400 InvalidQueryParameterValue naming it,
    the code in the body only, a line break after the declaration, and neither ``x-ms-version``
    nor the client's request id echoed. The SDK still reads the code."""
    blob = container.get_blob_client("snap")
    blob.upload_blob(b"abc")
    path = f"/{container.container_name}/snap"
    for query in ("?comp=blocklist&blocklisttype=all&snapshot=invalidSnapshot", "?snapshot=invalidSnapshot"):
        reply = http.request("GET", path + query, {"x-ms-client-request-id": "mine"})
        assert reply.status == 400
        for name in ("x-ms-error-code", "x-ms-version", "x-ms-client-request-id"):
            assert name not in reply.headers, name
        assert reply.body.startswith(BOM + DECLARATION + b"\n<Error><Code>InvalidQueryParameterValue</Code>")
        fields = reply.error_fields()
        assert (fields["QueryParameterName"], fields["QueryParameterValue"]) == (
            "snapshot",
            "invalidSnapshot",
        )
    head = http.request("HEAD", path + "?snapshot=invalidSnapshot")
    assert (head.status, head.body, head.code) == (400, b"", None)
    with pytest.raises(HttpResponseError) as raised:
        container.get_blob_client("snap", snapshot="invalidSnapshot").get_block_list()
    assert (raised.value.status_code, raised.value.error_code) == (400, "InvalidQueryParameterValue")
