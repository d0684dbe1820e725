"""Versions on the writes that came late to them, through the official SDK (sync and aio) on each
store with ``--blob-versioning``: Set and Get Blob Tags of one version (``versionid``), and the
copies from a URL (Copy Blob From URL, Put Blob From URL, a pending Copy Blob) making a version
and answering with its ``x-ms-version-id``, as Put Blob does."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobSasPermissions, BlobServiceClient, ContainerClient, generate_blob_sas
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blob.remote_source import RemoteSource, content, remote_source
from tests.serverproc import DEV_KEY, ServerProcess

_names = itertools.count()


@pytest.fixture
def box(versioned: ServerProcess) -> Iterator[ContainerClient]:
    with BlobServiceClient.from_connection_string(versioned.connection_string) as service:
        yield service.create_container(f"vw{next(_names)}")


def test_tags_of_each_version(box: ContainerClient) -> None:
    blob = box.get_blob_client("tagged")
    v1 = blob.upload_blob(b"one")["version_id"]
    v2 = blob.upload_blob(b"two", overwrite=True)["version_id"]
    blob.set_blob_tags({"v": "1"}, version_id=v1)
    blob.set_blob_tags({"v": "2"}, version_id=v2)  # the current version, named by its id
    assert blob.get_blob_tags(version_id=v1) == {"v": "1"}
    assert blob.get_blob_tags(version_id=v2) == {"v": "2"}
    assert blob.get_blob_tags() == {"v": "2"}
    assert blob.get_blob_properties(version_id=v1).tag_count == 1
    missing = "2020-01-01T00:00:00.0000000Z"
    with pytest.raises(ResourceNotFoundError) as unknown:
        blob.get_blob_tags(version_id=missing)
    assert unknown.value.error_code == "BlobNotFound"
    with pytest.raises(ResourceNotFoundError):
        blob.set_blob_tags({"v": "x"}, version_id=missing)


def test_copies_from_a_url_make_versions(box: ContainerClient) -> None:
    source = box.get_blob_client("source")
    source.upload_blob(b"copied bytes")
    url = (
        source.url
        + "?"
        + generate_blob_sas(
            source.account_name,
            box.container_name,
            "source",
            account_key=DEV_KEY,
            permission=BlobSasPermissions(read=True),
            expiry=datetime.now(UTC) + timedelta(hours=1),
        )
    )
    target = box.get_blob_client("target")
    first = target.upload_blob(b"before")["version_id"]
    synced = target.start_copy_from_url(url, requires_sync=True)
    assert synced["copy_status"] == "success" and synced["version_id"] not in (None, first)
    put = target.upload_blob_from_url(url, overwrite=True)
    assert put["version_id"] not in (None, first, synced["version_id"])
    versions = [b.version_id for b in box.list_blobs(name_starts_with="target", include=["versions"])]
    assert versions == [first, synced["version_id"], put["version_id"]]
    assert target.download_blob(version_id=first).readall() == b"before"
    assert target.download_blob(version_id=synced["version_id"]).readall() == b"copied bytes"


@pytest.fixture(scope="module")
def remote() -> Iterator[RemoteSource]:
    with remote_source() as source:
        yield source


def test_a_pending_copy_makes_a_version(box: ContainerClient, remote: RemoteSource) -> None:
    target = box.get_blob_client("pending")
    first = target.upload_blob(b"before")["version_id"]
    copy = target.start_copy_from_url(remote.url("/data/3000?pieces=2&pause=0.2"))
    assert copy["version_id"] not in (None, first)
    for _ in range(300):
        props = target.get_blob_properties()
        if props.copy.status != "pending":
            break
        time.sleep(0.2)
    assert props.copy.status == "success" and props.version_id == copy["version_id"]
    assert target.download_blob().readall() == content(3000)
    assert target.download_blob(version_id=first).readall() == b"before"


def test_version_tags_with_the_async_client(versioned: ServerProcess) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(versioned.connection_string) as client:
            container = await client.create_container(f"avw{next(_names)}")
            blob = container.get_blob_client("a")
            v1 = (await blob.upload_blob(b"one"))["version_id"]
            await blob.upload_blob(b"two", overwrite=True)
            await blob.set_blob_tags({"old": "yes"}, version_id=v1)
            assert await blob.get_blob_tags(version_id=v1) == {"old": "yes"}
            assert await blob.get_blob_tags() == {}

    asyncio.run(run())
