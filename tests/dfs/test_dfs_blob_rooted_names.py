"""A Blob API name with a leading slash on an HNS account (``/{filesystem}//{file}``): the path
without it, as Azure reads it there (recorded for azure-storage-file-datalake 12.2's async
``test_read_file_async``, whose blob client kept the slash of ``/file...``). The async Data Lake
SDK of that generation (12.6 among them) sends every Blob API call of a file named so, so
reading, properties and metadata must all reach the file. A flat account keeps the name as sent:
``/f`` is a blob of its own there."""

from __future__ import annotations

import asyncio

from azure.storage.blob import BlobServiceClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
from azure.storage.filedatalake import FileSystemClient

from tests.serverproc import ServerProcess


def _write_file(fs: FileSystemClient, name: str, data: bytes) -> None:
    file = fs.get_file_client(name)
    file.create_file()
    file.append_data(data, 0, len(data))
    file.flush_data(len(data))


def test_a_leading_slash_names_the_file(fs: FileSystemClient, lake: ServerProcess) -> None:
    _write_file(fs, "f", b"content")
    container = BlobServiceClient.from_connection_string(lake.connection_string).get_container_client(
        fs.file_system_name
    )
    rooted = container.get_blob_client("/f")
    assert "//f" in rooted.url
    assert rooted.download_blob().readall() == b"content"
    assert rooted.get_blob_properties().size == 7
    rooted.set_blob_metadata({"k": "v"})
    assert container.get_blob_client("f").get_blob_properties().metadata == {"k": "v"}
    assert rooted.exists()
    assert [p.name for p in fs.get_paths()] == ["f"]


def test_a_leading_slash_names_the_file_aio(fs: FileSystemClient, lake: ServerProcess) -> None:
    _write_file(fs, "d/g", b"abc")

    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(lake.connection_string) as service:
            container = service.get_container_client(fs.file_system_name)
            rooted = container.get_blob_client("/d/g")
            assert await (await rooted.download_blob()).readall() == b"abc"
            assert (await rooted.get_blob_properties()).size == 3
            await rooted.upload_blob(b"replaced", overwrite=True)
        assert fs.get_file_client("d/g").download_file().readall() == b"replaced"

    asyncio.run(run())
    assert sorted(p.name for p in fs.get_paths(recursive=True)) == ["d", "d/g"]


def test_a_flat_account_keeps_the_slash(server: ServerProcess) -> None:
    service = BlobServiceClient.from_connection_string(server.connection_string)
    container = service.create_container("rooted")
    try:
        container.upload_blob("f", b"plain")
        container.get_blob_client("/f").upload_blob(b"rooted")
        assert container.download_blob("f").readall() == b"plain"
        assert container.get_blob_client("/f").download_blob().readall() == b"rooted"
        assert sorted(b.name for b in container.list_blobs()) == ["/f", "f"]
    finally:
        container.delete_container()
