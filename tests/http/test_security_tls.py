"""HTTPS (``--cert/--key``) and bearer tokens (``--oauth basic``)."""

from __future__ import annotations

import asyncio
import gc
import http.client
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ServiceRequestError
from azure.data.tables import (
    AccountSasPermissions,
    ResourceTypes,
    TableClient,
    TableServiceClient,
    generate_account_sas,
    generate_table_sas,
)
from azure.data.tables.aio import TableClient as AsyncTableClient

from tests.rawhttp import JSON_NOMETADATA, RawClient, RawResponse
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import (
    ISSUER,
    TENANT,
    AsyncStaticTokenCredential,
    SelfSignedCert,
    StaticTokenCredential,
    https_request,
    make_jwt,
)

KEY_CREDENTIAL = AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY)
# AuthenticationErrorDetail as real Azure words it (quoted in azure-sdk-for-java#24926,
# AzureStorageExplorer#9050 and a Stack Overflow question on a 403 from Blob storage)
ISSUER_MISMATCH = "Issuer validation failed. Issuer did not match."
AUDIENCE_MISMATCH = "Audience validation failed. Audience did not match."


def _tls_server(tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert, *extra: str) -> ServerProcess:
    args = ["--workers", "1", "--cert", str(cert.cert), "--key", str(cert.key), *extra]
    return ServerProcess(tmp_path_factory.mktemp("tlsdata"), extra_args=args).start()


@pytest.fixture(scope="module")
def oauth_server(tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert) -> Iterator[ServerProcess]:
    process = _tls_server(tmp_path_factory, cert, "--oauth", "basic")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def tls_only_server(
    tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert
) -> Iterator[ServerProcess]:
    """HTTPS, but bearer tokens left off (the default)."""
    process = _tls_server(tmp_path_factory, cert)
    yield process
    process.stop()


def _endpoint(server: ServerProcess) -> str:
    return f"https://127.0.0.1:{server.port}/{DEV_ACCOUNT}"


def _keyed(server: ServerProcess, cert: SelfSignedCert) -> TableServiceClient:
    return TableServiceClient(
        endpoint=_endpoint(server), credential=KEY_CREDENTIAL, connection_verify=str(cert.cert), retry_total=0
    )


def _bearer(
    server: ServerProcess, cert: SelfSignedCert, credential: StaticTokenCredential
) -> TableServiceClient:
    return TableServiceClient(
        endpoint=_endpoint(server), credential=credential, connection_verify=str(cert.cert), retry_total=0
    )


def _table_exists(client: TableServiceClient, name: str) -> bool:
    return any(t.name == name for t in client.query_tables(f"TableName eq '{name}'"))


# ------------------------------------------------------------------------------------------
# HTTPS with Shared Key
# ------------------------------------------------------------------------------------------


def test_sdk_over_https_with_trusted_certificate(
    oauth_server: ServerProcess, cert: SelfSignedCert, table_name: str
) -> None:
    connection_string = (
        f"DefaultEndpointsProtocol=https;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
        f"TableEndpoint={_endpoint(oauth_server)};"
    )
    with TableServiceClient.from_connection_string(
        connection_string, connection_verify=str(cert.cert)
    ) as client:
        assert client.url.startswith("https://")
        table = client.create_table(table_name)
        table.create_entity({"PartitionKey": "p", "RowKey": "tls", "V": 1})
        assert [e["V"] for e in table.query_entities("RowKey eq 'tls'")] == [1]
        assert client.get_service_stats()["geo_replication"]["status"] == "live"
        client.delete_table(table_name)
        assert not _table_exists(client, table_name)


def test_client_without_the_certificate_refuses_the_connection(
    oauth_server: ServerProcess, table_name: str
) -> None:
    with (
        TableServiceClient(
            endpoint=_endpoint(oauth_server), credential=KEY_CREDENTIAL, retry_total=0
        ) as client,
        pytest.raises(ServiceRequestError),
    ):
        client.create_table(table_name)


def test_https_only_sas_works_over_tls(
    oauth_server: ServerProcess, cert: SelfSignedCert, table_name: str
) -> None:
    with _keyed(oauth_server, cert) as keyed:
        keyed.create_table(table_name)
        try:
            expiry = datetime.now(UTC) + timedelta(hours=1)
            table_token = generate_table_sas(
                KEY_CREDENTIAL, table_name, permission="ra", expiry=expiry, protocol="https"
            )
            with TableClient(
                endpoint=_endpoint(oauth_server),
                table_name=table_name,
                credential=AzureSasCredential(table_token),
                connection_verify=str(cert.cert),
                retry_total=0,
            ) as client:
                client.create_entity({"PartitionKey": "p", "RowKey": "sas"})
            account_token = generate_account_sas(
                KEY_CREDENTIAL,
                ResourceTypes(container=True, object=True),
                AccountSasPermissions(read=True, list=True),
                expiry,
                protocol="https",
            )
            with TableServiceClient(
                endpoint=_endpoint(oauth_server),
                credential=AzureSasCredential(account_token),
                connection_verify=str(cert.cert),
                retry_total=0,
            ) as client:
                assert table_name in {t.name for t in client.list_tables()}
                assert [e["RowKey"] for e in client.get_table_client(table_name).list_entities()] == ["sas"]
        finally:
            keyed.delete_table(table_name)


# ------------------------------------------------------------------------------------------
# Bearer tokens
# ------------------------------------------------------------------------------------------


def test_bearer_token_table_and_entity_operations(
    oauth_server: ServerProcess, cert: SelfSignedCert, table_name: str
) -> None:
    credential = StaticTokenCredential(make_jwt())
    with _bearer(oauth_server, cert, credential) as client:
        table = client.create_table(table_name)
        assert _table_exists(client, table_name)
        table.create_entity({"PartitionKey": "p", "RowKey": "1", "V": 1})
        table.upsert_entity({"PartitionKey": "p", "RowKey": "2", "V": 2})
        table.update_entity({"PartitionKey": "p", "RowKey": "1", "V": 10})
        assert table.get_entity("p", "1")["V"] == 10
        assert [(e["RowKey"], e["V"]) for e in table.query_entities("PartitionKey eq 'p'")] == [
            ("1", 10),
            ("2", 2),
        ]
        table.submit_transaction([("delete", {"PartitionKey": "p", "RowKey": "2"})])
        table.delete_entity("p", "1")
        assert list(table.list_entities()) == []
        assert table.get_table_access_policy() == {}
        client.delete_table(table_name)
        assert not _table_exists(client, table_name)
    assert credential.scopes_seen, "the SDK never asked the credential for a token"
    assert all(scopes == ("https://storage.azure.com/.default",) for scopes in credential.scopes_seen)


@pytest.mark.parametrize(
    ("aud", "iss"),
    [
        ("https://storage.azure.com/", ISSUER),
        ("e406a681-f3d4-42a8-90b6-c2b029497af1", ISSUER),
        (f"https://{DEV_ACCOUNT}.table.core.windows.net", ISSUER),
        ("https://storage.azure.com", f"https://login.microsoftonline.com/{TENANT}/v2.0"),
    ],
    ids=["storage-slash", "app-id", "account-url", "v2-issuer"],
)
def test_bearer_accepted_audiences_and_issuers(
    oauth_server: ServerProcess, cert: SelfSignedCert, table_name: str, aud: str, iss: str
) -> None:
    with _bearer(oauth_server, cert, StaticTokenCredential(make_jwt(aud=aud, iss=iss))) as client:
        client.create_table(table_name)
        assert table_name in [table.name for table in client.list_tables()]
        client.delete_table(table_name)


BAD_TOKENS = {
    "expired": lambda: make_jwt(nbf=time.time() - 7200, exp=time.time() - 3600),
    "not-yet-valid": lambda: make_jwt(nbf=time.time() + 3600, exp=time.time() + 7200),
}
FOREIGN_AUDIENCES = {
    "wrong-audience": "https://vault.azure.net",
    "other-account": "https://someoneelse.table.core.windows.net",
}


@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
def test_bad_bearer_token_is_403_and_creates_nothing(
    oauth_server: ServerProcess, cert: SelfSignedCert, table_name: str, case: str
) -> None:
    with (
        _bearer(oauth_server, cert, StaticTokenCredential(BAD_TOKENS[case]())) as client,
        pytest.raises(ClientAuthenticationError) as caught,
    ):
        client.create_table(table_name)
    assert caught.value.status_code == 403
    assert caught.value.error_code == "AuthenticationFailed"
    with _keyed(oauth_server, cert) as keyed:
        assert not _table_exists(keyed, table_name)


@pytest.mark.parametrize("case", sorted(FOREIGN_AUDIENCES))
def test_foreign_audience_on_the_table_service_is_403_and_creates_nothing(
    oauth_server: ServerProcess, cert: SelfSignedCert, table_name: str, case: str
) -> None:
    """The Table service's answer to a token for another resource is not on record (Blob's and
    Queue's are 401 with the challenge, tested below): it stays 403 AuthenticationFailed."""
    token = make_jwt(aud=FOREIGN_AUDIENCES[case])
    with (
        _bearer(oauth_server, cert, StaticTokenCredential(token)) as client,
        pytest.raises(ClientAuthenticationError) as caught,
    ):
        client.create_table(table_name)
    assert caught.value.status_code == 403
    assert caught.value.error_code == "AuthenticationFailed"
    with _keyed(oauth_server, cert) as keyed:
        assert not _table_exists(keyed, table_name)


def test_bad_bearer_token_raw_carries_challenge(oauth_server: ServerProcess, cert: SelfSignedCert) -> None:
    token = make_jwt(nbf=time.time() - 7200, exp=time.time() - 3600)
    response = https_request(
        oauth_server.port,
        cert,
        "GET",
        f"/{DEV_ACCOUNT}/Tables",
        {"Authorization": f"Bearer {token}", "x-ms-version": "2019-02-02", "Accept": JSON_NOMETADATA},
    )
    assert response.status == 403, response
    assert response.error_code == "AuthenticationFailed"
    assert response.header("x-ms-error-code") == "AuthenticationFailed"
    challenge = response.header("WWW-Authenticate") or ""
    assert challenge.startswith("Bearer authorization_uri=https://login.microsoftonline.com/"), response
    assert "resource_id=https://storage.azure.com" in challenge


def test_untrusted_issuer_is_401_invalid_authentication_info(
    oauth_server: ServerProcess, cert: SelfSignedCert, table_name: str
) -> None:
    """A token from an issuer Azure does not trust: 401 InvalidAuthenticationInfo, the message
    that points at the challenge, and why, as Azure has answered since 2021 (on every service)."""
    token = make_jwt(iss="https://evil.example/")
    with (
        _bearer(oauth_server, cert, StaticTokenCredential(token)) as client,
        pytest.raises(ClientAuthenticationError) as caught,
    ):
        client.create_table(table_name)
    assert caught.value.status_code == 401
    assert caught.value.error_code == "InvalidAuthenticationInfo"
    with _keyed(oauth_server, cert) as keyed:
        assert not _table_exists(keyed, table_name)
    for response in _challenged_on_blob_and_queue(oauth_server, cert, token, ISSUER_MISMATCH):
        assert (response.header("WWW-Authenticate") or "").startswith("Bearer authorization_uri=")


def _challenged_on_blob_and_queue(
    oauth_server: ServerProcess, cert: SelfSignedCert, token: str, detail: str
) -> list[RawResponse]:
    """List Containers and List Queues with ``token``: each 401 InvalidAuthenticationInfo, the
    message that points at the challenge, and ``detail`` as the reason; the answers."""
    answers = []
    for port in (oauth_server.blob_port, oauth_server.queue_port):
        response = https_request(
            port,
            cert,
            "GET",
            f"/{DEV_ACCOUNT}/?comp=list",
            {"Authorization": f"Bearer {token}", "x-ms-version": "2021-08-06"},
        )
        assert response.status == 401, response
        assert response.header("x-ms-error-code") == "InvalidAuthenticationInfo"
        body = response.body.decode()
        assert (
            "<Message>Server failed to authenticate the request. "
            "Please refer to the information in the www-authenticate header." in body
        )
        assert f"<AuthenticationErrorDetail>{detail}</AuthenticationErrorDetail>" in body
        answers.append(response)
    return answers


def test_foreign_audience_says_why(oauth_server: ServerProcess, cert: SelfSignedCert) -> None:
    """A token for another resource on the Blob and Queue services: 401 InvalidAuthenticationInfo,
    the message that points at the challenge, and Azure's reason, as Azure answers (recorded for
    the JS SDKs' "bearer token challenge should work" and "customized audience should work" on
    blob, queue and Data Lake clients); the Table service keeps 403 (test above)."""
    token = make_jwt(aud="https://someoneelse.blob.core.windows.net")
    for response in _challenged_on_blob_and_queue(oauth_server, cert, token, AUDIENCE_MISMATCH):
        # the tenant stands in the challenge (the token's here), for the SDKs ask for a new token
        # only when one does, as Azure's names the account's
        assert response.header("WWW-Authenticate") == (
            f"Bearer authorization_uri=https://login.microsoftonline.com/{TENANT}/oauth2/authorize "
            "resource_id=https://storage.azure.com"
        )
    odd = make_jwt(aud="https://someoneelse.blob.core.windows.net", extra={"tid": "not-a-tenant"})
    response = https_request(
        oauth_server.blob_port, cert, "GET", f"/{DEV_ACCOUNT}/?comp=list",
        {"Authorization": f"Bearer {odd}", "x-ms-version": "2021-08-06"},
    )  # fmt: skip
    assert "login.microsoftonline.com/common/oauth2/authorize" in (response.header("WWW-Authenticate") or "")


def test_anonymous_over_https_is_401_with_challenge(
    oauth_server: ServerProcess, cert: SelfSignedCert
) -> None:
    response = https_request(
        oauth_server.port, cert, "GET", f"/{DEV_ACCOUNT}/Tables", {"x-ms-version": "2019-02-02"}
    )
    assert response.status == 401, response
    assert response.header("x-ms-error-code") == "NoAuthenticationInformation"
    assert (response.header("WWW-Authenticate") or "").startswith("Bearer ")


@pytest.mark.parametrize("token", ["not-a-jwt", "a.b.c", "x.eyJhdWQiOiAx.y"])
def test_malformed_bearer_token_is_refused(
    oauth_server: ServerProcess, cert: SelfSignedCert, table_name: str, token: str
) -> None:
    response = https_request(
        oauth_server.port,
        cert,
        "POST",
        f"/{DEV_ACCOUNT}/Tables",
        {"Authorization": f"Bearer {token}", "Content-Type": JSON_NOMETADATA, "x-ms-version": "2019-02-02"},
        f'{{"TableName": "{table_name}"}}'.encode(),
    )
    assert response.status in {400, 401, 403}, response
    assert response.header("x-ms-error-code") in {"InvalidAuthenticationInfo", "AuthenticationFailed"}
    with _keyed(oauth_server, cert) as keyed:
        assert not _table_exists(keyed, table_name)


def test_async_bearer_token(oauth_server: ServerProcess, cert: SelfSignedCert, table_name: str) -> None:
    with _keyed(oauth_server, cert) as keyed:
        keyed.create_table(table_name)

    async def scenario() -> list[str]:
        credential = AsyncStaticTokenCredential(make_jwt())
        async with AsyncTableClient(
            endpoint=_endpoint(oauth_server),
            table_name=table_name,
            credential=credential,
            connection_verify=str(cert.cert),
        ) as client:
            await client.create_entity({"PartitionKey": "p", "RowKey": "async"})
            return [e["RowKey"] async for e in client.list_entities()]

    try:
        assert asyncio.run(scenario()) == ["async"]
    finally:
        with _keyed(oauth_server, cert) as keyed:
            keyed.delete_table(table_name)


# ------------------------------------------------------------------------------------------
# Bearer tokens when --oauth is off
# ------------------------------------------------------------------------------------------


def test_bearer_refused_when_oauth_is_off(
    tls_only_server: ServerProcess, cert: SelfSignedCert, table_name: str
) -> None:
    with (
        _bearer(tls_only_server, cert, StaticTokenCredential(make_jwt())) as client,
        pytest.raises(HttpResponseError) as caught,
    ):
        client.create_table(table_name)
    assert caught.value.status_code in {400, 401, 403}
    # The error's traceback keeps the client's connection pool (and its open keep-alive socket)
    # alive through a reference cycle; collect it now, or the server waits for it at shutdown.
    del caught
    gc.collect()
    with _keyed(tls_only_server, cert) as keyed:
        assert not _table_exists(keyed, table_name)
        # Shared Key still works on the same server.
        keyed.create_table(table_name)
        keyed.delete_table(table_name)


def test_bearer_header_over_plain_http_is_refused(
    server: ServerProcess, service: TableServiceClient, table_name: str
) -> None:
    response = RawClient(server.port).request(
        "POST",
        "Tables",
        {"TableName": table_name},
        {"Content-Type": JSON_NOMETADATA, "Authorization": f"Bearer {make_jwt()}"},
        auth="none",
    )
    assert response.status in {400, 401, 403}, response
    assert response.header("x-ms-error-code") in {"InvalidAuthenticationInfo", "AuthenticationFailed"}
    assert not _table_exists(service, table_name)


def test_an_idle_tls_keep_alive_connection_does_not_hold_up_the_stop(
    tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert
) -> None:
    """Stopping closes an idle HTTPS connection without waiting for the client's close_notify,
    which a pooled connection nobody reads never sends: the server exits cleanly, well inside
    its (here long) shutdown timeout."""
    server = _tls_server(tmp_path_factory, cert, "--shutdown-timeout", "60")
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=30, context=cert.ssl_context())
    try:
        conn.request("GET", f"/{DEV_ACCOUNT}/Tables", headers={"x-ms-version": "2019-02-02"})
        response = conn.getresponse()
        response.read()
        assert response.getheader("Connection", "keep-alive").lower() != "close"  # kept open, idle
        started = time.monotonic()
        code = server.stop(timeout=45)
        assert code == 0 and time.monotonic() - started < 30
    finally:
        conn.close()
        server.stop()


def test_the_consoles_cookie_over_https_is_secure(
    tls_only_server: ServerProcess, cert: SelfSignedCert
) -> None:
    """Over HTTPS the console's session cookie is ``Secure``: a browser never sends it over plain
    HTTP, where anyone on the way could read it."""
    page = https_request(tls_only_server.port, cert, "GET", "/-/console/signin")
    assert page.status == 200
    cookie = page.header("set-cookie") or ""
    assert cookie.startswith("tabulae_console=") and "; Secure" in cookie and "HttpOnly" in cookie
