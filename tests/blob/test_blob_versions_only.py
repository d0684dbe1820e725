"""Deleted blobs that still have versions, and version-level immutability under versioning, through
the official SDK (sync and aio) and raw HTTP on each store, on a server with ``--blob-versioning``.

* List Blobs with ``include=deletedwithversions`` lists a blob deleted while versioning was on
  (it has versions, no current version) once, as ``HasVersionsOnly`` with its newest version's
  properties, in name order and across pages; live blobs are listed as always.
* A blob version under an immutability policy or legal hold is overwritten by Put Blob, Put Block
  List and Copy Blob (the protected data stays as a previous version, still protected; the new
  current version has no protection of its own), while Set Blob Metadata, Delete Blob and the
  deletion of the protected version stay refused.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import (
    BlobBlock,
    BlobImmutabilityPolicyMode,
    BlobServiceClient,
    ContainerClient,
    ImmutabilityPolicy,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

_names = itertools.count()


@pytest.fixture
def box(versioned: ServerProcess) -> Iterator[ContainerClient]:
    with BlobServiceClient.from_connection_string(versioned.connection_string) as service:
        yield service.create_container(f"vonly{next(_names)}")


def _deleted_with_versions(box: ContainerClient) -> dict[str, str]:
    """Names whose current version was deleted, each with its newest version's id."""
    gone = {}
    for name in ("a-gone", "c-gone"):
        blob = box.get_blob_client(name)
        blob.upload_blob(b"first " + name.encode(), metadata={"n": "1"})
        gone[name] = blob.upload_blob(b"newest", overwrite=True, metadata={"n": "2"})["version_id"]
        blob.delete_blob()
    box.upload_blob("b-live", b"live")
    box.get_blob_client("b-live").upload_blob(b"live again", overwrite=True)
    return gone


def test_deleted_blobs_with_versions_are_listed_once_as_versions_only(box: ContainerClient) -> None:
    _deleted_with_versions(box)
    plain = [b.name for b in box.list_blobs()]
    assert plain == ["b-live"]
    listed = list(box.list_blobs(include=["deletedwithversions", "metadata"]))
    assert [(b.name, b.has_versions_only) for b in listed] == [
        ("a-gone", True),
        ("b-live", None),
        ("c-gone", True),
    ]
    gone = listed[0]
    assert gone.size == len(b"newest") and gone.metadata == {"n": "2"}  # the newest version's
    assert gone.version_id is None and not gone.deleted and gone.is_current_version is None
    assert listed[1].version_id is not None and listed[1].size == len(b"live again")
    paged = box.list_blobs(include=["deletedwithversions"], results_per_page=1).by_page()
    pages = [[(b.name, b.has_versions_only) for b in page] for page in paged]
    assert pages == [[("a-gone", True)], [("b-live", None)], [("c-gone", True)]]
    deleted = box.get_blob_client("c-gone")
    for version in [b.version_id for b in box.list_blobs(include=["versions"]) if b.name == "c-gone"]:
        deleted.delete_blob(version_id=version)  # no versions left: nothing to list
    assert [b.name for b in box.list_blobs(include=["deletedwithversions"])] == ["a-gone", "b-live"]


def test_versions_only_with_versions_and_prefixes(box: ContainerClient) -> None:
    gone = _deleted_with_versions(box)
    both = [
        (b.name, b.version_id, b.has_versions_only)
        for b in box.list_blobs(include=["deletedwithversions", "versions"])
    ]
    assert [entry for entry in both if entry[2]] == []  # every version is listed already
    assert ("a-gone", gone["a-gone"], None) in both and len(both) == 6
    box.upload_blob("dir/x", b"x")
    box.get_blob_client("dir/x").delete_blob()
    walked = [
        (item.name, getattr(item, "has_versions_only", None))
        for item in box.walk_blobs(include=["deletedwithversions"])
    ]
    # the SDK gives a page's prefixes before its blobs
    assert walked == [("dir/", None), ("a-gone", True), ("b-live", None), ("c-gone", True)]
    assert [item.name for item in box.walk_blobs()] == ["b-live"]


def test_versions_only_document_as_azure_writes_it(versioned: ServerProcess, box: ContainerClient) -> None:
    _deleted_with_versions(box)
    http = BlobHttp(versioned.blob_port)
    reply = http.request(
        "GET", f"/{box.container_name}?restype=container&comp=list&include=deletedwithversions"
    )
    assert reply.status == 200
    blobs = ElementTree.fromstring(reply.body).find("Blobs")
    assert blobs is not None
    first = blobs[0]
    assert [child.tag for child in first][:3] == ["Name", "HasVersionsOnly", "Properties"]
    assert first.findtext("HasVersionsOnly") == "true" and first.find("VersionId") is None
    assert first.find("Deleted") is None
    assert [child.tag for child in blobs[1]][:2] == ["Name", "VersionId"]
    assert blobs[1].find("HasVersionsOnly") is None
    reply = http.request(
        "GET", f"/{box.container_name}?restype=container&comp=list&include=deletedwithversion"
    )
    assert (reply.status, reply.code) == (400, "InvalidQueryParameterValue")


def test_versions_only_with_the_async_client(versioned: ServerProcess) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(versioned.connection_string) as service:
            container = await service.create_container(f"avonly{next(_names)}")
            blob = container.get_blob_client("gone")
            await blob.upload_blob(b"one")
            await blob.delete_blob()
            await container.upload_blob("kept", b"two")
            listed = [
                (b.name, b.has_versions_only)
                async for b in container.list_blobs(include=["deletedwithversions"])
            ]
            assert listed == [("gone", True), ("kept", None)]
            assert [b.name async for b in container.list_blobs()] == ["kept"]

    asyncio.run(run())


# ---------------------------------------------------------------------------- immutability


def _policy(seconds: float = 3600, mode: str = "Unlocked") -> ImmutabilityPolicy:
    return ImmutabilityPolicy(
        expiry_time=datetime.now(UTC) + timedelta(seconds=seconds),
        policy_mode=BlobImmutabilityPolicyMode(mode),
    )


def _refused(call, code: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(HttpResponseError) as raised:
        call()
    assert (raised.value.status_code, raised.value.error_code) == (409, code)


def test_a_held_version_is_overwritten_into_a_new_version(box: ContainerClient) -> None:
    blob = box.get_blob_client("held")
    v1 = blob.upload_blob(b"original", metadata={"k": "1"})["version_id"]
    blob.set_legal_hold(True)
    _refused(lambda: blob.set_blob_metadata({"k": "2"}), "BlobImmutableDueToLegalHold")
    _refused(blob.delete_blob, "BlobImmutableDueToLegalHold")
    v2 = blob.upload_blob(b"second", overwrite=True)["version_id"]  # Put Blob
    assert v2 > v1
    current = blob.get_blob_properties()
    assert current.version_id == v2 and not current.has_legal_hold  # the new version is free
    old = blob.get_blob_properties(version_id=v1)
    assert old.has_legal_hold and old.metadata == {"k": "1"}
    assert blob.download_blob(version_id=v1).readall() == b"original"
    _refused(lambda: blob.delete_blob(version_id=v1), "BlobImmutableDueToLegalHold")
    blob.set_blob_metadata({"k": "3"})  # the current version is not held
    blob.delete_blob()  # nor deleting it: it becomes a previous version
    assert blob.download_blob(version_id=v1).readall() == b"original"
    blob.set_legal_hold(False, version_id=v1)
    blob.delete_blob(version_id=v1)
    assert not blob.exists(version_id=v1)


def test_a_version_under_a_policy_is_overwritten_by_block_list_and_copy(box: ContainerClient) -> None:
    source = box.upload_blob("source", b"copied")
    blob = box.get_blob_client("kept")
    v1 = blob.upload_blob(b"original")["version_id"]
    blob.set_immutability_policy(_policy(mode="Locked"))
    _refused(lambda: blob.set_blob_metadata({"k": "2"}), "BlobImmutableDueToPolicy")
    _refused(lambda: blob.set_http_headers(), "BlobImmutableDueToPolicy")
    blob.stage_block("MDE=", b"blocks")
    v2 = blob.commit_block_list([BlobBlock("MDE=")])["version_id"]  # Put Block List
    assert blob.download_blob().readall() == b"blocks"
    assert blob.get_blob_properties().immutability_policy.policy_mode is None
    blob.set_immutability_policy(_policy(), version_id=v2)
    v3 = blob.start_copy_from_url(source.url)["version_id"]  # Copy Blob
    assert blob.download_blob().readall() == b"copied" and v3 > v2
    for version, content in ((v1, b"original"), (v2, b"blocks")):
        assert blob.download_blob(version_id=version).readall() == content
        kept = blob.get_blob_properties(version_id=version)
        assert kept.immutability_policy.policy_mode in ("locked", "unlocked")
        _refused(lambda v=version: blob.delete_blob(version_id=v), "BlobImmutableDueToPolicy")
    versions = [b.version_id for b in box.list_blobs(name_starts_with="kept", include=["versions"])]
    assert versions == [v1, v2, v3]


def test_page_writes_stay_refused_on_a_protected_page_blob(box: ContainerClient) -> None:
    page = box.get_blob_client("disk")
    page.create_page_blob(1024)
    page.set_legal_hold(True)
    _refused(lambda: page.upload_page(b"\1" * 512, 0, 512), "BlobImmutableDueToLegalHold")
    _refused(lambda: page.resize_blob(2048), "BlobImmutableDueToLegalHold")
    assert page.get_blob_properties().size == 1024
    page.set_legal_hold(False)


def test_protected_overwrite_with_the_async_client(versioned: ServerProcess) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(versioned.connection_string) as service:
            container = await service.create_container(f"aprot{next(_names)}")
            blob = container.get_blob_client("held")
            v1 = (await blob.upload_blob(b"one"))["version_id"]
            await blob.set_legal_hold(True)
            with pytest.raises(HttpResponseError) as raised:
                await blob.set_blob_metadata({"a": "b"})
            assert raised.value.error_code == "BlobImmutableDueToLegalHold"
            v2 = (await blob.upload_blob(b"two", overwrite=True))["version_id"]
            assert v2 > v1 and not (await blob.get_blob_properties()).has_legal_hold
            assert (await blob.get_blob_properties(version_id=v1)).has_legal_hold
            with pytest.raises(HttpResponseError) as raised:
                await blob.delete_blob(version_id=v1)
            assert raised.value.error_code == "BlobImmutableDueToLegalHold"
            await blob.set_legal_hold(False, version_id=v1)

    asyncio.run(run())


def test_policy_and_hold_by_version_id_reach_that_version(box: ContainerClient) -> None:
    blob = box.get_blob_client("named")
    v1 = blob.upload_blob(b"one")["version_id"]
    v2 = blob.upload_blob(b"two", overwrite=True)["version_id"]
    blob.set_legal_hold(True, version_id=v1)
    blob.set_immutability_policy(_policy(), version_id=v1)
    assert not blob.get_blob_properties().has_legal_hold  # the current version is not touched
    assert blob.get_blob_properties().immutability_policy.policy_mode is None
    old = blob.get_blob_properties(version_id=v1)
    assert old.has_legal_hold and old.immutability_policy.policy_mode == "unlocked"
    blob.set_legal_hold(True, version_id=v2)  # the current version, by its id
    assert blob.get_blob_properties().has_legal_hold
    _refused(blob.delete_blob, "BlobImmutableDueToLegalHold")
    blob.set_legal_hold(False, version_id=v2)
    blob.delete_immutability_policy(version_id=v1)
    assert blob.get_blob_properties(version_id=v1).immutability_policy.policy_mode is None
    with pytest.raises(HttpResponseError) as missing:
        blob.set_legal_hold(True, version_id="2020-01-01T00:00:00.0000000Z")
    assert (missing.value.status_code, missing.value.response.headers["x-ms-error-code"]) == (
        404,
        "BlobNotFound",
    )
    blob.set_legal_hold(False, version_id=v1)
