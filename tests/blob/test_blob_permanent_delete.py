"""Permanent delete ("Delete Blob", ``deletetype=permanent``) through the official SDK (sync and
aio) on each store: a soft-deleted snapshot or version is removed for good where the account
allows it (``AllowPermanentDelete`` in the delete retention policy, or the
``blob-permanent-delete`` account feature), with the 409s of the reference otherwise, the SAS
permission ``y``, and ``x-ms-delete-type-permanent`` on every Delete Blob answer."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import (
    BlobClient,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerClient,
    RetentionPolicy,
    generate_blob_sas,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_KEY, ServerProcess

_names = itertools.count()
PERMANENT = {"blob_delete_type": "Permanent"}  # the SDK's spelling of deletetype=permanent


def _policy(service: BlobServiceClient, allow: bool) -> None:
    """Soft delete for 2 days, permanent delete allowed or not (the Python SDK's RetentionPolicy
    does not take the flag, so it is set on the model it sends)."""
    policy = RetentionPolicy(enabled=True, days=2)
    policy.allow_permanent_delete = allow
    service.set_service_properties(delete_retention_policy=policy)


@pytest.fixture(scope="module", params=backend_names())
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    process = ServerProcess(
        tmp_path_factory.mktemp("permanent") / "data",
        extra_args=fresh_store(request.param),
        backend=request.param,
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture
def service(server: ServerProcess) -> Iterator[BlobServiceClient]:
    with BlobServiceClient.from_connection_string(server.connection_string) as client:
        _policy(client, allow=True)
        yield client


@pytest.fixture
def box(service: BlobServiceClient) -> ContainerClient:
    return service.create_container(f"perm{next(_names)}")


def _properties_xml(service: BlobServiceClient) -> str:
    """Get Blob Service Properties as sent (the SDK's RetentionPolicy drops the flag)."""
    bodies: list[str] = []
    service.get_service_properties(raw_response_hook=lambda r: bodies.append(r.http_response.text()))
    return bodies[0]


def _snapshots(container: ContainerClient) -> list[tuple[str | None, bool | None]]:
    return [(b.snapshot, b.deleted) for b in container.list_blobs(include=["snapshots", "deleted"])]


def _code(error: HttpResponseError) -> tuple[int | None, str | None]:
    return error.status_code, error.error_code


def _deleted_snapshot(box: ContainerClient, name: str) -> tuple[BlobClient, str]:
    blob = box.upload_blob(name, b"kept")
    snapshot = blob.create_snapshot()["snapshot"]
    box.get_blob_client(name, snapshot=snapshot).delete_blob()
    return blob, snapshot


def test_a_soft_deleted_snapshot_goes_for_good(box: ContainerClient) -> None:
    blob, snapshot = _deleted_snapshot(box, "doc")
    assert _snapshots(box) == [(snapshot, True), (None, None)]
    headers: dict[str, str] = {}
    box.get_blob_client("doc", snapshot=snapshot).delete_blob(
        raw_response_hook=lambda response: headers.update(response.http_response.headers), **PERMANENT
    )
    assert headers["x-ms-delete-type-permanent"] == "true"
    assert _snapshots(box) == [(None, None)]
    blob.undelete_blob()  # nothing left to bring back
    assert _snapshots(box) == [(None, None)]
    assert blob.download_blob().readall() == b"kept"


def test_refused_while_the_account_does_not_allow_it(
    service: BlobServiceClient, box: ContainerClient
) -> None:
    _, snapshot = _deleted_snapshot(box, "guarded")
    _policy(service, allow=False)
    assert "<AllowPermanentDelete>false</AllowPermanentDelete>" in _properties_xml(service)
    with pytest.raises(HttpResponseError) as refused:
        box.get_blob_client("guarded", snapshot=snapshot).delete_blob(**PERMANENT)
    assert _code(refused.value) == (409, "PermanentDeleteIsOff")
    assert _snapshots(box) == [(snapshot, True), (None, None)]  # untouched
    _policy(service, allow=True)
    assert "<AllowPermanentDelete>true</AllowPermanentDelete>" in _properties_xml(service)
    box.get_blob_client("guarded", snapshot=snapshot).delete_blob(**PERMANENT)
    assert _snapshots(box) == [(None, None)]


def test_bad_requests(box: ContainerClient) -> None:
    blob = box.upload_blob("live", b"x")
    snapshot = blob.create_snapshot()["snapshot"]
    with pytest.raises(HttpResponseError) as base:
        blob.delete_blob(**PERMANENT)  # neither snapshot nor versionid
    assert _code(base.value) == (409, "PermanentDeleteNeedsSnapshotOrVersion")
    with pytest.raises(HttpResponseError) as live:
        box.get_blob_client("live", snapshot=snapshot).delete_blob(**PERMANENT)
    assert _code(live.value) == (409, "BlobSnapshotNotSoftDeleted")
    with pytest.raises(ResourceNotFoundError) as missing:
        box.get_blob_client("live", snapshot="2020-01-01T00:00:00.0000000Z").delete_blob(**PERMANENT)
    assert missing.value.error_code == "BlobNotFound"
    with pytest.raises(HttpResponseError) as value:
        box.get_blob_client("live", snapshot=snapshot).delete_blob(blob_delete_type="Soft")
    assert _code(value.value) == (400, "InvalidQueryParameterValue")
    assert _snapshots(box) == [(snapshot, None), (None, None)]  # nothing changed
    headers: dict[str, str] = {}
    blob.delete_blob(
        delete_snapshots="include", raw_response_hook=lambda r: headers.update(r.http_response.headers)
    )
    assert headers["x-ms-delete-type-permanent"] == "false"  # soft-deleted


def test_the_sas_needs_permanent_delete(box: ContainerClient) -> None:
    blob, snapshot = _deleted_snapshot(box, "sas")

    def client(**permissions: bool) -> BlobClient:
        token = generate_blob_sas(
            blob.account_name,
            box.container_name,
            "sas",
            snapshot=snapshot,
            account_key=DEV_KEY,
            permission=BlobSasPermissions(**permissions),
            expiry=datetime.now(UTC) + timedelta(hours=1),
        )
        return BlobClient.from_blob_url(f"{blob.url}?snapshot={snapshot}", credential=token)

    with pytest.raises(HttpResponseError) as denied:
        client(delete=True, delete_previous_version=True).delete_blob(**PERMANENT)
    assert _code(denied.value) == (403, "AuthorizationPermissionMismatch")
    client(permanent_delete=True).delete_blob(**PERMANENT)
    assert _snapshots(box) == [(None, None)]


def test_versions_with_the_account_feature(tmp_path: Path) -> None:
    """A soft-deleted version goes for good; the feature flag allows it without the policy's flag."""
    process = ServerProcess(
        tmp_path / "data", extra_args=["--blob-versioning", "--blob-permanent-delete"], backend="sqlite"
    )
    process.start()
    try:
        with BlobServiceClient.from_connection_string(process.connection_string) as service:
            _policy(service, allow=False)
            box = service.create_container("versions")
            blob = box.get_blob_client("v")
            v1 = blob.upload_blob(b"one")["version_id"]
            v2 = blob.upload_blob(b"two", overwrite=True)["version_id"]
            with pytest.raises(HttpResponseError) as current:
                blob.delete_blob(version_id=v2, **PERMANENT)
            assert _code(current.value) == (409, "BlobSnapshotNotSoftDeleted")
            blob.delete_blob(version_id=v1)
            listed = [(b.version_id, b.deleted) for b in box.list_blobs(include=["versions", "deleted"])]
            assert listed == [(v1, True), (v2, None)]
            blob.delete_blob(version_id=v1, **PERMANENT)
            listed = [(b.version_id, b.deleted) for b in box.list_blobs(include=["versions", "deleted"])]
            assert listed == [(v2, None)]
            with pytest.raises(ResourceNotFoundError):
                blob.download_blob(version_id=v1)
    finally:
        process.stop()


def test_with_the_async_client(server: ServerProcess, service: BlobServiceClient) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as client:
            container = await client.create_container(f"aperm{next(_names)}")
            blob = await container.upload_blob("a", b"data")
            snapshot: Any = (await blob.create_snapshot())["snapshot"]
            kept = container.get_blob_client("a", snapshot=snapshot)
            await kept.delete_blob()
            await kept.delete_blob(**PERMANENT)
            listed = [b.snapshot async for b in container.list_blobs(include=["snapshots", "deleted"])]
            assert listed == [None]

    asyncio.run(run())
