"""Container-level WORM on a Data Lake file system (Azure supports it there): while a legal hold
or a retention policy applies, a file cannot be renamed or deleted through the DFS API, nor a
directory that has files (renames and recursive deletes are one transaction each, so the check is
inside it); once the hold is cleared they go through. Official azure-storage-file-datalake SDK on
each store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient

from tests.blob.test_blob_container_worm import _policy, _settle
from tests.serverproc import ServerProcess


@pytest.fixture
def fs(lake: ServerProcess) -> Iterator[FileSystemClient]:
    service = DataLakeServiceClient.from_connection_string(lake.connection_string)
    yield service.create_file_system("wormfs" + uuid.uuid4().hex[:10])


def _code(call) -> str | None:  # type: ignore[no-untyped-def]
    try:
        call()
    except HttpResponseError as error:
        assert error.status_code == 409, error
        return error.response.headers.get("x-ms-error-code")
    return None


def test_held_paths_are_neither_renamed_nor_deleted(lake: ServerProcess, fs: FileSystemClient) -> None:
    fs.create_file("a.txt").upload_data(b"kept", overwrite=True)
    fs.create_file("logs/x.log").upload_data(b"line", overwrite=True)
    fs.create_directory("empty")
    assert _policy(lake, fs.file_system_name, "PUT", {"legal-hold-tags": ["case7"]})[0] == 200
    _settle()
    held = "BlobImmutableDueToLegalHold"
    assert _code(lambda: fs.get_file_client("a.txt").delete_file()) == held
    assert _code(lambda: fs.get_file_client("a.txt").rename_file(f"{fs.file_system_name}/b.txt")) == held
    assert _code(lambda: fs.get_directory_client("logs").delete_directory()) == held
    assert (
        _code(lambda: fs.get_directory_client("logs").rename_directory(f"{fs.file_system_name}/old")) == held
    )
    names = sorted(p.name for p in fs.get_paths())
    assert names == ["a.txt", "empty", "logs", "logs/x.log"]
    fs.create_file("new.txt")  # new files may be made
    assert (
        _policy(lake, fs.file_system_name, "PUT", {"legal-hold-tags": [], "immutability-period-days": 1})[0]
        == 200
    )
    _settle()
    assert _code(lambda: fs.get_file_client("a.txt").delete_file()) == "BlobImmutableDueToPolicy"
    assert _policy(lake, fs.file_system_name, "PUT", {"immutability-period-days": 0})[0] == 200
    _settle()
    fs.get_file_client("a.txt").rename_file(f"{fs.file_system_name}/b.txt")
    fs.get_directory_client("logs").delete_directory()
    assert sorted(p.name for p in fs.get_paths()) == ["b.txt", "empty", "new.txt"]
