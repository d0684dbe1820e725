"""A bearer token past its expiry on the Blob service (``--oauth basic`` over HTTPS): 401
InvalidAuthenticationInfo, the message that points at the challenge, the challenge, and Azure's
reason "Lifetime validation failed. The token is expired.", as Azure answers it (the answer
AzCopy keeps beside its sign-in-again policy, Azure/azure-storage-azcopy ste/destReauthPolicy.go;
azure-sdk-for-net#42859, Azure.Storage.Blobs 12.13.0, March 2024), so that the SDKs' challenge
policies fetch a new token. A token not yet valid keeps the generic 403 (its words are not on
record), as does the Table service. Found by Azurite's OAuth tests. One server per store."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.storage.blob import BlobServiceClient
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, ServerProcess
from tests.tls import (
    AsyncStaticTokenCredential,
    SelfSignedCert,
    StaticTokenCredential,
    https_request,
    make_jwt,
)

EXPIRED = "Lifetime validation failed. The token is expired."
CHALLENGE_MESSAGE = (
    "<Message>Server failed to authenticate the request. "
    "Please refer to the information in the www-authenticate header."
)


@pytest.fixture(scope="module", params=backend_names())
def oauth_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert
) -> Iterator[ServerProcess]:
    args = [*fresh_store(request.param), "--workers", "1", "--cert", str(cert.cert), "--key", str(cert.key)]
    process = ServerProcess(
        tmp_path_factory.mktemp("lifetime"), extra_args=[*args, "--oauth", "basic"], backend=request.param
    ).start()
    yield process
    process.stop()


def _url(server: ServerProcess) -> str:
    return f"https://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}"


def _expired() -> str:
    return make_jwt(nbf=time.time() - 7200, exp=time.time() - 3600)


def test_expired_token_raw(oauth_server: ServerProcess, cert: SelfSignedCert) -> None:
    response = https_request(
        oauth_server.blob_port,
        cert,
        "GET",
        f"/{DEV_ACCOUNT}/?comp=list",
        {"Authorization": f"Bearer {_expired()}", "x-ms-version": "2025-01-05"},
    )
    assert response.status == 401, response
    assert response.header("x-ms-error-code") == "InvalidAuthenticationInfo"
    body = response.body.decode()
    assert CHALLENGE_MESSAGE in body
    assert f"<AuthenticationErrorDetail>{EXPIRED}</AuthenticationErrorDetail>" in body
    assert (response.header("WWW-Authenticate") or "").startswith(
        "Bearer authorization_uri=https://login.microsoftonline.com/"
    )


def test_expired_token_sdk(oauth_server: ServerProcess, cert: SelfSignedCert) -> None:
    with BlobServiceClient(
        _url(oauth_server), StaticTokenCredential(_expired()), connection_verify=str(cert.cert), retry_total=0
    ) as client:
        with pytest.raises(ClientAuthenticationError) as caught:
            client.create_container("nevermade")
        assert (caught.value.status_code, caught.value.error_code) == (401, "InvalidAuthenticationInfo")
    with BlobServiceClient(
        _url(oauth_server), StaticTokenCredential(make_jwt()), connection_verify=str(cert.cert), retry_total=0
    ) as valid:
        assert "nevermade" not in [c.name for c in valid.list_containers()]


def test_expired_token_aio(oauth_server: ServerProcess, cert: SelfSignedCert) -> None:
    async def attempt() -> tuple[int | None, str | None]:
        async with AsyncBlobServiceClient(
            _url(oauth_server),
            AsyncStaticTokenCredential(_expired()),
            connection_verify=str(cert.cert),
            retry_total=0,
        ) as client:
            try:
                await client.get_service_properties()
            except ClientAuthenticationError as error:
                return error.status_code, error.error_code
        return None, None

    assert asyncio.run(attempt()) == (401, "InvalidAuthenticationInfo")


def test_token_not_yet_valid_keeps_403(oauth_server: ServerProcess, cert: SelfSignedCert) -> None:
    early = make_jwt(nbf=time.time() + 3600, exp=time.time() + 7200)
    response = https_request(
        oauth_server.blob_port,
        cert,
        "GET",
        f"/{DEV_ACCOUNT}/?comp=list",
        {"Authorization": f"Bearer {early}", "x-ms-version": "2025-01-05"},
    )
    assert (response.status, response.header("x-ms-error-code")) == (403, "AuthenticationFailed")
