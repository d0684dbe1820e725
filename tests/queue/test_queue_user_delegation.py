"""User delegation keys and SAS on the Queue service (``--oauth basic`` over HTTPS), through the
official SDK: Azure serves Get User Delegation Key on the Queue endpoint too (``SignedService``
``q``, as its recordings of azure-storage-queue's ``test_get_user_delegation_sas`` show), and the
key signs queue SAS tokens (azure-storage-queue 12.18's ``generate_queue_sas`` with
``user_delegation_key``), which the server checks as it checks queue SAS tokens."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.storage.queue import QueueClient, QueueSasPermissions, QueueServiceClient, generate_queue_sas

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import TENANT, SelfSignedCert, StaticTokenCredential, make_jwt

OID = "00000000-0000-0000-0000-000000000001"  # make_jwt's


def url(server: ServerProcess) -> str:
    return f"https://127.0.0.1:{server.queue_port}/{DEV_ACCOUNT}"


@pytest.fixture
def service(oauth_server: ServerProcess, cert: SelfSignedCert) -> Iterator[QueueServiceClient]:
    with QueueServiceClient(
        url(oauth_server), StaticTokenCredential(make_jwt()), connection_verify=str(cert.cert), retry_total=0
    ) as client:
        yield client


@pytest.fixture
def queue(service: QueueServiceClient, table_name: str) -> Iterator[QueueClient]:
    client = service.create_queue(f"q{table_name.lower()}")
    yield client
    client.delete_queue()


def window(hours: int = 1) -> tuple[datetime, datetime]:
    start = datetime.now(UTC).replace(microsecond=0)
    return start, start + timedelta(hours=hours)


def test_get_user_delegation_key(service: QueueServiceClient) -> None:
    start, expiry = window(2)
    first = service.get_user_delegation_key(start=start, expiry=expiry)
    second = service.get_user_delegation_key(start=start, expiry=expiry)
    assert (first.signed_oid, first.signed_tid, first.signed_service) == (OID, TENANT, "q")
    assert first.signed_expiry == expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert first.value == second.value and first.value
    delegated = service.get_user_delegation_key(start=start, expiry=expiry, delegated_user_tid="tenant-b")
    assert delegated.signed_delegated_user_tid == "tenant-b" and delegated.value != first.value


def test_only_a_bearer_token_gets_a_key(oauth_server: ServerProcess, cert: SelfSignedCert) -> None:
    with QueueServiceClient(
        url(oauth_server),
        {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY},
        connection_verify=str(cert.cert),
        retry_total=0,
    ) as keyed:
        with pytest.raises(ClientAuthenticationError) as refused:
            start, expiry = window()
            keyed.get_user_delegation_key(start=start, expiry=expiry)
        assert (refused.value.status_code, refused.value.error_code) == (403, "AuthenticationFailed")


def test_user_delegation_queue_sas(
    service: QueueServiceClient, queue: QueueClient, cert: SelfSignedCert
) -> None:
    start, expiry = window()
    key = service.get_user_delegation_key(start=start, expiry=expiry)

    def client(permission: QueueSasPermissions, **kwargs: object) -> QueueClient:
        token = generate_queue_sas(
            DEV_ACCOUNT,
            queue.queue_name,
            permission=permission,
            expiry=expiry,
            user_delegation_key=key,
            **kwargs,
        )
        return QueueClient.from_queue_url(
            f"{queue.url}?{token}", connection_verify=str(cert.cert), retry_total=0
        )

    with client(QueueSasPermissions(add=True, process=True), user_delegation_oid=OID) as signed:
        signed.send_message("by delegation")
        assert [message.content for message in signed.receive_messages()] == ["by delegation"]
    with client(QueueSasPermissions(read=True)) as reader:
        with pytest.raises(HttpResponseError) as refused:
            reader.send_message("not allowed")
        assert (refused.value.status_code, refused.value.error_code) == (
            403,
            "AuthorizationPermissionMismatch",
        )
    key.signed_service = "b"  # a Blob key's fields: the signature no longer matches any queue key
    with client(QueueSasPermissions(add=True)) as forged:
        with pytest.raises(ClientAuthenticationError) as bad:
            forged.send_message("forged")
        assert (bad.value.status_code, bad.value.error_code) == (403, "AuthenticationFailed")


def test_roles_enforced_a_blob_data_role_gets_a_queue_key(
    tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert
) -> None:
    """With ``--oauth-role``, a key takes the Blob service's generateUserDelegationKey action,
    which Azure names for Blob, Files and Queue alike: a Blob data role has it, a queue role
    does not (403 AuthorizationPermissionMismatch)."""
    reader, queue_only = "00000000-0000-0000-0000-0000000000aa", "00000000-0000-0000-0000-0000000000bb"
    roles = ["--oauth-role", f"{reader}=reader", "--oauth-role", f"{queue_only}=queue-contributor"]
    args = ["--workers", "1", "--cert", str(cert.cert), "--key", str(cert.key), "--oauth", "basic", *roles]
    process = ServerProcess(tmp_path_factory.mktemp("qudkroles"), extra_args=args).start()
    try:
        start, expiry = window()
        for oid, allowed in ((reader, True), (queue_only, False)):
            with QueueServiceClient(
                url(process),
                StaticTokenCredential(make_jwt(extra={"oid": oid})),
                connection_verify=str(cert.cert),
                retry_total=0,
            ) as client:
                if allowed:
                    assert client.get_user_delegation_key(start=start, expiry=expiry).signed_oid == oid
                else:
                    with pytest.raises(HttpResponseError) as refused:
                        client.get_user_delegation_key(start=start, expiry=expiry)
                    assert (refused.value.status_code, refused.value.error_code) == (
                        403,
                        "AuthorizationPermissionMismatch",
                    )
    finally:
        process.stop()
