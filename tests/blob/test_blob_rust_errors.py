"""Blob errors as Azure gave them to the Rust SDK's tests (``Azure/azure-sdk-assets``,
``rust/sdk/storage/azure_storage_blob/tests/data/``), replayed over raw HTTP against
``tabulae serve``, with the SDK (sync and aio) reading the same answers where it can."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobSasPermissions, BlobServiceClient, ContainerClient, generate_blob_sas
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

ROOT_ONLY = "This operation is only allowed on the root blob. Snapshot should not be provided."


def test_writes_naming_a_snapshot_are_refused_for_the_snapshot_parameter(
    container: ContainerClient, server: ServerProcess
) -> None:
    """``blob_client/test_blob_snapshot_error_cases.json`` (x-ms-version 2025-11-05): Set Blob
    Properties, Set Blob Metadata and Put Blob with ``snapshot=`` an existing snapshot are 400
    InvalidQueryParameterValue with QueryParameterName ``snapshot``, its value, and the Reason
    that the operation is only for the root blob (491 bytes with Azure's request id)."""
    http = BlobHttp(server.blob_port)
    path = f"/{container.container_name}/snapped"
    version = {"x-ms-version": "2025-11-05"}
    http.request("PUT", path, {"x-ms-blob-type": "BlockBlob", **version}, b"hello rusty world")
    snapshot = http.request("PUT", path + "?comp=snapshot", version).headers["x-ms-snapshot"]
    query = "snapshot=" + quote(snapshot)
    page = http.request("PUT", f"/{container.container_name}/paged", {"x-ms-blob-type": "PageBlob",
                        "x-ms-blob-content-length": "512", **version})  # fmt: skip
    assert page.status == 201
    page_snapshot = http.request("PUT", f"/{container.container_name}/paged?comp=snapshot", version)
    page_query = "snapshot=" + quote(page_snapshot.headers["x-ms-snapshot"])
    for method, target, headers, body in (
        ("PUT", f"{path}?comp=properties&{query}", {"x-ms-blob-content-language": "spanish"}, b""),
        ("PUT", f"{path}?{query}&comp=metadata", {"x-ms-meta-test_value": "test_key"}, b""),
        ("PUT", f"{path}?{query}", {"x-ms-blob-type": "BlockBlob"}, b"squash data"),
        # the same operations of a page blob
        ("PUT", f"/{container.container_name}/paged?comp=properties&{page_query}",
         {"x-ms-blob-content-length": "1024"}, b""),
        ("PUT", f"/{container.container_name}/paged?{page_query}",
         {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "512"}, b""),
    ):  # fmt: skip
        reply = http.request(method, target, {**headers, **version}, body)
        assert (reply.status, reply.code) == (400, "InvalidQueryParameterValue"), target
        fields = reply.error_fields()
        assert fields["Message"].split("\n")[0] == (
            "Value for one of the query parameters specified in the request URI is invalid."
        )
        assert fields["QueryParameterName"] == "snapshot"
        assert fields["QueryParameterValue"] in (snapshot, page_snapshot.headers["x-ms-snapshot"])
        assert fields["Reason"] == ROOT_ONLY
        assert reply.headers["x-ms-version"] == "2025-11-05"
    assert int(reply.headers["content-length"]) == len(reply.body)

    snap = container.get_blob_client("snapped", snapshot=snapshot)
    with pytest.raises(HttpResponseError) as caught:
        snap.set_blob_metadata({"a": "b"})
    assert caught.value.error_code == "InvalidQueryParameterValue"

    async def aio_metadata() -> str | None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            blob = service.get_blob_client(container.container_name, "snapped", snapshot=snapshot)
            try:
                await blob.set_blob_metadata({"a": "b"})
            except HttpResponseError as error:
                return error.error_code
        return None

    assert asyncio.run(aio_metadata()) == "InvalidQueryParameterValue"
    assert container.get_blob_client("snapped").download_blob().readall() == b"hello rusty world"


def test_a_malformed_version_id_is_refused_by_the_front_end(versioned: ServerProcess) -> None:
    """``blob_client/test_blob_version_error_cases.json`` (x-ms-version 2025-11-05): Get Blob
    Properties with ``versionid=invalid-version-id`` is a bare 400, with neither
    ``x-ms-error-code`` nor ``x-ms-version`` nor the client request id echoed, as a malformed
    ``snapshot`` is (the same recording's test_blob_snapshot_error_cases); a well-formed id of no
    version is 404 BlobNotFound with the code and the version."""
    service = BlobServiceClient.from_connection_string(versioned.connection_string)
    box = service.create_container("rustversionerrors")
    try:
        box.upload_blob("blob", b"hello rusty world")
        http = BlobHttp(versioned.blob_port)
        path = f"/{box.container_name}/blob"
        version = {"x-ms-version": "2025-11-05", "x-ms-client-request-id": "rust"}
        reply = http.request("HEAD", path + "?versionid=invalid-version-id", version)
        assert reply.status == 400
        for echoed in ("x-ms-error-code", "x-ms-version", "x-ms-client-request-id"):
            assert echoed not in reply.headers
        reply = http.request("GET", path + "?versionid=invalid-version-id", version)
        assert (reply.status, reply.code, reply.error_fields()["Code"]) == (
            400,
            None,
            "InvalidQueryParameterValue",
        )
        reply = http.request("HEAD", path + "?versionid=2000-05-11T00%3A00%3A00.0000000Z", version)
        assert (reply.status, reply.code, reply.headers["x-ms-version"]) == (
            404,
            "BlobNotFound",
            "2025-11-05",
        )
        with pytest.raises(HttpResponseError) as caught:
            box.get_blob_client("blob", version_id="invalid-version-id").get_blob_properties()
        assert caught.value.status_code == 400
    finally:
        service.delete_container(box.container_name)


def test_a_source_not_modified_is_a_304_with_the_sources_code(
    container: ContainerClient, server: ServerProcess
) -> None:
    """``append_blob_client/test_append_block_from_url_source_if_match.json`` (x-ms-version
    2026-04-06): Append Block From URL with ``x-ms-source-if-none-match`` the source's ETag is
    304 CannotVerifyCopySource with ``x-ms-copy-source-status-code: 304`` and
    ``x-ms-copy-source-error-code: ConditionNotMet`` (the code the source's Get Blob answers),
    and no body. Put Block From URL reads its source the same way."""
    source = container.upload_blob("source304", b"source")
    etag = source.get_blob_properties().etag
    container.get_blob_client("target304").create_append_blob()
    sas = generate_blob_sas(
        DEV_ACCOUNT, container.container_name, "source304", account_key=DEV_KEY,
        permission=BlobSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    url = f"{source.url}?{sas}"
    http = BlobHttp(server.blob_port)
    for query in ("comp=appendblock", "comp=block&blockid=AAAA"):
        reply = http.request(
            "PUT",
            f"/{container.container_name}/target304?{query}",
            {"x-ms-copy-source": url, "x-ms-source-if-none-match": etag, "x-ms-version": "2026-04-06"},
        )
        assert (reply.status, reply.code, reply.body) == (304, "CannotVerifyCopySource", b""), query
        assert reply.headers["x-ms-copy-source-status-code"] == "304"
        assert reply.headers["x-ms-copy-source-error-code"] == "ConditionNotMet"
    with pytest.raises(HttpResponseError) as caught:
        container.get_blob_client("target304").append_block_from_url(
            url, source_etag=etag, source_match_condition=MatchConditions.IfModified
        )
    assert caught.value.status_code == 304
