"""Blob soft delete through the official SDK (sync and aio) on each store: with a
``DeleteRetentionPolicy`` set, deleted blobs, snapshots and versions are kept, listed with
``include=deleted`` (``Deleted``, ``DeletedTime``, ``RemainingRetentionDays``), brought back by
Undelete Blob, and purged once their retention has passed (the server's retention clock is
moved forward through the test-only clock file)."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient, RetentionPolicy
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

DAY = 86_400
_names = itertools.count()


class Clock:
    """The server's retention clock, moved forward by writing seconds into its file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.shift = 0.0
        path.write_text("0")

    def advance(self, seconds: float) -> None:
        self.shift += seconds
        self.path.write_text(repr(self.shift))


def start(tmp: Path, backend: str, *flags: str) -> tuple[ServerProcess, Clock]:
    clock = Clock(tmp / "clock")
    process = ServerProcess(tmp / "data", extra_args=[*fresh_store(backend), *flags], backend=backend)
    process.env = {
        **os.environ,
        "TABULAE_TEST_CLOCK_FILE": str(clock.path),
        "TABULAE_TEST_PURGE_SECONDS": "0.5",
    }
    process.start()
    return process, clock


@pytest.fixture(scope="module", params=backend_names())
def kept(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, Clock]]:
    """A server whose account keeps deleted blobs and containers for 2 days (no versioning)."""
    process, clock = start(
        tmp_path_factory.mktemp("softdelete"), request.param, "--container-soft-delete", "2"
    )
    with BlobServiceClient.from_connection_string(process.connection_string) as service:
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=2))
    yield process, clock
    process.stop()


@pytest.fixture
def box(kept: tuple[ServerProcess, Clock]) -> Iterator[ContainerClient]:
    with BlobServiceClient.from_connection_string(kept[0].connection_string) as service:
        yield service.create_container(f"soft{next(_names)}")


def _listed(container: ContainerClient, **kwargs: object) -> list[tuple[str, str | None, bool]]:
    return [(b.name, b.snapshot, b.deleted) for b in container.list_blobs(**kwargs)]  # type: ignore[arg-type]


def test_deleted_blob_and_snapshots_are_kept_listed_and_undeleted(box: ContainerClient) -> None:
    blob = box.upload_blob("doc", b"kept")
    snapshot = blob.create_snapshot()["snapshot"]
    blob.delete_blob(delete_snapshots="include")
    assert not blob.exists()
    assert _listed(box) == []
    assert _listed(box, include=["deleted"]) == [("doc", None, True)]
    listed = _listed(box, include=["deleted", "snapshots"])
    assert listed == [("doc", snapshot, True), ("doc", None, True)]
    deleted = next(iter(box.list_blobs(include=["deleted"])))
    # whole days left after the current one, as Azure lists a blob deleted just now (recorded)
    assert deleted.remaining_retention_days == 1 and deleted.deleted_time is not None
    assert deleted.size == 4
    with pytest.raises(ResourceNotFoundError):
        blob.download_blob(snapshot=snapshot)
    blob.undelete_blob()
    assert blob.download_blob().readall() == b"kept"
    assert blob.download_blob(snapshot=snapshot).readall() == b"kept"
    assert _listed(box, include=["deleted", "snapshots"]) == [("doc", snapshot, None), ("doc", None, None)]


def test_snapshot_delete_and_overwrite_keep_soft_deleted_snapshots(box: ContainerClient) -> None:
    blob = box.upload_blob("snap", b"one")
    snapshot = blob.create_snapshot()["snapshot"]
    box.get_blob_client("snap", snapshot=snapshot).delete_blob()
    assert _listed(box, include=["snapshots"]) == [("snap", None, None)]
    assert _listed(box, include=["snapshots", "deleted"])[0] == ("snap", snapshot, True)
    blob.upload_blob(b"two", overwrite=True)  # the overwritten state is kept, soft-deleted
    kept = [b for b in box.list_blobs(include=["snapshots", "deleted"]) if b.deleted]
    assert len(kept) == 2
    blob.undelete_blob()
    contents = [
        box.get_blob_client("snap", snapshot=b.snapshot).download_blob().readall()
        for b in box.list_blobs(include=["snapshots"])
    ]
    assert contents == [b"one", b"one", b"two"]


def test_a_new_blob_beside_a_deleted_one_and_errors(box: ContainerClient) -> None:
    blob = box.upload_blob("again", b"old")
    blob.delete_blob()
    box.upload_blob("again", b"new")
    assert _listed(box, include=["deleted"]) == [("again", None, None), ("again", None, True)]
    blob.undelete_blob()  # a live blob stays as it is
    assert blob.download_blob().readall() == b"new"
    with pytest.raises(ResourceNotFoundError) as missing:
        box.get_blob_client("never").undelete_blob()
    assert missing.value.error_code == "BlobNotFound"


def test_blob_rust_soft_deleted_reads(kept: tuple[ServerProcess, Clock], box: ContainerClient) -> None:
    """A read of a soft-deleted blob, snapshot or version is 404 BlobNotFound with
    ``x-ms-is-soft-deleted: true``, as Azure answered the Rust SDK (``Azure/azure-sdk-assets``
    ``rust/sdk/storage/azure_storage_blob/tests/data/blob_client/test_undelete_blob.json``,
    x-ms-version 2026-04-06: Get Blob after Delete Blob; ``test_blob_version_error_cases.json``,
    2025-11-05: Get Blob Properties of a deleted version, in test_versions_with_soft_delete).
    A blob that never was, or whose retention has ended, has no such header."""
    process, clock = kept
    http = BlobHttp(process.blob_port)
    path = f"/{box.container_name}/undeleted"
    blob = box.upload_blob("undeleted", b"hello rusty world")
    snapshot = blob.create_snapshot()["snapshot"]
    box.get_blob_client("undeleted", snapshot=snapshot).delete_blob()
    head = http.request("HEAD", f"{path}?snapshot={quote(snapshot)}")
    assert (head.status, head.code, head.headers.get("x-ms-is-soft-deleted")) == (404, "BlobNotFound", "true")
    blob.delete_blob(delete_snapshots="include")
    got = http.request("GET", path, {"x-ms-range": "bytes=0-4194303", "x-ms-version": "2026-04-06"})
    assert (got.status, got.code, got.headers.get("x-ms-is-soft-deleted")) == (404, "BlobNotFound", "true")
    assert got.headers["content-length"] == "215"  # as recorded
    never = http.request("HEAD", f"/{box.container_name}/never")
    assert (never.status, never.code, never.headers.get("x-ms-is-soft-deleted")) == (
        404,
        "BlobNotFound",
        None,
    )
    with pytest.raises(ResourceNotFoundError) as missing:
        blob.download_blob()
    assert missing.value.error_code == "BlobNotFound"
    blob.undelete_blob()
    assert blob.download_blob().readall() == b"hello rusty world"
    blob.delete_blob(delete_snapshots="include")  # the snapshot came back too
    clock.advance(2 * DAY + 60)  # its retention is over: gone, purged or not
    try:
        head = http.request("HEAD", path)
        assert (head.status, head.headers.get("x-ms-is-soft-deleted")) == (404, None)
    finally:
        clock.advance(-2 * DAY - 60)


def test_retention_ends_in_a_purge(kept: tuple[ServerProcess, Clock], box: ContainerClient) -> None:
    _, clock = kept
    blob = box.upload_blob("gone", b"x" * 1000)
    blob.delete_blob()
    clock.advance(DAY + 60)
    assert next(iter(box.list_blobs(include=["deleted"]))).remaining_retention_days == 0  # its last day
    clock.advance(DAY)
    assert _listed(box, include=["deleted"]) == []  # past retention: gone at once
    with pytest.raises(ResourceNotFoundError):
        blob.undelete_blob()
    time.sleep(5)  # the purge runs every half second here
    clock.advance(-2 * DAY - 60)  # back: were it not purged for good, it would show again
    assert _listed(box, include=["deleted"]) == []


def test_versions_with_soft_delete(tmp_path: Path) -> None:
    process, clock = start(tmp_path, "sqlite", "--blob-versioning")
    try:
        with BlobServiceClient.from_connection_string(process.connection_string) as service:
            service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=1))
            box = service.create_container("versions")
            blob = box.get_blob_client("v")
            v1 = blob.upload_blob(b"one")["version_id"]
            v2 = blob.upload_blob(b"two", overwrite=True)["version_id"]
            blob.delete_blob(version_id=v1)
            # the soft-deleted version's 404 says so (test_blob_rust_soft_deleted_reads)
            head = BlobHttp(process.blob_port).request("HEAD", f"/versions/v?versionid={quote(v1)}")
            assert (head.status, head.code, head.headers.get("x-ms-is-soft-deleted")) == (
                404,
                "BlobNotFound",
                "true",
            )
            listed = [(b.version_id, b.deleted) for b in box.list_blobs(include=["versions", "deleted"])]
            assert listed == [(v1, True), (v2, None)]
            assert [b.version_id for b in box.list_blobs(include=["versions"])] == [v2]
            blob.delete_blob()  # the current version becomes a previous one, not soft-deleted
            blob.undelete_blob()  # restores v1; makes nothing current
            assert not blob.exists()
            assert [(b.version_id, b.is_current_version) for b in box.list_blobs(include=["versions"])] == [
                (v1, None),
                (v2, None),
            ]
            clock.advance(2 * DAY)
            assert blob.download_blob(version_id=v1).readall() == b"one"  # undeleted: kept
    finally:
        process.stop()


def test_soft_delete_with_the_async_client(kept: tuple[ServerProcess, Clock]) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(kept[0].connection_string) as service:
            container = await service.create_container(f"asoft{next(_names)}")
            blob = await container.upload_blob("a", b"data")
            await blob.delete_blob()
            listed = [(b.name, b.deleted) async for b in container.list_blobs(include="deleted")]
            assert listed == [("a", True)]
            await blob.undelete_blob()
            assert await (await blob.download_blob()).readall() == b"data"

    asyncio.run(run())


def test_deleted_containers_are_kept_listed_restored_and_purged(kept: tuple[ServerProcess, Clock]) -> None:
    process, clock = kept
    with BlobServiceClient.from_connection_string(process.connection_string) as service:
        name = f"gone{next(_names)}"
        service.create_container(name, metadata={"a": "a"}).upload_blob("inside", b"still here")
        service.delete_container(name)
        with pytest.raises(ResourceNotFoundError):
            service.get_container_client(name).get_container_properties()
        assert name not in [c.name for c in service.list_containers()]
        deleted = [c for c in service.list_containers(include_deleted=True) if c.deleted and c.name == name]
        assert len(deleted) == 1 and deleted[0].version
        # with include=metadata a deleted container shows its metadata, as Azure's does (recorded
        # for the JS SDK's "undelete and list deleted file system should work")
        listed = service.list_containers(include_deleted=True, include_metadata=True)
        assert [c.metadata for c in listed if c.deleted and c.name == name] == [{"a": "a"}]
        restored = service.undelete_container(name, deleted[0].version)
        assert restored.get_blob_client("inside").download_blob().readall() == b"still here"
        service.delete_container(name)
        with pytest.raises(ResourceNotFoundError):
            service.undelete_container(name, "01DC36F49F23DCB2")
        service.create_container(name)  # a new one of that name beside the deleted one
        version = next(
            c.version for c in service.list_containers(include_deleted=True) if c.deleted and c.name == name
        )
        with pytest.raises(ResourceExistsError) as taken:
            service.undelete_container(name, version)
        assert taken.value.error_code == "ContainerAlreadyExists"
        clock.advance(3 * DAY)
        assert not [c for c in service.list_containers(include_deleted=True) if c.deleted and c.name == name]
        time.sleep(5)  # the purge runs every half second here
        clock.advance(-3 * DAY)
        assert not [c for c in service.list_containers(include_deleted=True) if c.deleted and c.name == name]
