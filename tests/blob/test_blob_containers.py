"""Blob service: containers, listing, ACLs, container leases and service properties, through the
official SDK (sync and aio) against a real server on each store."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import quote
from xml.etree import ElementTree

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import (
    AccessPolicy,
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
    CorsRule,
    PublicAccess,
    RetentionPolicy,
    StaticWebsite,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import DEV_ACCOUNT, ServerProcess

_names = itertools.count()


def unique(prefix: str = "ct") -> str:
    return f"{prefix}{time.time_ns() % 10**12}x{next(_names)}"


def test_create_get_set_delete(blob_service: BlobServiceClient) -> None:
    name = unique()
    client = blob_service.create_container(name, metadata={"Owner": "ada", "count": "1"})
    props = client.get_container_properties()
    assert props.name == name
    assert props.metadata == {"Owner": "ada", "count": "1"}  # the case of names is kept
    assert props.lease.status == "unlocked" and props.lease.state == "available"
    assert props.public_access is None
    assert props.etag.startswith('"0x')
    first = props.etag
    client.set_container_metadata({"Other": "x"})
    props = client.get_container_properties()
    assert props.metadata == {"Other": "x"}
    assert props.etag != first
    assert client.exists()
    with pytest.raises(ResourceExistsError) as raised:
        blob_service.create_container(name)
    assert raised.value.error_code == "ContainerAlreadyExists"
    client.delete_container()
    assert not client.exists()
    with pytest.raises(ResourceNotFoundError) as missing:
        client.delete_container()
    assert missing.value.error_code == "ContainerNotFound"
    with pytest.raises(ResourceNotFoundError):
        client.get_container_properties()


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("ab", "OutOfRangeInput"),
        ("a" * 64, "OutOfRangeInput"),
        ("Upper", "InvalidResourceName"),
        ("a--b", "InvalidResourceName"),
        ("-ab", "InvalidResourceName"),
        ("ab-", "InvalidResourceName"),
        ("a_b", "InvalidResourceName"),
    ],
)
def test_invalid_container_names(blob_service: BlobServiceClient, name: str, code: str) -> None:
    with pytest.raises(HttpResponseError) as raised:
        blob_service.create_container(name)
    assert raised.value.status_code == 400
    assert raised.value.error_code == code


def test_list_containers_prefix_paging_metadata(blob_service: BlobServiceClient) -> None:
    prefix = unique("lst")
    names = sorted(f"{prefix}{i}" for i in range(5))
    for i, name in enumerate(names):
        blob_service.create_container(name, metadata={"i": str(i)})
    try:
        listed = list(blob_service.list_containers(name_starts_with=prefix, include_metadata=True))
        assert [c.name for c in listed] == names
        assert [c.metadata for c in listed] == [{"i": str(i)} for i in range(5)]
        pages = blob_service.list_containers(name_starts_with=prefix, results_per_page=2).by_page()
        seen = [[c.name for c in page] for page in pages]
        assert seen == [names[0:2], names[2:4], names[4:]]
        assert list(blob_service.list_containers(name_starts_with=prefix + "zz")) == []
    finally:
        for name in names:
            blob_service.delete_container(name)


def test_list_containers_marker_is_azures(server: ServerProcess, blob_service: BlobServiceClient) -> None:
    """``NextMarker`` of List Containers is ``/<account>/<container>``, the first container of
    the next page, as real Azure writes it (the JavaScript SDK's recordings), and such a marker
    resumes there; any other marker (``garbage``, a bare name) is 400 OutOfRangeInput, as Azure
    answered the .NET SDK's ListContainersSegmentAsync_Error."""
    prefix = unique("mkr")
    names = [f"{prefix}a", f"{prefix}b", f"{prefix}c"]
    for name in names:
        blob_service.create_container(name)
    http = BlobHttp(server.blob_port)
    try:
        first = http.request("GET", f"/?comp=list&prefix={prefix}&maxresults=1")
        root = ElementTree.fromstring(first.body)
        assert [n.text for n in root.iter("Name")] == names[:1]
        assert root.findtext("NextMarker") == f"/{DEV_ACCOUNT}/{names[1]}"
        marker = f"/{DEV_ACCOUNT}/{names[1]}"
        page = http.request("GET", f"/?comp=list&prefix={prefix}&marker={quote(marker, safe='')}")
        root = ElementTree.fromstring(page.body)
        assert [n.text for n in root.iter("Name")] == names[1:]
        assert root.findtext("Marker") == marker
        assert root.find("NextMarker") is not None and not root.findtext("NextMarker")
        for bad in ("garbage", names[1], f"/{DEV_ACCOUNT}/", f"/other/{names[1]}"):
            refused = http.request("GET", f"/?comp=list&marker={quote(bad, safe='')}")
            assert (refused.status, refused.code) == (400, "OutOfRangeInput"), bad
            assert refused.error_fields()["Message"].startswith("One of the request inputs is out of range.")
        pages = blob_service.list_containers(name_starts_with=prefix, results_per_page=2).by_page()
        assert [[c.name for c in page] for page in pages] == [names[:2], names[2:]]
    finally:
        for name in names:
            blob_service.delete_container(name)


def test_acl_public_access_and_policies(container: ContainerClient) -> None:
    before = container.get_container_properties().etag
    start = datetime.now(UTC).replace(microsecond=0)
    policies = {
        f"id{i}": AccessPolicy(
            permission=ContainerSasPermissions(read=True, list=i % 2 == 0),
            start=start,
            expiry=start + timedelta(hours=i + 1),
        )
        for i in range(5)
    }
    container.set_container_access_policy(policies, public_access=PublicAccess.Container)
    acl = container.get_container_access_policy()
    assert acl["public_access"] == "container"
    got = {i.id: i.access_policy for i in acl["signed_identifiers"]}
    assert set(got) == set(policies)
    assert got["id0"].permission == "rl" and got["id1"].permission == "r"
    assert got["id0"].start == start.strftime("%Y-%m-%dT%H:%M:%S.0000000Z")
    props = container.get_container_properties()
    assert props.public_access == "container"
    assert props.etag != before
    # Setting the ACL without public access makes the container private again.
    container.set_container_access_policy({})
    acl = container.get_container_access_policy()
    assert acl["public_access"] is None and acl["signed_identifiers"] == []


def test_container_lease_cycle(blob_service: BlobServiceClient) -> None:
    name = unique()
    client = blob_service.create_container(name)
    etag = client.get_container_properties().etag
    lease = client.acquire_lease(lease_duration=15)
    props = client.get_container_properties()
    assert (props.lease.status, props.lease.state, props.lease.duration) == ("locked", "leased", "fixed")
    assert props.etag == etag  # leasing does not change the ETag
    with pytest.raises(HttpResponseError) as raised:
        client.delete_container()
    assert raised.value.status_code == 412 and raised.value.error_code == "LeaseIdMissing"
    with pytest.raises(HttpResponseError) as wrong:
        client.delete_container(lease="00000000-0000-0000-0000-000000000001")
    assert wrong.value.error_code == "LeaseIdMismatchWithContainerOperation"
    with pytest.raises(ResourceExistsError) as present:
        client.acquire_lease(lease_duration=15)
    assert present.value.error_code == "LeaseAlreadyPresent"
    lease.renew()
    old_id = lease.id
    lease.change("11111111-2222-3333-4444-555555555555")
    assert lease.id != old_id
    assert lease.break_lease(lease_break_period=0) == 0
    assert client.get_container_properties().lease.state == "broken"
    client.delete_container()  # a broken lease no longer protects the container


def test_service_properties_round_trip(blob_service: BlobServiceClient) -> None:
    original = blob_service.get_service_properties()
    try:
        rule = CorsRule(["https://example.com"], ["GET", "PUT"], max_age_in_seconds=60)
        blob_service.set_service_properties(
            cors=[rule],
            delete_retention_policy=RetentionPolicy(enabled=True, days=7),
            static_website=StaticWebsite(enabled=True, index_document="index.html"),
        )
        props = blob_service.get_service_properties()
        assert props["cors"][0].allowed_origins == "https://example.com"
        assert props["delete_retention_policy"].enabled and props["delete_retention_policy"].days == 7
        assert props["static_website"].enabled and props["static_website"].index_document == "index.html"
        # A partial update keeps what it leaves out.
        blob_service.set_service_properties(cors=[])
        props = blob_service.get_service_properties()
        assert props["cors"] == [] and props["delete_retention_policy"].days == 7
    finally:
        blob_service.set_service_properties(
            cors=original["cors"],
            delete_retention_policy=original["delete_retention_policy"],
            static_website=original["static_website"],
        )


def test_account_information(blob_service: BlobServiceClient) -> None:
    info = blob_service.get_account_information()
    assert info["sku_name"] == "Standard_LRS" and info["account_kind"] == "StorageV2"


def test_containers_aio(server: ServerProcess) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            name = unique("aio")
            client = await service.create_container(name, metadata={"K": "v"})
            assert (await client.get_container_properties()).metadata == {"K": "v"}
            names = [c.name async for c in service.list_containers(name_starts_with=name)]
            assert names == [name]
            lease = await client.acquire_lease()
            assert (await client.get_container_properties()).lease.duration == "infinite"
            await lease.release()
            await client.delete_container()
            with pytest.raises(ResourceNotFoundError):
                await client.get_container_properties()

    asyncio.run(run())
