"""Delete Path on an account without soft delete answers ``x-ms-delete-type-permanent: true``, as
Azure does (recorded for azure-storage-file-datalake's test_delete_file; a kept deletion answers
``false`` with its ``x-ms-deletion-id``, test_dfs_lifecycle's ground). SDK sync and aio, whose
delete reads no such header (seen here through a response hook), and raw HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

from azure.storage.filedatalake import FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


class _Answers:
    """The headers of every response a client gets (its ``raw_response_hook``)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []

    def __call__(self, response: Any) -> None:
        http = response.http_response
        self.seen.append((http.request.method, {k.lower(): v for k, v in http.headers.items()}))

    def deletes(self) -> list[dict[str, str]]:
        return [headers for method, headers in self.seen if method == "DELETE"]


def test_a_file_and_a_directory_deleted_for_good(fs: FileSystemClient) -> None:
    fs.create_file("d/f.txt")
    fs.create_file("g.txt")
    answers = _Answers()
    fs.get_file_client("g.txt").delete_file(raw_response_hook=answers)
    fs.get_directory_client("d").delete_directory(raw_response_hook=answers)
    deletes = answers.deletes()
    assert len(deletes) == 2
    for headers in deletes:
        assert headers["x-ms-delete-type-permanent"] == "true"
        assert "x-ms-deletion-id" not in headers
    assert list(fs.get_paths()) == []


def test_aio_delete(fs: FileSystemClient, lake: ServerProcess) -> None:
    fs.create_file("a.txt")
    answers = _Answers()

    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            await service.get_file_client(fs.file_system_name, "a.txt").delete_file(raw_response_hook=answers)

    asyncio.run(scenario())
    assert [headers["x-ms-delete-type-permanent"] for headers in answers.deletes()] == ["true"]


def test_raw_delete_path(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    name = fs.file_system_name
    fs.create_file("tree/leaf.txt")
    deleted = http.request("DELETE", f"/{name}/tree?recursive=true")
    assert deleted.status == 200 and deleted.headers["x-ms-delete-type-permanent"] == "true"
    missing = http.request("DELETE", f"/{name}/tree?recursive=true")
    assert missing.status == 404 and "x-ms-delete-type-permanent" not in missing.headers
