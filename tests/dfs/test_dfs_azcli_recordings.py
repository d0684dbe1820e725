"""Data Lake answers compared with the az CLI's own recordings of real Azure
(``src/azure-cli/azure/cli/command_modules/storage/tests/latest/recordings/`` in Azure/azure-cli)
and azure-storage-file-datalake's (Azure/azure-sdk-assets), sent over raw HTTP in the shape the
CLI's Data Lake SDK sent them, and read through the SDK (sync and aio) against ``--hns``."""

from __future__ import annotations

import asyncio

import pytest
from azure.storage.filedatalake import FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

# `az storage fs access show` (test_adls_file_scenarios.yaml, azsdk-python-storage-dfs 12.2.0b1).
_CLI = {
    "Accept": "*/*",
    "User-Agent": "azsdk-python-storage-dfs/12.2.0b1 Python/3.7.8",
    "x-ms-version": "2020-02-10",
}
_ACCESS = (b"etag", b"last-modified", b"x-ms-owner", b"x-ms-group", b"x-ms-permissions", b"x-ms-acl")


@pytest.mark.parametrize("version", ["2020-02-10", "2025-07-05"])
def test_get_access_control_answers_no_content_length(
    fs: FileSystemClient, lake: ServerProcess, version: str
) -> None:
    """test_adls_file_scenarios.yaml (2020-02-10) and test_file.pyTestFiletest_get_access_control
    .json (2025-07-05): HEAD ``?action=getAccessControl&upn=false`` is 200 with Date, ETag,
    Last-Modified, Server, x-ms-acl, x-ms-group, x-ms-owner, x-ms-permissions and x-ms-version,
    and no Content-Length, where the Blob API's HEAD beside it says ``Content-Length: 0``. The
    file system's root is answered alike."""
    fs.create_file("file.txt")
    http = BlobHttp(lake.blob_port)
    name = fs.file_system_name
    for target in (f"/{name}/file.txt", f"/{name}/"):
        answer = http.request(
            "HEAD", f"{target}?action=getAccessControl&upn=false", {**_CLI, "x-ms-version": version}
        )
        assert answer.status == 200, answer
        assert "content-length" not in answer.headers and "transfer-encoding" not in answer.headers, (
            answer.headers
        )
        for header in _ACCESS:
            assert header.decode() in answer.headers, (target, header)
    blob_head = http.request("HEAD", f"/{name}/file.txt", {**_CLI, "x-ms-version": version})
    assert blob_head.headers["content-length"] == "0"


def test_sdk_reads_access_control(fs: FileSystemClient, lake: ServerProcess) -> None:
    """The SDK (sync and aio) reads the answer as before: owner, group, permissions and ACL."""
    file = fs.create_file("sdk.txt")
    sync = file.get_access_control()
    assert (sync["owner"], sync["permissions"], sync["acl"]) == (
        "$superuser",
        "rw-r-----",
        "user::rw-,group::r--,other::---",
    )

    async def scenario() -> dict[str, str]:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            client = service.get_file_system_client(fs.file_system_name).get_file_client("sdk.txt")
            return dict(await client.get_access_control())

    assert asyncio.run(scenario())["permissions"] == "rw-r-----"
