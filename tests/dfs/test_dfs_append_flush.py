"""Append with ``flush=true`` answers the flushed file's ETag and Last-Modified beside
``x-ms-request-server-encrypted: true``, as Azure does (recorded for azure-storage-file-datalake's
test_flush_data_with_bool and test_append_data_lease_action, where a Get Properties reads the
same ETag back); a plain Append answers neither. SDK sync and aio, and raw HTTP."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
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


def test_a_leased_file_refuses_a_write_without_the_lease_in_dfs_words(
    fs: FileSystemClient, lake: ServerProcess
) -> None:
    """The DFS endpoint says "lease on the resource" where the Blob API says "on the blob", as
    Azure's recorded DFS answers do (the JS SDK's "append with acquire lease" reads it)."""
    file = fs.create_file("leased.txt")
    lease = "ca761232-ed42-11ce-bacd-00aa0057b223"
    file.append_data(b"HelloWorld", 0, 10, lease_action="acquire", lease_duration=15, lease=lease)
    words = "There is currently a lease on the resource and no lease ID was specified in the request."
    path = f"/{fs.file_system_name}/leased.txt"
    http = BlobHttp(lake.blob_port)
    for method, query in (("PATCH", "?action=append&position=10"), ("PATCH", "?action=flush&position=10")):
        body = b"again" if "append" in query else b""
        answer = http.request(method, path + query, {"Accept": "application/json"}, body)
        assert (answer.status, answer.headers["x-ms-error-code"]) == (412, "LeaseIdMissing")
        assert answer.body.decode().startswith('{"error":{"code":"LeaseIdMissing","message":"' + words)
    blob = http.request("PUT", path, {"x-ms-blob-type": "BlockBlob"}, b"x")  # the Blob API keeps its own
    assert b"lease on the blob and no lease ID" in blob.body


def test_auto_renew_renews_a_lease_that_ran_out_before_writing(fs: FileSystemClient) -> None:
    """Append and Flush with ``x-ms-lease-action: auto-renew`` and the lease id of a lease that
    ran out (nobody took the file since) renew it, then write holding it, as Azure answers the JS
    SDK's recorded "append with auto-renew lease". Each answer says ``x-ms-lease-renewed``:
    ``true`` for the lease that had run out (the JS SDK's recordings), ``false`` for the Flush
    that follows while it holds (the C++ SDK's DataLakeFileClientTest.FlushFileWithLease,
    x-ms-version 2021-06-08)."""
    lease = "ca761232-ed42-11ce-bacd-00aa0057b223"
    file = fs.create_file("renewed.txt", lease_id=lease, lease_duration=15)
    time.sleep(15.5)  # the shortest lease Azure takes has run out
    assert file.get_file_properties().lease.state == "expired"
    said: list[str | None] = []

    def hook(response: Any) -> None:
        said.append(response.http_response.headers.get("x-ms-lease-renewed"))

    file.append_data(b"HelloWorld", 0, 10, lease_action="auto-renew", lease=lease, raw_response_hook=hook)
    assert file.get_file_properties().lease.state == "leased"
    with pytest.raises(HttpResponseError) as refused:
        file.append_data(b"HelloWorld", 10, 10, flush=True)
    assert refused.value.status_code == 412
    file.flush_data(10, lease_action="auto-renew", lease=lease, raw_response_hook=hook)
    assert said == ["true", "false"]
    assert file.download_file().readall() == b"HelloWorld"
