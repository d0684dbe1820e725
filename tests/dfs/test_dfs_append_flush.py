"""Append with ``flush=true`` answers the flushed file's ETag and Last-Modified beside
``x-ms-request-server-encrypted: true``, as Azure does (recorded for azure-storage-file-datalake's
test_flush_data_with_bool and test_append_data_lease_action, where a Get Properties reads the
same ETag back); a plain Append answers neither. SDK sync and aio, and raw HTTP."""

from __future__ import annotations

import asyncio

from azure.storage.filedatalake import FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


def test_append_and_flush_answers_the_new_etag(fs: FileSystemClient) -> None:
    file = fs.create_file("f.txt")
    answered = file.append_data(b"abc", 0, 3, flush=True)
    properties = file.get_file_properties()
    assert properties.size == 3
    assert answered["etag"] == properties.etag  # the SDK reads no Last-Modified here: raw HTTP below
    assert answered["request_server_encrypted"] is True
    lease = "00000000-0000-0000-0000-00000000000a"
    released = file.append_data(b"de", 3, 2, flush=True, lease_action="acquire-release", lease=lease)
    assert released["etag"] == file.get_file_properties().etag != properties.etag
    assert file.download_file().readall() == b"abcde"


def test_aio_append_and_flush(fs: FileSystemClient, lake: ServerProcess) -> None:
    fs.create_file("aio.txt")

    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            file = service.get_file_client(fs.file_system_name, "aio.txt")
            answered = await file.append_data(b"xyz", 0, 3, flush=True)
            assert answered["etag"] == (await file.get_file_properties()).etag

    asyncio.run(scenario())


def test_raw_append_with_and_without_flush(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    name = fs.file_system_name
    fs.create_file("raw.bin")
    plain = http.request("PATCH", f"/{name}/raw.bin?action=append&position=0", body=b"12")
    assert plain.status == 202 and "etag" not in plain.headers and "last-modified" not in plain.headers
    flushed = http.request("PATCH", f"/{name}/raw.bin?action=append&position=2&flush=true", body=b"34")
    assert flushed.status == 202 and flushed.headers["x-ms-request-server-encrypted"] == "true"
    head = http.request("HEAD", f"/{name}/raw.bin")
    assert head.headers["content-length"] == "4"
    assert (flushed.headers["etag"], flushed.headers["last-modified"]) == (
        head.headers["etag"],
        head.headers["last-modified"],
    )
