"""The containers Azure names itself, through the official SDK on each store: ``$root`` (whose
blobs a URL may address without a container segment), ``$web``, the system container ``$logs``
(listed only with ``include=system``), and Get Account Information at every level."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

ACCOUNT_INFO = {"sku_name": "Standard_LRS", "account_kind": "StorageV2", "is_hns_enabled": False}


@pytest.fixture
def root(blob_service: BlobServiceClient) -> Iterator[ContainerClient]:
    client = blob_service.get_container_client("$root")
    with contextlib.suppress(ResourceExistsError):
        client.create_container()
    yield client
    with contextlib.suppress(ResourceNotFoundError):
        client.delete_container()


def test_root_container(
    server: ServerProcess, blob_service: BlobServiceClient, root: ContainerClient
) -> None:
    root.upload_blob("top.txt", b"at the top", overwrite=True)
    http = BlobHttp(server.blob_port)
    reply = http.request("GET", "/top.txt")  # no container segment: the root container's blob
    assert reply.status == 200 and reply.body == b"at the top"
    assert http.request("GET", "/$root/top.txt").body == b"at the top"
    assert http.request("PUT", "/made.txt", {"x-ms-blob-type": "BlockBlob"}, b"made").status == 201
    assert sorted(b.name for b in root.list_blobs()) == ["made.txt", "top.txt"]
    assert "$root" in [c.name for c in blob_service.list_containers()]
    assert http.request("GET", "/nothing.txt").code == "BlobNotFound"


def test_web_container(blob_service: BlobServiceClient) -> None:
    web = blob_service.get_container_client("$web")
    with contextlib.suppress(ResourceExistsError):
        web.create_container()
    try:
        web.upload_blob("index.html", b"<p>hi</p>", overwrite=True)
        assert web.get_blob_client("index.html").download_blob().readall() == b"<p>hi</p>"
        assert "$web" in [c.name for c in blob_service.list_containers()]
    finally:
        web.delete_container()


def test_logs_is_a_system_container(blob_service: BlobServiceClient) -> None:
    assert blob_service.get_container_client("$logs").exists()  # every account has it
    assert "$logs" in [c.name for c in blob_service.list_containers(include_system=True)]
    assert "$logs" not in [c.name for c in blob_service.list_containers()]
    logs = blob_service.get_container_client("$logs")
    assert logs.get_container_properties().name == "$logs"
    logs.upload_blob("blob/2026/01/01/0000/000000.log", b"1.0;...", overwrite=True)
    assert [b.name for b in logs.list_blobs()] == ["blob/2026/01/01/0000/000000.log"]
    with pytest.raises(HttpResponseError) as raised:
        blob_service.create_container("$other")
    assert (raised.value.status_code, raised.value.error_code) == (400, "InvalidResourceName")


def test_pages_of_containers_skip_system_ones(
    blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    blob_service.list_containers(include_system=True).next()  # $logs exists
    other = blob_service.create_container(container.container_name + "b")
    try:
        whole = [c.name for c in blob_service.list_containers()]
        paged = [c.name for page in blob_service.list_containers(results_per_page=1).by_page() for c in page]
    finally:
        other.delete_container()
    assert paged == whole and "$logs" not in whole and other.container_name in whole


def test_account_information_everywhere(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    blob = container.upload_blob("b", b"x")
    for info in (
        blob_service.get_account_information(),
        container.get_account_information(),
        blob.get_account_information(),
    ):
        assert {key: info[key] for key in ACCOUNT_INFO} == ACCOUNT_INFO


def test_account_information_aio(server: ServerProcess, container: ContainerClient) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            blob = service.get_blob_client(container.container_name, "missing-is-fine")
            for info in (
                await service.get_account_information(),
                await service.get_container_client(container.container_name).get_account_information(),
                await blob.get_account_information(),
            ):
                assert {key: info[key] for key in ACCOUNT_INFO} == ACCOUNT_INFO

    asyncio.run(run())


def test_account_information_raw(server: ServerProcess) -> None:
    http = BlobHttp(server.blob_port)
    for path in ("/", "/c", "/c/b"):
        reply = http.request("HEAD", path + "?restype=account&comp=properties")
        assert reply.status == 200
        assert (reply.headers["x-ms-sku-name"], reply.headers["x-ms-account-kind"]) == (
            "Standard_LRS",
            "StorageV2",
        )
        assert reply.headers["x-ms-is-hns-enabled"] == "false"
    reply = http.request("PUT", "/?restype=account&comp=properties")
    assert (reply.status, reply.code) == (405, "UnsupportedHttpVerb")
