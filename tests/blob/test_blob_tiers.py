"""Access tiers of block blobs through the official SDK (sync and aio) on each store: the tier an
upload, a commit or a copy names, Set Blob Tier on blobs and snapshots, archived blobs refusing
reads and changes until rehydrated, the account default tier, and the tier properties in Get Blob
Properties and List Blobs; raw HTTP for the bad inputs the SDK cannot send."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobBlock, BlobServiceClient, ContainerClient, StandardBlobTier
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

ARCHIVED = "BlobArchived"


def error_of(call) -> HttpResponseError:  # type: ignore[no-untyped-def]
    with pytest.raises(HttpResponseError) as raised:
        call()
    return raised.value


def test_upload_commit_and_copy_name_a_tier(container: ContainerClient) -> None:
    plain = container.upload_blob("plain", b"data")
    props = plain.get_blob_properties()
    assert (props.blob_tier, props.blob_tier_inferred, props.blob_tier_change_time) == ("Hot", True, None)
    cool = container.upload_blob("cool", b"data", standard_blob_tier=StandardBlobTier.COOL)
    props = cool.get_blob_properties()
    assert props.blob_tier == "Cool" and not props.blob_tier_inferred
    assert props.blob_tier_change_time is not None
    committed = container.get_blob_client("committed")
    committed.stage_block("YQ==", b"abc")
    committed.commit_block_list([BlobBlock("YQ==")], standard_blob_tier=StandardBlobTier.COLD)
    assert committed.get_blob_properties().blob_tier == "Cold"
    copied = container.get_blob_client("copied")
    copied.start_copy_from_url(cool.url, standard_blob_tier=StandardBlobTier.ARCHIVE)
    assert copied.get_blob_properties().blob_tier == "Archive"
    inherited = container.get_blob_client("inherited")
    inherited.start_copy_from_url(cool.url)  # a copy without a tier has the default, inferred
    props = inherited.get_blob_properties()
    assert props.blob_tier == "Hot" and props.blob_tier_inferred
    listed = {blob.name: blob for blob in container.list_blobs()}
    assert listed["plain"].blob_tier == "Hot" and listed["plain"].blob_tier_inferred
    assert listed["cool"].blob_tier == "Cool" and not listed["cool"].blob_tier_inferred
    assert (
        listed["cool"].blob_tier_change_time
        == container.get_blob_client("cool").get_blob_properties().blob_tier_change_time
    )
    assert listed["committed"].blob_tier == "Cold" and listed["copied"].blob_tier == "Archive"


def test_set_tier_keeps_etag_and_archive_refuses_changes(container: ContainerClient) -> None:
    blob = container.upload_blob("b", b"content", metadata={"k": "v"})
    etag = blob.get_blob_properties().etag
    blob.set_standard_blob_tier(StandardBlobTier.COOL)
    props = blob.get_blob_properties()
    assert props.blob_tier == "Cool" and props.etag == etag and not props.blob_tier_inferred
    blob.set_standard_blob_tier(StandardBlobTier.ARCHIVE)
    props = blob.get_blob_properties()  # properties and metadata stay readable
    assert props.blob_tier == "Archive" and props.metadata == {"k": "v"} and props.archive_status is None
    for refused in (
        lambda: blob.download_blob().readall(),
        lambda: blob.download_blob(offset=1, length=2).readall(),
        lambda: blob.set_blob_metadata({"a": "b"}),
        lambda: blob.set_http_headers(),
        lambda: blob.create_snapshot(),
        lambda: container.get_blob_client("copy").start_copy_from_url(blob.url),
    ):
        error = error_of(refused)
        assert (error.status_code, error.error_code) == (409, ARCHIVED)
    assert blob.get_blob_properties().etag == etag  # nothing was changed
    blob.upload_blob(b"new", overwrite=True)  # an archived blob may be replaced
    props = blob.get_blob_properties()
    assert props.blob_tier == "Hot" and props.blob_tier_inferred
    assert blob.download_blob().readall() == b"new"


def test_rehydration_pending(container: ContainerClient) -> None:
    """The session server rehydrates in 10 s: long enough to see the pending state."""
    blob = container.upload_blob("r", b"content", standard_blob_tier=StandardBlobTier.ARCHIVE)
    blob.set_standard_blob_tier(StandardBlobTier.HOT)  # Standard priority
    props = blob.get_blob_properties()
    assert props.blob_tier == "Archive" and props.archive_status == "rehydrate-pending-to-hot"
    assert props.rehydrate_priority == "Standard" and not props.blob_tier_inferred
    listed = next(iter(container.list_blobs()))
    assert listed.archive_status == "rehydrate-pending-to-hot" and listed.rehydrate_priority == "Standard"
    blob.set_standard_blob_tier(StandardBlobTier.HOT, rehydrate_priority="High")  # raised, allowed
    assert blob.get_blob_properties().rehydrate_priority == "High"
    error = error_of(lambda: blob.set_standard_blob_tier(StandardBlobTier.COOL))
    assert (error.status_code, error.error_code) == (409, "BlobBeingRehydrated")
    error = error_of(lambda: blob.download_blob().readall())
    assert (error.status_code, error.error_code) == (409, ARCHIVED)


def test_snapshot_tier_is_its_own(container: ContainerClient) -> None:
    blob = container.upload_blob("s", b"content")
    snapshot = blob.create_snapshot()["snapshot"]
    frozen = container.get_blob_client("s", snapshot=snapshot)
    frozen.set_standard_blob_tier(StandardBlobTier.ARCHIVE)
    assert frozen.get_blob_properties().blob_tier == "Archive"
    assert blob.get_blob_properties().blob_tier == "Hot"
    assert blob.download_blob().readall() == b"content"
    error = error_of(lambda: frozen.download_blob().readall())
    assert (error.status_code, error.error_code) == (409, ARCHIVED)
    tiers = {(b.snapshot, b.blob_tier) for b in container.list_blobs(include=["snapshots"])}
    assert tiers == {(snapshot, "Archive"), (None, "Hot")}
    missing = container.get_blob_client("s", snapshot="2020-01-01T00:00:00.0000000Z")
    assert error_of(lambda: missing.set_standard_blob_tier("Hot")).error_code == "BlobNotFound"


def test_leased_blob_needs_its_lease(container: ContainerClient) -> None:
    blob = container.upload_blob("leased", b"x")
    lease = blob.acquire_lease()
    error = error_of(lambda: blob.set_standard_blob_tier(StandardBlobTier.COOL))
    assert (error.status_code, error.error_code) == (412, "LeaseIdMissing")
    blob.set_standard_blob_tier(StandardBlobTier.COOL, lease=lease)
    assert blob.get_blob_properties().blob_tier == "Cool"


def test_delete_on_tier_change_time(container: ContainerClient) -> None:
    early = datetime.now(UTC) - timedelta(minutes=10)
    late = datetime.now(UTC) + timedelta(minutes=10)
    blob = container.upload_blob("d", b"x")
    blob.set_standard_blob_tier(StandardBlobTier.COOL)
    for refused in (
        lambda: blob.delete_blob(access_tier_if_modified_since=late),
        lambda: blob.delete_blob(access_tier_if_unmodified_since=early),
    ):
        error = error_of(refused)
        assert (error.status_code, error.error_code) == (412, "AccessTierChangeTimeConditionNotMet")
    assert blob.exists()
    blob.delete_blob(access_tier_if_modified_since=early, access_tier_if_unmodified_since=late)
    assert not blob.exists()


def test_append_blobs_have_no_tier(container: ContainerClient) -> None:
    append = container.get_blob_client("log")
    append.create_append_blob()
    assert append.get_blob_properties().blob_tier is None
    assert next(iter(container.list_blobs())).blob_tier is None
    error = error_of(lambda: append.set_standard_blob_tier(StandardBlobTier.COOL))
    assert (error.status_code, error.error_code) == (400, "AccessTierNotSupportedForBlobType")


def test_tiers_aio(server: ServerProcess, container: ContainerClient) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            client = service.get_container_client(container.container_name)
            blob = await client.upload_blob("aio", b"data", standard_blob_tier=StandardBlobTier.COOL)
            assert (await blob.get_blob_properties()).blob_tier == "Cool"
            await blob.set_standard_blob_tier(StandardBlobTier.ARCHIVE)
            with pytest.raises(HttpResponseError) as raised:
                await (await blob.download_blob()).readall()
            assert raised.value.error_code == ARCHIVED
            await blob.set_standard_blob_tier(StandardBlobTier.COOL, rehydrate_priority="High")
            props = await blob.get_blob_properties()
            assert props.archive_status == "rehydrate-pending-to-cool" and props.rehydrate_priority == "High"
            listed = [b async for b in client.list_blobs()]
            assert [(b.name, b.blob_tier) for b in listed] == [("aio", "Archive")]

    asyncio.run(run())


# ------------------------------------------------------------------ a server that rehydrates at once


@pytest.fixture(scope="module", params=backend_names())
def quick(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose rehydrations complete as soon as they start, with Cool as the default tier."""
    extra = [*fresh_store(request.param), "--rehydrate-delay", "0", "--default-access-tier", "Cool"]
    process = ServerProcess(tmp_path_factory.mktemp("tiers"), extra_args=extra, backend=request.param).start()
    yield process
    process.stop()


def test_default_tier_and_rehydration(quick: ServerProcess) -> None:
    with BlobServiceClient.from_connection_string(quick.connection_string) as service:
        container = service.create_container(f"rehydrate{time.time_ns()}")
        blob = container.upload_blob("b", b"content")
        props = blob.get_blob_properties()
        assert props.blob_tier == "Cool" and props.blob_tier_inferred
        assert next(iter(container.list_blobs())).blob_tier == "Cool"
        blob.set_standard_blob_tier(StandardBlobTier.ARCHIVE)
        blob.set_standard_blob_tier(StandardBlobTier.HOT)  # done at once on this server
        props = blob.get_blob_properties()
        assert props.blob_tier == "Hot" and props.archive_status is None and props.rehydrate_priority is None
        assert blob.download_blob().readall() == b"content"
        source = container.upload_blob("archived", b"old", standard_blob_tier=StandardBlobTier.ARCHIVE)
        copy = container.get_blob_client("copy")
        copy.start_copy_from_url(source.url, standard_blob_tier=StandardBlobTier.COOL)
        assert copy.get_blob_properties().blob_tier == "Cool"
        assert copy.download_blob().readall() == b"old"


# ------------------------------------------------------------------ raw HTTP


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({}, 400, "MissingRequiredHeader"),
        ({"x-ms-access-tier": "Lukewarm"}, 400, "InvalidHeaderValue"),
        ({"x-ms-access-tier": "P10"}, 400, "InvalidHeaderValue"),
        ({"x-ms-access-tier": "Hot", "x-ms-rehydrate-priority": "Urgent"}, 400, "InvalidHeaderValue"),
        ({"x-ms-access-tier": "Cold", "x-ms-version": "2021-10-04"}, 400, "InvalidHeaderValue"),
        ({"x-ms-access-tier": "Smart", "x-ms-version": "2026-04-06"}, 400, "InvalidHeaderValue"),
    ],
)
def test_set_tier_bad_headers(
    http: BlobHttp, container: ContainerClient, headers: dict[str, str], status: int, code: str
) -> None:
    container.upload_blob("b", b"x")
    reply = http.request("PUT", f"/{container.container_name}/b?comp=tier", headers)
    assert (reply.status, reply.code) == (status, code)
    assert reply.error_fields()["Code"] == code
    assert container.get_blob_client("b").get_blob_properties().blob_tier_inferred  # unchanged


def test_set_tier_statuses(http: BlobHttp, container: ContainerClient) -> None:
    path = f"/{container.container_name}/b?comp=tier"
    assert http.request("PUT", path, {"x-ms-access-tier": "Hot"}).code == "BlobNotFound"
    assert (
        http.request("PUT", "/nocontainer/b?comp=tier", {"x-ms-access-tier": "Hot"}).code
        == "ContainerNotFound"
    )
    container.upload_blob("b", b"x")
    assert http.request("PUT", path, {"x-ms-access-tier": "cool"}).status == 200  # any case
    assert http.request("PUT", path, {"x-ms-access-tier": "Archive"}).status == 200
    assert http.request("PUT", path, {"x-ms-access-tier": "Hot"}).status == 202
    head = http.request("HEAD", f"/{container.container_name}/b")
    assert head.headers["x-ms-access-tier"] == "Archive"
    assert head.headers["x-ms-archive-status"] == "rehydrate-pending-to-hot"
    assert "x-ms-access-tier-inferred" not in head.headers and "x-ms-access-tier-change-time" in head.headers
    reply = http.request("GET", f"/{container.container_name}/b")
    assert (reply.status, reply.code) == (409, ARCHIVED)
    smart = {"x-ms-blob-type": "BlockBlob", "x-ms-access-tier": "Smart"}
    assert http.request("PUT", f"/{container.container_name}/s", smart, b"x").status == 201
    head = http.request("HEAD", f"/{container.container_name}/s")
    assert (head.headers["x-ms-access-tier"], head.headers["x-ms-smart-access-tier"]) == ("Smart", "Hot")


def test_upload_tier_refusals(http: BlobHttp, container: ContainerClient) -> None:
    path = f"/{container.container_name}"
    reply = http.request("PUT", f"{path}/a", {"x-ms-blob-type": "AppendBlob", "x-ms-access-tier": "Hot"})
    assert (reply.status, reply.code) == (400, "AccessTierNotSupportedForBlobType")
    reply = http.request(
        "PUT", f"{path}/b", {"x-ms-blob-type": "BlockBlob", "x-ms-access-tier": "Warm"}, b"x"
    )
    assert (reply.status, reply.code) == (400, "InvalidHeaderValue")
    assert reply.error_fields()["HeaderName"] == "x-ms-access-tier"
    assert http.request("HEAD", f"{path}/a").status == 404 and http.request("HEAD", f"{path}/b").status == 404


def test_put_blob_over_a_tiered_blob_keeps_its_tier(
    container: ContainerClient, server: ServerProcess
) -> None:
    """Put Blob naming no tier over a block blob set to Cold keeps Cold and the time it was set,
    as Azure answered the Rust SDK (``Azure/azure-sdk-assets``, ``rust/sdk/storage/
    azure_storage_blob/tests/data/blob_client/test_leased_blob_operations.json``, x-ms-version
    2026-04-06: Get Blob after the overwrite answers ``x-ms-access-tier: Cold`` and the earlier
    ``x-ms-access-tier-change-time``). A blob never tiered stays inferred; a tier named wins."""
    blob = container.get_blob_client("kept")
    blob.upload_blob(b"hello rusty world")
    blob.set_standard_blob_tier(StandardBlobTier.COLD)
    before = blob.get_blob_properties()
    blob.upload_blob(b"overruled!", overwrite=True)
    after = blob.get_blob_properties()
    assert (after.blob_tier, after.blob_tier_inferred) == ("Cold", None)  # not inferred: no header
    assert after.blob_tier_change_time == before.blob_tier_change_time
    got = BlobHttp(server.blob_port).request(
        "GET",
        f"/{container.container_name}/kept",
        {"x-ms-range": "bytes=0-4194303", "x-ms-version": "2026-04-06"},
    )
    assert (got.body, got.headers["x-ms-access-tier"]) == (b"overruled!", "Cold")
    assert "x-ms-access-tier-inferred" not in got.headers and "x-ms-access-tier-change-time" in got.headers
    blob.upload_blob(b"named", overwrite=True, standard_blob_tier=StandardBlobTier.COOL)
    assert blob.get_blob_properties().blob_tier == "Cool"
    plain = container.upload_blob("plain-overwrite", b"a")
    plain.upload_blob(b"b", overwrite=True)
    props = plain.get_blob_properties()
    assert (props.blob_tier, props.blob_tier_inferred) == ("Hot", True)
