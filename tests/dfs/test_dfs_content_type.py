"""A path's content type when no ``x-ms-content-type`` names one: ``application/octet-stream``,
as Azure answers Get Properties of a file or directory made by Create Path without one
(recorded for azure-storage-file-datalake's test_flush_data, test_list_paths_create_expiry, and
test_get_properties of files, which sends a language and a disposition but no type, and of
directories). Driven by the SDK (sync and aio) against ``tabulae serve --hns``, and raw HTTP."""

from __future__ import annotations

import asyncio

from azure.storage.blob import BlobServiceClient
from azure.storage.filedatalake import ContentSettings, FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

OCTET = "application/octet-stream"


def _blob_type(lake: ServerProcess, container: str, name: str) -> str | None:
    """A path's content type as the Blob API reads it (the SDK's directory properties have none)."""
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    properties = blobs.get_blob_client(container, name).get_blob_properties()
    return properties.content_settings.content_type


def test_created_files_and_directories_have_the_default_type(
    fs: FileSystemClient, lake: ServerProcess
) -> None:
    file = fs.create_file("plain.txt")
    assert file.get_file_properties().content_settings.content_type == OCTET
    file.append_data(b"abc", 0, 3)
    file.flush_data(3)
    assert file.get_file_properties().content_settings.content_type == OCTET
    download = file.download_file()
    assert download.properties.content_settings.content_type == OCTET
    assert download.readall() == b"abc"
    fs.create_directory("dir")
    assert _blob_type(lake, fs.file_system_name, "dir") == OCTET


def test_a_create_with_other_content_headers_still_defaults_the_type(fs: FileSystemClient) -> None:
    settings = ContentSettings(content_language="spanish", content_disposition="inline")
    file = fs.create_file("spanish.txt", content_settings=settings)
    file.append_data(b"abc", 0, 3)
    file.flush_data(3)
    got = file.get_file_properties().content_settings
    assert (got.content_type, got.content_language, got.content_disposition) == (OCTET, "spanish", "inline")


def test_a_named_type_is_kept(fs: FileSystemClient) -> None:
    file = fs.create_file("page.html", content_settings=ContentSettings(content_type="text/html"))
    file.append_data(b"<p>", 0, 3)
    file.flush_data(3)
    assert file.get_file_properties().content_settings.content_type == "text/html"
    file.flush_data(3, content_settings=ContentSettings(content_type="text/plain"))
    assert file.get_file_properties().content_settings.content_type == "text/plain"


def test_parents_made_on_the_way_have_the_default_type(fs: FileSystemClient, lake: ServerProcess) -> None:
    """Create Path and Put Blob make the missing directories above a path; they are directories
    like any other."""
    fs.create_file("a/b/file.txt")
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    container = blobs.get_container_client(fs.file_system_name)
    container.upload_blob("c/d/blob.txt", b"x")
    for name in ("a", "a/b", "c", "c/d"):
        properties = container.get_blob_client(name).get_blob_properties()
        assert properties.metadata.get("hdi_isfolder") == "true"
        assert properties.content_settings.content_type == OCTET
    listed = {blob.name: blob.content_settings.content_type for blob in container.list_blobs()}
    assert listed == dict.fromkeys(["a", "a/b", "a/b/file.txt", "c", "c/d", "c/d/blob.txt"], OCTET)


def test_aio_create(fs: FileSystemClient, lake: ServerProcess) -> None:
    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            client = service.get_file_system_client(fs.file_system_name)
            file = await client.create_file("aio.txt")
            await file.append_data(b"abcd", 0, 4)
            await file.flush_data(4)
            assert (await file.get_file_properties()).content_settings.content_type == OCTET
            await client.create_directory("aio-dir")

    asyncio.run(scenario())
    assert _blob_type(lake, fs.file_system_name, "aio-dir") == OCTET


def test_raw_create_and_head(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    name = fs.file_system_name
    created = http.request("PUT", f"/{name}/raw.bin?resource=file", {"x-ms-content-language": "de"})
    assert created.status == 201
    head = http.request("HEAD", f"/{name}/raw.bin")
    assert head.status == 200
    assert head.headers["content-type"] == OCTET and head.headers["content-language"] == "de"
