"""Customer-provided keys and encryption scopes, through the official SDKs (sync and aio) over
HTTPS against a real server, on each backend: a blob remembers its key's SHA-256 and its scope;
reads and changes in place without the key, or with another, get Azure's 409s; scopes come from
``--encryption-scope`` and a container's default; bad headers get Azure's codes. Concurrent
writes each keep their own request's key; a copy that cannot name its source's key is refused."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import (
    BlobBlock,
    BlobSasPermissions,
    BlobServiceClient,
    BlobType,
    ContainerClient,
    ContainerEncryptionScope,
    CustomerProvidedEncryptionKey,
    generate_blob_sas,
)
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
from azure.storage.filedatalake import DataLakeServiceClient, EncryptionScopeOptions

from tests.backends import backend_names
from tests.blobhttp import BlobHttp, sign
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import SelfSignedCert, https_request

LAKE = "lakeacct"
LAKE_KEY = base64.b64encode(b"lake-account-key-for-encryption!").decode()
SCOPE, OTHER_SCOPE, LAKE_SCOPE = "scopeone", "scopetwo", "lakescope"


def new_key() -> CustomerProvidedEncryptionKey:
    raw = os.urandom(32)
    return CustomerProvidedEncryptionKey(
        base64.b64encode(raw).decode(), base64.b64encode(hashlib.sha256(raw).digest()).decode()
    )


KEY, OTHER_KEY = new_key(), new_key()
SCOPE_DENIED = ContainerEncryptionScope(SCOPE, prevent_encryption_scope_override=True)
SCOPE_REFUSAL = (
    "BlobCustomerSpecifiedEncryptionMismatch"  # a key or scope where the container denies overrides
)


@pytest.fixture(scope="module", params=backend_names())
def vault(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert
) -> Iterator[ServerProcess]:
    """HTTPS, two scopes for every account, one for the HNS account alone."""
    args = [*fresh_store(request.param), "--cert", str(cert.cert), "--key", str(cert.key)]
    args += ["--account", f"{DEV_ACCOUNT}:{DEV_KEY}", "--account", f"{LAKE}:{LAKE_KEY}", "--hns", LAKE]
    args += ["--encryption-scope", SCOPE, "--encryption-scope", OTHER_SCOPE]
    args += ["--encryption-scope", f"{LAKE}:{LAKE_SCOPE}"]
    process = ServerProcess(tmp_path_factory.mktemp("vault"), extra_args=args, backend=request.param)
    process.start()
    yield process
    process.stop()


def url(server: ServerProcess, account: str = DEV_ACCOUNT) -> str:
    return f"https://127.0.0.1:{server.blob_port}/{account}"


@pytest.fixture
def service(vault: ServerProcess, cert: SelfSignedCert) -> Iterator[BlobServiceClient]:
    with BlobServiceClient(url(vault), DEV_KEY, connection_verify=str(cert.cert), retry_total=0) as client:
        yield client


@pytest.fixture
def container(service: BlobServiceClient) -> Iterator[ContainerClient]:
    client = service.create_container("enc" + uuid.uuid4().hex[:12])
    yield client
    client.delete_container()


def code_of(excinfo: pytest.ExceptionInfo[HttpResponseError]) -> str | None:
    return excinfo.value.error_code


def refused(call, code: str, status: int = 409) -> HttpResponseError:  # type: ignore[no-untyped-def]
    with pytest.raises(HttpResponseError) as excinfo:
        call()
    assert (excinfo.value.status_code, code_of(excinfo)) == (status, code)
    return excinfo.value


# ------------------------------------------------------------------------ customer-provided keys


def test_a_blob_written_with_a_key_is_read_only_with_that_key(container: ContainerClient) -> None:
    blob = container.get_blob_client("secret.txt")
    written = blob.upload_blob(b"classified", cpk=KEY)
    assert written["request_server_encrypted"] is True
    assert written["encryption_key_sha256"] == KEY.key_hash

    refused(lambda: blob.download_blob().readall(), "BlobUsesCustomerSpecifiedEncryption")
    refused(lambda: blob.get_blob_properties(), "BlobUsesCustomerSpecifiedEncryption")
    refused(lambda: blob.download_blob(cpk=OTHER_KEY).readall(), "BlobCustomerSpecifiedEncryptionMismatch")

    download = blob.download_blob(cpk=KEY)
    assert download.readall() == b"classified"
    assert download.properties.encryption_key_sha256 == KEY.key_hash
    assert blob.get_blob_properties(cpk=KEY).encryption_key_sha256 == KEY.key_hash

    plain = container.get_blob_client("plain.txt")
    plain.upload_blob(b"open")
    refused(lambda: plain.download_blob(cpk=KEY).readall(), "BlobDoesNotUseCustomerSpecifiedEncryption")
    blob.upload_blob(b"rewritten", overwrite=True)  # Put Blob makes a new blob: no key needed
    assert blob.download_blob().readall() == b"rewritten"


def test_changes_in_place_need_the_key(container: ContainerClient) -> None:
    log = container.get_blob_client("log")
    log.create_append_blob(cpk=KEY)
    refused(lambda: log.append_block(b"x"), "BlobUsesCustomerSpecifiedEncryption")
    refused(lambda: log.append_block(b"x", cpk=OTHER_KEY), "BlobCustomerSpecifiedEncryptionMismatch")
    assert log.append_block(b"entry", cpk=KEY)["encryption_key_sha256"] == KEY.key_hash
    refused(lambda: log.set_blob_metadata({"a": "b"}), "BlobUsesCustomerSpecifiedEncryption")
    log.set_blob_metadata({"a": "b"}, cpk=KEY)
    refused(lambda: log.create_snapshot(), "BlobUsesCustomerSpecifiedEncryption")
    snapshot = log.create_snapshot(cpk=KEY)
    copy = container.get_blob_client("log", snapshot=snapshot["snapshot"])
    assert copy.download_blob(cpk=KEY).readall() == b"entry"
    refused(lambda: copy.get_blob_properties(), "BlobUsesCustomerSpecifiedEncryption")

    pages = container.get_blob_client("disk")
    pages.create_page_blob(1024, cpk=KEY)
    refused(lambda: pages.upload_page(b"\0" * 512, 0, 512), "BlobUsesCustomerSpecifiedEncryption")
    pages.upload_page(b"\1" * 512, 0, 512, cpk=KEY)
    assert pages.download_blob(cpk=KEY, offset=0, length=512).readall() == b"\1" * 512
    # what needs no key: tier, tags, lease, delete
    lease = log.acquire_lease()
    lease.release()
    log.set_blob_tags({"t": "1"})
    log.delete_blob(delete_snapshots="include")


def test_blocks_are_committed_with_the_key_they_were_staged_with(container: ContainerClient) -> None:
    blob = container.get_blob_client("blocks")
    blob.stage_block("b1", b"one", cpk=KEY)
    refused(lambda: blob.commit_block_list([BlobBlock("b1")]), "BlobUsesCustomerSpecifiedEncryption")
    refused(
        lambda: blob.commit_block_list([BlobBlock("b1")], cpk=OTHER_KEY),
        "BlobCustomerSpecifiedEncryptionMismatch",
    )
    blob.commit_block_list([BlobBlock("b1")], cpk=KEY)
    # blocks staged again over the committed blob, under a new key: the commit names it
    blob.stage_block("b2", b"two", cpk=OTHER_KEY)
    refused(
        lambda: blob.commit_block_list([BlobBlock("b2")], cpk=KEY), "BlobCustomerSpecifiedEncryptionMismatch"
    )
    blob.commit_block_list([BlobBlock("b2")], cpk=OTHER_KEY)
    assert blob.download_blob(cpk=OTHER_KEY).readall() == b"two"
    refused(lambda: blob.download_blob(cpk=KEY).readall(), "BlobCustomerSpecifiedEncryptionMismatch")


def test_a_commit_never_mixes_blocks_of_two_keys(container: ContainerClient) -> None:
    """Blocks staged under one key are not committed under another: a block staged under a key
    other than the blocks already staged is refused (no commit could then name both), and a
    commit under a new key cannot name the blob's committed blocks, written under its old key."""
    blob = container.get_blob_client("mixed")
    blob.stage_block("b1", b"one", cpk=KEY)
    refused(lambda: blob.stage_block("b2", b"two", cpk=OTHER_KEY), "BlobCustomerSpecifiedEncryptionMismatch")
    refused(lambda: blob.stage_block("b2", b"two"), "BlobUsesCustomerSpecifiedEncryption")
    refused(
        lambda: blob.commit_block_list([BlobBlock("b1")], cpk=OTHER_KEY),
        "BlobCustomerSpecifiedEncryptionMismatch",
    )
    blob.stage_block("b2", b"two", cpk=KEY)
    blob.commit_block_list([BlobBlock("b1"), BlobBlock("b2")], cpk=KEY)
    assert blob.download_blob(cpk=KEY).readall() == b"onetwo"
    # nothing staged now: blocks under a new key may replace the blob, but not join its own
    blob.stage_block("b3", b"three", cpk=OTHER_KEY)
    committed_and_new = [BlobBlock("b1"), BlobBlock("b3")]
    refused(
        lambda: blob.commit_block_list(committed_and_new, cpk=OTHER_KEY),
        "BlobCustomerSpecifiedEncryptionMismatch",
    )
    plain = container.get_blob_client("plain")
    plain.stage_block("p1", b"plain")
    refused(lambda: plain.stage_block("p2", b"keyed", cpk=KEY), "BlobDoesNotUseCustomerSpecifiedEncryption")
    blob.commit_block_list([BlobBlock("b3")], cpk=OTHER_KEY)
    assert blob.download_blob(cpk=OTHER_KEY).readall() == b"three"


def test_a_copy_reads_its_source_with_the_sources_key(container: ContainerClient) -> None:
    source = container.get_blob_client("source")
    source.upload_blob(b"0123456789", cpk=KEY)
    sas = generate_blob_sas(
        DEV_ACCOUNT, container.container_name, "source", account_key=DEV_KEY,
        permission=BlobSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    source_url = f"{source.url}?{sas}"
    target = container.get_blob_client("target")
    with pytest.raises(HttpResponseError) as excinfo:
        target.upload_blob_from_url(source_url)
    assert (excinfo.value.status_code, code_of(excinfo)) == (409, "CannotVerifyCopySource")
    assert (
        excinfo.value.response.headers["x-ms-copy-source-error-code"] == "BlobUsesCustomerSpecifiedEncryption"
    )
    with pytest.raises(HttpResponseError) as excinfo:
        target.upload_blob_from_url(source_url, source_cpk=OTHER_KEY)
    assert excinfo.value.response.headers["x-ms-copy-source-error-code"] == (
        "BlobCustomerSpecifiedEncryptionMismatch"
    )
    target.upload_blob_from_url(source_url, source_cpk=KEY, cpk=OTHER_KEY)  # re-keyed on the way
    assert target.download_blob(cpk=OTHER_KEY).readall() == b"0123456789"
    refused(lambda: source.query_blob("SELECT * from BlobStorage"), "BlobUsesCustomerSpecifiedEncryption")
    assert source.query_blob("SELECT * from BlobStorage", cpk=KEY).readall() == b"0123456789\n"


def _put(server: ServerProcess, cert: SelfSignedCert, path: str, headers: dict[str, str]) -> tuple[int, str]:
    target = f"/{DEV_ACCOUNT}/{path}"
    base = {"x-ms-blob-type": "BlockBlob", "Content-Length": "0", **headers}
    signed = sign("PUT", f"https://127.0.0.1:{server.blob_port}{target}", base)
    reply = https_request(server.blob_port, cert, "PUT", target, signed)
    return reply.status, reply.headers.get("x-ms-error-code") or ""


def test_bad_key_headers_get_azures_codes(
    vault: ServerProcess, cert: SelfSignedCert, container: ContainerClient
) -> None:
    name = f"{container.container_name}/raw"
    key, digest = KEY.key_value, KEY.key_hash
    short = base64.b64encode(b"x" * 16).decode()
    cases = [
        ({"x-ms-encryption-key": key, "x-ms-encryption-key-sha256": digest}, "MissingRequiredHeader"),
        ({"x-ms-encryption-key": key, "x-ms-encryption-algorithm": "AES256"}, "MissingRequiredHeader"),
        ({"x-ms-encryption-key": key, "x-ms-encryption-key-sha256": OTHER_KEY.key_hash,
          "x-ms-encryption-algorithm": "AES256"}, "InvalidHeaderValue"),
        ({"x-ms-encryption-key": short, "x-ms-encryption-key-sha256": digest,
          "x-ms-encryption-algorithm": "AES256"}, "InvalidHeaderValue"),
        ({"x-ms-encryption-key": "not base64!", "x-ms-encryption-key-sha256": digest,
          "x-ms-encryption-algorithm": "AES256"}, "InvalidHeaderValue"),
        ({"x-ms-encryption-key": key, "x-ms-encryption-key-sha256": digest,
          "x-ms-encryption-algorithm": "AES128"}, "InvalidHeaderValue"),
        ({"x-ms-encryption-key": key, "x-ms-encryption-key-sha256": digest,
          "x-ms-encryption-algorithm": "AES256", "x-ms-encryption-scope": SCOPE}, "InvalidHeaderValue"),
    ]  # fmt: skip
    for headers, code in cases:
        assert _put(vault, cert, name, headers) == (400, code), headers
    assert _put(vault, cert, name, {"x-ms-encryption-scope": "noSuchScope"}) == (
        409,
        "EncryptionScopeNotAvailable",
    )
    good = {
        "x-ms-encryption-key": key,
        "x-ms-encryption-key-sha256": digest,
        "x-ms-encryption-algorithm": "AES256",
    }
    assert _put(vault, cert, name, good) == (201, "")
    target = f"/{DEV_ACCOUNT}/{container.container_name}?restype=container&comp=list"
    signed = sign("GET", f"https://127.0.0.1:{vault.blob_port}{target}", {})
    listing = https_request(vault.blob_port, cert, "GET", target, signed).body.decode()
    assert f"<CustomerProvidedKeySha256>{digest}</CustomerProvidedKeySha256>" in listing
    refused(
        lambda: container.get_blob_client("raw").download_blob().readall(),
        "BlobUsesCustomerSpecifiedEncryption",
    )


def test_a_key_is_refused_over_plain_http(server: ServerProcess) -> None:
    raw = BlobHttp(server.blob_port)
    assert raw.request("PUT", "/nokeys?restype=container").status in (201, 409)
    headers = {
        "x-ms-blob-type": "BlockBlob",
        "x-ms-encryption-key": KEY.key_value,
        "x-ms-encryption-key-sha256": KEY.key_hash,
        "x-ms-encryption-algorithm": "AES256",
    }
    reply = raw.request("PUT", "/nokeys/blob", headers)
    assert (reply.status, reply.code) == (400, "InvalidInput")
    assert raw.request("GET", "/nokeys/blob").status == 404  # nothing was written


LONE_ALGORITHM = {"x-ms-encryption-algorithm": "AES256"}  # what @azure/storage-blob 12.6-12.8 add


def test_a_lone_algorithm_header_names_no_key(server: ServerProcess) -> None:
    """@azure/storage-blob 12.6.0 to 12.8.0 send ``x-ms-encryption-algorithm: AES256`` on every
    request, with no key: the request is one without a key, over HTTP as well."""
    raw = BlobHttp(server.blob_port)
    assert raw.request("PUT", "/lonealg?restype=container").status in (201, 409)
    headers = {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream", **LONE_ALGORITHM}
    put = raw.request("PUT", "/lonealg/blob", headers, b"abc")
    assert (put.status, put.code) == (201, None)
    assert "x-ms-encryption-key-sha256" not in put.headers
    assert raw.request("HEAD", "/lonealg/blob", LONE_ALGORITHM).status == 200
    read = raw.request("GET", "/lonealg/blob", LONE_ALGORITHM)
    assert (read.status, read.body) == (200, b"abc")
    assert raw.request("GET", "/lonealg/blob").body == b"abc"  # written without a key
    assert (
        raw.request("PUT", "/lonealg/blob?comp=metadata", {"x-ms-meta-k": "v", **LONE_ALGORITHM}).status
        == 200
    )


def test_a_lone_algorithm_header_does_not_read_a_keyed_blob(
    vault: ServerProcess, cert: SelfSignedCert, container: ContainerClient
) -> None:
    container.get_blob_client("keyed").upload_blob(b"secret", cpk=KEY)
    target = f"/{DEV_ACCOUNT}/{container.container_name}/keyed"
    signed = sign("GET", f"https://127.0.0.1:{vault.blob_port}{target}", LONE_ALGORITHM)
    reply = https_request(vault.blob_port, cert, "GET", target, signed)
    assert (reply.status, reply.headers.get("x-ms-error-code")) == (
        409,
        "BlobUsesCustomerSpecifiedEncryption",
    )
    assert _put(vault, cert, f"{container.container_name}/plain", LONE_ALGORITHM) == (201, "")


def test_aio_round_trip(vault: ServerProcess, cert: SelfSignedCert, container: ContainerClient) -> None:
    async def scenario() -> None:
        async with AsyncBlobServiceClient(
            url(vault), DEV_KEY, connection_verify=str(cert.cert), retry_total=0
        ) as client:
            blob = client.get_blob_client(container.container_name, "async")
            assert (await blob.upload_blob(b"aio", cpk=KEY))["encryption_key_sha256"] == KEY.key_hash
            with pytest.raises(HttpResponseError) as excinfo:
                await blob.get_blob_properties()
            assert code_of(excinfo) == "BlobUsesCustomerSpecifiedEncryption"
            assert await (await blob.download_blob(cpk=KEY)).readall() == b"aio"

    asyncio.run(scenario())


# ------------------------------------------------------------------------------ encryption scopes


def test_a_blob_keeps_the_scope_it_was_written_with(container: ContainerClient) -> None:
    blob = container.get_blob_client("scoped")
    assert blob.upload_blob(b"data", encryption_scope=SCOPE)["encryption_scope"] == SCOPE
    assert blob.get_blob_properties().encryption_scope == SCOPE
    assert blob.download_blob().properties.encryption_scope == SCOPE  # reads need no scope
    assert [b.encryption_scope for b in container.list_blobs()] == [SCOPE]
    refused(lambda: blob.set_blob_metadata({"k": "v"}), "BlobCustomerSpecifiedEncryptionMismatch")
    refused(
        lambda: blob.create_snapshot(encryption_scope=OTHER_SCOPE), "BlobCustomerSpecifiedEncryptionMismatch"
    )
    blob.set_blob_metadata({"k": "v"}, encryption_scope=SCOPE)
    blob.upload_blob(b"again", overwrite=True)  # a new blob, under the account's key
    assert blob.get_blob_properties().encryption_scope is None
    # a scope the account lacks (another account's too): test_a_scope_the_account_lacks_is_not_available
    refused(
        lambda: blob.upload_blob(b"x", overwrite=True, encryption_scope="unknownscope"),
        "EncryptionScopeNotAvailable",
    )
    refused(
        lambda: blob.upload_blob(b"x", overwrite=True, encryption_scope=LAKE_SCOPE),
        "EncryptionScopeNotAvailable",
    )


def test_a_containers_default_scope(service: BlobServiceClient) -> None:
    name = "def" + uuid.uuid4().hex[:12]
    deny = "deny" + uuid.uuid4().hex[:12]
    client = service.create_container(name, container_encryption_scope=ContainerEncryptionScope(SCOPE))
    locked = service.create_container(
        deny,
        container_encryption_scope=ContainerEncryptionScope(SCOPE, prevent_encryption_scope_override=True),
    )
    try:
        props = client.get_container_properties()
        assert props.encryption_scope.default_encryption_scope == SCOPE
        assert props.encryption_scope.prevent_encryption_scope_override is False
        listed = {c.name: c.encryption_scope for c in service.list_containers(name_starts_with="de")}
        assert listed[name].default_encryption_scope == SCOPE
        assert listed[deny].prevent_encryption_scope_override is True

        assert client.get_blob_client("a").upload_blob(b"a")["encryption_scope"] == SCOPE
        assert client.get_blob_client("b").upload_blob(b"b", encryption_scope=OTHER_SCOPE)[
            "encryption_scope"
        ] == (OTHER_SCOPE)
        blob = locked.get_blob_client("c")
        refused(  # Azure's recorded answer (the JS SDK's "create container preventEncryptionScopeOverride")
            lambda: blob.upload_blob(b"c", BlobType.APPENDBLOB, encryption_scope=OTHER_SCOPE),
            "RequestForbiddenByContainerEncryptionPolicy",
            403,
        )
        refused(
            lambda: locked.get_blob_client("d").upload_blob(b"d", encryption_scope=OTHER_SCOPE),
            "RequestForbiddenByContainerEncryptionPolicy",
            403,
        )
        assert blob.upload_blob(b"c", BlobType.APPENDBLOB)["encryption_scope"] == SCOPE
        assert blob.append_block(b"d")["encryption_scope"] == SCOPE
        refused(
            lambda: service.create_container(
                "bad" + uuid.uuid4().hex[:8], container_encryption_scope=ContainerEncryptionScope("nosuch")
            ),
            "InvalidHeaderValue",
            400,
        )
    finally:
        client.delete_container()
        locked.delete_container()


def test_data_lake_paths_take_keys_and_scopes(vault: ServerProcess, cert: SelfSignedCert) -> None:
    lake = DataLakeServiceClient(
        f"https://127.0.0.1:{vault.blob_port}/{LAKE}",
        LAKE_KEY,
        connection_verify=str(cert.cert),
        retry_total=0,
    )
    fs = lake.create_file_system("fs" + uuid.uuid4().hex[:10])
    try:
        directory = fs.create_directory("dir")
        file = directory.create_file("secret", cpk=KEY)
        file.append_data(b"lake data", 0, cpk=KEY)
        flushed = file.flush_data(9, cpk=KEY)
        assert flushed["request_server_encrypted"] is True
        with pytest.raises(HttpResponseError) as excinfo:
            file.append_data(b"more", 9)
        assert code_of(excinfo) == "BlobUsesCustomerSpecifiedEncryption"
        assert file.download_file(cpk=KEY).readall() == b"lake data"
        assert file.get_file_properties(cpk=KEY).size == 9
        with pytest.raises(HttpResponseError) as excinfo:
            file.download_file().readall()
        assert code_of(excinfo) == "BlobUsesCustomerSpecifiedEncryption"
        assert directory.get_directory_properties().name == "dir"  # its parent took no key
    finally:
        fs.delete_file_system()
    scoped = lake.create_file_system(
        "fs" + uuid.uuid4().hex[:10], encryption_scope_options=EncryptionScopeOptions(LAKE_SCOPE)
    )
    try:
        assert scoped.get_file_system_properties().encryption_scope.default_encryption_scope == LAKE_SCOPE
        file = scoped.create_file("a/b.txt")
        file.upload_data(b"scoped", overwrite=True)
        assert file.get_file_properties().encryption_scope == LAKE_SCOPE
        assert scoped.get_directory_client("a").get_directory_properties().encryption_scope == LAKE_SCOPE
        assert [p.encryption_scope for p in scoped.get_paths() if p.name == "a/b.txt"] == [LAKE_SCOPE]
    finally:
        scoped.delete_file_system()


def test_keys_and_scopes_outlive_a_restart(vault: ServerProcess, cert: SelfSignedCert) -> None:
    """Kept in the stored records (last in the module: it restarts the module's server)."""
    names = ["kept" + uuid.uuid4().hex[:10], "plain" + uuid.uuid4().hex[:10]]
    with BlobServiceClient(url(vault), DEV_KEY, connection_verify=str(cert.cert), retry_total=0) as client:
        scoped = client.create_container(names[0], container_encryption_scope=SCOPE_DENIED)
        scoped.get_blob_client("scoped").upload_blob(b"s")
        refused(lambda: scoped.get_blob_client("keyed").upload_blob(b"k", cpk=KEY), SCOPE_REFUSAL)
        client.create_container(names[1]).get_blob_client("keyed").upload_blob(b"k", cpk=KEY)
    vault.restart()
    with BlobServiceClient(url(vault), DEV_KEY, connection_verify=str(cert.cert), retry_total=0) as client:
        scoped, plain = (client.get_container_client(name) for name in names)
        scope = scoped.get_container_properties().encryption_scope
        assert (scope.default_encryption_scope, scope.prevent_encryption_scope_override) == (SCOPE, True)
        assert scoped.get_blob_client("scoped").get_blob_properties().encryption_scope == SCOPE
        refused(
            lambda: plain.get_blob_client("keyed").get_blob_properties(),
            "BlobUsesCustomerSpecifiedEncryption",
        )
        assert plain.get_blob_client("keyed").download_blob(cpk=KEY).readall() == b"k"
        scoped.delete_container()
        plain.delete_container()


# -------------------------------------------------------------- concurrent writes, copies, snapshots

WRITES = 24  # concurrent uploads, enough for the store to commit several in one group


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


def test_append_block_from_url_key_mismatches_as_recorded_for_rust(
    vault: ServerProcess, cert: SelfSignedCert, container: ContainerClient
) -> None:
    """Append Block From URL's errors have a line break after the XML declaration, as Azure
    answered the Rust SDK (``Azure/azure-sdk-assets``, ``rust/sdk/storage/azure_storage_blob/
    tests/data/append_blob_client_encryption/``, x-ms-version 2026-04-06):
    ``test_append_block_from_url_destination_cpk_mismatch_fails`` (a key other than the
    destination's: 409 BlobCustomerSpecifiedEncryptionMismatch, 304 bytes) and
    ``..._source_cpk_mismatch_fails`` (a source key other than the source's: 409
    CannotVerifyCopySource with the generic message and the source's 409 and code, 525 bytes)."""
    container.get_blob_client("source").upload_blob(b"source encrypted with cpk", cpk=KEY)
    container.get_blob_client("plain").upload_blob(b"plain source content")
    container.get_blob_client("keyed").create_append_blob(cpk=KEY)
    container.get_blob_client("unkeyed").create_append_blob()
    base = f"https://127.0.0.1:{vault.blob_port}/{DEV_ACCOUNT}/{container.container_name}"

    def readable(name: str) -> str:
        sas = generate_blob_sas(
            DEV_ACCOUNT, container.container_name, name, account_key=DEV_KEY,
            permission=BlobSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1),
        )  # fmt: skip
        return f"{base}/{name}?{sas}"

    def append(target: str, headers: dict[str, str]) -> tuple[int, str | None, bytes]:
        path = f"/{DEV_ACCOUNT}/{container.container_name}/{target}?comp=appendblock"
        signed = sign("PUT", f"https://127.0.0.1:{vault.blob_port}{path}", {"Content-Length": "0",
                      "x-ms-version": "2026-04-06", **headers})  # fmt: skip
        reply = https_request(vault.blob_port, cert, "PUT", path, signed)
        assert int(reply.headers["Content-Length"]) == len(reply.body)
        return reply.status, reply.headers.get("x-ms-error-code"), reply.body

    other = {"x-ms-encryption-algorithm": "AES256", "x-ms-encryption-key": OTHER_KEY.key_value,
             "x-ms-encryption-key-sha256": OTHER_KEY.key_hash}  # fmt: skip
    status, code, body = append("keyed", {"x-ms-copy-source": readable("plain"), **other})
    assert (status, code, len(body)) == (409, "BlobCustomerSpecifiedEncryptionMismatch", 304)
    assert body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error>')
    source_key = {name.replace("x-ms-", "x-ms-source-"): value for name, value in other.items()}
    status, code, body = append("unkeyed", {"x-ms-copy-source": readable("source"), **source_key})
    assert (status, code, len(body)) == (409, "CannotVerifyCopySource", 525)
    assert b"<Message>Could not verify the copy source within the specified time.\n" in body
    assert b"<CopySourceErrorCode>BlobCustomerSpecifiedEncryptionMismatch</CopySourceErrorCode>" in body


def test_partial_key_headers_name_what_is_missing_in_azures_order(
    vault: ServerProcess, cert: SelfSignedCert, container: ContainerClient
) -> None:
    """A write with a key alone names ``x-ms-encryption-algorithm`` as missing, one with a key and
    the algorithm names ``x-ms-encryption-key-sha256``, as Azure answered the Rust SDK
    (``Azure/azure-sdk-assets``, ``rust/sdk/storage/azure_storage_blob/tests/data/
    append_blob_client_encryption/test_append_blob_partial_cpk_options_fail.json``, x-ms-version
    2026-04-06: Put Blob of an append blob, 306 bytes; Append Block, 307 bytes)."""
    container.get_blob_client("partial").create_append_blob()

    def put(query: str, headers: dict[str, str], body: bytes) -> tuple[int, str | None, str, int]:
        path = f"/{DEV_ACCOUNT}/{container.container_name}/partial{query}"
        base = {"Content-Length": str(len(body)), "x-ms-version": "2026-04-06", **headers}
        signed = sign("PUT", f"https://127.0.0.1:{vault.blob_port}{path}", base, body)
        if body:
            del signed["Content-Length"]  # https_request sends the body's own
        reply = https_request(vault.blob_port, cert, "PUT", path, signed, body or None)
        named = ElementTree.fromstring(reply.body).findtext("HeaderName") or ""
        return reply.status, reply.headers.get("x-ms-error-code"), named, len(reply.body)

    key_only = {"x-ms-encryption-key": KEY.key_value}
    assert put("", {"x-ms-blob-type": "AppendBlob", **key_only}, b"") == (
        400, "MissingRequiredHeader", "x-ms-encryption-algorithm", 306,
    )  # fmt: skip
    with_algorithm = {**key_only, "x-ms-encryption-algorithm": "AES256"}
    assert put("?comp=appendblock", with_algorithm, b"key-plus-algorithm") == (
        400, "MissingRequiredHeader", "x-ms-encryption-key-sha256", 307,
    )  # fmt: skip


def test_a_scope_the_account_lacks_is_not_available(
    vault: ServerProcess, cert: SelfSignedCert, container: ContainerClient
) -> None:
    """Snapshot Blob of a blob written with a key, naming a scope the account lacks, is 409
    EncryptionScopeNotAvailable "The given encryption scope is not available." (240 bytes), as
    Azure answered the Rust SDK (``Azure/azure-sdk-assets``, ``rust/sdk/storage/
    azure_storage_blob/tests/data/blob_client_cpk/test_create_blob_snapshot_encryption_options
    .json``, x-ms-version 2026-04-06); the SDK's other writes get the same."""
    container.get_blob_client("keyed").upload_blob(b"snapshot with cpk", cpk=KEY)
    path = f"/{DEV_ACCOUNT}/{container.container_name}/keyed?comp=snapshot"
    headers = {"Content-Length": "0", "x-ms-version": "2026-04-06",
               "x-ms-encryption-scope": "invalid-encryption-scope-for-tests"}  # fmt: skip
    signed = sign("PUT", f"https://127.0.0.1:{vault.blob_port}{path}", headers)
    reply = https_request(vault.blob_port, cert, "PUT", path, signed)
    assert (reply.status, reply.headers.get("x-ms-error-code"), len(reply.body)) == (
        409, "EncryptionScopeNotAvailable", 240,
    )  # fmt: skip
    assert b"<Message>The given encryption scope is not available.\n" in reply.body
    error = refused(
        lambda: container.get_blob_client("other").upload_blob(b"x", encryption_scope="nosuch"),
        "EncryptionScopeNotAvailable",
    )
    assert error.status_code == 409
