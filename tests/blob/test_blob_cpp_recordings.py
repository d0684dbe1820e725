"""Blob answers compared with Azure's recordings of the C++ SDK's tests
(``cpp/sdk/storage/azure-storage-{blobs,files-datalake}/test/ut/recordings/`` in
Azure/azure-sdk-assets), sent over raw HTTP as the C++ client sent them."""

from __future__ import annotations

from urllib.parse import quote
from xml.etree import ElementTree

from azure.storage.blob import ContainerClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


def test_a_prefix_xml_cannot_carry_is_listed_encoded(
    server: ServerProcess, container: ContainerClient
) -> None:
    """List Blobs with ``prefix=prefix%EF%BF%BF`` (U+FFFF, which XML cannot carry;
    DataLakeFileSystemClientTest.ListDeletedPathsEncoded, x-ms-version 2022-11-02): the listing
    has ``<Prefix Encoded="true">prefix%EF%BF%BF</Prefix>`` and each such name ``<Name
    Encoded="true">``, so the document stays well-formed XML."""
    http = BlobHttp(server.blob_port)
    name = container.container_name
    for blob in ("prefix\uffffdirectory", "prefix\ufffffile", "other"):
        put = http.request(
            "PUT", f"/{name}/{quote(blob)}", {"x-ms-blob-type": "BlockBlob", "x-ms-version": "2022-11-02"}
        )
        assert put.status == 201
    listed = http.request(
        "GET", f"/{name}?comp=list&prefix=prefix%EF%BF%BF&restype=container", {"x-ms-version": "2022-11-02"}
    )
    assert listed.status == 200
    assert (
        f'ContainerName="{name}"><Prefix Encoded="true">prefix%EF%BF%BF</Prefix><Blobs>'.encode()
        in listed.body
    )
    root = ElementTree.fromstring(listed.body)
    names = [(element.get("Encoded"), element.text) for element in root.iter("Name")]
    assert names == [("true", "prefix%EF%BF%BFdirectory"), ("true", "prefix%EF%BF%BFfile")]
    plain = http.request(
        "GET", f"/{name}?comp=list&prefix=oth&restype=container", {"x-ms-version": "2022-11-02"}
    )
    assert b"<Prefix>oth</Prefix>" in plain.body
