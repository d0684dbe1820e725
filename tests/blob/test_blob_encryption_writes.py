"""Customer-provided keys under concurrent writes and on copies, through the official SDKs over
HTTPS against a real server, on each backend: each write is held to its own request's key,
whatever other writes share its commit; a copy that cannot name its source's key is refused."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import uuid
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, ContainerClient, CustomerProvidedEncryptionKey
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import SelfSignedCert, make_self_signed_cert

SCOPE = "writescope"
WRITES = 24  # concurrent uploads, enough for the store to commit several in one group


def new_key() -> CustomerProvidedEncryptionKey:
    raw = os.urandom(32)
    return CustomerProvidedEncryptionKey(
        base64.b64encode(raw).decode(), base64.b64encode(hashlib.sha256(raw).digest()).decode()
    )


KEY = new_key()


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> SelfSignedCert:
    return make_self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module", params=backend_names())
def vault(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert
) -> Iterator[ServerProcess]:
    args = [*fresh_store(request.param), "--cert", str(cert.cert), "--key", str(cert.key)]
    args += ["--encryption-scope", SCOPE]
    process = ServerProcess(tmp_path_factory.mktemp("vault"), extra_args=args, backend=request.param)
    process.start()
    yield process
    process.stop()


def url(server: ServerProcess) -> str:
    return f"https://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}"


@pytest.fixture
def container(vault: ServerProcess, cert: SelfSignedCert) -> Iterator[ContainerClient]:
    with BlobServiceClient(url(vault), DEV_KEY, connection_verify=str(cert.cert), retry_total=0) as service:
        client = service.create_container("encw" + uuid.uuid4().hex[:12])
        yield client
        client.delete_container()


def refused(call, code: str, status: int = 409) -> HttpResponseError:  # type: ignore[no-untyped-def]
    with pytest.raises(HttpResponseError) as excinfo:
        call()
    assert (excinfo.value.status_code, excinfo.value.error_code) == (status, code)
    return excinfo.value


def test_concurrent_writes_each_take_their_own_key_and_scope(
    vault: ServerProcess, cert: SelfSignedCert, container: ContainerClient
) -> None:
    """Uploads with a key, with a scope and with neither, all at once: each blob ends up with
    exactly what its own request named (SQLite commits a group of writes in one task; each
    write's key must still be its own request's)."""
    kinds = ["key", "plain", "scope"]

    async def upload_all() -> None:
        async with AsyncBlobServiceClient(
            url(vault), DEV_KEY, connection_verify=str(cert.cert), retry_total=0
        ) as client:
            box = client.get_container_client(container.container_name)

            async def upload(index: int) -> None:
                kind = kinds[index % 3]
                options = {"key": {"cpk": KEY}, "scope": {"encryption_scope": SCOPE}}.get(kind, {})
                await box.upload_blob(f"b{index}", f"{kind}{index}".encode(), **options)

            await asyncio.gather(*(upload(index) for index in range(WRITES)))

    asyncio.run(upload_all())
    for index in range(WRITES):
        kind, blob = kinds[index % 3], container.get_blob_client(f"b{index}")
        if kind == "key":
            refused(blob.get_blob_properties, "BlobUsesCustomerSpecifiedEncryption")
            properties = blob.get_blob_properties(cpk=KEY)
            assert (properties.encryption_key_sha256, properties.encryption_scope) == (KEY.key_hash, None)
        else:
            properties = blob.get_blob_properties()
            assert properties.encryption_key_sha256 is None
            assert properties.encryption_scope == (SCOPE if kind == "scope" else None)
        assert blob.download_blob(cpk=KEY if kind == "key" else None).readall() == f"{kind}{index}".encode()


def test_copy_blob_cannot_copy_a_source_written_with_a_key(container: ContainerClient) -> None:
    """Copy Blob names no key for its source (Azure's takes none), so a source written with
    one is refused as a read without the key is, with the source's refusal in the copy-source
    headers; nothing is written. A source with a scope copies."""
    source = container.get_blob_client("keyed")
    source.upload_blob(b"secret", cpk=KEY)
    target = container.get_blob_client("copy")
    error = refused(lambda: target.start_copy_from_url(source.url), "CannotVerifyCopySource")
    assert error.response.headers["x-ms-copy-source-status-code"] == "409"
    assert error.response.headers["x-ms-copy-source-error-code"] == "BlobUsesCustomerSpecifiedEncryption"
    assert not target.exists()
    snapshot = source.create_snapshot(cpk=KEY)
    from_snapshot = container.get_blob_client("keyed", snapshot=snapshot["snapshot"])
    refused(lambda: target.start_copy_from_url(from_snapshot.url), "CannotVerifyCopySource")
    assert not target.exists()

    scoped = container.get_blob_client("scoped")
    scoped.upload_blob(b"open to the account", encryption_scope=SCOPE)
    assert target.start_copy_from_url(scoped.url)["copy_status"] == "success"
    assert target.download_blob().readall() == b"open to the account"


def test_a_snapshot_echoes_no_key(container: ContainerClient) -> None:
    """Snapshot Blob writes no content: Azure answers it ``x-ms-request-server-encrypted:
    false`` and echoes neither the key's SHA-256 nor the scope (as recorded), while a write of
    content under the same key echoes it."""
    seen: dict[str, str] = {}

    def keep(response) -> None:  # type: ignore[no-untyped-def]
        seen.clear()
        seen.update(response.http_response.headers)

    for options in ({"cpk": KEY}, {"encryption_scope": SCOPE}, {}):
        blob = container.get_blob_client("snap" + uuid.uuid4().hex[:8])
        blob.upload_blob(b"content", raw_response_hook=keep, **options)
        assert seen["x-ms-request-server-encrypted"] == "true"
        blob.create_snapshot(raw_response_hook=keep, **options)
        assert seen["x-ms-request-server-encrypted"] == "false"
        assert "x-ms-encryption-key-sha256" not in seen and "x-ms-encryption-scope" not in seen
