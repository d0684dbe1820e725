"""Immutable storage through the official SDK (sync and aio) on each store: Set and Delete Blob
Immutability Policy, Set Blob Legal Hold, the protection an upload asks for, what they report
(properties and listings) and the writes and deletes they refuse; raw HTTP for bad inputs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobImmutabilityPolicyMode, ContainerClient, ImmutabilityPolicy
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


def _policy(seconds: float = 3600, mode: str = "Unlocked") -> ImmutabilityPolicy:
    return ImmutabilityPolicy(
        expiry_time=datetime.now(UTC) + timedelta(seconds=seconds),
        policy_mode=BlobImmutabilityPolicyMode(mode),
    )


def _refused(call, code: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(HttpResponseError) as raised:
        call()
    assert (raised.value.status_code, raised.value.response.headers.get("x-ms-error-code")) == (409, code)


def test_legal_hold_refuses_writes_and_deletes_until_cleared(container: ContainerClient) -> None:
    blob = container.upload_blob("held", b"abc")
    assert blob.set_legal_hold(True)["legal_hold"] is True
    assert blob.get_blob_properties().has_legal_hold is True
    _refused(blob.delete_blob, "BlobImmutableDueToLegalHold")
    _refused(lambda: blob.upload_blob(b"new", overwrite=True), "BlobImmutableDueToLegalHold")
    _refused(lambda: blob.set_blob_metadata({"a": "b"}), "BlobImmutableDueToLegalHold")
    blob.set_standard_blob_tier("Cool")  # tiers and leases stay free
    lease = blob.acquire_lease()
    lease.release()
    assert blob.download_blob().readall() == b"abc"
    assert blob.set_legal_hold(False)["legal_hold"] is False
    assert not blob.get_blob_properties().has_legal_hold
    blob.delete_blob()


def test_policy_unlocked_locked_and_deleted(container: ContainerClient) -> None:
    blob = container.upload_blob("kept", b"abc")
    etag = blob.get_blob_properties().etag
    answer = blob.set_immutability_policy(_policy())
    assert answer["immutability_policy_mode"] == "unlocked" and answer["immutability_policy_until_date"]
    props = blob.get_blob_properties()
    assert props.etag == etag  # setting a policy leaves the ETag as it is
    assert props.immutability_policy.policy_mode == "unlocked" and props.immutability_policy.expiry_time
    _refused(blob.delete_blob, "BlobImmutableDueToPolicy")
    _refused(lambda: blob.set_http_headers(), "BlobImmutableDueToPolicy")
    blob.set_immutability_policy(_policy(60))  # an unlocked policy may be shortened
    blob.delete_immutability_policy()
    assert blob.get_blob_properties().immutability_policy.policy_mode is None
    blob.set_immutability_policy(_policy(3600, "Locked"))
    _refused(blob.delete_immutability_policy, "ImmutabilityPolicyDeleteOnLockedPolicy")
    _refused(lambda: blob.set_immutability_policy(_policy(60, "Locked")), "BlobImmutableDueToPolicy")
    _refused(lambda: blob.set_immutability_policy(_policy(7200, "Unlocked")), "BlobImmutableDueToPolicy")
    assert blob.set_immutability_policy(_policy(7200, "Locked"))["immutability_policy_mode"] == "locked"
    _refused(lambda: container.delete_blob("kept"), "BlobImmutableDueToPolicy")


def test_an_expired_policy_protects_nothing(container: ContainerClient) -> None:
    blob = container.upload_blob("brief", b"abc")
    blob.set_immutability_policy(_policy(2))
    _refused(blob.delete_blob, "BlobImmutableDueToPolicy")
    deadline = datetime.now(UTC) + timedelta(seconds=30)
    while datetime.now(UTC) < deadline:
        try:
            blob.delete_blob()
            break
        except HttpResponseError as error:
            assert error.error_code == "BlobImmutableDueToPolicy"
    assert not blob.exists()


def test_upload_with_protection_and_listing(container: ContainerClient) -> None:
    container.upload_blob("plain", b"x")
    blob = container.get_blob_client("guarded")
    blob.upload_blob(b"abc", immutability_policy=_policy(), legal_hold=True)
    listed = {b.name: b for b in container.list_blobs(include=["immutabilitypolicy", "legalhold"])}
    assert (
        listed["guarded"].has_legal_hold and listed["guarded"].immutability_policy.policy_mode == "unlocked"
    )
    assert listed["guarded"].immutability_policy.expiry_time is not None
    assert not listed["plain"].has_legal_hold and listed["plain"].immutability_policy.policy_mode is None
    bare = {b.name: b for b in container.list_blobs()}
    assert bare["guarded"].has_legal_hold is None  # only when included
    page = container.get_blob_client("page")
    page.create_page_blob(512, legal_hold=True)
    _refused(lambda: page.upload_page(b"\0" * 512, 0, 512), "BlobImmutableDueToLegalHold")
    append = container.get_blob_client("append")
    append.create_append_blob(immutability_policy=_policy())
    _refused(lambda: append.append_block(b"x"), "BlobImmutableDueToPolicy")
    block = container.get_blob_client("block")
    block.stage_block("MDE=", b"abc")
    block.commit_block_list(["MDE="], legal_hold=True)
    _refused(lambda: block.commit_block_list(["MDE="]), "BlobImmutableDueToLegalHold")
    copy = container.get_blob_client("copy")
    copy.start_copy_from_url(container.get_blob_client("plain").url, legal_hold=True)
    assert copy.get_blob_properties().has_legal_hold


def test_snapshots_keep_their_own_protection(container: ContainerClient) -> None:
    blob = container.upload_blob("snapped", b"abc")
    snapshot = blob.create_snapshot()
    held = container.get_blob_client("snapped", snapshot=snapshot)
    held.set_legal_hold(True)
    assert held.get_blob_properties().has_legal_hold and not blob.get_blob_properties().has_legal_hold
    _refused(lambda: blob.delete_blob(delete_snapshots="include"), "BlobImmutableDueToLegalHold")
    _refused(held.delete_blob, "BlobImmutableDueToLegalHold")
    blob.set_blob_metadata({"base": "free"})  # the base is not held
    held.set_legal_hold(False)
    blob.delete_blob(delete_snapshots="include")
    assert not blob.exists()


def test_immutability_aio(server: ServerProcess, container: ContainerClient) -> None:
    async def run() -> None:
        async with AsyncBlobServiceClient.from_connection_string(server.connection_string) as service:
            blob = service.get_blob_client(container.container_name, "aio")
            await blob.upload_blob(b"abc")
            await blob.set_immutability_policy(_policy())
            await blob.set_legal_hold(True)
            props = await blob.get_blob_properties()
            assert props.has_legal_hold and props.immutability_policy.policy_mode == "unlocked"
            with pytest.raises(HttpResponseError) as raised:
                await blob.delete_blob()
            assert raised.value.error_code == "BlobImmutableDueToLegalHold"
            await blob.set_legal_hold(False)
            await blob.delete_immutability_policy()
            await blob.delete_blob()

    asyncio.run(run())


def test_immutability_bad_inputs(server: ServerProcess, container: ContainerClient) -> None:
    http = BlobHttp(server.blob_port)
    path = f"/{container.container_name}"
    future = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    reply = http.request("PUT", f"{path}/none?comp=legalhold", {"x-ms-legal-hold": "true"})
    assert (reply.status, reply.code) == (404, "BlobNotFound")
    http.request("PUT", f"{path}/b", {"x-ms-blob-type": "BlockBlob"})
    cases = [
        ("PUT", "legalhold", {}, 400, "MissingRequiredHeader"),
        ("PUT", "legalhold", {"x-ms-legal-hold": "yes"}, 400, "InvalidHeaderValue"),
        ("GET", "legalhold", {}, 405, "UnsupportedHttpVerb"),
        ("PUT", "immutabilityPolicies", {}, 400, "MissingRequiredHeader"),
        (
            "PUT",
            "immutabilityPolicies",
            {"x-ms-immutability-policy-until-date": "soon"},
            400,
            "InvalidHeaderValue",
        ),
        (
            "PUT",
            "immutabilityPolicies",
            {"x-ms-immutability-policy-until-date": past},
            400,
            "InvalidHeaderValue",
        ),
        (
            "PUT",
            "immutabilityPolicies",
            {"x-ms-immutability-policy-until-date": future, "x-ms-immutability-policy-mode": "Mutable"},
            400,
            "InvalidHeaderValue",
        ),
    ]
    for method, comp, headers, status, code in cases:
        reply = http.request(method, f"{path}/b?comp={comp}", headers)
        assert (reply.status, reply.code) == (status, code), (method, comp, headers)
    reply = http.request(
        "PUT", f"{path}/c", {"x-ms-blob-type": "BlockBlob", "x-ms-immutability-policy-until-date": past}
    )
    assert (reply.status, reply.code) == (400, "InvalidHeaderValue")
    reply = http.request(
        "PUT", f"{path}/b?comp=immutabilityPolicies", {"x-ms-immutability-policy-until-date": future}
    )
    assert reply.status == 200 and reply.headers["x-ms-immutability-policy-mode"] == "unlocked"
    head = http.request("HEAD", f"{path}/b")
    assert head.headers["x-ms-immutability-policy-until-date"] == future
    reply = http.request("DELETE", f"{path}/b")
    assert (reply.status, reply.code) == (409, "BlobImmutableDueToPolicy")
    reply = http.request("DELETE", f"{path}/b?comp=immutabilityPolicies")
    assert reply.status == 200
