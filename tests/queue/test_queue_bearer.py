"""Bearer tokens on the Queue service (``--oauth basic`` over HTTPS), through the official SDK:
the same authentication flow as the Table service's, with the queue's own audience."""

from __future__ import annotations

import asyncio
import time

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.storage.queue import QueueClient
from azure.storage.queue.aio import QueueClient as AioQueueClient

from tests.serverproc import DEV_ACCOUNT, ServerProcess
from tests.tls import AsyncStaticTokenCredential, SelfSignedCert, StaticTokenCredential, make_jwt


def queue(server: ServerProcess, cert: SelfSignedCert, token: str, name: str) -> QueueClient:
    url = f"https://127.0.0.1:{server.queue_port}/{DEV_ACCOUNT}"
    return QueueClient(
        url, name, credential=StaticTokenCredential(token), connection_verify=str(cert.cert), retry_total=0
    )


@pytest.mark.parametrize(
    "audience",
    ["https://storage.azure.com", f"https://{DEV_ACCOUNT}.queue.core.windows.net/"],
)
def test_bearer_tokens_reach_every_queue_operation(
    oauth_server: ServerProcess, cert: SelfSignedCert, queue_name: str, audience: str
) -> None:
    client = queue(oauth_server, cert, make_jwt(aud=audience), queue_name)
    client.create_queue()
    client.send_message("by token")
    message = client.receive_message()
    assert message.content == "by token"
    client.delete_message(message)
    client.delete_queue()


def test_tokens_for_another_service_or_expired_are_refused(
    oauth_server: ServerProcess, cert: SelfSignedCert, queue_name: str
) -> None:
    """The Table service's audience is not the queue's: 401 InvalidAuthenticationInfo with the
    challenge, as Azure answers a foreign audience; an expired token is the same 401."""
    for token, status in (
        (make_jwt(aud=f"https://{DEV_ACCOUNT}.table.core.windows.net"), 401),
        (make_jwt(exp=1_000_000_000), 401),
    ):
        with pytest.raises((ClientAuthenticationError, HttpResponseError)) as error:
            queue(oauth_server, cert, token, queue_name).create_queue()
        assert error.value.status_code == status


EXPIRED_DETAIL = (
    "<AuthenticationErrorDetail>Lifetime validation failed. The token is expired.</AuthenticationErrorDetail>"
)


def test_an_expired_token_is_refused_in_azures_words(
    oauth_server: ServerProcess, cert: SelfSignedCert, queue_name: str
) -> None:
    """An expired token: the challenge's 401 InvalidAuthenticationInfo, whose
    AuthenticationErrorDetail says so, as Azure answers it on the Blob service (azure-sdk-for-net#42859)
    and a foreign audience on both; a token not yet valid is a bare 403. Found by Azurite's OAuth
    tests ("invalid exp")."""
    expired = queue(oauth_server, cert, make_jwt(exp=time.time() - 3600), queue_name)
    with pytest.raises(ClientAuthenticationError) as error:
        expired.create_queue()
    assert (error.value.status_code, error.value.error_code) == (401, "InvalidAuthenticationInfo")
    assert EXPIRED_DETAIL in error.value.response.text()
    early = queue(oauth_server, cert, make_jwt(nbf=time.time() + 3600), queue_name)
    with pytest.raises(ClientAuthenticationError) as error:
        early.create_queue()
    assert (error.value.status_code, error.value.error_code) == (403, "AuthenticationFailed")
    assert "AuthenticationErrorDetail" not in error.value.response.text()


def test_an_expired_token_is_refused_in_azures_words_aio(
    oauth_server: ServerProcess, cert: SelfSignedCert, queue_name: str
) -> None:
    url = f"https://127.0.0.1:{oauth_server.queue_port}/{DEV_ACCOUNT}"
    credential = AsyncStaticTokenCredential(make_jwt(exp=time.time() - 3600))

    async def scenario() -> None:
        async with AioQueueClient(
            url, queue_name, credential=credential, connection_verify=str(cert.cert), retry_total=0
        ) as client:
            with pytest.raises(ClientAuthenticationError) as error:
                await client.get_queue_properties()
            assert (error.value.status_code, error.value.error_code) == (401, "InvalidAuthenticationInfo")
            assert EXPIRED_DETAIL in error.value.response.text()

    asyncio.run(scenario())


class ScopedTokenCredential:
    """Mints a token whose audience is the resource of the scope asked for, as Microsoft Entra ID
    issues them, and records the scopes."""

    def __init__(self) -> None:
        self.scopes_seen: list[str] = []

    def _token(self, scopes: tuple[str, ...]) -> AccessToken:
        self.scopes_seen.append(scopes[0])
        return AccessToken(make_jwt(aud=scopes[0].removesuffix("/.default")), int(time.time()) + 3600)

    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        return self._token(scopes)


class AsyncScopedTokenCredential(ScopedTokenCredential):
    async def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:  # type: ignore[override]
        return self._token(scopes)

    async def close(self) -> None:
        return None


BAD_AUDIENCE = "https://badaudience.blob.core.windows.net"


def test_foreign_audience_challenge_lets_the_sdk_retry(
    oauth_server: ServerProcess, cert: SelfSignedCert, queue_name: str
) -> None:
    """A client told the wrong audience gets 401 with the challenge, fetches a token for the
    challenge's resource and succeeds, as the SDKs' "Bearer token challenge" tests do on Azure."""
    credential = ScopedTokenCredential()
    url = f"https://127.0.0.1:{oauth_server.queue_port}/{DEV_ACCOUNT}"
    client = QueueClient(
        url, queue_name, credential=credential, audience=BAD_AUDIENCE, connection_verify=str(cert.cert)
    )
    client.create_queue()
    assert client.get_queue_properties().name == queue_name
    assert credential.scopes_seen[0].startswith(BAD_AUDIENCE)
    assert "https://storage.azure.com/.default" in credential.scopes_seen
    client.delete_queue()


def test_foreign_audience_challenge_lets_the_async_sdk_retry(
    oauth_server: ServerProcess, cert: SelfSignedCert, queue_name: str
) -> None:
    credential = AsyncScopedTokenCredential()
    url = f"https://127.0.0.1:{oauth_server.queue_port}/{DEV_ACCOUNT}"

    async def scenario() -> None:
        async with AioQueueClient(
            url, queue_name, credential=credential, audience=BAD_AUDIENCE, connection_verify=str(cert.cert)
        ) as client:
            await client.create_queue()
            assert (await client.get_queue_properties()).name == queue_name
            await client.delete_queue()

    asyncio.run(scenario())
    assert credential.scopes_seen[0].startswith(BAD_AUDIENCE)
    assert "https://storage.azure.com/.default" in credential.scopes_seen
