"""Bearer tokens on the Queue service (``--oauth basic`` over HTTPS), through the official SDK:
the same authentication flow as the Table service's, with the queue's own audience."""

from __future__ import annotations

import pytest
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.storage.queue import QueueClient

from tests.serverproc import DEV_ACCOUNT, ServerProcess
from tests.tls import SelfSignedCert, StaticTokenCredential, make_jwt


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
    for token, status in (
        # the Table service's audience: 401 with the challenge, as Azure answers a foreign audience
        # on the Queue service (recorded for the JS SDK's queue "bearer token challenge" test)
        (make_jwt(aud=f"https://{DEV_ACCOUNT}.table.core.windows.net"), 401),
        (make_jwt(exp=1_000_000_000), 403),
    ):
        with pytest.raises((ClientAuthenticationError, HttpResponseError)) as error:
            queue(oauth_server, cert, token, queue_name).create_queue()
        assert error.value.status_code == status
