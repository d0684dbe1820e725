"""Blob SAS scopes and anonymous access: what a container, blob or account SAS reaches, stored
access policies, response-header overrides, and what a container's public access level lets
anonymous callers read. SDK-generated tokens against a real server on each store."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import pytest
import requests
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.storage.blob import (
    AccessPolicy,
    AccountSasPermissions,
    BlobClient,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
    PublicAccess,
    ResourceTypes,
    generate_account_sas,
    generate_blob_sas,
    generate_container_sas,
)
from azure.storage.blob.aio import BlobClient as AsyncBlobClient

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

HOUR = timedelta(hours=1)


def soon() -> datetime:
    return datetime.now(UTC) + HOUR


def container_sas(name: str, **permissions: bool) -> str:
    return generate_container_sas(
        DEV_ACCOUNT,
        name,
        account_key=DEV_KEY,
        permission=ContainerSasPermissions(**permissions),
        expiry=soon(),
    )


def test_container_sas_reaches_its_container_only(
    blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    container.upload_blob("inside", b"secret")
    other = blob_service.create_container(container.container_name + "x")
    try:
        other.upload_blob("elsewhere", b"other")
        token = container_sas(container.container_name, read=True, list=True)
        scoped = ContainerClient(blob_service.url, container.container_name, credential=token)
        assert [b.name for b in scoped.list_blobs()] == ["inside"]
        assert scoped.download_blob("inside").readall() == b"secret"
        stray = ContainerClient(blob_service.url, other.container_name, credential=token)
        with pytest.raises(ClientAuthenticationError) as denied:
            stray.download_blob("elsewhere").readall()
        assert denied.value.error_code == "AuthenticationFailed"
        with pytest.raises(ClientAuthenticationError):
            list(stray.list_blobs())
    finally:
        other.delete_container()


def test_container_sas_never_reaches_the_container_itself(
    blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    """A container SAS, even with every permission, cannot read or set the container's
    properties or metadata, lease it or delete it: 403 AuthorizationFailure, as Azure answers a
    container client's ``exists()`` under one. Its blobs and their listing stay in reach."""
    container.upload_blob("inside", b"data")
    token = container_sas(
        container.container_name, read=True, add=True, create=True, write=True, delete=True, list=True
    )
    scoped = ContainerClient(blob_service.url, container.container_name, credential=token)
    for refused in (
        scoped.get_container_properties,
        scoped.exists,
        lambda: scoped.set_container_metadata({"a": "b"}),
        lambda: scoped.acquire_lease(15),
        scoped.delete_container,
    ):
        with pytest.raises(HttpResponseError) as denied:
            refused()
        assert denied.value.status_code == 403 and denied.value.error_code == "AuthorizationFailure"
    assert [b.name for b in scoped.list_blobs()] == ["inside"]
    assert scoped.download_blob("inside").readall() == b"data"
    properties = container.get_container_properties()
    assert properties.metadata == {} and properties.lease.state == "available"


def test_read_sas_cannot_write(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    container.upload_blob("doc", b"v1")
    token = generate_blob_sas(
        DEV_ACCOUNT, container.container_name, "doc", account_key=DEV_KEY,
        permission=BlobSasPermissions(read=True), expiry=soon(),
    )  # fmt: skip
    reader = BlobClient(blob_service.url, container.container_name, "doc", credential=token)
    assert reader.download_blob().readall() == b"v1"
    for write in (
        lambda: reader.upload_blob(b"v2", overwrite=True),
        lambda: reader.set_blob_metadata({"a": "b"}),
        lambda: reader.delete_blob(),
        lambda: reader.stage_block("YQ==", b"x"),
    ):
        with pytest.raises(HttpResponseError) as denied:
            write()
        assert (
            denied.value.status_code == 403 and denied.value.error_code == "AuthorizationPermissionMismatch"
        )
    # A blob SAS names one blob: another blob of the same container is out of its reach.
    container.upload_blob("other", b"x")
    neighbour = BlobClient(blob_service.url, container.container_name, "other", credential=token)
    with pytest.raises(ClientAuthenticationError):
        neighbour.download_blob().readall()
    assert container.download_blob("doc").readall() == b"v1"


OVERWRITE_REFUSED = (403, "UnauthorizedBlobOverwrite")


def test_create_only_sas(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    """A SAS that may create but not write ("c" without "w") creates blobs of every type, but an
    overwrite by Put Blob (block, page or append) or Put Block List is 403
    UnauthorizedBlobOverwrite, "This request is not authorized to perform blob overwrites.", as
    Azure refuses it (AzCopy#833: a Put Blob with an sp=rlac account SAS; Hadoop ABFS's table of
    Azure's error codes), not the 409 BlobAlreadyExists of an If-None-Match: *."""
    token = container_sas(container.container_name, create=True)
    creator = ContainerClient(blob_service.url, container.container_name, credential=token)
    creator.upload_blob("new", b"first")
    creator.get_blob_client("pages").create_page_blob(512)
    creator.get_blob_client("log").create_append_blob()
    overwrites = (
        lambda: creator.upload_blob("new", b"second", overwrite=True),
        lambda: creator.get_blob_client("new").commit_block_list([]),
        lambda: creator.get_blob_client("pages").create_page_blob(1024),
        lambda: creator.get_blob_client("log").create_append_blob(),
    )
    for attempt in overwrites:
        with pytest.raises(HttpResponseError) as refused:
            attempt()
        assert (refused.value.status_code, refused.value.error_code) == OVERWRITE_REFUSED
    assert container.download_blob("new").readall() == b"first"
    assert container.get_blob_client("pages").get_blob_properties().size == 512
    raw = requests.put(
        f"{container.url}/new?{token}",
        data=b"raw",
        headers={"x-ms-blob-type": "BlockBlob", "x-ms-version": "2025-01-05"},
        timeout=10,
    )
    assert (raw.status_code, raw.headers["x-ms-error-code"]) == OVERWRITE_REFUSED
    assert "<Message>This request is not authorized to perform blob overwrites.\n" in raw.text
    explicit = requests.put(  # the request's own If-None-Match: * over a new name still creates
        f"{container.url}/fresh?{token}",
        data=b"x",
        headers={"x-ms-blob-type": "BlockBlob", "If-None-Match": "*"},
        timeout=10,
    )
    assert explicit.status_code == 201


def test_create_only_sas_overwrite_aio(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    """The same refusal through the asynchronous client."""
    container.upload_blob("held", b"kept")
    token = container_sas(container.container_name, create=True)

    async def overwrite() -> tuple[int | None, str | None]:
        async with AsyncBlobClient(
            blob_service.url, container.container_name, "held", credential=token
        ) as blob:
            try:
                await blob.upload_blob(b"new", overwrite=True)
            except HttpResponseError as error:
                return error.status_code, error.error_code
        return None, None

    assert asyncio.run(overwrite()) == OVERWRITE_REFUSED
    assert container.download_blob("held").readall() == b"kept"


def test_create_only_sas_copies_onto_new_blobs_only(
    blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    """A SAS with "c" but not "w" may copy to a new blob ("copy a blob to a new blob") but not
    over an existing one, by Copy Blob, Copy Blob From URL or Put Blob From URL (403
    UnauthorizedBlobOverwrite, as Put Blob's overwrite)."""
    container.upload_blob("src", b"source")
    container.upload_blob("dest", b"kept")
    source = f"{container.url}/src?{container_sas(container.container_name, read=True)}"
    creator = ContainerClient(
        blob_service.url,
        container.container_name,
        credential=container_sas(container.container_name, create=True),
    )
    creator.get_blob_client("fresh").start_copy_from_url(source)
    assert container.download_blob("fresh").readall() == b"source"
    dest = creator.get_blob_client("dest")
    for attempt in (
        lambda: dest.start_copy_from_url(source),
        lambda: dest.start_copy_from_url(source, requires_sync=True),
        lambda: dest.upload_blob_from_url(source, overwrite=True),
    ):
        with pytest.raises(HttpResponseError) as refused:
            attempt()
        assert (refused.value.status_code, refused.value.error_code) == OVERWRITE_REFUSED
    assert container.download_blob("dest").readall() == b"kept"
    writer = ContainerClient(
        blob_service.url,
        container.container_name,
        credential=container_sas(container.container_name, create=True, write=True),
    )
    writer.get_blob_client("dest").start_copy_from_url(source, requires_sync=True)
    assert container.download_blob("dest").readall() == b"source"


def test_stored_policy_and_revocation(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    container.upload_blob("policy", b"data")
    policy = AccessPolicy(permission=ContainerSasPermissions(read=True), expiry=soon())
    container.set_container_access_policy({"readers": policy})
    token = generate_blob_sas(
        DEV_ACCOUNT, container.container_name, "policy", account_key=DEV_KEY, policy_id="readers"
    )
    reader = BlobClient(blob_service.url, container.container_name, "policy", credential=token)
    assert reader.download_blob().readall() == b"data"
    container.set_container_access_policy({})  # revoked: the same token stops working
    with pytest.raises(ClientAuthenticationError):
        reader.download_blob().readall()


def test_expired_and_tampered_tokens(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    container.upload_blob("t", b"x")
    expired = generate_container_sas(
        DEV_ACCOUNT, container.container_name, account_key=DEV_KEY,
        permission=ContainerSasPermissions(read=True), start=datetime.now(UTC) - 2 * HOUR,
        expiry=datetime.now(UTC) - HOUR,
    )  # fmt: skip
    with pytest.raises(ClientAuthenticationError):
        BlobClient(blob_service.url, container.container_name, "t", credential=expired).download_blob()
    token = container_sas(container.container_name, read=True)
    tampered = token.replace("sp=r", "sp=rw")
    with pytest.raises(ClientAuthenticationError):
        BlobClient(blob_service.url, container.container_name, "t", credential=tampered).download_blob()


def _refusal_detail(url: str) -> str:
    answer = requests.get(url, timeout=10)
    assert (answer.status_code, answer.headers["x-ms-error-code"]) == (403, "AuthenticationFailed")
    found = re.search(r"<AuthenticationErrorDetail>(.*)</AuthenticationErrorDetail>", answer.text)
    assert found is not None, answer.text
    return found.group(1)


def test_expired_token_details_are_azures(
    blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    """Azure writes the times in RFC 1123 form, and a SAS without ``st`` starts when the request
    arrives, so an expired one is "expiry before start" (as real answers and the JS SDK's test
    "create container with invalid SAS should fail" show)."""
    container.upload_blob("t", b"x")
    blob_url = f"{blob_service.url.rstrip('/')}/{container.container_name}/t"
    expired_at = datetime(2020, 1, 7, 16, 2, tzinfo=UTC)
    no_start = generate_container_sas(
        DEV_ACCOUNT, container.container_name, account_key=DEV_KEY,
        permission=ContainerSasPermissions(read=True), expiry=expired_at,
    )  # fmt: skip
    detail = _refusal_detail(f"{blob_url}?{no_start}")
    assert re.fullmatch(
        r"Signed expiry time \[Tue, 07 Jan 2020 16:02:00 GMT\] must be after signed start time "
        r"\[\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\]",
        detail,
    ), detail
    with_start = generate_container_sas(
        DEV_ACCOUNT, container.container_name, account_key=DEV_KEY,
        permission=ContainerSasPermissions(read=True), start=expired_at - HOUR, expiry=expired_at,
    )  # fmt: skip
    detail = _refusal_detail(f"{blob_url}?{with_start}")
    assert re.fullmatch(
        r"Signature not valid in the specified time frame: Start \[Tue, 07 Jan 2020 15:02:00 GMT\] - "
        r"Expiry \[Tue, 07 Jan 2020 16:02:00 GMT\] - Current \[\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\]",
        detail,
    ), detail


def test_a_start_past_year_9999_in_utc_is_refused_in_azures_words(
    blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    """``st=9999-12-31T23:59:59-23:59`` is a valid time whose UTC lies in year 10000, which has
    no RFC 1123 date: the refusal (a start after the expiry) writes it as given, 403 as any
    other, where converting it failed the request (found by the SAS fuzz test)."""
    container.upload_blob("far", b"x")
    url = f"{blob_service.url.rstrip('/')}/{container.container_name}/far"
    far = generate_container_sas(
        DEV_ACCOUNT, container.container_name, account_key=DEV_KEY,
        permission=ContainerSasPermissions(read=True), start="9999-12-31T23:59:59-23:59",
        expiry=datetime(2999, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    detail = _refusal_detail(f"{url}?{far}")
    assert detail == (
        "Signed expiry time [Tue, 01 Jan 2999 00:00:00 GMT] must be after signed start time"
        " [Fri, 31 Dec 9999 23:59:59 -2359]"
    ), detail


def test_account_sas(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    container.upload_blob("acct", b"x")
    token = generate_account_sas(
        DEV_ACCOUNT, DEV_KEY, ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, list=True), expiry=soon(),
    )  # fmt: skip
    service = BlobServiceClient(blob_service.url, credential=token)
    assert container.container_name in [c.name for c in service.list_containers()]
    assert service.get_blob_client(container.container_name, "acct").download_blob().readall() == b"x"
    with pytest.raises(HttpResponseError) as denied:
        service.get_blob_client(container.container_name, "acct").upload_blob(b"y", overwrite=True)
    assert denied.value.error_code == "AuthorizationPermissionMismatch"
    objects_only = generate_account_sas(
        DEV_ACCOUNT,
        DEV_KEY,
        ResourceTypes(object=True),
        AccountSasPermissions(read=True, list=True),
        expiry=soon(),
    )
    with pytest.raises(HttpResponseError) as wrong_type:
        list(BlobServiceClient(blob_service.url, credential=objects_only).list_containers())
    assert wrong_type.value.error_code == "AuthorizationResourceTypeMismatch"
    table_only = generate_account_sas(
        DEV_ACCOUNT, DEV_KEY, ResourceTypes(object=True), AccountSasPermissions(read=True), expiry=soon(),
        services="t",
    )  # fmt: skip
    with pytest.raises(HttpResponseError) as wrong_service:
        BlobClient(blob_service.url, container.container_name, "acct", credential=table_only).download_blob()
    assert wrong_service.value.error_code == "AuthorizationServiceMismatch"


def test_response_header_overrides(blob_service: BlobServiceClient, container: ContainerClient) -> None:
    container.upload_blob("report.bin", b"%PDF", content_settings=None)
    token = generate_blob_sas(
        DEV_ACCOUNT, container.container_name, "report.bin", account_key=DEV_KEY,
        permission=BlobSasPermissions(read=True), expiry=soon(),
        content_disposition="attachment; filename=report.pdf", content_type="application/pdf",
        cache_control="max-age=60",
    )  # fmt: skip
    url = f"{container.url}/report.bin?{token}"
    response = requests.get(url, timeout=10)
    assert response.status_code == 200 and response.content == b"%PDF"
    assert response.headers["Content-Disposition"] == "attachment; filename=report.pdf"
    assert response.headers["Content-Type"] == "application/pdf"
    assert response.headers["Cache-Control"] == "max-age=60"


def test_anonymous_access_follows_the_acl(container: ContainerClient) -> None:
    container.upload_blob("pub", b"public bytes")
    blob_url = f"{container.url}/pub"
    list_url = f"{container.url}?restype=container&comp=list"
    # Private: anonymous callers learn nothing, not even that the blob exists.
    response = requests.get(blob_url, timeout=10)
    assert response.status_code == 404 and response.headers["x-ms-error-code"] == "ResourceNotFound"
    container.set_container_access_policy({}, public_access=PublicAccess.Blob)
    assert requests.get(blob_url, timeout=10).content == b"public bytes"
    assert requests.head(blob_url, timeout=10).headers["Content-Length"] == "12"
    assert requests.get(list_url, timeout=10).status_code == 404  # blob level: no listing
    container.set_container_access_policy({}, public_access=PublicAccess.Container)
    listing = requests.get(list_url, timeout=10)
    assert listing.status_code == 200 and b"<Name>pub</Name>" in listing.content
    anonymous = BlobClient.from_blob_url(blob_url)
    assert anonymous.download_blob().readall() == b"public bytes"
    with pytest.raises(ClientAuthenticationError) as denied:  # public read is not public write:
        anonymous.upload_blob(b"vandal", overwrite=True)  # 401, as Azure answers anonymous writes
    assert denied.value.error_code == "NoAuthenticationInformation"
    assert requests.get(f"{container.url.rsplit('/', 1)[0]}?comp=list", timeout=10).status_code == 401
    assert container.download_blob("pub").readall() == b"public bytes"


def test_sas_aio(server: ServerProcess, container: ContainerClient) -> None:
    container.upload_blob("async", b"via sas")
    token = container_sas(container.container_name, read=True)

    async def run() -> None:
        url = server.blob_endpoint
        async with AsyncBlobClient(url, container.container_name, "async", credential=token) as blob:
            assert await (await blob.download_blob()).readall() == b"via sas"
            with pytest.raises(HttpResponseError) as denied:
                await blob.upload_blob(b"no", overwrite=True)
            assert denied.value.error_code == "AuthorizationPermissionMismatch"

    asyncio.run(run())


def test_copy_source_sas_without_read_is_refused_in_its_words(
    blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    """Copy Blob under a container SAS from a source whose SAS may not read it (sp=d, sp=c):
    403 CannotVerifyCopySource in the source's words, "This request is not authorized to perform
    this operation using this permission.", as Azure answered the .NET SDK's StartCopyFromUriAsync
    (Azure/Azurite#2317); it said "Could not verify the copy source within the specified time."."""
    container.upload_blob("source.txt", b"x")
    dest = ContainerClient(
        blob_service.url,
        container.container_name,
        credential=container_sas(container.container_name, read=True, create=True),
    ).get_blob_client("destination.txt")
    words = "This request is not authorized to perform this operation using this permission."
    for permissions in ({"delete": True}, {"create": True}):
        source = f"{container.url}/source.txt?{container_sas(container.container_name, **permissions)}"
        with pytest.raises(HttpResponseError) as refused:
            dest.start_copy_from_url(source)
        assert (refused.value.status_code, refused.value.error_code) == (403, "CannotVerifyCopySource")
        assert refused.value.message.startswith(words)
    deleter = container_sas(container.container_name, delete=True)
    raw = requests.put(
        dest.url, headers={"x-ms-copy-source": f"{container.url}/source.txt?{deleter}"}, timeout=10
    )
    assert (raw.status_code, raw.headers["x-ms-error-code"]) == (403, "CannotVerifyCopySource")
    assert f"<Message>{words}\n" in raw.text
    assert not container.get_blob_client("destination.txt").exists()
