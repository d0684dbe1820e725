"""User delegation keys and SAS (``--oauth basic`` over HTTPS), through the official SDK: a bearer
token gets a key, the key signs blob and container SAS tokens, and the server checks them as
Azure does (the key's fields and window, the permissions, the signature over every field of the
token's version, signed request headers and query parameters)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, quote, urlencode

import pytest
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.storage.blob import (
    BlobClient,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
    UserDelegationKey,
    generate_blob_sas,
    generate_container_sas,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import (
    TENANT,
    AsyncStaticTokenCredential,
    SelfSignedCert,
    StaticTokenCredential,
    https_request,
    make_jwt,
)

OID = "00000000-0000-0000-0000-000000000001"  # make_jwt's
CORRELATION = "6f0e9a3c-2d1b-4c5e-8a7f-0b1c2d3e4f50"
OTHER_CORRELATION = "6f0e9a3c-2d1b-4c5e-8a7f-0b1c2d3e4f51"


@pytest.fixture(scope="module")
def oauth_server(tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert) -> Iterator[ServerProcess]:
    args = ["--workers", "1", "--cert", str(cert.cert), "--key", str(cert.key), "--oauth", "basic"]
    process = ServerProcess(tmp_path_factory.mktemp("udkdata"), extra_args=args).start()
    yield process
    process.stop()


def url(server: ServerProcess) -> str:
    return f"https://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}"


@pytest.fixture
def service(oauth_server: ServerProcess, cert: SelfSignedCert) -> Iterator[BlobServiceClient]:
    credential = StaticTokenCredential(make_jwt())
    with BlobServiceClient(
        url(oauth_server), credential, connection_verify=str(cert.cert), retry_total=0
    ) as client:
        yield client


@pytest.fixture
def container(service: BlobServiceClient, table_name: str) -> Iterator[ContainerClient]:
    client = service.create_container(f"u{table_name.lower()}")
    yield client
    client.delete_container()


def now() -> datetime:
    return datetime.now(UTC)


def key_for(service: BlobServiceClient, hours: float = 1, **kwargs: str) -> UserDelegationKey:
    return service.get_user_delegation_key(
        now() - timedelta(minutes=5), now() + timedelta(hours=hours), **kwargs
    )


def as_sas(server: ServerProcess, cert: SelfSignedCert, cls: type, *names: str, token: str) -> BlobClient:
    client: BlobClient = cls(
        url(server), *names, credential=token, connection_verify=str(cert.cert), retry_total=0
    )
    return client


def test_get_user_delegation_key(service: BlobServiceClient) -> None:
    start, expiry = now().replace(microsecond=0), now().replace(microsecond=0) + timedelta(hours=2)
    first = service.get_user_delegation_key(start, expiry)
    second = service.get_user_delegation_key(start, expiry)
    assert (first.signed_oid, first.signed_tid, first.signed_service) == (OID, TENANT, "b")
    assert first.signed_start == start.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert first.signed_expiry == expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert first.signed_version == "2026-10-06"
    assert first.value == second.value and len(first.value) == 44  # 32 bytes, base64
    other = service.get_user_delegation_key(start, expiry + timedelta(seconds=1))
    assert other.value != first.value
    delegated = service.get_user_delegation_key(start, expiry, delegated_user_tid="tenant-b")
    assert delegated.signed_delegated_user_tid == "tenant-b" and delegated.value != first.value


def test_key_needs_a_bearer_token_and_a_window_within_seven_days(
    oauth_server: ServerProcess, cert: SelfSignedCert, service: BlobServiceClient
) -> None:
    with BlobServiceClient(
        url(oauth_server),
        {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY},
        connection_verify=str(cert.cert),
        retry_total=0,
    ) as keyed:
        with pytest.raises(ClientAuthenticationError) as refused:
            key_for(keyed)
        assert (refused.value.status_code, refused.value.error_code) == (403, "AuthenticationFailed")
        assert "<AuthenticationErrorDetail>Only authentication scheme Bearer is supported<" in str(
            refused.value
        )
    for start, expiry in (
        (now(), now() + timedelta(days=7, minutes=5)),  # longer than seven days
        (now(), now() - timedelta(minutes=1)),  # ends before it starts
    ):
        with pytest.raises(HttpResponseError) as bad:
            service.get_user_delegation_key(start, expiry)
        assert (bad.value.status_code, bad.value.error_code) == (400, "InvalidXmlNodeValue")
    assert key_for(service, hours=24 * 7 - 1).value
    body = b"<KeyInfo><Start>2026-01-01T00:00:00Z</Start></KeyInfo>"
    headers = {"Authorization": f"Bearer {make_jwt()}", "x-ms-version": "2026-10-06"}
    target = f"/{DEV_ACCOUNT}/?restype=service&comp=userdelegationkey"
    reply = https_request(oauth_server.blob_port, cert, "POST", target, headers, body)
    assert reply.status == 400 and reply.headers["x-ms-error-code"] == "MissingRequiredXmlNode"
    reply = https_request(oauth_server.blob_port, cert, "POST", target, headers, b"<KeyInfo><Expiry>")
    assert reply.status == 400 and reply.headers["x-ms-error-code"] == "InvalidXmlDocument"


def _with_another_signature(token: str) -> str:
    """The token with a well-formed signature that signs nothing: a fixed slice of the text would
    sometimes cut a percent escape in two and make the query itself malformed."""
    fields = dict(parse_qsl(token, keep_blank_values=True))
    fields["sig"] = base64.b64encode(bytes(32)).decode()
    return urlencode(fields, quote_via=quote)


def test_user_delegation_blob_sas(
    oauth_server: ServerProcess, cert: SelfSignedCert, service: BlobServiceClient, container: ContainerClient
) -> None:
    container.upload_blob("doc", b"secret")
    key = key_for(service)
    name = container.container_name
    token = generate_blob_sas(
        DEV_ACCOUNT, name, "doc", user_delegation_key=key,
        permission=BlobSasPermissions(read=True), expiry=now() + timedelta(minutes=30),
    )  # fmt: skip
    assert "skoid=" in token and "sig=" in token
    reader = as_sas(oauth_server, cert, BlobClient, name, "doc", token=token)
    assert reader.download_blob().readall() == b"secret"
    with pytest.raises(HttpResponseError) as denied:
        reader.upload_blob(b"other", overwrite=True)
    assert (denied.value.status_code, denied.value.error_code) == (403, "AuthorizationPermissionMismatch")
    # The key's fields are signed: a token naming another object id, or a tampered signature, fails.
    for forged in (
        token.replace(f"skoid={OID}", "skoid=00000000-0000-0000-0000-000000000002"),
        _with_another_signature(token),
    ):
        with pytest.raises(ClientAuthenticationError) as failed:
            as_sas(oauth_server, cert, BlobClient, name, "doc", token=forged).download_blob().readall()
        assert failed.value.error_code == "AuthenticationFailed"
    # Another blob of the container is out of a blob SAS's reach.
    container.upload_blob("next", b"x")
    with pytest.raises(ClientAuthenticationError):
        as_sas(oauth_server, cert, BlobClient, name, "next", token=token).download_blob().readall()


def test_a_key_out_of_its_window_signs_nothing(
    oauth_server: ServerProcess, cert: SelfSignedCert, service: BlobServiceClient, container: ContainerClient
) -> None:
    container.upload_blob("old", b"x")
    stale = service.get_user_delegation_key(now() - timedelta(hours=3), now() - timedelta(hours=2))
    token = generate_blob_sas(
        DEV_ACCOUNT, container.container_name, "old", user_delegation_key=stale,
        permission=BlobSasPermissions(read=True), expiry=now() + timedelta(minutes=30),
    )  # fmt: skip
    with pytest.raises(ClientAuthenticationError) as failed:
        as_sas(oauth_server, cert, BlobClient, container.container_name, "old", token=token).download_blob()
    assert (failed.value.status_code, failed.value.error_code) == (403, "AuthenticationFailed")


def test_user_delegation_container_sas_aio(
    oauth_server: ServerProcess, cert: SelfSignedCert, service: BlobServiceClient, container: ContainerClient
) -> None:
    for name in ("a", "b", "c"):
        container.upload_blob(name, b"x")

    async def run() -> tuple[list[str], list[int]]:
        credential = AsyncStaticTokenCredential(make_jwt())
        async with AsyncBlobServiceClient(
            url(oauth_server), credential, connection_verify=str(cert.cert), retry_total=0
        ) as bearer:
            key = await bearer.get_user_delegation_key(
                now() - timedelta(minutes=5), now() + timedelta(hours=1)
            )
        token = generate_container_sas(
            DEV_ACCOUNT, container.container_name, user_delegation_key=key,
            permission=ContainerSasPermissions(read=True, list=True, delete=True),
            expiry=now() + timedelta(minutes=30),
        )  # fmt: skip
        async with AsyncContainerClient(
            url(oauth_server), container.container_name, credential=token,
            connection_verify=str(cert.cert), retry_total=0,
        ) as client:  # fmt: skip
            listed = [blob.name async for blob in client.list_blobs()]
            parts = await client.delete_blobs("a", "b")  # a batch whose parts carry the token
            return listed, [part.status_code async for part in parts]

    listed, statuses = asyncio.run(run())
    assert listed == ["a", "b", "c"] and statuses == [202, 202]
    assert [blob.name for blob in container.list_blobs()] == ["c"]


def test_delegated_user_and_signed_request_fields(
    oauth_server: ServerProcess, cert: SelfSignedCert, service: BlobServiceClient, container: ContainerClient
) -> None:
    container.upload_blob("dyn", b"abc")
    key = key_for(service, delegated_user_tid=TENANT)
    headers = {"foo$": "bar!", "company": "msft"}
    params = {"hello$": "world!", "firstName": "john,Tim"}
    token = generate_blob_sas(
        DEV_ACCOUNT, container.container_name, "dyn", user_delegation_key=key,
        permission=BlobSasPermissions(read=True), expiry=now() + timedelta(minutes=30),
        user_delegation_oid=OID, request_headers=headers, request_query_params=params,
    )  # fmt: skip
    assert "skdutid=" in token and "sduoid=" in token and "srh=" in token and "srq=" in token

    def send(request_headers: dict[str, str], request_params: dict[str, str]) -> None:
        def hook(request: object) -> None:
            http_request = request.http_request  # type: ignore[attr-defined]
            http_request.headers.update(request_headers)
            http_request.url += "&" + urlencode(request_params, quote_via=quote, safe="")

        blob = as_sas(oauth_server, cert, BlobClient, container.container_name, "dyn", token=token)
        blob.get_blob_properties(raw_request_hook=hook)

    send(headers, params)
    for wrong_headers, wrong_params in (
        ({**headers, "company": "other"}, params),
        (headers, {"hello$": "world!"}),
    ):
        with pytest.raises(ClientAuthenticationError):
            send(wrong_headers, wrong_params)


def sign_by_layout(key: UserDelegationKey, fields: list[str]) -> str:
    """A signature over ``fields`` joined by LF, with the key's value (as a client signs)."""
    mac = hmac.new(base64.b64decode(key.value), "\n".join(fields).encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


@pytest.mark.parametrize("version", ["2018-11-09", "2020-02-10", "2020-12-06"])
def test_older_versions_sign_their_own_fields(
    oauth_server: ServerProcess,
    cert: SelfSignedCert,
    service: BlobServiceClient,
    container: ContainerClient,
    version: str,
) -> None:
    """Tokens of older ``sv`` signed by the REST reference's layout for that version: the agent
    and correlation ids from 2020-02-10, the encryption scope from 2020-12-06."""
    container.upload_blob("v", b"versioned")
    key = key_for(service)
    expiry = (now() + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    resource = f"/blob/{DEV_ACCOUNT}/{container.container_name}/v"
    key_fields = [
        key.signed_oid,
        key.signed_tid,
        key.signed_start,
        key.signed_expiry,
        "b",
        key.signed_version,
    ]
    query = {"sv": version, "sr": "b", "sp": "r", "se": expiry}
    query.update(zip(("skoid", "sktid", "skt", "ske", "sks", "skv"), key_fields, strict=True))
    fields = ["r", "", expiry, resource, *key_fields]
    if version >= "2020-02-10":
        # scid must be a GUID (Azure refuses others: the Java Data Lake SDK's recorded
        # SasTests.fileSystemUserDelegationCorrelationIdError)
        query.update(saoid="agent-1", scid=CORRELATION)
        fields += ["agent-1", "", CORRELATION]
    fields += ["", "", version, "b", ""]  # sip, spr, sv, sr, snapshot time
    if version >= "2020-12-06":
        fields.append("")  # ses
    fields += ["", "", "", "", ""]  # rscc .. rsct
    query["sig"] = sign_by_layout(key, fields)
    target = f"/{DEV_ACCOUNT}/{container.container_name}/v?{urlencode(query)}"
    reply = https_request(oauth_server.blob_port, cert, "GET", target, {"x-ms-version": "2026-10-06"})
    assert (reply.status, reply.body) == (200, b"versioned")
    if version >= "2020-02-10":  # the ids are signed: another correlation id breaks the signature
        tampered = target.replace(f"scid={CORRELATION}", f"scid={OTHER_CORRELATION}")
        reply = https_request(oauth_server.blob_port, cert, "GET", tampered, {"x-ms-version": "2026-10-06"})
        assert reply.status == 403 and reply.headers["x-ms-error-code"] == "AuthenticationFailed"
