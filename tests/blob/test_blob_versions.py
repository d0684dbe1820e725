"""Blob versioning through the official SDK (sync and aio) on each store, on a server started
with ``--blob-versioning``: every write of a blob (Put Blob, Put Block List, Copy Blob, Set Blob
Metadata) makes a version and answers its id, property changes do not; reads, properties, tier
and delete by ``versionid``; listings with ``include=versions``; deleting the blob keeps its
versions; promoting a version by copying it over the blob; a SAS scoped to a version."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import (
    BlobBlock,
    BlobClient,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ContentSettings,
    StandardBlobTier,
    generate_blob_sas,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

_names = itertools.count()


@pytest.fixture
def box(versioned: ServerProcess) -> Iterator[ContainerClient]:
    with BlobServiceClient.from_connection_string(versioned.connection_string) as service:
        container = service.create_container(f"versions{next(_names)}")
        yield container


def _versions(container: ContainerClient, name: str) -> list[tuple[str, bool | None]]:
    return [
        (blob.version_id, blob.is_current_version)
        for blob in container.list_blobs(name_starts_with=name, include=["versions"])
        if blob.name == name
    ]


def test_every_write_makes_a_version_and_reads_name_them(box: ContainerClient) -> None:
    blob = box.get_blob_client("doc")
    v1 = blob.upload_blob(b"one")["version_id"]
    v2 = blob.upload_blob(b"two!", overwrite=True)["version_id"]
    blob.stage_block("YQ==", b"three")
    v3 = blob.commit_block_list([BlobBlock("YQ==")])["version_id"]
    v4 = blob.set_blob_metadata({"k": "v"})["version_id"]
    assert None not in (v1, v2, v3, v4) and v1 < v2 < v3 < v4
    etag = blob.set_http_headers(ContentSettings(content_type="text/plain"))["etag"]
    props = blob.get_blob_properties()  # a property change makes no version
    assert (props.version_id, props.is_current_version, props.etag) == (v4, True, etag)
    assert blob.download_blob(version_id=v1).readall() == b"one"
    assert blob.download_blob(version_id=v2).readall() == b"two!"
    assert blob.download_blob(version_id=v4).readall() == b"three"  # the current one, by its id
    old = blob.get_blob_properties(version_id=v2)
    assert (old.version_id, old.is_current_version, old.size) == (
        v2,
        None,
        4,
    )  # no x-ms-is-current-version for a previous version
    assert blob.get_blob_properties(version_id=v3).metadata == {}
    assert _versions(box, "doc") == [(v1, None), (v2, None), (v3, None), (v4, True)]
    plain = [b for b in box.list_blobs() if b.name == "doc"]
    assert len(plain) == 1 and plain[0].version_id == v4


def test_delete_keeps_versions_and_copy_promotes_one(box: ContainerClient) -> None:
    blob = box.get_blob_client("kept")
    v1 = blob.upload_blob(b"first")["version_id"]
    v2 = blob.upload_blob(b"second", overwrite=True)["version_id"]
    blob.delete_blob()
    assert not blob.exists()
    assert blob.exists(version_id=v2)
    assert _versions(box, "kept") == [(v1, None), (v2, None)]  # no current version
    with pytest.raises(ResourceNotFoundError):
        blob.download_blob()
    promoted = blob.start_copy_from_url(f"{blob.url}?versionid={v1}")
    assert promoted["copy_status"] == "success" and promoted["version_id"] > v2
    assert blob.download_blob().readall() == b"first"
    assert [v for v, _ in _versions(box, "kept")] == [v1, v2, promoted["version_id"]]
    blob.delete_blob(version_id=v1)
    assert not blob.exists(version_id=v1)
    assert blob.exists() and [v for v, _ in _versions(box, "kept")] == [v2, promoted["version_id"]]
    with pytest.raises(ResourceNotFoundError) as missing:
        blob.delete_blob(version_id=v1)
    assert missing.value.error_code == "BlobNotFound"
    with pytest.raises(HttpResponseError) as root:  # the current version by its id: Azure refuses
        blob.delete_blob(version_id=promoted["version_id"])
    assert (root.value.status_code, root.value.error_code) == (403, "OperationNotAllowedOnRootBlob")
    assert blob.download_blob().readall() == b"first"


def test_tier_by_version_and_snapshots_stay_apart(box: ContainerClient) -> None:
    blob = box.get_blob_client("tiered")
    v1 = blob.upload_blob(b"abc")["version_id"]
    taken = blob.create_snapshot()  # a snapshot makes a version too
    snapshot, v2 = taken["snapshot"], taken["version_id"]
    assert v2 > v1 and blob.get_blob_properties().version_id == v2
    v3 = blob.upload_blob(b"efgefg", overwrite=True)["version_id"]
    blob.set_standard_blob_tier(StandardBlobTier.COOL, version_id=v1)
    assert blob.get_blob_properties(version_id=v1).blob_tier == "Cool"
    assert blob.get_blob_properties().blob_tier == "Hot"
    listed = [(b.snapshot, b.version_id) for b in box.list_blobs(include=["snapshots", "versions"])]
    assert listed == [(snapshot, None), (None, v1), (None, v2), (None, v3)]
    with pytest.raises(HttpResponseError) as present:
        blob.delete_blob()
    assert present.value.error_code == "SnapshotsPresent"
    blob.delete_blob(delete_snapshots="include")  # the snapshot goes, the versions stay
    left = [(b.snapshot, b.version_id) for b in box.list_blobs(include=["snapshots", "versions"])]
    assert left == [(None, v1), (None, v2), (None, v3)]


def test_a_sas_scoped_to_a_version_deletes_it(box: ContainerClient) -> None:
    blob = box.get_blob_client("signed")
    v1 = blob.upload_blob(b"abcde")["version_id"]
    blob.upload_blob(b"abc", overwrite=True)
    token = generate_blob_sas(
        DEV_ACCOUNT,
        box.container_name,
        "signed",
        version_id=v1,
        account_key=DEV_KEY,
        permission=BlobSasPermissions(read=True, delete_previous_version=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    scoped = BlobClient.from_blob_url(blob.url, credential=token)
    assert scoped.download_blob(version_id=v1).readall() == b"abcde"
    scoped.delete_blob(version_id=v1)
    assert not blob.exists(version_id=v1)
    assert blob.download_blob().readall() == b"abc"


def test_bad_version_ids_and_writes_naming_a_version(versioned: ServerProcess, box: ContainerClient) -> None:
    box.upload_blob("raw", b"x")
    http = BlobHttp(versioned.blob_port)
    reply = http.request("GET", f"/{box.container_name}/raw?versionid=yesterday")  # the front-end's
    assert (reply.status, reply.code, reply.error_fields()["Code"]) == (
        400,
        None,
        "InvalidQueryParameterValue",
    )
    reply = http.request("GET", f"/{box.container_name}/raw?versionid=2020-01-01T00:00:00.0000000Z")
    assert (reply.status, reply.code) == (404, "BlobNotFound")
    reply = http.request(
        "PUT", f"/{box.container_name}/raw?comp=metadata&versionid=2020-01-01T00:00:00.0000000Z"
    )
    assert (reply.status, reply.code) == (400, "InvalidOperation")
    # a snapshot and a version at once: Azure's recorded 400 (the JS SDK's "get properties of a
    # blob version", a HEAD)
    both = "snapshot=2020-01-01T00:00:00.0000000Z&versionid=2020-01-01T00:00:00.0000000Z"
    for method in ("HEAD", "GET"):
        reply = http.request(method, f"/{box.container_name}/raw?{both}")
        assert (reply.status, reply.headers["x-ms-error-code"]) == (400, "MutuallyExclusiveQueryParameters")


def test_versions_with_the_async_client(versioned: ServerProcess) -> None:
    asyncio.run(_async_versions(versioned))


async def _async_versions(versioned: ServerProcess) -> None:
    async with AsyncBlobServiceClient.from_connection_string(versioned.connection_string) as service:
        container = await service.create_container(f"aversions{next(_names)}")
        blob = container.get_blob_client("a")
        v1 = (await blob.upload_blob(b"one"))["version_id"]
        v2 = (await blob.upload_blob(b"two", overwrite=True))["version_id"]
        assert await (await blob.download_blob(version_id=v1)).readall() == b"one"
        props = await blob.get_blob_properties()
        assert (props.version_id, props.is_current_version) == (v2, True)
        listed = [
            (b.version_id, b.is_current_version) async for b in container.list_blobs(include="versions")
        ]
        assert listed == [(v1, None), (v2, True)]
        await blob.delete_blob(version_id=v1)
        assert not await blob.exists(version_id=v1)
