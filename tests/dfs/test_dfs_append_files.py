"""Data Lake append files (x-ms-version 2026-02-06), as Azure answers the .NET SDK's
AppendFileClientTests (``Azure/azure-sdk-assets``,
``net/sdk/storage/Azure.Storage.Files.DataLake/tests/SessionRecords/AppendFileClientTests/``):

* ``AppendAsync.json``: ``PUT <file>?resource=file&blobtype=appendblob`` (201), then
  ``PATCH <file>?action=concurrentAppend`` with 1024 bytes: 202 with ``x-ms-append-offset: 0``,
  ``x-ms-committed-block-count: 1``, ``x-ms-request-server-encrypted: true``, no ETag; a Blob
  GET reads the bytes back with ``x-ms-blob-type: AppendBlob`` and
  ``x-ms-blob-committed-block-count: 1``.
* ``AppendAsync_ContentHash.json``: the Content-MD5 sent comes back.
* ``AppendAsync_IfAppendPositionEqual(False).json``: ``x-ms-conditional-appendpos: 1`` on an
  empty file is 412 ``InvalidAppendPosition`` (Content-Length 232, as here);
  ``...(True)`` appends.

No SDK of this machine sends these requests: raw HTTP.
"""

from __future__ import annotations

import base64
import hashlib
import json

from azure.storage.filedatalake import FileSystemClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

VERSION = {"Accept": "application/json", "x-ms-version": "2026-02-06"}
OCTETS = {**VERSION, "Content-Type": "application/octet-stream"}


def _append_file(http: BlobHttp, path: str) -> None:
    created = http.request("PUT", path + "?resource=file&blobtype=appendblob", VERSION)
    assert created.status == 201, created


def test_concurrent_append_adds_at_the_end(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/append.bin"
    _append_file(http, path)
    first = http.request("PATCH", path + "?action=concurrentAppend", OCTETS, b"a" * 1024)
    assert first.status == 202, first
    assert (first.headers["x-ms-append-offset"], first.headers["x-ms-committed-block-count"]) == ("0", "1")
    assert first.headers["x-ms-request-server-encrypted"] == "true"
    assert "etag" not in first.headers
    body = b"b" * 10
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    second = http.request(
        "PATCH",
        path + "?action=concurrentAppend",
        {**OCTETS, "Content-MD5": md5, "x-ms-conditional-appendpos": "1024"},
        body,
    )
    assert second.status == 202, second
    assert (second.headers["x-ms-append-offset"], second.headers["x-ms-committed-block-count"]) == (
        "1024",
        "2",
    )
    assert second.headers["content-md5"] == md5
    read = http.request("GET", path, {"x-ms-version": "2026-02-06"})
    assert read.status == 200 and read.body == b"a" * 1024 + body
    assert read.headers["x-ms-blob-type"] == "AppendBlob"
    assert read.headers["x-ms-blob-committed-block-count"] == "2"
    assert read.headers["x-ms-resource-type"] == "file"
    assert fs.get_file_client("append.bin").download_file().readall() == b"a" * 1024 + body


def test_append_position_other_than_the_length(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/position.bin"
    _append_file(http, path)
    refused = http.request(
        "PATCH", path + "?action=concurrentAppend", {**OCTETS, "x-ms-conditional-appendpos": "1"}, b"x" * 1024
    )
    assert (refused.status, refused.code) == (412, "InvalidAppendPosition"), refused
    error = json.loads(refused.body)["error"]
    words = "The append position conditional header parameter value is not equal to the length of the file."
    assert error["message"].startswith(words + "\nRequestId:")
    assert refused.headers["content-length"] == "232"  # as recorded: the same text, ids as long
    taken = http.request(
        "PATCH", path + "?action=concurrentAppend", {**OCTETS, "x-ms-conditional-appendpos": "0"}, b"x" * 1024
    )
    assert taken.status == 202, taken


def test_concurrent_append_to_a_missing_file(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    answer = http.request("PATCH", f"/{fs.file_system_name}/missing?action=concurrentAppend", OCTETS, b"x")
    assert (answer.status, answer.code) == (404, "PathNotFound"), answer


def test_an_ordinary_file_stays_a_block_blob(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/plain.bin"
    assert http.request("PUT", path + "?resource=file&blobtype=blockblob", VERSION).status == 201
    assert http.request("HEAD", path, {"x-ms-version": "2026-02-06"}).headers["x-ms-blob-type"] == "BlockBlob"
