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

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

_names = itertools.count()


@pytest.fixture(scope="module", params=backend_names())
def versioned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    extra = [*fresh_store(request.param), "--blob-versioning"]
    process = ServerProcess(tmp_path_factory.mktemp("versionsonly"), extra_args=extra, backend=request.param)
    process.start()
    yield process
    process.stop()


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
