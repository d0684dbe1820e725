"""Setting a directory's metadata leaves it a directory.

Set Blob Metadata replaces the user's metadata, and clients send only their own: the Data Lake
SDKs' ``set_metadata`` on a directory, ``az storage fs directory metadata update``. Azure keeps
``hdi_isfolder=true`` and the directory (recorded for the .NET Data Lake SDK's
``DirectoryClientTests.SetMetadataAsync``: Get Properties then shows the new metadata,
``x-ms-meta-hdi_isfolder: true`` and ``x-ms-resource-type: directory``). Found with the az CLI:
the empty directory became a file (creating a file in it was 409 PathConflict), and one with
children refused the update (409 DirectoryIsNotEmpty).
"""

from __future__ import annotations

import asyncio

from azure.storage.filedatalake import FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


def test_an_empty_directory_keeps_being_a_directory(fs: FileSystemClient, lake: ServerProcess) -> None:
    directory = fs.create_directory("empty")
    directory.set_metadata({"k": "v"})
    assert directory.get_directory_properties().metadata == {"k": "v", "hdi_isfolder": "true"}
    fs.get_file_client("empty/inside.txt").create_file()  # a file below it: still a directory
    assert [(p.name, p.is_directory) for p in fs.get_paths()] == [
        ("empty", True),
        ("empty/inside.txt", False),
    ]
    reply = BlobHttp(lake.blob_port).request("HEAD", f"/{fs.file_system_name}/empty")
    assert reply.status == 200
    assert reply.headers["x-ms-resource-type"] == "directory"
    assert reply.headers["x-ms-meta-k"] == "v"
    assert reply.headers["x-ms-meta-hdi_isfolder"] == "true"


def test_a_directory_with_children_takes_new_metadata(fs: FileSystemClient) -> None:
    directory = fs.create_directory("full", metadata={"old": "1"})
    fs.get_file_client("full/child.txt").create_file()
    directory.set_metadata({"new": "2"})
    assert directory.get_directory_properties().metadata == {"new": "2", "hdi_isfolder": "true"}
    directory.set_metadata({})
    assert directory.get_directory_properties().metadata == {"hdi_isfolder": "true"}


def test_a_file_takes_exactly_its_metadata(fs: FileSystemClient) -> None:
    file = fs.get_file_client("plain.txt")
    file.create_file()
    file.set_metadata({"k": "v"})
    assert file.get_file_properties().metadata == {"k": "v"}


def test_async_set_metadata_keeps_the_directory(lake: ServerProcess, fs: FileSystemClient) -> None:
    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            directory = service.get_file_system_client(fs.file_system_name).get_directory_client("adir")
            await directory.create_directory()
            await directory.set_metadata({"a": "b"})
            properties = await directory.get_directory_properties()
            assert properties.metadata == {"a": "b", "hdi_isfolder": "true"}

    asyncio.run(scenario())
