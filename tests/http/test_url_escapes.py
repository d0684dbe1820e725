"""Malformed percent-escapes in a URL path (a ``%`` not followed by two hex digits) are one rule
on every service: 400 ``InvalidUri``, never a name holding a literal ``%``. The SDKs always
encode ``%`` as ``%25``, so these requests are raw."""

from __future__ import annotations

import pytest
from azure.storage.blob import ContainerClient

from tests.blobhttp import BlobHttp
from tests.queuehttp import QueueHttp
from tests.rawhttp import RawClient
from tests.serverproc import ServerProcess

MALFORMED = ["%", "%zz", "a%2", "%G0", "a%%41", "%2%41"]


@pytest.mark.parametrize("escape", MALFORMED)
def test_blob_paths(server: ServerProcess, container: ContainerClient, escape: str) -> None:
    http = BlobHttp(server.blob_port)
    name = container.container_name
    for method, path in (
        ("PUT", f"/{name}/{escape}"),
        ("GET", f"/{name}/dir/{escape}/x"),
        ("PUT", f"/c{escape}?restype=container"),
    ):
        reply = http.request(method, path, {"x-ms-blob-type": "BlockBlob"}, b"x" if method == "PUT" else b"")
        assert (reply.status, reply.code) == (400, "InvalidUri"), (method, path)
    assert [blob.name for blob in container.list_blobs()] == []


def test_well_formed_escapes_still_name_blobs(server: ServerProcess, container: ContainerClient) -> None:
    http = BlobHttp(server.blob_port)
    name = container.container_name
    assert http.request("PUT", f"/{name}/100%25%41", {"x-ms-blob-type": "BlockBlob"}, b"x").status == 201
    assert [blob.name for blob in container.list_blobs()] == ["100%A"]


@pytest.mark.parametrize("escape", MALFORMED)
def test_queue_paths(server: ServerProcess, queue_name: str, escape: str) -> None:
    http = QueueHttp(server.queue_port)
    assert http.create(queue_name).status == 201
    try:
        for method, path in (
            ("PUT", f"/{queue_name}{escape}"),
            ("GET", f"/{queue_name}/messages/{escape}?popreceipt=x"),
            ("GET", f"/{escape}?comp=list"),
        ):
            response = http.request(method, path)
            assert (response.status, response.header("x-ms-error-code")) == (400, "InvalidUri"), path
    finally:
        http.delete(queue_name)


@pytest.mark.parametrize("escape", MALFORMED)
def test_table_paths(raw: RawClient, table_name: str, escape: str) -> None:
    assert raw.create_table(table_name).status == 201
    try:
        for target in (
            f"{table_name}{escape}()",
            f"{table_name}(PartitionKey='{escape}',RowKey='r')",
            f"Tables('{escape}')",
        ):
            response = raw.request("GET", target)
            assert (response.status, response.header("x-ms-error-code")) == (400, "InvalidUri"), target
    finally:
        raw.request("DELETE", f"Tables('{table_name}')")
