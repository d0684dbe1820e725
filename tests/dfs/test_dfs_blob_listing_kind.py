"""List Blobs of an account with a hierarchical namespace says of every blob whether it is a file
or a directory: ``<ResourceType>`` right after ``<Etag>`` in its properties, as Azure's listings
of such accounts do (recorded for the JavaScript SDK's tests, a List Blobs of an HNS account and
its listings of deleted paths). A flat account's listing has no such element; the Arrow form of
the listing keeps its own ResourceType column (``blob``). Raw HTTP, and the SDK (sync and aio)
reading the same listing."""

from __future__ import annotations

import asyncio
import uuid
from xml.etree import ElementTree

import pyarrow.ipc as ipc
from azure.storage.blob import BlobServiceClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
from azure.storage.filedatalake import FileSystemClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

ARROW = "application/vnd.apache.arrow.stream"


def _kinds(body: bytes) -> dict[str, tuple[str | None, list[str]]]:
    """Each blob's ResourceType and the order of its first property elements."""
    blobs = ElementTree.fromstring(body).find("Blobs")
    assert blobs is not None
    found = {}
    for blob in blobs.iter("Blob"):
        properties = blob.find("Properties")
        assert properties is not None
        tags = [element.tag for element in properties][:5]
        found[blob.findtext("Name") or ""] = (properties.findtext("ResourceType"), tags)
    return found


def test_hns_listing_names_files_and_directories(fs: FileSystemClient, lake: ServerProcess) -> None:
    fs.create_file("dir/sub/file.txt")
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    blobs.get_container_client(fs.file_system_name).upload_blob("loose.bin", b"x")
    http = BlobHttp(lake.blob_port)
    listed = http.request("GET", f"/{fs.file_system_name}?restype=container&comp=list")
    assert listed.status == 200
    order = ["Creation-Time", "Last-Modified", "Etag", "ResourceType", "Content-Length"]
    assert _kinds(listed.body) == {
        "dir": ("directory", order),
        "dir/sub": ("directory", order),
        "dir/sub/file.txt": ("file", order),
        "loose.bin": ("file", order),
    }
    delimited = http.request("GET", f"/{fs.file_system_name}?restype=container&comp=list&delimiter=/")
    assert {name: kind for name, (kind, _) in _kinds(delimited.body).items()} == {
        "dir": "directory",
        "loose.bin": "file",
    }


def test_the_sdk_reads_the_listing(fs: FileSystemClient, lake: ServerProcess) -> None:
    fs.create_file("a/b.txt")
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    container = blobs.get_container_client(fs.file_system_name)
    listed = {blob.name: blob.metadata or {} for blob in container.list_blobs(include=["metadata"])}
    assert listed == {"a": {"hdi_isfolder": "true"}, "a/b.txt": {}}

    async def scenario() -> list[str]:
        async with AsyncBlobServiceClient.from_connection_string(lake.connection_string) as service:
            client = service.get_container_client(fs.file_system_name)
            return [item.name async for item in client.walk_blobs()]

    assert sorted(asyncio.run(scenario())) == ["a", "a/"]


def test_the_arrow_listing_keeps_its_row_kind(fs: FileSystemClient, lake: ServerProcess) -> None:
    fs.create_file("d/f.txt")
    http = BlobHttp(lake.blob_port)
    accept = {"Accept": f"{ARROW},application/xml", "x-ms-version": "2026-12-06"}
    reply = http.request("GET", f"/{fs.file_system_name}?restype=container&comp=list", accept)
    table = ipc.open_stream(reply.body).read_all()
    assert table.column("ResourceType").to_pylist() == ["blob", "blob"]


def test_a_flat_accounts_listing_has_no_resource_type(server: ServerProcess) -> None:
    blobs = BlobServiceClient.from_connection_string(server.connection_string)
    container = blobs.create_container("flat" + uuid.uuid4().hex[:12])
    try:
        container.upload_blob("dir/file.txt", b"x")
        listed = BlobHttp(server.blob_port).request(
            "GET", f"/{container.container_name}?restype=container&comp=list"
        )
        assert _kinds(listed.body) == {
            "dir/file.txt": (
                None,
                ["Creation-Time", "Last-Modified", "Etag", "Content-Length", "Content-Type"],
            )
        }
    finally:
        container.delete_container()
