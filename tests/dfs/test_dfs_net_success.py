"""Successful DFS answers as Azure gave them to the .NET SDK (``Azure/azure-sdk-assets``,
``net/sdk/storage/Azure.Storage.Files.DataLake/tests/SessionRecords/``, x-ms-version 2024-08-04).

* ``DirectoryClientTests/SetAccessControlRecursiveAsync.json``: Set Access Control Recursive is
  200 with ``x-ms-namespace-enabled: true`` and the JSON counts followed by a line break, and no
  ``Content-Type`` at all (so also the JS SDK's recordings of 2019-12-12 and 2020-02-10). The SDKs
  read a body without a type as JSON; the SDK (sync and aio) still gets its counts.

SDK and raw HTTP against ``tabulae serve --hns``.
"""

from __future__ import annotations

import asyncio
import json

from azure.storage.filedatalake import FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

NET = {"Accept": "application/json", "x-ms-version": "2024-08-04"}
ACL = "user::rwx,group::r--,other::---,mask::rwx"


def _tree(fs: FileSystemClient) -> None:
    fs.create_directory("top")
    fs.create_directory("top/sub")
    fs.create_file("top/sub/a.txt")
    fs.create_file("top/b.txt")


def test_set_access_control_recursive_has_no_content_type(fs: FileSystemClient, lake: ServerProcess) -> None:
    _tree(fs)
    answer = BlobHttp(lake.blob_port).request(
        "PATCH",
        f"/{fs.file_system_name}/top?action=setAccessControlRecursive&mode=set",
        {"x-ms-acl": ACL, **NET},
    )
    assert answer.status == 200, answer
    assert "content-type" not in answer.headers
    assert answer.headers["x-ms-namespace-enabled"] == "true"
    assert answer.body == (
        b'{"directoriesSuccessful":2,"failedEntries":[],"failureCount":0,"filesSuccessful":2}\n'
    )
    assert json.loads(answer.body)["filesSuccessful"] == 2


def test_the_sdk_reads_the_counts(fs: FileSystemClient) -> None:
    _tree(fs)
    result = fs.get_directory_client("top").set_access_control_recursive(acl=ACL)
    counts = result.counters
    assert (counts.directories_successful, counts.files_successful, counts.failure_count) == (2, 2, 0)
    assert "mask::rwx" in fs.get_file_client("top/b.txt").get_access_control()["acl"]


def test_the_async_sdk_reads_the_counts_in_batches(fs: FileSystemClient, lake: ServerProcess) -> None:
    _tree(fs)

    async def run() -> tuple[int, int, int]:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            directory = service.get_directory_client(fs.file_system_name, "top")
            result = await directory.update_access_control_recursive(acl="user::rwx", batch_size=1)
            counts = result.counters
            return counts.directories_successful, counts.files_successful, counts.failure_count

    assert asyncio.run(run()) == (2, 2, 0)
