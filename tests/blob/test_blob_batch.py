"""Blob Batch: ``delete_blobs`` and ``set_standard_blob_tier_blobs`` from the SDK (sync and aio,
Shared Key and SAS), pyarrow's ``AzureFileSystem``, and raw batches for what the SDK cannot send
(an account-level batch, the limits, mixed or foreign sub-requests). Each sub-request is
authorized on its own and answered in its own part, with Azure's status and error code."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from email.utils import formatdate

import pyarrow.fs
import pytest
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.rest import HttpRequest
from azure.storage.blob import (
    AccountSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
    PartialBatchErrorException,
    PremiumPageBlobTier,
    ResourceTypes,
    StandardBlobTier,
    generate_account_sas,
    generate_container_sas,
)
from azure.storage.blob._generated.models import LeaseAccessConditions  # what set_*_tier_blobs reads
from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy
from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

from tests.blobhttp import BlobHttp, Reply
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def soon() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


def names(container: ContainerClient) -> list[str]:
    return sorted(blob.name for blob in container.list_blobs())


def upload(container: ContainerClient, *blobs: str) -> None:
    for name in blobs:
        container.upload_blob(name, b"data", overwrite=True)


def container_sas(container: ContainerClient, **permissions: bool) -> str:
    return generate_container_sas(
        DEV_ACCOUNT,
        container.container_name,
        account_key=DEV_KEY,
        permission=ContainerSasPermissions(**permissions),
        expiry=soon(),
    )


# ------------------------------------------------------------------------------------- SDK


def test_delete_blobs_shared_key(container: ContainerClient) -> None:
    upload(container, "a", "dir/b c", "keep")
    snapped = container.get_blob_client("snapped")
    snapped.upload_blob(b"v1")
    snapped.create_snapshot()
    parts = list(container.delete_blobs("a", "dir/b c", {"name": "snapped", "delete_snapshots": "include"}))
    assert [part.status_code for part in parts] == [202, 202, 202]
    assert all(part.headers["x-ms-request-id"] for part in parts)
    assert len({part.headers["x-ms-request-id"] for part in parts}) == 3
    assert names(container) == ["keep"]
    assert not list(container.list_blobs(include="snapshots"))[1:]


def test_delete_blobs_partial_failure(container: ContainerClient) -> None:
    upload(container, "one", "three")
    leased = container.get_blob_client("leased")
    leased.upload_blob(b"x")
    lease = leased.acquire_lease()
    with pytest.raises(PartialBatchErrorException) as failed:
        container.delete_blobs("one", "missing", "three", "leased")
    parts = list(failed.value.parts)
    assert [part.status_code for part in parts] == [202, 404, 202, 412]
    assert parts[1].headers["x-ms-error-code"] == "BlobNotFound"
    assert b"<Code>BlobNotFound</Code>" in parts[1].body()
    assert parts[3].headers["x-ms-error-code"] == "LeaseIdMissing"
    assert names(container) == ["leased"]  # the others ran: a batch is not atomic
    parts = list(container.delete_blobs({"name": "leased", "lease_id": lease.id}, raise_on_any_failure=False))
    assert [part.status_code for part in parts] == [202]
    assert names(container) == []


def test_delete_blobs_conditions_per_blob(container: ContainerClient) -> None:
    upload(container, "x", "y")
    etag = container.get_blob_client("x").get_blob_properties().etag
    parts = container.delete_blobs(
        {"name": "x", "etag": '"0x1"', "match_condition": None},
        {"name": "y", "etag": etag},
        raise_on_any_failure=False,
    )
    statuses = [(part.status_code, part.headers.get("x-ms-error-code")) for part in parts]
    assert statuses == [(412, "ConditionNotMet"), (412, "ConditionNotMet")]
    parts = container.delete_blobs({"name": "x", "etag": etag}, raise_on_any_failure=False)
    assert [part.status_code for part in parts] == [202]
    assert names(container) == ["y"]


def test_delete_blobs_aio(server: ServerProcess, container: ContainerClient) -> None:
    upload(container, "p", "q", "r")

    async def run() -> list[int]:
        async with AsyncContainerClient.from_connection_string(
            server.connection_string, container.container_name
        ) as client:
            parts = await client.delete_blobs("p", "q", "nope", raise_on_any_failure=False)
            return [part.status_code async for part in parts]

    assert asyncio.run(run()) == [202, 202, 404]
    assert names(container) == ["r"]


def test_delete_blobs_with_container_sas(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    upload(container, "s1", "s2")
    client = ContainerClient(
        blob_service.url, container.container_name, credential=container_sas(container, delete=True)
    )
    assert [part.status_code for part in client.delete_blobs("s1", "s2")] == [202, 202]
    assert names(container) == []


def test_sas_without_delete_fails_each_part(
    blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    upload(container, "k1", "k2")
    token = container_sas(container, read=True, write=True)
    client = ContainerClient(blob_service.url, container.container_name, credential=token)
    parts = list(client.delete_blobs("k1", "k2", raise_on_any_failure=False))
    assert [(part.status_code, part.headers["x-ms-error-code"]) for part in parts] == [
        (403, "AuthorizationPermissionMismatch")
    ] * 2
    assert names(container) == ["k1", "k2"]


def test_delete_blobs_with_account_sas_aio(server: ServerProcess, container: ContainerClient) -> None:
    upload(container, "m1", "m2")
    token = generate_account_sas(
        DEV_ACCOUNT,
        DEV_KEY,
        resource_types=ResourceTypes(object=True, container=True),
        permission=AccountSasPermissions(delete=True),
        expiry=soon(),
    )
    url = f"http://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}"

    async def run() -> list[int]:
        async with AsyncContainerClient(url, container.container_name, credential=token) as client:
            parts = await client.delete_blobs("m1", "m2")
            return [part.status_code async for part in parts]

    assert asyncio.run(run()) == [202, 202]
    assert names(container) == []


def test_too_many_subrequests(container: ContainerClient) -> None:
    upload(container, "b0")
    parts = list(container.delete_blobs(*[f"b{i}" for i in range(257)], raise_on_any_failure=False))
    assert len(parts) == 1  # refused as a whole: one part, the error
    assert (parts[0].status_code, parts[0].headers["x-ms-error-code"]) == (400, "ExceedsMaxBatchRequestCount")
    assert names(container) == ["b0"]
    parts = list(container.delete_blobs(*[f"b{i}" for i in range(256)], raise_on_any_failure=False))
    assert len(parts) == 256
    assert parts[0].status_code == 202 and {part.status_code for part in parts[1:]} == {404}
    assert names(container) == []


def test_pyarrow_delete_dir_contents(server: ServerProcess, container: ContainerClient) -> None:
    upload(container, "dir/a", "dir/b", "dir/sub/c", "other/d")
    authority = f"127.0.0.1:{server.blob_port}"
    azure = pyarrow.fs.AzureFileSystem(
        account_name=DEV_ACCOUNT,
        account_key=DEV_KEY,
        blob_storage_authority=authority,
        dfs_storage_authority=authority,
        blob_storage_scheme="http",
        dfs_storage_scheme="http",
    )
    azure.delete_dir_contents(f"{container.container_name}/dir")
    left = names(container)
    assert "other/d" in left and not [name for name in left if name.startswith("dir/") and name != "dir/"]


# ------------------------------------------------------------------------------------- raw


def signed_subrequest(server: ServerProcess, method: str, path: str, **headers: str) -> bytes:
    """A sub-request as the SDKs write one: signed by the SDK's own Shared Key policy, with no
    ``x-ms-version`` (the batch's applies), the path after the host."""
    url = f"http://127.0.0.1:{server.blob_port}{path}"
    request = HttpRequest(method, url, headers={"x-ms-date": formatdate(usegmt=True), **headers})
    request.headers["Content-Length"] = "0"
    SharedKeyCredentialPolicy(DEV_ACCOUNT, DEV_KEY).on_request(
        PipelineRequest(request, PipelineContext(None))
    )
    lines = [f"{method} {path} HTTP/1.1", *(f"{name}: {value}" for name, value in request.headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def batch_body(boundary: str, subrequests: list[bytes]) -> bytes:
    pieces = []
    for index, sub in enumerate(subrequests):
        head = f"--{boundary}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
        pieces.append(f"{head}Content-ID: {index}\r\n\r\n".encode() + sub)
    return b"".join(pieces) + f"--{boundary}--\r\n".encode()


def send_batch(http: BlobHttp, target: str, subrequests: list[bytes], **headers: str) -> Reply:
    boundary = f"batch_{uuid.uuid4()}"
    content_type = {"Content-Type": f"multipart/mixed; boundary={boundary}"}
    return http.request("POST", target, {**content_type, **headers}, batch_body(boundary, subrequests))


def parts_of(reply: Reply) -> list[tuple[str | None, int, dict[str, str]]]:
    """(Content-ID, status, headers) of each part of a batch response."""
    assert reply.status == 202
    media = reply.headers["content-type"]
    assert media.startswith("multipart/mixed; boundary=batchresponse_")
    boundary = media.split("boundary=", 1)[1]
    body = reply.body.decode()
    assert body.rstrip().endswith(f"--{boundary}--")
    found = []
    for chunk in body.split(f"--{boundary}")[1:-1]:
        mime, _, rest = chunk.strip("\r\n").partition("\r\n\r\n")
        mime_headers = dict(line.split(": ", 1) for line in mime.split("\r\n"))
        assert mime_headers["Content-Type"] == "application/http"
        status_line, *lines = rest.split("\r\n\r\n", 1)[0].split("\r\n")
        assert status_line.startswith("HTTP/1.1 ")
        headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
        found.append((mime_headers.get("Content-ID"), int(status_line.split()[1]), headers))
    return found


def test_account_level_batch_across_containers(
    server: ServerProcess, http: BlobHttp, blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    other = blob_service.create_container(container.container_name + "o")
    try:
        upload(container, "one")
        upload(other, "two")
        subs = [
            signed_subrequest(server, "DELETE", f"/{DEV_ACCOUNT}/{container.container_name}/one"),
            signed_subrequest(server, "DELETE", f"/{DEV_ACCOUNT}/{other.container_name}/two"),
        ]
        parts = parts_of(send_batch(http, "/?comp=batch", subs))
        assert [(cid, status) for cid, status, _ in parts] == [("0", 202), ("1", 202)]
        assert parts[0][2]["x-ms-version"] == "2026-10-06"
        assert names(container) == [] and names(other) == []
    finally:
        other.delete_container()


def test_container_batch_refuses_another_container(
    server: ServerProcess, http: BlobHttp, blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    upload(container, "mine")
    subs = [
        signed_subrequest(server, "DELETE", f"/{DEV_ACCOUNT}/{container.container_name}/mine"),
        signed_subrequest(server, "DELETE", f"/{DEV_ACCOUNT}/elsewhere/theirs"),
    ]
    parts = parts_of(send_batch(http, f"/{container.container_name}?restype=container&comp=batch", subs))
    assert [(cid, status, headers["x-ms-error-code"]) for cid, status, headers in parts] == [
        (None, 400, "InvalidInput")
    ]
    assert names(container) == ["mine"]  # refused as a whole: nothing ran


def test_batch_holds_only_blob_deletes_and_tiers(
    server: ServerProcess, http: BlobHttp, container: ContainerClient
) -> None:
    upload(container, "x")
    name = container.container_name
    delete_container = signed_subrequest(server, "DELETE", f"/{DEV_ACCOUNT}/{name}?restype=container")
    parts = parts_of(send_batch(http, "/?comp=batch", [delete_container]))
    assert [(status, headers["x-ms-error-code"]) for _, status, headers in parts] == [(400, "InvalidInput")]
    read = signed_subrequest(server, "GET", f"/{DEV_ACCOUNT}/{name}/x")
    parts = parts_of(send_batch(http, "/?comp=batch", [read]))
    assert [(status, headers["x-ms-error-code"]) for _, status, headers in parts] == [(400, "InvalidInput")]
    mixed = [
        signed_subrequest(server, "DELETE", f"/{DEV_ACCOUNT}/{name}/x"),
        signed_subrequest(
            server, "PUT", f"/{DEV_ACCOUNT}/{name}/x?comp=tier", **{"x-ms-access-tier": "Cool"}
        ),
    ]
    parts = parts_of(send_batch(http, "/?comp=batch", mixed))
    codes = [(status, headers["x-ms-error-code"]) for _, status, headers in parts]
    assert codes == [(400, "AllBatchSubRequestsShouldBeSameApi")]
    assert names(container) == ["x"]


def test_subrequest_signatures_are_checked(
    server: ServerProcess, http: BlobHttp, container: ContainerClient
) -> None:
    upload(container, "guarded")
    sub = signed_subrequest(server, "DELETE", f"/{DEV_ACCOUNT}/{container.container_name}/guarded")
    forged = sub.replace(b"guarded HTTP", b"guarded2 HTTP")  # the signature no longer covers the URL
    unsigned = f"DELETE /{DEV_ACCOUNT}/{container.container_name}/guarded HTTP/1.1\r\n\r\n".encode()
    parts = parts_of(send_batch(http, "/?comp=batch", [forged, unsigned]))
    assert [(status, headers["x-ms-error-code"]) for _, status, headers in parts] == [
        (403, "AuthenticationFailed"),
        (401, "NoAuthenticationInformation"),  # no ACL lets anyone delete: as any anonymous delete
    ]
    assert names(container) == ["guarded"]


def test_subrequests_relative_to_the_account_as_older_python_sdks_write_them(
    server: ServerProcess, http: BlobHttp, container: ContainerClient
) -> None:
    """azure-storage-blob before 12.23 (and 2.1.0's ``batch_delete_blobs``, the same bytes but its
    User-Agent) writes a sub-request's path without the account even to a
    path-style endpoint (``DELETE /{container}/{blob}?``, signed as
    ``/{account}/{container}/{blob}``): on Azure the account is in the host, so that path is
    relative to the batch's endpoint. These are its bytes, as 12.8.1 sends them (captured)."""
    name = container.container_name
    upload(container, "a b", "dir/c", "cool", "guarded", "keep")
    deletes = [
        signed_subrequest(server, "DELETE", f"/{name}/a%20b?"),
        signed_subrequest(server, "DELETE", f"/{name}/dir/c?"),
    ]
    parts = parts_of(send_batch(http, f"/{name}?restype=container&comp=batch", deletes))
    assert [(cid, status) for cid, status, _ in parts] == [("0", 202), ("1", 202)]
    tier = signed_subrequest(server, "PUT", f"/{name}/cool?comp=tier", **{"x-ms-access-tier": "Cool"})
    parts = parts_of(send_batch(http, "/?comp=batch", [tier]))
    assert [(cid, status) for cid, status, _ in parts] == [("0", 200)]
    assert tiers(container, "cool") == [("Cool", False)]
    # The signature still covers the path as sent; and a relative path stays in the batch's container.
    forged = signed_subrequest(server, "DELETE", f"/{name}/guarded?").replace(b"guarded?", b"keep?")
    parts = parts_of(send_batch(http, f"/{name}?restype=container&comp=batch", [forged]))
    assert [(status, headers["x-ms-error-code"]) for _, status, headers in parts] == [
        (403, "AuthenticationFailed")
    ]
    elsewhere = signed_subrequest(server, "DELETE", f"/{name}x/guarded?")
    parts = parts_of(send_batch(http, f"/{name}?restype=container&comp=batch", [elsewhere]))
    assert [(status, headers["x-ms-error-code"]) for _, status, headers in parts] == [(400, "InvalidInput")]
    assert names(container) == ["cool", "guarded", "keep"]


def test_batch_bad_bodies(http: BlobHttp) -> None:
    reply = http.request("POST", "/?comp=batch", {}, b"--x--")
    parts = parts_of(reply)
    assert [(status, headers["x-ms-error-code"]) for _, status, headers in parts] == [
        (400, "MissingRequiredHeader")
    ]
    reply = http.request("POST", "/?comp=batch", {"Content-Type": "text/plain"}, b"x")
    assert [(p[1], p[2]["x-ms-error-code"]) for p in parts_of(reply)] == [(400, "InvalidHeaderValue")]
    reply = http.request("POST", "/?comp=batch", {"Content-Type": "multipart/mixed; boundary=x"}, b"--x--")
    assert [(p[1], p[2]["x-ms-error-code"]) for p in parts_of(reply)] == [(400, "InvalidInput")]
    reply = http.request("GET", "/?comp=batch")
    assert (reply.status, reply.code) == (405, "UnsupportedHttpVerb")
    oversized = b"--x\r\n" + b"a" * (4 * 1024 * 1024) + b"\r\n--x--"  # past the 4 MiB a batch may be
    reply = http.request("POST", "/?comp=batch", {"Content-Type": "multipart/mixed; boundary=x"}, oversized)
    assert (reply.status, reply.code) == (413, "RequestBodyTooLarge")


def test_parent_request_is_authorized(server: ServerProcess, container: ContainerClient) -> None:
    """The batch itself needs Shared Key or an account SAS (a container SAS on a container batch)."""
    upload(container, "z")
    sub = signed_subrequest(server, "DELETE", f"/{DEV_ACCOUNT}/{container.container_name}/z")
    http = BlobHttp(server.blob_port)
    boundary = "batch_x"
    body = batch_body(boundary, [sub])
    headers = {"Content-Type": f"multipart/mixed; boundary={boundary}", "Content-Length": str(len(body))}
    reply = http.request("POST", "/?comp=batch", headers, body, signed=False)
    assert (reply.status, reply.code) == (401, "NoAuthenticationInformation")
    token = container_sas(container, read=True)
    target = f"/{container.container_name}?restype=container&comp=batch&{token}"
    parts = parts_of(http.request("POST", target, headers, body, signed=False))
    assert [status for _, status, _ in parts] == [202]  # the sub-request's own key deletes
    assert names(container) == []


def test_account_batch_refuses_a_container_sas(server: ServerProcess, container: ContainerClient) -> None:
    """A container SAS on an account-level batch: 403 AuthenticationFailed with Azure's detail, as
    recorded for the .NET SDK's Batch_SasUri_NotOwner; nothing is deleted."""
    upload(container, "blob1", "blob2")
    token = container_sas(container, read=True, add=True, create=True, write=True, delete=True, list=True)
    path = f"/{DEV_ACCOUNT}/{container.container_name}"
    subs = [
        f"DELETE {path}/{name}?{token} HTTP/1.1\r\nContent-Length: 0\r\n\r\n".encode()
        for name in ("blob1", "blob2")
    ]
    boundary = f"batch_{uuid.uuid4()}"
    body = batch_body(boundary, subs)
    headers = {"Content-Type": f"multipart/mixed; boundary={boundary}", "Content-Length": str(len(body))}
    reply = BlobHttp(server.blob_port).request("POST", f"/?{token}&comp=batch", headers, body, signed=False)
    assert (reply.status, reply.code) == (403, "AuthenticationFailed")
    detail = reply.error_fields()["AuthenticationErrorDetail"]
    assert detail == "The specified signed resource is not allowed for this resource level"
    assert names(container) == ["blob1", "blob2"]


# ----------------------------------------------------------------------------------- tiers


def tiers(container: ContainerClient, *blobs: str) -> list[tuple[str | None, bool]]:
    """Each blob's tier and whether it is inferred (the account's default) rather than set."""
    found = []
    for name in blobs:
        properties = container.get_blob_client(name).get_blob_properties()
        found.append((properties.blob_tier, bool(properties.blob_tier_inferred)))
    return found


def test_set_standard_blob_tier_blobs(container: ContainerClient) -> None:
    upload(container, "t1", "t2", "t3")
    parts = list(container.set_standard_blob_tier_blobs(StandardBlobTier.COOL, "t1", "t2", "t3"))
    assert [part.status_code for part in parts] == [200, 200, 200]
    assert tiers(container, "t1", "t2", "t3") == [("Cool", False)] * 3
    parts = list(
        container.set_standard_blob_tier_blobs(
            None, {"name": "t1", "blob_tier": StandardBlobTier.ARCHIVE}, {"name": "t2", "blob_tier": "Hot"}
        )
    )
    assert [part.status_code for part in parts] == [200, 200]
    assert tiers(container, "t1", "t2") == [("Archive", False), ("Hot", False)]
    parts = list(container.set_standard_blob_tier_blobs("Hot", "t3", "missing", raise_on_any_failure=False))
    assert [(part.status_code, part.headers.get("x-ms-error-code")) for part in parts] == [
        (200, None),
        (404, "BlobNotFound"),
    ]


def test_set_tier_parts_match_set_blob_tier(container: ContainerClient) -> None:
    """A sub-request is answered as the same request on its own: a premium page blob tier on a
    standard account's block blob, a bad tier, a lease the request does not name."""
    upload(container, "p", "leased")
    lease = container.get_blob_client("leased").acquire_lease()
    alone = []
    for call in (
        lambda: container.get_blob_client("p").set_premium_page_blob_tier(PremiumPageBlobTier.P10),
        lambda: container.get_blob_client("p").set_standard_blob_tier("Lukewarm"),
        lambda: container.get_blob_client("leased").set_standard_blob_tier("Cool"),
    ):
        with pytest.raises(HttpResponseError) as refused:
            call()
        alone.append((refused.value.status_code, refused.value.error_code))
    premium = container.set_premium_page_blob_tier_blobs(
        PremiumPageBlobTier.P10, "p", raise_on_any_failure=False
    )
    bad = container.set_standard_blob_tier_blobs("Lukewarm", "p", raise_on_any_failure=False)
    leased = container.set_standard_blob_tier_blobs("Cool", "leased", raise_on_any_failure=False)
    batched = [
        (part.status_code, part.headers["x-ms-error-code"])
        for parts in (premium, bad, leased)
        for part in parts
    ]
    assert batched == alone
    parts = container.set_standard_blob_tier_blobs(
        None,
        {"name": "leased", "blob_tier": "Cool", "lease_id": LeaseAccessConditions(lease_id=lease.id)},
        raise_on_any_failure=False,
    )
    assert [part.status_code for part in parts] == [200]


def test_set_tier_blobs_with_sas_aio(server: ServerProcess, container: ContainerClient) -> None:
    upload(container, "s1", "s2")
    writer = container_sas(container, write=True)
    reader = container_sas(container, read=True)
    url = f"http://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}"

    async def run(token: str) -> list[tuple[int, str | None]]:
        async with AsyncContainerClient(url, container.container_name, credential=token) as client:
            parts = await client.set_standard_blob_tier_blobs("Cool", "s1", "s2", raise_on_any_failure=False)
            return [(part.status_code, part.headers.get("x-ms-error-code")) async for part in parts]

    assert asyncio.run(run(reader)) == [(403, "AuthorizationPermissionMismatch")] * 2
    assert asyncio.run(run(writer)) == [(200, None)] * 2
    assert tiers(container, "s1", "s2") == [("Cool", False)] * 2
