"""Blob API writes that create a blob on an HNS account (``tabulae serve --hns``): a blob below a
file or over a directory with children is refused inside the write's transaction, so racing
writes never leave a file with children (issue 33), with the Blob SDK (sync and aio) on every
store."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobBlock, BlobServiceClient, ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
from azure.storage.filedatalake import FileSystemClient

from tests.serverproc import ServerProcess


@pytest.fixture
def container(fs: FileSystemClient, lake: ServerProcess) -> ContainerClient:
    return BlobServiceClient.from_connection_string(lake.connection_string).get_container_client(
        fs.file_system_name
    )


def _paths(fs: FileSystemClient) -> list[tuple[str, bool]]:
    return [(p.name, bool(p.is_directory)) for p in fs.get_paths(recursive=True)]


def _refused(code: str) -> pytest.RaisesExc[HttpResponseError]:
    return pytest.raises(HttpResponseError, check=lambda e: e.status_code == 409 and e.error_code == code)


def test_put_blob_below_a_file_stores_nothing(fs: FileSystemClient, container: ContainerClient) -> None:
    container.upload_blob("d/f.txt", b"file")
    with _refused("PathConflict"):
        container.upload_blob("d/f.txt/g", b"below a file")
    with _refused("PathConflict"):
        container.upload_blob("d/f.txt/h/i", b"deeper")
    assert not container.get_blob_client("d/f.txt/g").exists()
    assert not container.get_blob_client("d/f.txt/h").exists()
    assert _paths(fs) == [("d", True), ("d/f.txt", False)]
    assert container.download_blob("d/f.txt").readall() == b"file"


def test_put_block_list_and_copy_below_a_file_store_nothing(
    fs: FileSystemClient, container: ContainerClient
) -> None:
    container.upload_blob("f", b"file")
    staged = container.get_blob_client("f/blocks")
    staged.stage_block("b1", b"blocks")
    with _refused("PathConflict"):
        staged.commit_block_list([BlobBlock("b1")])
    copy = container.get_blob_client("f/copy")
    with _refused("PathConflict"):
        copy.start_copy_from_url(container.get_blob_client("f").url, requires_sync=False)
    with _refused("PathConflict"):
        copy.start_copy_from_url(container.get_blob_client("f").url, requires_sync=True)
    with _refused("PathConflict"):
        copy.upload_blob_from_url(container.get_blob_client("f").url)
    assert not staged.exists() and not copy.exists()
    assert _paths(fs) == [("f", False)]


def test_put_blob_over_a_directory(fs: FileSystemClient, container: ContainerClient) -> None:
    container.upload_blob("d/f.txt", b"child")
    with _refused("DirectoryIsNotEmpty"):
        container.upload_blob("d", b"over a directory", overwrite=True)
    with _refused("DirectoryIsNotEmpty"):
        container.get_blob_client("d").start_copy_from_url(container.get_blob_client("d/f.txt").url)
    assert _paths(fs) == [("d", True), ("d/f.txt", False)]
    assert container.get_blob_client("d").get_blob_properties().metadata == {"hdi_isfolder": "true"}
    # an empty directory is replaced, as Delete Blob removes it like a blob
    fs.create_directory("empty")
    container.upload_blob("empty", b"now a file", overwrite=True)
    assert ("empty", False) in _paths(fs)
    assert container.download_blob("empty").readall() == b"now a file"


def test_async_client(fs: FileSystemClient, lake: ServerProcess) -> None:
    async def scenario() -> None:
        async with AsyncBlobServiceClient.from_connection_string(lake.connection_string) as service:
            container = service.get_container_client(fs.file_system_name)
            await container.upload_blob("d/f.txt", b"file")
            with _refused("PathConflict"):
                await container.upload_blob("d/f.txt/g", b"below a file")
            assert not await container.get_blob_client("d/f.txt/g").exists()
            with _refused("DirectoryIsNotEmpty"):
                await container.upload_blob("d", b"over a directory", overwrite=True)

    asyncio.run(scenario())
    assert _paths(fs) == [("d", True), ("d/f.txt", False)]


_NAMESPACE_REFUSALS = {"PathConflict", "DirectoryIsNotEmpty"}


def _files_with_children(container: ContainerClient) -> list[str]:
    blobs = list(container.list_blobs(include=["metadata"]))
    files = {b.name for b in blobs if (b.metadata or {}).get("hdi_isfolder") != "true"}
    return sorted(f for f in files if any(b.name.startswith(f + "/") for b in blobs))


def test_racing_writes_never_leave_a_file_with_children(
    fs: FileSystemClient, container: ContainerClient
) -> None:
    """Put Blob of ``a`` against Put Blob and Create Path of names below it, side by side: each
    round ends with ``a`` a file and nothing below it, or a directory with its children; the
    losers are refused with the namespace's 409s, nothing else."""
    refused: list[str] = []

    def put_file(name: str) -> None:
        try:
            container.upload_blob(name, b"file", overwrite=True)
        except HttpResponseError as error:
            assert error.status_code == 409 and error.error_code in _NAMESPACE_REFUSALS, error
            refused.append(str(error.error_code))

    def create_path(name: str) -> None:
        try:
            fs.create_file(name)
        except HttpResponseError as error:
            assert error.status_code == 409 and error.error_code in _NAMESPACE_REFUSALS, error
            refused.append(str(error.error_code))

    with ThreadPoolExecutor(max_workers=8) as pool:
        for round_ in range(12):
            top = f"r{round_}/a"
            work = [
                (put_file, top), (put_file, f"{top}/b"), (put_file, top), (create_path, f"{top}/c"),
                (put_file, top), (put_file, f"{top}/d/e"), (put_file, top), (create_path, f"{top}/f"),
            ]  # fmt: skip
            tasks = [pool.submit(call, name) for call, name in work]
            for task in tasks:
                task.result(timeout=120)
    assert _files_with_children(container) == []
    assert refused  # the races were run, and some lost
