"""Sealed append blobs through the official SDK (sync and aio) on each store: Append Blob Seal,
``x-ms-blob-sealed`` and ``<Sealed>``, appends refused with 409 BlobIsSealed, and what a copy of
a sealed (or unsealed) append blob is; raw HTTP for the bad inputs."""

from __future__ import annotations

import asyncio

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


def test_seal_stops_appends_but_not_metadata(container: ContainerClient) -> None:
    blob = container.get_blob_client("log")
    blob.create_append_blob()
    blob.append_block(b"abc")
    before = blob.get_blob_properties()
    assert before.is_append_blob_sealed is None
    sealed = blob.seal_append_blob()
    assert sealed["blob_sealed"] is True and sealed["etag"] != before.etag
    with pytest.raises(HttpResponseError) as raised:
        blob.append_block(b"more")
    assert (raised.value.status_code, raised.value.error_code) == (409, "BlobIsSealed")
    blob.set_blob_metadata({"sealed": "yes"})
    props = blob.get_blob_properties()
    assert props.is_append_blob_sealed and props.metadata == {"sealed": "yes"} and props.size == 3
    assert blob.download_blob().readall() == b"abc"
    assert [b.is_append_blob_sealed for b in container.list_blobs()] == [True]
    assert blob.seal_append_blob()["blob_sealed"]  # sealing again succeeds
    blob.create_append_blob()  # re-created: a new, unsealed blob
    assert blob.get_blob_properties().is_append_blob_sealed is None
    blob.append_block(b"new")


def test_seal_conditions(container: ContainerClient) -> None:
    blob = container.get_blob_client("log")
    blob.create_append_blob()
    blob.append_block(b"12345")
    with pytest.raises(HttpResponseError) as raised:
        blob.seal_append_blob(appendpos_condition=1)
    assert (raised.value.status_code, raised.value.error_code) == (412, "AppendPositionConditionNotMet")
    with pytest.raises(HttpResponseError) as raised:
        blob.seal_append_blob(if_match='"0x1"')
    assert raised.value.status_code == 412
    lease = blob.acquire_lease()
    with pytest.raises(HttpResponseError) as raised:
        blob.seal_append_blob()
    assert (raised.value.status_code, raised.value.error_code) == (412, "LeaseIdMissing")
    assert blob.seal_append_blob(appendpos_condition=5, lease=lease)["blob_sealed"]
    block = container.upload_blob("block", b"x")
    with pytest.raises(HttpResponseError) as raised:
        block.seal_append_blob()
    assert (raised.value.status_code, raised.value.error_code) == (409, "InvalidBlobType")


def test_copies_of_sealed_blobs(container: ContainerClient) -> None:
    source = container.get_blob_client("source")
    source.create_append_blob()
    source.append_block(b"abc")
    unsealed = container.get_blob_client("sealed-by-copy")
    unsealed.start_copy_from_url(source.url, seal_destination_blob=True)
    assert unsealed.get_blob_properties().is_append_blob_sealed
    source.seal_append_blob()
    copy = container.get_blob_client("copy")
    copy.start_copy_from_url(source.url)
    assert copy.get_blob_properties().is_append_blob_sealed
    with pytest.raises(HttpResponseError) as raised:
        copy.append_block(b"x")
    assert raised.value.error_code == "BlobIsSealed"
    reopened = container.get_blob_client("reopened")
    reopened.start_copy_from_url(source.url, seal_destination_blob=False)
    assert reopened.get_blob_properties().is_append_blob_sealed is None
    reopened.append_block(b"def")
    assert reopened.download_blob().readall() == b"abcdef"


def test_seal_aio(server: ServerProcess, container: ContainerClient) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            blob = service.get_blob_client(container.container_name, "aio")
            await blob.create_append_blob()
            assert (await blob.seal_append_blob())["blob_sealed"]
            with pytest.raises(HttpResponseError) as raised:
                await blob.append_block(b"x")
            assert raised.value.error_code == "BlobIsSealed"
            assert (await blob.get_blob_properties()).is_append_blob_sealed

    asyncio.run(run())


def test_seal_raw(server: ServerProcess, container: ContainerClient) -> None:
    http = BlobHttp(server.blob_port)
    path = f"/{container.container_name}"
    assert http.request("PUT", f"{path}/none?comp=seal").code == "BlobNotFound"
    http.request("PUT", f"{path}/log", {"x-ms-blob-type": "AppendBlob"})
    reply = http.request("PUT", f"{path}/log?comp=seal", {"x-ms-blob-condition-appendpos": "x"})
    assert (reply.status, reply.code) == (400, "InvalidHeaderValue")
    reply = http.request("GET", f"{path}/log?comp=seal")
    assert (reply.status, reply.code) == (405, "UnsupportedHttpVerb")
    reply = http.request("PUT", f"{path}/log?comp=seal&snapshot=2020-01-01T00:00:00.0000000Z")
    assert (reply.status, reply.code) == (400, "InvalidOperation")
    reply = http.request("PUT", f"{path}/log?comp=seal")
    assert reply.status == 200 and reply.headers["x-ms-blob-sealed"] == "true" and "etag" in reply.headers
    head = http.request("HEAD", f"{path}/log")
    assert head.headers["x-ms-blob-sealed"] == "true" and "x-ms-access-tier" not in head.headers
    reply = http.request(
        "PUT", f"{path}/copy", {"x-ms-copy-source": http.base + f"{path}/log", "x-ms-seal-blob": "maybe"}
    )
    assert (reply.status, reply.code) == (400, "InvalidHeaderValue")
